"""``Connection.send_request``: the two halves of ``call`` (R-WIRE-2, R-WIRE-4) for a caller that
works while the server answers (the message count reads one history page ahead, R-H-7). The
request is out before ``send_request`` returns; ``result()`` gives what ``call`` would; leaving the
block without it withdraws the request exactly as cancelling ``call`` does.

The transport is a real pair of pipes (the ``pipe_peer`` of ``test_connection_direct_write``)."""

from __future__ import annotations

import msgspec
import pytest
import trio
import trio.testing

from codexrt import LocalProtocolError, RpcError, RpcTimeout
from codexrt._connection import LateResponse, open_connection
from tests.trio.test_connection_direct_write import pipe_peer  # noqa: F401  (fixture)


async def test_r_wire_4_sent_before_return_and_answered_like_call(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with conn.send_request("thread/list", {"limit": 1}) as pending:
            (req,) = pipe_peer.written_lines()  # out already: nothing awaited yet
            assert req["method"] == "thread/list" and req["params"] == {"limit": 1}
            assert pending.phase.value == "writtenUnconfirmed"
            await pipe_peer.answer(req, {"data": [1]})
            assert await pending.result() == {"data": [1]}
            with pytest.raises(LocalProtocolError):  # one answer, taken once
                await pending.result()
        with conn.send_request("thread/list", {}, raw=True) as pending:
            (req,) = pipe_peer.written_lines()
            await pipe_peer.answer(req, {"data": [2]})
            res = await pending.result()
        assert isinstance(res, msgspec.Raw) and msgspec.json.decode(res) == {"data": [2]}


async def test_r_wire_4_an_error_answer_raises_as_call_does(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with conn.send_request("thread/list", {}) as pending:
            (req,) = pipe_peer.written_lines()
            await pipe_peer.resp.send_all(
                b'{"id":%d,"error":{"code":-32600,"message":"nope"}}\n' % req["id"])
            with pytest.raises(RpcError) as info:
                await pending.result()
        assert info.value.rpc_code == -32600 and info.value.method == "thread/list"


async def test_r_wire_4_leaving_unanswered_withdraws_and_a_late_answer_is_an_event(pipe_peer, autojump_clock):  # noqa: F811
    """A block left before the answer (here: an error in the caller's own work) abandons the
    request; the answer that still comes is a LateResponse event, never a result for anyone."""
    events: list = []
    async with open_connection(pipe_peer.transport, sink=events.append) as conn:
        await pipe_peer.handshake(conn)
        with pytest.raises(ValueError):
            with conn.send_request("thread/list", {}):
                (req,) = pipe_peer.written_lines()
                raise ValueError("the caller's own work failed")
        assert conn.statistics()["pendingCalls"] == 0
        await pipe_peer.answer(req, {"data": []})
        await trio.testing.wait_all_tasks_blocked()
        late = [e for e in events if isinstance(e, LateResponse)]
        assert [e.id for e in late] == [req["id"]]


async def test_r_wire_4_timeout_counts_from_sending(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with conn.send_request("thread/list", {}, timeout=5) as pending:
            await trio.sleep(4)  # the caller's own work
            with pytest.raises(RpcTimeout) as info:
                await pending.result()
        assert trio.current_time() == pytest.approx(5, abs=0.5)
        assert info.value.phase == "writtenUnconfirmed"
        with pytest.raises(RpcTimeout) as info:
            conn.send_request("thread/list", {}, timeout=0)
        assert info.value.phase == "notWritten"
        pipe_peer.written_lines()


async def test_r_wire_3_needs_a_finished_handshake_and_writes_nothing_before(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        with pytest.raises(LocalProtocolError, match="handshake"):
            conn.send_request("thread/list", {})
        with pytest.raises(LocalProtocolError, match="initialize"):
            conn.send_request("initialize", {})
        assert pipe_peer.written_lines() == []


async def test_r_wire_4_a_cancelled_caller_sends_nothing(pipe_peer, autojump_clock):  # noqa: F811
    """A caller already cancelled (as with ``call``): nothing is queued or written, and
    ``result()`` raises the cancellation."""
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with trio.CancelScope() as cs:
            cs.cancel()
            with conn.send_request("turn/start", {"threadId": "t"}) as pending:
                assert pending.phase.value == "notWritten"
                await pending.result()
        await trio.testing.wait_all_tasks_blocked()
        assert pipe_peer.written_lines() == []


async def test_r_wire_4_written_waits_for_the_writer_when_the_line_is_queued(autojump_clock):
    """On a transport that is not a pipe every line goes through the writer task: the request
    is queued when ``send_request`` returns, and ``written()`` returns once it is out (the
    history walk waits for that before it handles the page in hand, so its read-ahead is
    really ahead); on a pipe it returns at once (the test above)."""
    import json

    from codexrt._io._transport import StreamTransport

    client, server = trio.testing.memory_stream_pair()
    buf = b""

    async def lines() -> list[dict]:
        nonlocal buf
        while b"\n" not in buf:
            buf += await server.receive_some()
        *done, buf = buf.split(b"\n")
        return [json.loads(x) for x in done]

    async with open_connection(StreamTransport(client, client), sink=lambda ev: None) as conn:
        async with trio.open_nursery() as n:
            n.start_soon(conn.initialize)
            (init,) = await lines()
            await server.send_all(json.dumps({"id": init["id"], "result": {}}).encode() + b"\n")
            await lines()  # initialized
        with conn.send_request("thread/list", {}) as pending:
            assert pending.phase.value == "notWritten"  # queued for the writer
            await pending.written()
            assert pending.phase.value == "writtenUnconfirmed"
            (req,) = await lines()
            assert req["method"] == "thread/list"
            await server.send_all(json.dumps({"id": req["id"], "result": {"data": []}}).encode() + b"\n")
            assert await pending.result() == {"data": []}
