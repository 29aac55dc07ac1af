"""Split from ``tests/sansio/test_plans.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

import codexrt
from codexrt import RuntimeConfig, Settings
from codexrt._sansio._plans import EXECUTE_PLAN_MESSAGE


PLAN_TURN = {
    "name": "plan-turn",
    "rules": [{"match": {"method": "turn/start"}, "times": 1, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"user_message": True},
        {"notify": "item/started", "params": {"threadId": "$thread_id", "turnId": "$turn_id", "startedAtMs": 1,
                                              "item": {"type": "plan", "id": "plan_1", "text": ""}}},
        {"notify": "item/plan/delta", "params": {"threadId": "$thread_id", "turnId": "$turn_id", "itemId": "plan_1",
                                                 "delta": "1. Do"}},
        {"notify": "turn/plan/updated", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                                   "plan": [{"step": "Do", "status": "pending"}]}},
        {"notify": "item/completed", "params": {"threadId": "$thread_id", "turnId": "$turn_id", "completedAtMs": 2,
                                                "item": {"type": "plan", "id": "plan_1", "text": "1. Do it."}}},
        {"end_turn": "completed"},
    ]}],
}


def _rt(peers, *scenarios, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


async def test_r_int_5_execute_plan_starts_one_default_mode_turn(peers):
    settings = Settings(model="m1", approval_policy="on-request", sandbox="workspace-write",
                        collaboration_mode={"mode": "plan", "settings": {"model": "m1"}})
    async with _rt(peers, PLAN_TURN, settings=settings) as rt:
        with rt.subscribe() as events:
            plan_op = rt.send("plan it")
            await plan_op.wait()
            kinds = [e.kind for e in _drain(events)]
        assert {"planPreview", "planCompleted", "todosUpdated"} <= set(kinds)
        offer = rt.plans.offer(plan_op.thread_id)
        assert offer.item_id == "plan_1" and offer.text == "1. Do it."
        ex = rt.execute_plan(plan_op.thread_id, "plan_1", request_id="req-1")
        busy = rt.execute_plan(plan_op.thread_id, "plan_1", request_id="req-2")
        assert rt.execute_plan(plan_op.thread_id, "plan_1", request_id="req-1") is ex  # keyed per requestId
        result = await ex.wait()
        refused = await busy.wait()
        assert rt.plans.offer(plan_op.thread_id) is not None  # a completed plan keeps its offer
    assert rt.plans.offer(plan_op.thread_id) is None  # closing the runtime withdraws it
    assert result["ok"] is True and result["status"] == "completed"
    assert (result["requestType"], result["requestId"], result["threadId"]) == ("executePlan", "req-1",
                                                                                  plan_op.thread_id)
    assert refused["ok"] is False and refused["error"]["code"] == "PLAN_EXECUTION_IN_FLIGHT"
    assert refused["requestId"] == "req-2" and refused["requestType"] == "executePlan"
    starts = [m["params"] for m in peers.received(0, "turn/start")]
    assert len(starts) == 2
    assert starts[1]["input"][0]["text"] == EXECUTE_PLAN_MESSAGE
    assert starts[1]["collaborationMode"] == {"mode": "default",
                                              "settings": {"model": "m1", "developer_instructions": None}}
    for key in ("approvalPolicy", "sandboxPolicy"):  # untouched by execute plan
        assert starts[1][key] == starts[0][key]


async def test_r_int_5_stale_or_unknown_plans_are_refused_with_the_request_echoed(peers):
    async with _rt(peers, PLAN_TURN) as rt:
        op = rt.send("plan it")
        await op.wait()
        stale = await rt.execute_plan(op.thread_id, "plan_other", request_id="r1").wait()
        no_model = await rt.execute_plan(op.thread_id, "plan_1", request_id="r2").wait()
        assert stale["error"]["code"] == "PLAN_NOT_CURRENT" and stale["requestId"] == "r1"
        assert no_model["error"]["code"] == "PLAN_NO_MODEL" and no_model["threadId"] == op.thread_id
        assert len(peers.received(0, "turn/start")) == 1  # nothing was started


async def test_r_int_5_runtime_reset_withdraws_the_offer(peers):
    async with _rt(peers, PLAN_TURN, settings=Settings(model="m1")) as rt:
        op = rt.send("plan it")
        await op.wait()
        with rt.subscribe() as events:
            await rt.reset(reason="test")
            withdrawn = [e for e in _drain(events) if e.kind == "planOfferWithdrawn"]
        assert withdrawn and withdrawn[0].payload["itemId"] == "plan_1"
        result = await rt.execute_plan(op.thread_id, "plan_1").wait()
        assert result["error"]["code"] == "PLAN_NOT_CURRENT"


def _drain(stream):
    out = []
    while (ev := stream.get_nowait()) is not None:
        out.append(ev)
    return out
