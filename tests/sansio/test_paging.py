"""The one cursor walk's decision step (``codexrt._sansio._paging``): the rules every pager
follows (R-H-1 opaque cursors, R-H-6/R-H-7 incomplete pages, R-CAT-1 loop guard)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codexrt._sansio._errors import CursorRepeated, LocalProtocolError, RemoteProtocolError
from codexrt._sansio._paging import CursorWalk, page_is_partial


def test_r_h_1_the_cursor_goes_back_verbatim_and_null_ends_complete() -> None:
    cursor = {"requestedThreadId": "t", "rolloutOrdinal": 66, "scope": {"kind": "turns"}}
    walk = CursorWalk("thread/turns/list", max_pages=10)
    assert walk.request({"threadId": "t"}) == {"threadId": "t"}  # first page: no cursor key
    assert walk.advance({"data": [], "nextCursor": cursor}) is True
    sent = walk.request({"threadId": "t"})
    assert sent == {"threadId": "t", "cursor": cursor} and sent["cursor"] is cursor
    assert walk.advance({"data": [], "nextCursor": None}) is False
    assert (walk.stop, walk.complete, walk.pages) == ("end", True, 2)


def test_r_h_7_a_page_without_the_field_ends_incomplete() -> None:
    walk = CursorWalk("thread/items/list", max_pages=10)
    assert walk.advance({"data": []}) is False
    assert (walk.stop, walk.complete, walk.pages) == ("missing", False, 1)
    odd = CursorWalk("thread/items/list", max_pages=10)
    assert odd.advance(["not", "a", "dict"]) is False and odd.stop == "missing"


def test_r_cat_1_a_repeated_cursor_is_refused_with_a_typed_error() -> None:
    walk = CursorWalk("model/list", max_pages=10)
    assert walk.advance({"nextCursor": "c1"}) and walk.advance({"nextCursor": "c2"})
    with pytest.raises(CursorRepeated) as info:
        walk.advance({"nextCursor": "c1"})
    assert isinstance(info.value, RemoteProtocolError) and info.value.code == "CURSOR_REPEATED"
    assert info.value.details == {"method": "model/list", "page": 3, "cursor": "c1"}
    assert "model/list" in info.value.message and walk.stop == "repeated" and not walk.complete
    assert walk.cursor == "c2"  # nothing more is asked for
    with pytest.raises(LocalProtocolError):
        walk.advance({"nextCursor": None})  # an ended walk takes no further page


def test_r_cat_1_the_start_cursor_counts_as_sent_and_json_equal_cursors_repeat() -> None:
    walk = CursorWalk("model/list", max_pages=10, cursor="c0")
    assert walk.request({}) == {"cursor": "c0"}
    with pytest.raises(CursorRepeated):
        walk.advance({"nextCursor": "c0"})
    obj = CursorWalk("thread/items/list", max_pages=10)
    assert obj.advance({"nextCursor": {"a": 1, "b": 2}})
    with pytest.raises(CursorRepeated):
        obj.advance({"nextCursor": {"b": 2, "a": 1}})


def test_r_cat_1_past_the_page_limit_ends_incomplete_without_another_request() -> None:
    walk = CursorWalk("model/list", max_pages=2)
    assert walk.advance({"nextCursor": "c1"}) is True
    assert walk.advance({"nextCursor": "c2"}) is False
    assert (walk.stop, walk.complete, walk.pages, walk.cursor) == ("pageLimit", False, 2, "c1")
    last = CursorWalk("model/list", max_pages=2)
    last.advance({"nextCursor": "c1"})
    assert last.advance({"nextCursor": None}) is False and last.complete  # the limit is not an end


def test_r_h_6_a_page_alone_is_partial_unless_its_cursor_is_null() -> None:
    assert page_is_partial({"data": [], "nextCursor": "x"})
    assert page_is_partial({"data": []})
    assert not page_is_partial({"data": [], "nextCursor": None})


@given(st.lists(st.one_of(st.none(), st.integers(0, 6).map(str), st.just("missing")), min_size=1, max_size=12),
       st.integers(1, 8))
def test_r_h_1_every_walk_ends_within_the_page_limit_and_never_resends_a_cursor(tails: list[Any], max_pages: int
                                                                                ) -> None:
    walk = CursorWalk("thread/items/list", max_pages=max_pages)
    sent: list[Any] = []
    for tail in tails:
        res: dict[str, Any] = {"data": []} if tail == "missing" else {"data": [], "nextCursor": tail}
        try:
            more = walk.advance(res)
        except CursorRepeated:
            assert tail in sent
            break
        if not more:
            assert walk.stop == ("missing" if tail == "missing" else "end" if tail is None else "pageLimit")
            break
        assert walk.cursor == tail and tail not in sent
        sent.append(tail)
    assert walk.pages <= max_pages and len(sent) < max_pages
