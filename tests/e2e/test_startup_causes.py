"""Start-up failures name their cause (issue 33): an explicitly chosen CLI is the only one
tried (R-CLI-3, R-CLI-5), a missing working directory is named, a CLI that exits at start
carries its own (redacted) reason and a hint that fits it (R-CLI-6), and a fallback among
discovered candidates is always visible.

Fake CLIs are small shell scripts; the working one runs the stdio fake app-server.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import codexrt
from codexrt import CliOverrideInvalid, CliUnavailable, ConfigError, RuntimeConfig
from tests._support import ROOT

WAIT = 30.0


def _working_cli(bindir: Path, marker: Path) -> Path:
    """``bindir/codex``: touches ``marker`` when started, then runs the fake app-server."""
    bindir.mkdir(parents=True, exist_ok=True)
    cli = bindir / "codex"
    cmd = shlex.join([sys.executable, "-m", "peer_fixtures.fake_app_server", "handshake-ok"])
    cli.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\ncd {shlex.quote(str(ROOT))}\nexec {cmd}\n")
    cli.chmod(0o755)
    return cli


def _failing_cli(bindir: Path, stderr_text: str, code: int = 1) -> Path:
    """``bindir/codex``: prints ``stderr_text`` on stderr and exits ``code`` at once."""
    bindir.mkdir(parents=True, exist_ok=True)
    cli = bindir / "codex"
    cli.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(stderr_text)} >&2\nexit {code}\n")
    cli.chmod(0o755)
    return cli


def _env(*bindirs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_BIN", "CODEX_PATH", "CODEX_CLI_PATH")}
    env["PATH"] = os.pathsep.join([*map(str, bindirs), "/usr/bin", "/bin"])
    env["HOME"] = str(bindirs[0].parent / "home") if bindirs else env.get("HOME", "/nonexistent")
    return env


def _no_home_candidates(monkeypatch, tmp_path):
    # The common bin dirs (/usr/local/bin, …) of this machine must not add candidates.
    import codexrt._io._cli_find as cli_find

    monkeypatch.setattr(cli_find, "default_common_dirs", lambda **kw: [])
    monkeypatch.setattr(cli_find, "_python_package_dirs", lambda paths: [])


@pytest.mark.parametrize("unusable", ["/bin/true", "/bin/ls"])
async def test_r_cli_3_an_explicit_cli_is_the_only_one_tried(tmp_path, monkeypatch, unusable):
    """``codex_bin=`` naming something that is not the Codex CLI, while a working codex is on
    PATH: a CliOverrideInvalid naming it and why — the one on PATH is never started."""
    _no_home_candidates(monkeypatch, tmp_path)
    marker = tmp_path / "path-codex-started"
    _working_cli(tmp_path / "bin", marker)
    async with codexrt.open_runtime(RuntimeConfig(codex_bin=unusable, env=_env(tmp_path / "bin"))) as rt:
        with pytest.raises(CliOverrideInvalid) as info:
            await rt.ensure_started()
        result = await rt.send("hello").wait()
    err = info.value
    assert err.code == "CODEX_CLI_OVERRIDE_INVALID" and isinstance(err, CliUnavailable)
    assert err.message.startswith("codex app-server exited")  # R-CLI-6's canonical prefix
    assert f"the explicitly chosen CLI {unusable!r} cannot be used" in err.message
    assert err.details["codexCliUnavailable"]["mode"] == "overrideInvalid"
    assert err.details["codexCliUnavailable"]["path"] == unusable
    if unusable == "/bin/ls":  # ls says why it stopped: its own words are in the error
        assert "app-server" in err.details["codexCliUnavailable"]["candidates"][0]["reason"]
    assert result.status == "failed" and result.error is not None and result.error.code == "CODEX_CLI_OVERRIDE_INVALID"
    assert not marker.exists(), "the CLI on PATH was started although another one was chosen explicitly"


async def test_r_cli_5_fallback_among_discovered_candidates_is_a_logged_warning(tmp_path, monkeypatch, caplog):
    """Without an explicit choice a broken first PATH hit falls back to the next one — and says
    so in the library's log (WARNING), not only in a ``runtimeFallback`` event."""
    _no_home_candidates(monkeypatch, tmp_path)
    _failing_cli(tmp_path / "broken", "boom: broken install")
    marker = tmp_path / "second-started"
    _working_cli(tmp_path / "good", marker)
    caplog.set_level(logging.WARNING, logger="codexrt")
    async with codexrt.open_runtime(RuntimeConfig(env=_env(tmp_path / "broken", tmp_path / "good"))) as rt:
        result = await rt.send("hello").wait()
    assert result.status == "completed" and marker.exists()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "codexrt.runtime"]
    assert len(warnings) == 1, caplog.text
    text = warnings[0].getMessage()
    assert str(tmp_path / "broken" / "codex") in text and str(tmp_path / "good" / "codex") in text
    assert "boom: broken install" in text


async def test_a_missing_working_directory_is_named_and_nothing_starts(tmp_path, monkeypatch):
    _no_home_candidates(monkeypatch, tmp_path)
    marker = tmp_path / "started"
    cli = _working_cli(tmp_path / "bin", marker)
    missing = tmp_path / "no" / "such" / "dir"
    async with codexrt.open_runtime(RuntimeConfig(codex_bin=str(cli), cwd=str(missing), env=_env())) as rt:
        with pytest.raises(ConfigError) as info:
            await rt.ensure_started()
    assert str(missing) in info.value.message and info.value.details["field"] == "cwd"
    assert "Update the Codex CLI" not in info.value.message
    assert not marker.exists() and not missing.exists()


async def test_r_cli_6_a_cli_refusing_its_config_carries_its_own_redacted_reason(tmp_path, monkeypatch):
    """The CLI exits at start naming a setting (as codex does for a removed config value): the
    error carries that line — with a secret in it redacted — and a hint that fits it, not the
    update hint."""
    _no_home_candidates(monkeypatch, tmp_path)
    secret = "sk-proj-PLANTEDsecret0123456789abcdef"
    said = f'Error loading config.toml: approval_policy = "untrusted" is no longer supported; remove this setting ({secret})'
    _failing_cli(tmp_path / "bin", said)
    async with codexrt.open_runtime(RuntimeConfig(env=_env(tmp_path / "bin"), secrets=[secret])) as rt:
        with pytest.raises(CliUnavailable) as info:
            await rt.ensure_started()
    err = info.value
    assert 'approval_policy = "untrusted" is no longer supported' in err.message
    assert secret not in err.message and secret not in repr(err.to_dict())
    hint = err.details["codexCliUnavailable"]["hint"]
    assert "Update the Codex CLI" not in hint and "config.toml" in hint


async def test_r_cli_6_the_update_hint_when_the_version_is_the_cause(tmp_path, monkeypatch):
    _no_home_candidates(monkeypatch, tmp_path)
    _failing_cli(tmp_path / "bin", "error: unrecognized subcommand 'app-server'", code=2)
    async with codexrt.open_runtime(RuntimeConfig(env=_env(tmp_path / "bin"))) as rt:
        with pytest.raises(CliUnavailable) as info:
            await rt.ensure_started()
    assert "unrecognized subcommand" in info.value.message
    assert info.value.details["codexCliUnavailable"]["hint"].startswith("Update the Codex CLI")


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**env, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "codexrt_cli", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=WAIT, cwd=ROOT, env=env)


def test_run_with_an_unusable_codex_bin_names_it_and_runs_no_other_cli(tmp_path):
    marker = tmp_path / "path-codex-started"
    _working_cli(tmp_path / "bin", marker)
    proc = _cli(["run", "--codex-bin", "/bin/true", "hello"], _env(tmp_path / "bin"))
    assert proc.returncode == 1, proc.stderr
    assert "the explicitly chosen CLI '/bin/true' cannot be used" in proc.stderr
    assert proc.stdout == "" and not marker.exists()


def test_run_says_a_fallback_in_words(tmp_path):
    _failing_cli(tmp_path / "broken", "boom: broken install")
    _working_cli(tmp_path / "good", tmp_path / "started")
    proc = _cli(["run", "hello"], _env(tmp_path / "broken", tmp_path / "good"))
    assert proc.returncode == 0, proc.stderr
    assert "runtimeFallback: {" not in proc.stderr
    assert f"the Codex CLI {tmp_path / 'broken' / 'codex'} did not start" in proc.stderr
    assert f"trying {tmp_path / 'good' / 'codex'} instead" in proc.stderr


def _fake_cli_script(bindir: Path, scenario: str, log: Path | None = None) -> Path:
    bindir.mkdir(parents=True, exist_ok=True)
    cli = bindir / "codex"
    cmd = [sys.executable, "-m", "peer_fixtures.fake_app_server", scenario, *(["--log", str(log)] if log else [])]
    cli.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\nexec {shlex.join(cmd)}\n")
    cli.chmod(0o755)
    return cli


async def test_not_logged_in_fails_the_first_operation_at_once_with_how_to_log_in(tmp_path, monkeypatch):
    """A server with no login whose provider needs one: ``account/read`` is asked right after
    the handshake and the first operation fails with ``NOT_LOGGED_IN`` saying how to log in —
    no ``thread/start`` or ``turn/start`` is ever sent (nothing is waited out)."""
    from peer_fixtures.fake_app_server import read_log

    _no_home_candidates(monkeypatch, tmp_path)
    log = tmp_path / "peer.log"
    cli = _fake_cli_script(tmp_path / "bin", "not-logged-in", log)
    env = {k: v for k, v in _env().items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
    async with codexrt.open_runtime(RuntimeConfig(codex_bin=str(cli), env=env)) as rt:
        result = await rt.send("hello").wait()
        with pytest.raises(codexrt.NotLoggedIn) as info:
            await rt.ensure_started()
    assert result.status == "failed" and result.error is not None and result.error.code == "NOT_LOGGED_IN"
    msg = info.value.message
    assert info.value.code == "NOT_LOGGED_IN" and "codex login" in msg and "managed" in msg and "loopback" in msg
    methods = [m.get("method") for m in read_log(log)]
    assert "account/read" in methods and "thread/start" not in methods and "turn/start" not in methods


async def test_logged_in_or_an_api_key_variable_is_not_refused(tmp_path, monkeypatch):
    """The check refuses only what it knows: ``handshake-ok`` (no login needed) runs its turn,
    and with ``OPENAI_API_KEY`` in the child's environment nothing is asked at all."""
    from peer_fixtures.fake_app_server import read_log

    _no_home_candidates(monkeypatch, tmp_path)
    ok = _fake_cli_script(tmp_path / "ok", "handshake-ok")
    async with codexrt.open_runtime(RuntimeConfig(codex_bin=str(ok), env=_env())) as rt:
        assert (await rt.send("hello").wait()).status == "completed"
    log = tmp_path / "peer.log"
    nl = _fake_cli_script(tmp_path / "nl", "not-logged-in", log)
    env = {**_env(), "OPENAI_API_KEY": "sk-test-not-a-real-key-0123456789"}
    async with codexrt.open_runtime(RuntimeConfig(codex_bin=str(nl), env=env)) as rt:
        assert (await rt.send("hello").wait()).status == "completed"
    assert "account/read" not in [m.get("method") for m in read_log(log)]
