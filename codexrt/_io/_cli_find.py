"""Finding Codex CLI candidates: the filesystem half of CLI discovery (R-CLI-1…4).

Pure filesystem: it stats, resolves symlinks, reads a few KiB of a file head and an npm
``package.json``; it never spawns a process. How candidates are found, judged, ordered and
deduplicated is told in :mod:`codexrt._io._discovery` (the import surface of the three parts:
this one, :mod:`codexrt._io._cli_spawn` and :mod:`codexrt._io._cli_report`).
"""

from __future__ import annotations

import enum
import json
import logging
import os
import platform as _platform_mod
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from codexrt._sansio._errors import CliOverrideInvalid
from codexrt._io._codex_home import resolve_codex_home

__all__ = [
    "Candidate",
    "CandidateKind",
    "DiscoveryResult",
    "Rejected",
    "Sighting",
    "OVERRIDE_ENV_VARS",
    "INSTALL_COMMAND",
    "INSTALL_URL",
    "OLDEST_TESTED_CLI",
    "NEWEST_TESTED_CLI",
    "default_common_dirs",
    "discover_cli",
    "platform_binary_spec",
]

log = logging.getLogger("codexrt.discovery")

#: Environment variables naming an explicit CLI, highest precedence first (R-CLI-1).
OVERRIDE_ENV_VARS: tuple[str, ...] = ("CODEX_BIN", "CODEX_PATH", "CODEX_CLI_PATH")
INSTALL_COMMAND = "npm install -g @openai/codex"
#: The tested range of Codex CLI releases: the oldest one the real-binary tests run against and
#: the pinned (newest tested) one. Kept here, not read from the checkout's ``.ci`` files, so an
#: installed wheel knows it; a test checks they match ``.ci/codex-version-old`` / ``.ci/codex-version``.
OLDEST_TESTED_CLI = "0.147.0"
NEWEST_TESTED_CLI = "0.171.0"
INSTALL_URL = "https://developers.openai.com/codex/cli"

_HEAD_BYTES = 16384
_OUTPUT_LIMIT = 64 * 1024
_DEFAULT_PATHEXT = ".COM;.EXE;.BAT;.CMD"
_NATIVE_MAGICS = (
    b"\x7fELF",  # Linux
    b"\xfe\xed\xfa\xce",  # Mach-O 32 BE
    b"\xfe\xed\xfa\xcf",  # Mach-O 64 BE
    b"\xce\xfa\xed\xfe",  # Mach-O 32 LE
    b"\xcf\xfa\xed\xfe",  # Mach-O 64 LE
    b"\xca\xfe\xba\xbe",  # Mach-O universal
    b"MZ",  # PE (.exe)
)
#: (platform, arch) → (npm platform package suffix, Rust target triple); mirrors the real
#: ``@openai/codex`` 0.169.0 ``bin/codex.js``.
_PLATFORM_PACKAGES: dict[tuple[str, str], tuple[str, str]] = {
    ("linux", "x64"): ("linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "arm64"): ("linux-arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "x64"): ("darwin-x64", "x86_64-apple-darwin"),
    ("darwin", "arm64"): ("darwin-arm64", "aarch64-apple-darwin"),
    ("win32", "x64"): ("win32-x64", "x86_64-pc-windows-msvc"),
    ("win32", "arm64"): ("win32-arm64", "aarch64-pc-windows-msvc"),
}
_ARCH_ALIASES = {
    "x86_64": "x64",
    "amd64": "x64",
    "x64": "x64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv8": "arm64",
}
#: Matches a reference to the npm launcher inside a shell / cmd shim.
_SHIM_REF = re.compile(r"""["']?((?:\$basedir|%~?dp0%?|%dp0%)?[^"'\s]*?codex\.js)["']?""")
_VERSION_LINE = re.compile(r"^\s*codex-cli\s+(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?)\s*$")


class CandidateKind(str, enum.Enum):
    """What a candidate file is, as judged from the filesystem."""

    NATIVE = "native"  #: ELF / Mach-O / PE executable
    NPM_LAUNCHER = "npm-launcher"  #: ``@openai/codex/bin/codex.js`` (directly or via symlink)
    NPM_SHIM = "npm-shim"  #: a POSIX shell shim (npm/pnpm) that runs the npm launcher
    CMD_SHIM = "cmd-shim"  #: a Windows ``.cmd``/``.bat`` shim that runs the npm launcher
    CMD_SCRIPT = "cmd-script"  #: some other Windows batch file
    SCRIPT = "script"  #: some other ``#!`` script (a user's wrapper)
    UNKNOWN = "unknown"  #: executable, format not recognised


@attrs.frozen
class Sighting:
    """One more place where the same real file was found (a PATH duplicate, a symlink)."""

    path: Path
    source: str


@attrs.frozen
class Candidate:
    """A path that may run the Codex CLI (R-CLI-3).

    ``confirmed`` is a filesystem judgement, not a version probe. ``native_path`` is the
    platform binary an npm launcher would start (the evidence that confirmed it), or the
    native file itself. ``note`` says why a candidate is unconfirmed.
    """

    path: Path
    real_path: Path
    source: str
    confirmed: bool
    kind: CandidateKind
    platform: str
    native_path: Path | None = None
    note: str | None = None
    also_found: tuple[Sighting, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "realPath": str(self.real_path),
            "source": self.source,
            "confirmed": self.confirmed,
            "kind": self.kind.value,
            "nativePath": None if self.native_path is None else str(self.native_path),
            "note": self.note,
            "alsoFound": [{"path": str(s.path), "source": s.source} for s in self.also_found],
        }


@attrs.frozen
class Rejected:
    """A path that cannot be a CLI, and why (R-CLI-2)."""

    path: Path
    source: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "source": self.source, "reason": self.reason}


@attrs.frozen
class DiscoveryResult:
    """``candidates`` in the order to try them (unconfirmed last) and ``rejected`` paths."""

    candidates: list[Candidate]
    rejected: list[Rejected]

    @property
    def first(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def startup_attempts(self) -> int:
        """R-CLI-5: the runtime makes as many startup attempts as there are candidates."""
        return len(self.candidates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidates": [c.to_dict() for c in self.candidates],
            "rejected": [r.to_dict() for r in self.rejected],
        }


# ----------------------------------------------------------------------------------------
# helpers


def _norm_platform(platform: str | None) -> str:
    p = platform or sys.platform
    if p.startswith("win") or p == "cygwin":
        return "win32"
    if p.startswith("linux") or p == "android":
        return "linux"
    return p


def _norm_arch(machine: str | None) -> str:
    m = (machine or _platform_mod.machine() or "").lower()
    return _ARCH_ALIASES.get(m, m)


def platform_binary_spec(platform: str | None = None, machine: str | None = None) -> tuple[str, str, str] | None:
    """``(npm package, target triple, binary file name)`` for a platform, or None if Codex
    publishes no build for it."""
    plat = _norm_platform(platform)
    spec = _PLATFORM_PACKAGES.get((plat, _norm_arch(machine)))
    if spec is None:
        return None
    pkg, triple = spec
    return f"@openai/codex-{pkg}", triple, "codex.exe" if plat == "win32" else "codex"


def _getenv(env: Mapping[str, str], name: str, win: bool) -> str | None:
    if name in env:
        return env[name]
    if win:
        low = name.lower()
        for k, v in env.items():
            if k.lower() == low:
                return v
    return None


def _pathext(env: Mapping[str, str]) -> list[str]:
    raw = _getenv(env, "PATHEXT", True) or _DEFAULT_PATHEXT
    out: list[str] = []
    for ext in raw.split(";"):
        ext = ext.strip().lower()
        if ext.startswith(".") and ext not in out:
            out.append(ext)
    return out or [e.lower() for e in _DEFAULT_PATHEXT.split(";")]


def _read_head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(_HEAD_BYTES)


def _is_native(head: bytes) -> bool:
    return any(head.startswith(m) for m in _NATIVE_MAGICS)


def _node_module_dirs(start: Path) -> list[Path]:
    """The ``node_modules`` directories Node searches from ``start`` (nearest first)."""
    dirs: list[Path] = []
    cur = start
    while True:
        if cur.name != "node_modules":
            dirs.append(cur / "node_modules")
        if cur.parent == cur:
            return dirs
        cur = cur.parent


def _find_platform_binary(pkg_root: Path, platform: str, machine: str | None) -> tuple[Path | None, str | None]:
    """Where the npm launcher of ``pkg_root`` would find its native binary (R-CLI-2)."""
    spec = platform_binary_spec(platform, machine)
    if spec is None:
        return None, f"Codex publishes no binary for {platform}/{_norm_arch(machine)}"
    pkg, triple, exe = spec
    tried: list[Path] = []
    for nm in _node_module_dirs(pkg_root / "bin"):
        tried.append(nm / pkg / "vendor" / triple / "bin" / exe)
    # Older packages shipped the binaries inside the main package itself.
    tried.append(pkg_root / "vendor" / triple / "bin" / exe)
    tried.append(pkg_root / "vendor" / triple / "codex" / exe)
    for cand in tried:
        try:
            if cand.is_file():
                return cand, None
        except OSError:
            continue
    return None, f"platform package {pkg} (vendor/{triple}/bin/{exe}) is not installed"


def _is_codex_package(pkg_root: Path) -> bool:
    try:
        meta = json.loads((pkg_root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        # No readable metadata: judge by the directory layout alone.
        return pkg_root.name == "codex" and pkg_root.parent.name == "@openai"
    return isinstance(meta, dict) and meta.get("name") == "@openai/codex"


def _shim_target(text: str, shim_dir: Path) -> Path | None:
    """The npm launcher a shell/cmd shim runs, resolved relative to the shim's directory."""
    for m in _SHIM_REF.finditer(text):
        ref = m.group(1)
        if "@openai" not in ref:
            continue
        for prefix in ("$basedir", "%~dp0%", "%~dp0", "%dp0%"):
            if ref.startswith(prefix):
                ref = ref[len(prefix) :].lstrip("\\/")
                break
        ref = ref.replace("\\", "/")
        p = Path(ref)
        if not p.is_absolute():
            p = shim_dir / p
        if p.is_file():
            return p
    return None


@attrs.define
class _Ctx:
    platform: str
    machine: str | None
    env: Mapping[str, str]
    pathext: list[str]
    candidates: list[Candidate] = attrs.Factory(list)
    rejected: list[Rejected] = attrs.Factory(list)
    by_real: dict[str, int] = attrs.Factory(dict)
    rejected_paths: set[str] = attrs.Factory(set)

    @property
    def win(self) -> bool:
        return self.platform == "win32"

    def key(self, p: Path) -> str:
        s = str(p)
        return s.lower() if self.win else s

    def reject(self, path: Path, source: str, reason: str) -> Rejected:
        r = Rejected(path, source, reason)
        if self.key(path) not in self.rejected_paths:
            self.rejected_paths.add(self.key(path))
            self.rejected.append(r)
        return r

    def add(self, cand: Candidate) -> None:
        k = self.key(cand.real_path)
        if k in self.by_real:
            i = self.by_real[k]
            old = self.candidates[i]
            seen = {self.key(old.path)} | {self.key(s.path) for s in old.also_found}
            if self.key(cand.path) not in seen:
                self.candidates[i] = attrs.evolve(
                    old, also_found=old.also_found + (Sighting(cand.path, cand.source),)
                )
            return
        self.by_real[k] = len(self.candidates)
        self.candidates.append(cand)


def _judge(ctx: _Ctx, path: Path, source: str, *, override: bool = False) -> Candidate | Rejected:
    """Classify one existing-or-not path from the filesystem only (R-CLI-2)."""
    if not os.path.lexists(path):
        return ctx.reject(path, source, "does not exist")
    if path.is_symlink() and not path.exists():
        return ctx.reject(path, source, f"broken symlink (target {os.readlink(path)} is missing)")
    real = Path(os.path.realpath(path))
    if not real.is_file():
        return ctx.reject(path, source, "not a regular file")
    ext = path.suffix.lower()
    if ctx.win:
        if ext not in ctx.pathext and not (override and ext == ".js"):
            return ctx.reject(path, source, f"not launchable on Windows (extension {ext or 'none'!r} not in PATHEXT)")
    elif not os.access(real, os.X_OK):
        return ctx.reject(path, source, "not executable")
    try:
        head = _read_head(real)
    except OSError as exc:
        return ctx.reject(path, source, f"unreadable ({exc.strerror or type(exc).__name__})")

    def make(kind: CandidateKind, confirmed: bool, native: Path | None, note: str | None) -> Candidate:
        return Candidate(path, real, source, confirmed, kind, ctx.platform, native, note)

    def launcher(kind: CandidateKind, js: Path) -> Candidate:
        js_real = Path(os.path.realpath(js))
        pkg_root = js_real.parent.parent
        if not _is_codex_package(pkg_root):
            note = f"{js_real} is not inside an @openai/codex package"
            return make(kind, override, None, note)
        native, why = _find_platform_binary(pkg_root, ctx.platform, ctx.machine)
        return make(kind, native is not None, native, why)

    if ctx.win and ext in (".cmd", ".bat"):
        target = _shim_target(head.decode("utf-8", "replace"), path.parent)
        if target is not None:
            return launcher(CandidateKind.CMD_SHIM, target)
        return make(CandidateKind.CMD_SCRIPT, override, None, "a batch file that is not an npm shim")
    if _is_native(head):
        return make(CandidateKind.NATIVE, True, real, None)
    if real.name == "codex.js":
        return launcher(CandidateKind.NPM_LAUNCHER, real)
    if head.startswith(b"#!"):
        target = _shim_target(head.decode("utf-8", "replace"), path.parent)
        if target is not None:
            return launcher(CandidateKind.NPM_SHIM, target)
        return make(CandidateKind.SCRIPT, override, None, "a script codexrt cannot look into")
    return make(CandidateKind.UNKNOWN, override, None, "unrecognised executable format")


def _names(ctx: _Ctx) -> list[str]:
    if ctx.win:
        return [f"codex{ext}" for ext in ctx.pathext]
    return ["codex"]


def _scan_dir(ctx: _Ctx, d: Path, source: str) -> None:
    """Every ``codex`` in one directory; absent names are skipped silently."""
    for name in _names(ctx):
        p = d / name
        if os.path.lexists(p):
            res = _judge(ctx, p, source)
            if isinstance(res, Candidate):
                ctx.add(res)


def _split_path(value: str | None, win: bool) -> list[Path]:
    if not value:
        return []
    out: list[Path] = []
    for part in value.split(";" if win else ":"):
        part = part.strip().strip('"') if win else part
        if not part:
            continue
        p = Path(part)
        if not p.is_absolute():
            continue  # a relative PATH entry depends on the cwd: never trusted
        out.append(p)
    return out


def _override(ctx: _Ctx, value: str, source: str) -> None:
    p = Path(os.path.expanduser(value))
    try:
        is_dir = p.is_dir()
    except (OSError, ValueError) as exc:  # a name too long (issue 35), a NUL: not a usable path
        _raise_override(source, value, f"not a usable path ({getattr(exc, 'strerror', None) or exc})")
    if is_dir:
        found = False
        for d in (p, p / "bin"):
            for name in _names(ctx):
                if os.path.lexists(d / name):
                    found = True
                    res = _judge(ctx, d / name, source, override=True)
                    if isinstance(res, Rejected):
                        _raise_override(source, value, res.reason)
                    ctx.add(res)
        if not found:
            _raise_override(source, value, "the directory holds no codex executable")
        return
    res = _judge(ctx, p, source, override=True)
    if isinstance(res, Rejected):
        _raise_override(source, value, res.reason)
    ctx.add(res)


def _raise_override(source: str, value: str, reason: str) -> None:
    what = "the explicit CLI path" if source == "explicit" else source.removeprefix("env:")
    hint = (
        "Fix or unset it"
        if source == "explicit"
        else f"Point {what} at a working `codex` executable, or unset it to let codexrt search"
    )
    raise CliOverrideInvalid(
        f"{what} names {value!r}, which cannot be used: {reason}. {hint}.",
        details={
            "codexCliUnavailable": {
                "mode": "overrideInvalid",
                "source": source,
                "path": value,
                "reason": reason,
            }
        },
    )


def _home_dirs(ctx: _Ctx, home: Path) -> list[tuple[Path, str]]:
    env, win = ctx.env, ctx.win
    dirs: list[tuple[Path, str]] = []
    install_dir = _getenv(env, "CODEX_INSTALL_DIR", win)
    if install_dir:
        dirs.append((Path(os.path.expanduser(install_dir)), "home:CODEX_INSTALL_DIR"))
    if win:
        local = _getenv(env, "LOCALAPPDATA", win) or str(home / "AppData" / "Local")
        dirs.append((Path(local) / "Programs" / "OpenAI" / "Codex" / "bin", "home:LOCALAPPDATA"))
    else:
        dirs.append((home / ".local" / "bin", "home:~/.local/bin"))
    codex_home_raw = _getenv(env, "CODEX_HOME", win)
    codex_home = resolve_codex_home(codex_home_raw, {}, home=home)
    current = codex_home / "packages" / "standalone" / "current"
    dirs.append((current / "bin", "home:standalone"))
    dirs.append((current, "home:standalone-flat"))
    return dirs


def _python_package_dirs(paths: Sequence[str]) -> list[Path]:
    """``bin`` of the official ``openai-codex-cli-bin`` wheel in each import path that has one
    (its ``codex-package.json`` marks the layout). Files only: nothing is imported."""
    out: list[Path] = []
    for entry in paths:
        if not entry:
            continue
        pkg = Path(entry) / "codex_cli_bin"
        try:
            if (pkg / "codex-package.json").is_file():
                out.append(pkg / "bin")
        except OSError:  # an unreadable sys.path entry is not a candidate
            continue
    return out


def default_common_dirs(*, platform: str | None = None, env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Well-known bin directories of package managers (R-CLI-1 step 4). Desktop-app bundles
    are deliberately absent (R-CLI-8)."""
    plat = _norm_platform(platform)
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    if plat == "win32":
        appdata = _getenv(env, "APPDATA", True) or str(home / "AppData" / "Roaming")
        local = _getenv(env, "LOCALAPPDATA", True) or str(home / "AppData" / "Local")
        progfiles = _getenv(env, "ProgramFiles", True) or r"C:\Program Files"
        return [
            Path(appdata) / "npm",
            Path(local) / "pnpm",
            Path(local) / "Volta" / "bin",
            home / ".bun" / "bin",
            Path(progfiles) / "nodejs",
        ]
    dirs = [
        Path("/opt/homebrew/bin"),
        Path("/usr/local/bin"),
        home / ".npm-global" / "bin",
        home / ".volta" / "bin",
        home / ".bun" / "bin",
        home / ".local" / "share" / "pnpm",
        home / "Library" / "pnpm",
        home / ".yarn" / "bin",
    ]
    nvm_dir = Path(env.get("NVM_DIR") or home / ".nvm") / "versions" / "node"
    try:
        versions = sorted(nvm_dir.iterdir(), key=lambda p: _version_key(p.name), reverse=True)
    except OSError:
        versions = []
    dirs.extend(v / "bin" for v in versions)
    dirs.append(Path("/usr/bin"))
    return dirs


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name)[:3])


def _legacy(ctx: _Ctx, home: Path) -> None:
    """R-CLI-4: an existing CLI in the old dependency dirs, read-only."""
    for root in (home / ".codemoss" / "dependencies" / "codex-sdk", home / ".codexrt" / "dependencies" / "codex-sdk"):
        if not root.is_dir():
            continue
        source = f"legacy:{root}"
        before = len(ctx.candidates)
        nm = root / "node_modules"
        for d in (nm / ".bin", root / "bin", root):
            _scan_dir(ctx, d, source)
        js = nm / "@openai" / "codex" / "bin" / "codex.js"
        if js.is_file():
            res = _judge(ctx, js, source, override=ctx.win)  # on Windows a bare .js runs via node
            if isinstance(res, Candidate):
                ctx.add(res)
        if len(ctx.candidates) == before:
            ctx.reject(root, source, "SDK metadata only: no CLI binary or launcher in the legacy directory")


def discover_cli(
    *,
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
    login_shell_path: Callable[[], str | None] | None = None,
    machine: str | None = None,
    common_dirs: Sequence[Path] | None = None,
    python_paths: Sequence[str] | None = None,
) -> DiscoveryResult:
    """List every Codex CLI candidate, best first, from the filesystem only (R-CLI-1…4).

    ``env`` defaults to ``os.environ``, ``platform`` to ``sys.platform`` (``"win32"`` turns on
    the Windows rules: ``PATHEXT``, ``Path`` casing, ``%LOCALAPPDATA%``), ``home`` to the
    user's home, ``common_dirs`` to :func:`default_common_dirs`, ``python_paths`` (where the
    ``openai-codex-cli-bin`` wheel is looked for) to ``sys.path``. ``login_shell_path`` is
    called (with no arguments) only when steps 1–4 found no candidate; it returns a
    ``PATH`` string or None and is the only thing here that may spawn (see
    :func:`read_login_shell_path`). Raises :class:`CliUnavailable`
    (:class:`CliOverrideInvalid`, ``CODEX_CLI_OVERRIDE_INVALID``) when an explicit override is stale (R-CLI-3).
    """
    plat = _norm_platform(platform)
    env = os.environ if env is None else env
    home = Path.home() if home is None else Path(home)
    win = plat == "win32"
    ctx = _Ctx(plat, machine, env, _pathext(env) if win else [])

    # 1. overrides
    if explicit is not None and str(explicit) != "":
        _override(ctx, os.fspath(explicit), "explicit")
    for var in OVERRIDE_ENV_VARS:
        value = _getenv(env, var, win)
        if value:
            _override(ctx, value, f"env:{var}")
    # 2. every PATH hit
    for d in _split_path(_getenv(env, "PATH", win), win):
        _scan_dir(ctx, d, "PATH")
    # 3. home candidates (never releases/)
    for d, source in _home_dirs(ctx, home):
        _scan_dir(ctx, d, source)
    # 4. common bin dirs
    dirs = default_common_dirs(platform=plat, env=env, home=home) if common_dirs is None else common_dirs
    for d in dirs:
        _scan_dir(ctx, Path(d), "common")
    for d in _python_package_dirs(sys.path if python_paths is None else python_paths):
        _scan_dir(ctx, d, "python:openai-codex-cli-bin")
    # 5. login shell, only when nothing else was found
    if not ctx.candidates and login_shell_path is not None and not win:
        try:
            shell_path = login_shell_path()
        except Exception as exc:  # a lookup failure is not fatal; never log its output
            log.debug("login-shell PATH lookup failed: %s", type(exc).__name__)
            shell_path = None
        for d in _split_path(shell_path, win):
            _scan_dir(ctx, d, "login-shell")
    # 6. legacy dependency dirs, only when no external CLI exists
    if not ctx.candidates:
        _legacy(ctx, home)

    ordered = [c for c in ctx.candidates if c.confirmed] + [c for c in ctx.candidates if not c.confirmed]
    return DiscoveryResult(ordered, list(ctx.rejected))
