"""serve's direct event writes (issue 34, R-D-2): over a real stdout pipe, an event put on a
channel's subscription while the forwarder waits is written by ``put`` itself — before any
other task runs — with the forwarder's bookkeeping (an ``operationDone`` releases its
command's reply); an event is left to the forwarder when it cannot be written whole at once
(another line holds the lock, a flood's long text) or names a request id serve has not mapped
yet. No timing: the lines are read back from the pipe without letting any task run."""

from __future__ import annotations

import contextlib
import json
import os
import types
from collections.abc import AsyncIterator
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


@contextlib.asynccontextmanager
async def _core_over_pipe() -> AsyncIterator[tuple[DaemonCore, int]]:
    """A ``DaemonCore`` whose stdout is a real pipe, and the pipe's read end (closed after)."""
    r, w = os.pipe()
    _recv_send, recv = trio.testing.memory_stream_one_way_pair()
    core = DaemonCore(recv, trio.lowlevel.FdStream(w), DaemonConfig())
    try:
        yield core, r
    finally:
        os.close(r)
        await core._out._send.aclose()


async def test_r_d_2_the_forwarder_hands_serve_events_to_put_over_a_pipe() -> None:
    done = trio.Event()
    ch: Any = types.SimpleNamespace(rt=types.SimpleNamespace(session_epoch="e1"), request_ids={"op-1": "r1"},
                                    done_forwarded={"op-1": done}, awaiting={}, id="c")
    events = EventStream()
    async with _core_over_pipe() as (core, r):
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


def _channel(**ops: trio.Event) -> Any:
    return types.SimpleNamespace(rt=types.SimpleNamespace(session_epoch="e1"), request_ids={k: f"r-{k}" for k in ops},
                                 done_forwarded=dict(ops), awaiting={}, answers_open=0, id="c",
                                 touch=lambda: None)


def _done(op_id: str, text: str = "hi") -> CodexEvent:
    payload = {"kind": "send", "status": "completed", "clientOperationId": op_id, "threadId": "t", "turnId": "u",
               "finalText": text, "clientMessageId": "cm"}
    return CodexEvent("operationDone", payload, channel_id="c", client_operation_id=op_id)


async def test_issue_34_a_long_commands_reply_follows_its_operation_done_line_at_once() -> None:
    """The waiter of a long command parks (``Channel.awaiting``); the task that writes the
    ``operationDone`` line writes the reply right after it — its result is that event's
    payload — when the reply goes out whole at once. Exactly once: ``Answer.done`` is set, the
    request id is free again. A reply too long for one write, a held lock, or an answer already
    given are left to the waiter: nothing is written for them here."""
    from codexrt._serve._channel import Answer

    ops = {k: trio.Event() for k in ("op-1", "op-2", "op-3", "op-4")}
    ch = _channel(**ops)
    answers = {k: Answer(f"r-{k}") for k in ops}
    ch.awaiting.update(answers)
    events = EventStream()
    async with _core_over_pipe() as (core, r):
        for a in answers.values():
            core.pending_ids.add((str, a.rid))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core._forward, ch, events)
            await trio.testing.wait_all_tasks_blocked()

            # written by put itself, the reply right behind its event: no task has run since
            events.put(_done("op-1"))
            got = _read_lines(r)
            assert [(line["type"], line.get("kind"), line.get("id")) for line in got] == [
                ("daemon", "operationDone", None), ("response", None, "r-op-1")]
            assert got[1]["ok"] and got[1]["result"] == got[0]["payload"]
            assert answers["op-1"].done and (str, "r-op-1") not in core.pending_ids and "op-1" not in ch.awaiting

            # a final text too long for one whole write: the waiter's reply (nothing here)
            events.put(_done("op-2", "x" * LineWriter.MOST_NOW))
            await trio.testing.wait_all_tasks_blocked()
            assert [line["kind"] for line in _read_lines(r)] == ["operationDone"]
            assert not answers["op-2"].done and (str, "r-op-2") in core.pending_ids and ops["op-2"].is_set()

            # another line holds the lock: the forwarder writes the event, then the reply
            async with core._out._lock:
                events.put(_done("op-3"))
                assert _read_lines(r) == []
            await trio.testing.wait_all_tasks_blocked()
            assert [(line["type"], line.get("id")) for line in _read_lines(r)] == [("daemon", None),
                                                                                 ("response", "r-op-3")]
            assert answers["op-3"].done

            # answered already (the waiter gave up waiting for the event): never a second reply
            answers["op-4"].done = True
            events.put(_done("op-4"))
            await trio.testing.wait_all_tasks_blocked()
            assert [line["type"] for line in _read_lines(r)] == ["daemon"]
            events.close()


async def test_a_reply_that_cannot_be_encoded_is_answered_once_by_the_fault_barrier() -> None:
    """Every command is answered exactly once: a handler's reply whose result cannot be encoded
    at all (here a dict keyed by a tuple; ``encode_line`` stringifies other odd values) writes
    nothing, so the fault barrier answers ``INTERNAL_ERROR`` with the command's id instead of
    taking that reply as given."""
    from codexrt._serve._codec import Command

    async def handler(d: DaemonCore, cmd: Command) -> None:
        await d.reply(cmd.id, {"odd": {(1, 2): "a tuple key"}})

    async with _core_over_pipe() as (core, r):
        await core._guarded(handler, Command("r1", "codex.listThreads", {}))
        got = _read_lines(r)
        assert [(line["id"], line["ok"], line["error"]["code"]) for line in got] == [("r1", False, "INTERNAL_ERROR")]


async def test_r_d_2_an_event_that_cannot_be_encoded_becomes_a_protocol_error_and_the_channel_goes_on() -> None:
    """Serve never dies of an event it cannot write: an event whose payload cannot be encoded
    (a bug upstream: events come from JSON; here a dict keyed by a tuple) is written as a
    ``protocolError`` naming its kind, in its place and in order — also when the direct path
    met it first — and an ``operationDone`` so replaced still releases its command's reply;
    the events after it go out as before."""
    done = trio.Event()
    ch = _channel(**{"op-1": done})
    events = EventStream()
    async with _core_over_pipe() as (core, r):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core._forward, ch, events)
            await trio.testing.wait_all_tasks_blocked()
            events.put(CodexEvent("itemStarted", {"item": {(1, 2): "odd"}}, channel_id="c"))
            events.put(CodexEvent("operationDone", {"odd": {(3,): 1}}, channel_id="c", client_operation_id="op-1"))
            events.put(CodexEvent("turnStarted", {}, channel_id="c"))
            await trio.testing.wait_all_tasks_blocked()
            got = _read_lines(r)
            assert [(line["kind"], line["payload"]) for line in got] == [
                ("protocolError", {"reason": "serve could not encode an event of kind itemStarted; it was dropped"}),
                ("protocolError", {"reason": "serve could not encode an event of kind operationDone; it was dropped"}),
                ("turnStarted", {})]
            assert got[1]["clientOperationId"] == "op-1"
            assert done.is_set() and "op-1" not in ch.done_forwarded
            # the direct path is still on: the next event is written by put itself
            events.put(CodexEvent("itemCompleted", {"item": {"id": "i1"}}, channel_id="c"))
            assert [line["kind"] for line in _read_lines(r)] == ["itemCompleted"]
            events.close()
