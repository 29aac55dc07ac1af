"""Split from ``tests/trio/test_edits_cli.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


from codexrt_cli._edits_cli import EXIT_CONFLICT
from tests._support import ROOT
from tests.trio.test_edits_live import TID, V1, V2, history_rules, scenario
from tests.trio.test_edits_cli import history, tree


def _fake_codex(tmp_path: Path, tree: Path) -> dict[str, str]:
    sc = tmp_path / "scenario.json"
    sc.write_text(json.dumps(scenario(tree, *history_rules(tree, history(tree)))))
    wrapper = tmp_path / "bin" / "codex"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m peer_fixtures.fake_app_server '{sc}' \"$@\"\n")
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "CODEXRT_"))}
    env.update(CODEX_BIN=str(wrapper), PYTHONPATH=str(ROOT), CODEXRT_STATE_DIR=str(tmp_path / "state"))
    return env


def _run(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codexrt_cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_subprocess_edits_json_then_undo_from_another_directory(tmp_path, tree):
    """As a user types it. The shell's cwd is elsewhere: PATH is relative to the thread's cwd."""
    env = _fake_codex(tmp_path, tree)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = _run(env, "edits", TID, "--json", cwd=elsewhere)
    assert p.returncode == 0, p.stderr
    assert [e["path"] for e in json.loads(p.stdout)["entries"]] == ["a.txt", "new.txt", "pkg/new.py", "declined.txt"]
    p = _run(env, "undo", TID, "a.txt", "--dry-run", cwd=elsewhere)
    assert p.returncode == 0 and "+line 3" in p.stdout and (tree / "a.txt").read_text() == V2
    p = _run(env, "undo", TID, "a.txt", cwd=elsewhere)
    assert p.returncode == 0, p.stderr
    assert (tree / "a.txt").read_text() == V1 and not (elsewhere / "a.txt").exists()
    (tree / "new.txt").write_text("changed by me\n")
    p = _run(env, "undo", TID, "new.txt", cwd=elsewhere)
    assert p.returncode == EXIT_CONFLICT and "changed by me" in p.stderr and (tree / "new.txt").exists()
