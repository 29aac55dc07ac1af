"""LineWriter (serve's and acp's stdout) over a real pipe: whole lines in FIFO order, one
scheduler pass per line when nobody else writes (issue 34: the free lock is taken without a
pass, ``send_all`` has one), a full pipe waits instead of cutting a line, a cancelled caller
writes nothing, a gone reader is reported once. No timing: task steps are counted with a Trio
instrument."""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

import pytest
import trio
import trio.testing

from tests._support import StepCounter
from codexrt._io._lines import LineWriter


def _encode(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def _pipe() -> tuple[int, trio.lowlevel.FdStream]:
    r, w = os.pipe()
    return r, trio.lowlevel.FdStream(w)


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk



async def test_a_line_costs_one_scheduler_pass_when_nobody_else_writes() -> None:
    r, send = _pipe()
    writer = LineWriter(send, _encode, lambda: None)
    counter = StepCounter("write_lines")
    trio.lowlevel.add_instrument(counter)

    async def write_lines() -> None:
        for i in range(20):
            await writer.write({"n": i})

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_lines)
    finally:
        trio.lowlevel.remove_instrument(counter)
        await send.aclose()
    lines = _read_all(r).splitlines()
    os.close(r)
    assert [json.loads(x) for x in lines] == [{"n": i} for i in range(20)]
    assert writer.lines_written == 20
    assert counter.steps <= 21  # its first step, then one per line (lock.acquire and send_all took two)


async def test_concurrent_writers_and_a_full_pipe_never_cut_or_mix_lines() -> None:
    """Four writers, lines small and large, a pipe that fills up: every line arrives whole,
    each writer's in its own order."""
    r, send = _pipe()
    writer = LineWriter(send, _encode, lambda: None)
    got = bytearray()

    async def drain() -> None:
        os.set_blocking(r, False)
        while True:
            await trio.lowlevel.wait_readable(r)
            chunk = os.read(r, 4096)
            if not chunk:
                return
            got.extend(chunk)

    async def write_lines(k: int) -> None:
        for i in range(200):
            await writer.write({"w": k, "i": i, "pad": "x" * (10 if i % 3 else 3000)})

    async with trio.open_nursery() as outer:
        outer.start_soon(drain)
        async with trio.open_nursery() as nursery:
            for k in range(4):
                nursery.start_soon(write_lines, k)
        await send.aclose()
    os.close(r)
    msgs = [json.loads(x) for x in bytes(got).splitlines()]
    assert len(msgs) == 800
    for k in range(4):
        assert [m["i"] for m in msgs if m["w"] == k] == list(range(200))


@pytest.mark.parametrize("parked", [False, True])
async def test_a_cancelled_caller_writes_nothing(parked: bool) -> None:
    """Also with ``parked=True``: the direct write checks the caller's deadline."""
    r, send = _pipe()
    writer = LineWriter(send, _encode, lambda: None)
    with trio.CancelScope() as scope:
        scope.cancel()
        await writer.write({"never": True}, parked=parked)
    await writer.write({"after": True}, parked=parked)
    await send.aclose()
    assert _read_all(r) == b'{"after": true}\n'
    os.close(r)
    assert scope.cancelled_caught


async def test_a_caller_cancelled_mid_line_finishes_the_line_within_its_bound() -> None:
    """serve stopping (SIGTERM) cancels a writer whose line is half out on a full pipe: the rest
    is still written — the host never reads a cut line — and ``write`` returns, the caller
    meeting the cancellation at its next schedule point; a host
    that takes no more within ``FINISH_BOUND`` leaves the stream broken (reported once), since
    nothing could follow a cut line."""
    for drained in (True, False):
        r, send = _pipe()
        broken: list[int] = []
        writer = LineWriter(send, _encode, lambda: broken.append(1))
        writer.FINISH_BOUND = 0.5
        big = {"pad": "z" * 300_000}  # several times a pipe's buffer
        got = bytearray()
        returned: list[bool] = []
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def write_big() -> None:
                with scope:
                    await writer.write(big)  # returns: the line is out (or the stream broken)
                    returned.append(True)
                    await trio.lowlevel.checkpoint()  # where the cancellation is met

            nursery.start_soon(write_big)
            await trio.testing.wait_all_tasks_blocked()  # part of the line is out; the pipe is full
            scope.cancel()
            if drained:
                os.set_blocking(r, False)
                with trio.move_on_after(10):  # a cut line would never complete
                    while len(got) < len(_encode(big)):
                        await trio.lowlevel.wait_readable(r)
                        got.extend(os.read(r, 1 << 16))
        assert scope.cancelled_caught and returned == [True]
        if drained:
            assert bytes(got) == _encode(big) and not writer.broken and broken == []
            await writer.write({"after": True})
            assert _read_all(r) == b'{"after": true}\n'
        else:
            assert writer.broken and broken == [1]
            await writer.write({"after": True})  # dropped: it would follow a cut line
            assert b"after" not in _read_all(r)
        await send.aclose()
        os.close(r)


@pytest.mark.parametrize("parked", [False, True])
async def test_a_gone_reader_is_reported_once_and_later_lines_are_dropped(parked: bool) -> None:
    """Also with ``parked=True``: the direct write's EPIPE leaves the line to ``send_all``,
    which reports it."""
    r, send = _pipe()
    os.close(r)
    broken: list[int] = []
    writer = LineWriter(send, _encode, lambda: broken.append(1))
    await writer.write({"a": 1}, parked=parked)
    await writer.write({"b": 2}, parked=parked)
    await send.aclose()
    assert writer.broken and broken == [1] and writer.lines_written == 0


async def test_a_parked_caller_writes_a_short_line_without_another_pass() -> None:
    """``write(parked=True)`` (serve's forwarder after it waited for the event, issue 34): a
    line of at most PIPE_BUF bytes goes out in the same step; a longer one, or one that meets
    a held lock, still goes through ``send_all`` — whole, in order."""
    r, send = _pipe()
    writer = LineWriter(send, _encode, lambda: None)
    counter = StepCounter("write_lines")
    trio.lowlevel.add_instrument(counter)
    wake = trio.Event()

    async def write_lines() -> None:
        nonlocal wake
        for i in range(20):
            await wake.wait()  # the caller's own schedule point
            wake = trio.Event()
            await writer.write({"n": i}, parked=True)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_lines)
            for _ in range(20):
                await trio.testing.wait_all_tasks_blocked()
                wake.set()
            await trio.testing.wait_all_tasks_blocked()
    finally:
        trio.lowlevel.remove_instrument(counter)
    await writer.write({"pad": "x" * 10_000}, parked=True)  # > PIPE_BUF: send_all
    await send.aclose()
    lines = _read_all(r).splitlines()
    os.close(r)
    assert [json.loads(x) for x in lines] == [{"n": i} for i in range(20)] + [{"pad": "x" * 10_000}]
    assert writer.lines_written == 21
    # its first step, then one per line: each wake-up writes at once (send_all's pass made it 41)
    assert counter.steps <= 21



@pytest.mark.skipif(sys.platform != "linux", reason="Unix stream sockets are written like pipes on Linux only")
async def test_issue_34_a_unix_socket_stdout_is_written_like_a_pipe(tmp_path: Any) -> None:
    """Node's ``child_process`` (VS Code and most extension hosts) gives a child socket pairs
    as stdio: on Linux a Unix stream socket takes a line of at most PIPE_BUF bytes whole or
    not at all, so serve and acp write to it directly as to a pipe. A socket whose send buffer
    could split such a line, another kind of socket, a file or an in-memory stream is not."""
    def whole(stream: Any) -> bool:
        return LineWriter(stream, _encode, lambda: None).ready_now

    r, w = os.pipe()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    small, small_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    small.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # Linux doubles it: still < 2 × (4096 + 64)
    packets, packets_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    f = open(tmp_path / "out", "wb")
    try:
        assert whole(trio.lowlevel.FdStream(os.dup(w)))
        assert whole(trio.lowlevel.FdStream(os.dup(a.fileno())))
        assert not whole(trio.lowlevel.FdStream(os.dup(small.fileno())))
        assert not whole(trio.lowlevel.FdStream(os.dup(packets.fileno())))
        assert not whole(trio.lowlevel.FdStream(os.dup(f.fileno())))
        assert not whole(trio.testing.memory_stream_one_way_pair()[0])
    finally:
        for s in (a, b, small, small_peer, packets, packets_peer, f):
            s.close()
        os.close(r)
        os.close(w)


@pytest.mark.skipif(sys.platform != "linux", reason="Unix stream sockets are written like pipes on Linux only")
async def test_issue_34_write_now_to_a_full_unix_socket_declines_and_never_cuts_a_line() -> None:
    """``write_now`` over a Unix socket until the socket is full: every line it says it wrote
    arrives whole, the one it declined arrives not at all, and ``write`` then finishes in order."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    send = trio.lowlevel.FdStream(os.dup(a.fileno()))
    a.close()
    writer = LineWriter(send, _encode, lambda: None)
    n = 0
    while writer.write_now({"n": n, "pad": "y" * (n * 37 % 3000)}):
        n += 1
    assert n > 10
    got = bytearray()

    async def drain() -> None:
        b.setblocking(False)
        while True:
            await trio.lowlevel.wait_readable(b)
            chunk = b.recv(4096)
            if not chunk:
                return
            got.extend(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        await writer.write({"last": True})
        await send.aclose()
    b.close()
    msgs = [json.loads(x) for x in bytes(got).splitlines()]
    assert msgs == [{"n": i, "pad": "y" * (i * 37 % 3000)} for i in range(n)] + [{"last": True}]


async def test_a_stuck_stdout_is_given_up_but_a_slow_one_is_not() -> None:
    """``give_up_when_stuck`` (serve's shutdown): a host that reads slowly keeps its lines
    coming, whatever the backlog; one that stopped reading but keeps the pipe open is given up
    after the grace — the writer broken (reported once), the blocked write ended, the stream
    closed — so a shutdown never waits on it forever."""
    for reading in (True, False):
        r, send = _pipe()
        broken: list[int] = []
        writer = LineWriter(send, _encode, lambda: broken.append(1))
        lines = [{"n": i, "pad": "p" * 20_000} for i in range(40)]  # 800 KB: many pipes full
        got = bytearray()
        gave_up = False
        all_read = trio.Event()

        async def slow_reader() -> None:
            os.set_blocking(r, False)
            while len(got) < sum(len(_encode(x)) for x in lines):
                await trio.sleep(0.05)  # well inside the grace between reads
                try:
                    got.extend(os.read(r, 1 << 16))
                except BlockingIOError:
                    pass
            all_read.set()

        async def watch() -> None:
            nonlocal gave_up
            await writer.give_up_when_stuck(0.5)
            gave_up = True

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                if reading:
                    nursery.start_soon(slow_reader)
                for line in lines:
                    await writer.write(line)
                if reading:
                    await all_read.wait()
                    assert not gave_up
                    nursery.cancel_scope.cancel()
        if reading:
            assert [json.loads(x) for x in bytes(got).splitlines()] == lines and broken == []
            await send.aclose()
        else:
            assert gave_up and writer.broken and broken == [1]
            assert writer.lines_written < len(lines)
        os.close(r)


async def test_a_stuck_stream_other_than_a_pipe_is_given_up_by_whole_lines() -> None:
    """A stream that is not an ``FdStream`` (an in-process service on a trio ``SocketStream``
    or a memory stream): its progress shows per whole line, and given up its blocked
    ``send_all`` is cancelled, so the writers waiting behind it end too (helper-41's review: an
    in-process ``codexrt acp`` whose client stopped reading never returned)."""
    send, _receive = trio.testing.lockstep_stream_one_way_pair()  # send_all waits for a reader
    broken: list[int] = []
    writer = LineWriter(send, _encode, lambda: broken.append(1))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.give_up_when_stuck, 0.3)
            for n in range(3):  # each waits for the one before; nobody reads
                nursery.start_soon(writer.write, {"n": n})
    assert writer.broken and broken == [1] and writer.lines_written == 0


async def test_a_slow_stream_other_than_a_pipe_is_kept_while_whole_lines_go_out() -> None:
    """…and one whose lines keep going out, each within the grace, is never given up."""
    send, receive = trio.testing.lockstep_stream_one_way_pair()
    writer = LineWriter(send, _encode, lambda: None)
    lines = [{"n": n} for n in range(12)]
    got = bytearray()

    async def slow_reader() -> None:
        while got.count(b"\n") < len(lines):
            await trio.sleep(0.1)  # well inside the grace between whole lines
            got.extend(await receive.receive_some())

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.give_up_when_stuck, 0.5)
            nursery.start_soon(slow_reader)
            for line in lines:
                await writer.write(line)
            while got.count(b"\n") < len(lines):
                await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
    assert not writer.broken and [json.loads(x) for x in bytes(got).splitlines()] == lines


async def test_a_stream_written_from_a_thread_is_never_given_up() -> None:
    """A stream with ``writes_in_thread`` (``codexrt_cli``'s for a file or a terminal): its
    blocked write cannot be ended nor its progress seen within a line, so
    ``give_up_when_stuck`` leaves it alone, however long a line waits."""
    send, _receive = trio.testing.memory_stream_one_way_pair()
    send.writes_in_thread = True  # type: ignore[attr-defined]
    writer = LineWriter(send, _encode, lambda: None)
    async with writer._lock:  # a line waits, and nothing moves
        with trio.move_on_after(1.0) as waited:
            await writer.give_up_when_stuck(0.2)
    assert waited.cancelled_caught and not writer.broken


async def test_a_zero_grace_does_not_spin() -> None:
    """``give_up_when_stuck(0)`` looks at most every 10 ms (helper-41: a zero grace made the
    watch a busy loop until the service ended)."""
    r, send = _pipe()
    writer = LineWriter(send, _encode, lambda: None)
    counter = StepCounter("")  # every task's steps
    trio.lowlevel.add_instrument(counter)
    try:
        with trio.move_on_after(0.5):
            await writer.give_up_when_stuck(0.0)
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert counter.steps < 200, counter.steps
    await send.aclose()
    os.close(r)


async def test_a_closed_stdin_is_seen_before_its_eof_is_read() -> None:
    """``stuck_watch``'s look at stdin: a pipe whose writer closed it — unread data still in it
    — and a Unix socket whose peer shut down writing (Node's ``stdin.end()``) are hung up; an
    open one is not, with or without data waiting."""
    from codexrt._io._lines import _hung_up

    r, w = os.pipe()
    stream = trio.lowlevel.FdStream(r)
    os.write(w, b"a line not read yet\n")
    assert not _hung_up(stream)
    os.close(w)
    assert _hung_up(stream)
    await stream.aclose()
    assert _hung_up(stream)  # closed here too
    if sys.platform == "linux":
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sock_in = trio.lowlevel.FdStream(b.detach())
        assert not _hung_up(sock_in)
        a.sendall(b"{}\n")
        assert not _hung_up(sock_in)
        a.shutdown(socket.SHUT_WR)
        assert _hung_up(sock_in)
        a.close()
        await sock_in.aclose()
