"""What to tell the user when no Codex CLI starts (R-CLI-6), and the tested-range warning.

:func:`format_unavailable` builds the failure text and the machine-readable
``codexCliUnavailable`` diagnostic once every candidate has failed. The overview is in
:mod:`codexrt._io._discovery`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs

from codexrt._sansio._errors import CliUnavailable, child_exited_message
from codexrt._io._cli_find import (INSTALL_COMMAND, INSTALL_URL, NEWEST_TESTED_CLI, OLDEST_TESTED_CLI, Candidate,
                                   CandidateKind, DiscoveryResult, _norm_platform)

__all__ = [
    "Attempt",
    "cause_hint",
    "format_unavailable",
    "stderr_reason",
    "tested_range_warning",
    "unavailable_error",
    "update_hint",
]
# ----------------------------------------------------------------------------------------
# diagnostics (R-CLI-6)


@attrs.frozen
class Attempt:
    """How one startup attempt with ``candidate`` ended (filled in by the runtime, R-CLI-5)."""

    candidate: Candidate
    outcome: str  #: short human text, e.g. "spawn failed: ENOENT", "initialize refused: …"
    returncode: int | None = None
    signal: int | None = None
    code: str | None = None  #: the error code of the failure, e.g. "CHILD_EXITED"
    #: What the CLI itself said when it stopped (a redacted line of its stderr), if anything.
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self.candidate.to_dict()
        d.update(outcome=self.outcome, exitCode=self.returncode, signal=self.signal, errorCode=self.code,
                 reason=self.reason)
        return d


def _set_codex_bin_help(platform: str) -> str:
    if platform == "win32":
        return 'setx CODEX_BIN "C:\\path\\to\\codex.exe"'
    return "export CODEX_BIN=/path/to/codex"


#: A CLI's own start-up complaint that means "this release is too old (or too new) for the
#: arguments codexrt gives it" — the one start-up failure an update fixes.
_VERSION_CAUSE = re.compile(
    r"unrecognized subcommand|unexpected argument|unknown (sub)?command|no such (sub)?command|"
    r"unsupported protocol|requires a newer|newer version", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ERROR_LINE = re.compile(r"^(error|fatal)\b\s*[:\[]", re.I)  # ``Error: …`` (anyhow), ``error[E…]``, ``fatal: …``
_FRAME = re.compile(r"^(\d+:\s|at\s|stack backtrace:?$|backtrace:?$)", re.I)
_ERRORISH = re.compile(r"\b(error|fatal|failed|invalid|not supported|no longer supported|unknown|refused)\b", re.I)


def stderr_reason(tail: Sequence[str] | None, limit: int = 300) -> str | None:
    """The line of a CLI's (already redacted) stderr tail that says why it stopped: the last
    ``Error: …`` line, else the last line that reads like an error, else the last non-empty
    line — backtrace frames skipped, ANSI colours removed, cut at ``limit`` characters. None
    for an empty tail."""
    lines = [_ANSI.sub("", str(ln)).strip() for ln in (tail or [])]
    # Backtrace frames (``6: <unknown>``, ``at src/main.rs:3``) and their heading say nothing.
    lines = [ln for ln in lines if ln and not _FRAME.match(ln)]
    if not lines:
        return None
    pick = (next((ln for ln in reversed(lines) if _ERROR_LINE.match(ln)), None)
            or next((ln for ln in reversed(lines) if _ERRORISH.search(ln)), lines[-1]))
    return pick if len(pick) <= limit else pick[: limit - 1] + "…"


def cause_hint(attempt: Attempt | None, platform: str | None = None) -> str | None:
    """A hint that fits how ``attempt`` ended, or None when the generic one should do: the
    update hint only when the version is the cause (the CLI rejected codexrt's arguments, or
    refused the handshake); the CLI's own complaint otherwise."""
    if attempt is None:
        return None
    set_bin = _set_codex_bin_help(_norm_platform(platform))
    reason = attempt.reason
    if reason and _VERSION_CAUSE.search(reason):
        return update_hint(platform)
    if reason:
        return (f"The Codex CLI stopped at start-up and said why: {reason!r}. Fix what it names (often a "
                "setting in CODEX_HOME/config.toml) and try again; `codexrt doctor` shows which CLI is used, "
                f"and CODEX_BIN chooses another ({set_bin}).")
    if attempt.code == "INITIALIZE_FAILED" and "refused" in attempt.outcome:
        return update_hint(platform)
    if attempt.returncode is not None or attempt.signal is not None:
        return ("The Codex CLI exited before the app-server handshake without saying why: check that it runs "
                f"(`codexrt doctor` shows its path and version); reinstall it if it does not ({INSTALL_COMMAND}@latest "
                f"or {INSTALL_URL}), or point CODEX_BIN at a working `codex` executable ({set_bin}).")
    return None


def _hint(result: DiscoveryResult, attempts: Sequence[Attempt], platform: str) -> str:
    set_bin = _set_codex_bin_help(platform)
    launcher_missing = [
        c
        for c in result.candidates
        if c.kind in (CandidateKind.NPM_LAUNCHER, CandidateKind.NPM_SHIM, CandidateKind.CMD_SHIM) and not c.confirmed
    ]
    if not result.candidates:
        return (
            f"Install the Codex CLI ({INSTALL_COMMAND}, or the standalone installer: {INSTALL_URL}), "
            f"or point CODEX_BIN at an existing `codex` executable ({set_bin})."
        )
    if launcher_missing and len(launcher_missing) == len(result.candidates):
        return (
            f"The npm package is missing its platform binary: reinstall it with {INSTALL_COMMAND}@latest "
            f"(no need to uninstall first), or point CODEX_BIN at a working `codex` executable ({set_bin})."
        )
    return cause_hint(attempts[-1] if attempts else None, platform) or update_hint(platform)


def _version_tuple(version: str) -> tuple[int, ...] | None:
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(x) for x in m.groups()) if m else None


def tested_range_warning(version: str | None) -> str | None:
    """A warning when ``version`` is outside the tested range (older than
    :data:`OLDEST_TESTED_CLI` or newer than :data:`NEWEST_TESTED_CLI`), else None."""
    v = _version_tuple(version) if version else None
    if v is None:
        return None
    if v < (_version_tuple(OLDEST_TESTED_CLI) or ()):
        return (f"codex-cli {version} is older than the oldest release codexrt is tested with ({OLDEST_TESTED_CLI}); "
                f"update it ({INSTALL_COMMAND}@latest)")
    if v > (_version_tuple(NEWEST_TESTED_CLI) or ()):
        return (f"codex-cli {version} is newer than the newest release codexrt is tested with ({NEWEST_TESTED_CLI}); "
                "it will probably work, but its protocol may have changed")
    return None


def update_hint(platform: str | None = None) -> str:
    """The hint when CLIs were found but none started: update, or point ``CODEX_BIN`` elsewhere."""
    set_bin = _set_codex_bin_help(_norm_platform(platform))
    return (
        f"Update the Codex CLI ({INSTALL_COMMAND}@latest or the standalone installer: {INSTALL_URL}; "
        f"no need to uninstall the npm package), or point CODEX_BIN at a working `codex` executable ({set_bin})."
    )


def format_unavailable(
    result: DiscoveryResult,
    attempts: Sequence[Attempt] = (),
    *,
    platform: str | None = None,
    hint: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The R-CLI-6 failure text and its machine-readable diagnostic (``hint`` replaces the one
    chosen from the attempts).

    The message starts with the canonical ``codex app-server exited (code=…, signal=…)`` of
    the last attempt whose child really ran and exited, and only then; when nothing could be spawned it
    says so (``codex app-server could not be started`` / ``no Codex CLI found``) — the error's
    type, ``CliUnavailable``, is what callers match. Then one line per candidate with its outcome (candidates not tried say so), one
    line per rejected path, and one actionable hint. The diagnostic is
    ``{"codexCliUnavailable": {...}}`` for ``CodexError.details``.
    """
    plat = _norm_platform(platform or (result.candidates[0].platform if result.candidates else None))
    exited = [a for a in attempts if a.returncode is not None or a.signal is not None]
    last = exited[-1] if exited else None
    if last is not None:
        head = child_exited_message(last.returncode, last.signal)  # a child really ran and exited
    else:
        head = "codex app-server could not be started"
    by_path = {str(a.candidate.real_path): a for a in attempts}
    lines: list[str] = []
    if result.candidates:
        lines.append(f"{head}: no usable Codex CLI ({len(attempts)} of {len(result.candidates)} candidates tried)")
    else:
        lines.append("no Codex CLI found (nothing was started)")
    cand_rows: list[dict[str, Any]] = []
    for c in result.candidates:
        a = by_path.get(str(c.real_path))
        status = "confirmed" if c.confirmed else f"unconfirmed: {c.note}" if c.note else "unconfirmed"
        outcome = a.outcome if a else "not tried"
        lines.append(f"  - {c.path} [{c.source}, {c.kind.value}, {status}]: {outcome}")
        cand_rows.append(a.to_dict() if a else {**c.to_dict(), "outcome": outcome})
    for r in result.rejected:
        lines.append(f"  - {r.path} [{r.source}, rejected]: {r.reason}")
    hint = hint or _hint(result, attempts, plat)
    lines.append(f"Hint: {hint}")
    mode = "notInstalled" if not result.candidates else "allCandidatesFailed"
    diag = {
        "codexCliUnavailable": {
            "mode": mode,
            "platform": plat,
            "candidates": cand_rows,
            "rejected": [r.to_dict() for r in result.rejected],
            "hint": hint,
            "installCommand": INSTALL_COMMAND,
            "installUrl": INSTALL_URL,
            "setCodexBin": _set_codex_bin_help(plat),
        }
    }
    return "\n".join(lines), diag


def unavailable_error(
    result: DiscoveryResult, attempts: Sequence[Attempt] = (), *, platform: str | None = None
) -> CliUnavailable:
    """A :class:`CliUnavailable` carrying :func:`format_unavailable`'s message and diagnostic."""
    message, diag = format_unavailable(result, attempts, platform=platform)
    return CliUnavailable(message, details=diag)
