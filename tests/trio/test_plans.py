"""Plans (R-INT-5): plan items vs TODOs, preview → authoritative, the execute-plan offer and its
single-flight execution (sans-IO tracker, then the runtime against the scripted fake peer)."""

from __future__ import annotations

import pytest

import codexrt
from codexrt import RuntimeConfig, Settings
from codexrt._sansio._plans import EXECUTE_PLAN_MESSAGE, PlanTracker


def _item(kind, item_id="p1", text="", thread="th", turn="tu"):
    return {"threadId": thread, "turnId": turn, "item": {"type": kind, "id": item_id, "text": text}}


def test_r_int_5_preview_then_authoritative_replacement_of_the_same_item():
    t = PlanTracker()
    t.feed("item/started", _item("plan"))
    t.feed("item/plan/delta", {"threadId": "th", "turnId": "tu", "itemId": "p1", "delta": "1. draft"})
    assert t.items["p1"].text == "1. draft" and not t.items["p1"].authoritative and t.offer("th") is None
    changes = t.feed("item/completed", _item("plan", text="1. Final step"))
    assert [c.kind for c in changes] == ["planCompleted"]
    assert t.items["p1"].text == "1. Final step" and t.offer("th").item_id == "p1"
    assert t.feed("item/plan/delta", {"threadId": "th", "turnId": "tu", "itemId": "p1", "delta": " late"}) == []
    assert t.feed("item/started", _item("plan", text="stale copy")) == []
    assert t.items["p1"].text == "1. Final step"


def test_r_int_5_todos_are_kept_apart_from_plan_items():
    t = PlanTracker()
    t.feed("turn/plan/updated", {"threadId": "th", "turnId": "tu", "explanation": "why",
                                 "plan": [{"step": "read", "status": "completed"}, {"step": "edit", "status": "pending"}]})
    assert t.items == {} and t.offer("th") is None
    assert t.todos[("th", "tu")].steps == (("read", "completed"), ("edit", "pending"))
    t.feed("item/completed", _item("agentMessage", text="not a plan"))
    assert t.items == {}


@pytest.mark.parametrize("status, kept", [("completed", True), ("failed", False), ("interrupted", False)])
def test_r_int_5_offer_withdrawn_on_failure_or_interruption_of_its_turn(status, kept):
    t = PlanTracker()
    t.feed("item/completed", _item("plan", text="plan"))
    t.feed("turn/completed", {"threadId": "other", "turn": {"id": "tu", "status": "failed"}})  # other roots: no effect
    assert t.offer("th") is not None
    t.feed("turn/completed", {"threadId": "th", "turn": {"id": "another-turn", "status": "failed"}})
    assert t.offer("th") is not None
    changes = t.feed("turn/completed", {"threadId": "th", "turn": {"id": "tu", "status": status}})
    assert (t.offer("th") is not None) is kept
    assert [c.kind for c in changes] == ([] if kept else ["planOfferWithdrawn"])


def test_r_int_5_only_the_latest_authoritative_plan_is_current():
    t = PlanTracker()
    t.feed("item/completed", _item("plan", "p1", "old"))
    t.feed("item/completed", _item("plan", "p2", "new", turn="tu2"))
    assert t.is_current("th", "p2") and not t.is_current("th", "p1") and not t.is_current("other", "p2")
    t.withdraw_all("runtime reset")
    assert not t.is_current("th", "p2")


# -- the runtime -------------------------------------------------------------------------------

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
