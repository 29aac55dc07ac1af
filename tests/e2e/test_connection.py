"""Split from ``tests/trio/test_connection.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from codexrt import ChildExited
from codexrt._connection import open_connection
from tests._support import fake_server_factory
from tests.trio.test_connection import Sink


async def test_r_wire_9_crash_before_ready_redacted_stderr_tail():
    transport = await fake_server_factory("crash-before-ready")()
    sink = Sink()
    async with open_connection(transport, sink=sink) as conn:
        with pytest.raises(ChildExited) as info:
            with trio.fail_after(20):
                await conn.initialize()
    err = info.value
    assert err.message == "codex app-server exited (code=3, signal=null)"
    assert err.details["startupFailure"]
    assert "peer_fixtures.fake_app_server" in err.details["command"]
    tail = "\n".join(err.details["stderrTail"])
    assert "fake startup failure" in tail
    assert "sk-test-SECRET123" not in tail and "abc.def" not in tail
    assert "[REDACTED]" in tail
    assert transport.process.returncode == 3  # reaped


async def test_stderr_flood_does_not_deadlock():
    """256 × 4 KiB on stderr while talking on stdout: the drain keeps the pipe empty."""
    transport = await fake_server_factory("stderr-flood")()
    async with open_connection(transport, sink=Sink(), stderr_tail_lines=10) as conn:
        with trio.fail_after(20):
            await conn.initialize()
            await conn.call("thread/start", {})
            await conn.call("model/list", {})
        assert len(conn.stderr_tail()) <= 10
    assert transport.process.returncode is not None


async def test_close_reaps_child_and_is_idempotent():
    transport = await fake_server_factory("handshake-ok")()
    async with open_connection(transport, sink=Sink()) as conn:
        with trio.fail_after(20):
            await conn.initialize()
        status1 = await conn.aclose()
        status2 = await conn.aclose()
    assert status1 == status2 and transport.process.returncode == 0  # stdin EOF → exit 0


async def test_cancelled_close_still_reaps():
    transport = await fake_server_factory("handshake-ok")()
    with trio.move_on_after(20):
        async with open_connection(transport, sink=Sink()) as conn:
            await conn.initialize()
            with trio.CancelScope() as cs:
                cs.cancel()
                await conn.aclose()
    assert transport.process.returncode is not None


async def test_cancelled_owner_scope_closes_without_waiting():
    """Cancelling the scope around an open connection settles and reaps promptly (no wait for
    a reader that was cancelled)."""
    transport = await fake_server_factory("hang-turn")()
    t0 = trio.current_time()
    with trio.move_on_after(20):
        with trio.CancelScope() as outer:
            async with open_connection(transport, sink=Sink()) as conn:
                await conn.initialize()
                outer.cancel()
                await trio.sleep_forever()
    assert trio.current_time() - t0 < 5
    assert transport.process.returncode is not None


async def test_a_connection_widens_its_childs_stdout_pipe() -> None:
    """Issue 34: the connection to a real child asks for a 128 KiB stdout pipe (Linux), which
    a flood is read from in bursts of ``STDOUT_BURST_BYTES``."""
    import fcntl
    import sys

    from codexrt import RuntimeConfig, open_runtime
    from codexrt._connection import Connection
    from codexrt._io._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv
    from tests._support import ROOT

    assert 65536 < Connection.STDOUT_BURST_BYTES < (1 << 17) <= Connection.STDOUT_PIPE_BYTES
    if sys.platform != "linux":
        pytest.skip("F_GETPIPE_SZ is Linux only")

    async def make() -> Any:
        return await spawn_process_transport(argv(), cwd=str(ROOT))

    async with open_runtime(RuntimeConfig(transports=[make])) as rt:
        op = rt.send("[[flood:10]]")
        await op.wait()
        stream = rt.conn.transport.receive_stream  # type: ignore[union-attr]
        assert fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032)) == Connection.STDOUT_PIPE_BYTES
