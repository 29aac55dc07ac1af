"""Exact correlation (issue 24): late responses tied to their operation (R-WIRE-4), sub-agent
relations (R-H-8, R-D-1, R-OP-6), the settings gate keyed by revision (R-SET-2).

Memory peers on ``autojump_clock``; the fake peer's ``received`` log is the proof of what was written.
"""

from __future__ import annotations

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig
from tests._support import MemoryPeers


@pytest.fixture
async def peers(nursery):
    return MemoryPeers(nursery)


def _rt(peers, *scenarios, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


LATE_TURN_START = {"name": "late-turn-start-no-started", "defaults": True, "rules": [
    # turn/start answered after 40 s (budget 30 s) and no turn/started ever: only the late
    # response can name the turn.
    {"match": {"method": "turn/start"}, "actions": [{"sleep": 40}, {"turn_response": True}]},
    {"match": {"method": "turn/interrupt"}, "actions": [{"respond": {}}, {"end_turn": "interrupted"}]},
]}


async def test_r_wire_4_late_turn_start_names_its_operation_and_binds_the_turn(peers, autojump_clock):
    async with _rt(peers, LATE_TURN_START, rpc_timeout=30) as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            seen = []
            async for ev in events:
                seen.append(ev)
                if ev.kind == "lateResponse":
                    break
            late = seen[-1]
            (start,) = peers.received(0, "turn/start")
            assert late.client_operation_id == op.id
            assert late.payload == {"method": "turn/start", "requestId": start["id"],
                                    "phase": "writtenUnconfirmed", "ok": True}
            timeout_err = next(e for e in seen if e.kind == "error" and e.client_operation_id == op.id)
            assert timeout_err.payload["requestId"] == start["id"] and timeout_err.payload["method"] == "turn/start"
            async for ev in events:
                if ev.kind == "operationAcked" and ev.client_operation_id == op.id:
                    break
            assert ev.payload["late"] is True
            assert op.turn_id == ev.payload["turn"]["id"] and not op.terminal
            rt.abort(op)
            result = await op.wait()
    assert result.status == "interrupted" and result.turn_id == op.turn_id
    interrupts = peers.received(0, "turn/interrupt")
    assert [m["params"]["turnId"] for m in interrupts] == [op.turn_id]
    assert len(peers.received(0, "turn/start")) == 1  # never re-sent (R-OP-7)


STARTED_THEN_LATE = {"name": "started-then-late-response", "defaults": True, "rules": [
    {"match": {"method": "turn/start"}, "actions": [
        {"turn_started": True}, {"sleep": 40}, {"turn_response": True},
        {"agent_message": "done"}, {"end_turn": "completed"}]},
]}


async def test_r_wire_4_late_turn_start_never_rebinds_a_bound_turn(peers, autojump_clock):
    """turn/started bound the turn first: the late result is reported with its operation,
    nothing is bound twice and no second acknowledgement is made."""
    async with _rt(peers, STARTED_THEN_LATE, rpc_timeout=30) as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            result = await op.wait()
            got = [e async for e in _until_empty(events)]
    assert result.status == "completed"
    (late,) = [e for e in got if e.kind == "lateResponse"]
    assert late.client_operation_id == op.id and late.payload["method"] == "turn/start"
    assert not [e for e in got if e.kind == "operationAcked"]
    assert [e.turn_id for e in got if e.kind == "turnStarted"] == [result.turn_id]


async def _until_empty(stream):
    while (ev := stream.get_nowait()) is not None:
        yield ev
