"""R-WIRE-4: a request from a caller that is already cancelled, or has no time left, is never
written — the direct pipe write (a short request on an idle pipe goes out before ``call``
yields) must not send what the caller no longer wants. Found in review of the direct write."""

import pytest
import trio
import trio.testing

from codexrt import RpcTimeout
from codexrt._connection import open_connection
from tests.trio.test_connection_direct_write import pipe_peer  # noqa: F401  (fixture)


async def test_r_wire_4_cancelled_caller_writes_nothing(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        for _ in range(20):  # the old queued path raced its writer; this must hold every time
            with trio.CancelScope() as cs:
                cs.cancel()
                await conn.call("turn/start", {"threadId": "t"})
            await trio.testing.wait_all_tasks_blocked()
        assert pipe_peer.written_lines() == []


async def test_r_wire_4_zero_timeout_is_not_written(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with pytest.raises(RpcTimeout) as info:
            await conn.call("turn/start", {"threadId": "t"}, timeout=0)
        assert info.value.phase == "notWritten"
        await trio.testing.wait_all_tasks_blocked()
        assert pipe_peer.written_lines() == []


async def test_r_wire_4_past_deadline_is_not_written(pipe_peer, autojump_clock):  # noqa: F811
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with trio.move_on_at(trio.current_time() - 1):
            await conn.call("turn/start", {"threadId": "t"})
        await trio.testing.wait_all_tasks_blocked()
        assert pipe_peer.written_lines() == []
