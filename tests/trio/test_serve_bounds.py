"""``codexrt serve`` as a long-lived sidecar: bounded tables and buffers, the channel cap, the
EOF drain (issue 17; R-D-1, R-D-4, R-OP-4, R-RT-6).

In process (``serve_daemon`` over memory streams, memory peers from ``peer_fixtures``): the
assertions are counts — table sizes and live objects — never times.
"""

from __future__ import annotations

import gc
import json
from typing import Any, Callable

import trio
import trio.testing

from codexrt import RuntimeConfig
from codexrt._serve._daemon import DaemonConfig, serve_daemon
from tests._support import schema_problem
from codexrt._runtime._runtime import Runtime
from tests._support import MemoryPeers


class Wire:
    """``serve_daemon`` in process; every output line is checked against the shipped schema."""

    def __init__(self, config: DaemonConfig) -> None:
        self.to_send, self.to_recv = trio.testing.memory_stream_one_way_pair()
        self.from_send, self.from_recv = trio.testing.memory_stream_one_way_pair()
        self.buf = b""
        self.pending: list[dict[str, Any]] = []
        self.commands: dict[Any, str] = {}
        self.n = 0
        self.config = config
        self.lines_seen = 0

    async def start(self, nursery: trio.Nursery) -> "Wire":
        self.daemon = await nursery.start(serve_daemon, self.to_recv, self.from_send, self.config)
        return self

    async def send(self, command: str, params: dict[str, Any]) -> int:
        self.n += 1
        self.commands[self.n] = command
        await self.to_send.send_all(json.dumps({"id": self.n, "command": command, "params": params}).encode() + b"\n")
        return self.n

    async def _read(self) -> bool:
        chunk = await self.from_recv.receive_some()
        if not chunk:
            return False
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        for raw in done:
            obj = json.loads(raw)
            assert schema_problem(obj, "outputLine") is None, obj
            if obj.get("type") == "response" and obj.get("ok") and obj["id"] in self.commands:
                problem = schema_problem(obj["result"], f"commandResult/{self.commands[obj['id']]}")
                assert problem is None, problem
            self.lines_seen += 1
            self.pending.append(obj)
        return True

    async def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 20) -> dict[str, Any]:
        """The first not yet taken line matching ``pred``; lines before it that do not match are
        dropped (this host does not keep what it does not need — like a sidecar's host)."""
        with trio.fail_after(timeout):
            while True:
                for i, line in enumerate(self.pending):
                    if pred(line):
                        del self.pending[: i + 1]
                        return line
                self.pending.clear()
                if not await self._read():
                    raise AssertionError("stdout ended")

    async def response(self, rid: int, timeout: float = 20) -> dict[str, Any]:
        return await self.wait_for(lambda l: l.get("type") == "response" and l["id"] == rid, timeout)

    async def request(self, command: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.response(await self.send(command, params))

    async def read_to_end(self) -> list[dict[str, Any]]:
        """Every line until the daemon has returned (its output stream is then closed here)."""
        out = list(self.pending)
        self.pending.clear()
        with trio.fail_after(3600):  # virtual time in the autojump tests; a hang fails
            async with trio.open_nursery() as n:
                async def close_when_finished() -> None:
                    await self.daemon.finished.wait()
                    await self.from_send.aclose()

                n.start_soon(close_when_finished)
                while await self._read():
                    out.extend(self.pending)
                    self.pending.clear()
        return out


def live(type_name: str) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == type_name)


async def test_r_d_1_serve_tables_stay_bounded_over_many_sends(nursery: Any) -> None:
    """100 sends through ``serve`` (short soak, count-based): once replied, an operation leaves
    the daemon's tables; the runtime keeps only unsettled ops plus a bounded recent table whose
    streams hold nothing (serve forwards from the subscription); live event objects do not grow
    with the number of turns (issue 17: 200 sends used to keep 2,200 buffered events)."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("handshake-ok")]),
                                   idle_timeout=None)).start(nursery)
    counts: dict[int, int] = {}
    for i in range(100):
        peers.peers.clear()  # the harness's own record of the peers, not serve's
        reply = await wire.request("codex.send", {"channelId": "c", "message": f"turn {i}"})
        assert reply["ok"] and reply["result"]["status"] == "completed", reply
        if i in (20, 99):
            counts[i] = live("CodexEvent")
    ch = wire.daemon.channels["c"]
    rt: Runtime = ch.rt
    assert ch.ops == {} and ch.request_ids == {} and ch.done_forwarded == {} and ch.awaiting == {}
    assert rt._ops == {} and len(rt._recent_ops) <= Runtime.MAX_RECENT_OPS
    assert all(len(op.stream._buf) == 0 for op in rt._recent_ops.values())  # nothing buffered per op
    assert len(rt.threads) <= Runtime.MAX_THREADS
    assert counts[99] <= counts[20] + 20, counts  # no per-turn growth of buffered events
    assert wire.daemon._open.count == 0
    await wire.to_send.aclose()
    await wire.read_to_end()


async def test_r_d_1_too_many_channels_then_an_idle_channel_is_evicted(nursery: Any) -> None:
    """``max_channels``: past it a new channelId evicts the least recently used channel without
    a child and without work; when every channel holds a child, ``TOO_MANY_CHANNELS``."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("handshake-ok")]),
                                   idle_timeout=None, max_channels=2)).start(nursery)
    for cid in ("a", "b"):
        assert (await wire.request("codex.listModels", {"channelId": cid}))["ok"]
    refused = await wire.request("codex.listModels", {"channelId": "c"})
    assert refused["ok"] is False and refused["error"]["code"] == "TOO_MANY_CHANNELS"
    assert refused["error"]["details"] == {"maxChannels": 2, "channels": 2}
    sent = await wire.request("codex.send", {"channelId": "c", "message": "hi"})
    assert sent["ok"] is False and sent["error"]["code"] == "TOO_MANY_CHANNELS"
    status = (await wire.request("status", {}))["result"]
    assert status["maxChannels"] == 2 and [s["channelId"] for s in status["channels"]] == ["a", "b"]
    epoch_a = status["channels"][0]["sessionEpoch"]
    # retire a's child: a is now idle and childless, so c takes its slot
    reset = await wire.request("codex.resetRuntime", {"channelId": "a"})
    assert reset["result"]["runtime"]["state"] == "STOPPED"
    assert (await wire.request("codex.listModels", {"channelId": "c"}))["ok"]
    status = (await wire.request("status", {}))["result"]
    assert [s["channelId"] for s in status["channels"]] == ["b", "c"]
    # a comes back as a fresh channel only when a slot frees up again
    again = await wire.request("codex.listModels", {"channelId": "a"})
    assert again["ok"] is False and again["error"]["code"] == "TOO_MANY_CHANNELS"
    await wire.request("codex.resetRuntime", {"channelId": "b"})
    assert (await wire.request("codex.listModels", {"channelId": "a"}))["ok"]
    status = (await wire.request("status", {}))["result"]
    fresh = {s["channelId"]: s for s in status["channels"]}
    assert set(fresh) == {"a", "c"} and fresh["a"]["sessionEpoch"] != epoch_a  # a new runtime
    await wire.to_send.aclose()
    await wire.read_to_end()


async def test_r_d_1_eof_finishes_accepted_sends_then_exits(nursery: Any) -> None:
    """stdin EOF right after two sends (before either started): both run to ``completed``
    (default drain timeout), then the daemon drains and returns."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("handshake-ok")]),
                                   idle_timeout=None)).start(nursery)
    a = await wire.send("codex.send", {"channelId": "c", "message": "one"})
    b = await wire.send("codex.send", {"channelId": "c", "message": "two"})
    await wire.to_send.aclose()
    lines = await wire.read_to_end()
    replies = {l["id"]: l for l in lines if l["type"] == "response"}
    assert set(replies) == {a, b}
    assert [replies[r]["result"]["status"] for r in (a, b)] == ["completed", "completed"]
    with trio.fail_after(10):
        await wire.daemon.finished.wait()


async def test_r_op_5_eof_drain_timeout_aborts_what_is_left(nursery: Any, autojump_clock: Any) -> None:
    """A turn that never ends: EOF waits ``drain_timeout`` (virtual time), then stops it like a
    signal would — interrupted, the queued one cancelled, one reply each."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("hang-turn")]),
                                   idle_timeout=None, drain_timeout=30.0)).start(nursery)
    a = await wire.send("codex.send", {"channelId": "c", "message": "hang"})
    await wire.wait_for(lambda l: l.get("kind") == "turnStarted")
    b = await wire.send("codex.send", {"channelId": "c", "message": "queued"})
    await wire.wait_for(lambda l: l.get("kind") == "operationQueued" and l["payload"]["requestId"] == b)
    start = trio.current_time()
    await wire.to_send.aclose()
    lines = await wire.read_to_end()
    replies = [l for l in lines if l["type"] == "response"]
    assert sorted((r["id"], r["result"]["status"]) for r in replies) == [(a, "interrupted"), (b, "cancelled")]
    assert trio.current_time() - start >= 30.0  # it waited for the accepted work first
    assert peers.received(-1, "turn/interrupt")  # stopped by an interrupt, not a kill


async def test_r_op_5_abort_during_eof_drain_stops_at_once(nursery: Any, autojump_clock: Any) -> None:
    """``Daemon.abort()`` (what SIGINT/SIGTERM call) during an EOF drain ends the wait at once."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("hang-turn")]),
                                   idle_timeout=None, drain_timeout=3600.0)).start(nursery)
    a = await wire.send("codex.send", {"channelId": "c", "message": "hang"})
    await wire.wait_for(lambda l: l.get("kind") == "turnStarted")
    await wire.to_send.aclose()
    await trio.testing.wait_all_tasks_blocked()
    assert wire.daemon.draining and not wire.daemon.finished.is_set()
    start = trio.current_time()
    wire.daemon.abort()
    lines = await wire.read_to_end()
    assert [(l["id"], l["result"]["status"]) for l in lines if l["type"] == "response"] == [(a, "interrupted")]
    assert trio.current_time() - start < 3600.0


async def test_r_op_1_queue_full_is_refused_and_nothing_is_queued(nursery: Any, autojump_clock: Any) -> None:
    """The FIFO is bounded (``Runtime.MAX_QUEUED_OPS``): one more send is refused with
    ``QUEUE_FULL`` at once; what is queued is untouched; through serve the command gets that
    error as its one reply."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("hang-turn")]),
                                   idle_timeout=None, drain_timeout=0)).start(nursery)
    first = await wire.send("codex.send", {"channelId": "c", "message": "hang"})
    await wire.wait_for(lambda l: l.get("kind") == "turnStarted")
    rt: Runtime = wire.daemon.channels["c"].rt
    rt.MAX_QUEUED_OPS = 3  # instance override keeps the test small
    queued = [await wire.send("codex.send", {"channelId": "c", "message": f"q{i}"}) for i in range(3)]
    refused = await wire.response(await wire.send("codex.send", {"channelId": "c", "message": "one too many"}))
    assert refused["ok"] is False and refused["error"]["code"] == "QUEUE_FULL"
    assert refused["error"]["details"] == {"queued": 3, "maxQueued": 3}
    assert len(rt._queue) == 3
    await wire.to_send.aclose()
    lines = await wire.read_to_end()
    statuses = {l["id"]: l["result"]["status"] for l in lines if l["type"] == "response" and l["ok"]}
    assert statuses == {first: "interrupted", **{q: "cancelled" for q in queued}}
    assert len(peers.received(-1, "turn/start")) == 1


SLOW_INITIALIZE = {
    "name": "slow-initialize",
    "defaults": True,
    "rules": [{"match": {"method": "initialize"}, "actions": [{"sleep": 60}, {"default": True}]}],
}


async def test_r_rt_5_reset_runtime_during_starting_retires_that_child(nursery: Any, autojump_clock: Any) -> None:
    """``codex.resetRuntime`` while the child is still in its handshake (a send and a read
    waiting for it): the reply says STOPPED with no pid (it used to say READY and keep the
    child), the send ends ``cancelled`` without waiting for the stop budget, the read gets an
    error reply, and nothing but the handshake reached the peer."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory(SLOW_INITIALIZE)],
                                                         handshake_timeout=120.0, stop_budget=30.0),
                                   idle_timeout=None)).start(nursery)
    send = await wire.send("codex.send", {"channelId": "c", "message": "hello"})
    read = await wire.send("codex.listModels", {"channelId": "c"})
    await wire.wait_for(lambda l: l.get("kind") == "runtimeStateChanged" and l["payload"]["to"] == "INITIALIZING")
    start = trio.current_time()
    reset = await wire.send("codex.resetRuntime", {"channelId": "c"})
    lines = []
    with trio.fail_after(200):
        while {send, read, reset} - {l["id"] for l in lines if l.get("type") == "response"}:
            lines.append(await wire.wait_for(lambda l: l.get("type") == "response"))
    replies = {l["id"]: l for l in lines}
    assert trio.current_time() - start < 30.0  # not the stop budget, not the 60 s handshake
    result = replies[reset]["result"]
    assert result["runtime"]["state"] == "STOPPED" and result["runtime"]["pid"] is None
    assert [(s["stopPath"], s["status"]) for s in result["stoppedOperations"]] == [("cancelIntent", "cancelled")]
    assert replies[send]["result"]["status"] == "cancelled"
    assert replies[read]["ok"] is False
    assert peers.peers[0].finished.is_set()
    await trio.sleep(120)
    assert {m.get("method") for m in peers.received(0) if "method" in m} <= {"initialize"}
    await wire.to_send.aclose()
    await wire.read_to_end()


async def test_r_d_1_a_failed_childless_channel_is_evictable(nursery: Any) -> None:
    """A channel whose child failed to start (FAILED, no child) does not hold its slot."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.sequence("crash-before-ready",
                                                                                    "handshake-ok")]),
                                   idle_timeout=None, max_channels=1)).start(nursery)
    failed = await wire.request("codex.listModels", {"channelId": "a"})
    assert failed["ok"] is False
    status = (await wire.request("status", {}))["result"]["channels"]
    assert [(s["channelId"], s["state"], s["pid"]) for s in status] == [("a", "FAILED", None)]
    second = await wire.request("codex.listModels", {"channelId": "b"})
    assert second["ok"], second
    assert [s["channelId"] for s in (await wire.request("status", {}))["result"]["channels"]] == ["b"]
    await wire.to_send.aclose()
    await wire.read_to_end()


async def test_r_op_4_discard_events_ends_a_running_iteration(nursery: Any) -> None:
    """``op.discard_events()`` while a task iterates ``op.events()``: that iteration ends (it
    does not hang on a stream nobody feeds); ``wait()`` still gives the terminal; ``events()``
    afterwards is refused."""
    from codexrt import open_runtime
    from codexrt._sansio._errors import ClosedError

    peers = MemoryPeers(nursery)
    async with open_runtime(RuntimeConfig(transports=[peers.factory("hang-turn")])) as rt:
        op = rt.send("hang")
        seen: list[str] = []
        ended = trio.Event()

        async def read() -> None:
            async for ev in op.events():
                seen.append(ev.kind)
            ended.set()

        nursery.start_soon(read)
        with trio.fail_after(20):
            while "turnStarted" not in seen:
                await trio.testing.wait_all_tasks_blocked()
        op.discard_events()
        with trio.fail_after(20):
            await ended.wait()
        assert "operationDone" not in seen
        try:
            op.events()
        except ClosedError:
            pass
        else:
            raise AssertionError("events() after discard_events() must be refused")
        rt.abort(op)
        with trio.fail_after(20):
            assert (await op.wait()).status == "interrupted"


async def test_r_d_4_commands_past_the_open_limit_get_queue_full_control_still_passes(nursery: Any,
                                                                                     monkeypatch: Any) -> None:
    """A host that sends without reading its replies cannot make serve grow: past
    ``MAX_OPEN_COMMANDS`` accepted-but-unreplied commands a new one gets ``QUEUE_FULL`` from the
    reader (which then waits on stdout like the host). ``status`` and control commands still pass
    (R-OP-1). Here the limit is 0, so every other command is past it."""
    from codexrt._serve import _daemon

    monkeypatch.setattr(_daemon, "MAX_OPEN_COMMANDS", 0)
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("handshake-ok")]))).start(nursery)
    refused = await wire.request("codex.listThreads", {"channelId": "c"})
    assert refused["ok"] is False and refused["error"]["code"] == "QUEUE_FULL", refused
    assert refused["error"]["details"]["limit"] == 0
    assert (await wire.request("status", {}))["ok"] is True
    control = await wire.request("codex.abortTurn", {"channelId": "c", "clientOperationId": "nope"})
    assert control.get("error", {}).get("code") != "QUEUE_FULL", control
    assert not peers.peers  # nothing refused ever started a child
