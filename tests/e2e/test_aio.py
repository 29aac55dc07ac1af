"""``codexrt.aio``: the runtime driven natively from asyncio (Trio as a guest on the loop),
against the scripted fake app-server spawned as a real child (R-OP-1, R-OP-5, R-INT-1, R-INT-3).

Testing charter: every test is a plain function that calls ``asyncio.run`` — no Trio code in
the caller, as an asyncio user writes it. Each wait is bounded with ``asyncio.timeout``; what a
test proves is read from the fake peer's log or the process table, never from timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import codexrt
import codexrt.aio
from peer_fixtures.fake_app_server import read_log
from tests._support import fake_server_factory, process_exists

WAIT = 20.0


def _open(scenario: str = "handshake-ok", log: Path | None = None, **kw):
    return codexrt.aio.open_runtime(transports=[fake_server_factory(scenario, log)], **kw)


def test_send_streams_events_while_other_asyncio_tasks_run():
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        tick_task = asyncio.create_task(ticker())
        async with asyncio.timeout(WAIT):
            async with _open() as rt:
                op = rt.send("hello")
                kinds, text = [], []
                async for ev in op.events():
                    kinds.append(ev.kind)
                    if ev.is_delta and ev.payload.get("stream") == "item/agentMessage/delta":
                        text.append(ev.payload["delta"])
                result = await op.wait()
                pid = (await rt.snapshot())["pid"]
        tick_task.cancel()
        return kinds, "".join(text), result, pid, ticks

    kinds, text, result, pid, ticks = asyncio.run(main())
    assert result.status == "completed"
    assert text == result.final_text and text
    assert kinds[0] == "operationQueued" and kinds[-1] == "operationDone"
    assert ticks > 10, "the asyncio loop ran other tasks while the turn streamed"
    assert not process_exists(pid), "leaving the block reaps the child"


def test_two_sends_run_in_fifo_on_one_thread():
    async def main():
        async with asyncio.timeout(WAIT), _open() as rt:
            first = rt.send("one")
            r1 = await first.wait()
            second = rt.send("two", thread_id=r1.thread_id)
            r2 = await second.wait()
            return r1, r2

    r1, r2 = asyncio.run(main())
    assert r1.status == r2.status == "completed"
    assert r1.thread_id == r2.thread_id


def test_r_op_5_timeout_around_the_block_stops_a_hanging_turn_and_reaps_the_child(tmp_path):
    log = tmp_path / "peer.log"
    seen: dict[str, object] = {}

    async def main():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.0):
                async with _open("hang-turn", log) as rt:
                    op = rt.send("never ends")
                    async for ev in op.events():
                        if ev.kind == "turnStarted":
                            seen["pid"] = (await rt.snapshot())["pid"]
                    await op.wait()
        seen["after"] = True

    asyncio.run(main())
    assert seen.get("after") and seen.get("pid")
    assert not process_exists(seen["pid"]), "the child outlived the cancelled block"
    assert any(m.get("method") == "turn/interrupt" for m in read_log(log)), "the active turn was interrupted"


def test_r_int_3_no_approval_without_an_answer_and_a_policy_answers_with_await(tmp_path):
    log = tmp_path / "peer.log"

    async def main():
        async with asyncio.timeout(WAIT), _open("reverse-approval", log) as rt:
            asked = []

            async def policy(inter):
                asked.append(inter.kind)
                await asyncio.sleep(0)  # a real coroutine, run on the asyncio loop
                return {"decision": "decline"}

            rt.set_interaction_policy(policy)
            result = await rt.send("run it").wait()
            return asked, result

    asked, result = asyncio.run(main())
    assert asked == ["commandApproval"]
    assert result.status == "completed"
    replies = [m for m in read_log(log) if "result" in m and "method" not in m]
    assert [r["result"] for r in replies if r["id"] == 0] == [{"decision": "decline"}]


def test_r_int_1_answer_by_hand_from_the_event_stream(tmp_path):
    log = tmp_path / "peer.log"

    async def main():
        async with asyncio.timeout(WAIT), _open("reverse-approval", log) as rt:
            op = rt.send("run it")
            async for ev in op.events():
                if ev.kind == "interactionRequested":
                    await rt.respond_interaction(ev.payload["interactionKey"], ev.payload["dialogToken"],
                                                 {"decision": "accept"})
            return await op.wait()

    result = asyncio.run(main())
    assert result.status == "completed"
    replies = [m for m in read_log(log) if "result" in m and "method" not in m]
    assert [r["result"] for r in replies if r["id"] == 0] == [{"decision": "accept"}]


def test_runtimes_in_sequence_and_side_by_side_share_one_guest_run():
    async def main():
        async with asyncio.timeout(WAIT):
            async with _open() as a, _open() as b:
                ra, rb = await asyncio.gather(a.send("a").wait(), b.send("b").wait())
            async with _open() as c:
                rc = await c.send("c").wait()
        return ra, rb, rc

    ra, rb, rc = asyncio.run(main())
    assert {ra.status, rb.status, rc.status} == {"completed"}


def test_two_runtimes_opened_together_right_after_the_last_one_closed():
    """Both wait for the ending guest run, then share one new one (no second Trio run on the
    thread, no runtime left waiting for a guest that never starts)."""
    async def main():
        async with asyncio.timeout(WAIT):
            async with _open() as first:
                await first.send("one").wait()

            async def one(text: str):
                async with _open() as rt:
                    return await rt.send(text).wait()

            return await asyncio.gather(one("a"), one("b"))

    results = asyncio.run(main())
    assert [r.status for r in results] == ["completed", "completed"]


def test_a_cancelled_policy_task_leaves_the_interaction_to_the_host(tmp_path):
    log = tmp_path / "peer.log"

    async def main():
        async with asyncio.timeout(WAIT), _open("reverse-approval", log) as rt:
            async def policy(inter):
                raise asyncio.CancelledError  # e.g. the UI future it awaited was cancelled

            rt.set_interaction_policy(policy)
            op = rt.send("run it")
            async for ev in op.events():
                if ev.kind == "interactionRequested":
                    pending = await rt.pending_interactions()
                    while not pending or pending[0].state != "pending":
                        await asyncio.sleep(0.01)  # the policy task ends first; bounded by the timeout
                        pending = await rt.pending_interactions()
                    await rt.respond_interaction(ev.payload["interactionKey"], ev.payload["dialogToken"],
                                                 {"decision": "decline"})
            return await op.wait()

    result = asyncio.run(main())
    assert result.status == "completed"
