"""Stage 3 of the replay and the entry point: match source calls to native receipts, decide.

:func:`attribute_wrapper` runs the stages in order — static scan (``_source``), print plans
(``_plan``), printed slot values (``_output``), then receipt matching here — and turns any
``_Unresolved`` into a kept wrapper. :class:`_Replay` is one matching run, in named steps:

1. ``_check_inputs`` — every call's tool input must be static;
2. ``_match_by_identity`` — a ``session_id`` printed in a call's own slot against a receipt's
   ``process_id`` wins over command text;
3. ``_match_by_command`` — then *mutually unique* tool + command + explicit absolute
   directory compatibility; arrival or completion order is never used;
4. ``_command_records`` — each command/patch call needs a native result or a printed value;
5. ``_stdin_polls`` / ``_native_polls`` — ``write_stdin`` never makes a record: it updates the
   command whose process it targets (here, or one in ``known_processes``); Ctrl+C ends only
   that command;
6. ``_result`` — statuses only from native evidence, poll chunks ordered by source index,
   then by ``ordinal``, then call id.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ._lexer import _has_dynamic
from ._model import (
    _CTRL_C,
    DEFAULT_MAX_UNPAIRED,
    DYNAMIC,
    Attribution,
    InternalEntry,
    KeepReason,
    PatchPreview,
    PollUpdate,
    ProcessUpdate,
    SlotValue,
    ToolRecord,
    WrapperCall,
    _crlf,
    _patch_preview,
    _pid,
    _Unresolved,
    normalize_dir,
)
from ._output import _slot_values, _split_output
from ._plan import _find_plans, _Plan, single_key
from ._receipts import (
    Receipt,
    ReceiptPairer,
    _command_of,
    _cwd_of,
    _cwd_of_raw,
    _Invocation,
    _Native,
    _native_result,
    _same_files,
    _stdin_args,
    _tool_family,
)
from ._source import _scan_source, _Source, _SrcCall


def _status(exit_code: int | None, success: bool | None, running: bool, rejected: bool) -> str:
    if running:
        return "in_progress"
    if exit_code is not None:
        return "completed" if exit_code == 0 else "failed"
    if success is not None:
        return "completed" if success else "failed"
    if rejected:
        return "failed"
    return "unknown"


def _slot_pid(v: SlotValue | None) -> str | None:
    if v is None or v.kind != "json" or not isinstance(v.value, dict):
        return None
    return _pid(v.value.get("session_id", v.value.get("process_id")))


def _unique_pairs(
    left: Sequence[Any], right: Sequence[Any], compatible: Any
) -> tuple[dict[int, int], set[int], set[int]]:
    """Mutually unique compatibility: pairs (l -> r), and the left/right indexes that had
    candidates but no unique partner (ambiguous)."""
    cand_l = {i: [j for j, r in enumerate(right) if compatible(l, r)] for i, l in enumerate(left)}
    cand_r: dict[int, list[int]] = {j: [] for j in range(len(right))}
    for i, js in cand_l.items():
        for j in js:
            cand_r[j].append(i)
    pairs = {i: js[0] for i, js in cand_l.items() if len(js) == 1 and len(cand_r[js[0]]) == 1}
    amb_l = {i for i, js in cand_l.items() if js and i not in pairs}
    amb_r = {j for j, is_ in cand_r.items() if is_ and j not in pairs.values()}
    return pairs, amb_l, amb_r


def attribute_wrapper(
    wrapper: WrapperCall,
    receipts: Iterable[Receipt],
    *,
    known_processes: Mapping[Any, str] | None = None,
    max_unpaired: int = DEFAULT_MAX_UNPAIRED,
    settled_processes: Container[Any] = (),
) -> Attribution:
    """Decide whether ``wrapper`` can be replaced by individual tool records (R-H-5).

    ``receipts`` are the native records that follow the wrapper (any order).
    ``known_processes`` maps process ids of commands started *before* this wrapper to the
    reader's key for their record, so ``write_stdin`` polling can update them.
    ``settled_processes`` are those of them whose record already holds the command's whole
    output and outcome (the server's completed item): a ``write_stdin`` of one of them needs no
    result of its own — whatever it read is in that record — and changes nothing.

    Pure and deterministic: the same inputs give the same answer whatever the receipt
    order (only poll chunks of one command are ordered, by ``ordinal`` then call id).
    Never raises for bad input: anything it cannot prove yields a kept wrapper.
    """
    pairer = ReceiptPairer(max_unpaired)
    for r in receipts:
        pairer.feed(r)
    status, error, items, text = _split_output(wrapper.output)
    previews: list[PatchPreview] = []
    internal: list[InternalEntry] = []

    def keep(reason: KeepReason, detail: str) -> Attribution:
        if pairer.evicted and reason in (KeepReason.MISSING_RESULT, KeepReason.PATCH_WITHOUT_RESULT):
            reason, detail = KeepReason.RECEIPT_OVERFLOW, f"{detail} ({pairer.evicted} unpaired receipts evicted)"
        return Attribution(
            False,
            reason=reason,
            detail=detail,
            previews=tuple(previews),
            internal=tuple(internal),
            script_status=status,
            script_error=error,
            evicted=pairer.evicted,
        )

    try:
        src = _scan_source(wrapper.source)
        plans = _find_plans(src)
    except _Unresolved as e:
        return keep(e.reason, e.detail)
    for c in src.calls:
        if c.tool == "apply_patch" and isinstance(c.args, str) and c.tool not in _missing_tools(error):
            previews.append(_patch_preview(c.index, c.args))
    try:
        known: Mapping[Any, str] = known_processes if known_processes is not None else {}
        replay = _Replay(src, plans, pairer, known, previews, internal, settled_processes)
        return replay.run(status, error, items, text)
    except _Unresolved as e:
        return keep(e.reason, e.detail)


_NOT_A_FUNCTION = re.compile(r"TypeError: tools\.(\w+) is not a function")


def _missing_tools(error: str | None) -> set[str]:
    """Tools the script's own error says do not exist (``TypeError: tools.X is not a
    function``; 0.171.0 has no ``tools.apply_patch`` in code mode): none of their calls ran,
    so a patch of one is no preview (issue 32)."""
    return set(_NOT_A_FUNCTION.findall(error or ""))


def static_commands(wrapper: WrapperCall) -> frozenset[str] | None:
    """The commands a cell's source runs (static ``exec_command``-family calls), or None when
    the source could run anything (unparseable, a dynamic call, a call in a loop). Used to
    tell whether a receipt could belong to this cell at all (issue 32)."""
    try:
        src = _scan_source(wrapper.source)
    except _Unresolved:
        return None
    out = set()
    for c in src.calls:
        if _tool_family(c.tool) != "command":
            continue
        cmd = _command_of(c.tool, c.args)
        if cmd is None or _has_dynamic(c.args.get("cmd", c.args.get("command"))):
            return None
        out.add(cmd)
    return frozenset(out)


def receipt_command(r: Receipt) -> str | None:
    """The command a ``call`` receipt of the command family ran, else None."""
    if r.kind != "call" or _tool_family(r.tool or "") != "command":
        return None
    return _command_of(r.tool or "", r.arguments)


def _display(v: SlotValue | None) -> str | None:
    if v is None:
        return None
    if v.kind == "text" or (v.kind == "json" and isinstance(v.value, str)):
        return v.value
    return v.raw


class _Known:
    """``known_processes`` looked up by normalised process id without copying the mapping
    (a reader's mapping may be large): a direct lookup first, the normalised table only on a
    miss (keys given as ints, floats, …)."""

    def __init__(self, m: Mapping[Any, str]) -> None:
        self._m = m
        self._norm: dict[str | None, str] | None = None

    def get(self, pid: str | None) -> str | None:
        v = self._m.get(pid) if pid is not None else None
        if v is None:
            if self._norm is None:
                self._norm = {_pid(k): x for k, x in self._m.items()}
            v = self._norm.get(pid)
        return v

    def __contains__(self, pid: str | None) -> bool:
        return self.get(pid) is not None

    def __getitem__(self, pid: str | None) -> str:
        v = self.get(pid)
        if v is None:
            raise KeyError(pid)
        return v


@attrs.define
class _CallRecord:
    """What the replay has proved about one command/patch call while it runs."""

    output: str | None
    data: SlotValue | None
    exit_code: int | None
    success: bool | None
    running: bool
    process_id: str | None
    call_id: str | None
    rejected: bool
    polls: list[PollUpdate] = attrs.Factory(list)
    interrupted: bool = False


class _Replay:
    """One matching run over a scanned source and its native receipts (see the module
    docstring for the steps). Raises ``_Unresolved`` when the wrapper must be kept."""

    def __init__(
        self,
        src: _Source,
        plans: Sequence[_Plan],
        pairer: ReceiptPairer,
        known: Mapping[Any, str],
        previews: list[PatchPreview],
        internal: list[InternalEntry],
        settled: Container[Any] = (),
    ) -> None:
        self.src = src
        self.settled = settled
        self.plans = plans
        self.pairer = pairer
        self.known = _Known(known)
        self.previews = previews
        self.internal = internal
        self.slot_of: dict[tuple[int, int], SlotValue] = {}
        self.invs: list[_Invocation] = []
        self.native: list[_Native] = []
        self.used: set[int] = set()
        self.match_of: dict[int, int] = {}  # source call index -> native index
        self.swappable: set[int] = set()  # calls paired with one of several equal receipts
        self.evidence: dict[int, list[str]] = {c.index: [] for c in src.calls}
        self.main_calls = [c for c in src.calls if c.tool != "write_stdin"]
        self.records: dict[int, _CallRecord] = {}
        self.by_pid: dict[str, int] = {}
        self.ext: dict[str, list[PollUpdate]] = {}
        self.ext_interrupt: set[str] = set()

    def run(self, status: str | None, error: str | None, items: list[str] | None, text: str) -> Attribution:
        self._check_inputs()
        self.slot_of = _slot_values(self.src.batches, self.plans, items, text, self.internal)
        # native receipts: never by arrival order
        self.invs = sorted(self.pairer.invocations(), key=lambda v: v.call.call_id)
        self.native = [_native_result(inv) for inv in self.invs]
        self._match_by_identity()
        self._match_by_command()
        self._command_records()
        self._index_processes()
        self._stdin_polls()
        self._native_polls()
        return self._result(status, error)

    def _slot_value(self, c: _SrcCall) -> SlotValue | None:
        if c.batch is None or c.slot is None:
            return self.slot_of.get((single_key(c.index), 0))  # a single call printed whole
        return self.slot_of.get((c.batch, c.slot))

    @staticmethod
    def _slot_name(c: _SrcCall) -> str:
        return f"slot:{c.batch}/{c.slot}" if c.batch is not None else "slot:whole"

    def _check_inputs(self) -> None:
        if not self.src.calls:
            raise _Unresolved(KeepReason.NO_TOOL_CALLS, "the wrapper calls no tools")
        for c in self.src.calls:
            if c.tool == "apply_patch":
                if not isinstance(c.args, str):
                    raise _Unresolved(KeepReason.DYNAMIC_INPUT, "apply_patch input is not a static literal")
            elif not isinstance(c.args, dict):
                raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"{c.tool} arguments are not a static object")
            elif c.tool != "write_stdin" and (
                _has_dynamic(c.args.get("cmd", c.args.get("command"))) or _command_of(c.tool, c.args) is None
            ):
                raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"{c.tool} command is not static")
            elif c.tool != "write_stdin" and _has_dynamic(_cwd_of_raw(c.args)):
                raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"{c.tool} working directory is not static")

    def _match_by_identity(self) -> None:
        """(1) process identity printed in the call's own slot wins over command text."""
        native = self.native
        for c in self.main_calls:
            pid = _slot_pid(self._slot_value(c))
            if pid is None:
                continue
            hits = [j for j, nv in enumerate(native) if nv.pid == pid and nv.inv.tool != "write_stdin"]
            if len(hits) > 1:
                raise _Unresolved(KeepReason.AMBIGUOUS_RECEIPT, f"several receipts carry process id {pid}")
            if not hits:
                continue
            nv = native[hits[0]]
            if _tool_family(nv.inv.tool) != _tool_family(c.tool) or _command_of(
                nv.inv.tool, nv.inv.args
            ) != _command_of(c.tool, c.args):
                raise _Unresolved(KeepReason.IDENTITY_CONFLICT, f"process {pid} belongs to a different command")
            self.match_of[c.index] = hits[0]
            self.used.add(hits[0])
            self.evidence[c.index].append(f"process_id:{pid}")

    def _compatible(self, c: _SrcCall, j: int) -> bool:
        inv = self.native[j].inv
        if j in self.used or _tool_family(inv.tool) != _tool_family(c.tool):
            return False
        if c.tool == "apply_patch":
            raw = inv.args
            if isinstance(raw, Mapping) and isinstance(raw.get("files"), list):
                return _same_files(c.args, raw["files"])  # a FileChange result names its files
            if isinstance(raw, Mapping):
                raw = raw.get("input", raw.get("patch"))
            return isinstance(raw, str) and _crlf(raw).strip() == _crlf(c.args).strip()
        if _command_of(inv.tool, inv.args) != _command_of(c.tool, c.args):
            return False
        a, b = normalize_dir(_cwd_of(c.args)), normalize_dir(_cwd_of(inv.args))
        return a is None or b is None or a == b

    def _match_by_command(self) -> None:
        """(2) mutually unique tool + command + explicit absolute directory."""
        rest = [c for c in self.main_calls if c.index not in self.match_of]
        free = [j for j in range(len(self.native)) if j not in self.used]
        pairs, amb, _ = _unique_pairs(rest, free, self._compatible)
        if amb:
            amb = self._interchangeable(rest, free, amb, pairs)
        if amb:
            c = rest[min(amb)]
            raise _Unresolved(
                KeepReason.AMBIGUOUS_RECEIPT,
                f"call {c.index} ({_command_of(c.tool, c.args) or c.tool}) has no unique native receipt",
            )
        for li, rj in pairs.items():
            c, j = rest[li], free[rj]
            self.match_of[c.index] = j
            self.used.add(j)
            a, b = normalize_dir(_cwd_of(c.args)), normalize_dir(_cwd_of(self.native[j].inv.args))
            self.evidence[c.index].append("command+cwd" if a is not None and a == b else "command")
            if c.index in self.swappable:
                self.evidence[c.index].append("interchangeable")
            pid = _slot_pid(self._slot_value(c))
            if pid is not None and self.native[j].pid not in (None, pid):
                raise _Unresolved(
                    KeepReason.IDENTITY_CONFLICT, f"call {c.index}: slot and receipt disagree on process id"
                )

    def _receipt_facts(self, j: int) -> tuple[Any, ...] | None:
        """Everything a display record takes from receipt ``j`` but its identity; None when it
        has no result."""
        nv = self.native[j]
        if nv.inv.output is None or nv.running:
            return None
        args = nv.inv.args
        return (_tool_family(nv.inv.tool), _command_of(nv.inv.tool, args), normalize_dir(_cwd_of(args)),
                nv.body, nv.exit_code, nv.success)

    def _interchangeable(self, rest: Sequence[_SrcCall], free: Sequence[int], amb: set[int],
                         pairs: dict[int, int]) -> set[int]:
        """Ambiguous calls that are interchangeable (issue 32): the same tool call (same
        arguments, no printed value, no process identity) run N times, and exactly N candidate
        receipts that say the same in everything shown (command, directory, output, exit
        code) — any pairing gives the same records, so they pair in a fixed order (source
        index with receipt call id) — unless a ``write_stdin`` of the cell targets one of them by
        its result (``session_id: a.session_id``): which process that poll reached would then be
        a guess. Returns the calls still ambiguous."""
        targeted = {c.target for c in self.src.calls if c.tool == "write_stdin" and c.target is not None}
        left = sorted(amb)
        while left:
            group = [i for i in left if rest[i].tool == rest[left[0]].tool and rest[i].args == rest[left[0]].args]
            left = [i for i in left if i not in group]
            cands = sorted({rj for i in group for rj in range(len(free)) if self._compatible(rest[i], free[rj])}
                           - set(pairs.values()))
            facts = {self._receipt_facts(free[rj]) for rj in cands}
            claimants = {i for i, c in enumerate(rest) if any(self._compatible(c, free[rj]) for rj in cands)}
            if (len(cands) != len(group) or len(facts) != 1 or None in facts or claimants != set(group)
                    or any(self._slot_value(rest[i]) is not None or rest[i].index in targeted for i in group)):
                return amb
            order = sorted(cands, key=lambda rj: self.native[free[rj]].inv.call.call_id)
            for i, rj in zip(group, order):
                pairs[i] = rj
                amb.discard(i)
                self.swappable.add(rest[i].index)
        return amb

    def _command_records(self) -> None:
        """Each command/patch call with its native result, or its printed value."""
        for c in self.main_calls:
            v = self._slot_value(c)
            j = self.match_of.get(c.index)
            nv = self.native[j] if j is not None else None
            if v is not None:
                self.evidence[c.index].insert(0, self._slot_name(c))
            has_native_result = nv is not None and nv.inv.output is not None
            if not has_native_result and (v is None or v.kind == "spread"):
                if c.tool == "apply_patch":
                    raise _Unresolved(
                        KeepReason.PATCH_WITHOUT_RESULT, f"apply_patch call {c.index} has no separate result"
                    )
                raise _Unresolved(KeepReason.MISSING_RESULT, f"call {c.index} has no attributable result")
            self.records[c.index] = _CallRecord(
                output=nv.body if has_native_result and nv is not None else _display(v),
                data=v,
                exit_code=nv.exit_code if nv else None,
                success=nv.success if nv else None,
                running=bool(nv and nv.running),
                process_id=(nv.pid if nv else None) or _slot_pid(v),
                call_id=nv.inv.call.call_id if nv else None,
                rejected=v is not None and v.kind == "rejected",
            )

    def _index_processes(self) -> None:
        for idx, rec in self.records.items():
            pid = rec.process_id
            if pid is not None:
                if pid in self.by_pid:
                    raise _Unresolved(KeepReason.IDENTITY_CONFLICT, f"two commands claim process {pid}")
                self.by_pid[pid] = idx

    def _settled_here(self, pid: str) -> bool:
        """Whether a call of this cell started process ``pid`` and its receipt is the server's
        completed item (the command's own bytes, whole, with its exit code)."""
        idx = self.by_pid.get(pid)
        j = self.match_of.get(idx) if idx is not None else None
        if j is None:
            return False
        nv = self.native[j]
        return nv.inv.output is not None and nv.inv.output.headerless and nv.exit_code is not None and not nv.running

    def _settled(self, pid: str) -> bool:
        return pid in self.settled or (pid.isdigit() and int(pid) in self.settled)

    def _apply_poll(self, target: str, upd: PollUpdate) -> None:
        """``write_stdin`` updates the command it targets, never a record of its own."""
        ctrl_c = upd.chars is not None and _CTRL_C in upd.chars
        if target in self.by_pid:
            rec = self.records[self.by_pid[target]]
            rec.polls.append(upd)
            rec.interrupted |= ctrl_c
        elif target in self.known:
            self.ext.setdefault(target, []).append(upd)
            if ctrl_c:
                self.ext_interrupt.add(target)
        else:
            raise _Unresolved(KeepReason.UNKNOWN_PROCESS, f"write_stdin targets unknown process {target}")

    def _stdin_compatible(self, c: _SrcCall, j: int) -> bool:
        s_pid, s_chars = _stdin_args(c.args)
        n_pid, n_chars = _stdin_args(self.native[j].inv.args)
        if s_pid is not None and s_pid != n_pid:
            return False
        return c.args.get("chars", c.args.get("input")) in (None, DYNAMIC) or s_chars == n_chars

    def _stdin_polls(self) -> None:
        """The script's own ``write_stdin`` calls, each matched to a unique native receipt."""
        native = self.native
        stdin_src = [c for c in self.src.calls if c.tool == "write_stdin"]
        stdin_native = [j for j in range(len(native)) if native[j].inv.tool == "write_stdin" and j not in self.used]
        spairs, samb, _ = _unique_pairs(stdin_src, stdin_native, self._stdin_compatible)
        if samb:
            raise _Unresolved(KeepReason.AMBIGUOUS_RECEIPT, "a write_stdin call has no unique native receipt")
        for li, c in enumerate(stdin_src):
            s_pid, s_chars = _stdin_args(c.args)
            v = self._slot_value(c)
            j = stdin_native[spairs[li]] if li in spairs else None
            nv = native[j] if j is not None else None
            if nv is not None and j is not None:
                self.used.add(j)
                n_pid, n_chars = _stdin_args(nv.inv.args)
                s_pid = s_pid or n_pid
                s_chars = s_chars if s_chars is not None else n_chars
            if s_pid is None and c.target is not None and c.target in self.records:
                s_pid = self.records[c.target].process_id  # `session_id: r.session_id` of call `r`
            if s_pid is None:
                raise _Unresolved(KeepReason.UNKNOWN_PROCESS, f"write_stdin call {c.index} has no provable target")
            if (nv is None or nv.inv.output is None) and v is None:
                if (s_pid in self.known and self._settled(s_pid)) or self._settled_here(s_pid):
                    continue  # its command's record already holds all it could read (issue 32)
                raise _Unresolved(KeepReason.MISSING_RESULT, f"write_stdin call {c.index} has no attributable result")
            ev = ([self._slot_name(c)] if v is not None else []) + (
                [f"receipt:{nv.inv.call.call_id}"] if nv is not None else []
            )
            body = nv.body if nv is not None and nv.inv.output is not None else _display(v)
            self._apply_poll(
                s_pid,
                PollUpdate(
                    s_chars,
                    body,
                    nv.exit_code if nv else None,
                    nv.inv.call.call_id if nv else None,
                    c.index,
                    tuple(ev),
                ),
            )

    def _native_polls(self) -> None:
        """Native polls and late completions outside the source update their command too."""
        for j, nv in enumerate(self.native):
            if j in self.used or nv.inv.tool != "write_stdin":
                continue
            t_pid, chars = _stdin_args(nv.inv.args)
            if t_pid is not None and (t_pid in self.by_pid or t_pid in self.known):
                self.used.add(j)
                self._apply_poll(
                    t_pid, PollUpdate(chars, nv.body, nv.exit_code, nv.inv.call.call_id, None, ("native_poll",))
                )
        for out in self.pairer.orphan_outputs():
            if out.process_id is not None and out.process_id in self.by_pid:
                late = _native_result(_Invocation(Receipt("call", out.call_id), out))
                self.records[self.by_pid[out.process_id]].polls.append(
                    PollUpdate(None, late.body, late.exit_code, out.call_id, None, ("late_completion",))
                )

    def _result(self, status: str | None, error: str | None) -> Attribution:
        order = _poll_order(self.invs, self.pairer)
        out_records = [self._tool_record(c, order) for c in self.main_calls]
        updates = []
        for pid_ in sorted(self.ext):
            polls = sorted(self.ext[pid_], key=order)
            code = _settle(polls, None, f"process {pid_}")
            if pid_ in self.ext_interrupt:
                st: str | None = "interrupted"
            else:
                st = _status(code, None, False, False) if code is not None else None
            updates.append(ProcessUpdate(pid_, self.known[pid_], tuple(polls), st, code))
        unmatched = tuple(sorted(nv.inv.call.call_id for j, nv in enumerate(self.native) if j not in self.used))
        unmatched += tuple(sorted(o.call_id for o in self.pairer.orphan_outputs() if o.process_id not in self.by_pid))
        return Attribution(
            True,
            records=tuple(out_records),
            previews=tuple(self.previews),
            internal=tuple(self.internal),
            updates=tuple(updates),
            script_status=status,
            script_error=error,
            unmatched_receipts=unmatched,
            evicted=self.pairer.evicted,
        )

    def _tool_record(self, c: _SrcCall, order: Any) -> ToolRecord:
        rec = self.records[c.index]
        polls = sorted(rec.polls, key=order)
        exit_code = _settle(polls, rec.exit_code, f"call {c.index}")
        running = rec.running and exit_code is None
        st = "interrupted" if rec.interrupted else _status(exit_code, rec.success, running, rec.rejected)
        patch = None
        if c.tool == "apply_patch":
            patch = next(p for p in self.previews if p.source_index == c.index)
            patch = attrs.evolve(patch, status=st)
            self.previews[:] = [patch if p.source_index == c.index else p for p in self.previews]
        return ToolRecord(
            tool=c.tool,
            command=_command_of(c.tool, c.args) if c.tool != "apply_patch" else None,
            args=c.args,
            cwd=_cwd_of(c.args),
            output=rec.output,
            data=rec.data,
            status=st,
            exit_code=exit_code,
            process_id=rec.process_id,
            call_id=rec.call_id,
            source_index=c.index,
            slot=(c.batch, c.slot) if c.batch is not None and c.slot is not None else None,
            evidence=tuple(self.evidence[c.index]),
            polls=tuple(polls),
            patch=patch,
        )


def _poll_order(invs: Sequence[_Invocation], pairer: ReceiptPairer) -> Any:
    """Sort key of poll chunks: source index first, then the output's ``ordinal``, then
    call id — never arrival order."""
    ordinals = {inv.call.call_id: (inv.output.ordinal if inv.output else None) for inv in invs}
    ordinals.update({o.call_id: o.ordinal for o in pairer.orphan_outputs()})

    def order(p: PollUpdate) -> tuple[int, int, str]:
        if p.source_index is not None:
            return (0, p.source_index, "")
        ordinal = ordinals.get(p.call_id or "")
        return (1, ordinal if ordinal is not None else 1 << 62, p.call_id or "")

    return order


def _settle(polls: list[PollUpdate], exit_code: int | None, what: str) -> int | None:
    codes = {p.exit_code for p in polls if p.exit_code is not None}
    if exit_code is not None:
        codes.add(exit_code)
    if len(codes) > 1:
        raise _Unresolved(KeepReason.STATUS_CONFLICT, f"{what} has conflicting native exit codes")
    return codes.pop() if codes else None
