"""The native path of a :class:`~._projector.Projector`: ``Turn`` objects, item pages,
``thread/items/list`` entries, live items and deltas, and local submissions upserted into the
:class:`~._store.RecordStore` (R-H-1, R-H-4)."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any

import attrs
import msgspec
from msgspec import Raw

from .._paging import RawPageData
from ._native import plain_message_ids, project_native_item
from ._plain_text import decode_entries, plain_ids, plain_record
from ._records import AssistantMessage, CommandExecution, DisplayRecord, ImageSource, Reasoning, UserMessage
from ._shapes import _int
from ._store import RecordStore, _Entry, _redact_record, _Unprojected

#: The item types :func:`plain_page_records` takes: their records depend on the item alone
#: (no status field, no times, nothing closed or completed at read time).
_PLAIN_TYPES = frozenset({"userMessage", "agentMessage"})


_NO_ITEMS = Raw(b"[]")


class _PlainTurn(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A ``Turn`` of a ``thread/turns/list`` page: every field the pinned server writes (the
    schema's ``Turn``), each with its type. An unknown field or a value of another type fails the
    decode, and every value but ``items`` is read (a number out of range fails it as it fails a
    plain decode); ``items`` is kept as text, and a page is taken only when every turn's is
    ``[]``. So a page this takes is one the general path reads the same, and a page with items (a
    server that ignores ``"notLoaded"``) is not decoded twice in full."""

    id: str = ""  # absent: "" (as the general path reads it)
    status: str = "unknown"
    items: Raw = _NO_ITEMS  # left undecoded: a turn with items takes the general path, which reads them
    itemsView: str | None = None  # noqa: N815 (the wire's names)
    error: Any = None
    startedAt: int | None = None  # noqa: N815
    completedAt: int | None = None  # noqa: N815
    durationMs: int | None = None  # noqa: N815
    rootTurnId: str | None = None  # noqa: N815


_turns_decoder = msgspec.json.Decoder(list[_PlainTurn])


def _decode_item_less_turns(raw: bytes | Raw) -> list[_PlainTurn] | None:
    """A ``thread/turns/list`` page's ``data`` text as turns without items (``itemsView:
    "notLoaded"``), or None: not every entry is such a turn (the general path decides)."""
    try:
        turns = _turns_decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        return None
    for t in turns:
        if t.items != _NO_ITEMS:  # items (a server that ignores "notLoaded"), or not a list
            return None
    return turns


def plain_page_records(entries: Sequence[Any], thread_id: str | None, *,
                       redact: Callable[[str], str] | None = None,
                       mask: Callable[[Any], Any] | None = None) -> list[DisplayRecord] | None:
    """The display records of one ``thread/items/list`` page of plain messages, or None.

    Exactly what a fresh projector fed only this page (``add_native_entries``, then
    ``records()``) returns, without the record store (issue 34: serve projects every page it
    answers on its own; the store, its anchors and the turn groups were most of that time).
    Such a projector keeps each entry's record as :func:`project_native_item` made it: a
    completed message keeps its status, a new id is appended to its turn, turns come in the
    order they first appear, ``redact`` then ``mask`` apply to each record. Whatever would make
    the store do more returns None (the caller takes the general path): see
    :func:`plain_page`. ``tests/sansio/test_plain_page.py`` checks the equality on generated
    and recorded pages."""

    def make(item: dict[str, Any], turn_id: str) -> tuple[DisplayRecord, str, Any]:
        rec = project_native_item(item, thread_id=thread_id, turn_id=turn_id)
        return rec, rec.id, rec.client_id if type(rec) is UserMessage else None

    out: list[DisplayRecord] | None = plain_page(entries, make)
    if out is None:
        return None
    if redact is not None:
        out = [_redact_record(r, redact) for r in out]
    if mask is not None:
        out = [mask(r) for r in out]
    return out


def plain_page(entries: Sequence[Any], make: Callable[[dict[str, Any], str], tuple[Any, str, Any]]) -> list[Any] | None:
    """The per-entry values of a page of plain messages in record order, or None.

    ``make(item, turn_id)`` gives an entry's value (its record, or that record's JSON form)
    with the record's id and ``clientId`` (None for an assistant message). Values come turn by
    turn, turns in the order they first appear, entries of a turn in page order — the order of
    a fresh projector's records. None (the general path must run) for an entry that is not an
    object or whose item is not a ``userMessage``/``agentMessage``, an id or a ``clientId``
    seen twice (upsert, re-keying), a turn id the projector orders apart (``local-turn:``)."""
    turns: dict[str, list[Any]] = {}
    keys: set[str] = set()
    clients: set[str] = set()
    for e in entries:
        if not isinstance(e, dict):
            return None
        item = e.get("item")
        if not isinstance(item, dict) or item.get("type") not in _PLAIN_TYPES:
            return None
        turn_id = str(e.get("turnId", ""))
        if turn_id.startswith("local-turn:"):
            return None
        value, key, client = make(item, turn_id)
        if key in keys:
            return None
        keys.add(key)
        if client:
            if client in clients:
                return None
            clients.add(client)
        group = turns.get(turn_id)
        if group is None:
            group = turns[turn_id] = []
        group.append(value)
    return [v for group in turns.values() for v in group]


def _new_messages(items: list[Any], known: Container[str],
                  client_ids: dict[str, str]) -> list[tuple[str, str | None]] | None:
    """The id and ``clientId`` of each of ``items`` when every one is a plain message
    (:func:`plain_message_ids`) new to the store (:func:`_all_new`): the appending fast paths of
    :class:`NativeFeed`; else None."""
    out: list[tuple[str, str | None]] = []
    for item in items:
        ids = plain_message_ids(item) if type(item) is dict else None
        if ids is None:
            return None
        out.append(ids)
    return out if _all_new(out, known, client_ids) else None


def _all_new(ids: list[tuple[str, str | None]], known: Container[str], client_ids: dict[str, str]) -> bool:
    """Whether the messages of these ids and ``clientId``s are all new to the store: no id
    stored (in ``known``) or repeated, no ``clientId`` repeated or registered to a stored entry
    or to one of these ids (the general path, a batch per turn, would re-key that one when an
    earlier batch stored the id: helper-34)."""
    keys: set[str] = set()
    clients: set[str] = set()
    for key, client in ids:
        if key in known or key in keys:
            return False
        keys.add(key)
        if client:
            if client in clients or client_ids.get(client) in known:
                return False
            clients.add(client)
    return not any(client_ids.get(c) in keys for c in clients)


def _entry_times(e: dict[str, Any], item: dict[str, Any]) -> tuple[int | None, int | None]:
    """A ``thread/items/list`` entry's start and end times, the item's where the entry has none."""
    st, ct = _int(e.get("startedAtMs")), _int(e.get("completedAtMs"))
    return (_int(item.get("startedAtMs")) if st is None else st,
            _int(item.get("completedAtMs")) if ct is None else ct)


class NativeFeed:
    """Feeds native items into a store (the public methods of the same names on
    :class:`~._projector.Projector` document them)."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store

    def add_native_turn(self, turn: dict[str, Any], *, prepend: bool = False, items_follow: bool = False) -> None:
        tid = str(turn.get("id", ""))
        self._store.turn(tid, prepend=prepend)
        self._store.turn_status(
            tid, str(turn.get("status", "unknown")), started_at=_int(turn.get("startedAt")),
            completed_at=_int(turn.get("completedAt")), error=turn.get("error"),
        )
        items = turn.get("items")
        if isinstance(items, list) and items and not (items_follow and self._append_deferred(tid, items)):
            self._add_batch(tid, list(items), [(None, None)] * len(items), defer=items_follow)

    def add_native_turns(self, turns: Iterable[Any] | RawPageData, *, items_follow: bool = False) -> None:
        if isinstance(turns, RawPageData):
            if self._add_item_less(turns.raw):
                return
            turns = turns.dicts()
        for t in turns:
            if isinstance(t, dict):
                self.add_native_turn(t, items_follow=items_follow)

    def _add_item_less(self, raw: bytes | Raw) -> bool:
        """:meth:`add_native_turn` of each turn of a page's ``data`` given as its JSON text, when
        every entry is a turn without items (``itemsView: "notLoaded"``: ``read_thread``'s turns
        walk), decoded into structs (:class:`_PlainTurn`); return True. Return False, having
        changed nothing, otherwise (the caller decodes the page plainly). Issue 34: a dict per
        turn and a dozen lookups in it, for the 1,000 turns of a long thread."""
        plain = _decode_item_less_turns(raw)
        if plain is None:
            return False
        turn_status = self._store.turn_status  # what add_native_turn does with a turn without items
        for t in plain:
            turn_status(t.id, t.status, started_at=t.startedAt, completed_at=t.completedAt, error=t.error)
        return True

    def add_native_entries(self, entries: Iterable[dict[str, Any]] | RawPageData) -> None:
        if isinstance(entries, RawPageData):
            if self._append_plain(entries.raw):
                return
            entries = entries.dicts()
        if isinstance(entries, list) and (self._replace_known(entries) or self._append_new(entries)):
            return
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

    def _append_deferred(self, turn_id: str, items: list[Any]) -> bool:
        """Append a turn's items as deferred records (``items_follow``) and return True; return
        False, having changed nothing, when one is not a plain message new to the store (the
        general path runs).

        The items must be plain messages new to the store (:func:`_new_messages`). For such items
        :meth:`_add_batch` would register each ``clientId`` to its item's id, defer every
        record and append the entries at the end of the turn in order, each complete and not
        open, with the item's times: this does the same, without its merge by anchors."""
        store = self._store
        known, client_ids = store.entries, store.client_ids
        ids = _new_messages(items, known, client_ids)
        if ids is None:
            return False
        thread_id, deferred, turn_keys = store.thread_id, store.deferred, store.turn(turn_id).keys
        for (key, client), item in zip(ids, items):
            if client:
                client_ids[client] = key
            e = _Entry(key, _Unprojected(item, thread_id, turn_id), True, False, "native", turn_id,
                       (_int(item.get("startedAtMs")), _int(item.get("completedAtMs")), None))
            known[key] = e
            deferred.append(e)
            turn_keys.append(key)
        return True

    def _replace_known(self, entries: list[Any]) -> bool:
        """Apply ``thread/items/list`` entries that each replace a stored message of their own
        turn and return True (issue 34: the items walk of ``read_thread`` repeats the items of
        turns a server sent with them); return False, having changed nothing, when one does not
        (the general path runs).

        Each entry must be an object whose item is a plain message (:func:`plain_message_ids`:
        its record is made from the item alone and never raises), whose id is a stored entry of
        the entry's ``turnId`` (not a local submission's ``local:`` key), and whose ``clientId``
        (if any) is registered to that id. ``entries`` must be a list. For
        such entries :meth:`_add_batch` would resolve each key to itself, insert nothing and
        upsert each in turn: the record replaced by the item's, ``complete``, not ``open`` (a
        completed message), the times merged, the deltas cleared. This does the same, without
        the batches, anchors and keyword calls."""
        store = self._store
        known, client_ids = store.entries, store.client_ids
        todo: list[tuple[_Entry, Any, dict[str, Any]]] = []
        for e in entries:
            item = e.get("item") if type(e) is dict else None
            ids = plain_message_ids(item) if type(item) is dict else None
            if ids is None:
                return False
            key, client = ids
            entry = known.get(key)
            if (entry is None or entry.turn_id != str(e.get("turnId", "")) or (client and client_ids.get(client) != key)
                    or key.startswith("local:")):  # a local submission's key: resolve_ids decides
                return False
            todo.append((entry, item, e))
        thread_id = store.thread_id
        for entry, item, e in todo:
            entry.record = project_native_item(item, thread_id=thread_id, turn_id=entry.turn_id)
            st, ct = _entry_times(e, item)
            ost, oct_, rcv = entry.times  # a new time wins, a missing one keeps the old
            entry.times = (st if st is not None else ost, ct if ct is not None else oct_, rcv)
            entry.complete, entry.open = True, False
            if entry.deltas:
                entry.deltas.clear()
        return True

    def _append_new(self, entries: list[Any]) -> bool:
        """Apply ``thread/items/list`` entries that are each a plain message new to the store
        and return True (issue 34: ``read_thread``'s items walk after a turns walk that loaded
        no items); return False, having changed nothing, when one is not (the general path runs).

        ``entries`` must be a list of objects whose items are plain messages new to the store
        (:func:`_new_messages`). For such entries :meth:`_add_batch` would register each
        ``clientId`` to its item's id and append each entry at the end of its turn in page order
        (turns made in the order they first appear), complete and not open, with the entry's
        times (the item's where the entry has none): this does the same (:meth:`_append_rows`),
        without the batches, anchors and pending lists."""
        store = self._store
        items: list[Any] = [e.get("item") if type(e) is dict else None for e in entries]
        ids = _new_messages(items, store.entries, store.client_ids)
        if ids is None:
            return False
        thread_id = store.thread_id

        def row(e: dict[str, Any], item: dict[str, Any]) -> tuple[str, Any, int | None, int | None]:
            turn_id = str(e.get("turnId", ""))
            return (turn_id, project_native_item(item, thread_id=thread_id, turn_id=turn_id), *_entry_times(e, item))

        self._append_rows(ids, map(row, entries, items))
        return True

    def _append_plain(self, raw: bytes | Raw) -> bool:
        """:meth:`_append_new` of a page's ``data`` given as its JSON text, decoded into structs
        (:func:`~._plain_text.decode_entries`) instead of dicts; False, having changed nothing,
        when the structs do not model an entry or :meth:`_append_new` would decline (the caller
        then decodes the page plainly). The records, ids and times are those of the entries'
        dict forms (:func:`~._plain_text.plain_record`)."""
        page = decode_entries(raw)
        ids = plain_ids(page) if page is not None else None
        store = self._store
        if ids is None or not _all_new(ids, store.entries, store.client_ids):
            return False
        thread_id = store.thread_id

        def row(e: Any) -> tuple[str, Any, int | None, int | None]:
            item, turn_id, st, ct = e.item, e.turnId, e.startedAtMs, e.completedAtMs
            return (turn_id, plain_record(item, thread_id, turn_id), item.startedAtMs if st is None else st,
                    item.completedAtMs if ct is None else ct)

        self._append_rows(ids, map(row, page))  # type: ignore[arg-type]
        return True

    def _append_rows(self, ids: list[tuple[str, str | None]],
                     rows: Iterable[tuple[str, Any, int | None, int | None]]) -> None:
        """Append entries :func:`_all_new` accepted, each given as ``(turn id, record, started,
        completed)``: each ``clientId`` registered to its id, each entry complete and not open at
        the end of its turn, in order."""
        store = self._store
        known, client_ids, turn_keys, cur = store.entries, store.client_ids, None, None
        for (key, client), (turn_id, rec, st, ct) in zip(ids, rows):
            if turn_id != cur:
                cur, turn_keys = turn_id, store.turn(turn_id).keys
            if client:
                client_ids[client] = key
            known[key] = _Entry(key, rec, True, False, "native", turn_id, (st, ct, None))
            turn_keys.append(key)  # type: ignore[union-attr]

    def add_native_items(self, turn_id: str, items: Sequence[dict[str, Any]]) -> None:
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
        self._add_batch(turn_id, [item], [(started_at_ms, completed_at_ms)], completed=completed,
                        received_at_ms=received_at_ms)

    def add_delta(self, turn_id: str, item_id: str, delta: str, *, field: str = "text") -> None:
        self._store.settle()
        e = self._store.entries.get(item_id)
        if e is None:
            rec: Any
            if field == "output":
                rec = CommandExecution(id=item_id, thread_id=self._store.thread_id, turn_id=turn_id, status="inProgress", command="")
            elif field in ("summary", "content"):
                rec = Reasoning(id=item_id, thread_id=self._store.thread_id, turn_id=turn_id, status="inProgress",
                                summary=(), content=(), state="encrypted")
            else:
                rec = AssistantMessage(id=item_id, thread_id=self._store.thread_id, turn_id=turn_id, status="inProgress", text="")
            e = self._store.insert(turn_id, item_id, rec, complete=False, open_=True, channel="native", anchor=None)
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
        defer: bool = False,
    ) -> None:
        """``defer``: a new plain message's record is made only if no later copy replaces it
        (:class:`~._store._Unprojected`; ``completed`` is then True). Its key, ``clientId``
        bookkeeping, times, place and ``open`` flag are what the record would give."""
        store = self._store
        entries, thread_id = store.entries, store.thread_id
        store.turn(turn_id)
        # Merge by anchors: new items before the first known one go right before it; later
        # new items go right after the previous item of the batch.
        pending: list[tuple[str, Any, tuple[int | None, int | None, int | None]] | None] = []
        pending_at: dict[str, int] = {}  # a key's place in ``pending``: a later copy replaces it (R-H-1)
        pending_client: dict[str, int] = {}  # a clientId's place in ``pending``: likewise, under any id
        prev: str | None = None
        for item, (st, ct) in zip(items, times):
            if not isinstance(item, dict):
                continue
            ids = plain_message_ids(item) if defer else None
            if ids is not None:
                key = store.resolve_ids(*ids)
                client = ids[1]
                rec = (_Unprojected(item, thread_id, turn_id) if key not in entries else
                       project_native_item(item, thread_id=thread_id, turn_id=turn_id))  # upsert reads it
            else:
                rec = project_native_item(item, thread_id=thread_id, turn_id=turn_id, completed=completed)
                key = store.resolve_key(rec)
                client = rec.client_id if type(rec) is UserMessage else None
            at_client = pending_client.get(client) if client else None
            if at_client is not None:
                earlier = pending[at_client]
                if earlier is not None and earlier[0] != key:
                    # an earlier copy of this clientId under another id, still pending: this
                    # copy takes its place, as a stored one is re-keyed in place (R-H-1)
                    del pending_at[earlier[0]]
                    pending[at_client] = None
                else:
                    at_client = None
            if st is None:
                st = _int(item.get("startedAtMs"))
            if ct is None:
                ct = _int(item.get("completedAtMs"))
            tm = (st, ct, received_at_ms)
            e = entries.get(key)
            if e is not None:
                if pending:
                    store.insert_before(turn_id, key, [p for p in pending if p is not None], completed)
                    pending, pending_at, pending_client = [], {}, {}
                store.upsert(e, rec, completed, tm)
                prev = key
            elif prev is None:
                at = pending_at.get(key)
                if at is None:
                    at = len(pending) if at_client is None else at_client
                    pending_at[key] = at
                    if at == len(pending):
                        pending.append((key, rec, tm))
                        old_tm = None
                    else:
                        old_tm = earlier[2]  # type: ignore[index]
                else:  # the same item twice before a known one: upserted, as a known one is
                    old_tm = pending[at][2]  # type: ignore[index]
                if old_tm is not None:
                    (ost, oct_, orcv) = old_tm  # a new time wins, a missing one keeps the old
                    pending[at] = (key, rec, (st if st is not None else ost, ct if ct is not None else oct_,
                                              received_at_ms if received_at_ms is not None else orcv))
                if client:
                    pending_client[client] = at
            else:
                store.insert(turn_id, key, rec, complete=completed, open_=store.is_open(rec, completed),
                             channel="native", anchor=prev, times=tm)
                prev = key
        if pending:
            store.append_native(turn_id, [p for p in pending if p is not None], completed)

    def add_local_submission(self, client_id: str, text: str, *, images: Sequence[ImageSource] = ()) -> None:
        if client_id in self._store.client_ids:
            return
        key, tid = f"local:{client_id}", f"local-turn:{client_id}"
        while key in self._store.entries:  # a native item holds this id: never replace another message
            key += "+"
        rec = UserMessage(id=key, thread_id=self._store.thread_id, turn_id=tid, status="inProgress", text=text,
                          images=tuple(images), client_id=client_id, source="local")
        self._store.insert(tid, key, rec, complete=False, open_=True, channel="native", anchor=None)
        self._store.turns[tid].status = "inProgress"
        self._store.client_ids[client_id] = key
