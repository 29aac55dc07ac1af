"""Split from ``tests/sansio/test_launch.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from codexrt._runtime._launch import LaunchConfig, prepare_launch_env, read_login_shell_env
from tests.sansio.test_launch import _capture_spawn, codex_home


def fake_login_shell(tmp_path: Path, profile: str) -> Path:
    sh = tmp_path / "fake-login-sh"
    sh.write_text(f'#!/bin/sh\n[ "$1" = -l ] || exit 9\nshift\necho "motd noise"\necho "secret-ish stderr" >&2\n{profile}\nexec /bin/sh "$@"\n')
    sh.chmod(0o755)
    return sh


async def test_r_lc_4_read_login_shell_env_only_requested_names(tmp_path: Path) -> None:
    sh = fake_login_shell(tmp_path, "export A_KEY='va=lue with spaces'\nexport EMPTY_KEY=\nexport OTHER=nope")
    got = await read_login_shell_env(["A_KEY", "EMPTY_KEY", "UNSET_KEY", "bad name;"], env={"SHELL": str(sh)})
    assert got == {"A_KEY": "va=lue with spaces", "EMPTY_KEY": ""}


async def test_r_lc_4_read_login_shell_env_timeout_reaps(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    sh = fake_login_shell(tmp_path, f"echo $$ > {pidfile}\nsleep 30")
    got = await read_login_shell_env(["A_KEY"], env={"SHELL": str(sh)}, timeout=0.5)
    assert got == {}
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


async def test_r_lc_3_prepare_launch_env_cli_login_end_to_end(tmp_path: Path) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n')
    sh = fake_login_shell(tmp_path, "export X_KEY=from-profile\nexport LEAK=1")
    cfg = LaunchConfig("cli_login", codex_home=str(home))
    env = await prepare_launch_env(cfg, {"SHELL": str(sh)}, platform="linux")
    assert env == {"SHELL": str(sh), "CODEX_HOME": str(home), "X_KEY": "from-profile"}


def test_r_lc_4_cli_login_child_gets_login_shell_env_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """R-LC-4 through the runtime: before the child is created, the env_key named in the actual
    CODEX_HOME/config.toml is fetched from the (fake) login shell; an inherited one and an
    explicitly empty one are kept, an invalid name is never asked for."""
    from codexrt import RuntimeConfig
    from codexrt._io._discovery import Candidate, CandidateKind

    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "SHELL_ONLY_KEY"\n')
    log = tmp_path / "asked"
    shell = tmp_path / "fake-shell"
    shell.write_text(f'#!/bin/sh\necho "$3" > {log}\nexport SHELL_ONLY_KEY=from-login-shell-123\neval "$3"\n')
    shell.chmod(0o755)
    exe = Candidate(path=Path("/opt/codex"), real_path=Path("/opt/codex"), source="CODEX_BIN", confirmed=True,
                    kind=CandidateKind.NATIVE, platform="linux")
    calls = _capture_spawn(monkeypatch, exe)
    base = {"PATH": "/usr/bin:/bin", "SHELL": str(shell), "CODEX_HOME": str(home)}
    [(label, factory)] = RuntimeConfig(env=base).candidate_factories()
    with pytest.raises(OSError):
        trio.run(factory)
    assert calls[0]["env"]["SHELL_ONLY_KEY"] == "from-login-shell-123"
    assert "SHELL_ONLY_KEY" in log.read_text()
    [(label, factory)] = RuntimeConfig(env={**base, "SHELL_ONLY_KEY": ""}).candidate_factories()
    with pytest.raises(OSError):
        trio.run(factory)
    assert calls[1]["env"]["SHELL_ONLY_KEY"] == ""  # explicitly empty: kept, not fetched


def test_r_cli_1_runtime_discovery_uses_the_login_shell_path_last(tmp_path: Path) -> None:
    """Nothing on the inherited PATH: the runtime asks the login shell for its PATH once and
    starts the CLI found there (R-CLI-1's last step feeding the runtime's discovery)."""
    import shlex
    import sys

    import codexrt

    root = Path(__file__).resolve().parents[2]
    bindir = tmp_path / "shell-only-bin"
    bindir.mkdir()
    cli = bindir / "codex"
    cli.write_text(f"#!/bin/sh\ncd {shlex.quote(str(root))}\n"
                   f"exec {shlex.join([sys.executable, '-m', 'peer_fixtures.fake_app_server', 'handshake-ok'])}\n")
    cli.chmod(0o755)
    shell = tmp_path / "login-shell"
    shell.write_text(f'#!/bin/sh\nPATH={shlex.quote(str(bindir))}:/usr/bin:/bin\nexport PATH\neval "$3"\n')
    shell.chmod(0o755)
    env = {"PATH": "", "HOME": str(tmp_path / "home"), "SHELL": str(shell)}

    async def main() -> tuple[object, str | None]:
        async with codexrt.open_runtime(env=env) as rt:
            result = await rt.send("hi").wait()
            return result, rt.cli_path

    result, cli_path = trio.run(main)
    assert getattr(result, "status") == "completed", result
    assert cli_path == str(cli)
