"""Tests of Codex CLI discovery (R-CLI-1…8).

Charter: every install tree here is fake and lives in ``tmp_path``; ``env``, ``home``,
``platform``, ``machine`` and ``common_dirs`` are injected so nothing on this machine leaks in.
Windows rules are simulated on Linux with ``platform="win32"``. The only processes spawned are
small ``#!/bin/sh`` scripts in the version-probe tests and the pinned real binary.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codexrt._io import _discovery as disc
from codexrt._io._discovery import (
    Attempt,
    CandidateKind,
    discover_cli,
    format_unavailable,
    launch_argv,
    spawn_command,
    unavailable_error,
)
from codexrt._sansio._errors import CHILD_EXITED_PREFIX, CliUnavailable
from tests._support import require_real_binary

ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 64
LINUX_PKG = "@openai/codex-linux-x64"
LINUX_TRIPLE = "x86_64-unknown-linux-musl"


def real_binary() -> Path:
    """The pinned real binary; skipped when absent, failed when CODEXRT_REQUIRE_REAL=1 (CI)."""
    return require_real_binary()


def native(p: Path, *, mode: int = 0o755, magic: bytes = ELF) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(magic)
    p.chmod(mode)
    return p


def script(p: Path, text: str, mode: int = 0o755) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    p.chmod(mode)
    return p


def symlink(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def npm_package(node_modules: Path, *, layout: str | None, win: bool = False) -> Path:
    """An ``@openai/codex`` package as npm installs it; returns ``bin/codex.js``.

    ``layout``: "hoisted" (platform package next to it, as the real 0.169.0 install),
    "nested" (inside the package's own node_modules), or None (platform binary missing).
    """
    pkg = node_modules / "@openai" / "codex"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text('{"name": "@openai/codex", "version": "0.169.0"}')
    js = script(pkg / "bin" / "codex.js", "#!/usr/bin/env node\n// launcher\n")
    plat, triple, exe = ("@openai/codex-win32-x64", "x86_64-pc-windows-msvc", "codex.exe") if win else (LINUX_PKG, LINUX_TRIPLE, "codex")
    if layout == "hoisted":
        native(node_modules / plat / "vendor" / triple / "bin" / exe)
    elif layout == "nested":
        native(pkg / "node_modules" / plat / "vendor" / triple / "bin" / exe)
    return js


def run(tmp_path: Path, env: dict[str, str] | None = None, **kw: object) -> disc.DiscoveryResult:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    kw.setdefault("platform", "linux")
    kw.setdefault("machine", "x86_64")
    kw.setdefault("common_dirs", [])
    kw.setdefault("python_paths", [])
    return discover_cli(env=env or {}, home=home, **kw)  # type: ignore[arg-type]


def paths(result: disc.DiscoveryResult) -> list[Path]:
    return [c.path for c in result.candidates]


# --------------------------------------------------------------------------------- order


def test_r_cli_1_order_override_path_home_common(tmp_path: Path) -> None:
    explicit = native(tmp_path / "explicit" / "codex")
    binvar = native(tmp_path / "binvar" / "codex")
    p1 = native(tmp_path / "p1" / "codex")
    p2 = native(tmp_path / "p2" / "codex")
    home = tmp_path / "home"
    local = native(home / ".local" / "bin" / "codex")
    install = native(tmp_path / "install" / "codex")
    standalone = native(home / ".codex" / "packages" / "standalone" / "current" / "bin" / "codex")
    common = native(tmp_path / "common" / "codex")
    env = {
        "CODEX_BIN": str(binvar),
        "PATH": f"{p1.parent}:{p2.parent}",
        "CODEX_INSTALL_DIR": str(install.parent),
    }
    result = run(tmp_path, env, explicit=str(explicit), common_dirs=[common.parent])
    assert paths(result) == [explicit, binvar, p1, p2, install, local, standalone, common]
    assert [c.source for c in result.candidates] == [
        "explicit",
        "env:CODEX_BIN",
        "PATH",
        "PATH",
        "home:CODEX_INSTALL_DIR",
        "home:~/.local/bin",
        "home:standalone",
        "common",
    ]
    assert all(c.confirmed and c.kind is CandidateKind.NATIVE for c in result.candidates)
    assert result.rejected == []
    assert result.startup_attempts == 8


def test_r_cli_1_env_override_precedence_codex_path_and_cli_path(tmp_path: Path) -> None:
    a = native(tmp_path / "a" / "codex")
    b = native(tmp_path / "b" / "codex")
    result = run(tmp_path, {"CODEX_CLI_PATH": str(b), "CODEX_PATH": str(a)})
    assert paths(result) == [a, b]
    assert [c.source for c in result.candidates] == ["env:CODEX_PATH", "env:CODEX_CLI_PATH"]


def test_r_cli_1_override_may_name_a_directory(tmp_path: Path) -> None:
    exe = native(tmp_path / "inst" / "bin" / "codex")
    result = run(tmp_path, {"CODEX_BIN": str(tmp_path / "inst")})
    assert paths(result) == [exe]


def test_r_cli_1_path_duplicates_and_symlinks_are_deduplicated(tmp_path: Path) -> None:
    real = native(tmp_path / "opt" / "codex-1.0" / "codex")
    link1 = symlink(tmp_path / "bin1" / "codex", real)
    link2 = symlink(tmp_path / "bin2" / "codex", link1)  # a chain: bin2 -> bin1 -> opt
    env = {"PATH": f"{link1.parent}:{link2.parent}:{link1.parent}:{real.parent}"}
    result = run(tmp_path, env)
    assert len(result.candidates) == 1
    c = result.candidates[0]
    assert c.path == link1 and c.real_path == real.resolve()
    assert [s.path for s in c.also_found] == [link2, real]


def test_r_cli_1_relative_and_empty_path_entries_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    native(tmp_path / "rel" / "codex")
    monkeypatch.chdir(tmp_path)
    result = run(tmp_path, {"PATH": "rel::"})
    assert result.candidates == [] and result.rejected == []


# ------------------------------------------------------------------------- npm launcher


@pytest.mark.parametrize("layout", ["hoisted", "nested"])
def test_r_cli_2_npm_launcher_confirmed_with_platform_binary(tmp_path: Path, layout: str) -> None:
    prefix = tmp_path / "npm-global"
    js = npm_package(prefix / "lib" / "node_modules", layout=layout)
    link = symlink(prefix / "bin" / "codex", Path("../lib/node_modules/@openai/codex/bin/codex.js"))
    result = run(tmp_path, {"PATH": str(link.parent)})
    [c] = result.candidates
    assert c.kind is CandidateKind.NPM_LAUNCHER and c.confirmed and c.note is None
    assert c.real_path == js.resolve()
    assert c.native_path is not None and c.native_path.name == "codex"
    assert f"vendor/{LINUX_TRIPLE}/bin" in str(c.native_path)


@pytest.mark.real
def test_r_cli_2_real_installed_npm_layout_is_confirmed() -> None:
    """The layout of the pinned real install (hoisted platform package) confirms its launcher."""
    from peer_fixtures.codex_bin import pinned_version

    root = Path(__file__).resolve().parents[2] / ".cache" / f"codex-{pinned_version()}" / "node_modules"
    launcher = root / ".bin" / "codex"
    if sys.platform != "linux":
        pytest.skip("the pinned npm install is checked on Linux")
    real_binary()  # the npm install is where the pinned binary comes from
    if not launcher.exists():
        pytest.skip("pinned binary given by CODEXRT_REAL_CODEX_BIN, not the npm install")
    result = discover_cli(env={"PATH": str(launcher.parent)}, home=Path("/nonexistent"), common_dirs=[])
    [c] = result.candidates
    assert c.kind is CandidateKind.NPM_LAUNCHER and c.confirmed
    assert c.native_path is not None and c.native_path.is_file()


def test_r_cli_2_npm_launcher_without_platform_binary_is_unconfirmed_and_last(tmp_path: Path) -> None:
    broken_prefix = tmp_path / "nvm" / "v22"
    npm_package(broken_prefix / "lib" / "node_modules", layout=None)
    broken = symlink(broken_prefix / "bin" / "codex", Path("../lib/node_modules/@openai/codex/bin/codex.js"))
    good = native(tmp_path / "later" / "codex")
    result = run(tmp_path, {"PATH": f"{broken.parent}:{good.parent}"})
    assert paths(result) == [good, broken]  # found first, sorted last, never dropped
    last = result.candidates[-1]
    assert not last.confirmed and last.native_path is None
    assert last.note is not None and LINUX_PKG in last.note


def test_r_cli_2_platform_binary_of_another_platform_does_not_confirm(tmp_path: Path) -> None:
    js = npm_package(tmp_path / "nm" / "node_modules", layout="hoisted")
    result = run(tmp_path, {"CODEX_BIN": str(js)}, machine="aarch64")
    [c] = result.candidates
    assert not c.confirmed and "codex-linux-arm64" in (c.note or "")


def test_r_cli_2_pnpm_shell_shim_is_followed(tmp_path: Path) -> None:
    store = tmp_path / "pnpm" / ".pnpm" / "@openai+codex@0.169.0" / "node_modules"
    npm_package(store, layout="hoisted")
    shim = script(
        tmp_path / "pnpm" / "codex",
        '#!/bin/sh\nbasedir=$(dirname "$0")\nexport NODE_PATH="/x/y:$NODE_PATH"\n'
        'exec node "$basedir/.pnpm/@openai+codex@0.169.0/node_modules/@openai/codex/bin/codex.js" "$@"\n',
    )
    result = run(tmp_path, {"PATH": str(shim.parent)})
    [c] = result.candidates
    assert c.kind is CandidateKind.NPM_SHIM and c.confirmed


def test_r_cli_2_wrapper_script_is_unconfirmed_but_kept(tmp_path: Path) -> None:
    wrapper = script(tmp_path / "bin" / "codex", "#!/bin/sh\nexec /opt/codex \"$@\"\n")
    result = run(tmp_path, {"PATH": str(wrapper.parent)})
    [c] = result.candidates
    assert c.kind is CandidateKind.SCRIPT and not c.confirmed


def test_r_cli_3_wrapper_named_by_override_is_trusted(tmp_path: Path) -> None:
    wrapper = script(tmp_path / "w" / "my-codex", "#!/bin/sh\nexec /opt/codex \"$@\"\n")
    other = native(tmp_path / "p" / "codex")
    result = run(tmp_path, {"CODEX_BIN": str(wrapper), "PATH": str(other.parent)})
    assert paths(result) == [wrapper, other]
    assert result.candidates[0].confirmed


# ----------------------------------------------------------------------------- rejects


def test_r_cli_2_rejected_paths_carry_reasons(tmp_path: Path) -> None:
    noexec = native(tmp_path / "a" / "codex", mode=0o644)
    (tmp_path / "b" / "codex").mkdir(parents=True)
    dangling = symlink(tmp_path / "c" / "codex", tmp_path / "gone")
    good = native(tmp_path / "d" / "codex")
    env = {"PATH": ":".join(str(tmp_path / x) for x in "abcd")}
    result = run(tmp_path, env)
    assert paths(result) == [good]
    reasons = {r.path: r.reason for r in result.rejected}
    assert reasons[noexec] == "not executable"
    assert reasons[tmp_path / "b" / "codex"] == "not a regular file"
    assert reasons[dangling].startswith("broken symlink")
    assert all(r.source == "PATH" for r in result.rejected)


@pytest.mark.parametrize("var", ["explicit", "CODEX_BIN", "CODEX_PATH", "CODEX_CLI_PATH"])
def test_r_cli_3_stale_override_is_an_error(tmp_path: Path, var: str) -> None:
    good = native(tmp_path / "p" / "codex")
    stale = str(tmp_path / "old" / "codex")
    env = {"PATH": str(good.parent)}
    kw: dict[str, object] = {}
    if var == "explicit":
        kw["explicit"] = stale
    else:
        env[var] = stale
    with pytest.raises(CliUnavailable) as info:
        run(tmp_path, env, **kw)
    err = info.value
    assert err.code == "CODEX_CLI_OVERRIDE_INVALID"
    assert "does not exist" in err.message and stale in err.message
    assert err.details["codexCliUnavailable"]["mode"] == "overrideInvalid"


def test_r_cli_3_override_that_is_not_executable_is_an_error(tmp_path: Path) -> None:
    f = native(tmp_path / "codex", mode=0o644)
    with pytest.raises(CliUnavailable, match="not executable"):
        run(tmp_path, {"CODEX_BIN": str(f)})


def test_r_cli_3_empty_override_counts_as_unset(tmp_path: Path) -> None:
    good = native(tmp_path / "p" / "codex")
    assert paths(run(tmp_path, {"CODEX_BIN": "", "PATH": str(good.parent)})) == [good]


# -------------------------------------------------------------------------- standalone


def test_r_cli_1_standalone_current_used_and_releases_never_scanned(tmp_path: Path) -> None:
    home = tmp_path / "home"
    standalone = home / ".codex" / "packages" / "standalone"
    old = native(standalone / "releases" / "0.168.0-x86_64-unknown-linux-musl" / "bin" / "codex")
    new = native(standalone / "releases" / "0.169.0-x86_64-unknown-linux-musl" / "bin" / "codex")
    symlink(standalone / "current", standalone / "releases" / "0.169.0-x86_64-unknown-linux-musl")
    result = run(tmp_path, {})
    assert [c.real_path for c in result.candidates] == [new.resolve()]
    assert old.resolve() not in [c.real_path for c in result.candidates]
    assert result.candidates[0].source == "home:standalone"


def test_r_cli_1_old_flat_current_layout_and_codex_home(tmp_path: Path) -> None:
    codex_home = tmp_path / "ch"
    flat = native(codex_home / "packages" / "standalone" / "current" / "codex")
    result = run(tmp_path, {"CODEX_HOME": str(codex_home)})
    assert paths(result) == [flat]
    assert result.candidates[0].source == "home:standalone-flat"


def test_r_cli_1_local_bin_symlink_into_standalone_is_one_candidate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    real = native(home / ".codex" / "packages" / "standalone" / "releases" / "1" / "bin" / "codex")
    symlink(home / ".codex" / "packages" / "standalone" / "current", real.parent.parent)
    local = symlink(home / ".local" / "bin" / "codex", real)
    result = run(tmp_path, {})
    assert paths(result) == [local]
    assert [s.source for s in result.candidates[0].also_found] == ["home:standalone"]


# ---------------------------------------------------------------------------- legacy


def legacy_tree(home: Path, *, with_cli: bool) -> Path:
    root = home / ".codemoss" / "dependencies" / "codex-sdk"
    sdk = root / "node_modules" / "@openai" / "codex-sdk"
    sdk.mkdir(parents=True)
    (sdk / "package.json").write_text('{"name": "@openai/codex-sdk"}')
    (root / "package.json").write_text('{"dependencies": {"@openai/codex-sdk": "*"}}')
    if with_cli:
        npm_package(root / "node_modules", layout="hoisted")
        symlink(root / "node_modules" / ".bin" / "codex", Path("../@openai/codex/bin/codex.js"))
    return root


def snapshot(root: Path) -> list[tuple[str, float, int]]:
    return sorted((str(p), p.lstat().st_mtime, p.lstat().st_size) for p in root.rglob("*"))


def test_r_cli_4_legacy_only_when_nothing_else_and_never_modified(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = legacy_tree(home, with_cli=True)
    before = snapshot(root)
    result = run(tmp_path, {})
    assert len(result.candidates) == 1
    c = result.candidates[0]
    assert c.source.startswith("legacy:") and c.confirmed
    good = native(tmp_path / "p" / "codex")
    result2 = run(tmp_path, {"PATH": str(good.parent)})
    assert paths(result2) == [good]  # an external CLI exists: the legacy dir is not even looked at
    assert snapshot(root) == before
    assert not (home / ".codexrt").exists()  # nothing created


def test_r_cli_4_sdk_metadata_alone_is_not_a_cli(tmp_path: Path) -> None:
    root = legacy_tree(tmp_path / "home", with_cli=False)
    result = run(tmp_path, {})
    assert result.candidates == []
    [r] = result.rejected
    assert r.path == root and "SDK metadata only" in r.reason


def test_r_cli_4_codexrt_legacy_dir_is_searched_too(tmp_path: Path) -> None:
    root = tmp_path / "home" / ".codexrt" / "dependencies" / "codex-sdk"
    exe = native(root / "bin" / "codex")
    assert paths(run(tmp_path, {})) == [exe]


# ------------------------------------------------------------------------ login shell


def test_r_cli_1_login_shell_only_when_nothing_else(tmp_path: Path) -> None:
    shell_bin = native(tmp_path / "shell-only" / "codex")
    calls: list[int] = []

    def lookup() -> str:
        calls.append(1)
        return str(shell_bin.parent)

    result = run(tmp_path, {}, login_shell_path=lookup)
    assert paths(result) == [shell_bin] and result.candidates[0].source == "login-shell"
    good = native(tmp_path / "p" / "codex")
    calls.clear()
    assert paths(run(tmp_path, {"PATH": str(good.parent)}, login_shell_path=lookup)) == [good]
    assert calls == []


def test_r_cli_1_login_shell_failure_is_not_fatal(tmp_path: Path) -> None:
    def lookup() -> str:
        raise TimeoutError("slow profile")

    assert run(tmp_path, {}, login_shell_path=lookup).candidates == []


def test_r_cli_1_login_shell_never_on_windows(tmp_path: Path) -> None:
    def lookup() -> str:
        raise AssertionError("no POSIX shell probe on Windows")

    assert run(tmp_path, {}, platform="win32", login_shell_path=lookup).candidates == []


# ---------------------------------------------------------------------- no spawning


# ---------------------------------------------------------------------------- Windows


def win_npm_prefix(tmp_path: Path, *, layout: str | None) -> Path:
    """``%APPDATA%\\npm`` as npm lays it out on Windows: ``codex.cmd``, ``codex`` (sh) and
    ``codex.ps1`` shims next to ``node_modules``."""
    appdata_npm = tmp_path / "Roaming" / "npm"
    npm_package(appdata_npm / "node_modules", layout=layout, win=True)
    script(
        appdata_npm / "codex.cmd",
        "@ECHO off\r\nGOTO start\r\n:find_dp0\r\nSET dp0=%~dp0\r\nEXIT /b\r\n:start\r\nSETLOCAL\r\nCALL :find_dp0\r\n"
        'IF EXIST "%dp0%\\node.exe" (\r\n  SET "_prog=%dp0%\\node.exe"\r\n) ELSE (\r\n  SET "_prog=node"\r\n)\r\n'
        'endLocal & goto #_undefined_# 2>NUL || title %COMSPEC% & "%_prog%"  '
        '"%dp0%\\node_modules\\@openai\\codex\\bin\\codex.js" %*\r\n',
        mode=0o644,
    )
    script(appdata_npm / "codex", '#!/bin/sh\nexec node "$basedir/node_modules/@openai/codex/bin/codex.js" "$@"\n', mode=0o644)
    script(appdata_npm / "codex.ps1", "# ps1 shim\n", mode=0o644)
    return appdata_npm


@pytest.mark.parametrize("layout", ["hoisted", "nested"])
def test_r_cli_8_windows_cmd_shim_confirmed_via_path_casing(tmp_path: Path, layout: str) -> None:
    npm = win_npm_prefix(tmp_path, layout=layout)
    env = {"Path": str(npm), "PathExt": ".COM;.EXE;.BAT;.CMD"}
    result = run(tmp_path, env, platform="win32", machine="AMD64")
    [c] = result.candidates
    assert c.path == npm / "codex.cmd" and c.kind is CandidateKind.CMD_SHIM and c.confirmed
    assert c.native_path is not None and c.native_path.name == "codex.exe"
    assert result.rejected == []  # the extensionless sh shim and .ps1 are not Windows CLIs


def test_r_cli_8_windows_cmd_shim_without_platform_binary_unconfirmed(tmp_path: Path) -> None:
    npm = win_npm_prefix(tmp_path, layout=None)
    result = run(tmp_path, {"PATH": str(npm)}, platform="win32", machine="AMD64")
    [c] = result.candidates
    assert not c.confirmed and "codex-win32-x64" in (c.note or "")


def test_r_cli_8_windows_localappdata_and_exe_order(tmp_path: Path) -> None:
    local = tmp_path / "Local"
    exe = native(local / "Programs" / "OpenAI" / "Codex" / "bin" / "codex.exe", magic=b"MZ\x90\x00", mode=0o644)
    npm = win_npm_prefix(tmp_path, layout="hoisted")
    both = native(tmp_path / "both" / "codex.exe", magic=b"MZ\x90\x00", mode=0o644)
    script(tmp_path / "both" / "codex.bat", "@echo off\r\nC:\\tools\\codex.exe %*\r\n", mode=0o644)
    env = {"LOCALAPPDATA": str(local), "pAtH": f"{both.parent};{npm}"}
    result = run(tmp_path, env, platform="win32", machine="AMD64", common_dirs=[])
    assert paths(result) == [both, npm / "codex.cmd", exe, tmp_path / "both" / "codex.bat"]
    assert [c.kind for c in result.candidates] == [
        CandidateKind.NATIVE,
        CandidateKind.CMD_SHIM,
        CandidateKind.NATIVE,
        CandidateKind.CMD_SCRIPT,
    ]
    assert result.candidates[2].source == "home:LOCALAPPDATA"


def test_r_cli_8_windows_default_common_dirs_include_appdata_npm(tmp_path: Path) -> None:
    dirs = disc.default_common_dirs(platform="win32", env={"APPDATA": str(tmp_path / "R")}, home=tmp_path)
    assert tmp_path / "R" / "npm" in dirs


def test_r_cli_8_cmd_shim_launch_quoting(tmp_path: Path) -> None:
    npm = win_npm_prefix(tmp_path, layout="hoisted")
    [c] = run(tmp_path, {"PATH": str(npm)}, platform="win32", machine="AMD64").candidates
    argv = launch_argv(c, ["app-server", "a b", 'say "hi"', "x&y", "50%", "trail\\"], comspec="C:\\cmd.exe")
    assert argv[:4] == ["C:\\cmd.exe", "/d", "/s", "/c"]
    line = argv[4]
    assert line.startswith('"') and line.endswith('"')
    inner = line[1:-1]
    parts = inner.split(" ")
    assert parts[0] == str(npm / "codex.cmd").replace(" ", "^ ")
    assert parts[1] == '^^^"app-server^^^"'
    # Every cmd metacharacter of an argument is caret-escaped twice (the shim re-parses %*).
    assert '^^^"x^^^&y^^^"' in parts
    assert '^^^"50^^^%^^^"' in parts
    assert '^^^"trail\\\\^^^"' in parts  # trailing backslash doubled before the closing quote
    assert r'\^^^"hi\^^^"' in inner
    cmdline = spawn_command(c, ["app-server"], comspec="C:\\cmd.exe")
    assert isinstance(cmdline, str) and cmdline.startswith("C:\\cmd.exe /d /s /c \"")


def test_launch_argv_native_and_js_on_windows(tmp_path: Path) -> None:
    exe = native(tmp_path / "codex")
    [c] = run(tmp_path, {"CODEX_BIN": str(exe)}).candidates
    assert launch_argv(c, ["app-server"]) == [str(exe), "app-server"]
    assert spawn_command(c, ["app-server"]) == [str(exe), "app-server"]
    js = npm_package(tmp_path / "w" / "node_modules", layout="hoisted", win=True)
    [cj] = run(tmp_path, {"CODEX_BIN": str(js)}, platform="win32", machine="AMD64").candidates
    assert cj.confirmed and launch_argv(cj, ["--version"]) == ["node", str(js), "--version"]


# -------------------------------------------------------------------- version probe


# ----------------------------------------------------------------------- diagnostics


def test_r_cli_6_format_unavailable_lines_hint_and_diagnostic(tmp_path: Path) -> None:
    a = native(tmp_path / "a" / "codex")
    npm_package(tmp_path / "g" / "lib" / "node_modules", layout=None)
    b = symlink(tmp_path / "g" / "bin" / "codex", Path("../lib/node_modules/@openai/codex/bin/codex.js"))
    native(tmp_path / "x" / "codex", mode=0o644)
    env = {"PATH": f"{tmp_path / 'x'}:{b.parent}:{a.parent}"}
    result = run(tmp_path, env)
    assert paths(result) == [a, b]
    attempts = [
        Attempt(result.candidates[0], "initialize failed: boom", returncode=1, signal=None, code="INITIALIZE_FAILED"),
        Attempt(result.candidates[1], "spawn failed: ENOENT", returncode=127),
    ]
    message, diag = format_unavailable(result, attempts)
    lines = message.splitlines()
    assert lines[0].startswith(f"{CHILD_EXITED_PREFIX} (code=127, signal=null)")
    assert str(a) in lines[1] and "initialize failed: boom" in lines[1]
    assert str(b) in lines[2] and "unconfirmed" in lines[2] and "ENOENT" in lines[2]
    assert "rejected" in lines[3] and "not executable" in lines[3]
    assert lines[-1].startswith("Hint: ")
    assert "CODEX_BIN" in lines[-1] and "npm install -g @openai/codex" in lines[-1]
    assert "uninstall the" not in lines[-1].replace("no need to uninstall the", "")
    d = diag["codexCliUnavailable"]
    assert d["mode"] == "allCandidatesFailed"
    assert [c["outcome"] for c in d["candidates"]] == ["initialize failed: boom", "spawn failed: ENOENT"]
    assert d["candidates"][0]["errorCode"] == "INITIALIZE_FAILED"
    assert d["rejected"][0]["reason"] == "not executable"
    err = unavailable_error(result, attempts)
    assert isinstance(err, CliUnavailable) and err.message == message and err.details == diag


def test_r_cli_6_nothing_found_hint_says_install_and_codex_bin(tmp_path: Path) -> None:
    message, diag = format_unavailable(run(tmp_path, {}), [], platform="win32")
    assert message.startswith("no Codex CLI found (nothing was started)")  # no "exited": nothing ran
    assert "npm install -g @openai/codex" in message and "setx CODEX_BIN" in message
    assert diag["codexCliUnavailable"]["mode"] == "notInstalled"


def test_r_cli_6_untried_candidates_say_so(tmp_path: Path) -> None:
    a = native(tmp_path / "a" / "codex")
    b = native(tmp_path / "b" / "codex")
    result = run(tmp_path, {"PATH": f"{a.parent}:{b.parent}"})
    message, diag = format_unavailable(result, [Attempt(result.candidates[0], "handshake timeout")])
    assert "not tried" in message.splitlines()[2]
    assert diag["codexCliUnavailable"]["candidates"][1]["outcome"] == "not tried"


def test_r_cli_6_no_exit_claimed_when_no_candidate_could_be_spawned(tmp_path: Path) -> None:
    a = native(tmp_path / "a" / "codex")
    result = run(tmp_path, {"PATH": str(a.parent)})
    message, diag = format_unavailable(result, [Attempt(result.candidates[0], "spawn failed: ENOENT")])
    assert message.startswith("codex app-server could not be started: no usable Codex CLI (1 of 1 candidates tried)")
    assert "exited" not in message.splitlines()[0]
    assert "spawn failed: ENOENT" in message.splitlines()[1]
    assert diag["codexCliUnavailable"]["candidates"][0]["outcome"] == "spawn failed: ENOENT"


def test_r_cli_1_the_official_binary_wheel_is_a_candidate_after_path_and_common_dirs(tmp_path: Path) -> None:
    """``codexrt[cli]`` pulls ``openai-codex-cli-bin``; its binary is found in site-packages by
    file (never imported), after every PATH/home/common candidate (issue 22)."""
    site = tmp_path / "site-packages"
    pkg = site / "codex_cli_bin"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "codex-package.json").write_text('{"layoutVersion": 1, "entrypoint": "bin/codex"}')
    wheel_bin = native(pkg / "bin" / "codex")
    on_path = native(tmp_path / "usr" / "bin" / "codex")
    result = run(tmp_path, {"PATH": str(on_path.parent)}, python_paths=["", str(tmp_path / "nothing"), str(site)])
    assert paths(result) == [on_path, wheel_bin]
    assert result.candidates[1].source == "python:openai-codex-cli-bin" and result.candidates[1].confirmed
    # A directory named codex_cli_bin without the package's marker file is not the wheel.
    (pkg / "codex-package.json").unlink()
    assert paths(run(tmp_path, {}, python_paths=[str(site)])) == []
