"""The record store of a :class:`~._projector.Projector`: per turn, an ordered list of entries
keyed by item id (R-H-1: upsert, never duplicate), and what a stored entry looks like when read
(R-H-4: status computed at read time, redaction)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ._native import project_native_item
from ._records import AssistantMessage, CompactionBoundary, ContentBlock, Reasoning, UserMessage
from ._shapes import _norm_status


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
class _Turn:
    turn_id: str
    keys: list[str] = attrs.Factory(list)
    status: str = "unknown"
    started_at: int | None = None
    completed_at: int | None = None
    error: Any = None


class _Unprojected:
    """The record of a stored entry, not made yet (issue 34): a completed native message
    (:func:`~._native.plain_message_ids`) from a ``Turn``'s items, which the caller feeds again
    (``thread/items/list``) — a later copy replaces it by upsert, which never reads the record
    it replaces, so most are never made. :meth:`RecordStore.settle` makes the rest, exactly
    as they would have been made on arrival (same item, thread id and turn id; nothing else is
    read), before anything reads a record. ``status`` is the record's: a completed message's."""

    __slots__ = ("item", "thread_id", "turn_id")
    status = "completed"

    def __init__(self, item: dict[str, Any], thread_id: str | None, turn_id: str) -> None:
        self.item = item
        self.thread_id = thread_id
        self.turn_id = turn_id

    def project(self) -> Any:
        return project_native_item(self.item, thread_id=self.thread_id, turn_id=self.turn_id, completed=True)


def _is_local(e: _Entry) -> bool:
    """``e`` holds a local submission (:meth:`~._native_feed.NativeFeed.add_local_submission`)."""
    return type(e.record) is UserMessage and e.record.source == "local"


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


class RecordStore:
    """Turns in order, and entries by key (native item id, legacy key or ``local:<clientId>``),
    each listed in exactly one turn. Both feeding paths write here; :meth:`finish` reads."""

    def __init__(self, thread_id: str | None = None, *, redact: Callable[[str], str] | None = None) -> None:
        self.thread_id = thread_id
        self._redact = redact
        self.turns: dict[str, _Turn] = {}
        self.order: list[str] = []
        self.entries: dict[str, _Entry] = {}
        self.client_ids: dict[str, str] = {}
        self.deferred: list[_Entry] = []  # entries stored with an _Unprojected record

    def settle(self) -> None:
        """Make every record still :class:`_Unprojected` (before anything reads records)."""
        if self.deferred:
            for e in self.deferred:
                if type(e.record) is _Unprojected:
                    e.record = e.record.project()
            self.deferred.clear()

    def turn(self, turn_id: str, *, prepend: bool = False) -> _Turn:
        t = self.turns.get(turn_id)
        if t is None:
            t = _Turn(turn_id)
            self.turns[turn_id] = t
            if prepend:
                self.order.insert(0, turn_id)
            else:
                self.order.append(turn_id)
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
        t = self.turn(turn_id)
        t.status = _norm_status(status)
        if started_at is not None:
            t.started_at = started_at
        if completed_at is not None:
            t.completed_at = completed_at
        if error is not None:
            t.error = error

    def resolve_key(self, rec: Any) -> str:
        return self.resolve_ids(rec.id, rec.client_id if isinstance(rec, UserMessage) else None)

    def resolve_ids(self, key: str, client_id: str | None) -> str:
        """:meth:`resolve_key` of a record with this id and (a user message's) ``clientId``."""
        held = self.entries.get(key)
        if held is not None and _is_local(held):
            if client_id != held.record.client_id:
                # a native item with a local submission's key that is not its copy: the local copy
                # is keyed apart, as add_local_submission keys it (never replace another message)
                self._key_apart(held)
            else:
                # its native copy, on the very key the local copy holds (a native id like a local
                # key, or the key it was keyed apart onto): the local one goes and the native one
                # lands in its own turn, as on any other id — upserted in place, it stayed in the
                # local turn, and a page's pending items merged around it re-keyed it under the
                # caller's feet (a record id unlike its key; hypothesis found it)
                self.drop(key)
        if client_id:
            known = self.client_ids.get(client_id)
            if known is not None and known != key and known.startswith("local:") and known in self.entries:
                # the native copy of a local submission: it lands in its own turn, the local one goes
                self.drop(known)
                self.client_ids[client_id] = key
                return key
            if known is not None and known != key and known in self.entries and key in self.entries:
                # an earlier copy keyed differently, and this id is stored already: that copy
                # goes (re-keying it would replace the stored entry and leave a key listed
                # without one)
                self.drop(known)
            elif known is not None and known != key and known in self.entries:
                # An earlier copy keyed differently (a local submission): re-key it in place.
                e = self.entries.pop(known)
                self.entries[key] = e
                t = self.turns[e.turn_id]
                t.keys[:] = [key if k == known else k for k in t.keys]  # every listing of it
                e.key = key
                rec = e.record.project() if type(e.record) is _Unprojected else e.record
                e.record = attrs.evolve(rec, id=key)  # the id it is known by, even if no copy replaces it
            self.client_ids[client_id] = key
        return key

    def _key_apart(self, e: _Entry) -> None:
        """Re-key the local submission ``e`` to its key plus a ``+`` for each stored one."""
        old = new = e.key
        while new in self.entries:
            new += "+"
        self.entries[new] = self.entries.pop(old)
        t = self.turns[e.turn_id]
        t.keys[:] = [new if k == old else k for k in t.keys]
        e.key, e.record = new, attrs.evolve(e.record, id=new)
        if self.client_ids.get(e.record.client_id) == old:
            self.client_ids[e.record.client_id] = new

    def drop(self, key: str) -> None:
        """Drop the entry ``key`` from the store and from its turn; a local turn left empty goes."""
        e = self.entries.pop(key)
        t = self.turns[e.turn_id]
        t.keys[:] = [k for k in t.keys if k != key]
        if not t.keys and t.turn_id.startswith("local-turn:"):
            del self.turns[t.turn_id]
            self.order.remove(t.turn_id)

    @staticmethod
    def is_open(rec: Any, completed: bool) -> bool:
        return (not completed) or rec.status == "inProgress"

    def upsert(self, e: _Entry, rec: Any, completed: bool, times: tuple[int | None, int | None, int | None]) -> None:
        if e.complete and not completed:
            return  # a completed snapshot wins over a later started copy
        e.record = attrs.evolve(rec, turn_id=e.turn_id) if rec.turn_id != e.turn_id else rec
        e.complete = e.complete or completed
        e.open = self.is_open(rec, completed)
        (st, ct, rcv), (ost, oct_, orcv) = times, e.times  # a new time wins, a missing one keeps the old
        e.times = (st if st is not None else ost, ct if ct is not None else oct_, rcv if rcv is not None else orcv)
        if completed:
            e.deltas.clear()

    def _merge(self, key: str, rec: Any, completed: bool, times: tuple[int | None, int | None, int | None]) -> bool:
        """A pending ``key`` found stored as its batch is written. A ``clientId`` was re-keyed
        onto it: the pending record (made first if deferred) is upserted there, one entry, and
        True is returned. A local submission was keyed apart onto it: that copy is keyed apart
        again and False is returned (the caller inserts the pending one: both stay)."""
        e = self.entries[key]
        if _is_local(e):
            self._key_apart(e)
            return False
        self.upsert(e, rec.project() if type(rec) is _Unprojected else rec, completed, times)
        return True

    def insert(
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
        t = self.turn(turn_id)
        e = _Entry(key, rec, complete, open_, channel, turn_id, times)
        self.entries[key] = e
        if type(rec) is _Unprojected:
            self.deferred.append(e)
        if anchor is not None and anchor in t.keys:
            t.keys.insert(t.keys.index(anchor) + 1, key)
        else:
            t.keys.append(key)
        return e

    def append_native(self, turn_id: str, pending: list[Any], completed: bool) -> None:
        """:meth:`insert` of each ``(key, record, times)`` of ``pending`` in order, at the end of
        turn ``turn_id`` (no anchor), as native entries whose ``open`` flag is :meth:`is_open`'s."""
        t = self.turn(turn_id)
        entries, keys = self.entries, t.keys
        for key, rec, tm in pending:
            if key in entries and self._merge(key, rec, completed, tm):
                continue
            e = _Entry(key, rec, completed, (not completed) or rec.status == "inProgress", "native", turn_id, tm)
            entries[key] = e
            if type(rec) is _Unprojected:
                self.deferred.append(e)
            keys.append(key)

    def insert_before(self, turn_id: str, key: str, pending: list[Any], completed: bool) -> None:
        target = self.entries[key]
        t = self.turns[target.turn_id]
        idx = t.keys.index(key)
        for k, rec, tm in pending:
            if k in self.entries and self._merge(k, rec, completed, tm):
                continue
            e = _Entry(k, rec, completed, self.is_open(rec, completed), "native", target.turn_id, tm)
            self.entries[k] = e
            if type(rec) is _Unprojected:
                self.deferred.append(e)
            t.keys.insert(idx, k)
            idx += 1

    def visible(self, t: _Turn) -> list[_Entry]:
        """Pick one copy of each legacy message: user text from event/snapshot copies,
        assistant text and reasoning from response/snapshot copies; the other copy only when a
        turn has none of the preferred one."""
        entries = [self.entries[k] for k in t.keys]
        for e in entries:
            if e.channel != "native" and e.channel != "snapshot":
                break
        else:
            return entries  # every copy is kept (the native path's entries)
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

    def finished(self, t: _Turn, status: str | None = None) -> list[Any]:
        """``[finish(e, t, status) for e in visible(t)]``: an entry complete and not open is
        taken as stored when :meth:`finish` would not change it (no redaction, its thread id
        set or none to set, not a compaction boundary) — most of a long thread's (issue 34)."""
        if self._redact is not None:
            return [self.finish(e, t, status) for e in self.visible(t)]
        need_thread = self.thread_id is not None
        out = []
        for e in self.visible(t):
            r = e.record
            if (e.complete and not e.open and not (need_thread and r.thread_id is None)
                    and not isinstance(r, CompactionBoundary)):
                out.append(r)
            else:
                out.append(self.finish(e, t, status))
        return out

    def finish(self, e: _Entry, t: _Turn, status: str | None = None) -> Any:
        """The display record of ``e`` in turn ``t``. ``status``: the turn's status as shown when
        it differs from ``t.status`` — ``unknown`` for a rollout's unfinished last turn, whose open
        items are then ``unknown`` too (never shown live)."""
        r = e.record
        turn_status = status or t.status
        closing = ("interrupted", "failed", "unknown") if status == "unknown" else ("interrupted", "failed")
        if e.open and turn_status in closing and r.status in ("inProgress", "unknown"):
            r = attrs.evolve(r, status=turn_status)
        elif not e.complete and r.status == "inProgress" and turn_status in closing:
            r = attrs.evolve(r, status=turn_status)
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
