"""Tests of the scripted fake app-server itself (``peer_fixtures/``), not of codexrt.

Charter: codexrt's wire tests trust this fixture to speak the real server's dialect and to
misbehave exactly as each scenario promises.  So we check (1) the sans-IO interpreter by feeding
lines and reading actions, (2) every bundled scenario's promise through the Trio memory peer on
``autojump_clock`` (delays are asserted with ``trio.current_time()``), and (3) the stdio runner
as a real child process (handshake + turn, ``--log``, exit codes, a stderr flood read
concurrently, sleeps that do not stop reading).  Requirement ids name the behaviour a scenario
exists for.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
import trio
import trio.testing

from peer_fixtures.memory import MemoryPeer, open_memory_peer


INIT = {"clientInfo": {"name": "codexrt-test", "title": None, "version": "0"}, "capabilities": {"experimentalApi": True}}


# ---------------------------------------------------------------------------------------------
# sans-IO helpers


# ---------------------------------------------------------------------------------------------
# 1. the interpreter (sans-IO)


# ---------------------------------------------------------------------------------------------
# 2. the memory peer (Trio, autojump_clock)


class Client:
    """The client's side of a peer: JSON lines out, JSON lines in."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send_stream, self.receive_stream = send, receive
        self.buf = b""
        self.next_id = 1

    async def send(self, obj: Any) -> None:
        await self.send_stream.send_all(json.dumps(obj).encode() + b"\n")

    async def request(self, method: str, params: Any = None) -> int:
        rid = self.next_id
        self.next_id += 1
        await self.send({"id": rid, "method": method, "params": {} if params is None else params})
        return rid

    async def line(self) -> bytes | None:
        while b"\n" not in self.buf:
            chunk = await self.receive_stream.receive_some(65536)
            if not chunk:
                return None
            self.buf += chunk
        out, self.buf = self.buf.split(b"\n", 1)
        return out

    async def recv(self) -> dict[str, Any] | None:
        raw = await self.line()
        return None if raw is None else json.loads(raw)

    async def until(self, pred: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        got = []
        while True:
            msg = await self.recv()
            assert msg is not None, f"EOF before the expected message; got {got}"
            got.append(msg)
            if pred(msg):
                return got

    async def rest(self) -> list[dict[str, Any]]:
        got = []
        while (msg := await self.recv()) is not None:
            got.append(msg)
        return got

    async def handshake(self) -> None:
        rid = await self.request("initialize", INIT)
        assert (await self.until(lambda m: m.get("id") == rid))[-1]["result"]["userAgent"]
        await self.send({"method": "initialized"})

    async def thread(self) -> str:
        """thread/start, then read up to its response and its thread/started notification."""
        rid = await self.request("thread/start")
        tid = (await self.until(id_is(rid)))[-1]["result"]["thread"]["id"]
        await self.until(method_is("thread/started"))
        return tid


def method_is(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == name


def id_is(rid: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda m: "method" not in m and m.get("id") == rid


async def test_memory_handshake_turn_and_eof_exit_0(nursery: trio.Nursery) -> None:
    send, receive, _stderr, peer = open_memory_peer(nursery, "handshake-ok")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "hi"}]})
    got = await c.until(method_is("turn/completed"))
    assert got[-1]["params"]["turn"]["status"] == "completed"
    await send.aclose()
    await peer.finished.wait()
    assert peer.exit_code == 0 and await c.recv() is None
    assert peer.received_methods() == ["initialize", "initialized", "thread/start", "turn/start"]


async def test_memory_eof_writes_what_is_due_and_drops_the_delayed_rest(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "never-respond")
    c = Client(send, receive)
    await c.request("initialize", INIT)
    await c.request("model/list")  # due in 60 s: dropped at EOF, like the stdio runner
    await send.aclose()
    got = await c.rest()
    assert [m["id"] for m in got] == [1] and peer.exit_code == 0 and trio.current_time() < 1


async def test_r_wire_3_initialize_refusal_keeps_refusing(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "initialize-refusal")
    c = Client(send, receive)
    rid = await c.request("initialize", INIT)
    assert (await c.recv()) == {"error": {"code": -32600, "message": "Invalid request: initialize refused by the fake peer"}, "id": rid}
    rid = await c.request("thread/start")
    assert (await c.recv())["error"]["message"] == "Not initialized"


async def test_r_wire_3_silent_start_never_answers(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "silent-start")
    c = Client(send, receive)
    await c.request("initialize", INIT)
    with trio.move_on_after(3600) as scope:
        await c.recv()
    assert scope.cancelled_caught and peer.received_methods() == ["initialize"]


async def test_r_wire_4_never_respond_late_ack_while_other_requests_flow(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "never-respond")
    c = Client(send, receive)
    await c.handshake()
    t0 = trio.current_time()
    slow = await c.request("model/list")
    never = await c.request("thread/list")
    tid = await c.thread()  # answered at once although model/list is still pending
    assert tid and trio.current_time() == t0
    late = (await c.until(id_is(slow)))[-1]
    assert late["result"]["data"] and trio.current_time() - t0 == pytest.approx(60)
    with trio.move_on_after(3600):
        msg = await c.recv()
        pytest.fail(f"thread/list must never be answered, got {msg}")
    assert never


async def test_r_wire_4_late_response_after_40s(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "late-response")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    t0 = trio.current_time()
    rid = await c.request("turn/start", {"threadId": tid, "input": []})
    resp = (await c.until(id_is(rid)))[-1]
    assert trio.current_time() - t0 == pytest.approx(40) and resp["result"]["turn"]["status"] == "inProgress"


async def test_settings_gate_notification_2s_after_ack(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "settings-gate")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    t0 = trio.current_time()
    rid = await c.request("thread/settings/update", {"threadId": tid, "model": "mock-model-b"})
    assert (await c.recv()) == {"id": rid, "result": {}} and trio.current_time() == t0
    note = await c.recv()
    assert note["method"] == "thread/settings/updated" and note["params"]["threadSettings"]["model"] == "mock-model-b"
    assert trio.current_time() - t0 == pytest.approx(2)


async def test_early_notification_precedes_turn_start_response(nursery: trio.Nursery) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "early-notification")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    rid = await c.request("turn/start", {"threadId": tid, "input": []})
    got = await c.until(method_is("turn/completed"))
    order = [m.get("method") or f"response:{m['id']}" for m in got]
    assert order.index("turn/started") < order.index(f"response:{rid}")
    assert order.index("item/completed") < order.index(f"response:{rid}")
    assert {m["params"]["turn"]["id"] for m in got if m.get("method") in ("turn/started", "turn/completed")} == {
        got[order.index(f"response:{rid}")]["result"]["turn"]["id"]}


async def test_r_wire_2_numeric_id_collision(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "numeric-id-collision")
    c = Client(send, receive)
    await c.handshake()
    rid = await c.request("thread/start")
    server_req = await c.recv()
    assert server_req["id"] == rid and server_req["method"] == "item/unknownThing/request"
    resp = await c.recv()
    assert resp["id"] == rid and "result" in resp  # the client's own response follows
    await c.send({"id": rid, "error": {"code": -32601, "message": "unsupported server request: item/unknownThing/request"}})
    await c.until(id_is(await c.request("model/list")))
    assert peer.received[-2]["error"]["code"] == -32601 and not peer.interpreter.pending_server_requests


async def test_r_wire_2_string_id_reverse(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "string-id-reverse")
    c = Client(send, receive)
    await c.handshake()
    await c.thread()
    ids = [(await c.recv())["id"], (await c.recv())["id"]]
    assert ids == ["req-abc", "0"]
    for rid in ids:
        await c.send({"id": rid, "result": {}})
    await c.until(id_is(await c.request("model/list")))
    assert peer.interpreter.pending_server_requests == {}


async def test_r_wire_7_unknown_server_request_reply_is_echoed(nursery: trio.Nursery) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "unknown-server-request")
    c = Client(send, receive)
    await c.handshake()
    await c.thread()
    req = (await c.until(method_is("item/unknownThing/request")))[-1]
    assert req["id"] == 0 and "emittedAtMs" not in req
    reply = {"id": 0, "error": {"code": -32601, "message": "unsupported server request: item/unknownThing/request"}}
    await c.send(reply)
    note = await c.recv()
    assert note["method"] == "item/unknownThing/resolved" and note["params"] == {"requestId": 0, "reply": reply}


async def start_approval_turn(c: Client) -> tuple[str, list[dict[str, Any]]]:
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "run it"}]})
    return tid, await c.until(method_is("item/commandExecution/requestApproval"))


@pytest.mark.parametrize(("decision", "item_status", "turn_status"), [
    ("accept", "completed", "completed"), ("decline", "declined", "completed"), ("cancel", "declined", "interrupted")])
async def test_reverse_approval_decisions(nursery: trio.Nursery, decision: str, item_status: str, turn_status: str) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "reverse-approval")
    c = Client(send, receive)
    tid, got = await start_approval_turn(c)
    req = got[-1]
    assert req["id"] == 0
    assert {"kind", "threadId", "turnId", "itemId", "command", "cwd", "availableDecisions"} <= set(req["params"])
    assert req["params"]["threadId"] == tid
    await c.send({"id": 0, "result": {"decision": decision}})
    rest = await c.until(method_is("turn/completed"))
    assert rest[0] == {"method": "serverRequest/resolved", "params": {"threadId": tid, "requestId": 0}, "emittedAtMs": rest[0]["emittedAtMs"]}
    (cmd,) = [m for m in rest if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "commandExecution"]
    assert cmd["params"]["item"]["status"] == item_status
    assert rest[-1]["params"]["turn"]["status"] == turn_status


async def test_reverse_approval_interrupt_while_pending_resolves_it(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "reverse-approval")
    c = Client(send, receive)
    tid, got = await start_approval_turn(c)
    rid = await c.request("turn/interrupt", {"threadId": tid, "turnId": got[-1]["params"]["turnId"]})
    out = await c.until(method_is("serverRequest/resolved"))
    assert out[0] == {"id": rid, "result": {}}
    assert [m.get("method") for m in out[1:]] == ["thread/status/changed", "turn/completed", "serverRequest/resolved"]
    assert out[2]["params"]["turn"]["status"] == "interrupted" and not peer.interpreter.pending_server_requests


async def test_reverse_approval_with_traffic_keeps_talking(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "reverse-approval-with-traffic")
    c = Client(send, receive)
    await start_approval_turn(c)
    t0 = trio.current_time()
    rid = await c.request("model/list")
    assert (await c.recv())["id"] == rid  # answered while the approval waits
    got = await c.until(method_is("item/unknownThing/progress"))
    assert [m["method"] for m in got].count("warning") == 5 and trio.current_time() - t0 == pytest.approx(0.3)
    await c.send({"id": 0, "result": {"decision": "accept"}})
    assert (await c.until(method_is("turn/completed")))[-1]["params"]["turn"]["status"] == "completed"


async def test_r_wire_5_broken_framing_then_normal_traffic(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "broken-framing")
    c = Client(send, receive)
    rid = await c.request("initialize", INIT)
    raw = [await c.line() for _ in range(5)]
    assert raw[0] == b"{this is not json" and raw[1] == b"[1,2,3]" and raw[4] == b""
    assert json.loads(await c.line())["id"] == rid
    notes = [json.loads(await c.line()) for _ in range(3)]
    assert [n["method"] for n in notes] == ["configWarning", "remoteControl/status/changed", "warning"]
    assert notes[-1]["params"]["message"] == "café split"
    await c.send({"method": "initialized"})
    assert await c.thread()


async def test_r_wire_9_stderr_flood_lockstep_needs_concurrent_drain(nursery: trio.Nursery) -> None:
    send, receive, stderr, peer = open_memory_peer(nursery, "stderr-flood", lockstep=True)
    c = Client(send, receive)
    drained = 0

    async def drain() -> None:
        nonlocal drained
        while chunk := await stderr.receive_some(65536):
            drained += len(chunk)

    with trio.fail_after(30):
        async with trio.open_nursery() as inner:
            inner.start_soon(drain)
            await c.handshake()
            tid = await c.thread()
            await c.request("turn/start", {"threadId": tid, "input": []})
            await c.until(method_is("turn/completed"))
            await send.aclose()
    assert drained == (256 + 32) * 4096 and peer.exit_code == 0


async def test_r_wire_6_disconnect_mid_turn_exits_1_without_terminal(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, stderr, peer = open_memory_peer(nursery, "disconnect-mid-turn")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": []})
    rest = await c.rest()  # ends in EOF
    methods = [m.get("method") for m in rest]
    assert methods.count("item/agentMessage/delta") == 4 and "turn/completed" not in methods
    assert peer.exit_code == 1 and b"panicked" in await stderr.receive_some(65536)


async def test_r_wire_9_crash_before_ready_exits_3_with_secrets_on_stderr(nursery: trio.Nursery) -> None:
    send, receive, stderr, peer = open_memory_peer(nursery, "crash-before-ready")
    c = Client(send, receive)
    await c.request("initialize", INIT)
    assert await c.rest() == []
    err = b""
    while chunk := await stderr.receive_some(65536):
        err += chunk
    assert b"OPENAI_API_KEY=sk-test-SECRET123" in err and b"Authorization: Bearer abc.def" in err
    assert peer.exit_code == 3


async def test_duplicate_terminal_and_turn_start_error(nursery: trio.Nursery) -> None:
    send, receive, _e, _p = open_memory_peer(nursery, "duplicate-terminal")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": []})
    first = await c.until(method_is("turn/completed"))
    second = await c.recv()
    assert second["method"] == "turn/completed" and second["params"] == first[-1]["params"]

    send, receive, _e, peer = open_memory_peer(nursery, "turn-start-error")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    rid = await c.request("turn/start", {"threadId": tid, "input": []})
    got = await c.until(id_is(rid))
    assert got[-1]["error"]["code"] == -32600
    await send.aclose()
    assert not [m for m in await c.rest() if m.get("method", "").startswith(("turn/", "item/"))]


async def test_memory_peer_close_stdout_and_external_cancel(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, {"name": "c", "rules": [
        {"match": {"method": "bye"}, "actions": [{"respond": "ok"}, {"close_stdout": True}]}]})
    c = Client(send, receive)
    await c.request("bye")
    assert (await c.recv())["result"] == "ok" and await c.recv() is None
    await c.request("bye")  # still reading after stdout closed
    await trio.testing.wait_all_tasks_blocked()
    assert peer.received_methods() == ["bye", "bye"] and peer.exit_code is None

    with trio.CancelScope() as scope:
        mp = MemoryPeer("handshake-ok")
        a_send, a_recv = trio.testing.memory_stream_one_way_pair()
        b_send, _b_recv = trio.testing.memory_stream_one_way_pair()
        async with trio.open_nursery() as inner:
            inner.start_soon(mp.run, a_recv, b_send, None)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert mp.exit_code == -9 and mp.finished.is_set()


# ---------------------------------------------------------------------------------------------
# 3. the stdio runner (a real child process)
