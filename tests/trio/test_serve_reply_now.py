"""serve's reply behind ``operationDone`` (issue 34, R-D-2) with everything real but the
app-server: serve in process, its stdout a real pipe (so the direct writes and
``DaemonCore._reply_now`` run), memory peers. Whoever writes a reply — the task that wrote the
``operationDone`` line, or the command's waiter — every command gets exactly one, after its
``operationDone``, with ``operationQueued`` first; the waiters' tables end empty. Also under
pipelined sends with a ``resetRuntime`` among them, aborted queued operations, a stdout stuck
past ``DONE_EVENT_GRACE`` (the waiter replies; the late event brings no second reply) and an
EOF drain while operations are parked."""
from __future__ import annotations

import collections
import json
import os
from typing import Any

import pytest
import trio
import trio.testing

from codexrt import RuntimeConfig
from codexrt._serve._core import DaemonCore
from codexrt._serve._daemon import DaemonConfig, serve_daemon
from tests._support import MemoryPeers


@pytest.fixture(autouse=True)
def _state(monkeypatch: Any, tmp_path: Any) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))

@pytest.fixture
def reply_now_count(monkeypatch: Any) -> Any:
    counts = collections.Counter()
    orig = DaemonCore._reply_now
    def wrapped(self: Any, ch: Any, answer: Any, result: Any) -> None:
        before = answer.done
        orig(self, ch, answer, result)
        counts["called"] += 1
        if answer.done and not before:
            counts["wrote"] += 1
    monkeypatch.setattr(DaemonCore, "_reply_now", wrapped)
    return counts


class PipeWire:
    def __init__(self) -> None:
        self.to_send, self.to_recv = trio.testing.memory_stream_one_way_pair()
        r, w = os.pipe()
        self.r = trio.lowlevel.FdStream(r)
        self.w = trio.lowlevel.FdStream(w)
        self.lines: list[dict[str, Any]] = []
        self.buf = b""
        self.reading = trio.Event(); self.reading.set()

    async def reader(self) -> None:
        while True:
            await self.reading.wait()
            try:
                chunk = await self.r.receive_some(65536)
            except trio.ClosedResourceError:
                return
            if not chunk:
                return
            self.buf += chunk
            *done, self.buf = self.buf.split(b"\n")
            self.lines.extend(json.loads(x) for x in done)

    async def send_lines(self, cmds: list[tuple[Any, str, dict]]) -> None:
        data = b"".join(json.dumps({"id": i, "command": c, "params": p}).encode() + b"\n" for i, c, p in cmds)
        await self.to_send.send_all(data)

    async def wait_replies(self, ids) -> None:
        ids = set(ids)
        with trio.fail_after(60):
            while not ids <= {l.get("id") for l in self.lines if l.get("type") == "response"}:
                await trio.sleep(0.01)


def check(lines: list[dict[str, Any]], ids) -> None:
    replies = collections.Counter(l["id"] for l in lines if l.get("type") == "response")
    for i in ids:
        assert replies[i] == 1, (i, replies[i])
    for idx, l in enumerate(lines):
        if l.get("type") == "response" and l.get("ok") and isinstance(l.get("result"), dict) and "clientOperationId" in l["result"] and "kind" in l["result"]:
            op = l["result"]["clientOperationId"]
            kinds = [e["kind"] for e in lines[:idx] if e.get("type") == "daemon" and e.get("clientOperationId") == op]
            assert kinds and kinds[0] == "operationQueued" and kinds[-1] == "operationDone" and kinds.count("operationDone") == 1, (l["id"], kinds)
            assert not any(e.get("type") == "daemon" and e.get("clientOperationId") == op for e in lines[idx+1:] if e.get("kind") != "planExecutionDone"), l["id"]
    # event order per op: operationQueued first
    per: dict[str, list[str]] = collections.defaultdict(list)
    for l in lines:
        if l.get("type") == "daemon" and l.get("clientOperationId"):
            per[l["clientOperationId"]].append(l["kind"])
    for op, kinds in per.items():
        assert kinds[0] == "operationQueued", (op, kinds)
        assert kinds.count("operationDone") <= 1


async def _start(nursery, peers, **kw):
    wire = PipeWire()
    cfg = DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("handshake-ok")]), idle_timeout=None, **kw)
    wire.daemon = await nursery.start(serve_daemon, wire.to_recv, wire.w, cfg)
    nursery.start_soon(wire.reader)
    return wire


async def _warm(nursery: Any, **kw: Any) -> Any:
    """A serve whose channel ``c`` has run one send (id 0)."""
    wire = await _start(nursery, MemoryPeers(nursery), **kw)
    await wire.send_lines([(0, "codex.send", {"channelId": "c", "message": "warm"})])
    await wire.wait_replies([0])
    return wire


async def test_issue_34_sequential_sends_are_replied_behind_their_operation_done(nursery, reply_now_count) -> None:
    peers = MemoryPeers(nursery)
    wire = await _start(nursery, peers)
    for i in range(1, 41):
        await wire.send_lines([(i, "codex.send", {"channelId": "c", "message": f"t{i}"})])
        await wire.wait_replies([i])
    ch = wire.daemon.channels["c"]
    await trio.testing.wait_all_tasks_blocked()
    check(wire.lines, range(1, 41))
    assert ch.awaiting == {} and ch.ops == {} and wire.daemon._open.count == 0
    assert reply_now_count["wrote"] > 0
    await wire.to_send.aclose()


async def test_issue_34_pipelined_sends_and_a_reset_get_one_reply_each(nursery, reply_now_count) -> None:
    wire = await _warm(nursery)
    cmds = [(i, "codex.send", {"channelId": "c", "message": f"t{i}"}) for i in range(1, 21)]
    cmds.append((100, "codex.resetRuntime", {"channelId": "c"}))
    cmds += [(i, "codex.send", {"channelId": "c", "message": f"t{i}"}) for i in range(21, 31)]
    cmds.append((101, "status", {}))
    await wire.send_lines(cmds)
    ids = [c[0] for c in cmds]
    await wire.wait_replies(ids)
    await trio.testing.wait_all_tasks_blocked()
    check(wire.lines, ids + [0])
    ch = wire.daemon.channels["c"]
    assert ch.awaiting == {} and ch.ops == {} and wire.daemon._open.count == 0
    await wire.to_send.aclose()


async def test_issue_34_aborted_queued_operations_get_one_reply_each(nursery, reply_now_count) -> None:
    wire = await _warm(nursery)
    await wire.send_lines([(i, "codex.send", {"channelId": "c", "message": f"t{i}"}) for i in range(1, 6)])
    with trio.fail_after(10):
        while True:
            ops = [l["clientOperationId"] for l in wire.lines if l.get("kind") == "operationQueued"]
            if len(ops) >= 6:
                break
            await trio.sleep(0.001)
    aborts = [(200 + k, "codex.abortTurn", {"channelId": "c", "clientOperationId": op}) for k, op in enumerate(ops[1:])]
    await wire.send_lines(aborts)
    ids = list(range(0, 6)) + [a[0] for a in aborts]
    await wire.wait_replies(ids)
    await trio.testing.wait_all_tasks_blocked()
    check(wire.lines, ids)
    ch = wire.daemon.channels["c"]
    assert ch.awaiting == {} and ch.ops == {}
    await wire.to_send.aclose()


async def test_issue_34_a_stdout_stuck_past_the_grace_brings_no_second_reply(nursery, reply_now_count, autojump_clock) -> None:
    """The waiter gives up waiting for operationDone (DONE_EVENT_GRACE) and replies; the
    forwarder writes operationDone after: no second reply."""
    wire = await _warm(nursery)
    core = wire.daemon
    released = trio.Event()
    got_lock = trio.Event()

    async def hog() -> None:
        async with core._out._lock:   # stdout stuck
            got_lock.set()
            await released.wait()

    nursery.start_soon(hog)
    await got_lock.wait()
    await wire.send_lines([(1, "codex.send", {"channelId": "c", "message": "t1"})])
    ch = core.channels["c"]
    with trio.fail_after(30):
        while not any(op.terminal for op in ch.ops.values()):
            await trio.sleep(0.1)
    await trio.sleep(7)  # past DONE_EVENT_GRACE: the waiter replies (waiting for the lock)
    assert ch.awaiting == {}
    released.set()
    await wire.wait_replies([1])
    await trio.sleep(1)
    check_lines = wire.lines
    replies = [l for l in check_lines if l.get("type") == "response"]
    assert collections.Counter(l["id"] for l in replies) == {0: 1, 1: 1}
    await wire.to_send.aclose()


async def test_issue_34_an_eof_drain_while_operations_are_parked_replies_once_each(nursery, reply_now_count) -> None:
    wire = await _warm(nursery, drain_timeout=0)
    await wire.send_lines([(i, "codex.send", {"channelId": c, "message": f"t{i}"}) for i in range(1, 16) for c in ("c",)]
                          + [(i, "codex.send", {"channelId": "d", "message": f"t{i}"}) for i in range(16, 24)])
    await trio.sleep(0)
    await wire.to_send.aclose()
    with trio.fail_after(60):
        await wire.daemon.finished.wait()
    await trio.sleep(0.2)
    check(wire.lines, range(0, 24))
