"""The one cursor walk over a paginated native list (Trio side of
:mod:`codexrt._sansio._paging`, which decides after each page).

:func:`walk_pages` reads page after page through ``read(params, sent)`` (the caller's
``call_read``, plus whatever check it needs after each call), hands each page's ``data`` list
(or the :class:`~codexrt._sansio._paging.PageData` a reader made of it) to ``on_page`` and
returns the :class:`~codexrt._sansio._paging.CursorWalk` (``complete``, ``stop``, ``pages``).
A repeated cursor raises :class:`~codexrt._sansio._paging.CursorRepeated`; what
``missing``/``pageLimit`` mean is the caller's to say.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from codexrt._sansio._errors import RemoteProtocolError
from codexrt._sansio._paging import CursorRepeated, CursorWalk, PageData

__all__ = ["CursorRepeated", "CursorWalk", "PageReader", "PageSender", "walk_pages"]

#: ``read(params, sent)``: one page's answer. ``sent`` is None, or — when reading ahead — what
#: the walk's ``send(params)`` gave for these same params: the request is already out, and
#: ``read`` only waits for its answer.
PageReader = Callable[[dict[str, Any], Any], Awaitable[Any]]

#: ``send(params)``: a context manager that sends the request for a page now (for example
#: ``Connection.send_request``) and withdraws it if the block ends before ``read`` took its answer.
#: What it gives has ``async written()``, which returns once the request is out.
PageSender = Callable[[dict[str, Any]], AbstractContextManager[Any]]


def _data(walk: CursorWalk, res: Any, bad_page: Callable[[CursorWalk], Exception] | None) -> Any:
    data = res.get("data") if isinstance(res, dict) else None
    if not isinstance(data, (list, PageData)):
        if bad_page is not None:
            raise bad_page(walk)
        raise RemoteProtocolError(f"{walk.method} answered without a data list",
                                  details={"method": walk.method, "page": walk.pages + 1})
    return data


async def walk_pages(read: PageReader, walk: CursorWalk, params: dict[str, Any],
                     on_page: Callable[[list[Any]], None], *, send: PageSender | None = None,
                     bad_page: Callable[[CursorWalk], Exception] | None = None, first: Any = None,
                     last: Callable[[], None] | None = None) -> CursorWalk:
    """Walk ``walk.method`` from ``walk.cursor`` (``params`` are sent with every page) and
    return ``walk`` once it ended. On a repeated cursor the page that carried it is still
    handed to ``on_page``, then :class:`CursorRepeated` is raised (``walk.stop ==
    "repeated"``). ``bad_page(walk)`` builds the error for an answer without a ``data`` list
    (``walk.pages`` pages handled before it); a ``RemoteProtocolError`` otherwise.

    ``send``: read one page ahead. Once a page's cursor is known, the next page's request is
    sent (``send``) *before* ``on_page`` handles this one, so the server works while we do —
    in the same task, with no hop to another one; at most one request ahead, never past
    ``max_pages`` or the last page. If ``on_page`` raises, that request is withdrawn.

    ``first``: the first page's request, already sent by the caller (as ``send`` gives it, for
    these ``params``): ``read`` waits for its answer. ``last()`` is called when the walk ends —
    no next cursor, none given, or ``max_pages`` reached; not on a repeated cursor or a page
    without ``data`` — before ``on_page`` handles its last page (the caller asks for what it
    reads next, so the server reads that meanwhile)."""
    res = await read(walk.request(params), first)
    while True:
        data = _data(walk, res, bad_page)
        try:
            more = walk.advance(res)
        except CursorRepeated:
            on_page(data)  # what the page brought still counts; the walk ends here
            raise
        if not more:
            if last is not None:
                last()
            on_page(data)
            return walk
        req = walk.request(params)
        if send is None:
            on_page(data)
            res = await read(req, None)
            continue
        with send(req) as sent:
            await sent.written()  # no yield when it went out at once; else the writer's turn first
            on_page(data)
            res = await read(req, sent)
