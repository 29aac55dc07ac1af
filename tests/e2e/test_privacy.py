"""Split from ``tests/sansio/test_privacy.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from codexrt._runtime._interactions import PrivacyStore
from tests._support import ROOT
from tests.sansio.test_privacy import FP


_WRITER = """
import sys, uuid
from codexrt._runtime._interactions import PrivacyStore
from codexrt._sansio._privacy import PrivacyRecord, QuestionFlag
store = PrivacyStore(sys.argv[1], "0123456789abcdef")
n = 0
while True:
    n += 1
    store.write(PrivacyRecord(str(uuid.uuid4()), "requestUserInput", "0123456789abcdef", "h", "th", "tu",
                              f"call_{n}", f"call_{n}", (QuestionFlag("pw", True),) * 200, n))
    print(n, flush=True)
"""


@pytest.mark.parametrize("after", [1, 7])
def test_r_priv_1_sigkill_during_writes_leaves_a_readable_index(tmp_path, after):
    """A writer killed at an arbitrary point (while writing record ``after + 1``) leaves whole
    records only: the index loads without problems."""
    d = tmp_path / "idx"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(d)], stdout=subprocess.PIPE, cwd=str(ROOT),
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        for _ in range(after):
            line = proc.stdout.readline()
            assert line, "writer died early"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    idx = PrivacyStore(str(d), FP).load()
    assert idx.problems == [] and not idx.conservative
    assert len(idx.records) >= after and all(len(r.questions) == 200 for r in idx.records)
