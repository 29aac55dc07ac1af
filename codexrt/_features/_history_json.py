"""The JSON forms of history (``codexrt serve``, ``--json``): display records and transcripts as
plain JSON values, keys camelCase. Split from :mod:`codexrt._features._history` (its size)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from codexrt._features._history_values import Transcript
from codexrt._sansio._projection import DisplayRecord, plain_message_json, plain_page, project_native_item

__all__ = ["CLIPPED_VALUE", "MAX_VALUE_DEPTH", "plain_page_json", "record_to_json", "transcript_to_json"]


def _camel(s: str) -> str:
    head, *rest = s.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


#: Per type: its attrs fields' camelCase names and one getter of all their values (in field
#: order), or None for a type that is not an attrs class. A history page turns thousands of
#: records into JSON (``codex.readHistoryPage``); asking attrs and camel-casing every field of
#: every record was most of its time (issue 34).
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None] = {}
_SCALARS = frozenset({str, int, float, bool, type(None)})

#: How deep a value inside one display record is emitted. Tool results (MCP
#: ``structuredContent``, raw unknown items) come from files and servers we do not control; one
#: nested ~900 deep made ``show --json`` end in a RecursionError. Deeper levels are replaced by
#: :data:`CLIPPED_VALUE`.
MAX_VALUE_DEPTH = 64
CLIPPED_VALUE = f"[nested deeper than {MAX_VALUE_DEPTH} levels: not shown]"


def _fields_of(t: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] | None:
    if not attrs.has(t):
        return None
    names = [f.name for f in attrs.fields(t)]
    if len(names) < 2:  # attrgetter of one name returns the value, not a tuple
        return tuple(_camel(n) for n in names), lambda v: tuple(getattr(v, n) for n in names)
    return tuple(_camel(n) for n in names), operator.attrgetter(*names)


def _jsonable(root: Any, max_depth: int = MAX_VALUE_DEPTH) -> Any:
    """``root`` (attrs records, dicts, lists, scalars) as plain JSON values, keys camelCase for
    attrs fields. Iterative (an explicit stack, no recursion), so no depth of input can raise a
    RecursionError here or in the JSON encoder that writes the result: containers deeper than
    ``max_depth`` become :data:`CLIPPED_VALUE`. Scalars are stored in place, never stacked."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(root, holder, 0, 0)]
    while stack:
        v, parent, key, depth = stack.pop()
        t = type(v)
        if t in _SCALARS:
            parent[key] = v
            continue
        try:
            fields = _FIELDS[t]
        except KeyError:
            fields = _FIELDS[t] = _fields_of(t)
        items: Iterable[tuple[Any, Any]]
        new: Any
        if fields is not None:
            camels, values = fields
            new, items = {}, zip(camels, values(v))
        elif isinstance(v, dict):
            new, items = {}, [(str(k), x) for k, x in v.items()]
        elif isinstance(v, (list, tuple)):
            new, items = [None] * len(v), enumerate(v)
        else:
            parent[key] = v
            continue
        if depth >= max_depth:
            parent[key] = CLIPPED_VALUE
            continue
        parent[key] = new
        is_dict = isinstance(new, dict)
        for k, x in items:
            if type(x) in _SCALARS:
                new[k] = x
                continue
            if is_dict:
                new[k] = None  # the key's place: dict order is the source order
            stack.append((x, new, k, depth + 1))
    return holder[0]


_EMPTY_SEQS = frozenset({tuple, list})


def record_to_json(r: DisplayRecord) -> dict[str, Any]:
    """A display record as JSON: ``kind`` plus its fields in camelCase. The record's own level
    is unrolled here (a page turns thousands of records into JSON, issue 34): scalar and empty
    fields are stored at once, every other field goes through :func:`_jsonable` one level down,
    so the depth clip is the same as walking the whole record."""
    t = type(r)
    try:
        fields = _FIELDS[t]
    except KeyError:
        fields = _FIELDS[t] = _fields_of(t)
    if fields is None:
        return {"kind": r.kind, **_jsonable(r)}
    camels, values = fields
    out: dict[str, Any] = {"kind": r.kind}
    for k, x in zip(camels, values(r)):
        tx = type(x)
        if tx in _SCALARS:
            out[k] = x
        elif tx in _EMPTY_SEQS and not x:
            out[k] = []
        else:
            out[k] = _jsonable(x, MAX_VALUE_DEPTH - 1)
    return out


def plain_page_json(entries: Sequence[Any], thread_id: str | None) -> list[dict[str, Any]] | None:
    """The JSON records of a ``thread/items/list`` page of plain messages — exactly
    ``[record_to_json(r) for r in Projector.page_records(thread_id, entries)]`` — or None where
    that page takes the general path (:func:`~codexrt._sansio._projection.plain_page`).
    Each message is written straight as JSON (:func:`plain_message_json`; ≈ 4× faster per page,
    issue 34), one with an image or a file mention through its record. No redactor and no mask:
    the caller has neither, or a privacy masker, which leaves messages as they are."""

    def make(item: dict[str, Any], turn_id: str) -> tuple[dict[str, Any], str, Any]:
        value = plain_message_json(item, thread_id=thread_id, turn_id=turn_id)
        if value is None:
            value = record_to_json(project_native_item(item, thread_id=thread_id, turn_id=turn_id))
        return value, value["id"], value["clientId"] if value["kind"] == "userMessage" else None

    return plain_page(entries, make)


def transcript_to_json(t: Transcript) -> dict[str, Any]:
    return {
        "threadId": t.thread_id,
        "source": t.source,
        "complete": t.complete,
        "pagination": t.pagination,
        "notices": list(t.notices),
        "fallbackReason": t.fallback_reason,
        "messageCount": t.message_count,
        "turns": [{"turnId": g.turn_id, "status": g.status, "startedAt": g.started_at,
                   "completedAt": g.completed_at, "records": [record_to_json(r) for r in g.records]}
                  for g in t.turns],
    }
