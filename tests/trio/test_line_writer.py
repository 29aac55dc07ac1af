"""LineWriter (serve's and acp's stdout) over a real pipe: whole lines in FIFO order, one
scheduler pass per line when nobody else writes (issue 34: the free lock is taken without a
pass, ``send_all`` has one), a full pipe waits instead of cutting a line, a cancelled caller
writes nothing, a gone reader is reported once. No timing: task steps are counted with a Trio
instrument."""

from __future__ import annotations

import json
import os

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

