"""The one cursor walk over a paginated native list (Trio side of
:mod:`codexrt._sansio._paging`, which decides after each page).

:func:`walk_pages` reads page after page through ``read(params, on_written)`` (the caller's
``call_read``, plus whatever check it needs after each call), hands each page's ``data`` list
to ``on_page`` and returns the :class:`~codexrt._sansio._paging.CursorWalk` (``complete``,
``stop``, ``pages``). A repeated cursor raises
:class:`~codexrt._sansio._paging.CursorRepeated`; what ``missing``/``pageLimit`` mean is the
caller's to say.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from codexrt._sansio._errors import RemoteProtocolError
from codexrt._sansio._paging import CursorRepeated, CursorWalk

__all__ = ["CursorRepeated", "CursorWalk", "PageReader", "walk_pages"]

#: ``read(params, on_written)``: one page's answer. ``on_written`` is None except when reading
#: ahead; then it must be called once the request is written.
PageReader = Callable[[dict[str, Any], "Callable[[], None] | None"], Awaitable[Any]]


def _data(walk: CursorWalk, res: Any, bad_page: Callable[[CursorWalk], Exception] | None) -> list[Any]:
    data = res.get("data") if isinstance(res, dict) else None
    if not isinstance(data, list):
        if bad_page is not None:
            raise bad_page(walk)
        raise RemoteProtocolError(f"{walk.method} answered without a data list",
                                  details={"method": walk.method, "page": walk.pages + 1})
    return data


async def walk_pages(read: PageReader, walk: CursorWalk, params: dict[str, Any],
                     on_page: Callable[[list[Any]], None], *, prefetch: bool = False,
                     bad_page: Callable[[CursorWalk], Exception] | None = None) -> CursorWalk:
    """Walk ``walk.method`` from ``walk.cursor`` (``params`` are sent with every page) and
    return ``walk`` once it ended. On a repeated cursor the page that carried it is still
    handed to ``on_page``, then :class:`CursorRepeated` is raised (``walk.stop ==
    "repeated"``). ``bad_page(walk)`` builds the error for an answer without a ``data`` list
    (``walk.pages`` pages handled before it); a ``RemoteProtocolError`` otherwise.

    ``prefetch``: once a page's cursor is known, the next page is requested (and written)
    *before* ``on_page`` handles this one, so the server works while we do; at most one
    request ahead, never past ``max_pages`` or the last page. If ``on_page`` raises, that one
    read is cancelled with the walk."""
    async def fetch(req: dict[str, Any], box: list[Any], written: trio.Event, done: trio.Event) -> None:
        try:
            box.append((True, await read(req, written.set)))
        except Exception as exc:  # handed to the walk, which raises it where it would have
            box.append((False, exc))
        finally:
            written.set()
            done.set()

    async def pages(nursery: trio.Nursery | None) -> CursorWalk:
        res = await read(walk.request(params), None)
        while True:
            data = _data(walk, res, bad_page)
            try:
                more = walk.advance(res)
            except CursorRepeated:
                on_page(data)  # what the page brought still counts; the walk ends here
                raise
            if more and nursery is not None:
                box: list[Any] = []
                written, done = trio.Event(), trio.Event()
                nursery.start_soon(fetch, walk.request(params), box, written, done)
                await written.wait()  # bounded: set when written or when the read ends
            on_page(data)
            if not more:
                return walk
            if nursery is not None:
                await done.wait()
                ok, value = box[0]
                if not ok:
                    raise value
                res = value
            else:
                res = await read(walk.request(params), None)

    if not prefetch:
        return await pages(None)
    error: Exception | None = None
    async with trio.open_nursery() as nursery:
        try:
            await pages(nursery)
        except Exception as exc:  # raised as itself below, not as a group; cancels the read ahead
            error = exc
        nursery.cancel_scope.cancel()
    if error is not None:
        raise error
    return walk
