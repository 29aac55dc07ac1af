"""serve's direct event writes (issue 34, R-D-2): over a real stdout pipe, an event put on a
channel's subscription while the forwarder waits is written by ``put`` itself — before any
other task runs — with the forwarder's bookkeeping (an ``operationDone`` releases its
command's reply); an event is left to the forwarder when it cannot be written whole at once
(another line holds the lock, a flood's long text) or names a request id serve has not mapped
yet. No timing: the lines are read back from the pipe without letting any task run."""

from __future__ import annotations

import json
import os
import types
from typing import Any

import trio
import trio.testing

from codexrt._io._lines import LineWriter
from codexrt._runtime._events import CodexEvent, EventStream
from codexrt._serve._core import DaemonConfig, DaemonCore


def _read_lines(fd: int) -> list[dict[str, Any]]:
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 1 << 20)
    except BlockingIOError:
        return []
    return [json.loads(line) for line in data.splitlines()]


async def test_r_d_2_the_forwarder_hands_serve_events_to_put_over_a_pipe() -> None:
    r, w = os.pipe()
    _recv_send, recv = trio.testing.memory_stream_one_way_pair()
    core = DaemonCore(recv, trio.lowlevel.FdStream(w), DaemonConfig())
    done = trio.Event()
    ch: Any = types.SimpleNamespace(rt=types.SimpleNamespace(session_epoch="e1"), request_ids={"op-1": "r1"},
                                    done_forwarded={"op-1": done}, id="c")
    events = EventStream()
    out = core._out._send
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core._forward, ch, events)
            await trio.testing.wait_all_tasks_blocked()  # the forwarder waits for an event

            # written by put itself: no task has run since
            events.put(CodexEvent("itemStarted", {"item": {"id": "i1"}}, channel_id="c", client_operation_id="op-1"))
            events.put(CodexEvent("operationDone", {"status": "completed"}, channel_id="c",
                                  client_operation_id="op-1"))
            got = _read_lines(r)
            assert [line["kind"] for line in got] == ["itemStarted", "operationDone"]
            assert got[0]["sessionEpoch"] == "e1"
            assert done.is_set() and "op-1" not in ch.done_forwarded and "op-1" not in ch.request_ids

            # not mapped yet (its command's track() comes after it): the forwarder's, with its id
            events.put(CodexEvent("operationQueued", {"kind": "send"}, channel_id="c", client_operation_id="op-2"))
            ch.request_ids["op-2"] = "r2"
            assert _read_lines(r) == []
            await trio.testing.wait_all_tasks_blocked()
            queued = _read_lines(r)
            assert [(line["kind"], line["payload"]["requestId"]) for line in queued] == [("operationQueued", "r2")]

            # a flood's long text: not built for a write that cannot be whole; the forwarder's
            long_text = "x" * LineWriter.MOST_NOW
            events.put(CodexEvent("itemUpdated", {"delta": long_text, "stream": "item/agentMessage/delta"},
                                  channel_id="c"))
            events.put(CodexEvent("itemCompleted", {"item": {"id": "i1"}}, channel_id="c"))  # queued behind it
            assert _read_lines(r) == []
            await trio.testing.wait_all_tasks_blocked()
            await trio.testing.wait_all_tasks_blocked()
            assert [line["kind"] for line in _read_lines(r)] == ["itemUpdated", "itemCompleted"]

            # another line holds the lock: queued, written after it, in order
            async with core._out._lock:
                events.put(CodexEvent("turnStarted", {}, channel_id="c"))
                assert _read_lines(r) == []
            await trio.testing.wait_all_tasks_blocked()
            assert [line["kind"] for line in _read_lines(r)] == ["turnStarted"]
            events.close()
    finally:
        os.close(r)
        await out.aclose()

