"""Wrapper replay glue (R-H-5): what the legacy path collects about code-mode ``exec``
wrappers, direct polls, native receipts and process starts while feeding (:class:`ReplayLog`),
and :class:`WrapperReplay`, which asks :func:`~codexrt._sansio._wrappers.attribute_wrapper` at
read time and turns its answers into display records and updates of earlier commands."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from .._wrappers import Attribution, PollUpdate, Receipt, ToolRecord, WrapperCall, attribute_wrapper
from ._legacy import ExecReceipt
from ._records import CommandExecution, ContentBlock, DynamicToolCall, ErrorRecord, FileChange
from ._shapes import _content_blocks, parse_apply_patch
from ._store import RecordStore, _Entry


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
class ReplayLog:
    """What the legacy path records for the replay while feeding: the wrappers, the direct
    polls, model-made call ids (never a wrapper's receipts) and their tool names, native
    receipts by line (line, turn id, receipt) and process starts (line, pid, record key)."""

    wrappers: dict[str, _Wrapper] = attrs.Factory(dict)
    polls: dict[str, _Poll] = attrs.Factory(dict)
    direct_ids: set[str] = attrs.Factory(set)
    direct_tools: dict[str, str] = attrs.Factory(dict)
    receipt_log: list[tuple[int, str, Receipt]] = attrs.Factory(list)
    starts: list[tuple[int, str, str]] = attrs.Factory(list)


class WrapperReplay:
    """Attributes the logged wrappers against the store's records; the result is cached until
    :meth:`invalidate` (the projector calls it for every new record)."""

    def __init__(self, store: RecordStore, log: ReplayLog) -> None:
        self._store = store
        self._log = log
        self._resolved: _Resolution | None = None

    def invalidate(self) -> None:
        self._resolved = None

    def active(self) -> bool:
        """Whether anything was logged that the replay changes (a wrapper or a direct poll)."""
        return bool(self._log.wrappers or self._log.polls)

    def _wrapper_receipts(self, w: _Wrapper, first: Attribution | None, ix: _ReceiptIndex) -> list[Receipt]:
        """R-H-5: only what the wrapper produced. Nested receipts are those written between
        the wrapper's call and its output in its turn that no model call made; a later
        receipt belongs to it only when its identity ties it there — the call id of a nested
        call, or a process id of a nested call or of a command the engine attributed."""
        assert w.output_line is not None
        log = self._log.receipt_log
        lo = bisect.bisect_right(ix.lines, w.call_line)
        hi = bisect.bisect_left(ix.lines, w.output_line)
        nested = [log[i][2] for i in range(lo, hi)
                  if log[i][1] in (w.turn_id, "") and log[i][2].call_id not in self._log.direct_ids]
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
                if log[i][0] > w.output_line and log[i][2].call_id not in self._log.direct_ids]
        return nested + late

    def resolve(self) -> _Resolution:
        """Attribute every wrapper in file order with the processes known before it, then
        resolve direct polls; cached until the next record."""
        if self._resolved is not None:
            return self._resolved
        starts = _Starts()
        for line, pid, key in self._log.starts:
            starts.add(line, pid, key)
        ix = _ReceiptIndex(self._log.receipt_log)
        res = _Resolution({}, set(), {}, {})

        for w in sorted(self._log.wrappers.values(), key=lambda x: x.call_line):
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
                recs.append(ErrorRecord(id=f"{w.key}#script", thread_id=self._store.thread_id, turn_id=w.turn_id,
                                        status="failed", message=msg.rstrip("\n"), source="legacy"))
            images = self._cell_images(w)
            if images:
                # what the cell itself returned with image(): no call made it, so it stays a
                # record of the cell (the calls are shown individually beside it)
                recs.append(DynamicToolCall(id=f"{w.key}#images", thread_id=self._store.thread_id, turn_id=w.turn_id,
                                            status="completed", tool="exec", content=images, source="legacy"))
            res.repl[w.key] = recs
            for u in a.updates:
                ups = res.updates.setdefault(u.record_key, [])
                for poll in u.polls:
                    ups.append(_Update(w.output_line, _poll_text(poll), poll.exit_code,
                                       poll.chars is not None and "\x03" in poll.chars))
                if u.status is not None:
                    ups.append(_Update(w.output_line, None, u.exit_code, False,
                                       {"in_progress": "inProgress"}.get(u.status, u.status)))
        for direct in self._log.polls.values():
            if direct.target is None:
                continue  # no provable target: pure polling makes no card
            # the process the poll read is the one started last before its *answer*: when the poll
            # finishes a command, the server writes that command's completed item (naming it, with
            # the process id) between the poll and its output — after a restart that reused the
            # id, that is the new command, never the pre-restart one started before the poll
            target = starts.latest(direct.target, direct.out_line if direct.out_line is not None else direct.line)
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

    @staticmethod
    def _cell_images(w: _Wrapper) -> tuple[ContentBlock, ...]:
        """The image items of a cell's output (``image()`` helper)."""
        out = w.output.get("output") if isinstance(w.output, dict) else None
        if not isinstance(out, list):
            return ()
        return tuple(b for b in _content_blocks(out) if b.image is not None)

    def _tool_record(self, w: _Wrapper, r: ToolRecord) -> Any:
        """One attributed call of a replaced wrapper as a display record. A call whose receipt
        is a record of this projection keeps that record (the server's own facts); the
        wrapper's polls of it add their output and outcome."""
        status = {"in_progress": "inProgress"}.get(r.status, r.status)
        polled = "".join(_poll_text(p) or "" for p in r.polls)
        e = self._store.entries.get(r.call_id) if r.call_id else None
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
        common = {"id": key, "thread_id": self._store.thread_id, "turn_id": w.turn_id, "status": status, "source": "legacy"}
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

    def updated(self, e: _Entry, ups: Sequence[_Update]) -> _Entry:
        """A command after the polls and interrupts aimed at its process (R-H-5): their output
        appended in order, the exit code they report, ``interrupted`` after a Ctrl+C. A command
        whose record is the server's completed item already holds its whole output
        (``aggregated_output``): polls then add no text (the real server writes that item when
        the process ends, after the polls that read its chunks)."""
        r = e.record
        if not isinstance(r, CommandExecution) or not ups:
            return e
        snap = self._store.entries.get(r.id)
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

    def kept_previews(self, key: str, turn_id: str) -> list[Any]:
        """Static patch literals of a kept wrapper, shown beside it for display only: grey
        ``unknown`` unless the engine proved their own result (R-H-5)."""
        a = self.resolve().attributions.get(key)
        if a is None or a.replace:
            return []
        return [FileChange(id=f"{key}#patch{pv.source_index}", thread_id=self._store.thread_id, turn_id=turn_id,
                           status=pv.status, changes=parse_apply_patch(pv.patch), source="legacy")
                for pv in a.previews]
