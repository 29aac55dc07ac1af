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
from codecs import utf_8_decode
from typing import Any, Callable

import msgspec
from msgspec import UNSET, Raw

from codexrt._sansio._errors import CursorRepeated, LocalProtocolError
from codexrt._sansio._wire import decode_json

__all__ = ["CursorRepeated", "CursorWalk", "PageData", "RawPageData", "page_is_partial", "peek_page", "plain_data"]


class PageData:
    """A page's ``data`` that its reader found to be a JSON array but hands on undecoded, for
    the page's consumer to decode in a shape of its own (the message count's
    :class:`~codexrt._sansio._projection.TallyEntries`): the walk accepts it as it accepts a
    decoded list and gives it to ``on_page`` as it is."""

    __slots__ = ()


class RawPageData(PageData):
    """A page's ``data`` array as :func:`peek_page` left it: its JSON text (``raw``), decoded
    by :meth:`dicts` when the page is handled — after a walk reading ahead has asked for the
    next page (issue 34)."""

    __slots__ = ("raw", "_plain")

    def __init__(self, raw: bytes | Raw) -> None:
        self.raw = raw
        self._plain: list[Any] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self.raw)} bytes>"

    def dicts(self) -> list[Any]:
        """The entries as plain decoded JSON (decoded once, on first use; a value a plain decode
        refuses — ``1e400`` — raises the same error here, its path counted from ``data``)."""
        if self._plain is None:
            self._plain = decode_json(self.raw)
        return self._plain


def plain_data(data: Any) -> Any:
    """A page's ``data`` as decoded JSON, whether :func:`peek_page` left it undecoded or not."""
    return data.dicts() if isinstance(data, RawPageData) else data


class _Head(msgspec.Struct, gc=False):
    data: Raw = Raw()
    nextCursor: Any = UNSET


_HEAD = msgspec.json.Decoder(_Head)


def peek_page(raw: bytes | Raw, wrap: Callable[[Raw], RawPageData] = RawPageData) -> Any:
    """One page's answer (the result's JSON text) as a cursor walk reads it, in one cheap pass
    that leaves the entries undecoded: ``{"data": wrap(text of data), "nextCursor": …}``
    (``nextCursor`` only when the answer has one, verbatim) when the answer is an object whose
    ``data`` is an array, else the plain decoded JSON (which the walk judges as it judges any
    answer). So the walk sends the next request before the entries are decoded.

    Text that is not UTF-8 is decoded plainly here (and fails as it would): the pass skips
    ``data`` without checking its bytes. The answer's other fields are skipped unread: a number
    out of range there (``1e400``, which ``serde_json`` never writes) is not refused as a plain
    decode refuses it. An error in ``data`` surfaces when the page is handled
    (:meth:`RawPageData.dicts`), after the next request went out (the walk withdraws it)."""
    try:
        utf_8_decode(memoryview(raw), "strict", True)  # ~1 µs for an ASCII 28 KB page
        head = _HEAD.decode(raw)
    except UnicodeDecodeError:
        return decode_json(raw)
    except msgspec.DecodeError:  # includes ValidationError: not an object
        return decode_json(raw)
    if memoryview(head.data)[:1] != b"[":
        return decode_json(raw)
    out: dict[str, Any] = {"data": wrap(head.data)}
    if head.nextCursor is not UNSET:
        out["nextCursor"] = head.nextCursor
    return out


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
