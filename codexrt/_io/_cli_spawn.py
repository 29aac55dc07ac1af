"""Running a Codex CLI candidate: launch argv, the bounded child, the version probe and the
login-shell ``PATH`` (R-CLI-5, R-CLI-7, R-CLI-8).

The only part of CLI discovery that spawns: every child here is bounded by a timeout, keeps at
most 64 KiB of output and is always reaped (its process group on POSIX). The overview is in
:mod:`codexrt._io._discovery`.
"""

from __future__ import annotations

import os
import re
import signal as _signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from codexrt._io._cli_find import (_OUTPUT_LIMIT, _VERSION_LINE, Candidate, CandidateKind, DiscoveryResult, _norm_platform,
                                   discover_cli)

__all__ = [
    "ProbeResult",
    "VersionInfo",
    "discover_cli_with_login_shell",
    "launch_argv",
    "spawn_command",
    "probe_version",
    "probe_version_detailed",
    "read_login_shell_path",
]
# ----------------------------------------------------------------------------------------
# launching


def _cmd_quote_arg(arg: str, *, double_escape: bool) -> str:
    """Quote one argument for ``cmd.exe /s /c`` running a batch file.

    First the MSVCRT rules (backslashes before a quote doubled, quote escaped, argument
    wrapped in quotes), then every cmd metacharacter caret-escaped — twice for npm ``.cmd``
    shims, because the shim passes ``%*`` through cmd a second time.
    """
    arg = re.sub(r'(\\*)"', lambda m: m.group(1) * 2 + '\\"', arg)
    arg = re.sub(r"(\\*)$", lambda m: m.group(1) * 2, arg)
    arg = f'"{arg}"'
    meta = re.compile(r'([()\][%!^"`<>&|;, *?])')
    arg = meta.sub(r"^\1", arg)
    if double_escape:
        arg = meta.sub(r"^\1", arg)
    return arg


def _cmd_quote_command(cmd: str) -> str:
    return re.sub(r'([()\][%!^"`<>&|;, *?])', r"^\1", cmd)


def _comspec(comspec: str | None) -> str:
    return comspec or os.environ.get("ComSpec") or os.environ.get("COMSPEC") or r"C:\Windows\System32\cmd.exe"


def launch_argv(candidate: Candidate, args: Sequence[str], *, comspec: str | None = None) -> list[str]:
    """The argv that runs ``candidate`` with ``args`` (for display and for POSIX spawning).

    Native binaries, npm launchers and shims run as themselves (the launcher picks its
    platform binary; its ``#!`` line needs ``node`` on ``PATH``). On Windows a bare
    ``codex.js`` runs through ``node``, and a ``.cmd``/``.bat`` shim through
    ``cmd.exe /d /s /c "<quoted line>"`` (R-CLI-8) — hand :func:`spawn_command` to the
    process API there, since that last element must reach ``CreateProcess`` verbatim.
    """
    path = str(candidate.path)
    if candidate.platform == "win32":
        if candidate.kind in (CandidateKind.CMD_SHIM, CandidateKind.CMD_SCRIPT):
            double = candidate.kind is CandidateKind.CMD_SHIM
            line = " ".join([_cmd_quote_command(path)] + [_cmd_quote_arg(a, double_escape=double) for a in args])
            return [_comspec(comspec), "/d", "/s", "/c", f'"{line}"']
        if candidate.path.suffix.lower() == ".js":
            return ["node", path, *args]
    return [path, *args]


def spawn_command(candidate: Candidate, args: Sequence[str], *, comspec: str | None = None) -> list[str] | str:
    """What to give ``trio.open_process``: the argv, except for Windows batch shims, where it
    is the complete command line as one string (passed to ``CreateProcess`` unchanged)."""
    argv = launch_argv(candidate, args, comspec=comspec)
    if candidate.platform == "win32" and candidate.kind in (CandidateKind.CMD_SHIM, CandidateKind.CMD_SCRIPT):
        return subprocess.list2cmdline(argv[:4]) + " " + argv[4]
    return argv


# ----------------------------------------------------------------------------------------
# bounded child processes (the only spawning in CLI discovery)


@attrs.frozen
class _RunOutcome:
    returncode: int | None  # None: killed at the timeout
    stdout: bytes
    stderr: bytes
    timed_out: bool


async def _run_bounded(
    command: Sequence[str] | str,
    *,
    env: Mapping[str, str] | None,
    timeout: float,
    limit: int = _OUTPUT_LIMIT,
    new_session: bool = True,
) -> _RunOutcome:
    """Run a short-lived child with stdin closed, keep at most ``limit`` bytes of each output,
    kill it at ``timeout`` and always reap it. On POSIX it runs in a session of its own and
    whatever is left of its process group afterwards is killed too (an npm launcher's native
    child, a wrapper script's ``sleep``): nothing it started outlives the call."""
    kwargs: dict[str, Any] = {}
    if new_session and os.name == "posix":
        kwargs["start_new_session"] = True
    proc = await trio.lowlevel.open_process(
        command if isinstance(command, str) else list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        **kwargs,
    )
    out = bytearray()
    err = bytearray()

    async def drain(stream: Any, buf: bytearray) -> None:
        while True:
            chunk = await stream.receive_some(16384)
            if not chunk:
                return
            room = limit - len(buf)
            if room > 0:
                buf += chunk[:room]

    timed_out = False
    try:
        with trio.move_on_after(timeout) as cs:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain, proc.stdout, out)
                nursery.start_soon(drain, proc.stderr, err)
            await proc.wait()
        timed_out = cs.cancelled_caught
    finally:
        with trio.CancelScope(shield=True):
            group = new_session and os.name == "posix"
            if proc.returncode is None:
                if group:
                    try:
                        os.killpg(proc.pid, _signal.SIGKILL)
                    except OSError:
                        proc.kill()
                else:
                    proc.kill()
                await proc.wait()
            if group:
                # The leader is gone; members of its group may not be (the group id cannot be
                # reused while any member lives, so this reaches only what the child started).
                try:
                    os.killpg(proc.pid, _signal.SIGKILL)
                except OSError:
                    pass
            for s in (proc.stdout, proc.stderr):
                if s is not None:
                    await s.aclose()
    return _RunOutcome(None if timed_out else proc.returncode, bytes(out), bytes(err), timed_out)


@attrs.frozen
class VersionInfo:
    """A confirmed installation: ``codex-cli <version>`` printed with exit status 0 (R-CLI-7)."""

    version: str
    line: str
    path: Path


@attrs.frozen
class ProbeResult:
    """The full outcome of a version probe: ``version`` or why there is none."""

    path: Path
    version: VersionInfo | None
    outcome: str  #: "ok", "timeout", "spawnFailed", "exitNonZero", "noVersionLine"
    detail: str
    returncode: int | None = None


def _last_line(data: bytes, limit: int = 240) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:limit] if lines else ""


async def probe_version_detailed(
    target: Candidate | os.PathLike[str] | str,
    *,
    timeout: float = 5.0,
    env: Mapping[str, str] | None = None,
) -> ProbeResult:
    """Run ``<cli> --version`` once (R-CLI-7): a separate, explicit call, never part of
    discovery; it starts no app-server and codexrt reads no config or auth for it.

    Installed only when it exits 0 and a stdout line is ``codex-cli X.Y.Z`` (warning lines
    before it are tolerated). The child is killed and reaped at ``timeout``; cancelling the
    call does the same.
    """
    if isinstance(target, Candidate):
        command: Sequence[str] | str = spawn_command(target, ["--version"])
        path = target.path
    else:
        path = Path(os.fspath(target))
        command = [str(path), "--version"]
    try:
        run = await _run_bounded(command, env=env, timeout=timeout)
    except OSError as exc:
        return ProbeResult(path, None, "spawnFailed", f"could not start: {exc.strerror or exc}")
    if run.timed_out:
        return ProbeResult(path, None, "timeout", f"no answer to --version within {timeout:g} s")
    if run.returncode != 0:
        tail = _last_line(run.stderr) or _last_line(run.stdout)
        detail = f"--version exited with status {run.returncode}" + (f": {tail}" if tail else "")
        return ProbeResult(path, None, "exitNonZero", detail, run.returncode)
    for line in run.stdout.decode("utf-8", "replace").splitlines():
        m = _VERSION_LINE.match(line)
        if m:
            info = VersionInfo(m.group(1), line.strip(), path)
            return ProbeResult(path, info, "ok", line.strip(), 0)
    return ProbeResult(path, None, "noVersionLine", "--version printed no `codex-cli X.Y.Z` line", 0)


async def probe_version(
    target: Candidate | os.PathLike[str] | str,
    *,
    timeout: float = 5.0,
    env: Mapping[str, str] | None = None,
) -> VersionInfo | None:
    """:func:`probe_version_detailed`, reduced to the version or None."""
    return (await probe_version_detailed(target, timeout=timeout, env=env)).version


_PATH_BEGIN = "__CODEXRT_PATH_BEGIN__"
_PATH_END = "__CODEXRT_PATH_END__"


async def read_login_shell_path(
    *,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    timeout: float = 3.0,
) -> str | None:
    """The ``PATH`` of the user's login shell (``$SHELL -l -c``), or None.

    Bounded by ``timeout`` (then the shell's process group is killed and reaped); profile
    noise on stdout is skipped by markers; the shell's stderr is discarded, never printed.
    Never on Windows (no POSIX shell probe there).
    """
    if _norm_platform(platform) == "win32":
        return None
    env = os.environ if env is None else env
    shell = env.get("SHELL") or "/bin/sh"
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK):
        return None
    script = f"printf '%s%s%s' '{_PATH_BEGIN}' \"$PATH\" '{_PATH_END}'"
    try:
        run = await _run_bounded([shell, "-l", "-c", script], env=env, timeout=timeout, new_session=True)
    except OSError:
        return None
    if run.timed_out or run.returncode != 0:
        return None
    text = run.stdout.decode("utf-8", "replace")
    start = text.rfind(_PATH_BEGIN)
    end = text.find(_PATH_END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return text[start + len(_PATH_BEGIN) : end] or None



async def discover_cli_with_login_shell(*, login_shell_timeout: float = 3.0, **kwargs: Any) -> DiscoveryResult:
    """:func:`discover_cli`, then — only if it found nothing and not on Windows — one bounded
    login-shell ``PATH`` lookup and a second, filesystem-only pass over its entries.

    Cancelling it kills and reaps the shell.
    """
    kwargs.pop("login_shell_path", None)
    result = discover_cli(**kwargs)
    if result.candidates or _norm_platform(kwargs.get("platform")) == "win32":
        return result
    shell_path = await read_login_shell_path(env=kwargs.get("env"), timeout=login_shell_timeout)
    if shell_path is None:
        return result
    return discover_cli(**kwargs, login_shell_path=lambda: shell_path)
