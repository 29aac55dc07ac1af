"""Message counting (R-H-7): :class:`MessageCounter` and the native page walk it (and the
reader) use. Part of the history readers; the overview is in :mod:`codexrt._features._history`.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import trio
from msgspec import Raw

from codexrt._io._retry import call_read
from codexrt._connection import Connection, PendingCall
from codexrt._features._paging import CursorRepeated, CursorWalk, walk_pages
from codexrt._sansio._errors import CodexError, RemoteProtocolError, RpcError
from codexrt._sansio._paging import peek_page
from codexrt._sansio._projection import MessageTally, Projector, count_messages
from codexrt._features._history_values import (
    ConnectionProvider,
    DEFAULT_MAX_PAGES,
    DEFAULT_PAGE_LIMIT,
    MessageCount,
    is_offline_error,
    is_pagination_unsupported,
)

__all__ = ["MessageCounter", "_walk"]


# ---------------------------------------------------------------------------------------------
# native paging


async def _walk(conn: Connection, method: str, params: dict[str, Any], on_page: Callable[[Any], None],
                *, max_pages: int, prefetch: bool = False,
                decode: Callable[[Raw], Any] | None = None, first: PendingCall | None = None,
                last: Callable[[], None] | None = None) -> CursorWalk:
    """The cursor walk (:func:`~codexrt._features._paging.walk_pages`) over one history
    method. ``complete`` is False when a page had no ``nextCursor`` field (cannot tell whether
    more exists), past ``max_pages``, or when the server repeated a cursor: for history a loop
    is an incomplete read (a count is then unknown, R-H-7), never a guess and never a second
    request. ``prefetch``: one page read ahead (``Connection.send_request``; see
    ``walk_pages``). ``decode``: each answer is read as its JSON text (``raw``) and
    ``decode(text)`` is the page (the count: :meth:`MessageTally.decode_page`; ``read_thread``:
    ``peek_page``, whose ``data`` reaches ``on_page`` undecoded), instead of the plain decode.
    ``first``, ``last``: see ``walk_pages`` (``first`` from :func:`_early`; with ``max_pages`` ≤ 0
    it is not read, and the caller's stack withdraws it)."""
    walk = CursorWalk(method, max_pages=max_pages)
    if max_pages <= 0:
        walk.stop = "pageLimit"
        return walk
    raw = decode is not None

    async def read(p: dict[str, Any], sent: Any) -> Any:
        res = await call_read(conn, method, p, raw=raw, sent=sent)
        return res if decode is None else decode(res)

    def send(p: dict[str, Any]) -> Any:
        return conn.send_request(method, p, raw=raw)

    with contextlib.suppress(CursorRepeated):  # walk.stop == "repeated": incomplete
        await walk_pages(read, walk, params, on_page, send=send if prefetch else None, first=first, last=last)
    return walk


async def _paged_read(conn: Connection, thread_id: str, proj: Projector, *, limit: int, max_pages: int) -> bool | None:
    """``read_thread``'s paged load into ``proj``: the ``thread/turns/list`` walk (ascending,
    ``itemsView: "notLoaded"``: the turns without items, which the items walk brings all; a
    server that sends them anyway has them replaced, ``items_follow``), then the
    ``thread/items/list`` walk. Whether both walks saw their list's end; None when the server
    says it cannot page this thread (:func:`is_pagination_unsupported`: the caller reads it whole).

    Issue 34: both walks read one page ahead, the items walk's first page asked for as the turns
    walk's last page comes, and each page's entries decoded only once the next page is asked for
    (``peek_page``; an items page of plain messages into structs, ``NativeFeed._append_plain``)."""
    items_params = {"threadId": thread_id, "limit": limit}
    turns_params = {**items_params, "sortDirection": "asc", "itemsView": "notLoaded"}
    items_first: list[PendingCall | None] = []

    def turns_page(data: Any) -> None:
        proj.add_native_turns(data, items_follow=True)

    with contextlib.ExitStack() as early:  # a page asked for early and not read is withdrawn
        turns_walk = await _walk(conn, "thread/turns/list", turns_params, turns_page, max_pages=max_pages,
                                 prefetch=True, decode=peek_page,
                                 last=lambda: items_first.append(_early(early, conn, "thread/items/list", items_params,
                                                                        raw=True)))
        try:
            items_walk = await _walk(conn, "thread/items/list", items_params, proj.add_native_entries,
                                     max_pages=max_pages, prefetch=True, decode=peek_page,
                                     first=items_first[0] if items_first else None)
        except RpcError as exc:
            if not is_pagination_unsupported(exc):
                raise
            return None
    return turns_walk.complete and items_walk.complete


async def _full_read(conn: Connection, thread_id: str, proj: Projector) -> bool:
    """The whole thread from one ``thread/read`` with ``includeTurns`` into ``proj`` (a server
    that cannot page a thread's history); whether it is complete (:func:`_full_read_complete`)."""
    full = await call_read(conn, "thread/read", {"threadId": thread_id, "includeTurns": True})
    full_thread = (full or {}).get("thread") if isinstance(full, dict) else None
    turns = (full_thread or {}).get("turns") or []
    for t in turns:
        if isinstance(t, dict):
            proj.add_native_turn(t)
    return _full_read_complete(turns)


def _early(stack: contextlib.ExitStack, conn: Connection, method: str, params: dict[str, Any], *,
           raw: bool = False) -> PendingCall | None:
    """``method`` asked for now, before its answer is needed (issue 34: the server reads it
    while the caller handles what came before); its RPC timeout runs from now. Withdrawn when
    ``stack`` closes without its answer taken (once written, a late answer is a ``LateResponse``
    event). None when the connection cannot take it now (its handshake not done — checked
    first, without the error ``send_request`` would raise — or it ended): the caller's own call
    then meets what it would have met anyway. ``raw``: as ``_walk`` reads it with a ``decode``."""
    if not conn.ready:
        return None
    try:
        return stack.enter_context(conn.send_request(method, params, raw=raw))
    except CodexError:
        return None


def _full_read_complete(turns: list[Any]) -> bool:
    return all(not isinstance(t, dict) or t.get("itemsView") in (None, "full") for t in turns)


# ---------------------------------------------------------------------------------------------
# message counter (R-H-7)


@attrs.define
class _InFlight:
    done: trio.Event = attrs.Factory(trio.Event)
    result: MessageCount | None = None


class MessageCounter:
    """Host-level message counting (R-H-7). Create with :meth:`open` (nursery-scoped) or give
    it a nursery. Share one per host: the cache and the in-flight table are per counter."""

    def __init__(self, nursery: trio.Nursery, *, max_concurrent: int = 4, budget: float = 110.0,
                 cache_size: int = 128, cache_ttl: float = 60.0, page_limit: int = DEFAULT_PAGE_LIMIT,
                 max_pages: int = DEFAULT_MAX_PAGES) -> None:
        self._nursery = nursery
        self.limiter = trio.CapacityLimiter(max_concurrent)
        self.budget = budget
        self.cache_size = cache_size
        self.cache_ttl = cache_ttl
        self.page_limit = page_limit
        self.max_pages = max_pages
        self._cache: OrderedDict[str, tuple[str | None, int, float]] = OrderedDict()
        self._inflight: dict[tuple[str, str | None], _InFlight] = {}
        self.started = 0  # counts actually run (not served from cache or shared)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, **kwargs: Any) -> AsyncIterator[MessageCounter]:
        async with trio.open_nursery() as nursery:
            counter = cls(nursery, **kwargs)
            try:
                yield counter
            finally:
                nursery.cancel_scope.cancel()

    def __repr__(self) -> str:
        return f"<MessageCounter cached={len(self._cache)} inflight={len(self._inflight)}>"

    # -- cache -----------------------------------------------------------------------------

    def invalidate(self, thread_id: str) -> None:
        """Metadata of ``thread_id`` changed (or it became active): forget its count."""
        self._cache.pop(thread_id, None)

    def note_version(self, thread_id: str, version: str | None) -> None:
        """A list showed ``thread_id`` at ``version``: a count cached for another version is
        dropped (R-H-7 invalidation by metadata change)."""
        hit = self._cache.get(thread_id)
        if hit is not None and hit[0] != version:
            del self._cache[thread_id]

    def cached(self, thread_id: str, version: str | None = None) -> int | None:
        hit = self._cache.get(thread_id)
        if hit is None:
            return None
        v, count, at = hit
        if trio.current_time() - at >= self.cache_ttl:
            del self._cache[thread_id]
            return None
        if version is not None and v != version:
            return None
        self._cache.move_to_end(thread_id)
        return count

    def _store(self, thread_id: str, version: str | None, count: int) -> None:
        self._cache[thread_id] = (version, count, trio.current_time())
        self._cache.move_to_end(thread_id)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # -- counting --------------------------------------------------------------------------

    async def count(self, thread_id: str, provider: ConnectionProvider, *,
                    expected_version: str | None = None) -> MessageCount:
        """Count ``thread_id``'s messages; see the module doc. Never raises for a failed count:
        the failure is a :class:`MessageCount` with ``count=None`` and the error."""
        hit = self.cached(thread_id, expected_version)
        if hit is not None:
            v = self._cache[thread_id][0]
            return MessageCount(thread_id, hit, version=v, cached=True)
        key = (thread_id, expected_version)
        fl = self._inflight.get(key)
        if fl is None:
            fl = self._inflight[key] = _InFlight()
            self._nursery.start_soon(self._run, key, fl, provider)
        await fl.done.wait()
        assert fl.result is not None
        return fl.result

    async def _run(self, key: tuple[str, str | None], fl: _InFlight, provider: ConnectionProvider) -> None:
        thread_id, expected = key
        result = MessageCount(thread_id, None, reason="error", error={"code": "CANCELLED", "message": "count cancelled"})
        try:
            async with self.limiter:
                self.started += 1
                with trio.move_on_after(self.budget) as scope:
                    result = await self._count_native(thread_id, provider, expected)
                if scope.cancelled_caught:
                    result = MessageCount(thread_id, None, reason="budget",
                                          error={"code": "COUNT_BUDGET",
                                                 "message": f"message count stopped after {self.budget:g}s; retry"})
        except CodexError as exc:
            result = MessageCount(thread_id, None, reason="unavailable" if is_offline_error(exc) else "error",
                                  error=exc.to_dict())
        except Exception as exc:  # never let a count task take its nursery (the host's) down
            err = RemoteProtocolError(f"message count failed: {type(exc).__name__}",
                                      details={"malformed": "history data", "error": type(exc).__name__})
            result = MessageCount(thread_id, None, reason="error", error=err.to_dict())
        finally:
            fl.result = result
            if self._inflight.get(key) is fl:
                del self._inflight[key]  # a later identical request starts afresh (retry)
            fl.done.set()
        if result.count is not None and not result.active:
            self._store(thread_id, result.version, result.count)

    async def _count_native(self, thread_id: str, provider: ConnectionProvider, expected: str | None) -> MessageCount:
        conn = await provider()
        # Typed at the wire: a ThreadReadResult (an answer that does not fit -> PROTOCOL_ERROR).
        thread = (await call_read(conn, "thread/read", {"threadId": thread_id}, typed=True)).thread
        version = None if thread.updated_at is None else str(thread.updated_at)
        active = thread.status is not None and thread.status.type == "active"
        if active:
            self.invalidate(thread_id)
        stale = expected is not None and version != expected
        tally = MessageTally(thread_id)  # the projection's count without its records
        try:
            walk = await _walk(conn, "thread/items/list", {"threadId": thread_id, "limit": self.page_limit},
                               tally.add_native_entries, max_pages=self.max_pages, prefetch=True,
                               decode=tally.decode_page)
            complete = walk.complete
            n = tally.count() if complete else None
        except RpcError as exc:
            if not is_pagination_unsupported(exc):
                raise
            full = await call_read(conn, "thread/read", {"threadId": thread_id, "includeTurns": True})
            turns = ((full or {}).get("thread") or {}).get("turns") or []
            proj = Projector(thread_id)
            for t in turns:
                if isinstance(t, dict):
                    proj.add_native_turn(t)
            complete = _full_read_complete(turns)
            n = count_messages(proj.records()) if complete else None
        if not complete:
            return MessageCount(thread_id, None, version=version, reason="incomplete", stale=stale, active=active)
        return MessageCount(thread_id, n, version=version, stale=stale, active=active)
