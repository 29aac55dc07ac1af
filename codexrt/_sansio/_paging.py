"""The cursor walk's decision step (pure, no I/O): what to do after each page of a paginated
native list (``thread/list``, ``thread/turns/list``, ``thread/items/list``, ``model/list``,
``mcpServerStatus/list``).

One rule set for every pager (R-H-1, R-H-6, R-H-7, R-CAT-1):

* the server's ``nextCursor`` is passed back **verbatim** (any JSON value; never parsed);
* ``nextCursor: null`` ends the walk, complete;
* a page **without** a ``nextCursor`` field ends it **incomplete** (``stop == "missing"``):
  nobody can tell whether more exists, so nothing guesses;
* a cursor the walk already sent (or started from) raises :class:`CursorRepeated` — a loop
  guard, never another request;
* after ``max_pages`` pages with a further cursor the walk ends incomplete
  (``stop == "pageLimit"``).

Each caller maps the outcome to its own result (history: ``complete=False`` / count unknown;
catalogs and the edit ledger: an error). The Trio loop around it is
``codexrt._features._paging.walk_pages``.
"""

from __future__ import annotations

import json
from typing import Any

from codexrt._sansio._errors import CursorRepeated, LocalProtocolError

__all__ = ["CursorRepeated", "CursorWalk", "PageData", "page_is_partial"]


class PageData:
    """A page's ``data`` that its reader found to be a JSON array but hands on undecoded, for
    the page's consumer to decode in a shape of its own (the message count's
    :class:`~codexrt._sansio._projection.TallyEntries`): the walk accepts it as it accepts a
    decoded list and gives it to ``on_page`` as it is."""

    __slots__ = ()


def page_is_partial(result: dict[str, Any]) -> bool:
    """One page on its own is not the whole list: more pages exist (a cursor) or nobody can
    tell (no ``nextCursor`` field)."""
    return result.get("nextCursor") is not None or "nextCursor" not in result


def _marker(cursor: Any) -> str:
    return json.dumps(cursor, sort_keys=True)


class CursorWalk:
    """Where one walk stands. ``cursor``: what the next request sends (``None``: none);
    ``pages``: pages handled; ``stop``: ``None`` while walking, then ``"end"``, ``"missing"``
    or ``"pageLimit"``; ``complete``: the walk saw the list's end."""

    __slots__ = ("method", "max_pages", "cursor", "pages", "stop", "_seen")

    def __init__(self, method: str, *, max_pages: int, cursor: Any = None) -> None:
        self.method = method
        self.max_pages = max_pages
        self.cursor = cursor
        self.pages = 0
        self.stop: str | None = None
        self._seen: set[str] = set() if cursor is None else {_marker(cursor)}

    @property
    def complete(self) -> bool:
        return self.stop == "end"

    def request(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` for the next request: a copy, with ``cursor`` when there is one."""
        p = dict(params)
        if self.cursor is not None:
            p["cursor"] = self.cursor
        return p

    def advance(self, result: Any) -> bool:
        """Count one page (``result`` = its answer) and decide: True when another page is to be
        read (``cursor`` now holds its cursor), False when the walk ends (``stop`` says why).
        Raises :class:`CursorRepeated` on a cursor already sent."""
        if self.stop is not None:
            raise LocalProtocolError(f"the cursor walk of {self.method} has already ended")
        self.pages += 1
        if not isinstance(result, dict) or "nextCursor" not in result:
            self.stop = "missing"
            return False
        nxt = result["nextCursor"]
        if nxt is None:
            self.stop = "end"
            return False
        marker = _marker(nxt)
        if marker in self._seen:
            self.stop = "repeated"
            raise CursorRepeated(
                f"{self.method} repeated the cursor {str(nxt)[:80]!r}; stopped instead of looping",
                details={"method": self.method, "page": self.pages, "cursor": str(nxt)[:80]})
        if self.pages >= self.max_pages:
            self.stop = "pageLimit"
            return False
        self._seen.add(marker)
        self.cursor = nxt
        return True
