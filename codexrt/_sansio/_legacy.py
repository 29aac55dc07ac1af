"""Streaming parser for Codex rollout files ("legacy JSONL history", R-H-3). No I/O.

A rollout lives at ``CODEX_HOME/sessions/YYYY/MM/DD/rollout-<stamp>-<threadId>.jsonl``; one JSON
object per line: ``{"timestamp", "type", "payload"[, "metadata"]}`` and, in paginated-mode
files only, ``"ordinal"`` (research §11). Users' files reach hundreds of MB, so:

Theory of operation: :meth:`LegacyParser.feed` takes arbitrary byte chunks; a
:class:`~codexrt._sansio._framing.LineBuffer` cuts them into lines (memory bounded by
``max_line`` plus one chunk), the lines are decoded by a msgspec decoder built once — a
chunk's lines in one ``decode_lines`` call when that is exactly the line-by-line result, else
one by one — and every good line becomes one :class:`LegacyRecord` returned at once — the
parser never holds more than the unfinished line. Nothing is fatal:

* a line that is not a JSON object with a string ``type`` is *invalid*: counted, reported in
  :attr:`LegacyParser.problems` (bounded list, the count is exact) and skipped;
* an unterminated last line (a writer killed mid-write) is tried as JSON at :meth:`close`;
  when it does not decode it is reported as ``truncated`` — not an error of the file;
* an over-long line is reported as ``oversized`` (its bytes are discarded, never buffered);
* an unknown ``type`` or payload ``type`` is kept as a generic record (``known=False``), so a
  newer codex never makes an older reader drop data silently.

The payload stays a plain ``dict`` (msgspec decodes it straight to builtins): the projection
(:mod:`codexrt._sansio._projection`) reads native items and rollout payloads with the same
dict-walking code, and a typed model per record kind would only duplicate the schema the
server already owns.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgspec

from ._framing import LineBuffer, OversizedLine

__all__ = [
    "LegacyRecord",
    "LegacyProblem",
    "LegacyStats",
    "LegacyParser",
    "KNOWN_RECORD_TYPES",
    "KNOWN_RESPONSE_ITEM_TYPES",
    "KNOWN_EVENT_MSG_TYPES",
    "DEFAULT_MAX_ROLLOUT_LINE",
    "MAX_REPORTED_PROBLEMS",
]

#: Rollout lines carry whole tool outputs and base64 images; 64 MiB bounds one line.
DEFAULT_MAX_ROLLOUT_LINE = 64 * 1024 * 1024
#: At most this many problems are kept with details; :attr:`LegacyStats.invalid` stays exact.
MAX_REPORTED_PROBLEMS = 100

KNOWN_RECORD_TYPES = frozenset(
    {
        "session_meta",
        "turn_context",
        "world_state",
        "token_usage_record",
        "response_item",
        "event_msg",
        "compacted",
        "inter_agent_communication",
    }
)
KNOWN_RESPONSE_ITEM_TYPES = frozenset(
    {
        "message",
        "agent_message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "tool_search_call",
        "tool_search_output",
        "web_search_call",
        "image_generation_call",
        "compaction",
        "context_compaction",
        "additional_tools",
    }
)
KNOWN_EVENT_MSG_TYPES = frozenset(
    {
        "task_started",
        "task_complete",
        "turn_started",
        "turn_complete",
        "turn_aborted",
        "token_count",
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "item_completed",
        "thread_settings_applied",
        "patch_apply_end",
        "exec_command_end",
        "mcp_tool_call_end",
        "web_search_end",
        "image_generation_end",
        "view_image_tool_call",
        "context_compacted",
        "entered_review_mode",
        "exited_review_mode",
        "thread_rolled_back",
        "thread_goal_updated",
        "sub_agent_activity",
        "error",
    }
)
_SUBTYPED = {"response_item": KNOWN_RESPONSE_ITEM_TYPES, "event_msg": KNOWN_EVENT_MSG_TYPES}


class _Line(msgspec.Struct):
    """The envelope of one rollout line; unknown top-level keys are ignored."""

    type: str
    payload: Any = None
    timestamp: Any = None
    ordinal: Any = None
    metadata: Any = None


_DECODER = msgspec.json.Decoder(_Line)


@attrs.frozen
class LegacyRecord:
    """One good rollout line.

    ``type`` is the top-level type; ``subtype`` the payload's ``type`` for ``response_item`` /
    ``event_msg`` (else ``None``). ``known`` is False for a type (or subtype) this version does
    not know — such records are kept, never dropped. ``line_no`` is 1-based. ``payload`` is the
    decoded JSON (a dict for every record codex writes; anything else is kept as is).
    """

    line_no: int
    type: str
    subtype: str | None
    payload: Any
    timestamp: str | None = None
    ordinal: int | None = None
    metadata: Any = None
    known: bool = True


@attrs.frozen
class LegacyProblem:
    """A skipped line: ``kind`` is ``invalid`` / ``oversized`` / ``truncated``."""

    line_no: int
    kind: str
    detail: str
    size: int


@attrs.define
class LegacyStats:
    """Counters of one parse (exact, whatever the problem list kept)."""

    lines: int = 0
    records: int = 0
    unknown: int = 0
    invalid: int = 0
    oversized: int = 0
    truncated_tail: bool = False
    bytes: int = 0


class LegacyParser:
    """Incremental rollout parser: ``feed(chunk) -> [LegacyRecord]``, then ``close()``.

    ``session_meta`` is the payload of the first ``session_meta`` record seen (the thread id
    is ``session_meta["id"]``), or ``None``.
    """

    __slots__ = ("_lines", "_line_no", "_closed", "_batch", "stats", "problems", "session_meta")

    def __init__(self, *, max_line: int = DEFAULT_MAX_ROLLOUT_LINE, batch: bool = True) -> None:
        self._lines = LineBuffer(max_line)
        self._batch = batch  # decode a chunk's lines in one call when that is exact (see _feed_batch)
        self._line_no = 0
        self._closed = False
        self.stats = LegacyStats()
        self.problems: list[LegacyProblem] = []
        self.session_meta: dict[str, Any] | None = None

    def __repr__(self) -> str:
        s = self.stats
        return (
            f"<LegacyParser line={self._line_no} records={s.records} invalid={s.invalid} "
            f"closed={self._closed}>"
        )

    def feed(self, chunk: bytes) -> list[LegacyRecord]:
        """Parse what ``chunk`` completes; return the new records in file order."""
        if self._closed:
            raise ValueError("LegacyParser.feed() after close()")
        self.stats.bytes += len(chunk)
        out: list[LegacyRecord] = []
        frames = self._lines.feed(chunk)
        if self._batch and len(frames) > 1 and self._feed_batch(frames, out):
            return out
        for frame in frames:
            self._line(frame, out, final=False)
        return out

    def _feed_batch(self, frames: list[Any], out: list[LegacyRecord]) -> bool:
        """All of a chunk's lines in one ``decode_lines`` call — only when that is exactly
        what decoding them one by one gives: every line starts with ``{`` and ends with ``}``
        (so no value can run on into the next line: after a ``}`` only ``,``/``}``/``]`` may
        continue one), the whole batch decodes, and it yields one value per line. Otherwise
        (``False``, nothing recorded) the lines go one by one, with their problems."""
        for f in frames:
            if type(f) is not bytes or f[:1] != b"{" or f[-1:] != b"}":
                return False
        try:
            envs = _DECODER.decode_lines(b"\n".join(frames))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        if len(envs) != len(frames):
            return False
        # _record, inlined for the batch (same fields, same counters)
        stats, line_no, append, subtyped, known_types = self.stats, self._line_no, out.append, _SUBTYPED, KNOWN_RECORD_TYPES
        unknown = 0
        for env in envs:
            line_no += 1
            t, payload = env.type, env.payload
            if t in subtyped:
                st = payload.get("type") if isinstance(payload, dict) else None
                subtype = st if isinstance(st, str) else None
                known = subtype in subtyped[t]
            else:
                subtype = None
                known = t in known_types
                if t == "session_meta" and self.session_meta is None and isinstance(payload, dict):
                    self.session_meta = payload
            if not known:
                unknown += 1
            ts, ordinal = env.timestamp, env.ordinal
            append(LegacyRecord(line_no, t, subtype, payload, ts if isinstance(ts, str) else None,
                                ordinal if isinstance(ordinal, int) and not isinstance(ordinal, bool) else None,
                                env.metadata, known))
        n = len(envs)
        self._line_no = line_no
        stats.lines += n
        stats.records += n
        stats.unknown += unknown
        return True

    def close(self) -> list[LegacyRecord]:
        """End of file: parse the unterminated tail, if any. Idempotent."""
        if self._closed:
            return []
        self._closed = True
        out: list[LegacyRecord] = []
        for frame in self._lines.close():
            self._line(frame, out, final=True)
        return out

    # -- internals ---------------------------------------------------------------------------

    def _problem(self, kind: str, detail: str, size: int) -> None:
        if len(self.problems) < MAX_REPORTED_PROBLEMS:
            self.problems.append(LegacyProblem(self._line_no, kind, detail, size))

    def _line(self, frame: bytes | OversizedLine, out: list[LegacyRecord], *, final: bool) -> None:
        self._line_no += 1
        self.stats.lines += 1
        if isinstance(frame, OversizedLine):
            self.stats.oversized += 1
            self.stats.invalid += 1
            self._problem("oversized", f"line of {frame.size} bytes exceeds {frame.limit}", frame.size)
            return
        if not frame.strip():
            self.stats.lines -= 1  # blank lines are not lines of the transcript
            self._line_no -= 1
            return
        try:
            env = _DECODER.decode(frame)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            if final:
                self.stats.truncated_tail = True
                self._problem("truncated", "unterminated last line does not decode", len(frame))
            else:
                self.stats.invalid += 1
                self._problem("invalid", str(exc)[:200], len(frame))
            return
        self._record(env, out)

    def _record(self, env: _Line, out: list[LegacyRecord]) -> None:
        payload = env.payload
        subtype: str | None = None
        known = env.type in KNOWN_RECORD_TYPES
        if env.type in _SUBTYPED:
            st = payload.get("type") if isinstance(payload, dict) else None
            subtype = st if isinstance(st, str) else None
            known = subtype in _SUBTYPED[env.type]
        if not known:
            self.stats.unknown += 1
        if env.type == "session_meta" and self.session_meta is None and isinstance(payload, dict):
            self.session_meta = payload
        ts = env.timestamp if isinstance(env.timestamp, str) else None
        ordinal = env.ordinal if isinstance(env.ordinal, int) and not isinstance(env.ordinal, bool) else None
        self.stats.records += 1
        out.append(
            LegacyRecord(
                line_no=self._line_no,
                type=env.type,
                subtype=subtype,
                payload=payload,
                timestamp=ts,
                ordinal=ordinal,
                metadata=env.metadata,
                known=known,
            )
        )
