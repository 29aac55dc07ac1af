"""The display records of native history pages already answered (``codex.readHistoryPage``,
issue 34): a host that pages through a thread again — an editor re-opening it, scrolling back
— gets the same JSON records without projecting the page a second time.

A page's records are a function of its thread id, its scope and sort direction, the page's
``data`` exactly as the server sent it and the privacy index that masked it (R-PRIV-2), and of
nothing else (every page is projected on a fresh :class:`~codexrt._sansio._projection.Projector`).
So an entry is reused only when the server's ``data`` for the same request is *equal* to the
cached one and the privacy index just loaded for this page is equal to the one that masked it:
a page that changed, or a classification made meanwhile, is projected afresh. Reads with a text
redactor (configured secrets) are never cached: a redactor also masks values registered
process-wide, which can change between two reads.

Bounded: at most ``max_entries`` native entries are held in all, least recently used pages go
first. The records of an entry are shared by the replies that reuse it; nothing mutates them
(they are encoded and written).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["PageRecordsCache", "DEFAULT_MAX_ENTRIES"]

#: About fifty pages of 100 items: a long thread's walk, a few MB of JSON at most.
DEFAULT_MAX_ENTRIES = 5_000

PageKey = tuple[str, str, Any, Any, Any]


class PageRecordsCache:
    """Records of answered history pages by request (see the module doc)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._pages: OrderedDict[PageKey, tuple[list[Any], Any, list[dict[str, Any]]]] = OrderedDict()
        self._held = 0  # native entries held, over every page
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: PageKey, data: list[Any], index: Any) -> list[dict[str, Any]] | None:
        """The records cached for ``key`` when the page's ``data`` and the masking ``index``
        equal the ones they were made from; else None."""
        hit = self._pages.get(key)
        if hit is None or hit[0] != data or hit[1] != index:
            self.misses += 1
            return None
        self._pages.move_to_end(key)
        self.hits += 1
        return hit[2]

    def put(self, key: PageKey, data: list[Any], index: Any, records: list[dict[str, Any]]) -> None:
        old = self._pages.pop(key, None)
        if old is not None:
            self._held -= len(old[0])
        if len(data) > self.max_entries:
            return
        self._pages[key] = (data, index, records)
        self._held += len(data)
        while self._held > self.max_entries:
            _, (gone, _, _) = self._pages.popitem(last=False)
            self._held -= len(gone)

    def invalidate(self, thread_id: str | None = None) -> None:
        """Forget one thread's pages (or every page)."""
        for key in [k for k in self._pages if thread_id is None or k[0] == thread_id]:
            self._held -= len(self._pages.pop(key)[0])
