"""The :class:`Projector`: incremental, deduplicating projection of one thread."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from .._legacy import LegacyRecord
from .._sanitize import sanitize_user_text
from .._wrappers import (
    Attribution,
    PollUpdate,
    Receipt,
    ToolRecord,
    WrapperCall,
    attribute_wrapper,
    patch_end_receipts,
    receipts_from_rollout_line,
)
from ._legacy import (
    _CONTEXT_PREFIXES,
    _EXEC_TOOLS,
    COMPACTION_FACET_WINDOW_MS,
    ExecReceipt,
    _core_item_to_native,
    _duration_ms,
    _parse_exec_output,
    _parse_ts,
)
from ._native import _actions, _native_changes, project_native_item
from ._records import (
    AssistantMessage,
    CommandExecution,
    CompactionBoundary,
    ContentBlock,
    DisplayRecord,
    DynamicToolCall,
    ErrorRecord,
    FileChange,
    GenericRecord,
    ImageGeneration,
    ImageSource,
    ImageView,
    McpToolCall,
    Plan,
    PlanStep,
    Reasoning,
    SubAgent,
    TurnGroup,
    UserMessage,
    WebSearch,
)
from ._shapes import (
    _IMAGE_TYPES,
    _TEXT_TYPES,
    _assistant_text,
    _content_blocks,
    _image_from_block,
    _image_from_url,
    _int,
    _join_argv,
    _norm_status,
    _str,
    _texts,
    parse_apply_patch,
)

@attrs.define
class _Entry:
    key: str
    record: Any
    complete: bool
    open: bool
    channel: str  # native | snapshot | response | event
    turn_id: str
    times: tuple[int | None, int | None, int | None] = (None, None, None)  # started, completed, received
    deltas: dict[str, str] = attrs.Factory(dict)


@attrs.define
class _Wrapper:
    """A legacy code-mode ``exec`` call (R-H-5): its call and output records and their lines."""

    key: str
    turn_id: str
    call: dict[str, Any]
    call_line: int
    output: dict[str, Any] | None = None
    output_line: int | None = None


@attrs.define
class _Poll:
    """A direct ``write_stdin`` call (R-H-5): no record of its own; it updates the command
    whose process it targets."""

    line: int
    target: str | None
    chars: str | None
    out_line: int | None = None
    receipt: ExecReceipt | None = None


@attrs.frozen
class _Update:
    """One change to an earlier command record: a poll's output, its exit code, Ctrl+C."""

    line: int
    body: str | None
    exit_code: int | None
    interrupted: bool
    status: str | None = None  # an explicit status (the engine's ProcessUpdate)


def _poll_text(p: PollUpdate) -> str | None:
    """A poll's output as appended to its command: the native receipt's body as is (a stream
    chunk); a value only printed by the wrapper on a line of its own."""
    if not p.output:
        return None
    if p.call_id is not None:
        return p.output
    return p.output if p.output.endswith("\n") else p.output + "\n"


class _ReceiptIndex:
    """The receipt log's lines (ascending: the log is written in file order) and positions by
    call id and by process id."""

    def __init__(self, log: Sequence[tuple[int, str, Receipt]]) -> None:
        self.lines = [line for line, _, _ in log]
        self.by_id: dict[str, list[int]] = {}
        self.by_pid: dict[str, list[int]] = {}
        for i, (_, _, r) in enumerate(log):
            self.by_id.setdefault(r.call_id, []).append(i)
            if r.process_id is not None:
                self.by_pid.setdefault(r.process_id, []).append(i)


class _Starts:
    """Where each process id was started (line, record key), per id in line order."""

    def __init__(self) -> None:
        self._by_pid: dict[str, list[tuple[int, str]]] = {}

    def add(self, line: int, pid: str, key: str) -> None:
        bisect.insort(self._by_pid.setdefault(pid, []), (line, key))

    def latest(self, pid: str, line: int) -> str | None:
        starts = self._by_pid.get(pid)
        if not starts:
            return None
        i = bisect.bisect_left(starts, (line, "")) - 1
        return starts[i][1] if i >= 0 else None

    def before(self, line: int) -> _KnownBefore:
        return _KnownBefore(self, line)


class _KnownBefore(Mapping[str, str]):
    """The processes known before ``line``: pid -> the record of its latest start (a reused id
    means the latest start). Looked up lazily; iterating walks every id."""

    def __init__(self, starts: _Starts, line: int) -> None:
        self._s, self._line = starts, line

    def __getitem__(self, pid: str) -> str:
        key = self._s.latest(pid, self._line) if isinstance(pid, str) else None
        if key is None:
            raise KeyError(pid)
        return key

    def __iter__(self) -> Iterator[str]:
        return (pid for pid in self._s._by_pid if self._s.latest(pid, self._line) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@attrs.define
class _Resolution:
    attributions: dict[str, Attribution]
    hidden: set[str]
    repl: dict[str, list[Any]]
    updates: dict[str, list[_Update]]


@attrs.define
class _Turn:
    turn_id: str
    keys: list[str] = attrs.Factory(list)
    status: str = "unknown"
    started_at: int | None = None
    completed_at: int | None = None
    error: Any = None


class Projector:
    """Incremental, deduplicating projection of one thread (R-H-1, R-H-4).

    Native feeding: :meth:`add_native_turn` (a ``Turn`` of ``thread/turns/list`` or
    ``thread/read``), :meth:`add_native_items` (one page or slice of items),
    :meth:`add_native_item` (``item/started``/``item/completed``), :meth:`add_native_entries`
    (``thread/items/list`` data), :meth:`add_delta`, :meth:`turn_status`.
    Legacy feeding: :meth:`add_legacy_record` (records in file order).
    Reading: :meth:`records` (flat, in order), :meth:`turns` (grouped). One projector is one
    source: never feed native and legacy into the same projector (R-H-3: no splicing).

    ``redact`` (optional) is applied to every displayed text (user/assistant text, reasoning,
    commands and their output, tool text blocks) — a text-level hook, e.g. for known secret
    values. ``mask`` (optional) maps each finished display record to the record to show (same
    type) — the record-level hook for privacy-index masking (R-PRIV-2), which needs a record's
    identity (thread, turn, call id) and kind, not just its text: pass
    ``codexrt._sansio._privacy.Masker(index).mask``. Both apply in :meth:`records`/:meth:`turns`,
    ``redact`` first.
    """

    def __init__(self, thread_id: str | None = None, *, redact: Callable[[str], str] | None = None,
                 mask: Callable[[Any], Any] | None = None) -> None:
        self.thread_id = thread_id
        self._redact = redact
        self._mask = mask
        self._turns: dict[str, _Turn] = {}
        self._order: list[str] = []
        self._entries: dict[str, _Entry] = {}
        self._client_ids: dict[str, str] = {}
        # legacy state
        self._cur_turn: str | None = None
        self._synthetic = 0
        self._turn_cwd: dict[str, str] = {}
        self._polls: dict[str, _Poll] = {}
        self._last_compaction: dict[str, tuple[str, set[str]]] = {}
        self._wrappers: dict[str, _Wrapper] = {}
        # R-H-5 glue: model-made call ids (never a wrapper's receipts), native receipts by
        # line, and where each process id was started (line, pid, record key).
        self._direct_ids: set[str] = set()
        self._direct_tools: dict[str, str] = {}
        self._receipt_log: list[tuple[int, str, Receipt]] = []
        self._starts: list[tuple[int, str, str]] = []
        self._line = 0
        self._resolved: _Resolution | None = None

    def __repr__(self) -> str:
        return f"<Projector thread={self.thread_id} turns={len(self._order)} entries={len(self._entries)}>"

    # -- turns -------------------------------------------------------------------------------

    def _turn(self, turn_id: str, *, prepend: bool = False) -> _Turn:
        t = self._turns.get(turn_id)
        if t is None:
            t = _Turn(turn_id)
            self._turns[turn_id] = t
            if prepend:
                self._order.insert(0, turn_id)
            else:
                self._order.append(turn_id)
        return t

    def turn_status(
        self,
        turn_id: str,
        status: str,
        *,
        started_at: int | None = None,
        completed_at: int | None = None,
        error: Any = None,
    ) -> None:
        """Record a turn's status (native ``TurnStatus`` or a synonym) and times (seconds).

        ``interrupted``/``failed`` closes that turn's still-open items at read time; a failed
        turn's ``error`` (``TurnError``) becomes an :class:`ErrorRecord` at the turn's end.
        """
        t = self._turn(turn_id)
        t.status = _norm_status(status)
        if started_at is not None:
            t.started_at = started_at
        if completed_at is not None:
            t.completed_at = completed_at
        if error is not None:
            t.error = error

    def add_native_turn(self, turn: dict[str, Any], *, prepend: bool = False) -> None:
        """Upsert a native ``Turn`` and its ``items``. ``prepend=True`` for pages read newest
        first (``thread/turns/list`` descending) so turns stay in chronological order."""
        tid = str(turn.get("id", ""))
        self._turn(tid, prepend=prepend)
        self.turn_status(
            tid, str(turn.get("status", "unknown")), started_at=_int(turn.get("startedAt")),
            completed_at=_int(turn.get("completedAt")), error=turn.get("error"),
        )
        items = turn.get("items")
        if isinstance(items, list) and items:
            self.add_native_items(tid, items)

    # -- native items ------------------------------------------------------------------------

    def add_native_entries(self, entries: Iterable[dict[str, Any]]) -> None:
        """``thread/items/list`` data: ``{turnId, item, startedAtMs, completedAtMs,
        outputDeferred}`` entries (consecutive entries of one turn are merged as one batch)."""
        batch: list[dict[str, Any]] = []
        times: list[tuple[int | None, int | None]] = []
        cur: str | None = None
        for e in entries:
            tid = str(e.get("turnId", ""))
            if cur is not None and tid != cur:
                self._add_batch(cur, batch, times)
                batch, times = [], []
            cur = tid
            item = dict(e.get("item") or {})
            if e.get("outputDeferred"):
                item["outputDeferred"] = True
            batch.append(item)
            times.append((_int(e.get("startedAtMs")), _int(e.get("completedAtMs"))))
        if cur is not None:
            self._add_batch(cur, batch, times)

    def add_native_items(self, turn_id: str, items: Sequence[dict[str, Any]]) -> None:
        """Upsert an ordered slice of one turn's completed items (a page or a turn's ``items``)."""
        self._add_batch(turn_id, list(items), [(None, None)] * len(items))

    def add_native_item(
        self,
        turn_id: str,
        item: dict[str, Any],
        *,
        completed: bool = True,
        started_at_ms: int | None = None,
        completed_at_ms: int | None = None,
        received_at_ms: int | None = None,
    ) -> None:
        """One live item (``item/completed``, or ``item/started`` with ``completed=False``).
        ``received_at_ms`` is when it reached us (the ``recorded`` compaction time source)."""
        self._add_batch(turn_id, [item], [(started_at_ms, completed_at_ms)], completed=completed,
                        received_at_ms=received_at_ms)

    def add_delta(self, turn_id: str, item_id: str, delta: str, *, field: str = "text") -> None:
        """A streaming fragment (``field``: ``text`` for agentMessage, ``output`` for a command,
        ``summary``/``content`` for reasoning). Ignored once the item has a completed snapshot;
        never completes anything (R-H-4)."""
        e = self._entries.get(item_id)
        if e is None:
            rec: Any
            if field == "output":
                rec = CommandExecution(id=item_id, thread_id=self.thread_id, turn_id=turn_id, status="inProgress", command="")
            elif field in ("summary", "content"):
                rec = Reasoning(id=item_id, thread_id=self.thread_id, turn_id=turn_id, status="inProgress",
                                summary=(), content=(), state="encrypted")
            else:
                rec = AssistantMessage(id=item_id, thread_id=self.thread_id, turn_id=turn_id, status="inProgress", text="")
            e = self._insert(turn_id, item_id, rec, complete=False, open_=True, channel="native", anchor=None)
        if e.complete:
            return
        e.deltas[field] = e.deltas.get(field, "") + delta
        r = e.record
        if isinstance(r, AssistantMessage) and field == "text":
            e.record = attrs.evolve(r, text=r.text + delta)
        elif isinstance(r, CommandExecution) and field == "output":
            e.record = attrs.evolve(r, output=(r.output or "") + delta)
        elif isinstance(r, Reasoning) and field in ("summary", "content"):
            cur = getattr(r, field)
            new = (cur[:-1] + (cur[-1] + delta,)) if cur else (delta,)
            e.record = attrs.evolve(r, **{field: new, "state": "plain"})

    def _add_batch(
        self,
        turn_id: str,
        items: list[dict[str, Any]],
        times: list[tuple[int | None, int | None]],
        *,
        completed: bool = True,
        received_at_ms: int | None = None,
    ) -> None:
        self._turn(turn_id)
        # Merge by anchors: new items before the first known one go right before it; later
        # new items go right after the previous item of the batch.
        pending: list[tuple[str, Any, tuple[int | None, int | None, int | None]]] = []
        prev: str | None = None
        for item, (st, ct) in zip(items, times):
            if not isinstance(item, dict):
                continue
            rec = project_native_item(item, thread_id=self.thread_id, turn_id=turn_id, completed=completed)
            st = st if st is not None else _int(item.get("startedAtMs"))
            ct = ct if ct is not None else _int(item.get("completedAtMs"))
            key = self._resolve_key(rec)
            tm = (st, ct, received_at_ms)
            if key in self._entries:
                e = self._entries[key]
                if pending:
                    self._insert_before(turn_id, key, pending, completed)
                    pending = []
                self._upsert(e, rec, completed, tm)
                prev = key
            elif prev is None:
                pending.append((key, rec, tm))
            else:
                self._insert(turn_id, key, rec, complete=completed, open_=self._is_open(rec, completed),
                             channel="native", anchor=prev, times=tm)
                prev = key
        for key, rec, tm in pending:
            self._insert(turn_id, key, rec, complete=completed, open_=self._is_open(rec, completed),
                         channel="native", anchor=None, times=tm)

    def add_local_submission(self, client_id: str, text: str, *, images: Sequence[ImageSource] = ()) -> None:
        """A submission this host sent (or queued) that the native history does not show yet
        (R-H-1): a :class:`UserMessage` ``local:<client_id>`` (``status="inProgress"``,
        ``source="local"``) in its own trailing turn ``local-turn:<client_id>``. Nothing when
        a native user message with that ``clientId`` is already known; a native one arriving
        later takes its place (never both)."""
        if client_id in self._client_ids:
            return
        key, tid = f"local:{client_id}", f"local-turn:{client_id}"
        rec = UserMessage(id=key, thread_id=self.thread_id, turn_id=tid, status="inProgress", text=text,
                          images=tuple(images), client_id=client_id, source="local")
        self._insert(tid, key, rec, complete=False, open_=True, channel="native", anchor=None)
        self._turns[tid].status = "inProgress"
        self._client_ids[client_id] = key

    def _drop_local(self, key: str) -> None:
        e = self._entries.pop(key)
        t = self._turns[e.turn_id]
        t.keys.remove(key)
        if not t.keys and t.turn_id.startswith("local-turn:"):
            del self._turns[t.turn_id]
            self._order.remove(t.turn_id)

    def _resolve_key(self, rec: Any) -> str:
        key: str = rec.id
        if isinstance(rec, UserMessage) and rec.client_id:
            known = self._client_ids.get(rec.client_id)
            if known is not None and known != key and known.startswith("local:") and known in self._entries:
                # the native copy of a local submission: it lands in its own turn, the local one goes
                self._drop_local(known)
                self._client_ids[rec.client_id] = key
                return key
            if known is not None and known != key and known in self._entries:
                # An earlier copy keyed differently (a local submission): re-key it in place.
                e = self._entries.pop(known)
                self._entries[key] = e
                t = self._turns[e.turn_id]
                t.keys[t.keys.index(known)] = key
                e.key = key
            self._client_ids[rec.client_id] = key
        return key

    @staticmethod
    def _is_open(rec: Any, completed: bool) -> bool:
        return (not completed) or rec.status == "inProgress"

    def _upsert(self, e: _Entry, rec: Any, completed: bool, times: tuple[int | None, int | None, int | None]) -> None:
        if e.complete and not completed:
            return  # a completed snapshot wins over a later started copy
        e.record = attrs.evolve(rec, turn_id=e.turn_id) if rec.turn_id != e.turn_id else rec
        e.complete = e.complete or completed
        e.open = self._is_open(rec, completed)
        e.times = tuple(n if n is not None else o for n, o in zip(times, e.times))  # type: ignore[assignment]
        if completed:
            e.deltas.clear()

    def _insert(
        self,
        turn_id: str,
        key: str,
        rec: Any,
        *,
        complete: bool,
        open_: bool,
        channel: str,
        anchor: str | None,
        times: tuple[int | None, int | None, int | None] = (None, None, None),
    ) -> _Entry:
        t = self._turn(turn_id)
        e = _Entry(key, rec, complete, open_, channel, turn_id, times)
        self._entries[key] = e
        if anchor is not None and anchor in t.keys:
            t.keys.insert(t.keys.index(anchor) + 1, key)
        else:
            t.keys.append(key)
        return e

    def _insert_before(self, turn_id: str, key: str, pending: list[Any], completed: bool) -> None:
        target = self._entries[key]
        t = self._turns[target.turn_id]
        idx = t.keys.index(key)
        for k, rec, tm in pending:
            e = _Entry(k, rec, completed, self._is_open(rec, completed), "native", target.turn_id, tm)
            self._entries[k] = e
            t.keys.insert(idx, k)
            idx += 1

    # -- legacy records ----------------------------------------------------------------------

    def _legacy_turn(self, rec: LegacyRecord) -> str:
        p = rec.payload if isinstance(rec.payload, dict) else {}
        tid = p.get("turn_id")
        if not isinstance(tid, str):
            meta = p.get("internal_chat_message_metadata_passthrough")
            tid = meta.get("turn_id") if isinstance(meta, dict) else None
        if isinstance(tid, str) and tid:
            if tid not in self._turns:
                self._turn(tid)
            return tid
        if self._cur_turn is None:
            self._synthetic += 1
            self._cur_turn = f"legacy-turn-{self._synthetic}"
            self._turn(self._cur_turn)
        return self._cur_turn

    def _legacy_put(self, turn_id: str, key: str, rec: Any, *, channel: str, complete: bool = True,
                    open_: bool = False, times: tuple[int | None, int | None, int | None] = (None, None, None)) -> None:
        e = self._entries.get(key)
        if e is None:
            self._insert(turn_id, key, rec, complete=complete, open_=open_, channel=channel, anchor=None, times=times)
            return
        rec = attrs.evolve(rec, turn_id=e.turn_id)
        if e.channel == "snapshot" and channel != "snapshot":
            return  # the item_completed snapshot wins over response/event copies
        e.record, e.open, e.complete = rec, open_, complete
        if channel == "snapshot":
            e.channel = "snapshot"
        e.times = tuple(n if n is not None else o for n, o in zip(times, e.times))  # type: ignore[assignment]

    def add_legacy_record(self, rec: LegacyRecord) -> None:
        """Feed one rollout record (in file order)."""
        p = rec.payload if isinstance(rec.payload, dict) else {}
        ts = _parse_ts(rec.timestamp)
        line_key = f"L{rec.line_no}"
        self._line = rec.line_no
        self._resolved = None
        self._log_receipts(rec, p)
        if rec.type == "session_meta":
            if self.thread_id is None and isinstance(p.get("id"), str):
                self.thread_id = p["id"]
            return
        if rec.type == "turn_context":
            tid = p.get("turn_id")
            if isinstance(tid, str) and tid:
                self._cur_turn = tid
                self._turn(tid)
                if isinstance(p.get("cwd"), str):
                    self._turn_cwd[tid] = p["cwd"]
            return
        if rec.type == "compacted":
            self._legacy_compaction(self._legacy_turn(rec), line_key, "compacted", ts, _str(p.get("message")) or None)
            return
        if rec.type == "response_item":
            self._legacy_response_item(rec, p, line_key, ts)
            return
        if rec.type == "event_msg":
            self._legacy_event(rec, p, line_key, ts)
            return
        # world_state, token_usage_record, unknown top-level types: not display items.

    def _log_receipts(self, rec: LegacyRecord, p: dict[str, Any]) -> None:
        """Native receipts (items and terminal events that name a call) with their line, and
        the processes they show started; the wrappers take theirs at read time (R-H-5)."""
        if rec.type != "event_msg":
            return
        st = rec.subtype
        found: list[Receipt] = []
        if st == "item_completed":
            found = receipts_from_rollout_line({"type": "event_msg", "payload": p, "ordinal": rec.ordinal})
            raw_item = p.get("item")
            item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
            pid = item.get("process_id")
            if item.get("type") == "CommandExecution" and isinstance(item.get("id"), str) and pid is not None:
                self._starts.append((rec.line_no, str(pid), item["id"]))
        elif st == "patch_apply_end":
            found = patch_end_receipts(p, ordinal=rec.ordinal)
        elif st == "exec_command_end" and isinstance(p.get("call_id"), str):
            pid = p.get("process_id")
            if pid is not None:
                self._starts.append((rec.line_no, str(pid), p["call_id"]))
        tid = _str(p.get("turn_id")) or self._cur_turn or ""
        for r in found:
            self._receipt_log.append((rec.line_no, tid, r))

    def wrapper_attributions(self) -> dict[str, Attribution]:
        """The engine's decision for every legacy exec wrapper that has an output, by the
        wrapper's call id (R-H-5). A wrapper without an output is kept whole and not listed."""
        return dict(self._resolve().attributions)

    def _wrapper_receipts(self, w: _Wrapper, first: Attribution | None, ix: _ReceiptIndex) -> list[Receipt]:
        """R-H-5: only what the wrapper produced. Nested receipts are those written between
        the wrapper's call and its output in its turn that no model call made; a later
        receipt belongs to it only when its identity ties it there — the call id of a nested
        call, or a process id of a nested call or of a command the engine attributed."""
        assert w.output_line is not None
        log = self._receipt_log
        lo = bisect.bisect_right(ix.lines, w.call_line)
        hi = bisect.bisect_left(ix.lines, w.output_line)
        nested = [log[i][2] for i in range(lo, hi)
                  if log[i][1] in (w.turn_id, "") and log[i][2].call_id not in self._direct_ids]
        if first is None:
            return nested
        ids = {r.call_id for r in nested}
        pids = {r.process_id for r in nested if r.process_id is not None}
        pids |= {r.process_id for r in first.records if r.process_id is not None} if first.replace else set()
        found: set[int] = set()
        for cid in ids:
            found.update(i for i in ix.by_id.get(cid, ()) if i >= hi)
        for pid in pids:
            found.update(i for i in ix.by_pid.get(pid, ()) if i >= hi)
        late = [log[i][2] for i in sorted(found)
                if log[i][0] > w.output_line and log[i][2].call_id not in self._direct_ids]
        return nested + late

    def _resolve(self) -> _Resolution:
        """Attribute every wrapper in file order with the processes known before it, then
        resolve direct polls; cached until the next record."""
        if self._resolved is not None:
            return self._resolved
        starts = _Starts()
        for line, pid, key in self._starts:
            starts.add(line, pid, key)
        ix = _ReceiptIndex(self._receipt_log)
        res = _Resolution({}, set(), {}, {})

        for w in sorted(self._wrappers.values(), key=lambda x: x.call_line):
            if w.output is None or w.output_line is None:
                continue
            call = WrapperCall.from_response_items(w.call, w.output)
            known = starts.before(w.call_line)
            nested = self._wrapper_receipts(w, None, ix)
            a = attribute_wrapper(call, nested, known_processes=known)
            tied = self._wrapper_receipts(w, a, ix)
            if len(tied) > len(nested):
                a = attribute_wrapper(call, tied, known_processes=known)
            res.attributions[w.key] = a
            if not a.replace:
                continue
            res.hidden.add(w.key)
            recs = []
            for r in a.records:
                rec = self._tool_record(w, r)
                recs.append(rec)
                if r.call_id:
                    res.hidden.add(r.call_id)
                if r.process_id is not None:
                    starts.add(w.call_line, r.process_id, rec.id)
            if a.script_error is not None or a.script_status in ("failed", "terminated"):
                # the script's own failure envelope stays visible beside the calls it made
                msg = a.script_error if a.script_error is not None else f"Script {a.script_status}"
                recs.append(ErrorRecord(id=f"{w.key}#script", thread_id=self.thread_id, turn_id=w.turn_id,
                                        status="failed", message=msg.rstrip("\n"), source="legacy"))
            res.repl[w.key] = recs
            for u in a.updates:
                ups = res.updates.setdefault(u.record_key, [])
                for poll in u.polls:
                    ups.append(_Update(w.output_line, _poll_text(poll), poll.exit_code,
                                       poll.chars is not None and "\x03" in poll.chars))
                if u.status is not None:
                    ups.append(_Update(w.output_line, None, u.exit_code, False,
                                       {"in_progress": "inProgress"}.get(u.status, u.status)))
        for direct in self._polls.values():
            if direct.target is None:
                continue  # no provable target: pure polling makes no card
            target = starts.latest(direct.target, direct.line)
            if target is None:
                continue
            rc = direct.receipt
            res.updates.setdefault(target, []).append(_Update(
                direct.out_line if direct.out_line is not None else direct.line,
                rc.body if rc is not None else None, rc.exit_code if rc is not None else None,
                direct.chars is not None and "\x03" in direct.chars))
        for ups in res.updates.values():
            ups.sort(key=lambda u: u.line)
        self._resolved = res
        return res

    def _tool_record(self, w: _Wrapper, r: ToolRecord) -> Any:
        """One attributed call of a replaced wrapper as a display record. A call whose receipt
        is a record of this projection keeps that record (the server's own facts); the
        wrapper's polls of it add their output and outcome."""
        status = {"in_progress": "inProgress"}.get(r.status, r.status)
        polled = "".join(_poll_text(p) or "" for p in r.polls)
        e = self._entries.get(r.call_id) if r.call_id else None
        if e is not None and isinstance(e.record, FileChange) and r.tool == "apply_patch":
            return attrs.evolve(e.record, turn_id=w.turn_id)
        if e is not None and isinstance(e.record, CommandExecution):
            base = e.record
            if not r.polls:
                return base
            whole = e.channel == "snapshot" and base.status != "inProgress"  # aggregated_output: all of it
            return attrs.evolve(base, status=status, exit_code=r.exit_code if r.exit_code is not None else base.exit_code,
                                output=(base.output or "") + polled if polled and not whole else base.output)
        key = r.call_id or f"{w.key}#{r.source_index}"
        common = {"id": key, "thread_id": self.thread_id, "turn_id": w.turn_id, "status": status, "source": "legacy"}
        if r.tool == "apply_patch" and r.patch is not None:
            return FileChange(changes=parse_apply_patch(r.patch.patch), **common)
        if r.command is not None:
            out = r.output
            if out and r.call_id is None and not out.endswith("\n"):
                out += "\n"  # a value the wrapper printed: a line of its own before any later output
            if polled:
                out = (out or "") + polled
            return CommandExecution(command=r.command, cwd=r.cwd, exit_code=r.exit_code, output=out,
                                    process_id=r.process_id, **common)
        content = (ContentBlock("text", r.output),) if r.output is not None else ()
        return DynamicToolCall(tool=r.tool, arguments=dict(r.args) if not isinstance(r.args, str) else r.args,
                               content=content, **common)

    def _legacy_compaction(self, turn_id: str, key: str, facet: str, ts: int | None, summary: str | None) -> None:
        """A compaction is recorded as up to three facets (``compacted``, the ``context_compacted``
        event, a ``compaction`` response item). Consecutive facets of *different* kinds with no
        record between them are one boundary; a repeated facet kind is a new compaction, and so
        is a facet whose explicit time is more than :data:`COMPACTION_FACET_WINDOW_MS` away
        (the facets of one compaction are written back to back; distinct times are never
        merged)."""
        t = self._turn(turn_id)
        last = self._last_compaction.get(turn_id)
        if last is not None and t.keys and t.keys[-1] == last[0] and facet not in last[1]:
            e = self._entries[last[0]]
        else:
            e = None
        if e is not None and (ts is None or e.record.time_ms is None
                              or abs(ts - e.record.time_ms) <= COMPACTION_FACET_WINDOW_MS):
            assert last is not None
            last[1].add(facet)
            if summary and not e.record.summary:
                e.record = attrs.evolve(e.record, summary=summary)
            return
        rec = CompactionBoundary(id=key, thread_id=self.thread_id, turn_id=turn_id, status="completed",
                                 time_ms=ts, time_source="item" if ts is not None else "unknown", summary=summary,
                                 source="legacy")
        self._legacy_put(turn_id, key, rec, channel="response", times=(ts, ts, None))
        self._last_compaction[turn_id] = (key, {facet})

    def _legacy_response_item(self, rec: LegacyRecord, p: dict[str, Any], line_key: str, ts: int | None) -> None:
        st = rec.subtype
        tid = self._legacy_turn(rec)
        common = {"thread_id": self.thread_id, "turn_id": tid, "source": "legacy"}
        if st == "message":
            role = p.get("role")
            key = _str(p.get("id")) or line_key
            if role == "assistant":
                r = AssistantMessage(id=key, status="completed", text=_assistant_text(p), phase=_str(p.get("phase")), **common)
                self._legacy_put(tid, key, r, channel="response")
            elif role == "user":
                parts, images = [], []
                for b in p.get("content") or ():
                    if not isinstance(b, dict):
                        continue
                    if b.get("type") in _TEXT_TYPES and isinstance(b.get("text"), str):
                        parts.append(b["text"])
                    elif b.get("type") in _IMAGE_TYPES:
                        img = _image_from_block(b)
                        if img is not None:
                            images.append(img)
                text = "".join(parts)
                if text.lstrip().startswith(_CONTEXT_PREFIXES):
                    return
                # ``<image name=…>`` / ``</image>`` text wrappers around image inputs.
                text = re.sub(r"<image(?: [^>]*)?>\s*</image>|<image(?: [^>]*)?>|</image>", "", text)
                s = sanitize_user_text(text)
                r2 = UserMessage(id=key, status="completed", text=s.text, images=tuple(images),
                                 file_mentions=s.file_mentions, stripped=s.stripped, **common)
                self._legacy_put(tid, key, r2, channel="response")
            return
        if st == "reasoning":
            key = _str(p.get("id")) or line_key
            summary, content = _texts(p.get("summary")), _texts(p.get("content"))
            plain = any(x.strip() for x in summary + content)
            r3 = Reasoning(id=key, status="completed", summary=summary, content=content,
                           state="plain" if plain else "encrypted", **common)
            self._legacy_put(tid, key, r3, channel="response")
            return
        if st in ("function_call", "custom_tool_call", "local_shell_call"):
            self._legacy_call(tid, p, st, line_key, common)
            return
        if st in ("function_call_output", "custom_tool_call_output"):
            self._legacy_output(p)
            return
        if st == "web_search_call":
            key = _str(p.get("id")) or _str(p.get("call_id")) or line_key
            action = p.get("action") if isinstance(p.get("action"), dict) else None
            q = (action or {}).get("query") or ""
            self._legacy_put(tid, key, WebSearch(id=key, status=_norm_status(p.get("status")), query=str(q),
                                                 action=action, **common), channel="response")
            return
        if st == "image_generation_call":
            key = _str(p.get("id")) or line_key
            result = p.get("result")
            img = ImageSource("data", result, "image/png") if isinstance(result, str) and result else None
            self._legacy_put(tid, key, ImageGeneration(id=key, status=_norm_status(p.get("status")),
                                                       revised_prompt=_str(p.get("revised_prompt")), image=img,
                                                       **common), channel="response")
            return
        if st in ("compaction", "context_compaction"):
            self._legacy_compaction(tid, line_key, "compaction_item", ts, None)
            return
        if st in ("additional_tools", "tool_search_call", "tool_search_output", "agent_message"):
            return  # tool catalogs and inter-agent traffic: not part of the display
        key = _str(p.get("id")) or _str(p.get("call_id")) or line_key
        self._legacy_put(tid, key, GenericRecord(id=key, status=_norm_status(p.get("status")),
                                                 item_type=str(st), raw=p, **common), channel="response")

    def _legacy_call(self, tid: str, p: dict[str, Any], st: str, line_key: str, common: dict[str, Any]) -> None:
        key = _str(p.get("call_id")) or _str(p.get("id")) or line_key
        name = _str(p.get("name")) or ("local_shell" if st == "local_shell_call" else "")
        raw_args = p.get("arguments") if st == "function_call" else p.get("input")
        args: Any = raw_args
        if isinstance(raw_args, str) and st == "function_call":
            try:
                args = json.loads(raw_args)
            except ValueError:
                args = raw_args
        a = args if isinstance(args, dict) else {}
        if st == "local_shell_call":
            a = p.get("action") if isinstance(p.get("action"), dict) else {}
        self._direct_ids.add(key)
        self._direct_tools[key] = name
        if name == "write_stdin":
            # polling: no record of its own; it updates the command it targets (R-H-5)
            target = a.get("session_id", a.get("process_id"))
            chars = a.get("chars", a.get("input"))
            self._polls[key] = _Poll(self._line, None if target is None or isinstance(target, bool) else str(target),
                                     chars if isinstance(chars, str) else None)
            return
        if name == "exec" and st == "custom_tool_call":
            # shown whole until attribution replaces it (turns())
            self._wrappers[key] = _Wrapper(key, tid, dict(p), self._line)
        if name in _EXEC_TOOLS:
            cmd = a.get("cmd", a.get("command"))
            cmd_s = _join_argv(cmd)
            cwd = _str(a.get("workdir")) or _str(a.get("working_directory")) or self._turn_cwd.get(tid)
            r: Any = CommandExecution(
                id=key, status="unknown", command=cmd_s, cwd=cwd,
                approval_reason=_str(a.get("justification")), description=_str(a.get("description")), **common,
            )
            self._legacy_put(tid, key, r, channel="response", open_=True)
            return
        if name == "apply_patch":
            text = raw_args if st == "custom_tool_call" else a.get("input", raw_args)
            changes = parse_apply_patch(text) if isinstance(text, str) else ()
            self._legacy_put(tid, key, FileChange(id=key, status="unknown", changes=changes, **common),
                             channel="response", open_=True)
            return
        if name == "update_plan":
            steps = tuple(
                PlanStep(str(s.get("step", "")), str(s.get("status", "unknown")))
                for s in a.get("plan") or () if isinstance(s, dict)
            )
            self._legacy_put(tid, key, Plan(id=key, status="completed", steps=steps,
                                            explanation=_str(a.get("explanation")), **common), channel="response")
            return
        if name == "view_image":
            self._legacy_put(tid, key, ImageView(id=key, status="inProgress", path=_str(a.get("path")), **common),
                             channel="response", open_=True)
            return
        self._legacy_put(tid, key, DynamicToolCall(id=key, status="inProgress", tool=name,
                                                   namespace=_str(p.get("namespace")), arguments=args, **common),
                         channel="response", open_=True)

    def _legacy_output(self, p: dict[str, Any]) -> None:
        key = _str(p.get("call_id"))
        if key is None:
            return
        if key in self._polls:
            poll = self._polls[key]
            poll.out_line, poll.receipt = self._line, _parse_exec_output(p.get("output"), "write_stdin")
            return
        if key in self._wrappers:
            self._wrappers[key].output = dict(p)
            self._wrappers[key].output_line = self._line
        e = self._entries.get(key)
        if e is None:
            return  # an output without its call
        out = p.get("output")
        if isinstance(e.record, CommandExecution):
            rcpt = _parse_exec_output(out, self._direct_tools.get(key))
            if rcpt.running_pid is not None:
                self._starts.append((self._line, rcpt.running_pid, key))
        if e.channel == "snapshot":
            return  # the item_completed snapshot knows better
        r = e.record
        if isinstance(r, CommandExecution):
            if rcpt.running:
                e.record = attrs.evolve(r, output=rcpt.body, status="inProgress", process_id=rcpt.running_pid)
                return
            code = rcpt.exit_code
            status = "unknown" if code is None else ("completed" if code == 0 else "failed")
            e.record = attrs.evolve(r, output=rcpt.body, exit_code=code, status=status)
            e.open = False
        elif isinstance(r, FileChange):
            text = out if isinstance(out, str) else json.dumps(out)
            if r.output is None:
                e.record = attrs.evolve(r, output=text)  # status only from patch_apply_end
        elif isinstance(r, ImageView):
            e.record = attrs.evolve(r, status="completed")
            e.open = False
        elif isinstance(r, DynamicToolCall):
            blocks = _content_blocks(out if not isinstance(out, dict) else out.get("content", []))
            e.record = attrs.evolve(r, status="completed", content=blocks)
            e.open = False

    def _legacy_event(self, rec: LegacyRecord, p: dict[str, Any], line_key: str, ts: int | None) -> None:
        st = rec.subtype
        if st in ("task_started", "turn_started"):
            tid = _str(p.get("turn_id"))
            if tid is None:
                self._synthetic += 1
                tid = f"legacy-turn-{self._synthetic}"
            self._cur_turn = tid
            t = self._turn(tid)
            t.status = "inProgress"
            t.started_at = _int(p.get("started_at"))
            return
        if st in ("task_complete", "turn_complete", "turn_aborted"):
            tid = _str(p.get("turn_id")) or self._cur_turn
            if tid is None:
                return
            t = self._turn(tid)
            t.status = "completed" if st != "turn_aborted" else "interrupted"
            t.completed_at = _int(p.get("completed_at")) or (ts // 1000 if ts else None)
            return
        tid = self._legacy_turn(rec)
        common = {"thread_id": self.thread_id, "turn_id": tid, "source": "legacy"}
        if st == "user_message":
            images = [_image_from_url(u) for u in p.get("images") or () if isinstance(u, str)]
            images += [ImageSource("path", u) for u in p.get("local_images") or () if isinstance(u, str)]
            s = sanitize_user_text(_str(p.get("message")) or "")
            self._legacy_put(tid, line_key, UserMessage(id=line_key, status="completed", text=s.text,
                                                        images=tuple(images), file_mentions=s.file_mentions,
                                                        client_id=_str(p.get("client_id")), stripped=s.stripped,
                                                        **common), channel="event")
        elif st == "agent_message":
            self._legacy_put(tid, line_key, AssistantMessage(id=line_key, status="completed",
                                                             text=_str(p.get("message")) or "",
                                                             phase=_str(p.get("phase")), **common), channel="event")
        elif st == "agent_reasoning":
            self._legacy_put(tid, line_key, Reasoning(id=line_key, status="completed",
                                                      summary=(_str(p.get("text")) or "",), content=(),
                                                      state="plain", **common), channel="event")
        elif st == "item_completed":
            item = p.get("item")
            if not isinstance(item, dict):
                return
            native = _core_item_to_native(item)
            r = project_native_item(native, thread_id=self.thread_id, turn_id=tid, completed=True)
            r = attrs.evolve(r, source="legacy")
            st_ms, ct_ms = _int(p.get("started_at_ms")), _int(p.get("completed_at_ms"))
            self._legacy_put(tid, r.id, r, channel="snapshot", open_=r.status == "inProgress",
                             times=(st_ms, ct_ms, None))
        elif st == "patch_apply_end":
            key = _str(p.get("call_id")) or line_key
            status = _norm_status(p.get("status")) if "status" in p else (
                "completed" if p.get("success") is True else "failed" if p.get("success") is False else "unknown")
            out = "".join(x for x in (_str(p.get("stdout")), _str(p.get("stderr"))) if x) or None
            fc = FileChange(id=key, status=status, changes=_native_changes(p.get("changes")), output=out, **common)
            self._legacy_put(tid, key, fc, channel="response")
        elif st == "exec_command_end":
            key = _str(p.get("call_id")) or line_key
            e = self._entries.get(key)
            base = e.record if e is not None and isinstance(e.record, CommandExecution) else None
            code = _int(p.get("exit_code"))
            status = _norm_status(p.get("status")) if "status" in p else (
                "unknown" if code is None else "completed" if code == 0 else "failed")
            out = _str(p.get("aggregated_output"))
            if out is None:
                out = "".join(x for x in (_str(p.get("stdout")), _str(p.get("stderr"))) if x) or None
            ce = CommandExecution(
                id=key, status=status,
                command=_join_argv(p.get("command")) or (base.command if base else ""),
                cwd=_str(p.get("cwd")) or (base.cwd if base else None), exit_code=code, output=out,
                actions=_actions(p.get("parsed_cmd")), approval_reason=base.approval_reason if base else None,
                description=base.description if base else None, duration_ms=_duration_ms(p.get("duration")), **common,
            )
            self._legacy_put(tid, key, ce, channel="response")
        elif st == "mcp_tool_call_end":
            key = _str(p.get("call_id")) or line_key
            inv = p.get("invocation") if isinstance(p.get("invocation"), dict) else {}
            result = p.get("result")
            content: tuple[ContentBlock, ...] = ()
            structured = None
            error = None
            status = "completed"
            if isinstance(result, dict) and "Ok" in result:
                ok = result["Ok"] if isinstance(result["Ok"], dict) else {}
                content = _content_blocks(ok.get("content"))
                structured = ok.get("structuredContent", ok.get("structured_content"))
                if ok.get("isError") or ok.get("is_error"):
                    status = "failed"
            elif isinstance(result, dict) and "Err" in result:
                error, status = str(result["Err"]), "failed"
            self._legacy_put(tid, key, McpToolCall(id=key, status=status, server=str(inv.get("server", "")),
                                                   tool=str(inv.get("tool", "")), arguments=inv.get("arguments"),
                                                   content=content, structured_content=structured, error=error,
                                                   **common), channel="response")
        elif st == "web_search_end":
            key = _str(p.get("call_id")) or line_key
            self._legacy_put(tid, key, WebSearch(id=key, status="completed", query=str(p.get("query", "")),
                                                 action=p.get("action"), **common), channel="response")
        elif st == "image_generation_end":
            key = _str(p.get("call_id")) or line_key
            result = p.get("result")
            img = ImageSource("data", result, "image/png") if isinstance(result, str) and result else None
            saved = _str(p.get("saved_path"))
            if img is None and saved:
                img = ImageSource("path", saved)
            self._legacy_put(tid, key, ImageGeneration(id=key, status=_norm_status(p.get("status")),
                                                       revised_prompt=_str(p.get("revised_prompt")),
                                                       saved_path=saved, image=img, **common), channel="response")
        elif st == "view_image_tool_call":
            key = _str(p.get("call_id")) or line_key
            self._legacy_put(tid, key, ImageView(id=key, status="completed", path=_str(p.get("path")), **common),
                             channel="response")
        elif st == "context_compacted":
            self._legacy_compaction(tid, line_key, "context_compacted", ts, None)
        elif st == "sub_agent_activity":
            key = _str(p.get("id")) or line_key
            child = p.get("agent_thread_id")
            self._legacy_put(tid, key, SubAgent(id=key, status="completed", activity=_str(p.get("kind")),
                                                child_thread_ids=(child,) if isinstance(child, str) else (),
                                                **common), channel="response")
        elif st == "error":
            self._legacy_put(tid, line_key, ErrorRecord(id=line_key, status="failed",
                                                        message=_str(p.get("message")) or "",
                                                        info=p.get("codex_error_info"), **common), channel="event")
        # token_count, thread_settings_applied, goals, review mode, unknown events: not shown.

    # -- reading -----------------------------------------------------------------------------

    def _visible(self, t: _Turn) -> list[_Entry]:
        """Pick one copy of each legacy message: user text from event/snapshot copies,
        assistant text and reasoning from response/snapshot copies; the other copy only when a
        turn has none of the preferred one."""
        entries = [self._entries[k] for k in t.keys]
        have: set[tuple[str, str]] = {(type(e.record).__name__, e.channel) for e in entries}

        def keep(e: _Entry) -> bool:
            r = e.record
            if e.channel in ("native", "snapshot"):
                return True
            name = type(r).__name__
            if isinstance(r, UserMessage):
                if e.channel == "response":
                    return (name, "event") not in have and (name, "snapshot") not in have
                return True
            if isinstance(r, (AssistantMessage, Reasoning)):
                if e.channel == "event":
                    return (name, "response") not in have and (name, "snapshot") not in have
                return True
            return True

        return [e for e in entries if keep(e)]

    def _finish(self, e: _Entry, t: _Turn) -> Any:
        r = e.record
        if e.open and t.status in ("interrupted", "failed") and r.status in ("inProgress", "unknown"):
            r = attrs.evolve(r, status=t.status)
        elif not e.complete and r.status == "inProgress" and t.status in ("interrupted", "failed"):
            r = attrs.evolve(r, status=t.status)
        if isinstance(r, CompactionBoundary) and r.time_ms is None:
            st, ct, rcv = e.times
            if ct is not None or st is not None:
                r = attrs.evolve(r, time_ms=ct if ct is not None else st, time_source="item")
            elif t.completed_at is not None or t.started_at is not None:
                secs = t.started_at if t.started_at is not None else t.completed_at
                assert secs is not None
                r = attrs.evolve(r, time_ms=secs * 1000, time_source="turn")
            elif rcv is not None:
                r = attrs.evolve(r, time_ms=rcv, time_source="recorded")
        if self.thread_id is not None and r.thread_id is None:
            r = attrs.evolve(r, thread_id=self.thread_id)
        if self._redact is not None:
            r = _redact_record(r, self._redact)
        return r

    def _updated(self, e: _Entry, ups: Sequence[_Update]) -> _Entry:
        """A command after the polls and interrupts aimed at its process (R-H-5): their output
        appended in order, the exit code they report, ``interrupted`` after a Ctrl+C. A command
        whose record is the server's completed item already holds its whole output
        (``aggregated_output``): polls then add no text (the real server writes that item when
        the process ends, after the polls that read its chunks)."""
        r = e.record
        if not isinstance(r, CommandExecution) or not ups:
            return e
        snap = self._entries.get(r.id)
        whole = snap is not None and snap.channel == "snapshot" and r.status != "inProgress"
        out, code, status, interrupted = r.output, r.exit_code, r.status, False
        for u in ups:
            if u.body and not whole:
                out = (out or "") + u.body
            if u.exit_code is not None:
                code = u.exit_code
                status = "completed" if code == 0 else "failed"
            if u.status is not None:
                status = u.status
            interrupted |= u.interrupted
        if interrupted:
            status = "interrupted"
        done = status != r.status and status not in ("inProgress", "unknown")
        rec = attrs.evolve(r, output=out, exit_code=code, status=status)
        return _Entry(e.key, rec, e.complete, e.open and not done, e.channel, e.turn_id, e.times, e.deltas)

    def _kept_previews(self, key: str, turn_id: str) -> list[Any]:
        """Static patch literals of a kept wrapper, shown beside it for display only: grey
        ``unknown`` unless the engine proved their own result (R-H-5)."""
        a = self._resolve().attributions.get(key)
        if a is None or a.replace:
            return []
        return [FileChange(id=f"{key}#patch{pv.source_index}", thread_id=self.thread_id, turn_id=turn_id,
                           status=pv.status, changes=parse_apply_patch(pv.patch), source="legacy")
                for pv in a.previews]

    def turns(self) -> list[TurnGroup]:
        """Every turn in order with its projected records."""
        out = []
        res = self._resolve() if (self._wrappers or self._polls) else _Resolution({}, set(), {}, {})
        hidden, repl, updates = res.hidden, res.repl, res.updates
        local = [tid for tid in self._order if tid.startswith("local-turn:")]
        for tid in [tid for tid in self._order if not tid.startswith("local-turn:")] + local:
            t = self._turns[tid]
            recs = []
            for e in self._visible(t):
                if e.key in repl:
                    recs.extend(self._finish(self._updated(_Entry(r.id, r, True, False, "response", tid),
                                                           updates.get(r.id, ())), t) for r in repl[e.key])
                if e.key not in hidden:
                    recs.append(self._finish(self._updated(e, updates.get(e.key, ())), t))
                    if e.key in self._wrappers:
                        recs.extend(self._finish(_Entry(r.id, r, True, False, "response", tid), t)
                                    for r in self._kept_previews(e.key, tid))
            if t.status == "failed" and t.error:
                msg = t.error.get("message") if isinstance(t.error, dict) else str(t.error)
                recs.append(ErrorRecord(id=f"turn-error:{tid}", thread_id=self.thread_id, turn_id=tid,
                                        status="failed", message=str(msg or ""),
                                        info=t.error.get("codexErrorInfo") if isinstance(t.error, dict) else None))
            if self._mask is not None:
                recs = [self._mask(r) for r in recs]
            out.append(TurnGroup(tid, t.status, tuple(recs), t.started_at, t.completed_at, t.error))
        return out

    def records(self) -> list[DisplayRecord]:
        """All display records, turn by turn, in order."""
        return [r for g in self.turns() for r in g.records]


def _redact_record(r: Any, redact: Callable[[str], str]) -> Any:
    changes: dict[str, Any] = {}
    for f in ("text", "output", "command", "revised_prompt", "message"):
        v = getattr(r, f, None)
        if isinstance(v, str):
            changes[f] = redact(v)
    for f in ("summary", "content"):
        v = getattr(r, f, None)
        if isinstance(v, tuple) and v and isinstance(v[0], str):
            changes[f] = tuple(redact(x) for x in v)
        elif isinstance(v, tuple) and v and isinstance(v[0], ContentBlock):
            changes[f] = tuple(attrs.evolve(b, text=redact(b.text)) if b.text else b for b in v)
    return attrs.evolve(r, **changes) if changes else r
