"""Types a checker can use (issue 22): the typed example passes ``mypy --strict``, and three
planted mistakes — an unknown keyword, a bad approval policy, a non-str message — each fail it.

mypy runs on the example only (``--follow-imports=silent``: codexrt's own modules give types,
their internals are not what is checked here), in a subprocess, with a cache in a temp dir.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import ROOT

EXAMPLE = ROOT / "examples" / "typed_script.py"

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(cache), str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_typed_example_passes_mypy_strict(mypy_cache: Path) -> None:
    proc = _mypy(EXAMPLE, mypy_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("original", "planted", "error"), [
    ('rt.send(text)', 'rt.send(text, thread="t")', 'Unexpected keyword argument "thread"'),
    ('approval_policy="on-request"', 'approval_policy="sometimes"', 'approval_policy'),
    ('rt.send(text)', 'rt.send(42)', 'Argument 1 to "send"'),
    ('connect(cwd=".", approvals', 'connect(cwdir=".", approvals', 'Unexpected keyword argument "cwdir"'),
    ('timeout=600, thread_id=None', 'timeout=600, thread=None', 'Unexpected keyword argument "thread"'),
], ids=["unknown-keyword", "bad-approval-policy", "non-str-message", "unknown-config-field",
        "unknown-send-keyword"])
def test_planted_mistakes_fail_mypy_strict(tmp_path: Path, mypy_cache: Path, original: str, planted: str,
                                           error: str) -> None:
    src = EXAMPLE.read_text(encoding="utf-8")
    assert original in src
    bad = tmp_path / "typed_script.py"
    bad.write_text(src.replace(original, planted, 1), encoding="utf-8")
    proc = _mypy(bad, mypy_cache)
    assert proc.returncode != 0, f"mypy accepted {planted!r}"
    assert error in proc.stdout, proc.stdout
