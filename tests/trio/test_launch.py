"""Split from ``tests/sansio/test_launch.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from codexrt._runtime import _launch
from codexrt._sansio._errors import ConfigError
from codexrt._runtime._launch import (
    LaunchConfig,
    app_server_args,
    build_launch_env,
    missing_env_keys,
    prepare_launch_env,
)
from tests.sansio.test_launch import SECRET, _capture_spawn


def test_r_lc_3_inactive_spawns_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("inactive access spawned a process")

    monkeypatch.setattr(subprocess, "Popen", forbidden)
    monkeypatch.setattr(trio.lowlevel, "open_process", forbidden)
    monkeypatch.setattr(_launch, "_run_bounded", forbidden)
    cfg = LaunchConfig("inactive")

    def lookup(names: object) -> dict[str, str]:
        raise AssertionError("lookup called")

    for call in (
        lambda: build_launch_env(cfg, {}, login_shell_lookup=lookup),
        lambda: app_server_args(cfg),
        lambda: trio.run(prepare_launch_env, cfg, {}),
    ):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.code == "ACCESS_INACTIVE"
    assert missing_env_keys(cfg, {}) == []


def test_r_cli_8_runtime_spawns_cmd_shims_through_spawn_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """R-CLI-8: a Windows ``.cmd`` shim reaches the process API as spawn_command's one quoted
    command line (cmd.exe cannot parse a list), managed overrides included (checked by argv
    construction, on any OS)."""
    from codexrt import RuntimeConfig
    from codexrt._io._discovery import Candidate, CandidateKind, spawn_command

    shim = Candidate(path=Path("C:/npm/codex.cmd"), real_path=Path("C:/npm/codex.cmd"), source="PATH",
                     confirmed=True, kind=CandidateKind.CMD_SHIM, platform="win32")
    calls = _capture_spawn(monkeypatch, shim)
    cfg = RuntimeConfig(env={"PATH": "", "ComSpec": "C:\\cmd.exe"}, access_mode="managed", api_key=SECRET,
                        provider={"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "CORP_KEY"})
    [(label, factory)] = cfg.candidate_factories()
    with pytest.raises(OSError):
        trio.run(factory)
    command = calls[0]["command"]
    assert isinstance(command, str)
    assert command == spawn_command(shim, ["app-server", *_launch.provider_overrides(cfg.launch_config())])
    assert "model_providers.corp" in command and SECRET not in command


def test_r_lc_3_managed_key_only_in_the_env_var_named_by_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from codexrt import RuntimeConfig
    from codexrt._io._discovery import Candidate, CandidateKind

    exe = Candidate(path=Path("/opt/codex"), real_path=Path("/opt/codex"), source="CODEX_BIN", confirmed=True,
                    kind=CandidateKind.NATIVE, platform="linux")
    calls = _capture_spawn(monkeypatch, exe)
    cfg = RuntimeConfig(env={"PATH": "/usr/bin"}, access_mode="managed", api_key=SECRET, codex_home="/tmp/ch",
                        provider={"id": "corp", "name": "Corp", "baseUrl": "http://127.0.0.1:9/v1",
                                  "envKey": "CORP_KEY", "wireApi": "responses",
                                  "headers": {"X-Org": "org-secret-header"}, "queryParams": {"api-version": "7"}})
    [(label, factory)] = cfg.candidate_factories()
    with pytest.raises(OSError):
        trio.run(factory)
    argv, env = calls[0]["command"], calls[0]["env"]
    assert isinstance(argv, list) and argv[:2] == ["/opt/codex", "app-server"]
    assert argv[2:4] == ["-c", 'model_provider="corp"']
    assert 'base_url="http://127.0.0.1:9/v1"' in argv[5] and 'env_key="CORP_KEY"' in argv[5]
    assert 'query_params={ "api-version" = "7" }' in argv[5] and 'name="Corp"' in argv[5]
    assert 'env_http_headers={ "X-Org" = "CODEXRT_HTTP_HEADER_0" }' in argv[5]
    joined = " ".join(argv)
    assert SECRET not in joined and "org-secret-header" not in joined
    assert env["CORP_KEY"] == SECRET and env["CODEXRT_HTTP_HEADER_0"] == "org-secret-header"
    assert [k for k, v in env.items() if v == SECRET] == ["CORP_KEY"]
    assert env["CODEX_HOME"] == "/tmp/ch"
    assert SECRET in cfg.secret_values() and "org-secret-header" in cfg.secret_values()
