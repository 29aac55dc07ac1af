"""The Trio connection against the scripted fake app-server (R-WIRE-1 … R-WIRE-10).

In-memory peers run on ``autojump_clock`` so every timeout is proven on virtual time; a few
tests spawn the stdio fake as a real child process (pipes, stderr flood, exit codes).
"""

from __future__ import annotations

import pytest
import trio

from codexrt import ChildExited, HandshakeError, LocalProtocolError, RpcError, RpcTimeout
from codexrt._connection import ConnectionClosed, open_connection
from codexrt._sansio._rpc import LateResponse, ProtocolViolation, UnsupportedServerRequest
from codexrt._sansio._wire import Notification, ServerRequest

SUPPORTED = {"item/commandExecution/requestApproval"}


class Sink:
    def __init__(self):
        self.events = []
        self.changed = trio.Event()

    def __call__(self, ev):
        self.events.append(ev)
        self.changed.set()
        self.changed = trio.Event()

    def of(self, cls):
        return [e for e in self.events if isinstance(e, cls)]

    async def wait_for(self, pred):
        while not any(pred(e) for e in self.events):
            await self.changed.wait()
        return next(e for e in self.events if pred(e))


async def _connect(peers, scenario, **kw):
    transport = await peers.factory(scenario)()
    sink = Sink()
    return transport, sink, open_connection(transport, sink=sink, supported_server_requests=SUPPORTED, **kw)


async def test_r_wire_3_handshake_ok(peers):
    transport, sink, cm = await _connect(peers, "handshake-ok")
    async with cm as conn:
        result = await conn.initialize()
        assert result["userAgent"].startswith("fake-app-server")
        assert conn.ready
        await trio.testing.wait_all_tasks_blocked()
    sent = peers.received(0)
    assert [m.get("method") for m in sent][:2] == ["initialize", "initialized"]
    init = sent[0]
    assert "jsonrpc" not in init
    assert init["params"]["capabilities"]["experimentalApi"] is True
    assert init["params"]["clientInfo"]["name"] == "codexrt"


async def test_r_wire_3_concurrent_callers_share_one_handshake(peers):
    transport, sink, cm = await _connect(peers, "handshake-ok")
    async with cm as conn:
        out = []

        async def one():
            out.append(await conn.initialize())

        async with trio.open_nursery() as n:
            for _ in range(5):
                n.start_soon(one)
        assert len(out) == 5 and all(o == out[0] for o in out)
        await conn.call("model/list", {})
    assert len(peers.received(0, "initialize")) == 1


async def test_r_wire_3_initialize_refusal_writes_no_business_rpc(peers):
    transport, sink, cm = await _connect(peers, "initialize-refusal")
    async with cm as conn:
        with pytest.raises(HandshakeError) as info:
            await conn.call("thread/start", {})
        assert "refused" in info.value.message
        with pytest.raises(HandshakeError):
            await conn.call("model/list", {})
        await trio.testing.wait_all_tasks_blocked()
    assert [m.get("method") for m in peers.received(0)] == ["initialize"]


async def test_r_wire_3_silent_start_times_out_on_virtual_clock(peers, autojump_clock):
    transport, sink, cm = await _connect(peers, "silent-start", handshake_timeout=30)
    async with cm as conn:
        t0 = trio.current_time()
        with pytest.raises(HandshakeError) as info:
            await conn.initialize()
        assert info.value.details["reason"] == "timeout"
        assert trio.current_time() - t0 == pytest.approx(30, abs=0.01)
        with pytest.raises(HandshakeError):
            await conn.call("thread/start", {})
    assert [m.get("method") for m in peers.received(0)] == ["initialize"]


async def test_r_wire_4_rpc_timeout_then_late_response_event(peers, autojump_clock):
    """Scenario never-respond: model/list answered after 60 s, beyond the 30 s budget."""
    transport, sink, cm = await _connect(peers, "never-respond")
    async with cm as conn:
        await conn.initialize()
        t0 = trio.current_time()
        with pytest.raises(RpcTimeout) as info:
            await conn.call("model/list", {})
        assert info.value.code == "RPC_TIMEOUT" and info.value.phase == "writtenUnconfirmed"
        assert trio.current_time() - t0 == pytest.approx(30, abs=0.01)
        late = await sink.wait_for(lambda e: isinstance(e, LateResponse))
        assert late.method == "model/list" and late.phase.value == "writtenUnconfirmed"
        assert trio.current_time() - t0 == pytest.approx(60, abs=0.5)
        # the connection still works
        assert "data" in await conn.call("skills/list", {})


async def test_r_wire_4_configurable_timeout(peers, autojump_clock):
    transport, sink, cm = await _connect(peers, "never-respond", rpc_timeout=5)
    async with cm as conn:
        t0 = trio.current_time()
        with pytest.raises(RpcTimeout):
            await conn.call("thread/list", {})
        assert trio.current_time() - t0 == pytest.approx(5, abs=0.01)
        with pytest.raises(RpcTimeout):
            await conn.call("thread/list", {}, timeout=1)


async def test_r_wire_1_early_notification_before_response(peers):
    transport, sink, cm = await _connect(peers, "early-notification")
    async with cm as conn:
        thread = (await conn.call("thread/start", {}))["thread"]
        result = await conn.call("turn/start", {"threadId": thread["id"], "input": []})
        # turn/started was already delivered when the response came back
        started = [e for e in sink.of(Notification) if e.method == "turn/started"]
        assert started and started[0].params["turn"]["id"] == result["turn"]["id"]


async def test_r_wire_2_numeric_id_collision(peers):
    """The server sends a request with the same numeric id as our pending thread/start; both
    directions are kept apart (unknown method → -32601 with that id; our call still answered)."""
    transport, sink, cm = await _connect(peers, "numeric-id-collision")
    async with cm as conn:
        result = await conn.call("thread/start", {})
        assert "thread" in result
        unsupported = sink.of(UnsupportedServerRequest)
        assert unsupported and isinstance(unsupported[0].id, int)
        await trio.testing.wait_all_tasks_blocked()
    replies = [m for m in peers.received(0) if "error" in m]
    assert replies and replies[0]["id"] == unsupported[0].id and replies[0]["error"]["code"] == -32601


async def test_r_wire_2_string_ids_echoed_exactly(peers):
    transport, sink, cm = await _connect(peers, "string-id-reverse")
    async with cm as conn:
        await conn.call("thread/start", {})
        await sink.wait_for(lambda e: isinstance(e, UnsupportedServerRequest) and e.id == "0")
        await trio.testing.wait_all_tasks_blocked()
    ids = [m["id"] for m in peers.received(0) if "error" in m]
    assert ids == ["req-abc", "0"]  # strings, never the number 0


async def test_r_wire_7_unknown_server_request_gets_32601(peers):
    transport, sink, cm = await _connect(peers, "unknown-server-request")
    async with cm as conn:
        await conn.initialize()
        thread = (await conn.call("thread/start", {}))["thread"]
        await conn.call("turn/start", {"threadId": thread["id"], "input": []})
        ev = await sink.wait_for(lambda e: isinstance(e, UnsupportedServerRequest))
        await trio.testing.wait_all_tasks_blocked()
    reply = [m for m in peers.received(0) if m.get("id") == ev.id and "error" in m]
    assert reply == [{"id": ev.id, "error": {"code": -32601, "message": f"unsupported server request: {ev.method}"}}]


async def test_r_wire_8_reverse_approval_reply_and_duplicate_refused(peers):
    transport, sink, cm = await _connect(peers, "reverse-approval")
    async with cm as conn:
        thread = (await conn.call("thread/start", {}))["thread"]
        await conn.call("turn/start", {"threadId": thread["id"], "input": []})
        req = await sink.wait_for(lambda e: isinstance(e, ServerRequest))
        await conn.reply(req.id, {"decision": "decline"})
        with pytest.raises(LocalProtocolError):
            await conn.reply(req.id, {"decision": "accept"})
        await sink.wait_for(lambda e: isinstance(e, Notification) and e.method == "turn/completed")
    replies = [m for m in peers.received(0) if m.get("id") == req.id and "result" in m]
    assert replies == [{"id": req.id, "result": {"decision": "decline"}}]


async def test_reader_keeps_reading_while_an_approval_waits(peers):
    """Scenario reverse-approval-with-traffic: nobody answers the approval, yet notifications
    keep arriving and other calls are answered."""
    transport, sink, cm = await _connect(peers, "reverse-approval-with-traffic")
    async with cm as conn:
        thread = (await conn.call("thread/start", {}))["thread"]
        await conn.call("turn/start", {"threadId": thread["id"], "input": []})
        req = await sink.wait_for(lambda e: isinstance(e, ServerRequest))
        with trio.fail_after(5):
            assert "data" in await conn.call("model/list", {})
            await sink.wait_for(lambda e: isinstance(e, Notification) and e.method == "warning")
        assert conn.core.inbound  # still pending: nothing answered it for us
        await conn.reply(req.id, {"decision": "decline"})


async def test_r_wire_5_broken_framing_reports_and_continues(peers):
    transport, sink, cm = await _connect(peers, "broken-framing")
    async with cm as conn:
        await conn.initialize()
        await conn.call("model/list", {})
        with trio.fail_after(5):
            await sink.wait_for(lambda e: isinstance(e, Notification) and e.method == "warning")
    violations = sink.of(ProtocolViolation)
    assert len(violations) >= 4
    methods = [e.method for e in sink.of(Notification)]
    # two frames in one write both arrived, and a UTF-8 character split across writes survived
    assert methods[:3] == ["configWarning", "remoteControl/status/changed", "warning"]
    assert sink.of(Notification)[2].params["message"] == "café split"


async def test_r_wire_6_disconnect_mid_turn_settles_once_and_later_calls_fail_fast(peers):
    transport, sink, cm = await _connect(peers, "disconnect-mid-turn")
    async with cm as conn:
        thread = (await conn.call("thread/start", {}))["thread"]
        await conn.call("turn/start", {"threadId": thread["id"], "input": []})
        await conn.closed.wait()
        closed = sink.of(ConnectionClosed)
        assert len(closed) == 1 and isinstance(closed[0].error, ChildExited)
        assert closed[0].error.returncode == 1
        assert closed[0].error.message == "codex app-server exited (code=1, signal=null)"
        assert any("panicked" in line for line in closed[0].error.details["stderrTail"])
        with pytest.raises(ChildExited) as info:
            await conn.call("model/list", {})
        assert info.value.returncode == 1 and info.value.phase == "notWritten"


async def test_r_wire_6_pending_call_fails_with_child_exited(peers):
    scenario = {"name": "die-on-list", "defaults": True,
                "rules": [{"match": {"method": "thread/list"}, "actions": [{"exit": 9}]}]}
    transport, sink, cm = await _connect(peers, scenario)
    async with cm as conn:
        with pytest.raises(ChildExited) as info:
            await conn.call("thread/list", {})
        assert info.value.returncode == 9 and info.value.phase == "writtenUnconfirmed"


async def test_server_error_maps_to_rpc_error(peers):
    transport, sink, cm = await _connect(peers, "handshake-ok")
    async with cm as conn:
        with pytest.raises(RpcError) as info:
            await conn.call("nonexistent/method", {})
        assert info.value.rpc_code == -32600 and "unknown variant" in info.value.message


async def test_stderr_gathered_during_a_pause_is_read_in_the_step_that_ends_it(mock_clock):
    """Issue 34: over a real pipe, the drain reads what its pause gathered in the step the
    pause ends (one task step), not by parking on the pipe first and waking again (two)."""
    import json
    import os

    from codexrt._connection import Connection
    from codexrt._io._transport import StreamTransport
    from tests._support import StepCounter

    to_peer, from_client = trio.testing.memory_stream_one_way_pair()
    to_client, from_peer = trio.testing.memory_stream_one_way_pair()
    r, w = os.pipe()
    transport = StreamTransport(to_peer, from_peer, trio.lowlevel.FdStream(r))
    counter = StepCounter("_stderr_drain")

    async def peer() -> None:
        rid = json.loads((await from_client.receive_some()).split(b"\n")[0])["id"]
        await to_client.send_all(b'{"id":%d,"result":{}}\n' % rid)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer)
            async with open_connection(transport, sink=Sink()) as conn:
                await conn.initialize()
                os.write(w, b"one\n")
                await trio.testing.wait_all_tasks_blocked()
                assert conn.stderr_tail() == ["one"]  # read at once; the drain pauses now
                os.write(w, b"two\nthree\n")
                await trio.testing.wait_all_tasks_blocked()
                assert conn.stderr_tail() == ["one"]  # still paused
                trio.lowlevel.add_instrument(counter)
                mock_clock.jump(Connection.STDERR_BATCH_SECONDS)
                await trio.testing.wait_all_tasks_blocked()
                trio.lowlevel.remove_instrument(counter)
                assert conn.stderr_tail() == ["one", "two", "three"]
                assert counter.steps == 1
                os.write(w, b"last\n")
                os.close(w)
                w = -1
                await to_client.aclose()  # EOF: the end of the connection ends the pause
                with trio.fail_after(1):
                    await conn.closed.wait()
                assert conn.stderr_tail()[-1] == "last"
    finally:
        if w >= 0:
            os.close(w)


# -- real child processes (the stdio fake) -------------------------------------------------


async def test_stderr_after_the_handshake_is_drained_in_batches(mock_clock):
    """Issue 34: once the handshake is done, a quiet spell's stderr lines are read together
    (one wake-up per ``STDERR_BATCH_SECONDS`` at most), none lost; before it, at once."""
    import json

    from codexrt._connection import Connection
    from codexrt._io._transport import StreamTransport

    to_peer, from_client = trio.testing.memory_stream_one_way_pair()
    to_client, from_peer = trio.testing.memory_stream_one_way_pair()
    err_in, err_out = trio.testing.memory_stream_one_way_pair()
    transport = StreamTransport(to_peer, from_peer, err_out)

    async def peer() -> None:
        rid = json.loads((await from_client.receive_some()).split(b"\n")[0])["id"]
        await to_client.send_all(b'{"id":%d,"result":{}}\n' % rid)

    async def line(text: bytes) -> None:
        await err_in.send_all(text + b"\n")
        await trio.testing.wait_all_tasks_blocked()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peer)
        async with open_connection(transport, sink=Sink()) as conn:
            await line(b"before 1")
            await line(b"before 2")
            assert conn.stderr_tail() == ["before 1", "before 2"]  # no pause before READY
            await conn.initialize()
            await trio.testing.wait_all_tasks_blocked()
            await line(b"one")
            await line(b"two")
            await line(b"three")
            assert conn.stderr_tail()[2:] == ["one"]  # read at once, then the drain pauses
            mock_clock.jump(Connection.STDERR_BATCH_SECONDS)
            await trio.testing.wait_all_tasks_blocked()
            assert conn.stderr_tail()[2:] == ["one", "two", "three"]  # the rest in one read
            await line(b"last")
            await to_client.aclose()  # EOF: the end of the connection ends the pause
            await err_in.aclose()
            with trio.fail_after(1):
                await conn.closed.wait()
            assert conn.stderr_tail()[-1] == "last"
