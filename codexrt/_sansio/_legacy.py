"""Streaming parser for Codex rollout files ("legacy JSONL history", R-H-3). No I/O.

A rollout lives at ``CODEX_HOME/sessions/YYYY/MM/DD/rollout-<stamp>-<threadId>.jsonl``; one JSON
object per line: ``{"timestamp", "type", "payload"[, "metadata"]}`` and, in paginated-mode
files only, ``"ordinal"`` (research §11). Users' files reach hundreds of MB, so:

Theory of operation: :meth:`LegacyParser.feed` takes arbitrary byte chunks; a
:class:`~codexrt._sansio._framing.LineBuffer` cuts them into lines (memory bounded by
``max_line`` plus one chunk), the lines are decoded by a msgspec decoder built once — a
chunk's lines in one ``decode_lines`` call straight into :class:`LegacyRecord` structs when
that is exactly the line-by-line result, else one by one — and every good line becomes one
:class:`LegacyRecord` returned at once — the parser never holds more than the unfinished line
and the current chunk's records. Nothing is fatal:

* a line that is not a JSON object with a string ``type`` is *invalid*: counted, reported in
  :attr:`LegacyParser.problems` (bounded list, the count is exact) and skipped;
* an unterminated last line (a writer killed mid-write) is tried as JSON at :meth:`close`;
  when it does not decode it is reported as ``truncated`` — not an error of the file;
* an over-long line is reported as ``oversized`` (its bytes are discarded, never buffered);
* a line nested too deeply for the decoder (msgspec raises ``RecursionError`` near the
  interpreter's recursion limit — a hostile line 200,000 levels deep) is reported as
  ``too_deep`` and skipped: one line, never the whole file;
* an unknown ``type`` or payload ``type`` is kept as a generic record (``known=False``), so a
  newer codex never makes an older reader drop data silently;
* the mid-2025 format (before the ``{timestamp, type, payload}`` envelope) is read too: a first
  line ``{id, timestamp, instructions…}`` without ``type`` is the ``session_meta``, a bare
  response item (``{"type": "message", "role": …}``) is a ``response_item`` record whose payload is
  the whole line, and its ``{"record_type": "state"}`` markers are skipped (not records, not
  problems).

The payload stays a plain ``dict`` (msgspec decodes it straight to builtins): the projection
(:mod:`codexrt._sansio._projection`) reads native items and rollout payloads with the same
dict-walking code, and a typed model per record kind would only duplicate the schema the
server already owns.
"""

from __future__ import annotations

from typing import Any, Union

import attrs
import msgspec
import msgspec.structs

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


class LegacyRecord(msgspec.Struct, frozen=True):
    """One good rollout line.

    ``type`` is the top-level type; ``subtype`` the payload's ``type`` for ``response_item`` /
    ``event_msg`` (else ``None``). ``known`` is False for a type (or subtype) this version does
    not know — such records are kept, never dropped. ``line_no`` is 1-based. ``payload`` is the
    decoded JSON (a dict for every record codex writes; anything else is kept as is).

    A frozen ``msgspec.Struct`` (build it with keywords): the parser's fast path decodes a
    chunk's lines straight into records and then sets ``line_no`` / ``subtype`` / ``known``,
    which are never taken from the line (see :meth:`LegacyParser._feed_block`).
    """

    type: str
    payload: Any = None
    timestamp: Union[str, None] = None
    ordinal: Union[int, None] = None
    metadata: Any = None
    line_no: int = 0
    subtype: Union[str, None] = None
    known: bool = True


#: The fast path's decoder: lines whose timestamp is not a string or ordinal not an integer (or
#: that carry a ``line_no`` / ``subtype`` / ``known`` key of another type) fail its validation,
#: and their chunk goes line by line through the lenient ``_Line`` decode instead.
_RECORDS = msgspec.json.Decoder(LegacyRecord)
_set = msgspec.structs.force_setattr


@attrs.frozen
class LegacyProblem:
    """A skipped line: ``kind`` is ``invalid`` / ``oversized`` / ``too_deep`` / ``truncated``."""

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


def _block_lines(block: bytes) -> int:
    """How many lines ``block`` (complete lines, ending in ``\\n``) has when every one starts
    with ``{`` and ends with ``}``; else 0. One ``find`` (memchr) per line: a chunk's lines are
    hundreds of bytes long, and this is several times cheaper than a ``bytes.count`` pass."""
    end = len(block) - 1
    if end < 1 or block[0] != 0x7B or block[end - 1] != 0x7D:
        return 0
    find, n = block.find, 1
    i = find(b"\n")
    while i != end:
        if block[i - 1] != 0x7D or block[i + 1] != 0x7B:
            return 0
        n += 1
        i = find(b"\n", i + 1)
    return n


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
        if self._batch:
            block = self._lines.take_block(chunk)
            if block is not None:
                if block and self._feed_block(block, out):
                    return out
                frames: list[Any] = block.split(b"\n")
                frames.pop()  # after the last newline: nothing (take_block kept the tail)
                for frame in frames:
                    self._line(frame, out, final=False)
                return out
        for frame in self._lines.feed(chunk):
            self._line(frame, out, final=False)
        return out

    def _feed_block(self, block: bytes, out: list[LegacyRecord]) -> bool:
        """All of a chunk's complete lines (``block``, each ending in ``\\n``) in one
        ``decode_lines`` call straight into records — only when that is exactly what decoding
        them one by one gives: every line starts with ``{`` and ends with ``}`` (so no value can
        run on into the next line: after a ``}`` only ``,``/``}``/``]`` may continue one; see
        :func:`_block_lines`), the whole batch decodes and validates, and it
        yields one value per line. Otherwise (``False``, nothing recorded) the lines go one by
        one, with their problems."""
        n = _block_lines(block)
        if not n:
            return False
        try:
            recs = _RECORDS.decode_lines(block)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return False
        if len(recs) != n:
            return False
        if any(r.payload is None and r.type in KNOWN_RESPONSE_ITEM_TYPES for r in recs):
            return False  # bare mid-2025 response items: their payload is the whole line (see _line)
        # _record for the batch: line_no, subtype and known are always set here (a line's own
        # "line_no"/"subtype"/"known" keys, if any, are overwritten; the defaults are None/True)
        stats, line_no, set_, subtyped, known_types = self.stats, self._line_no, _set, _SUBTYPED, KNOWN_RECORD_TYPES
        unknown = 0
        for rec in recs:
            line_no += 1
            set_(rec, "line_no", line_no)
            t = rec.type
            if t in subtyped:
                p = rec.payload
                st = p.get("type") if type(p) is dict else None
                if type(st) is not str:
                    st = None
                known = st in subtyped[t]
            else:
                st = None
                known = t in known_types
                if t == "session_meta" and self.session_meta is None and type(rec.payload) is dict:
                    self.session_meta = rec.payload
            if st is not rec.subtype:
                set_(rec, "subtype", st)
            if known is not rec.known:
                set_(rec, "known", known)
            if not known:
                unknown += 1
        out += recs
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
        except RecursionError:
            self.stats.invalid += 1
            self._problem("too_deep", "JSON nested too deeply to decode", len(frame))
            return
        except msgspec.ValidationError as exc:
            if self._older_format(frame, out):
                return
            self.stats.invalid += 1
            self._problem("invalid", str(exc)[:200], len(frame))
            return
        except msgspec.DecodeError as exc:
            if final:
                self.stats.truncated_tail = True
                self._problem("truncated", "unterminated last line does not decode", len(frame))
            else:
                self.stats.invalid += 1
                self._problem("invalid", str(exc)[:200], len(frame))
            return
        if env.payload is None and env.type in KNOWN_RESPONSE_ITEM_TYPES:
            try:  # a bare mid-2025 response item: the line is the payload
                whole = msgspec.json.decode(frame)
            except RecursionError:  # its unknown keys were skipped by the envelope decode, not here
                self.stats.invalid += 1
                self._problem("too_deep", "JSON nested too deeply to decode", len(frame))
                return
            env = _Line("response_item", whole, env.timestamp, env.ordinal, env.metadata)
        self._record(env, out)

    def _older_format(self, frame: bytes, out: list[LegacyRecord]) -> bool:
        """A mid-2025 line without ``type``: the first line's session meta (a record) or a
        ``record_type`` marker (skipped). False for anything else (then it is invalid)."""
        try:
            d = msgspec.json.decode(frame)
        except (msgspec.DecodeError, RecursionError):
            return False
        if not isinstance(d, dict):
            return False
        if "record_type" in d:
            self.stats.lines -= 1  # a marker between turns, not a line of the transcript
            self._line_no -= 1
            return True
        if self._line_no == 1 and isinstance(d.get("id"), str) and "timestamp" in d:
            self._record(_Line("session_meta", d, d.get("timestamp")), out)
            return True
        return False

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
