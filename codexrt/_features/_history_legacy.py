"""History from rollout files (R-H-3, R-H-6): the legacy thread list, a rollout transcript,
the local submissions a reader shows as unconfirmed, and which identities a native projection
misses. Part of the history readers; the overview is in :mod:`codexrt._features._history`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from codexrt._io._history_files import iter_rollout, open_regular
from codexrt._io._session_index import decode_line
from codexrt._sansio._errors import HistoryReadFailed
from codexrt._sansio._framing import LineBuffer, OversizedLine
from codexrt._sansio._legacy import LegacyParser, LegacyProblem
from codexrt._sansio._projection import CompactionBoundary, Projector, Reasoning
from codexrt._features._history_values import MASKING_NOTICE, ThreadSummary, Transcript, _TOOL_KINDS

__all__ = ["LocalSubmission", "local_submissions", "legacy_thread_list", "load_rollout_transcript", "missing_identities"]


# ---------------------------------------------------------------------------------------------
# legacy (rollout) sources


#: ``session_index.jsonl`` lines are small (``{"id", "thread_name", "updated_at"}``); a longer one
#: is skipped unread, so a hostile 300 MB line costs one 64 KiB buffer, not its size.
MAX_SESSION_INDEX_LINE = 64 * 1024


def _session_names(codex_home: Path, notices: list[str] | None = None) -> dict[str, str]:
    """Thread names from ``CODEX_HOME/session_index.jsonl`` (the last entry per id wins).
    Streamed with a bounded line buffer; lines too long or nested too deeply are skipped, one
    notice for the file."""
    names: dict[str, str] = {}
    path = codex_home / "session_index.jsonl"
    lines, skipped = LineBuffer(MAX_SESSION_INDEX_LINE), 0

    def take(frames: list[bytes | OversizedLine]) -> None:
        nonlocal skipped
        for line in frames:
            if isinstance(line, OversizedLine):
                skipped += 1
                continue
            d, bad = decode_line(line)
            skipped += bad == "nested too deeply"
            if isinstance(d, dict) and isinstance(d.get("id"), str) and isinstance(d.get("thread_name"), str):
                names[d["id"].lower()] = d["thread_name"]

    try:
        with open_regular(path) as f:
            while chunk := f.read(64 * 1024):
                take(lines.feed(chunk))
        take(lines.close())
    except FileNotFoundError:
        pass
    except OSError as exc:
        if notices is not None:
            notices.append(f"{path}: cannot be read ({exc.strerror or exc}); thread names are not shown")
    if skipped and notices is not None:
        notices.append(f"{path}: {skipped} line(s) too long or nested too deeply were skipped")
    return names


@attrs.frozen
class LocalSubmission:
    """A user message this host submitted (``clientUserMessageId`` = ``client_id``) that the
    native history may not show yet (R-H-1)."""

    client_id: str
    text: str


def local_submissions(rt: Any, thread_id: str) -> list[LocalSubmission]:
    """The runtime's sends to ``thread_id`` not yet finished (queued, dispatching or running),
    in submission order — what a reader shows as unconfirmed until the native pages carry
    their ``clientId``. A finished send is in the native history (or never reached it)."""
    out = []
    for op in list(getattr(rt, "_ops", {}).values()):
        if (op.kind == "send" and op.thread_id == thread_id and op.client_message_id and not op.terminal
                and isinstance(op.payload.get("text"), str)):
            out.append(LocalSubmission(op.client_message_id, op.payload["text"]))
    return out


def legacy_thread_list(codex_home: str | os.PathLike[str], *, index: Any = None, limit: int | None = None,
                       notices: list[str] | None = None) -> list[ThreadSummary]:
    """The legacy list (R-H-6: only when access is inactive): one row per top-level thread,
    newest first, names from ``session_index.jsonl``, previews from the session index cache
    (R-H-9: ``index`` — a :class:`~codexrt._io._session_index.SessionIndex`, default the process's
    :func:`~codexrt._io._session_index.shared_index`); sub-agent and Guardian rollouts are filtered
    out by their ``session_meta`` source. ``limit``: at most that many rows — only the heads
    needed are read. Hostile entries (not regular files, symlinks leaving ``CODEX_HOME``, heads
    nested too deeply, over-long first lines) are one line each in ``notices``, never an error
    of the list. Blocking; run it in a thread."""
    from codexrt._io._session_index import shared_index

    home = Path(codex_home)
    names = _session_names(home, notices)
    seen: set[str] = set()
    out = []
    for e in (index or shared_index(home)).top_level(limit=limit, notices=notices):
        if e.thread_id in seen:
            continue
        seen.add(e.thread_id)
        out.append(ThreadSummary(thread_id=e.thread_id, name=names.get(e.thread_id), preview=e.title,
                                 updated_at=e.mtime_ns // 1_000_000_000, path=e.path, history_mode=e.history_mode,
                                 source="legacy", status="notLoaded"))
    return out


def load_rollout_transcript(
    path: str | os.PathLike[str],
    *,
    thread_id: str | None = None,
    redact: Callable[[str], str] | None = None,
    notices: tuple[str, ...] = (),
    fallback_reason: str | None = None,
    mask: Callable[[Any], Any] | None = None,
) -> Transcript:
    """A whole rollout file projected (streaming; blocking — run it in a worker thread).

    ``mask`` is the privacy-index masking of display records (``Masker(index).mask``,
    R-PRIV-2); ``redact`` a text-level hook (known secret values). Without ``mask`` the
    transcript carries :data:`MASKING_NOTICE` (R-H-3: the index is unavailable)."""
    parser = LegacyParser()
    proj = Projector(thread_id, redact=redact, mask=mask)
    try:
        for rec in iter_rollout(path, parser=parser):
            proj.add_legacy_record(rec)
    except OSError as exc:
        raise HistoryReadFailed(f"cannot read the rollout file {path}: {exc.strerror or exc}",
                                details={"path": str(path)}) from None
    tid = proj.thread_id or thread_id or ""
    all_notices = tuple(notices) + (() if mask is not None else (MASKING_NOTICE,))
    if parser.stats.truncated_tail:
        all_notices += ("the rollout file ends in an unfinished line (a writer may have been killed); it was skipped",)
    all_notices += _skipped_lines_notice(parser.problems, parser.stats.invalid)
    turns = tuple(proj.turns())
    complete = True
    if parser.stats.unknown and not any(g.records for g in turns):
        # never a silently empty transcript, nor a count of 0 for what could not be read
        complete = False
        all_notices += (f"nothing in this rollout file could be shown: {parser.stats.unknown} of its "
                        f"{parser.stats.records} record(s) are of a kind this version does not know (another "
                        "format?); the message count is unknown",)
    return Transcript(thread_id=tid, source="legacy", turns=turns, thread=None, complete=complete,
                      notices=all_notices, pagination=None, fallback_reason=fallback_reason,
                      problems=tuple(parser.problems), wrappers=proj.wrapper_attributions())


_PROBLEM_WORDS = {"too_deep": "nested too deeply", "oversized": "too long", "invalid": "not a JSON record"}


def _skipped_lines_notice(problems: list[LegacyProblem], invalid: int) -> tuple[str, ...]:
    """One notice for the lines the parser skipped (``truncated`` has its own notice)."""
    shown = [p for p in problems if p.kind in _PROBLEM_WORDS][:5]
    if not invalid or not shown:
        return ()
    detail = ", ".join(f"line {p.line_no} ({_PROBLEM_WORDS[p.kind]})" for p in shown)
    more = f" and {invalid - len(shown)} more" if invalid > len(shown) else ""
    return (f"{invalid} line(s) of the rollout file could not be read and were skipped: {detail}{more}",)


_SYNTHETIC_ID = re.compile(r"^(?:L\d+|legacy-turn-\d+|turn-error:.*)$")


def _identity(record_id: str) -> str | None:
    """The call/item identity a display record carries, or ``None`` for ids the projector made
    up (rollout line keys, synthetic turns). A replaced wrapper's records (``<call>#<n>``) carry
    the wrapper's call id."""
    base = record_id.split("#", 1)[0]
    return None if not base or _SYNTHETIC_ID.match(base) else base


def missing_identities(native: Transcript, legacy: Transcript) -> list[str]:
    """R-H-3: what the native projection misses that the legacy transcript identifies — by
    identity, never by counts (extra records of calls the native side has override nothing):

    * ``tool <id>``: a legacy tool record whose call id the native projection lacks;
    * ``reasoning <turn>``: a turn both sides have, with plaintext reasoning only in the legacy
      one (or a reasoning item the native side has only encrypted);
    * ``turn <id>``: a legacy turn with records, before a compaction boundary, that the native
      projection does not have (pre-compaction records).
    """
    n_recs = native.records()
    n_ids = {r.id for r in n_recs}
    n_plain_turns = {r.turn_id for r in n_recs if isinstance(r, Reasoning) and r.state == "plain"}
    n_plain_ids = {r.id for r in n_recs if isinstance(r, Reasoning) and r.state == "plain"}
    n_turns = {g.turn_id for g in native.turns}
    out: list[str] = []
    seen: set[str] = set()
    for r in legacy.records():
        ident = _identity(r.id)
        if r.kind in _TOOL_KINDS and ident is not None and ident not in n_ids and f"tool {ident}" not in seen:
            seen.add(f"tool {ident}")
            out.append(f"tool {ident}")
        elif isinstance(r, Reasoning) and r.state == "plain" and r.turn_id in n_turns:
            lacks = r.turn_id not in n_plain_turns or (ident is not None and ident in n_ids and ident not in n_plain_ids)
            if lacks and f"reasoning {r.turn_id}" not in seen:
                seen.add(f"reasoning {r.turn_id}")
                out.append(f"reasoning {r.turn_id}")
    last_compaction = max((i for i, g in enumerate(legacy.turns)
                           if any(isinstance(r, CompactionBoundary) for r in g.records)), default=-1)
    for i, g in enumerate(legacy.turns):
        if i <= last_compaction and g.records and g.turn_id not in n_turns and _identity(g.turn_id) is not None:
            out.append(f"turn {g.turn_id}")
    return out
