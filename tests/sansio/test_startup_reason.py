"""Which line of a CLI's stderr says why it stopped, and which hint fits it (R-CLI-6, issue 33)."""

from __future__ import annotations

from pathlib import Path

from codexrt._io._cli_find import Candidate, CandidateKind
from codexrt._io._discovery import Attempt, cause_hint, stderr_reason

REAL_0_171_CONFIG_REFUSAL = [  # codex 0.171.0 with RUST_BACKTRACE=1 and a removed setting
    'WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries',
    'Error: approval_policy = "untrusted" is no longer supported; remove this setting',
    "",
    "Stack backtrace:",
    "   0: <unknown>",
    "   6: <unknown>",
]


def _attempt(reason: str | None, *, code: str = "CHILD_EXITED", outcome: str = "exited", rc: int | None = 1) -> Attempt:
    cand = Candidate(Path("/x/codex"), Path("/x/codex"), "PATH", True, CandidateKind.NATIVE, "linux")
    return Attempt(cand, outcome, rc, None, code, reason)


def test_the_error_line_wins_over_warnings_and_backtrace_frames():
    assert stderr_reason(REAL_0_171_CONFIG_REFUSAL) == (
        'Error: approval_policy = "untrusted" is no longer supported; remove this setting')
    assert stderr_reason(["\x1b[31mERROR\x1b[0m something broke", "bye"]) == "ERROR something broke"
    assert stderr_reason(["just a line"]) == "just a line"
    assert stderr_reason([]) is None and stderr_reason(None) is None and stderr_reason(["  ", "1: <unknown>"]) is None
    assert len(stderr_reason(["Error: " + "x" * 1000]) or "") == 300


def test_the_update_hint_only_when_the_version_is_the_cause():
    assert (cause_hint(_attempt("error: unrecognized subcommand 'app-server'")) or "").startswith("Update the Codex CLI")
    assert (cause_hint(_attempt(None, code="INITIALIZE_FAILED", outcome="initialize was refused: x", rc=None))
            or "").startswith("Update the Codex CLI")
    config = cause_hint(_attempt(stderr_reason(REAL_0_171_CONFIG_REFUSAL)))
    assert config is not None and "Update" not in config and "no longer supported" in config
    silent = cause_hint(_attempt(None, rc=0))
    assert silent is not None and "without saying why" in silent and "Update the Codex CLI" not in silent
    assert cause_hint(None) is None
