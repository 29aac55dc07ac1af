"""The privacy index kept by its store while the scope's files are unchanged (issue 34, R-PRIV-2).

``PrivacyStore.cached_index`` answers the last load's index only while the scope's files are
exactly the ones that load read — names, and each record file's device, inode, size, mtime and
ctime — so a ``codex.readHistoryPage`` needs no worker thread per page, and a record written
between two pages still masks the second one.
"""

from __future__ import annotations

import os
from typing import Any

import trio

import codexrt._io._privacy_store as privacy_store
from codexrt._features._history import HistoryReader
from codexrt._features._history_pages import PageRecordsCache
from codexrt._io._privacy_store import PrivacyStore
from codexrt._sansio._privacy import (MASK, legacy_file_name, marker_file_name, record_for_elicitation,
                                      record_for_user_input)
from tests.trio.test_history_pages import TID, _Conn, _entry, _provider

FP = "0123456789abcdef"


def _record(rid: str, thread: str = "th") -> Any:
    return record_for_user_input({"threadId": thread, "turnId": "tu", "itemId": rid,
                                  "questions": [{"id": "pw", "isSecret": True}]},
                                 record_id=rid, scope=FP, host=None, created_ms=1)


def test_the_last_load_is_reused_only_while_the_scope_files_are_unchanged_r_priv_2(tmp_path):
    store = PrivacyStore(str(tmp_path / "idx"), FP)
    assert store.cached_index() is None  # nothing loaded yet
    empty = store.load()  # no directory yet
    assert store.cached_index() is empty
    store.write(_record("r1"))
    assert store.cached_index() is None  # a new record file
    one = store.load()
    assert store.cached_index() is one and len(one.records) == 1
    other = PrivacyStore(str(tmp_path / "idx"), "fedcba9876543210")
    other.write(_record("x1"))  # another scope's file: not this scope's key
    assert store.cached_index() is one
    name = [n for n in os.listdir(store.directory) if n.startswith(FP)][0]
    path = os.path.join(store.directory, name)
    data = open(path, "rb").read()
    os.replace(path, path + ".old")
    with open(path, "wb") as fh:  # the same name, the same bytes, another file
        fh.write(data)
    assert store.cached_index() is None
    again = store.load()
    assert store.cached_index() is again
    os.unlink(path)
    assert store.cached_index() is None  # a record gone
    store.load()
    open(os.path.join(store.directory, marker_file_name(FP)), "wb").close()
    assert store.cached_index() is None  # the conservative marker appeared
    assert store.load().conservative and store.cached_index() is not None


def test_no_reuse_with_a_legacy_file_or_a_large_directory(tmp_path, monkeypatch):
    store = PrivacyStore(str(tmp_path / "idx"), FP)
    store.write(_record("r1"))
    store.load()
    assert store.cached_index() is not None
    monkeypatch.setattr(privacy_store, "MAX_INLINE_ENTRIES", 1)
    store.write(_record("r2"))
    store.load()
    assert store.cached_index() is None  # two entries: past the bound, no key (loaded in a thread)
    monkeypatch.undo()
    with open(os.path.join(store.directory, legacy_file_name(FP)), "wb") as fh:  # rewritten in place
        fh.write(b'{"records":[]}')
    store.load()
    assert store.cached_index() is None


def _mcp_entry() -> dict[str, Any]:
    item = {"type": "mcpToolCall", "id": "mcp_1", "server": "db", "tool": "connect", "status": "completed",
            "arguments": {"host": "db.local"}, "error": None,
            "result": {"content": [{"type": "text", "text": "connected as admin"}], "structuredContent": None}}
    return {"turnId": "turn-0", "item": item, "startedAtMs": 1, "completedAtMs": 2}


async def test_a_record_written_between_two_pages_masks_the_second_r_priv_2(nursery, tmp_path, monkeypatch):
    """R-PRIV-2 with both caches (serve's page records, the store's index): the same page read
    again after an elicitation of its turn was recorded is projected afresh and masked; a read
    with nothing changed on disk takes no worker thread."""
    threads = 0
    run_sync = trio.to_thread.run_sync

    async def counting(fn: Any, *a: Any, **kw: Any) -> Any:
        nonlocal threads
        threads += 1
        return await run_sync(fn, *a, **kw)

    monkeypatch.setattr(trio.to_thread, "run_sync", counting)
    store = PrivacyStore(str(tmp_path / "idx"), FP)
    conn = _Conn({None: [_entry(0), _mcp_entry()]})
    cache = PageRecordsCache()
    reader = HistoryReader(nursery, _provider(conn), privacy=store, page_cache=cache, codex_home=tmp_path)

    def text(page: dict[str, Any]) -> str:
        return [r for r in page["records"] if r["kind"] == "mcpToolCall"][0]["content"][0]["text"]

    first = await reader.read_page(TID, scope="items")
    assert text(first) == "connected as admin" and threads == 1
    assert await reader.read_page(TID, scope="items") == first
    assert threads == 1 and cache.hits == 1  # unchanged on disk: the index kept, no thread
    store.write(record_for_elicitation({"threadId": TID, "turnId": "turn-0"}, [("password", True)], record_id="e1",
                                       scope=FP, host=None, created_ms=1))
    second = await reader.read_page(TID, scope="items")
    assert text(second) == MASK and threads == 2 and cache.hits == 1  # loaded afresh, projected afresh
    assert await reader.read_page(TID, scope="items") == second and threads == 2
