"""Wrapper replay glue (R-H-5): what the legacy path collects about code-mode ``exec``
wrappers, direct polls, native receipts and process starts while feeding (:class:`ReplayLog`),
and :class:`WrapperReplay`, which asks :func:`~codexrt._sansio._wrappers.attribute_wrapper` at
read time and turns its answers into display records and updates of earlier commands."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from .._wrappers import (
    Attribution,
    KeepReason,
    PollUpdate,
    Receipt,
    ToolRecord,
    WrapperCall,
    attribute_wrapper,
    receipt_command,
    static_commands,
)
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
class _Wait:
    """Code mode's ``wait`` for a yielded cell (``Script running with cell ID N``): its output
    is the cell's own — the rest of what the cell printed, or its end (issue 32)."""

    key: str
    turn_id: str
    cell_id: str
    line: int
    output: dict[str, Any] | None = None
    output_line: int | None = None


_RUNNING_CELL = re.compile(r"Script running with cell ID (\S+)\n")
_ABORTED = re.compile(r"aborted by user(?: after [0-9.]+ ?m?s)?", re.I)
_SCRIPT_HEADER = re.compile(r"Script (?:completed|failed|terminated|running with cell ID \S+)\n")


def _first_text(output: dict[str, Any] | None) -> str | None:
    out = output.get("output") if isinstance(output, dict) else None
    if isinstance(out, list):
        out = next((b.get("text") for b in out if isinstance(b, dict) and isinstance(b.get("text"), str)), None)
    return out if isinstance(out, str) else None


def _running_cell(output: dict[str, Any] | None) -> str | None:
    """The cell id when a cell's (or a wait's) output says the cell still runs."""
    text = _first_text(output)
    m = _RUNNING_CELL.match(text) if text is not None else None
    return m.group(1) if m else None


def _script_end_ms(output: dict[str, Any] | None) -> float | None:
    """When a cell's script ended, by the server's clock (its output's ``create_time``), or
    None when unknown or the cell yielded (``Script running``: it may still start commands)."""
    if output is None or _running_cell(output) is not None:
        return None
    meta = output.get("internal_chat_message_metadata_passthrough")
    t = meta.get("create_time") if isinstance(meta, dict) else None
    return t * 1000 if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def is_notification(current: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether ``new``, a later output of a cell that already has its script's output (a
    ``Script …`` header), is one of the cell's ``notify()`` messages: 0.171.0 writes each as
    one more output with the cell's call id and no header — after the script's own output —
    and it must not replace what the cell printed (issue 32)."""
    have, got = _first_text(current), _first_text(new)
    if got is not None and (_SCRIPT_HEADER.match(got) is not None or _ABORTED.fullmatch(got.strip())):
        return False  # the script's own end (an abort of a yielded cell, too)
    return have is not None and _SCRIPT_HEADER.match(have) is not None


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
        self.by_turn: dict[str, tuple[list[int], list[int]]] = {}  # turn -> (positions, their lines)
        for i, (line, turn, r) in enumerate(log):
            self.by_id.setdefault(r.call_id, []).append(i)
            if r.process_id is not None:
                self.by_pid.setdefault(r.process_id, []).append(i)
            at, lines = self.by_turn.setdefault(turn, ([], []))
            at.append(i)
            lines.append(line)

    def of_turn_after(self, turn: str, line: int) -> list[int]:
        """Positions of ``turn``'s receipts written after ``line``, in log order."""
        if turn not in self.by_turn:
            return []
        at, lines = self.by_turn[turn]
        return at[bisect.bisect_right(lines, line):]


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


class _Settled:
    """The known processes whose record is the server's completed item (its whole output and
    outcome): a poll of one from a cell needs no result of its own (issue 32)."""

    def __init__(self, known: Mapping[str, str], store: RecordStore) -> None:
        self._known, self._store = known, store

    def __contains__(self, pid: object) -> bool:
        key = self._known.get(pid) if isinstance(pid, str) else None
        e = self._store.entries.get(key) if key is not None else None
        return (e is not None and e.channel == "snapshot" and isinstance(e.record, CommandExecution)
                and e.record.status not in ("inProgress", "unknown"))


@attrs.define
class _Resolution:
    attributions: dict[str, Attribution]
    hidden: set[str]
    repl: dict[str, list[Any]]
    updates: dict[str, list[_Update]]
    after: dict[str, list[Any]] = attrs.Factory(dict)  # records shown right after an entry
    earlier: _EarlierCells = attrs.Factory(lambda: _EarlierCells())


_NEVER = float("-inf")
_UNKNOWN_END = float("inf")  # a script whose end is not known may have started anything until now


@attrs.define
class _EarlierCells:
    """What the cells before the one being attributed could have left running, per turn, as
    the latest script end (ms; ``inf`` when unknown) of a cell that could have started a
    command: one that could run anything, by command, and by (command, process id) for a
    replaced cell's open record with a process id; and how many cells of each turn could run
    a command (:meth:`others_could_run`). :meth:`WrapperReplay._earlier_could_own` and
    :meth:`WrapperReplay._turn_orphans` ask it, so a turn of N cells costs O(N), not O(N²)
    (issue 32 review; the ``wrappers`` and ``kept`` bench rows); the first walks the cells
    again only to name the one in doubt."""

    _seen: int = 0  # how many cells of ``ordered`` are in the index
    _anything: dict[str, float] = attrs.Factory(dict)
    _by_cmd: dict[tuple[str, str], float] = attrs.Factory(dict)
    _by_pid: dict[tuple[str, str, Any], float] = attrs.Factory(dict)
    # for _turn_orphans: each cell's static commands (parsed once), and per turn how many cells
    # could run anything / run a command — all of them, and those replaced so far
    _cmds: dict[str, frozenset[str] | None] = attrs.Factory(dict)
    _totals: dict[Any, int] | None = None
    _replaced: dict[Any, int] = attrs.Factory(dict)
    _replaced_cells: list[_Wrapper] = attrs.Factory(list)  # in order; counted into _replaced on demand
    _replaced_counted: int = 0

    def commands(self, o: _Wrapper) -> frozenset[str] | None:
        """``o``'s static commands (None: it could run anything), parsed once per resolve."""
        if o.key not in self._cmds:
            call = WrapperCall.from_response_items(o.call, o.output) if o.output is not None else None
            self._cmds[o.key] = static_commands(call) if call is not None else None
        return self._cmds[o.key]

    def others_could_run(self, ordered: Sequence[_Wrapper], w: _Wrapper, command: str | None) -> bool:
        """Whether a cell of ``w``'s turn other than ``w`` and not replaced could run anything
        (``command`` None) or run ``command``: counts, so a turn of N cells costs O(N)."""
        if self._totals is None:
            self._totals = {}
            for o in ordered:
                _count(self._totals, o.turn_id, self.commands(o), 1)
        for o in self._replaced_cells[self._replaced_counted:]:  # parsed only when a kept cell asks
            _count(self._replaced, o.turn_id, self.commands(o), 1)
        self._replaced_counted = len(self._replaced_cells)
        key = (w.turn_id, command) if command is not None else w.turn_id
        mine = self.commands(w)
        own = (mine is None) if command is None else (mine is not None and command in mine)
        return self._totals.get(key, 0) - self._replaced.get(key, 0) - own > 0

    def catch_up(self, ordered: Sequence[_Wrapper], before_line: int, res: _Resolution) -> None:
        """Index every cell of ``ordered`` (file order) whose call precedes ``before_line``;
        each is attributed by then (``resolve`` goes in the same order)."""
        while self._seen < len(ordered) and ordered[self._seen].call_line < before_line:
            o = ordered[self._seen]
            self._seen += 1
            ended = _script_end_ms(o.output)
            end = _UNKNOWN_END if ended is None else ended
            done = res.attributions.get(o.key)
            if done is not None and done.replace:
                self._replaced_cells.append(o)
                for ro in done.records:
                    if ro.call_id is None and ro.command is not None:
                        if ro.process_id is None:
                            _raise(self._by_cmd, (o.turn_id, ro.command), end)
                        else:
                            _raise(self._by_pid, (o.turn_id, ro.command, ro.process_id), end)
                continue
            cmds = self.commands(o)
            if cmds is None:
                _raise(self._anything, o.turn_id, end)
            else:
                for c in cmds:
                    _raise(self._by_cmd, (o.turn_id, c), end)

    def may_own(self, turn_id: str, command: str, process_id: Any, started: float) -> bool:
        """Whether an earlier cell of ``turn_id`` could have started ``command`` (run by
        ``process_id``, if known) at ``started`` or later; ``-inf`` when the start is unknown,
        so that any such cell could."""
        ends = [self._anything.get(turn_id), self._by_cmd.get((turn_id, command))]
        if process_id is not None:
            ends.append(self._by_pid.get((turn_id, command, process_id)))
        return any(end is not None and end >= started for end in ends)


def _count(table: dict[Any, int], turn: str, cmds: frozenset[str] | None, n: int) -> None:
    keys: Iterable[Any] = (turn,) if cmds is None else ((turn, c) for c in cmds)
    for k in keys:
        table[k] = table.get(k, 0) + n


def _raise(table: dict[Any, float], key: Any, end: float) -> None:
    table[key] = max(table.get(key, end), end)


@attrs.define
class ReplayLog:
    """What the legacy path records for the replay while feeding: the wrappers, the direct
    polls, model-made call ids (never a wrapper's receipts) and their tool names, native
    receipts by line (line, turn id, receipt) and process starts (line, pid, record key)."""

    wrappers: dict[str, _Wrapper] = attrs.Factory(dict)
    waits: dict[str, _Wait] = attrs.Factory(dict)
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
        for pid in pids:  # a process id ties only a receipt of the cell's own turn (or of none): an
            # item names the turn that started its command, so a reused id after a restart is not this one
            found.update(i for i in ix.by_pid.get(pid, ()) if i >= hi and log[i][1] in (w.turn_id, ""))
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
        owner: dict[str, str] = {}  # receipt call id -> the cell whose record it is

        ordered = sorted(self._log.wrappers.values(), key=lambda x: x.call_line)
        call_lines = [w.call_line for w in ordered]
        waits_of: dict[tuple[str, str], list[_Wait]] = {}  # (turn, cell id) -> its waits, in file order
        for x in sorted(self._log.waits.values(), key=lambda x: x.line):
            waits_of.setdefault((x.turn_id, x.cell_id), []).append(x)
        for w in ordered:
            if w.output is None or w.output_line is None:
                continue
            w, waits = self._waited(w, ordered, call_lines, waits_of)
            out_line = w.output_line
            assert out_line is not None
            a = self._attribute_cell(w, ordered, starts, ix, res, owner)
            res.attributions[w.key] = a
            if a.replace:
                owner.update((r.call_id, w.key) for r in a.records if r.call_id)
            if not a.replace:
                continue
            res.hidden.add(w.key)
            res.hidden.update(waits)  # the server shows no card for a wait either
            recs = []
            anchor: tuple[int, str] | None = None  # the last of the cell's own records left in place
            for r in a.records:
                rec = self._tool_record(w, r)
                if r.process_id is not None:
                    starts.add(w.call_line, r.process_id, rec.id)
                if self._in_place(w, r, res):
                    at = min((self._log.receipt_log[i][0] for i in ix.by_id.get(r.call_id or "", ())), default=None)
                    if at is not None and at < out_line and (anchor is None or at > anchor[0]):
                        anchor = (at, r.call_id or "")
                    continue
                recs.append(rec)
                if r.call_id:
                    res.hidden.add(r.call_id)
            res.repl[w.key] = recs
            if anchor is not None:
                recs = res.after.setdefault(anchor[1], [])  # what the cell's end adds follows its commands
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
            for u in a.updates:
                ups = res.updates.setdefault(u.record_key, [])
                for poll in u.polls:
                    ups.append(_Update(out_line, _poll_text(poll), poll.exit_code,
                                       poll.chars is not None and "\x03" in poll.chars))
                if u.status is not None:
                    ups.append(_Update(out_line, None, u.exit_code, False,
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

    def _attribute_cell(self, w: _Wrapper, ordered: Sequence[_Wrapper], starts: _Starts, ix: _ReceiptIndex,
                        res: _Resolution, owner: Mapping[str, str]) -> Attribution:
        """The engine's answer for cell ``w``: its own receipts, those its identities tie, then
        the turn's orphans; a pairing an earlier cell could contest, or a receipt another cell
        owns, keeps it (R-H-5)."""
        assert w.output is not None
        call = WrapperCall.from_response_items(w.call, w.output)
        known = starts.before(w.call_line)
        settled = _Settled(known, self._store)
        nested = self._wrapper_receipts(w, None, ix)
        a = attribute_wrapper(call, nested, known_processes=known, settled_processes=settled)
        tied = self._wrapper_receipts(w, a, ix)
        if len(tied) > len(nested):
            a = attribute_wrapper(call, tied, known_processes=known, settled_processes=settled)
        orphans = [] if a.replace else self._turn_orphans(w, ordered, ix, res, owner)
        if orphans:
            b = attribute_wrapper(call, tied + orphans, known_processes=known, settled_processes=settled)
            a = b if b.replace else a  # a kept cell keeps the reason of its own receipts
        if not a.replace:
            return a
        reason, doubt = KeepReason.AMBIGUOUS_RECEIPT, self._earlier_could_own(w, ordered, a, res, ix)
        taken = sorted({r.call_id for r in a.records if r.call_id is not None and r.call_id in owner})
        if doubt is None and taken:  # one receipt has one owner: another cell's is no evidence here
            reason, doubt = KeepReason.IDENTITY_CONFLICT, f"receipt {taken[0]} belongs to cell {owner[taken[0]]}"
        if doubt is None:
            return a
        return Attribution(False, reason=reason, detail=doubt, previews=a.previews, internal=a.internal,
                           script_status=a.script_status, script_error=a.script_error, evicted=a.evicted)

    def _turn_orphans(self, w: _Wrapper, wrappers: Sequence[_Wrapper], ix: _ReceiptIndex,
                      res: _Resolution, owner: Mapping[str, str]) -> list[Receipt]:
        """Receipts written after the cell ended that name its turn — a command the cell left
        running, whose item the server writes when it ends — that no model call made, offered
        when no other cell of the turn could have started that command: each other cell is
        attributed already, or its source runs only other commands (one that could run
        anything claims everything), and no attributed cell owns it already. The engine still
        pairs them by unique command (issue 32)."""
        assert w.output_line is not None
        res.earlier.catch_up(wrappers, w.call_line, res)
        if res.earlier.others_could_run(wrappers, w, None):
            return []  # a mate that could run anything claims every late receipt
        log = self._log.receipt_log
        late = [log[i][2] for i in ix.of_turn_after(w.turn_id, w.output_line)
                if log[i][2].call_id not in self._log.direct_ids
                and log[i][2].call_id not in res.hidden and log[i][2].call_id not in owner]
        ok = {r.call_id for r in late if (cmd := receipt_command(r)) is not None
              and not res.earlier.others_could_run(wrappers, w, cmd)}
        return [r for r in late if r.call_id in ok]  # every receipt of an offered call

    def _earlier_could_own(self, w: _Wrapper, wrappers: Sequence[_Wrapper], a: Attribution,
                           res: _Resolution, ix: _ReceiptIndex) -> str | None:
        """Why a receipt the engine paired with one of ``w``'s calls by command text alone might
        be the late item of an earlier cell of the turn — one that may have left the same
        command running (kept, or replaced with a record of that command that has no receipt
        of its own) and whose item the server then wrote inside ``w``'s window — or None. A
        pairing by the cell's own printed process id is certain and never doubted, and so is a
        command the server says started after the earlier cell's script had ended (R-H-5:
        仍有同名进程或同名后续命令无法区分时保留 wrapper)."""
        log = self._log.receipt_log
        started: dict[str, int] = {}
        for cid in {r.call_id for r in a.records if r.call_id}:
            for i in ix.by_id.get(cid, ()):
                ms = log[i][2].started_ms
                if log[i][2].kind == "call" and ms is not None:
                    started[cid] = ms
        by_text = [r for r in a.records if r.call_id is not None and r.command is not None
                   and not any(e.startswith("process_id:") for e in r.evidence)]
        res.earlier.catch_up(wrappers, w.call_line, res)
        def since(r: ToolRecord) -> float:  # an unknown start (no stamp) could follow any cell
            ms = started.get(r.call_id or "", -1)
            return ms if ms >= 0 else _NEVER

        if not any(res.earlier.may_own(w.turn_id, r.command or "", r.process_id, since(r)) for r in by_text):
            return None  # no earlier cell could: the walk below, which names the cell, would find none
        for o in wrappers:
            if not by_text or o.call_line >= w.call_line:
                break
            if o.turn_id != w.turn_id:
                continue
            ended = _script_end_ms(o.output)
            doubtful = [r for r in by_text if ended is None or started.get(r.call_id or "", -1) < 0
                        or started[r.call_id or ""] <= ended]
            done = res.attributions.get(o.key)
            if done is not None and done.replace:  # its open commands: no receipt, process unknown or the same
                hit = next((r for r in doubtful for ro in done.records if ro.call_id is None and ro.command == r.command
                            and (ro.process_id is None or ro.process_id == r.process_id)), None)
            else:
                call = WrapperCall.from_response_items(o.call, o.output) if o.output is not None else None
                cmds = static_commands(call) if call is not None else None
                hit = next((r for r in doubtful if cmds is None or r.command in cmds), None)
            if hit is not None:
                return f"receipt {hit.call_id} ({hit.command}) may be the late item of cell {o.key}"
        return None

    def _in_place(self, w: _Wrapper, r: ToolRecord, res: _Resolution) -> bool:
        """A call whose receipt is the server's command record stays that record, where the
        file has it — where the server shows it: in the order the commands ended (a
        ``Promise.all`` shows the first to finish first; a command left running comes after
        its turn's answer), in the turn that started it (issue 32). The cell's polls of it
        become updates of that record."""
        e = self._store.entries.get(r.call_id) if r.call_id else None
        if e is None or not (isinstance(e.record, CommandExecution)
                             or (isinstance(e.record, FileChange) and r.tool == "apply_patch" and e.turn_id == w.turn_id)):
            return False
        line = w.output_line
        assert line is not None
        if r.polls and isinstance(e.record, CommandExecution):
            ups = res.updates.setdefault(e.key, [])
            for poll in r.polls:
                ups.append(_Update(line, _poll_text(poll), poll.exit_code, poll.chars is not None and "\x03" in poll.chars))
            if r.status == "interrupted":
                ups.append(_Update(line, None, None, True))
        return True

    @staticmethod
    def _waited(w: _Wrapper, wrappers: Sequence[_Wrapper], call_lines: Sequence[int],
                waits_of: Mapping[tuple[str, str], Sequence[_Wait]]) -> tuple[_Wrapper, list[str]]:
        """A cell that yielded (``Script running with cell ID N``) ends in the output of the
        ``wait`` calls for cell N that follow it in its turn: the wrapper as if that output
        were its own, and those waits' keys. Unchanged when no wait finished it, or when another
        cell started in between (its receipts could not be told apart). ``wrappers`` are in file
        order (``call_lines`` theirs), ``waits_of`` each yielded cell's waits in file order."""
        cell = _running_cell(w.output)
        if cell is None or (w.turn_id, cell) not in waits_of:
            return w, []
        assert w.output_line is not None
        chain: list[_Wait] = []
        for x in waits_of[(w.turn_id, cell)]:
            if x.line < w.output_line:
                continue
            if x.output is None or x.output_line is None:
                return w, []
            chain.append(x)
            if _running_cell(x.output) != cell:
                break
        else:
            return w, []
        end = chain[-1].output_line
        assert end is not None
        for i in range(bisect.bisect_right(call_lines, w.call_line), len(wrappers)):  # cells started before the end
            o = wrappers[i]
            if o.call_line >= end:
                break
            if o is not w and o.turn_id == w.turn_id:
                return w, []
        return attrs.evolve(w, output=chain[-1].output, output_line=end), [x.key for x in chain]

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
        the process ends, after the polls that read its chunks); with its exit code it is the
        whole outcome, which no poll changes."""
        r = e.record
        if not isinstance(r, CommandExecution) or not ups:
            return e
        snap = self._store.entries.get(r.id)
        whole = snap is not None and snap.channel == "snapshot" and r.status != "inProgress"
        if whole and r.exit_code is not None:
            # the server's completed item is the outcome: after a Ctrl+C it says `failed`, 130
            # (code-ctrl-c-second-cell), so a poll changes nothing (issue 32)
            return e
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
