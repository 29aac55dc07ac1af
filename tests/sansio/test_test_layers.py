"""The test folders keep their layer rule (docs/architecture.md, "Tests by layer"): modules in
``tests/sansio/`` import no event loop and nothing that starts a process, and define no async
test (the run-time half - no process started, no ``trio.run`` - is the guard in
``tests/conftest.py``, checked here too)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tests.conftest import _recording_process_starts

SANSIO = Path(__file__).resolve().parent
BANNED = {"trio", "pytest_trio", "asyncio", "anyio", "subprocess", "multiprocessing",
          "peer_fixtures.memory", "peer_fixtures.fake_app_server", "peer_fixtures.real_server"}


def _problems(path: Path) -> list[str]:
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # top-level imports and those inside functions
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if any(name == b or name.startswith(b + ".") for b in BANNED):
                out.append(f"{path.name}:{node.lineno}: imports {name}")
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and node.name.startswith("test"):
            out.append(f"{path.name}:{node.lineno}: async test {node.name}")
    return out


def test_sansio_test_modules_import_no_event_loop_and_no_process_api():
    modules = sorted(SANSIO.glob("*.py"))
    assert len(modules) > 20
    problems = [p for m in modules for p in _problems(m)]
    assert not problems, "\n".join(problems)


def test_the_import_check_sees_what_it_bans(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("import trio\n\ndef helper():\n    from subprocess import run\n\n"
                   "async def test_x():\n    pass\n")
    assert _problems(bad) == ["test_bad.py:1: imports trio", "test_bad.py:4: imports subprocess",
                              "test_bad.py:4: imports subprocess.run", "test_bad.py:6: async test test_x"]


def test_the_conftest_guard_refuses_and_records_a_process_start():
    """What the guard puts around every tests/sansio test: a start raises and is recorded (so
    the test fails even if it swallowed the error), and everything is restored afterwards."""
    spawn = os.posix_spawn
    started: list[str] = []
    with _recording_process_starts(started):
        with pytest.raises(AssertionError, match="called posix_spawn"):
            os.posix_spawn("/bin/true", ["true"], {})
    assert started == ["posix_spawn"]
    assert os.posix_spawn is spawn  # restored (to the guard conftest put around this very test)


def test_the_trio_layer_guard_sends_process_starts_to_e2e():
    started: list[str] = []
    with _recording_process_starts(started, "trio", trio_run=False):
        with pytest.raises(AssertionError, match="a tests/trio test called posix_spawn: it belongs in tests/e2e"):
            os.posix_spawn("/bin/true", ["true"], {})
    assert started == ["posix_spawn"]
