"""Stage 2 of the replay: the printed output, read through the print plans.

The ``Script completed|failed|...`` header and a trailing ``Script error:`` envelope are split
off (CRLF normalised); then each batch's plan yields one :class:`SlotValue` per array index —
JSON, plain text, an explicit rejection (only when the source prints the whole ``allSettled``
receipt by index), or a spread envelope with no independent result. Empty array, ``null`` and
a rejection stay distinct; text equal to a label is data; an ``i``/``index`` conflict or a
duplicate slot raises ``_Unresolved`` (the wrapper is kept).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ._model import InternalEntry, KeepReason, SlotValue, _crlf, _Unresolved
from ._plan import _Plan
from ._source import _Batch


_HEADER = re.compile(
    r"^(Script completed|Script failed|Script terminated|Script running with cell ID \S+)\n"
    r"(?:Wall time [^\n]*\n)?Output:\n?"
)


def _split_output(output: str | Sequence[str] | None) -> tuple[str | None, str | None, list[str] | None, str]:
    """(script status, script error, items or None, joined printed text)."""
    if output is None:
        return None, None, None, ""
    items = [_crlf(output)] if isinstance(output, str) else [_crlf(x) for x in output]
    status = None
    if items:
        m = _HEADER.match(items[0])
        if m:
            head = m.group(1)
            status = {
                "Script completed": "completed",
                "Script failed": "failed",
                "Script terminated": "terminated",
            }.get(head, "running")
            rest = items[0][m.end() :]
            items = ([rest] if rest else []) + items[1:]
    error = None
    if status == "failed" and items:
        last = items[-1]
        k = last.rfind("Script error:\n")
        if k >= 0 and (k == 0 or last[k - 1] == "\n"):
            error = last[k + len("Script error:\n") :]
            items[-1] = last[:k].rstrip("\n")
            if not items[-1]:
                items.pop()
    as_items = None if isinstance(output, str) else items
    return status, error, as_items, "\n".join(items)


def _json_or_text(raw: str) -> SlotValue:
    try:
        return SlotValue("json", json.loads(raw), raw)
    except (ValueError, RecursionError):  # too deep is not JSON here
        return SlotValue("text", raw, raw)


_DECODER = json.JSONDecoder()


def _label_slots(plan: _Plan, n: int, items: list[str] | None, text: str) -> dict[int, SlotValue]:
    label = re.compile(re.escape(plan.prefix) + r"(-?\d+)" + re.escape(plan.sep), re.S)
    slots: dict[int, SlotValue] = {}

    def put(k: int, raw: str) -> None:
        slot = k - plan.offset
        if not 0 <= slot < n:
            raise _Unresolved(KeepReason.SLOT_MISMATCH, f"label index {k} is outside the batch of {n}")
        if slot in slots:
            raise _Unresolved(KeepReason.INDEX_CONFLICT, f"slot {slot} printed twice")
        slots[slot] = _json_or_text(raw) if plan.json_value else SlotValue("text", raw, raw)

    if items is not None:  # one text() per item: a label can only start an item
        for item in items:
            m = label.match(item)
            if m:
                put(int(m.group(1)), item[m.end() :])
        return slots
    if plan.json_value:
        # A JSON value cannot hold a raw newline, so a label starts at the beginning of a
        # line or right where the previous value ended; label text inside a JSON string is
        # data. Exactly one JSON value is consumed after each label.
        pos = 0
        for k in range(plan.offset, plan.offset + n):
            want = f"{plan.prefix}{k}{plan.sep}"
            cands = [
                m.start()
                for m in re.finditer(re.escape(want), text)
                if m.start() >= pos and (m.start() in (0, pos) or text[m.start() - 1] == "\n")
            ]
            if len(cands) > 1:
                raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, f"label {want!r} appears more than once")
            if not cands:
                continue
            start = cands[0] + len(want)
            try:
                _, end = _DECODER.raw_decode(text, start)
            except (ValueError, RecursionError):  # too deep is not JSON here
                nl = text.find("\n", start)
                end = len(text) if nl < 0 else nl
            put(k, text[start:end])
            pos = end
        return slots
    # Raw (non-JSON) values may span lines: a slot starts at a line beginning with the
    # expected next label; every boundary must be unique, and nothing else may print.
    if not plan.exclusive:
        raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, "other prints interleave with multi-line labelled values")
    lines = text.split("\n")
    starts: list[int] = []
    for k in range(plan.offset, plan.offset + n):
        want = f"{plan.prefix}{k}{plan.sep}"
        lo = starts[-1] + 1 if starts else 0
        cands = [j for j in range(lo, len(lines)) if lines[j].startswith(want)]
        if len(cands) > 1:
            raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, f"label {want!r} appears more than once")
        if not cands:
            break
        starts.append(cands[0])
    for pos_k, j in enumerate(starts):
        end = starts[pos_k + 1] if pos_k + 1 < len(starts) else len(lines)
        want = f"{plan.prefix}{plan.offset + pos_k}{plan.sep}"
        body = "\n".join([lines[j][len(want) :], *lines[j + 1 : end]])
        put(plan.offset + pos_k, body)
    return slots


def _json_values(items: list[str] | None, text: str) -> list[Any]:
    chunks = items if items is not None else [text]
    values: list[Any] = []
    for chunk in chunks:
        pos = 0
        while True:
            while pos < len(chunk) and chunk[pos].isspace():
                pos += 1
            if pos >= len(chunk):
                break
            try:
                v, pos = _DECODER.raw_decode(chunk, pos)
            except (ValueError, RecursionError):  # too deep is not JSON here
                nl = chunk.find("\n", pos)
                if nl < 0:
                    break
                pos = nl + 1
                continue
            values.append(v)
    return values


def _envelope_slots(plan: _Plan, n: int, items: list[str] | None, text: str) -> dict[int, SlotValue]:
    slots: dict[int, SlotValue] = {}
    for v in _json_values(items, text):
        envs = v if isinstance(v, list) else [v]
        for env in envs:
            if not isinstance(env, dict) or not any(k in env for k in ("i", "index")):
                continue
            ids = {env[k] for k in ("i", "index") if k in env and not isinstance(env[k], (dict, list))}
            if len(ids) != 1 or any(k not in plan.index_keys for k in ("i", "index") if k in env):
                raise _Unresolved(KeepReason.INDEX_CONFLICT, f"envelope index keys conflict: {env!r}")
            k = ids.pop()
            if not isinstance(k, int) or isinstance(k, bool):
                raise _Unresolved(KeepReason.INDEX_CONFLICT, f"envelope index {k!r} is not an integer")
            slot = k - plan.offset
            if not 0 <= slot < n or slot in slots:
                raise _Unresolved(KeepReason.INDEX_CONFLICT, f"envelope slot {k} is out of range or repeated")
            if plan.spread or "result" not in env:
                body = {key: val for key, val in env.items() if key not in ("i", "index")}
                slots[slot] = SlotValue("spread", body, json.dumps(env))
            else:
                slots[slot] = SlotValue("json", env["result"], json.dumps(env["result"]))
    return slots


def _array_slots(n: int, items: list[str] | None, text: str) -> dict[int, SlotValue]:
    arrays = [v for v in _json_values(items, text) if isinstance(v, list) and len(v) == n]
    if len(arrays) != 1:
        if arrays:
            raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, "the batch array was printed more than once")
        return {}
    return {k: SlotValue("json", v, json.dumps(v)) for k, v in enumerate(arrays[0])}


def _unwrap_settled(v: SlotValue) -> SlotValue:
    """Unwrap a whole settled receipt printed by index (R-H-5): the rejection marker
    becomes the slot kind, the reason stays the body."""
    val = v.value
    if v.kind == "json" and isinstance(val, dict):
        if val.get("status") == "fulfilled" and set(val) == {"status", "value"}:
            return SlotValue("json", val["value"], json.dumps(val["value"]))
        if val.get("status") == "rejected" and set(val) <= {"status", "reason"}:
            reason = val.get("reason")
            return SlotValue("rejected", reason, json.dumps(reason))
    raise _Unresolved(KeepReason.SLOT_MISMATCH, "an allSettled slot is not a settled receipt")


def _slot_values(
    batches: Sequence[_Batch],
    plans: Sequence[_Plan],
    items: list[str] | None,
    text: str,
    internal: list[InternalEntry],
) -> dict[tuple[int, int], SlotValue]:
    """The printed value of every (batch, slot) whose batch has a print plan; non-tool
    entries are appended to ``internal`` with the value printed at their slot."""
    slot_of: dict[tuple[int, int], SlotValue] = {}
    for plan in plans:
        if plan.kind == "single":  # the only print: one JSON object, the call's whole result
            chunks = items if items is not None else [text]
            v = _json_or_text(chunks[0].strip()) if len(chunks) == 1 else None
            if v is not None and v.kind == "json" and isinstance(v.value, dict):
                slot_of[(plan.batch, 0)] = v
    for batch in batches:
        mine = [p for p in plans if p.batch == batch.number]
        if len(mine) > 1:
            raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, "the batch is printed in more than one way")
        n = len(batch.entries)
        if mine:
            plan = mine[0]
            if plan.kind == "label":
                slots = _label_slots(plan, n, items, text)
            elif plan.kind == "envelope":
                slots = _envelope_slots(plan, n, items, text)
            else:
                slots = _array_slots(n, items, text)
            for k, v in slots.items():
                if batch.settled and plan.whole and v.kind == "json":
                    v = _unwrap_settled(v)  # the whole settled receipt was printed by index
                slot_of[(batch.number, k)] = v
        for k, (what, entry) in enumerate(batch.entries):
            if what == "internal":
                internal.append(InternalEntry(batch.number, k, entry, slot_of.get((batch.number, k))))
    return slot_of
