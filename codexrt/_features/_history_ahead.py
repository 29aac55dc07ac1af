"""Reading a history walk ahead for ``codexrt serve`` (``codex.readHistoryPage``,
issue 34).

An editor that walks a thread's history asks for page after page, each with the ``nextCursor``
of the reply before. Each page costs a round trip to the app-server on top of serve's own hops,
so the host waits for the app-server once per page. Once a host's request *continues a walk*
(its cursor is the ``nextCursor`` serve just answered for the same thread, method, limit and
sort direction), serve asks the app-server for the following page right away, and the host's
next request is answered from that answer instead of a new request.

The answer read ahead is what a new request would have got, or it is not used:

* it is used only on the **same connection** (the channel's app-server child that answered it),
  and only when **nothing else happened on any connection of serve** since it was sent — no
  other request started (a turn, a rename, a ``thread/read``, on any channel), no server request
  answered, nothing but replies heard (no notification, no server request):
  :meth:`Connection.activity` is the same process-wide mark. Every change serve could make or
  see to a thread goes through one of those connections — also a change made through another
  channel, whose child writes the same rollout file — so a host that sends, then reads, never
  gets a page older than its send. A history page read (``thread/items/list``,
  ``thread/turns/list``) changes nothing and is not counted, so two walks at once each keep
  their pages;
* it is used only for a request that comes within :data:`READ_AHEAD_TTL` seconds of it being
  sent — a change made by another process (another app-server writing the same rollout file)
  is seen as late as a host that read one second earlier would see it;
* an answer that failed (an error, the connection gone) is never shown: the host's request is
  then made as usual, within what is left of one RPC timeout. One that was written and timed out
  while the host's request waited for it fails that request with the timeout its own request
  would have met (:meth:`PageReadAhead.take`): the app-server stalls on that page, and is not
  asked for it again. A host's request withdrawn while it waits withdraws the page's too.

A walk at machine pace is read one page further (:meth:`_chain`): when a page read ahead comes
and it is the page the host asks for next, the page after it is asked for the moment it comes,
before serve makes its records — if the host already waits for it, or if the host's last
:data:`MACHINE_PACE` pages were answered from read-aheads, each less than half the TTL after the
one before (a host that takes its pages as fast as they come: a walk loading a whole history).
A host that reads slower, or takes two pages and pauses (an editor filling its viewport), gets
no page more than before; neither does one whose store of pages read ahead is full (a page
asked for early never takes another walk's next page's place). A walk one of whose early pages
grows too old before its host asks for it (a pause within a longer burst, gaps that vary) gets
no early page again while serve remembers it: one page read for nothing, at most. Nothing is
chained for a page withdrawn or dropped, or where serve makes no records ahead (a redacting
channel, a privacy index to reload: ``on_text`` does not call ``ask_next``). A walk is still
read one page at a time — a page's cursor is only in the page before — and never more than one
page past the page the host asks for next. A page asked for before anything happened on serve's
connections is withdrawn when the next page is asked for, and asked for afresh if it is that
page.

Bounded: at most :data:`MAX_READ_AHEADS` pages held (the oldest is withdrawn; a page a request
of the host waits for is that request's, no longer held), :data:`MAX_WALKS` walks remembered;
a page of a walk that started again is held until it is too old or withdrawn; each read is
bounded by the connection's RPC timeout. Nothing is read ahead for a cursor that is not a string
or an integer.

A first page is not read ahead (a host showing the latest page may never scroll) — unless the
host loads whole histories (:attr:`PageReadAhead.walker`): once one of its walks reached machine
pace, the page after a first page it asks for is asked for as soon as that first page is made
(the app-server reads it while the host reads the first), if the store has room (never in place
of another walk's next page), and the host's walk of that thread saves one round trip too. A
host that then shows a first page only turns that off: the first such page that does not
answer the host's request for it (not asked for before the next first page; dropped — too old,
after another request, asked for on another connection —, withdrawn, or failed) ends it, until
a walk reaches machine pace again — one page read for nothing, at most, per walk that reaches
machine pace.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from codexrt._features._history_pages import PageKey
from codexrt._sansio._errors import CodexError, RpcTimeout

if TYPE_CHECKING:  # serve makes one at start: the connection module loads with the first command
    from codexrt._connection import Connection, PendingCall

__all__ = ["OnText", "PageReadAhead", "READ_AHEAD_TTL", "MAX_READ_AHEADS", "MAX_WALKS", "MACHINE_PACE",
           "read_ahead_timeout"]

#: A page read ahead answers a request that comes at most this long after it was sent.
READ_AHEAD_TTL = 1.0
#: Pages read ahead held or in flight at once, over every walk.
MAX_READ_AHEADS = 8
#: Walks whose last ``nextCursor`` is remembered.
MAX_WALKS = 64
#: Answers in a row from pages read ahead, each within half the TTL of the one before, that make
#: a walk one at machine pace (:meth:`PageReadAhead._chain`).
MACHINE_PACE = 2


#: ``on_text(key, text, ask_next)``: a page read ahead came; ``ask_next(next_cursor)`` asks for
#: the page after it now (call it before projecting this one). It must not raise.
OnText = Callable[[PageKey, bytes, Callable[[Any], None]], None]


def read_ahead_timeout(method: str, rpc_timeout: float) -> RpcTimeout:
    """What a host's page request meets when the page read ahead for it, or the wait for it,
    used up one RPC timeout: the timeout its own request would have met."""
    return RpcTimeout(f"{method} timed out after {rpc_timeout:g}s (writtenUnconfirmed; the page was asked for ahead)",
                      phase="writtenUnconfirmed", details={"method": method})


def _walk_of(key: PageKey) -> tuple[str, str, Any, Any]:
    return key[0], key[1], key[3], key[4]


#: A walk's streak once an early page of it grew too old unused: it never reaches MACHINE_PACE.
_NO_EARLY_PAGES = -(1 << 30)


def _is_cursor(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


@attrs.define(eq=False)
class _Ahead:
    """One page asked for ahead of the host."""

    conn: Connection
    mark: int
    sent_at: float
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    text: bytes | None = None  # the answer's JSON text, once it came and if it was a result
    #: called with the page's key, its text and :meth:`PageReadAhead._chain`'s ``ask_next``
    #: once it came (serve makes its records then)
    on_text: OnText | None = None
    key: PageKey | None = None
    nursery: trio.Nursery | None = None  # where the page after it is asked for (_chain)
    waited: bool = False  # the host's request for it waits for its answer
    timed_out: bool = False  # its answer did not come within the connection's RPC timeout
    early: bool = False  # asked for at machine pace, before the host asked for the page before


class PageReadAhead:
    """Host-level state of serve's read-ahead (see the module doc); share one per serve."""

    def __init__(self, *, ttl: float = READ_AHEAD_TTL, max_pages: int = MAX_READ_AHEADS,
                 max_walks: int = MAX_WALKS) -> None:
        self.ttl = ttl
        self.max_pages = max_pages
        self.max_walks = max_walks
        self._pages: OrderedDict[PageKey, _Ahead] = OrderedDict()
        #: per walk: the ``nextCursor`` answered last, how many answers in a row came at
        #: machine pace (:meth:`answered`) and when that answer was made
        self._walks: OrderedDict[tuple[str, str, Any, Any], tuple[Any, int, float]] = OrderedDict()
        #: pages answered from a read-ahead; pages read ahead that were not used
        self.used = 0
        self.dropped = 0
        #: the host loads whole histories: one of its walks reached machine pace, and no page
        #: read ahead for a first page went unused since (module doc)
        self.walker = False
        #: the page read ahead for the last first page, until the host asks for it
        self._first: _Ahead | None = None

    def __len__(self) -> int:
        return len(self._pages)

    async def take(self, key: PageKey, conn: Connection) -> bytes | None:
        """The answer read ahead for ``key`` when it may answer this request now (the same
        connection, nothing on any connection since, within the TTL; waited for while still
        in flight), else None: the caller reads the page itself.

        Raises :class:`RpcTimeout` (``writtenUnconfirmed``) when the answer waited for did not
        come within the connection's RPC timeout: the app-server stalls on this page, and the
        host meets the timeout its own request would have met — not a second request."""
        ahead = self._pages.pop(key, None)
        if ahead is None:
            return None
        if trio.current_time() - ahead.sent_at > self.ttl:
            self._drop_old(ahead)
            return None
        if ahead.conn is not conn or conn.activity() != ahead.mark:
            self._drop(ahead)
            return None
        if not ahead.done.is_set():
            ahead.waited = True
            try:
                await ahead.done.wait()  # bounded: the read's own timeout ends it (_fetch)
            finally:
                if not ahead.done.is_set():  # the host's request was withdrawn: so is the page's
                    ahead.waited = False  # (its answer, come in the same step, chains nothing)
                    self._drop(ahead)
        if ahead.text is None:
            self.dropped += 1
            if ahead is self._first:  # asked for, but it failed: as good as not used
                self._not_a_walker()
            if ahead.timed_out and ahead.waited:
                raise read_ahead_timeout(key[1], conn.rpc_timeout)
            return None
        self.used += 1
        if ahead is self._first:
            self._first = None  # the host walks on
        return ahead.text

    def answered(self, nursery: trio.Nursery, conn: Connection, key: PageKey, next_cursor: Any,
                 on_text: OnText | None = None, *, from_ahead: bool = False) -> None:
        """Serve answered ``key`` with ``next_cursor`` (``from_ahead``: with the answer read
        ahead for it, :meth:`take`). When this request continued a walk (its cursor is the one
        answered last for the walk) and there is a next page, ask for that page now, on
        ``nursery``; ``on_text`` (:data:`OnText`) is called once its answer came. So too for a
        first page when the host loads whole histories (:attr:`walker`, module doc) — serve
        calls this once such a page is made, not before."""
        walk = _walk_of(key)
        last = self._walks.get(walk)
        continues = key[2] is not None and last is not None and last[0] == key[2]
        now = trio.current_time()
        # machine pace: the last MACHINE_PACE answers of the walk came read ahead, each less
        # than half the TTL after the one before (a host that takes two pages and pauses, a
        # viewport filled, is not one); a walk one of whose early pages grew too old before the
        # host asked for it (_drop_old: uneven pacing) gets no early page again
        quick = from_ahead and continues and last is not None and now - last[2] < self.ttl / 2
        if last is not None and last[1] < 0:
            streak = last[1]
        else:
            streak = last[1] + 1 if quick and last is not None else 0
        self._walks[walk] = (next_cursor, streak, now)
        self._walks.move_to_end(walk)
        while len(self._walks) > self.max_walks:
            self._walks.popitem(last=False)
        if streak == MACHINE_PACE:  # once per walk that reaches machine pace, not on every page
            self.walker = True
        if continues:
            self._ask(nursery, conn, key, next_cursor, on_text)
        elif key[2] is None and self.walker:
            if self._first is not None:  # the last first page's next was never asked for:
                self._not_a_walker()  # this host shows first pages only, for now
            else:
                self._first = self._ask(nursery, conn, key, next_cursor, on_text, spare=True)

    def _ask(self, nursery: trio.Nursery, conn: Connection, key: PageKey, next_cursor: Any,
             on_text: OnText | None, *, early: bool = False, spare: bool = False) -> _Ahead | None:
        """Ask for the page after ``key`` (cursor ``next_cursor``) unless it is asked for
        already; the page asked for, if it was. ``spare``: only into room the store has (never
        in place of another walk's next page)."""
        if not _is_cursor(next_cursor) or next_cursor == key[2]:
            return None
        now = trio.current_time()
        for old in [k for k, a in self._pages.items() if now - a.sent_at > self.ttl]:
            self._drop_old(self._pages.pop(old))  # too old to answer anything now
        mark = conn.activity()  # process-wide: a page asked for before any change answers nothing
        for old in [k for k, a in self._pages.items() if a.mark != mark]:
            self._drop(self._pages.pop(old))
        nxt: PageKey = (key[0], key[1], next_cursor, key[3], key[4])
        if nxt in self._pages or conn.closed.is_set() or (spare and len(self._pages) >= self.max_pages):
            return None
        params: dict[str, Any] = {"threadId": key[0], "cursor": next_cursor}
        if key[3] is not None:
            params["limit"] = key[3]
        if key[4] is not None:
            params["sortDirection"] = key[4]
        try:
            pending = conn.send_request(key[1], params, raw=True)
        except CodexError:
            return None  # the connection cannot take it now: the host's request will
        ahead = _Ahead(conn, mark, now, on_text=on_text, key=nxt, nursery=nursery, early=early)
        nursery.start_soon(self._fetch, ahead, pending)  # first: a page held is one being read
        self._pages[nxt] = ahead
        while len(self._pages) > self.max_pages:
            self._drop(self._pages.popitem(last=False)[1])
        return ahead

    def _drop(self, ahead: _Ahead) -> None:
        self.dropped += 1
        ahead.scope.cancel()  # withdrawn if still in flight; its answer, if any, is let go
        if ahead is self._first:
            self._not_a_walker()

    def _not_a_walker(self) -> None:
        """A page read ahead for a first page did not answer the host's request for it: no first
        page is read ahead again until a walk reaches machine pace (module doc)."""
        self.walker = False
        self._first = None

    def _drop_old(self, ahead: _Ahead) -> None:
        """:meth:`_drop` a page too old to answer anything; when it was an early page, its walk
        is not at machine pace after all (it paused within a burst, or its gaps vary): that walk
        gets no early page again while it is remembered — one page read for nothing, at most."""
        self._drop(ahead)
        walk = _walk_of(ahead.key) if ahead.early and ahead.key is not None else None
        last = self._walks.get(walk) if walk is not None else None
        if walk is not None and last is not None:
            self._walks[walk] = (last[0], _NO_EARLY_PAGES, last[2])

    async def _fetch(self, ahead: _Ahead, pending: PendingCall) -> None:
        try:
            with ahead.scope, pending:  # leaving without the answer withdraws the request
                ahead.text = bytes(await pending.result())
        except RpcTimeout as exc:  # written and not answered: a host waiting for it meets it (take)
            ahead.timed_out = exc.phase == "writtenUnconfirmed"
        except CodexError:
            pass  # never shown: the host's request is made as usual
        finally:
            ahead.done.set()
        if ahead.text is not None and ahead.on_text is not None and ahead.key is not None:
            ahead.on_text(ahead.key, ahead.text, lambda next_cursor: self._chain(ahead, next_cursor))

    def _chain(self, ahead: _Ahead, next_cursor: Any) -> None:
        """``ahead``'s page came and is the page the host asks for next (the walk has not moved
        on, the page was not withdrawn or dropped), and the host already waits for it or walks
        at machine pace (module doc) with room in the store: the page after it is asked for
        now, before serve projects this one, so the app-server reads it while serve makes this
        page's records and the host reads them — instead of once the host is answered
        (:meth:`answered`). A walk is still read one page at a time, each request sent once the
        page before gave its cursor, never more than one page past the page the host asks for
        next; a host at a slower pace gets no more than before."""
        key = ahead.key
        if key is None or ahead.nursery is None or ahead.scope.cancel_called:
            return
        last = self._walks.get(_walk_of(key))
        if last is None or last[0] != key[2]:
            return
        # a page the host waits for; or, at machine pace, one page early — never in place of
        # another walk's next page (the oldest held would be withdrawn for it)
        if ahead.waited:
            self._ask(ahead.nursery, ahead.conn, key, next_cursor, ahead.on_text)
        elif last[1] >= MACHINE_PACE and len(self._pages) < self.max_pages:
            self._ask(ahead.nursery, ahead.conn, key, next_cursor, ahead.on_text, early=True)
