"""Split from ``tests/sansio/test_discovery.py`` by layer (issue #20):
the test that forbids every way to start a process, Trio's
included, while discovery runs (it patches trio, so it does not belong in tests/sansio)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import trio

from codexrt._io._discovery import discover_cli
from tests.sansio.test_discovery import legacy_tree, native, npm_package, script, symlink


def test_r_cli_2_discovery_spawns_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build every kind of tree, forbid every way to start a process, and discover."""

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("discovery spawned a process")

    for mod, name in [
        (subprocess, "Popen"),
        (subprocess, "run"),
        (os, "fork"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
        (os, "system"),
        (os, "execv"),
        (os, "execve"),
        (trio, "run_process"),
        (trio.lowlevel, "open_process"),
    ]:
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, forbidden)
    home = tmp_path / "home"
    npm_package(tmp_path / "g" / "lib" / "node_modules", layout=None)
    symlink(tmp_path / "g" / "bin" / "codex", Path("../lib/node_modules/@openai/codex/bin/codex.js"))
    script(tmp_path / "w" / "codex", "#!/bin/sh\nexit 0\n")
    native(home / ".local" / "bin" / "codex")
    native(tmp_path / "x" / "codex", mode=0o644)
    env = {"PATH": ":".join(str(tmp_path / d / "bin") if d == "g" else str(tmp_path / d) for d in ["g", "w", "x"])}
    result = discover_cli(env=env, home=home, platform="linux", machine="x86_64", common_dirs=[])
    assert len(result.candidates) == 3 and len(result.rejected) == 1
    # And the legacy/login-shell path with no external CLI at all:
    legacy_tree(tmp_path / "home2", with_cli=True)
    result2 = discover_cli(env={}, home=tmp_path / "home2", platform="linux", machine="x86_64", common_dirs=[])
    assert len(result2.candidates) == 1
