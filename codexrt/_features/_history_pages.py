"""The display records of native history pages already answered (``codex.readHistoryPage``,
issue 34): a host that pages through a thread again — an editor re-opening it, scrolling back
— gets the same JSON records without projecting the page a second time.

A page's records are a function of its thread id, its scope and sort direction, the page's
``result`` exactly as the server sent it and the privacy index that masked it (R-PRIV-2), and of
nothing else (every page is projected on its own: ``Projector.page_records`` or a fresh
:class:`~codexrt._sansio._projection.Projector`). So an entry is reused only when the server's
answer to the same request is *byte for byte* the cached one (its JSON text: comparing it costs
one ``memcmp``, not a walk of the decoded page) and the privacy index just loaded for this page
is equal to the one that masked it: a page that changed, or a classification made meanwhile,
is projected afresh. Reads with a text redactor (configured secrets) are never cached: a
redactor also masks values registered process-wide, which can change between two reads.

Bounded: at most ``max_entries`` native entries are held in all, least recently used pages go
first. The records of an entry (and their JSON text, once serve asked for it) are shared by the
replies that reuse it; nothing mutates them (they are encoded and written).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import attrs
import msgspec

__all__ = ["PageRecordsCache", "CachedPage", "PageKey", "DEFAULT_MAX_ENTRIES", "page_request"]

#: About fifty pages of 100 items: a long thread's walk, a few MB of JSON at most.
DEFAULT_MAX_ENTRIES = 5_000

#: ``(thread id, method, cursor, limit, sort direction)``: one page request.
PageKey = tuple[str, str, Any, Any, Any]


def page_request(thread_id: str, scope: str, cursor: Any, limit: int | None,
                 sort_direction: str | None) -> tuple[str, dict[str, Any], PageKey]:
    """The native method, params and page key of a history page request."""
    method = "thread/items/list" if scope == "items" else "thread/turns/list"
    params: dict[str, Any] = {"threadId": thread_id}
    if cursor is not None:
        params["cursor"] = cursor
    if limit is not None:
        params["limit"] = limit
    if sort_direction is not None:
        params["sortDirection"] = sort_direction
    return method, params, (thread_id, method, cursor, limit, sort_direction)


@attrs.define(eq=False)
class CachedPage:
    """One answered page: the server's result text, how many native entries it holds (the
    bound counts them), the index that masked it, and its JSON records — as values
    (``records``) or, once encoded, as their JSON text only (``records_json``; the values are
    then dropped: a long walk held thousands of small dicts and lists that every full garbage
    collection walked, issue 34) — and serve's whole reply text (``reply``)."""

    result: bytes
    entries: int
    index: Any
    records: list[dict[str, Any]] | None
    records_json: bytes | None = None
    #: serve's reply text (the result with the records appended), once made: the same object
    #: for every answer of this page, so serve's writer checks its depth once (a ``BoundedText``
    #: when its depth is known: never)
    reply: Any = None
    #: the result's ``nextCursor`` (serve's read-ahead asks for that page next)
    next_cursor: Any = None

    def encoded(self, records_json: bytes) -> None:
        """Keep the records as ``records_json`` (their exact JSON text) instead of values."""
        self.records_json, self.records = records_json, None

    def record_values(self) -> list[dict[str, Any]]:
        """The records as JSON values (fresh ones when only their text is kept)."""
        if self.records is not None:
            return self.records
        values: list[dict[str, Any]] = msgspec.json.decode(self.records_json or b"[]")
        return values


class PageRecordsCache:
    """Records of answered history pages by request (see the module doc)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._pages: OrderedDict[PageKey, CachedPage] = OrderedDict()
        self._held = 0  # native entries held, over every page
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: PageKey, result: bytes, index: Any) -> CachedPage | None:
        """The page cached for ``key`` when the server's ``result`` text and the masking
        ``index`` equal the ones its records were made from; else None."""
        hit = self._pages.get(key)
        if hit is None or hit.result != result or hit.index != index:
            self.misses += 1
            return None
        self._pages.move_to_end(key)
        self.hits += 1
        return hit

    def peek(self, key: PageKey, result: bytes, index: Any) -> CachedPage | None:
        """:meth:`get` without counting it or making the page the most recently used."""
        hit = self._pages.get(key)
        return hit if hit is not None and hit.result == result and hit.index == index else None

    def put(self, key: PageKey, page: CachedPage) -> None:
        old = self._pages.pop(key, None)
        if old is not None:
            self._held -= old.entries
        if page.entries > self.max_entries:
            return
        self._pages[key] = page
        self._held += page.entries
        while self._held > self.max_entries:
            _, gone = self._pages.popitem(last=False)
            self._held -= gone.entries

    def invalidate(self, thread_id: str | None = None) -> None:
        """Forget one thread's pages (or every page)."""
        for key in [k for k in self._pages if thread_id is None or k[0] == thread_id]:
            self._held -= self._pages.pop(key).entries
