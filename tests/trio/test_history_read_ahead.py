"""serve's read-ahead of history walks (``codex.readHistoryPage``, issue 34; R-H-4, R-D-1).

Once a host's page request continues a walk, the next page is asked for before the host does,
and its records are made while serve waits. What the host gets is what a new request would have
got: a read-ahead is used only on the same connection, with nothing but history page reads sent
and nothing but replies heard on any connection in between, within the TTL; otherwise (and when
it failed) the page is read as usual — but a read-ahead that timed out is the waiting host's
timeout. A host at machine pace (it already waits for a page, or its last page came from a
read-ahead) gets the page after the next asked for as soon as the next comes; a host at a
person's pace gets no page more. Every page is asked for once per request of the host, never
twice.

The connection is a real :class:`~codexrt._connection.Connection` over a pair of pipes; the
app-server is a task of the test that answers ``thread/items/list`` from a table of pages."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from codexrt._connection import open_connection
from codexrt._features._history import HistoryReader
from codexrt._features._history_ahead import MACHINE_PACE, PageReadAhead
from codexrt._features._history_pages import PageRecordsCache
from codexrt._sansio._errors import RemoteProtocolError, RpcTimeout
from codexrt._sansio._privacy import PrivacyIndex
from tests.trio.test_connection_direct_write import PipePeer
from tests.trio.test_history_pages import _entry

pytestmark = pytest.mark.skipif(not hasattr(trio.lowlevel, "FdStream"), reason="POSIX pipes")

TID = "01a22d24-784b-70a1-b4d2-eee60df61981"
OTHER = "01a22d24-784b-70a1-b4d2-000000000002"  # another thread (the server's pages are the same)


class Server:
    """Answers ``thread/items/list`` (pages of ``size`` from ``entries``, cursor ``"c<offset>"``)
    and ``thread/list``; logs every request. ``fail``: cursors answered with an error once."""

    def __init__(self, peer: PipePeer, entries: list[dict[str, Any]], size: int) -> None:
        self.peer, self.entries, self.size = peer, entries, size
        self.log: list[tuple[str, Any]] = []
        self.thread_log: list[tuple[Any, Any]] = []  # (threadId, cursor) of every request
        self.fail: set[str] = set()
        self.malformed: set[str] = set()  # cursors answered with a page whose data is not a list
        self.hold = False  # True: requests are logged, answered once released
        self.events: list[Any] = []  # what the connection told its sink

    def page(self, cursor: str | None) -> dict[str, Any]:
        start = int(cursor[1:]) if cursor else 0
        end = start + self.size
        return {"data": self.entries[start:end], "nextCursor": f"c{end}" if end < len(self.entries) else None}

    async def run(self) -> None:
        buf = b""
        while True:
            await trio.lowlevel.wait_readable(self.peer.req_fd)
            try:
                chunk = os.read(self.peer.req_fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                return
            *lines, buf = (buf + chunk).split(b"\n")
            for line in lines:
                msg = json.loads(line)
                if "id" not in msg or "method" not in msg:
                    continue  # a notification, or the client's answer to a server request
                cursor = msg["params"].get("cursor")
                self.log.append((msg["method"], cursor))
                self.thread_log.append((msg["params"].get("threadId"), cursor))
                while self.hold:
                    await trio.sleep(0.01)
                if cursor in self.fail:
                    self.fail.discard(cursor)
                    err = {"id": msg["id"], "error": {"code": -32603, "message": "boom"}}
                    await self.peer.resp.send_all(json.dumps(err).encode() + b"\n")
                elif cursor in self.malformed:
                    await self.peer.answer(msg, {"data": {"not": "a list"}, "nextCursor": None})
                elif msg["method"] == "thread/items/list":
                    await self.peer.answer(msg, self.page(cursor))
                elif msg["method"] == "thread/read":
                    await self.peer.answer(msg, {"thread": {"id": msg["params"]["threadId"]}})
                elif msg["method"] == "thread/turns/list":  # one turn a page, as many as pages of items
                    start = int(cursor[1:]) if cursor else 0
                    end = start + self.size
                    turn = {"id": self.entries[start]["turnId"], "status": "completed", "items": []}
                    await self.peer.answer(msg, {"data": [turn], "nextCursor": f"c{end}" if end < len(self.entries)
                                                 else None})
                else:
                    await self.peer.answer(msg, {"data": []})

    def reads(self) -> list[Any]:
        return [c for m, c in self.log if m == "thread/items/list"]

    def threads(self) -> list[tuple[Any, Any]]:
        return list(self.thread_log)


@pytest.fixture
async def served(nursery):
    """``(conn, server, make_reader)`` on a connection whose handshake is done."""
    peer = PipePeer()
    events: list[Any] = []
    try:
        async with open_connection(peer.transport, sink=events.append, rpc_timeout=30,
                                   supported_server_requests={"item/commandExecution/requestApproval"}) as conn:
            await peer.handshake(conn)
            server = Server(peer, [_entry(i) for i in range(10)], 2)
            server.events = events
            nursery.start_soon(server.run)
            cache, ahead, index = PageRecordsCache(), PageReadAhead(), PrivacyIndex("s")

            def make_reader(**kw: Any) -> HistoryReader:
                async def provider() -> Any:
                    return conn

                kw.setdefault("page_cache", cache)
                kw.setdefault("read_ahead", ahead)
                return HistoryReader(nursery, provider, privacy=index, **kw)

            yield conn, server, make_reader
            nursery.cancel_scope.cancel()
    finally:
        peer.close()


async def _walk(reader: HistoryReader, pause: Any = None) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)))
        pages.append(page)
        cursor = page["nextCursor"]
        if cursor is None:
            return pages
        await trio.testing.wait_all_tasks_blocked()  # the read-ahead's answer comes in
        if pause is not None:
            await pause()


async def _c4_read_ahead(make_reader: Any, tmp_path: Any) -> HistoryReader:
    """A reader that answered the first two pages of a walk: the third (``c4``) was asked for
    ahead, and its answer has come."""
    reader = make_reader(codex_home=tmp_path)
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    return reader


async def test_issue_34_a_walk_reads_each_page_once_and_answers_as_without_read_ahead(served, tmp_path):
    conn, server, make_reader = served
    ahead_reader = make_reader(codex_home=tmp_path)
    pages = await _walk(ahead_reader)
    ahead = ahead_reader.read_ahead
    assert ahead is not None
    assert server.reads() == [None, "c2", "c4", "c6", "c8"]  # one request per page, none twice
    assert ahead.used == 3 and ahead.dropped == 0 and len(ahead) == 0  # pages 3-5 came read ahead
    plain = await _walk(make_reader(codex_home=tmp_path, page_cache=None, read_ahead=None))
    assert pages == plain  # what a reader that asks for every page shows
    assert [r["id"] for p in pages for r in p["records"]] == [e["item"]["id"] for e in server.entries]


async def test_issue_34_pages_the_typed_path_declines_are_read_once_and_answered_the_general_way(
        served, tmp_path):
    """A page the typed decode takes but whose records it declines (a ``clientId`` seen twice),
    one it does not decode (a field no schema names), one with an image: each is asked for
    once — the next page too, though the typed path asked for it before declining — and
    answered as a reader without read-ahead or cache answers it."""
    conn, server, make_reader = served
    server.entries[2]["item"]["clientId"] = server.entries[0]["item"]["clientId"] = "c"  # page 1 of 5
    server.entries[2], server.entries[1] = server.entries[1], server.entries[2]
    server.entries[4]["item"]["other"] = {"x": [1]}  # page 3
    server.entries[6]["item"]["content"].append({"type": "image", "url": "data:image/png;base64,AA"})  # page 4
    reader = make_reader(codex_home=tmp_path)
    pages = await _walk(reader)
    ahead = reader.read_ahead
    assert ahead is not None
    assert server.reads() == [None, "c2", "c4", "c6", "c8"] and ahead.used == 3 and ahead.dropped == 0
    assert pages == await _walk(make_reader(codex_home=tmp_path, page_cache=None, read_ahead=None))
    assert pages[0]["records"][0]["clientId"] == "c" and len(pages[0]["records"]) == 1  # re-keyed: one record
    assert len(pages[3]["records"][0]["images"]) == 1


async def test_issue_34_a_read_ahead_page_has_its_records_made_before_the_request(served, tmp_path):
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    cache = reader.page_cache
    assert cache is not None
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)  # continues the walk: c4 asked for
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4"] and cache.hits == 0
    made = cache._pages[(TID, "thread/items/list", "c4", 2, None)]
    assert made.reply is not None  # made when the answer came
    got = await reader._serve_page(TID, "items", "c4", 2)
    await trio.testing.wait_all_tasks_blocked()
    assert got is made.reply and cache.hits == 1 and server.reads() == [None, "c2", "c4", "c6"]


async def test_issue_34_a_first_page_or_a_jump_is_not_read_ahead(served, tmp_path):
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    await reader.read_page_json(TID, scope="items", limit=2)  # the latest page only: no scrolling yet
    await reader.read_page_json(TID, scope="items", cursor="c6", limit=2)  # a cursor from elsewhere
    await reader.read_page_json(TID, scope="items", cursor="c4", limit=3)  # another page size: another walk
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c6", "c4"]


async def _machine_pace_walk(reader: HistoryReader, server: Server) -> PageReadAhead:
    """A whole walk taken as fast as its pages come: the host now counts as one that loads
    whole histories. Its read-ahead, with the server's log cleared."""
    await _walk(reader)
    ahead = reader.read_ahead
    assert ahead is not None and ahead.walker
    server.log.clear()
    return ahead


async def _walker_host(served: Any, tmp_path: Any) -> tuple[Server, HistoryReader, PageReadAhead]:
    """A host (ten pages a thread) whose first walk went at machine pace."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(20)]  # ten pages
    reader = make_reader(codex_home=tmp_path)
    assert reader.read_ahead is not None and not reader.read_ahead.walker  # a fresh host is none
    return server, reader, await _machine_pace_walk(reader, server)


async def test_issue_34_a_host_that_loads_whole_histories_gets_a_first_pages_next_with_it(
        served, tmp_path, monkeypatch):
    """Once a walk of the host went at machine pace, the page after a first page is asked for
    with it — once the first page is made (the app-server reads it while the host reads this
    one) — and the host's walk takes it: every page read once, each as a fresh read shows it."""
    import codexrt._features._history as history

    server, reader, ahead = await _walker_host(served, tmp_path)
    made: list[bool] = []  # whether c2 was asked for when the first page's records were made
    plain = history.page_records_json

    def spy(page: Any, thread_id: Any) -> Any:
        if page.data[0].item.id == server.entries[0]["item"]["id"]:
            made.append((OTHER, "thread/items/list", "c2", 2, None) in ahead._pages)
        return plain(page, thread_id)

    monkeypatch.setattr(history, "page_records_json", spy)
    first = await reader.read_page_json(OTHER, scope="items", limit=2)  # a thread never read
    assert made == [False] and (OTHER, "thread/items/list", "c2", 2, None) in ahead._pages  # once made
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2"]
    used = ahead.used
    rest = await _walk_from(reader, "c2", OTHER)
    assert server.reads() == [None, *(f"c{2 * i}" for i in range(1, 10))]  # each page once
    assert ahead.used - used == 9 and ahead.dropped == 0 and ahead.walker
    server.log.clear()
    await reader.read_page_json(OTHER, scope="items", limit=2)  # the thread opened again: the same
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2"]
    plain_reader = served[2](codex_home=tmp_path, page_cache=None, read_ahead=None)
    fresh = [await plain_reader.read_page_json(OTHER, scope="items", limit=2), *await _walk_from(plain_reader, "c2", OTHER)]
    assert [msgspec.json.decode(bytes(p)) for p in [first, *rest]] == [msgspec.json.decode(bytes(p)) for p in fresh]


async def test_issue_34_a_host_that_shows_a_first_page_only_costs_one_page_read_for_nothing(
        served, tmp_path, autojump_clock):
    """After a walk at machine pace, the host shows first pages only: the page read ahead for
    the first one is not asked for, so the next first page gets none — nor does any after it,
    until a walk goes at machine pace again."""
    server, reader, ahead = await _walker_host(served, tmp_path)
    for _ in range(4):
        await reader.read_page_json(OTHER, scope="items", limit=2)
        await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", None, None, None]  # c2 once: one page read for nothing
    assert not ahead.walker
    await trio.sleep(2)  # the page read ahead for nothing is too old to answer anything now
    await _machine_pace_walk(reader, server)  # a whole walk at machine pace again
    await reader.read_page_json(OTHER, scope="items", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2"]


@pytest.mark.parametrize("how", ["too old", "another request", "another page size", "failed"])
async def test_issue_34_a_first_pages_next_not_used_ends_it(served, tmp_path, autojump_clock, how):
    """The page read ahead for a first page is not used — it grew older than the TTL, another
    request came between, the host asked for another page size, or it failed: the page the
    host asks for is read afresh, and no first page is read ahead again."""
    server, reader, ahead = await _walker_host(served, tmp_path)
    if how == "failed":
        server.fail.add("c2")
    await reader.read_page_json(OTHER, scope="items", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    if how == "too old":
        await trio.sleep(2)
    elif how == "another request":
        await reader.list_threads()
    limit = 3 if how == "another page size" else 2
    await reader.read_page_json(OTHER, scope="items", cursor="c2", limit=limit)
    await trio.testing.wait_all_tasks_blocked()
    if how != "another page size":
        assert not ahead.walker  # dropped, or failed, as the host asked for it: at once
    await reader.read_page_json(OTHER, scope="items", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    reads = server.reads()  # c2 read ahead, then afresh (and, for the walk it continues, c4)
    assert reads[:3] == [None, "c2", "c2"] and reads[3:-1] in ([], ["c4"]) and reads[-1] is None, how
    assert not ahead.walker  # the last first page: nothing read ahead for it


async def test_issue_34_a_first_pages_next_has_its_records_made_when_it_comes(served, tmp_path):
    """The page read ahead for a first page is treated as any page read ahead: its records
    and reply are made when it comes, and the host's request for it finds them (review of
    3eff8d3, 9)."""
    server, reader, ahead = await _walker_host(served, tmp_path)
    cache = reader.page_cache
    assert cache is not None
    await reader.read_page_json(OTHER, scope="items", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    made = cache._pages.get((OTHER, "thread/items/list", "c2", 2, None))
    assert made is not None and made.reply is not None  # made when it came, before any request
    hits = cache.hits
    got = await reader._serve_page(OTHER, "items", "c2", 2)
    await trio.testing.wait_all_tasks_blocked()
    assert got is made.reply and cache.hits == hits + 1 and server.reads() == [None, "c2", "c4"]


@pytest.mark.parametrize("pace", ["three pages", "two pages and a pause", "a person's pace"])
async def test_issue_34_a_host_short_of_machine_pace_gets_no_first_page_read_ahead(
        served, tmp_path, autojump_clock, pace):
    """A host whose walks never reach machine pace — a few pages at once, two pages then a
    pause, a page every two seconds — gets nothing read ahead for its later first pages: no
    page more than before (review of 3eff8d3, 8)."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(20)]
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    if pace == "three pages":
        await _walk_from(reader, None, TID, pages=3)
    elif pace == "two pages and a pause":
        await _paced_walk(reader, itertools.cycle([0.01, 1.2]))
    else:
        await _paced_walk(reader, itertools.repeat(2.0))
    server.log.clear()
    await trio.sleep(2)
    await reader.read_page_json(OTHER, scope="items", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None] and not ahead.walker


async def test_issue_34_one_walk_at_machine_pace_costs_one_first_page_read_for_nothing_at_most(served, tmp_path):
    """Between the pages of one long walk at machine pace the host opens other threads'
    first pages only: one of their next pages is read for nothing, not one per page of the
    walk (review of 3eff8d3, 1)."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(40)]  # twenty pages
    reader = make_reader(codex_home=tmp_path)
    cursor, k = None, 0
    while True:
        page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)))
        await trio.testing.wait_all_tasks_blocked()
        await reader.read_page_json(f"{OTHER[:-2]}{k:02d}", scope="items", limit=2)  # a first page only
        await trio.testing.wait_all_tasks_blocked()
        cursor, k = page["nextCursor"], k + 1
        if cursor is None:
            break
    others = [(t, c) for t, c in server.threads() if t != TID and c is not None]
    assert len(others) == 1, others


async def test_issue_34_a_first_pages_next_never_takes_another_walks_next_pages_place(served, tmp_path):
    """Eight walks each hold their next page: the store is full, and a walker host's first
    page gets nothing read ahead rather than withdraw one of them (review of 3eff8d3, 3)."""
    server, reader, ahead = await _walker_host(served, tmp_path)
    for t in range(8):
        tid = f"{OTHER[:-2]}{t:02d}"
        await reader.read_page_json(tid, scope="items", cursor="c2", limit=2)  # a jump: nothing ahead
        await reader.read_page_json(tid, scope="items", cursor="c4", limit=2)  # continues: c6 held
        await trio.testing.wait_all_tasks_blocked()
    held = set(ahead._pages)
    assert len(held) == 8
    server.log.clear()
    await reader.read_page_json(OTHER, scope="items", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    assert set(ahead._pages) == held and server.reads() == [None]


async def test_issue_34_read_threads_items_page_asked_for_early_is_withdrawn_over_a_pipe(
        served, tmp_path, monkeypatch):
    """Over a real pipe the items walk's first page, asked for as the turns walk's last page
    came, is written at once: when that last page cannot be projected the error is the
    caller's and the page's answer, come after it was withdrawn, is a late response — as for
    any page read ahead — and the connection goes on (review of 3076cea)."""
    from codexrt._sansio._projection import Projector
    from codexrt._sansio._rpc import LateResponse

    conn, server, make_reader = served
    from codexrt._sansio._paging import plain_data

    add_turns = Projector.add_native_turns
    last_turn = server.entries[-1]["turnId"]

    def failing(self: Any, turns: Any, **kw: Any) -> None:
        if any(t["id"] == last_turn for t in plain_data(turns)):
            raise KeyError("status")
        add_turns(self, turns, **kw)

    monkeypatch.setattr(Projector, "add_native_turns", failing)
    reader = make_reader(codex_home=tmp_path)
    with pytest.raises(RemoteProtocolError):
        await reader.read_thread(TID, allow_legacy=False)
    await trio.testing.wait_all_tasks_blocked()
    assert [m for m, c in server.log if m == "thread/items/list"] == ["thread/items/list"]
    late = [e for e in server.events if isinstance(e, LateResponse)]
    assert [e.method for e in late] == ["thread/items/list"]
    assert (await reader.read_page_json(TID, scope="items", limit=2)) is not None  # it goes on


async def test_issue_34_a_notification_in_between_makes_the_page_read_afresh(served, tmp_path):
    """The thread may have changed (a turn ran): the page read ahead is not shown."""
    conn, server, make_reader = served
    reader = await _c4_read_ahead(make_reader, tmp_path)
    server.entries[4] = _entry(4, "changed by a turn")
    await server.peer.resp.send_all(b'{"method":"thread/status/changed","params":{"threadId":"%s"}}\n' % TID.encode())
    await trio.testing.wait_all_tasks_blocked()
    page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)))
    assert page["records"][0]["text"] == "changed by a turn"
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", "c4", "c6"]  # read again; the walk goes on ahead
    assert reader.read_ahead is not None and reader.read_ahead.dropped == 1


async def test_issue_34_another_request_in_between_makes_the_page_read_afresh(served, tmp_path):
    """A request of the host's (a send, a rename, a ``thread/list``) went out after the read-ahead:
    the page is read after it, as the host asked."""
    conn, server, make_reader = served
    reader = await _c4_read_ahead(make_reader, tmp_path)
    await conn.call("thread/list", {})
    server.entries[4] = _entry(4, "renamed meanwhile")
    page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)))
    assert page["records"][0]["text"] == "renamed meanwhile"
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", "c4", "c6"]


async def test_issue_34_activity_on_another_connection_makes_the_page_read_afresh(served, tmp_path):
    """A send through another channel (another child, the same rollout file) is not heard on
    this connection: any request on any connection of the process counts (review6 F1)."""
    conn, server, make_reader = served
    reader = await _c4_read_ahead(make_reader, tmp_path)
    other = PipePeer()
    try:
        async with open_connection(other.transport, sink=lambda ev: None) as conn2:
            await other.handshake(conn2)
            async with trio.open_nursery() as n:
                n.start_soon(Server(other, [], 2).run)
                await conn2.call("turn/start", {})  # the other channel's send
                n.cancel_scope.cancel()
    finally:
        other.close()
    server.entries[4] = _entry(4, "sent through another channel")
    page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)))
    assert page["records"][0]["text"] == "sent through another channel"
    assert server.reads()[:4] == [None, "c2", "c4", "c4"]


_ASK = b'{"id":"ask-1","method":"item/commandExecution/requestApproval","params":{"threadId":"t"}}\n'


@pytest.mark.parametrize("step", ["asked", "answered"])
async def test_issue_34_a_server_request_or_the_hosts_answer_makes_the_page_read_afresh(served, tmp_path, step):
    """An approval asked (heard) or answered (written) after the read-ahead went out: the turn
    may go on, so the page is read again (review6 F2, F5)."""
    conn, server, make_reader = served
    if step == "answered":  # asked before the read-ahead…
        await server.peer.resp.send_all(_ASK)
        await trio.testing.wait_all_tasks_blocked()
    reader = await _c4_read_ahead(make_reader, tmp_path)
    if step == "asked":
        await server.peer.resp.send_all(_ASK)
    else:  # …answered after it
        await conn.reply("ask-1", {"decision": "decline"})
    await trio.testing.wait_all_tasks_blocked()
    await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads()[:4] == [None, "c2", "c4", "c4"]  # asked again for the host


@pytest.mark.parametrize("gap", [0.0, 0.2, 0.9])
async def test_issue_34_a_stalled_read_ahead_costs_the_host_one_timeout_not_two(served, tmp_path, autojump_clock,
                                                                               gap):
    """The host's request waits for the read-ahead; when that times out, the host meets the
    timeout its own request would have met — also when it asked a while after the read-ahead
    went out — and the page is not asked for again (review6 F3, review7 F1)."""
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    await _hold_c4(server, reader)  # c4, asked for ahead, is never answered
    await trio.sleep(gap)  # the host shows c2 before it asks for c4
    asked = trio.current_time()
    with pytest.raises(RpcTimeout, match="timed out after 30s") as info:
        await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)
    assert info.value.phase == "writtenUnconfirmed"
    assert trio.current_time() - asked == pytest.approx(conn.rpc_timeout - gap, abs=0.1)  # not two timeouts
    assert server.reads() == [None, "c2", "c4"]  # and the page was not asked for twice


async def test_issue_34_a_read_ahead_that_failed_late_leaves_the_host_what_is_left_of_one_timeout(
        served, tmp_path, autojump_clock):
    """The read-ahead waited for is answered with an error after 29 s: the page is read again
    within what is left of one RPC timeout, not a whole new one (review8 4)."""
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    answer, c4s = server.peer.answer, []

    async def late_error_then_silence(msg: Any, result: Any) -> None:
        if msg["params"].get("cursor") != "c4":
            await answer(msg, result)
        elif not c4s:
            c4s.append(msg)
            await trio.sleep(29)
            err = {"id": msg["id"], "error": {"code": -32603, "message": "late"}}
            await server.peer.resp.send_all(json.dumps(err).encode() + b"\n")
    server.peer.answer = late_error_then_silence
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)  # c4 is asked for ahead
    asked = trio.current_time()
    with pytest.raises(RpcTimeout):
        await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)
    assert trio.current_time() - asked == pytest.approx(conn.rpc_timeout, abs=0.1)
    assert server.reads() == [None, "c2", "c4", "c4"]


async def test_issue_34_a_read_ahead_older_than_the_ttl_is_not_used(served, tmp_path, autojump_clock):
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    await _walk(reader, pause=lambda: trio.sleep(ahead.ttl + 0.5))
    assert server.reads() == [None, "c2", "c4", "c4", "c6", "c6", "c8", "c8"]
    assert ahead.used == 0 and ahead.dropped == 3


async def test_issue_34_a_failed_read_ahead_is_never_shown(served, tmp_path):
    conn, server, make_reader = served
    server.fail = {"c4"}
    pages = await _walk(make_reader(codex_home=tmp_path))
    assert server.reads() == [None, "c2", "c4", "c4", "c6", "c8"]  # asked again for the host
    assert [len(p["records"]) for p in pages] == [2, 2, 2, 2, 2]


async def test_issue_34_a_malformed_page_read_ahead_is_the_hosts_typed_error_as_without_it(served, tmp_path):
    """Made in the background, a page that cannot be answered is left alone (serve goes on);
    the host's request for it gets the error a request of its own would have got."""
    conn, server, make_reader = served
    server.malformed = {"c4"}
    reader = make_reader(codex_home=tmp_path)
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)
    await trio.testing.wait_all_tasks_blocked()  # c4's answer came and was not made into records
    with pytest.raises(RemoteProtocolError, match="without a data list"):
        await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)
    assert server.reads() == [None, "c2", "c4"]
    plain = make_reader(codex_home=tmp_path, page_cache=None, read_ahead=None)
    with pytest.raises(RemoteProtocolError, match="without a data list"):
        await plain.read_page_json(TID, scope="items", cursor="c4", limit=2)


async def test_issue_34_another_connection_does_not_take_it(served, tmp_path):
    """A channel's child restarted (another connection): its pages are read on it."""
    conn, server, make_reader = served
    reader = await _c4_read_ahead(make_reader, tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None and len(ahead) == 1

    class Other:
        async def call(self, method: str, params: Any, timeout: float | None = None, raw: bool = False) -> Any:
            return msgspec.Raw(msgspec.json.encode(server.page(params.get("cursor"))))

    assert await ahead.take((TID, "thread/items/list", "c4", 2, None), Other()) is None  # type: ignore[arg-type]
    assert ahead.dropped == 1 and len(ahead) == 0


async def test_issue_34_an_unanswered_read_ahead_is_waited_for_not_asked_again(served, tmp_path):
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)  # c4 is asked for now…
    server.hold = True  # …and answered only once released
    got: list[Any] = []
    async with trio.open_nursery() as n:
        n.start_soon(lambda: _read(reader, "c4", got))
        await trio.testing.wait_all_tasks_blocked()
        assert not got
        server.hold = False
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", "c6"] and len(got) == 1


async def test_issue_34_a_waiting_host_gets_the_page_after_asked_for_before_this_one_is_projected(
        served, tmp_path, monkeypatch):
    """The host asked for c4 before its answer came (it walks at the app-server's pace): c6 is
    asked for as soon as c4 comes, before c4's records are made — not once the host is
    answered — and every page is still asked for once."""
    import codexrt._features._history as history

    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    c6 = (TID, "thread/items/list", "c6", 2, None)
    asked_when_projected: dict[str, bool] = {}
    plain = history.page_records_json

    def spy(page: Any, thread_id: Any) -> Any:
        asked_when_projected[page.data[0].item.id] = c6 in ahead._pages
        return plain(page, thread_id)

    monkeypatch.setattr(history, "page_records_json", spy)
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)  # c4 is asked for now…
    server.hold = True  # …and answered only once the host waits for it
    got: list[Any] = []
    async with trio.open_nursery() as n:
        n.start_soon(lambda: _read(reader, "c4", got))
        await trio.testing.wait_all_tasks_blocked()
        server.hold = False
    assert asked_when_projected[server.entries[4]["item"]["id"]]  # c6 was asked for first
    rest = await _walk_from(reader, "c6")
    assert server.reads() == [None, "c2", "c4", "c6", "c8"] and ahead.used == 3 and ahead.dropped == 0
    assert [r["id"] for p in [*got, *rest] for r in msgspec.json.decode(bytes(p))["records"]] == \
        [e["item"]["id"] for e in server.entries[4:]]


async def test_issue_34_a_waiting_host_of_a_walk_read_before_gets_the_page_after_as_soon_as_this_one_comes(
        served, tmp_path, monkeypatch):
    """The walk was read before, so c4's records are made already: c6 is still asked for as
    soon as c4 comes, before the host is answered (review7 F2)."""
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    await _walk(reader)  # every page's records are made now
    c6 = (TID, "thread/items/list", "c6", 2, None)
    asked_when_answered: list[bool] = []
    answered = ahead.answered

    def spy(*a: Any, **k: Any) -> None:
        asked_when_answered.append(c6 in ahead._pages)
        answered(*a, **k)

    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)  # c4 is asked for now…
    server.hold = True  # …and answered only once the host waits for it
    monkeypatch.setattr(ahead, "answered", spy)
    got: list[Any] = []
    async with trio.open_nursery() as n:
        n.start_soon(_read, reader, "c4", got)
        await trio.testing.wait_all_tasks_blocked()
        server.hold = False
    assert asked_when_answered == [True]  # c6 went out before c4's answer to the host
    assert server.reads()[-4:] == [None, "c2", "c4", "c6"] and len(got) == 1


async def test_issue_34_a_host_that_has_not_asked_yet_gets_no_page_more(served, tmp_path):
    """c4 came before the host asked for it: nothing more is read until the host is answered."""
    conn, server, make_reader = served
    reader = await _c4_read_ahead(make_reader, tmp_path)
    assert server.reads() == [None, "c2", "c4"]


@pytest.mark.parametrize("declined", [False, True])
async def test_issue_34_a_walk_at_machine_pace_is_read_one_page_past_the_next_request(served, tmp_path, declined):
    """Two pages in a row answered from read-aheads, each within half the TTL of the one before
    (a host that takes its pages as fast as they come): when the next page read ahead comes,
    the one after it is asked for at once, before the host asks for the next — and no further:
    never more than one page past the page the host asks for next. Every page is read once and
    equals a fresh read. ``declined``: the typed path decodes every page but declines its
    records (an id seen twice), so each is projected the general way — and the walk is still
    told of each answer once."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(20)]  # ten pages
    if declined:
        for i in range(1, 20, 2):
            server.entries[i]["item"]["id"] = server.entries[i - 1]["item"]["id"]
    reader = await _c4_read_ahead(make_reader, tmp_path)  # c0 and c2 read as asked; c4 came ahead
    await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)  # from the read-ahead: one in a row
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", "c6"]  # c6 came: not yet machine pace, nothing more
    await reader.read_page_json(TID, scope="items", cursor="c6", limit=2)  # two in a row
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", "c6", "c8", "c10"]  # c8 for c6's answer, c10 once c8 came
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads()[-1] == "c10"  # c10 came: the host asks for c8 next, so no c12
    rest = await _walk_from(reader, "c8")
    assert server.reads() == [None, *(f"c{2 * i}" for i in range(1, 10))]  # each page once
    ahead = reader.read_ahead
    assert ahead is not None and ahead.used == 8 and ahead.dropped == 0
    plain = await _walk(make_reader(codex_home=tmp_path, page_cache=None, read_ahead=None))
    assert [msgspec.json.decode(bytes(p)) for p in rest] == plain[4:]


async def _paced_walk(reader: HistoryReader, pauses: Any) -> int:
    """Walk every page, sleeping ``next(pauses)`` seconds after each one; the pages walked."""
    cursor: Any = None
    n = 0
    while True:
        page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)))
        n += 1
        await trio.testing.wait_all_tasks_blocked()  # the page read ahead came
        cursor = page["nextCursor"]
        if cursor is None:
            return n
        await trio.sleep(next(pauses))


async def test_issue_34_a_host_at_a_persons_pace_gets_no_page_more(served, tmp_path, autojump_clock):
    """A host that reads each page after the TTL (a person scrolling): each read-ahead is too
    old, the page is read afresh, and when the page after it comes nothing more is asked for —
    two reads per page, as without the machine-pace rule."""
    conn, server, make_reader = served
    await _paced_walk(make_reader(codex_home=tmp_path), itertools.repeat(2.0))  # past the TTL
    assert server.reads() == [None, "c2", "c4", "c4", "c6", "c6", "c8", "c8"]


@pytest.mark.parametrize("pace", [0.3, 0.7, 0.95])
async def test_issue_34_a_host_within_the_ttl_but_not_at_machine_pace_has_every_page_read_once(
        served, tmp_path, autojump_clock, pace):
    """A host that takes a page every 0.3–0.95 s uses every page read ahead (within the TTL),
    and nothing is asked for one page early — a page asked for early would be two intervals old
    when asked for, past the TTL, and read again (review9 1)."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(20)]  # ten pages
    reader = make_reader(codex_home=tmp_path)
    n = await _paced_walk(reader, itertools.repeat(pace))
    ahead = reader.read_ahead
    assert ahead is not None
    assert len(server.reads()) == n == 10 and ahead.used == 8 and ahead.dropped == 0


async def _reads_with_and_without_machine_pace(served: Any, tmp_path: Any, pauses: list[float]) -> list[list[Any]]:
    """The pages read for a walk of twenty pages with ``pauses`` (cycled) after each page:
    with the machine-pace rule, and with it never met."""
    reads = []
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(40)]  # twenty pages
    for pace in (MACHINE_PACE, 1 << 30):
        server.log.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("codexrt._features._history_ahead.MACHINE_PACE", pace)
            reader = make_reader(codex_home=tmp_path, read_ahead=PageReadAhead(), page_cache=PageRecordsCache())
            await _paced_walk(reader, itertools.cycle(pauses))
        reads.append(list(server.reads()))
        await trio.sleep(2)  # nothing left in flight or fresh
    return reads


async def test_issue_34_a_host_that_takes_two_pages_and_pauses_gets_no_page_more(served, tmp_path, autojump_clock):
    """Two pages at once, then a pause past the TTL (an editor filling its viewport on each
    scroll): the walk never counts as one at machine pace, and it is read exactly as without
    that rule (review9 1)."""
    with_rule, without = await _reads_with_and_without_machine_pace(served, tmp_path, [0.01, 1.2])
    assert with_rule == without and len(with_rule) == 29


@pytest.mark.parametrize("pauses", [[0.01, 0.01, 1.2], [0.01, 0.01, 0.01, 1.2], [0.45, 0.45, 0.6],
                                    [0.3, 0.3, 0.75], [0.4, 0.4, 0.65], [0.01, 0.01, 0.01, 0.01, 0.9]])
async def test_issue_34_an_uneven_host_costs_at_most_one_page_read_for_nothing(served, tmp_path, autojump_clock,
                                                                                pauses):
    """Bursts of three or more pages and a pause, or gaps that vary under 1 s: the page asked
    for early can be older than the TTL when the host asks for it. Once that happens the walk
    gets no early page again — one page read for nothing at most, instead of one per burst
    (review10 1: 31 reads against 26, 23 against 20)."""
    with_rule, without = await _reads_with_and_without_machine_pace(served, tmp_path, pauses)
    assert len(with_rule) <= len(without) + 1, (with_rule, without)


async def test_issue_34_a_steady_fast_walk_reads_each_page_once_with_the_rule(served, tmp_path, autojump_clock):
    with_rule, without = await _reads_with_and_without_machine_pace(served, tmp_path, [0.01])
    assert with_rule == without == [None, *(f"c{2 * i}" for i in range(1, 20))]


async def test_issue_34_a_change_withdraws_the_page_asked_for_early_and_it_is_asked_again_fresh(served, tmp_path):
    """A walk at machine pace holds the page after next (c10) when a notification comes: c8 is
    read afresh, and its answer asks for c10 afresh instead of keeping the stale one as asked
    for — the host's c10 comes from that fresh read, not a third one (review9 2)."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(20)]
    reader = make_reader(codex_home=tmp_path)
    for cursor in (None, "c2", "c4", "c6"):
        await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)
        await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", "c6", "c8", "c10"]  # c10 asked for early
    await server.peer.resp.send_all(b'{"method":"thread/status/changed","params":{"threadId":"%s"}}\n'
                                    % TID.encode())
    await trio.testing.wait_all_tasks_blocked()
    ahead = reader.read_ahead
    assert ahead is not None
    used = ahead.used
    for cursor in ("c8", "c10"):
        await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)
        await trio.testing.wait_all_tasks_blocked()
    assert server.reads()[6:] == ["c8", "c10", "c12"]  # c8 afresh; c10 asked for afresh, then used
    assert ahead.used == used + 1


async def test_issue_34_walks_at_machine_pace_never_withdraw_each_others_next_page(served, tmp_path):
    """Five walks taken in turns, each at machine pace: a page asked for early never takes the
    place of another walk's next page (8 held at most), so every page is read once (review9 3)."""
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(20)]
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    limits = (2, 3, 4, 5, 6)  # five walks (the test server's pages are of 2 at any limit)
    cursors: dict[int, Any] = {limit: None for limit in limits}
    pages, started = 0, set()
    while len(started) < len(limits) or any(c is not None for c in cursors.values()):
        for limit in limits:
            if limit in started and cursors[limit] is None:
                continue
            started.add(limit)
            page = await reader.read_page_json(TID, scope="items", cursor=cursors[limit], limit=limit)
            cursors[limit] = msgspec.json.decode(bytes(page))["nextCursor"]
            pages += 1
            await trio.testing.wait_all_tasks_blocked()
            assert len(ahead) <= ahead.max_pages
    assert pages == 50 and len(server.reads()) == 50 and ahead.dropped == 0


@pytest.mark.parametrize("seed", range(60))
async def test_issue_34_fuzz_a_walk_is_never_read_more_than_one_page_past_the_next_request(
        served, tmp_path, autojump_clock, seed):
    """Random pauses around the TTL, notifications and restarts of the walk: no page held for
    the walk since it (re)started is more than one page past the page the host asks for next,
    and at most 8 are held (review9)."""
    import random

    rng = random.Random(seed)
    conn, server, make_reader = served
    server.entries = [_entry(i) for i in range(40)]  # twenty pages
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    cursor: Any = None
    before: set[int] = set()  # pages held when the walk (re)started: they are of its old position
    for _ in range(40):
        if cursor is None:
            before = {id(a) for a in ahead._pages.values()}
        page = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)))
        nxt = page["nextCursor"]
        if rng.random() < 0.1:
            await trio.testing.wait_all_tasks_blocked()
            await server.peer.resp.send_all(b'{"method":"thread/status/changed","params":{"threadId":"%s"}}\n'
                                            % TID.encode())
        if rng.random() < 0.5:
            await trio.sleep(rng.choice([0.01, 0.1, 0.4, 0.6, 0.9, 1.2]))
        await trio.testing.wait_all_tasks_blocked()
        if nxt is not None:
            held = [int(k[2][1:]) for k, a in ahead._pages.items()
                    if id(a) not in before and not a.scope.cancel_called]
            assert all(c <= int(nxt[1:]) + 2 for c in held), (held, nxt, server.reads())
        assert len(ahead) <= ahead.max_pages
        cursor = nxt if nxt is not None and rng.random() < 0.95 else None


async def _walk_from(reader: HistoryReader, cursor: Any, thread_id: str = TID, pages: int = 1 << 30) -> list[Any]:
    """The pages from ``cursor`` on (``None``: from the first page), at most ``pages``."""
    out: list[Any] = []
    while len(out) < pages:
        page = await reader.read_page_json(thread_id, scope="items", cursor=cursor, limit=2)
        out.append(page)
        cursor = msgspec.json.decode(bytes(page))["nextCursor"]
        await trio.testing.wait_all_tasks_blocked()
        if cursor is None:
            break
    return out


async def test_issue_34_two_walks_at_once_each_keep_their_read_ahead(served, tmp_path):
    """A history page read changes nothing: two walks taken in turns, page by page, each keep
    the page read ahead for them, and every page is read once."""
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    cursors: dict[int, Any] = {}
    pages: dict[int, int] = {2: 0, 3: 0}
    for limit in (2, 3):  # two walks (two keys: the test server's pages are of 2 at any limit)
        page = await reader.read_page_json(TID, scope="items", cursor=None, limit=limit)
        cursors[limit] = msgspec.json.decode(bytes(page))["nextCursor"]
        pages[limit] += 1
    while any(c is not None for c in cursors.values()):
        for limit in (2, 3):
            if cursors[limit] is not None:
                page = await reader.read_page_json(TID, scope="items", cursor=cursors[limit], limit=limit)
                cursors[limit] = msgspec.json.decode(bytes(page))["nextCursor"]
                pages[limit] += 1
                await trio.testing.wait_all_tasks_blocked()
    assert pages == {2: 5, 3: 5}
    assert len(server.reads()) == 5 + 5  # one read per page of either walk
    assert ahead.used == 3 + 3 and ahead.dropped == 0  # c4, c6 and c8 of each


async def test_issue_34_no_page_more_once_the_walk_moved_on_while_the_host_waited(served, tmp_path):
    """The host waits for c4 while the same walk starts again from its first page (a new pane):
    c4's request no longer continues the walk, so c4's coming asks for nothing (review7 F4)."""
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    held = await _hold_c4(server, reader)
    got: list[Any] = []
    async with trio.open_nursery() as n:
        n.start_soon(_read, reader, "c4", got)  # the host waits for c4
        await trio.testing.wait_all_tasks_blocked()
        await reader.read_page_json(TID, scope="items", limit=2)  # the walk starts again
        await server.peer.answer(*held[0])  # c4 comes now
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4", None]  # no c6
    assert len(got) == 1


async def test_issue_34_a_host_that_withdrew_its_wait_gets_no_page_more(served, tmp_path):
    """The host's request for c4 waits and is cancelled before c4 comes: c4's coming asks for
    nothing more (review7 F5)."""
    conn, server, make_reader = served
    reader = make_reader(codex_home=tmp_path)
    held = await _hold_c4(server, reader)
    with trio.move_on_after(0.05):
        await reader.read_page_json(TID, scope="items", cursor="c4", limit=2)
    await server.peer.answer(*held[0])  # c4 comes after the host stopped waiting
    await trio.testing.wait_all_tasks_blocked()
    assert server.reads() == [None, "c2", "c4"]


async def _hold_c4(server: Server, reader: HistoryReader) -> list[tuple[Any, Any]]:
    """Answer the walk's first two pages; c4, then asked for ahead, is held: its request and
    answer are in the list returned (``server.peer.answer(*held[0])`` sends it)."""
    answer, held = server.peer.answer, []

    async def hold_c4(msg: Any, result: Any) -> None:
        if msg["params"].get("cursor") == "c4" and not held:
            held.append((msg, result))
            return
        await answer(msg, result)
    server.peer.answer = hold_c4
    await reader.read_page_json(TID, scope="items", limit=2)
    await reader.read_page_json(TID, scope="items", cursor="c2", limit=2)
    return held


async def _read(reader: HistoryReader, cursor: str, into: list[Any]) -> None:
    into.append(await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2))


_HOSTILE_CURSORS: list[Any] = [None, "", True, False, 7, 0, -1, 1.5, {"a": 1}, ["c2"], "x" * 5000, "c0"]


@pytest.mark.parametrize("seed", range(40))
async def test_issue_34_fuzz_hostile_cursors_changes_and_pauses_every_page_as_a_fresh_read(
        served, tmp_path, autojump_clock, seed):
    """An app-server whose ``nextCursor`` is anything (a bool, a float, an object, a huge
    string, a cursor seen before, the cursor itself), a thread that changes now and then (with
    the notification a turn makes), a host that pauses at random, past the TTL or not, and asks
    while a page is still in flight or after: every page the host gets is the page the
    app-server has for that cursor at that moment, each host request costs at most one read
    beside its read-ahead, and the bounds hold (R-H-4, issue 34)."""
    import random

    conn, server, make_reader = served
    rng = random.Random(seed)
    reader = make_reader(codex_home=tmp_path)
    ahead = reader.read_ahead
    assert ahead is not None
    table: dict[str, dict[str, Any]] = {}
    serial = iter(range(1, 1 << 30))

    def fresh_page() -> dict[str, Any]:
        nxt = rng.choice([f"c{next(serial)}"] * 4 + _HOSTILE_CURSORS)
        return {"data": [_entry(next(serial)) for _ in range(rng.randint(0, 3))], "nextCursor": nxt}

    def page(cursor: Any) -> dict[str, Any]:
        return table.setdefault(json.dumps(cursor), fresh_page())

    server.page = page
    cursor: Any = None
    asked = 0
    for _ in range(30):
        asked += 1
        got = msgspec.json.decode(bytes(await reader.read_page_json(TID, scope="items", cursor=cursor, limit=2)))
        want = page(cursor)
        assert got["data"] == want["data"] and got["nextCursor"] == want["nextCursor"]
        assert isinstance(got["records"], list) and got["source"] == "native"
        assert len(ahead) <= ahead.max_pages and len(server.reads()) <= 2 * asked
        nxt = got["nextCursor"]
        cursor = nxt if isinstance(nxt, (str, int)) and not isinstance(nxt, bool) and rng.random() < 0.9 else None
        roll = rng.random()
        if roll < 0.15:  # a turn changed the thread: every page may differ now
            table.clear()
            await trio.testing.wait_all_tasks_blocked()  # the server is not writing an answer now
            await server.peer.resp.send_all(b'{"method":"thread/status/changed","params":{"threadId":"%s"}}\n'
                                            % TID.encode())
            await trio.testing.wait_all_tasks_blocked()
        elif roll < 0.55:
            await trio.testing.wait_all_tasks_blocked()  # the page read ahead came
        if rng.random() < 0.3:
            await trio.sleep(rng.choice([0.3, 1.2]))  # the host reads; maybe past the TTL


class _Conn:
    """A connection for :class:`PageReadAhead` alone: each request's answer is ``result()``."""

    rpc_timeout = 30.0

    def __init__(self, result: Any = trio.sleep_forever) -> None:
        self.closed = trio.Event()
        self.sent: list[Any] = []
        self.result = result

    def activity(self) -> int:
        return 0

    def send_request(self, method: str, params: Any, raw: bool = False) -> Any:
        self.sent.append(params)
        conn = self

        class Pending:
            def __enter__(self) -> Any:
                return self

            def __exit__(self, *a: Any) -> None:
                pass

            async def result(self) -> Any:
                return await conn.result()

        return Pending()


C0 = (TID, "thread/items/list", None, 2, None)
C2 = (TID, "thread/items/list", "c2", 2, None)
C4 = (TID, "thread/items/list", "c4", 2, None)


@pytest.mark.parametrize("phase", ["notWritten", "writtenUnconfirmed"])
async def test_issue_34_a_read_ahead_that_timed_out_is_the_hosts_timeout_only_when_written_and_waited_for(
        phase, autojump_clock):
    """A read-ahead's timeout is the host's only when the request was written and the host
    waited for its answer; else the host's request reads the page (review8 1, 2: a request
    never written, an RPC timeout shorter than the TTL)."""
    async def stalls() -> Any:
        await trio.sleep(0.5)
        raise RpcTimeout("thread/items/list timed out after 0.5s", phase=phase)

    for waited in (True, False):
        ahead, conn = PageReadAhead(), _Conn(stalls)
        conn.rpc_timeout = 0.5
        async with trio.open_nursery() as n:
            ahead.answered(n, conn, C0, "c2")  # type: ignore[arg-type]
            ahead.answered(n, conn, C2, "c4")  # type: ignore[arg-type]  # continues: c4 asked for
            if not waited:
                await trio.sleep(0.7)  # it timed out before the host asked
            if waited and phase == "writtenUnconfirmed":
                with pytest.raises(RpcTimeout, match="after 0.5s .*asked for ahead"):
                    await ahead.take(C4, conn)  # type: ignore[arg-type]
            else:
                assert await ahead.take(C4, conn) is None  # type: ignore[arg-type]
        assert len(conn.sent) == 1


class _ComesRegardless:
    """Each read is answered ``{"data":[],"nextCursor":after}`` once ``came`` is set, even if it
    was withdrawn meanwhile (its reply was on its way); :meth:`on_text` notes each page that
    came and asks for ``after`` after it."""

    def __init__(self, after: str = "c6") -> None:
        self.came = trio.Event()
        self.chained: list[Any] = []
        self.after = after

    async def result(self) -> Any:
        with trio.CancelScope(shield=True):
            await self.came.wait()
        return b'{"data":[],"nextCursor":"%s"}' % self.after.encode()

    def on_text(self, key: Any, text: bytes, ask_next: Any) -> None:
        self.chained.append(key)
        ask_next(self.after)


async def test_issue_34_a_withdrawn_wait_chains_nothing_when_the_page_still_comes():
    """The host's wait is cancelled; the page's answer comes anyway (its reply was on its way):
    the page after it is not asked for (review8 3)."""
    pages = _ComesRegardless()
    ahead, conn = PageReadAhead(), _Conn(pages.result)
    async with trio.open_nursery() as n:
        ahead.answered(n, conn, C0, "c2", pages.on_text)  # type: ignore[arg-type]
        ahead.answered(n, conn, C2, "c4", pages.on_text)  # type: ignore[arg-type]
        try:
            with trio.move_on_after(0.01):
                await ahead.take(C4, conn)  # type: ignore[arg-type]
        finally:
            pages.came.set()
    assert pages.chained == [C4] and len(conn.sent) == 1  # c4 came; c6 was not asked for


async def test_issue_34_a_dropped_read_ahead_chains_nothing_when_its_answer_still_comes():
    """A walk at machine pace (c2 and c4 answered from read-aheads, at once); c6, asked for
    ahead, is dropped (a request for it came on another connection) while its answer is on its
    way: the answer comes and the page after it is not asked for."""
    pages = _ComesRegardless(after="c8")
    ahead, conn = PageReadAhead(), _Conn(pages.result)
    async with trio.open_nursery() as n:
        try:
            ahead.answered(n, conn, C0, "c2", pages.on_text)  # type: ignore[arg-type]
            ahead.answered(n, conn, C2, "c4", pages.on_text, from_ahead=True)  # type: ignore[arg-type]
            ahead.answered(n, conn, C4, "c6", pages.on_text, from_ahead=True)  # type: ignore[arg-type]
            assert await ahead.take((*C4[:2], "c6", *C4[3:]), _Conn()) is None  # type: ignore[arg-type]
            assert ahead.dropped == 1 and len(ahead) == 1  # c6 withdrawn (c4 still held)
            await trio.testing.wait_all_tasks_blocked()
        finally:
            pages.came.set()  # the answers come (shielded: they would outlive a failed test)
    assert (*C4[:2], "c6", *C4[3:]) in pages.chained  # c6's answer came
    assert [p["cursor"] for p in conn.sent] == ["c4", "c6"]  # and no c8


def test_issue_34_read_ahead_is_bounded():
    ahead = PageReadAhead(max_pages=2, max_walks=3)

    async def main() -> None:
        conn = _Conn()
        async with trio.open_nursery() as n:
            for t in range(5):
                tid = f"t{t}"
                ahead.answered(n, conn, (tid, "thread/items/list", None, 2, None), "c2")  # type: ignore[arg-type]
                ahead.answered(n, conn, (tid, "thread/items/list", "c2", 2, None), "c4")  # type: ignore[arg-type]
                assert len(ahead) <= 2 and len(ahead._walks) <= 3
            assert len(conn.sent) == 5 and ahead.dropped == 3  # the oldest withdrawn
            n.cancel_scope.cancel()

    trio.run(main)
