"""Split from ``tests/trio/test_history.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import codexrt
from codexrt._sansio._errors import ChildExited, CodexError, RpcError, WriterConflict
from codexrt._features._history import MessageCounter, ThreadIndex, ThreadSummary, is_offline_error
from tests.trio.test_history import T1, T2


def test_r_h_3_offline_error_classification():
    assert is_offline_error(ChildExited(1, None))
    assert is_offline_error(CodexError("codex app-server exited (code=1, signal=null): panic at main.rs:3"))
    assert is_offline_error(codexrt.CliUnavailable("no codex"))
    assert not is_offline_error(RpcError("401 Unauthorized", rpc_code=-32600))
    assert not is_offline_error(WriterConflict("another process holds the writer"))
    assert not is_offline_error(CodexError("the codex app-server exited"))  # prefix, not substring


def test_r_h_6_index_merge_keeps_newer_records_local_deletes_and_renames():
    idx = ThreadIndex()
    assert idx.merge([ThreadSummary(T1, name="a", updated_at=10), ThreadSummary(T2, updated_at=5)]) == [T1, T2]
    idx.set_count(T1, "10", 7)
    assert idx.get(T1).message_count == 7
    assert idx.merge([ThreadSummary(T1, name="old", updated_at=9)]) == []  # stale page never wins
    assert idx.get(T1).name == "a"
    idx.forget(T2)
    idx.rename(T1, "mine")
    assert idx.merge([ThreadSummary(T2, updated_at=6), ThreadSummary(T1, name="server", updated_at=11)]) == [T1]
    assert [t.thread_id for t in idx.threads()] == [T1]
    assert idx.get(T1).name == "mine"
    assert idx.get(T1).message_count is None  # a newer record never inherits the older count
    idx.set_count(T1, "11", None)
    assert idx.get(T1).message_count is None  # unknown is never stored as a number


def test_r_h_7_counter_defaults_match_the_contract():
    kw = MessageCounter.__init__.__kwdefaults__
    assert (kw["max_concurrent"], kw["budget"], kw["cache_size"], kw["cache_ttl"]) == (4, 110.0, 128, 60.0)
