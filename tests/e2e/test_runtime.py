"""Split from ``tests/trio/test_runtime.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import trio
import trio.testing

import codexrt
from tests._support import ROOT
from tests.trio.test_runtime import _drain


async def test_r_cli_5_discovered_candidates_fall_back_in_order(tmp_path):
    """Two CLIs on PATH: the first dies before READY (exit 3), the second is the stdio fake."""
    import os
    import sys

    bad, good = tmp_path / "bad", tmp_path / "good"
    for d in (bad, good):
        d.mkdir()
    (bad / "codex").write_text("#!/bin/sh\necho 'broken install' >&2\nexit 3\n")
    (good / "codex").write_text(
        f"#!/bin/sh\ncd {str(ROOT)!r}\nexec {sys.executable!r} -m peer_fixtures.fake_app_server handshake-ok\n")
    for d in (bad, good):
        os.chmod(d / "codex", 0o755)
    env = {"PATH": f"{bad}:{good}", "HOME": str(tmp_path)}
    async with codexrt.open_runtime(env=env) as rt:
        with rt.subscribe() as events:
            with trio.fail_after(30):
                result = await rt.send("x").wait()
            kinds = [e.kind for e in _drain(events)]
        assert result.status == "completed", result
        assert rt.cli_path == str(good / "codex")
    assert "runtimeFallback" in kinds
