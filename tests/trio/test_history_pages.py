"""``codex.readHistoryPage``'s records cache (issue 34; R-H-4, R-PRIV-2).

A page read again with the same data and the same privacy index reuses its JSON records; a
page whose data changed, or read under a different index, is projected afresh; reads with a
text redactor are never cached; the cache is bounded.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from codexrt._features._history import HistoryReader
from codexrt._features._history_pages import CachedPage, PageRecordsCache
from codexrt._sansio._privacy import PrivacyIndex
from codexrt._sansio._wire import BoundedText

TID = "01a22d24-784b-70a1-b4d2-eee60df61981"


def _entry(i: int, text: str | None = None) -> dict[str, Any]:
    if i % 2 == 0:
        item = {"type": "userMessage", "id": f"u-{i}", "clientId": None,
                "content": [{"type": "text", "text": text or f"question {i}", "text_elements": []}]}
    else:
        item = {"type": "agentMessage", "id": f"m-{i}", "text": text or f"answer {i}", "phase": None}
    return {"turnId": f"turn-{i // 2}", "item": item, "startedAtMs": 1000 + i, "completedAtMs": 1000 + i}


class _Conn:
    """Answers ``thread/items/list`` from ``pages`` (cursor → data); a fresh decode (or, for
    ``raw``, a fresh JSON text) each call."""

    def __init__(self, pages: dict[Any, list[dict[str, Any]]]) -> None:
        self.pages = pages
        self.calls = 0

    async def call(self, method: str, params: Any, timeout: float | None = None, raw: bool = False) -> Any:
        assert method == "thread/items/list"
        self.calls += 1
        res = {"data": copy.deepcopy(self.pages[params.get("cursor")]), "nextCursor": None}
        return msgspec.Raw(msgspec.json.encode(res)) if raw else res


def _provider(conn: Any) -> Any:
    async def provider() -> Any:
        return conn

    return provider


def _reader(nursery, conn: Any, cache: PageRecordsCache, index: list[PrivacyIndex], **kw: Any) -> HistoryReader:
    return HistoryReader(nursery, _provider(conn), privacy=lambda: index[0], page_cache=cache, **kw)


async def test_same_page_reuses_its_records_changed_data_does_not(nursery, tmp_path):
    conn = _Conn({None: [_entry(i) for i in range(6)], "6": [_entry(i) for i in range(6, 10)]})
    cache, index = PageRecordsCache(), [PrivacyIndex("s")]
    reader = _reader(nursery, conn, cache, index, codex_home=tmp_path)
    first = await reader.read_page(TID, scope="items", limit=6)
    again = await reader.read_page(TID, scope="items", limit=6)
    assert again == first and cache.hits == 1 and conn.calls == 2  # the server is asked every time
    assert [r["text"] for r in first["records"]] == ["question 0", "answer 1", "question 2", "answer 3",
                                                     "question 4", "answer 5"]
    other = await reader.read_page(TID, scope="items", cursor="6", limit=6)
    assert [r["id"] for r in other["records"]] == ["u-6", "m-7", "u-8", "m-9"] and cache.hits == 1
    conn.pages[None][1] = _entry(1, "edited answer")  # the server's page changed
    changed = await reader.read_page(TID, scope="items", limit=6)
    assert changed["records"][1]["text"] == "edited answer" and cache.hits == 1
    uncached = HistoryReader(nursery, _provider(conn), privacy=lambda: index[0], codex_home=tmp_path)
    assert uncached.page_cache is None
    assert changed == await uncached.read_page(TID, scope="items", limit=6)  # what a reader without one shows


async def test_an_encoded_page_keeps_only_its_records_text(nursery, tmp_path):
    """serve's read (``_serve_page``) keeps the records as their JSON text, not as values a
    garbage collection walks; a dict-form read of the same page gets equal values, fresh; the
    public ``read_page_json`` gives the same text as a ``msgspec.Raw``."""
    conn = _Conn({None: [_entry(i) for i in range(6)]})
    cache, index = PageRecordsCache(), [PrivacyIndex("s")]
    reader = _reader(nursery, conn, cache, index, codex_home=tmp_path)
    projected = await HistoryReader(nursery, _provider(conn), privacy=lambda: index[0],
                                    codex_home=tmp_path).read_page(TID, scope="items", limit=6)
    text = await reader._serve_page(TID, "items", limit=6)
    (held,) = cache._pages.values()
    assert held.records is None and held.records_json is not None
    assert msgspec.json.decode(bytes(text)) == projected
    first = await reader.read_page(TID, scope="items", limit=6)
    second = await reader.read_page(TID, scope="items", limit=6)
    assert first == second == projected and cache.hits == 2
    first["records"][0]["text"] = "changed by a caller"
    assert (await reader.read_page(TID, scope="items", limit=6)) == projected
    assert await reader._serve_page(TID, "items", limit=6) is text  # the same reply object
    public = await reader.read_page_json(TID, scope="items", limit=6)
    assert type(public) is msgspec.Raw and bytes(public) == bytes(text)


async def test_another_privacy_index_is_projected_afresh_r_priv_2(nursery, tmp_path):
    conn = _Conn({None: [_entry(i) for i in range(4)]})
    cache, index = PageRecordsCache(), [PrivacyIndex("s")]
    reader = _reader(nursery, conn, cache, index, codex_home=tmp_path)
    await reader.read_page(TID, scope="items")
    index[0] = PrivacyIndex("s", problems=["lost"], conservative=True)  # a classification was lost meanwhile
    await reader.read_page(TID, scope="items")
    assert cache.hits == 0 and cache.misses == 2
    await reader.read_page(TID, scope="items")
    assert cache.hits == 1


async def test_reads_with_a_redactor_are_never_cached(nursery, tmp_path):
    conn = _Conn({None: [_entry(i) for i in range(4)]})
    cache = PageRecordsCache()
    reader = _reader(nursery, conn, cache, [PrivacyIndex("s")], codex_home=tmp_path, redact=lambda s: s.upper())
    for _ in range(2):
        page = await reader.read_page(TID, scope="items")
        assert page["records"][0]["text"] == "QUESTION 0"
    assert len(cache) == 0 and cache.hits == 0


async def test_an_unhashable_cursor_is_read_and_not_cached(nursery, tmp_path):
    class _AnyCursor:
        async def call(self, method: str, params: Any, timeout: float | None = None, raw: bool = False) -> Any:
            return msgspec.Raw(msgspec.json.encode({"data": [_entry(0)], "nextCursor": None}))

    cache = PageRecordsCache()
    reader = _reader(nursery, _AnyCursor(), cache, [PrivacyIndex("s")], codex_home=tmp_path)
    page = await reader.read_page(TID, scope="items", cursor={"opaque": [1]})
    assert page["records"][0]["id"] == "u-0" and len(cache) == 0


def _cached(k: int, n: int = 4) -> CachedPage:
    return CachedPage(msgspec.json.encode({"data": [_entry(i) for i in range(n)], "k": k}), n, None, [{"k": k}])


def test_the_cache_is_bounded_by_entries_least_recently_used_first():
    cache = PageRecordsCache(max_entries=10)
    pages = {k: _cached(k) for k in range(4)}
    for k in range(3):
        cache.put((TID, "m", k, None, None), pages[k])
    assert len(cache) == 2  # 12 entries > 10: the oldest page went
    assert cache.get((TID, "m", 0, None, None), pages[0].result, None) is None
    assert cache.get((TID, "m", 1, None, None), pages[1].result, None) is pages[1]
    cache.put((TID, "m", 3, None, None), pages[3])  # evicts 2, not the just-used 1
    assert cache.get((TID, "m", 2, None, None), pages[2].result, None) is None
    assert cache.get((TID, "m", 1, None, None), pages[1].result, None) is pages[1]
    assert cache.get((TID, "m", 1, None, None), pages[3].result, None) is None  # other text: a miss
    big = _cached(9, 11)
    cache.put((TID, "m", 9, None, None), big)  # larger than the bound
    assert cache.get((TID, "m", 9, None, None), big.result, None) is None
    cache.invalidate(TID)
    assert len(cache) == 0


async def test_serve_form_is_the_result_text_with_records_appended(nursery, tmp_path):
    """``_serve_page`` (serve's form of ``read_page_json``): the server's result text kept as it
    came, with the same ``source`` and ``records`` as ``read_page``, whether projected or from
    the cache; a result that already has one of those keys is answered as the dict (its keys
    overridden); the public form gives a typed page's text as a ``msgspec.Raw``."""
    conn = _Conn({None: [_entry(i) for i in range(6)]})
    cache = PageRecordsCache()
    reader = _reader(nursery, conn, cache, [PrivacyIndex("s")], codex_home=tmp_path)
    want = await reader.read_page(TID, scope="items")
    answers = []
    for _ in range(3):  # projected (the dict path cached only the records), then all from the cache
        got = await reader._serve_page(TID, "items")
        assert isinstance(got, msgspec.Raw)
        assert bytes(got).startswith(msgspec.json.encode({"data": conn.pages[None], "nextCursor": None})[:-1])
        assert msgspec.json.decode(got) == want
        answers.append(got)
    assert answers[1] is answers[2]  # one reply object per cached page: serve checks its depth once
    conn.pages[None][0] = _entry(0, "edited")
    changed = await reader._serve_page(TID, "items")
    assert changed is not answers[2] and msgspec.json.decode(bytes(changed))["records"][0]["text"] == "edited"
    # made straight from the page's text (a typed decode): how deep it nests is known
    assert type(changed) is BoundedText and changed.max_depth == 9
    public = await reader.read_page_json(TID, scope="items")  # the public form: a Raw, the same text
    assert type(public) is msgspec.Raw and bytes(public) == bytes(changed)
    assert cache.hits == 4 and cache.get((TID, "thread/items/list", None, None, None), b"x", None) is None

    class _Odd(_Conn):
        async def call(self, method: str, params: Any, timeout: float | None = None, raw: bool = False) -> Any:
            return msgspec.Raw(b' {"data": [], "source": "x", "records": 1, "nextCursor": null} ')

    odd = await _reader(nursery, _Odd({}), PageRecordsCache(), [PrivacyIndex("s")],
                        codex_home=tmp_path).read_page_json(TID, scope="items")
    assert odd == {"data": [], "source": "native", "records": [], "nextCursor": None}
