"""Edit ledgers are bounded (issue 35): asking about many threads keeps at most
``MAX_LEDGERS`` ledgers and no lock for a thread whose ledger could not be built; a dropped
ledger is rebuilt from the history when asked again. A stub connection answers the two
read-only calls a ledger makes (``thread/read``, ``thread/turns/list``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from codexrt._features import _edits_live
from codexrt._features._edits_live import LiveEdits
from codexrt._sansio._errors import CodexError, RpcError


class _Conn:
    def __init__(self, cwd: Path, fail: bool = False) -> None:
        self.cwd, self.fail, self.reads = cwd, fail, 0
        self.closed = trio.Event()

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        if self.fail:
            raise RpcError("no such thread", rpc_code=-32600)
        if method == "thread/read":
            self.reads += 1
            tid = params["threadId"]
            return {"thread": {"id": tid, "sessionId": f"s-{tid}", "cwd": str(self.cwd), "modelProvider": "mock",
                               "ephemeral": False, "turns": [], "status": {"type": "notLoaded"}}, "readState": None}
        return {"data": [], "nextCursor": None, "backwardsCursor": None}


class _Rt:
    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        self.config = type("Cfg", (), {"cwd": str(conn.cwd)})()

    async def ensure_started(self) -> _Conn:
        return self.conn


async def test_issue_35_ledgers_for_many_threads_stay_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(_edits_live, "MAX_LEDGERS", 8)
    conn = _Conn(tmp_path)
    live = LiveEdits(_Rt(conn), state_dir=str(tmp_path / "state"))
    try:
        for i in range(100):
            await live.ledger(f"thread-{i}")
        assert len(live._threads) == 8 and len(live._locks) == 8
        assert live.threads() == sorted(f"thread-{i}" for i in range(92, 100))  # the most recent ones
        reads = conn.reads
        await live.ledger("thread-99")  # kept: no new read
        assert conn.reads == reads
        await live.ledger("thread-0")  # dropped earlier: rebuilt from the history
        assert conn.reads == reads + 1 and "thread-0" in live.threads() and len(live._threads) == 8
    finally:
        live.close()


async def test_issue_35_failed_ledgers_keep_no_lock(tmp_path: Path) -> None:
    live = LiveEdits(_Rt(_Conn(tmp_path, fail=True)), state_dir=str(tmp_path / "state"))
    try:
        for i in range(50):
            try:
                await live.ledger(f"thread-{i}")
            except CodexError:  # the read failed (HistoryReadFailed / ThreadNotFound)
                pass
        assert live._threads == {} and live._locks == {}
    finally:
        live.close()
