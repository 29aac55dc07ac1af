"""ChunkReader (issue 34): one schedule point per chunk read from a pipe, the errors trio's
``receive_some`` raises, and fairness when the pipe always has data. No timing: the reader's
task steps are counted with a Trio instrument."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from tests._support import StepCounter
from codexrt._io._chunks import ChunkReader



def _pipe() -> tuple[trio.lowlevel.FdStream, int]:
    r, w = os.pipe()
    return trio.lowlevel.FdStream(r), w


async def test_a_line_that_arrives_alone_costs_the_reader_one_step() -> None:
    """A line written while the reader waits wakes it once; trio's own ``receive_some``
    would take two steps per line (its leading checkpoint, then the park)."""
    stream, w = _pipe()
    counter = StepCounter("read_lines")
    trio.lowlevel.add_instrument(counter)
    got: list[bytes] = []

    async def read_lines() -> None:
        reader = ChunkReader(stream)
        while data := await reader.receive():
            got.append(data)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_lines)
            await trio.testing.wait_all_tasks_blocked()
            before = counter.steps
            for i in range(20):
                os.write(w, b"line %d\n" % i)
                await trio.testing.wait_all_tasks_blocked()
            per_line = (counter.steps - before) / 20
            os.close(w)
    finally:
        trio.lowlevel.remove_instrument(counter)
        await stream.aclose()
    assert got == [b"line %d\n" % i for i in range(20)]
    assert per_line == 1


async def test_eof_is_empty_bytes_and_close_is_closed_resource_error() -> None:
    stream, w = _pipe()
    reader = ChunkReader(stream)
    os.write(w, b"abc")
    os.close(w)
    assert await reader.receive() == b"abc"
    assert await reader.receive() == b""

    stream2, w2 = _pipe()
    reader2 = ChunkReader(stream2)
    try:
        async with trio.open_nursery() as nursery:
            async def close_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                await stream2.aclose()  # wakes the parked reader (notify_closing)

            nursery.start_soon(close_soon)
            with pytest.raises(trio.ClosedResourceError):
                await reader2.receive()
        with pytest.raises(trio.ClosedResourceError):
            await reader2.receive()  # an already closed stream
    finally:
        os.close(w2)
        await stream.aclose()


async def test_a_pipe_that_always_has_data_still_lets_others_run() -> None:
    """Every call has a schedule point: a reader of a full pipe does not starve other tasks
    and can be cancelled."""
    stream, w = _pipe()
    os.write(w, b"x" * 4000)
    reader = ChunkReader(stream, max_bytes=10)
    others = 0

    async def other() -> None:
        nonlocal others
        while True:
            others += 1
            await trio.lowlevel.checkpoint()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other)
            for _ in range(100):
                assert await reader.receive() == b"x" * 10
            nursery.cancel_scope.cancel()
        assert others >= 50
        with trio.CancelScope() as scope:
            scope.cancel()
            await reader.receive()  # data waiting, but the call's checkpoint sees the cancel
        assert scope.cancelled_caught
    finally:
        os.close(w)
        await stream.aclose()


async def test_other_streams_use_their_receive_some() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    await send.send_all(b"hello")
    assert await ChunkReader(receive).receive() == b"hello"


async def test_widen_pipe_is_best_effort() -> None:
    """Linux grows the pipe (up to pipe-max-size); elsewhere, or for a stream that is not a
    pipe, nothing happens and None says so."""
    import sys

    from codexrt._io._chunks import widen_pipe

    stream, w = _pipe()
    try:
        got = widen_pipe(stream, 1 << 20)
        if sys.platform == "linux":
            assert got is not None and got >= 65536
        else:
            assert got is None
    finally:
        os.close(w)
        await stream.aclose()
    assert widen_pipe(stream, 1 << 20) is None  # closed
    _send, receive = trio.testing.memory_stream_one_way_pair()
    assert widen_pipe(receive, 1 << 20) is None


async def test_receive_nowait_reads_without_a_schedule_point() -> None:
    """Issue 34: for a caller that has just passed a schedule point of its own (the stderr
    drain's pause): the chunk that is there, None on an empty pipe (``receive`` then waits for
    it), ``b""`` at EOF, ``ClosedResourceError`` once closed; never a task step of its own."""
    stream, w = _pipe()
    reader = ChunkReader(stream)
    counter = StepCounter("test_receive_nowait_reads_without_a_schedule_point")
    try:
        trio.lowlevel.add_instrument(counter)
        assert reader.receive_nowait() is None
        os.write(w, b"one\ntwo\n")
        assert reader.receive_nowait() == b"one\ntwo\n"
        assert reader.receive_nowait() is None
        trio.lowlevel.remove_instrument(counter)
        assert counter.steps == 0
        os.write(w, b"three\n")
        assert await reader.receive() == b"three\n"  # after an empty read it waits for the pipe
        os.close(w)
        w = -1
        assert reader.receive_nowait() == b""
    finally:
        if w >= 0:
            os.close(w)
        await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        reader.receive_nowait()
    _send, receive = trio.testing.memory_stream_one_way_pair()
    assert ChunkReader(receive).receive_nowait() is None  # not a pipe: receive() reads it


async def test_burst_bytes_are_asked_for_only_while_reads_come_back_full() -> None:
    """Issue 34: ``burst_bytes`` is asked for after a read that returned at least ``max_bytes``
    (the peer writes faster than it is read), and the small request comes back after the first
    read under ``max_bytes``, an empty pipe or EOF — a quiet turn's short lines never ask for
    the big buffer (a request past glibc's mmap threshold costs a fresh mapping per read)."""
    stream, w = _pipe()
    reader = ChunkReader(stream, max_bytes=100, burst_bytes=1000)
    asked: list[int] = []
    real_read = os.read

    def spy(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    try:
        import codexrt._io._chunks as chunks

        chunks.os.read = spy  # type: ignore[assignment]
        try:
            os.write(w, b"a" * 3000)
            sizes = [len(await reader.receive()) for _ in range(4)]
            assert sizes == [100, 1000, 1000, 900]
            assert asked == [100, 1000, 1000, 1000]
            os.write(w, b"b" * 50)  # the last read was big (900): still asks for 1000, gets 50
            assert await reader.receive() == b"b" * 50
            os.write(w, b"c" * 150)
            assert len(await reader.receive()) == 100
            assert reader.receive_nowait() == b"c" * 50  # asked for 1000: the pipe held 50
            assert reader.receive_nowait() is None  # empty: the next read asks for 100 again
            os.write(w, b"d" * 2000)
            assert len(await reader.receive()) == 100
            assert asked[4:] == [1000, 100, 1000, 100, 100]
        finally:
            chunks.os.read = real_read  # type: ignore[assignment]
        plain = ChunkReader(stream, max_bytes=100)  # no burst_bytes: never more than max_bytes
        assert [len(await plain.receive()) for _ in range(3)] == [100, 100, 100]
    finally:
        os.close(w)
        await stream.aclose()

