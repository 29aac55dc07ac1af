"""Tests of the launch configuration: access modes, launch env, env_key discovery, fingerprint
(R-LC-1, R-LC-3, R-LC-4). Config files live in ``tmp_path``; the login shell is a fake
``#!/bin/sh`` script or an injected callable."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import attrs
import pytest
import trio

from codexrt import _launch
from codexrt._errors import ConfigError
from codexrt._launch import (
    AccessMode,
    LaunchConfig,
    app_server_args,
    build_launch_env,
    discover_env_keys,
    launch_fingerprint,
    missing_env_keys,
    prepare_launch_env,
    read_login_shell_env,
)

SECRET = "sk-test-0123456789abcdef"


def codex_home(tmp_path: Path, toml: str) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(toml)
    return home


def managed(**kw: object) -> LaunchConfig:
    base: dict[str, object] = dict(
        access="managed",
        provider="corp",
        endpoint="http://127.0.0.1:9/v1",
        credential=SECRET,
        headers={"X-Org": "org-secret-header"},
    )
    base.update(kw)
    return LaunchConfig(**base)  # type: ignore[arg-type]


# ------------------------------------------------------------------ env_key discovery


@pytest.mark.parametrize(
    "toml",
    [
        # plain table
        'model_provider = "corp"\n[model_providers.corp]\nname = "Corp"\nenv_key = "CORP_KEY"\n',
        # inline table
        'model_provider = "corp"\nmodel_providers = { corp = { name = "Corp", env_key = "CORP_KEY" } }\n',
        # dotted keys
        'model_provider = "corp"\nmodel_providers.corp.env_key = "CORP_KEY"\n',
        # quoted keys
        'model_provider = "corp"\n[model_providers."corp"]\n"env_key" = \'CORP_KEY\'\n',
    ],
)
def test_r_lc_4_env_key_plain_inline_dotted_quoted(tmp_path: Path, toml: str) -> None:
    assert discover_env_keys(codex_home(tmp_path, toml)) == ["CORP_KEY"]


def test_r_lc_4_quoted_provider_id_with_dot(tmp_path: Path) -> None:
    toml = 'model_provider = "my.corp"\n[model_providers."my.corp"]\nenv_key = "MY_CORP_KEY"\n'
    assert discover_env_keys(codex_home(tmp_path, toml)) == ["MY_CORP_KEY"]


def test_r_lc_4_only_the_effective_provider_and_profiles(tmp_path: Path) -> None:
    toml = (
        'model_provider = "a"\nprofile = "work"\n'
        '[profiles.work]\nmodel_provider = "b"\n'
        '[model_providers.a]\nenv_key = "A_KEY"\n'
        '[model_providers.b]\nenv_key = "B_KEY"\n'
    )
    home = codex_home(tmp_path, toml)
    assert discover_env_keys(home) == ["B_KEY"]
    assert discover_env_keys(home, provider="a") == ["A_KEY"]
    assert discover_env_keys(home, all_providers=True) == ["A_KEY", "B_KEY"]


def test_r_lc_4_instruction_text_and_non_string_fields_ignored(tmp_path: Path) -> None:
    toml = (
        'instructions = """\nenv_key = "FROM_INSTRUCTIONS"\n[model_providers.x]\nenv_key = "ALSO_TEXT"\n"""\n'
        'model_provider = "x"\n'
        "[model_providers.x]\n"
        'env_key_instructions = "export NOT_THIS_ONE=..."\n'
        'env_key = "REAL_KEY"\n'
        "[model_providers.y]\nenv_key = 42\n"
    )
    home = codex_home(tmp_path, toml)
    assert discover_env_keys(home) == ["REAL_KEY"]
    assert discover_env_keys(home, all_providers=True) == ["REAL_KEY"]


@pytest.mark.parametrize("bad", ["1ABC", "A-B", "A B", "$(touch /tmp/pwned)", "", "A=B", "KEY;rm"])
def test_r_lc_4_invalid_variable_names_dropped(tmp_path: Path, bad: str) -> None:
    toml = f'model_provider = "x"\n[model_providers.x]\nenv_key = "{bad}"\n'
    assert discover_env_keys(codex_home(tmp_path, toml)) == []


@pytest.mark.parametrize("content", [None, "this is [not toml", b"\xff\xfe bad bytes"])
def test_r_lc_4_failures_are_not_fatal(tmp_path: Path, content: object) -> None:
    home = tmp_path / "h"
    home.mkdir()
    if isinstance(content, str):
        (home / "config.toml").write_text(content)
    elif isinstance(content, bytes):
        (home / "config.toml").write_bytes(content)
    assert discover_env_keys(home) == []


def test_r_lc_4_config_is_read_only(tmp_path: Path) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "K"\n')
    st = (home / "config.toml").stat()
    discover_env_keys(home)
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]
    assert (home / "config.toml").stat().st_mtime_ns == st.st_mtime_ns


# ------------------------------------------------------------------------ access modes


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


def test_r_lc_3_cli_login_adds_only_missing_env_keys(tmp_path: Path) -> None:
    toml = 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n'
    home = codex_home(tmp_path, toml)
    cfg = LaunchConfig("cli_login", codex_home=str(home))
    asked: list[list[str]] = []

    def lookup(names: list[str]) -> dict[str, str]:
        asked.append(list(names))
        return {"X_KEY": "from-shell", "UNRELATED": "must-not-leak", "PATH": "/evil"}

    env = build_launch_env(cfg, {"PATH": "/usr/bin"}, login_shell_lookup=lookup, platform="linux")
    assert asked == [["X_KEY"]]
    assert env == {"PATH": "/usr/bin", "CODEX_HOME": str(home), "X_KEY": "from-shell"}


@pytest.mark.parametrize("inherited", ["inherited", ""])
def test_r_lc_3_cli_login_keeps_existing_and_explicitly_empty(tmp_path: Path, inherited: str) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n')
    cfg = LaunchConfig("cli_login", codex_home=str(home))

    def lookup(names: object) -> dict[str, str]:
        raise AssertionError("nothing is missing: no lookup")

    env = build_launch_env(cfg, {"X_KEY": inherited}, login_shell_lookup=lookup, platform="linux")
    assert env["X_KEY"] == inherited


def test_r_lc_3_cli_login_lookup_failure_not_fatal(tmp_path: Path) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n')
    cfg = LaunchConfig("cli_login", codex_home=str(home))

    def lookup(names: object) -> dict[str, str]:
        raise TimeoutError

    env = build_launch_env(cfg, {}, login_shell_lookup=lookup, platform="linux")
    assert "X_KEY" not in env


def test_r_lc_3_cli_login_uses_inherited_codex_home(tmp_path: Path) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n')
    cfg = LaunchConfig("cli_login")
    assert missing_env_keys(cfg, {"CODEX_HOME": str(home)}) == ["X_KEY"]


def test_r_lc_4_windows_case_aliases_only_no_shell(tmp_path: Path) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n')
    cfg = LaunchConfig("cli_login", codex_home=str(home))

    def lookup(names: object) -> dict[str, str]:
        raise AssertionError("no shell probe on Windows")

    env = build_launch_env(cfg, {"x_key": "aliased"}, login_shell_lookup=lookup, platform="win32")
    # Present under another case: not missing, nothing added, nothing asked.
    assert env == {"x_key": "aliased", "CODEX_HOME": str(home)}
    assert build_launch_env(cfg, {}, login_shell_lookup=lookup, platform="win32").get("X_KEY") is None


def test_r_lc_3_managed_env_and_args_keep_secrets_out_of_argv() -> None:
    cfg = managed(extra_args=["--enable", "x"])
    env = build_launch_env(cfg, {"PATH": "/bin", "CODEX_HOME": "/inherited"})
    assert env["CODEXRT_API_KEY"] == SECRET
    assert env["CODEXRT_HTTP_HEADER_0"] == "org-secret-header"
    args = app_server_args(cfg)
    joined = " ".join(args)
    assert SECRET not in joined and "org-secret-header" not in joined
    assert args[0] == "app-server" and args[-2:] == ["--enable", "x"]
    assert 'model_provider="corp"' in args
    assert 'env_http_headers={ "X-Org" = "CODEXRT_HTTP_HEADER_0" }' in joined
    assert 'base_url="http://127.0.0.1:9/v1"' in joined


def test_r_lc_3_managed_never_uses_env_key_discovery(tmp_path: Path) -> None:
    home = codex_home(tmp_path, 'model_provider = "x"\n[model_providers.x]\nenv_key = "X_KEY"\n')
    cfg = managed(codex_home=str(home))

    def lookup(names: object) -> dict[str, str]:
        raise AssertionError("managed never asks the login shell")

    env = build_launch_env(cfg, {}, login_shell_lookup=lookup)
    assert "X_KEY" not in env and env["CODEX_HOME"] == str(home)
    assert missing_env_keys(cfg, {}) == []


@pytest.mark.parametrize(
    "kw",
    [
        {"provider": None},
        {"provider": "bad id"},
        {"endpoint": None},
        {"env_key": "1BAD"},
        {"headers": {"Bad Header": "v"}},
    ],
)
def test_r_lc_3_managed_config_validated(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        managed(**kw)


# ------------------------------------------------------------------------- fingerprint


def test_r_lc_1_fingerprint_stable_and_sensitive() -> None:
    base = managed()
    fp = launch_fingerprint(base)
    assert fp == launch_fingerprint(managed()) and len(fp) == 64
    changes = [
        {"credential": "sk-other"},
        {"endpoint": "http://127.0.0.1:10/v1"},
        {"provider": "corp2"},
        {"headers": {"X-Org": "other"}},
        {"headers": {"X-Org": "org-secret-header", "X-More": "1"}},
        {"codex_home": "/elsewhere"},
        {"cli_path": "/usr/bin/codex"},
        {"cli_source": "PATH:/usr/local/bin/codex"},
        {"access": AccessMode.CLI_LOGIN},
    ]
    seen = {fp}
    for change in changes:
        other = launch_fingerprint(attrs.evolve(base, **change))
        assert other not in seen, change
        seen.add(other)


def test_r_lc_1_fingerprint_has_no_secret_and_header_order_irrelevant() -> None:
    a = managed(headers={"A": "1", "B": "2"})
    b = managed(headers={"B": "2", "A": "1"})
    assert launch_fingerprint(a) == launch_fingerprint(b)
    assert SECRET not in launch_fingerprint(a)


def test_secrets_never_in_repr() -> None:
    cfg = managed()
    text = repr(cfg) + str(cfg)
    assert SECRET not in text and "org-secret-header" not in text
    assert "corp" in text


# ------------------------------------------------------------------- real login shell


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
