"""Tests of the launch configuration: access modes, launch env, env_key discovery, fingerprint
(R-LC-1, R-LC-3, R-LC-4). Config files live in ``tmp_path``; the login shell is a fake
``#!/bin/sh`` script or an injected callable."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from codexrt._runtime import _launch
from codexrt._sansio._errors import ConfigError
from codexrt._runtime._launch import (
    AccessMode,
    LaunchConfig,
    app_server_args,
    build_launch_env,
    discover_env_keys,
    launch_fingerprint,
    missing_env_keys,
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


# ------------------------------------------------------ fingerprint: every input counts (R-LC-1)

_BASE_FP = dict(
    access="managed", provider="corp", endpoint="http://127.0.0.1:9/v1", credential=SECRET,
    headers={"X-Org": "org-secret-header"}, codex_home="/h", cli_path="/bin/codex", cli_source="/real/codex",
    cli_version="npm:0.171.0", connect="ws://127.0.0.1:1", token_source="file:/t", token="tok-secret-1",
    env_credentials={"OPENAI_API_KEY": "sk-env-1"}, provider_name="Corp", query_params={"api-version": "1"},
    env_key="CORP_KEY", wire_api="responses", extra_args=("--x",),
)


@pytest.mark.parametrize("field, value", [
    ("access", "cli_login"), ("credential", "sk-other"), ("endpoint", "http://127.0.0.1:10/v1"),
    ("provider", "corp2"), ("provider_name", "Corp 2"), ("headers", {"X-Org": "other"}),
    ("headers", {"X-Org": "org-secret-header", "X-Two": "2"}), ("query_params", {"api-version": "2"}),
    ("env_key", "OTHER_KEY"), ("wire_api", "chat"), ("codex_home", "/h2"), ("cli_path", "/bin/codex2"),
    ("cli_source", "/real/codex2"), ("cli_version", "npm:0.172.0"), ("connect", "ws://127.0.0.1:2"),
    ("token_source", "env:TOK"), ("token", "tok-secret-2"), ("env_credentials", {"OPENAI_API_KEY": "sk-env-2"}),
    ("extra_args", ("--y",)),
])
def test_r_lc_1_each_input_changes_the_fingerprint(field: str, value: object) -> None:
    base = LaunchConfig(**_BASE_FP)  # type: ignore[arg-type]
    changed = attrs.evolve(base, **{field: value})
    assert launch_fingerprint(changed) != launch_fingerprint(base)
    assert launch_fingerprint(attrs.evolve(base)) == launch_fingerprint(base)


def test_r_lc_1_runtime_fingerprint_covers_provider_connect_cli_and_not_rpc_settings(tmp_path: Path) -> None:
    from codexrt import RuntimeConfig, Settings

    cli = tmp_path / "codex"
    cli.write_bytes(b"\x7fELF" + b"\0" * 60)
    cli.chmod(0o755)
    tok = tmp_path / "token"
    tok.write_text("token-value-1\n")
    env = {"PATH": "", "HOME": str(tmp_path)}
    base = RuntimeConfig(codex_bin=str(cli), env=env, access_mode="managed", api_key=SECRET,
                         provider={"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "CORP_KEY",
                                   "headers": {"X-Org": "a"}})

    def fp(cfg: RuntimeConfig) -> str:
        return launch_fingerprint(cfg.launch_config())

    ref = fp(base)
    # RPC settings, cwd, timeouts are not launch inputs.
    assert fp(attrs.evolve(base, settings=Settings(model="m", effort="high", sandbox="read-only"), cwd="/x",
                           rpc_timeout=1.0, idle_timeout=5.0)) == ref
    provider = dict(base.provider or {})
    for changed in (
        attrs.evolve(base, api_key="sk-other-key-000"),
        attrs.evolve(base, provider={**provider, "baseUrl": "http://127.0.0.1:10/v1"}),
        attrs.evolve(base, provider={**provider, "headers": {"X-Org": "b"}}),
        attrs.evolve(base, provider={**provider, "queryParams": {"v": "1"}}),
        attrs.evolve(base, provider={**provider, "envKey": "OTHER"}),
        attrs.evolve(base, codex_home=str(tmp_path / "h")),
        attrs.evolve(base, access_mode="cli_login"),
        attrs.evolve(base, env={**env, "OPENAI_API_KEY": "sk-inherited-1"}),
        attrs.evolve(base, connect="ws://127.0.0.1:4500", token_file=str(tok)),
    ):
        assert fp(changed) != ref, changed
    attached = attrs.evolve(base, connect="ws://127.0.0.1:4500", token_file=str(tok))
    before = fp(attached)
    tok.write_text("token-value-2\n")  # a new token in the same file is a new launch
    assert fp(attached) != before
    assert fp(attrs.evolve(attached, token_file=None, token_env="TOK")) != fp(attached)
    # The CLI's version stamp: an in-place update of the same path changes it.
    cli.write_bytes(b"\x7fELF" + b"\0" * 90)
    assert fp(base) != ref
    assert SECRET not in repr(base) and SECRET not in repr(base.launch_config())


def test_r_lc_1_npm_version_enters_the_stamp(tmp_path: Path) -> None:
    pkg = tmp_path / "node_modules" / "@openai" / "codex"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text('{"name": "@openai/codex", "version": "0.171.0"}')
    (pkg / "bin" / "codex.js").write_text("#!/usr/bin/env node\n")
    assert _launch.cli_version_stamp(pkg / "bin" / "codex.js") == "npm:0.171.0"
    assert _launch.cli_version_stamp(tmp_path / "missing") is None


def test_r_lc_4_provider_string_fields_only(tmp_path: Path) -> None:
    toml = ('model_provider = "x"\n[model_providers.x]\nenv_key = ["LIST_KEY"]\n'
            '[model_providers.x.http_headers]\nenv_key = "NESTED_TABLE_NOT_A_FIELD"\n')
    assert discover_env_keys(codex_home(tmp_path, toml)) == []


# ------------------------------------------- the runtime's child: argv and environment (R-LC-3)


def _capture_spawn(monkeypatch: pytest.MonkeyPatch, candidate: object) -> list[dict[str, object]]:
    from codexrt._io import _discovery
    from codexrt._runtime import _config

    calls: list[dict[str, object]] = []

    async def fake_spawn(command: object, *, env: dict[str, str], cwd: object = None) -> object:
        calls.append({"command": command, "env": env})
        raise OSError(2, "not really spawned")

    monkeypatch.setattr(_discovery, "discover_cli",
                        lambda **kw: _discovery.DiscoveryResult(candidates=[candidate], rejected=[]))
    monkeypatch.setattr(_config, "spawn_process_transport", fake_spawn)
    return calls


@pytest.mark.parametrize("provider", [
    {"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "K", "headers": {"X-A": 5}},
    {"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "K", "headers": {"X-A": "a\nb-secret-value"}},
    {"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "K", "headers": {"bad name": "v"}},
    {"id": "corp", "baseUrl": 42, "envKey": "K"},
    {"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "1BAD"},
    {"id": "co rp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "K"},
    {"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "K", "extra": 1},
    {"baseUrl": "http://127.0.0.1:9/v1", "envKey": "K"},
])
def test_r_lc_3_invalid_managed_provider_is_a_config_error(provider: dict) -> None:
    from codexrt import RuntimeConfig

    with pytest.raises(ConfigError) as info:
        RuntimeConfig(env={}, access_mode="managed", provider=provider, api_key=SECRET).launch_config()
    assert "b-secret-value" not in info.value.message and SECRET not in info.value.message
