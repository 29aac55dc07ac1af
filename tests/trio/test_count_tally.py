"""Split from ``tests/sansio/test_count_tally.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

from typing import Any


from tests.sansio.test_count_tally import TID


class _PagedConn:
    """``thread/items/list`` over ``n`` items, ``limit`` per page; ``tail`` shapes the last
    page's continuation (``None``: no more, ``"missing"``: no field, ``"repeat"``: a cursor
    already given). Logs each request when it is sent; a request read ahead
    (``send_request``) and withdrawn before its answer was taken is logged as cancelled, and
    so is a read still waiting when the walk ends."""

    def __init__(self, n: int, limit: int, tail: Any = None, hold: int | None = None) -> None:
        self.n, self.limit, self.tail, self.hold = n, limit, tail, hold  # hold: never answer that page
        self.log: list[tuple[str, Any]] = []

    async def call(self, method: str, params: Any = None, *, timeout: Any = None) -> Any:
        with self.send_request(method, params) as sent:
            return await sent.result()

    def send_request(self, method: str, params: Any = None, *, raw: bool = False) -> Any:
        assert not raw
        start = int(params.get("cursor") or 0)
        self.log.append(("request", start))
        return _Sent(self, start)

    def page(self, start: int) -> dict[str, Any]:
        end = min(self.n, start + self.limit)
        res: dict[str, Any] = {"data": [{"turnId": "t", "item": {"type": "agentMessage", "id": f"i{k}"}}
                                        for k in range(start, end)]}
        if end < self.n:
            res["nextCursor"] = str(end)
        elif self.tail == "repeat":
            res["nextCursor"] = "0"
        elif self.tail != "missing":
            res["nextCursor"] = None
        return res


class _Sent:
    def __init__(self, conn: _PagedConn, start: int) -> None:
        self.conn, self.start, self.taken = conn, start, False

    def __enter__(self) -> _Sent:
        return self

    async def written(self) -> None:
        self.conn.log.append(("written", self.start))

    def __exit__(self, *exc: object) -> None:
        if not self.taken:
            self.conn.log.append(("cancelled", self.start))

    async def result(self) -> Any:
        import trio

        if self.start == self.conn.hold:
            await trio.sleep_forever()
        await trio.sleep(0)
        self.taken = True
        return self.conn.page(self.start)


async def test_r_h_7_prefetched_walk_sees_the_same_pages_and_asks_ahead_once() -> None:
    """The count's walk requests page k+1 before handling page k (one read ahead, never past
    the last page or ``max_pages``) and ends exactly like the plain walk: same pages in the
    same order, same completeness (no more / no cursor field / repeated cursor / page cap)."""
    from codexrt._features._history import _walk

    for n, limit, tail, max_pages in [(35, 10, None, 100), (35, 10, "missing", 100), (20, 10, "repeat", 100),
                                      (35, 10, None, 2), (0, 10, None, 100), (10, 10, None, 100)]:
        outs = []
        for prefetch in (False, True):
            conn = _PagedConn(n, limit, tail)
            seen: list[Any] = []

            def on_page(data: list[Any], conn: _PagedConn = conn, seen: list[Any] = seen) -> None:
                seen.append([e["item"]["id"] for e in data])
                conn.log.append(("handled", len(seen)))

            w = await _walk(conn, "thread/items/list", {"threadId": TID}, on_page,  # type: ignore[arg-type]
                            max_pages=max_pages, prefetch=prefetch)
            outs.append((seen, w.complete, w.pages))
            if prefetch:
                requests = [e for e in conn.log if e[0] == "request"]
                assert len(requests) == w.pages  # nothing requested past the end
                for k in range(1, w.pages):  # page k+1 asked for before page k was handled
                    assert conn.log.index(requests[k]) < conn.log.index(("handled", k))
        assert outs[0] == outs[1]


async def test_r_h_7_prefetched_walk_raises_a_page_error_as_itself_and_cancels_the_read_ahead() -> None:
    from codexrt._features._history import _walk

    conn = _PagedConn(50, 10, hold=20)  # the read ahead is still waiting when page 2 fails

    def on_page(data: list[Any]) -> None:
        if data[0]["item"]["id"] == "i10":
            raise ValueError("bad page")

    try:
        await _walk(conn, "thread/items/list", {"threadId": TID}, on_page,  # type: ignore[arg-type]
                    max_pages=100, prefetch=True)
    except ValueError as exc:
        assert str(exc) == "bad page"
    else:
        raise AssertionError("the page error was swallowed")
    assert conn.log[-1] == ("cancelled", 20)
