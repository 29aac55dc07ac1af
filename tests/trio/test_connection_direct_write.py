"""The connection's direct write (R-WIRE-4, R-OP-2 at the RPC level): on an idle pipe a short
line is written by the task that made it, in one whole-or-nothing ``os.write``; a full pipe, a
busy writer or a line longer than ``PIPE_BUF`` leave it to the writer task — every line whole,
in order, exactly once, and a request counts as written only once its bytes are out.

The transport here is a real pair of pipes (trio ``FdStream``), the peer a task of the test that
reads and answers only when told to."""

from __future__ import annotations

import json
import os

import pytest
import trio
import trio.testing

from codexrt import RpcTimeout
from codexrt._connection import _PIPE_BUF, _Frame, open_connection
from codexrt._io._transport import StreamTransport

pytestmark = pytest.mark.skipif(not hasattr(trio.lowlevel, "FdStream"), reason="POSIX pipes")


class PipePeer:
    """The far ends of the two pipes: ``req`` (what the client wrote) and ``resp`` (what it reads)."""

    def __init__(self) -> None:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        self.req_fd = req_r
        os.set_blocking(req_r, False)
        self.resp = trio.lowlevel.FdStream(resp_w)
        self.transport = StreamTransport(trio.lowlevel.FdStream(req_w), trio.lowlevel.FdStream(resp_r))
        self._buf = b""

    def written_lines(self) -> list[dict]:
        """Every complete line the client has written so far (without blocking)."""
        while True:
            try:
                chunk = os.read(self.req_fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                break
            self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [json.loads(x) for x in lines]

    async def answer(self, msg: dict, result: object = None) -> None:
        await self.resp.send_all(json.dumps({"id": msg["id"], "result": result or {}}).encode() + b"\n")

    async def handshake(self, conn) -> None:
        async with trio.open_nursery() as n:
            n.start_soon(conn.initialize)
            await trio.testing.wait_all_tasks_blocked()
            (init,) = self.written_lines()
            await self.answer(init, {"userAgent": "pipe-peer"})
            while not self.written_lines():  # the "initialized" notification
                await trio.testing.wait_all_tasks_blocked()

    def close(self) -> None:
        os.close(self.req_fd)


@pytest.fixture
def pipe_peer():
    p = PipePeer()
    yield p
    p.close()


async def test_r_wire_4_an_idle_pipe_gets_the_request_before_the_caller_waits(pipe_peer, autojump_clock):
    """The line is in the pipe as soon as ``call`` has registered it (the writer task never
    wakes for it); it counts as written, so a caller that then gives up gets
    ``writtenUnconfirmed``, and ``on_written`` ran exactly once."""
    hooks = []
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        with pytest.raises(RpcTimeout) as info:
            with trio.fail_after(5):
                await conn.call("thread/list", {"k": 1}, timeout=0.2, on_written=lambda: hooks.append(1))
        assert info.value.phase == "writtenUnconfirmed" and hooks == [1]
        (line,) = pipe_peer.written_lines()
        assert line["method"] == "thread/list" and line["params"] == {"k": 1}

        async with trio.open_nursery() as n:
            got = []

            async def caller() -> None:
                got.append(await conn.call("model/list", {}))

            idle = conn._queue_nonempty  # the writer replaces it each time it wakes
            n.start_soon(caller)
            await trio.testing.wait_all_tasks_blocked()
            (req,) = pipe_peer.written_lines()
            assert conn._queue_nonempty is idle and not idle.is_set()
            await pipe_peer.answer(req, {"data": ["m"]})
        assert got == [{"data": ["m"]}]


async def test_r_wire_4_a_full_pipe_leaves_lines_to_the_writer_whole_and_in_order(pipe_peer):
    """With the pipe full, the direct write fails whole (EAGAIN) and the lines queue behind each
    other; once the peer drains, every line arrives exactly once, whole, in call order — also
    a line longer than PIPE_BUF, which never goes the direct way."""
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        send_fd = pipe_peer.transport.send_stream.fileno()
        filler = 0
        while True:  # fill the request pipe from the client's side
            try:
                filler += os.write(send_fd, b" " * 4096)
            except BlockingIOError:
                break
        big = "x" * (2 * _PIPE_BUF)
        methods = ["a/one", "b/two", "c/three"]
        async with trio.open_nursery() as n:
            for i, m in enumerate(methods):
                n.start_soon(lambda m=m, i=i: conn.call(m, {"i": i, "big": big if i == 1 else ""}, timeout=10))
                await trio.testing.wait_all_tasks_blocked()
            assert len(conn._queue) >= 2  # queued, not written: the pipe was full
            lines: list[dict] = []
            skipped = 0
            with trio.fail_after(10):
                while len(lines) < len(methods):
                    try:
                        chunk = os.read(pipe_peer.req_fd, 65536)
                    except BlockingIOError:
                        await trio.sleep(0)
                        continue
                    # the filler is spaces (JSON whitespace before the first line)
                    stripped = chunk.lstrip(b" ") if skipped < filler else chunk
                    skipped += len(chunk) - len(stripped)
                    pipe_peer._buf += stripped
                    lines += pipe_peer.written_lines()
            assert [x["method"] for x in lines] == methods and lines[1]["params"]["big"] == big
            for x in lines:
                await pipe_peer.answer(x)
        assert pipe_peer.written_lines() == []


async def test_r_wire_4_a_line_queued_for_the_writer_is_never_overtaken(pipe_peer):
    """A line too long for the direct way queues for the writer; a short request made right
    after it, before the writer ran, queues behind it instead of going first."""
    async with open_connection(pipe_peer.transport, sink=lambda ev: None) as conn:
        await pipe_peer.handshake(conn)
        big = conn.core.encode_notification("a/big", {"big": "y" * (2 * _PIPE_BUF)})

        async def both() -> None:
            conn._enqueue(_Frame(big))  # no await in between: the writer has not run yet
            await conn.call("b/small", {}, timeout=10)

        async with trio.open_nursery() as n:
            n.start_soon(both)
            lines: list[dict] = []
            with trio.fail_after(10):
                while len(lines) < 2:
                    await trio.testing.wait_all_tasks_blocked()
                    lines += pipe_peer.written_lines()
            assert [x["method"] for x in lines] == ["a/big", "b/small"]
            await pipe_peer.answer(lines[1])
