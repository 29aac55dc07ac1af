"""Plans (R-INT-5): plan items vs TODOs, preview → authoritative, the execute-plan offer and its
single-flight execution (sans-IO tracker, then the runtime against the scripted fake peer)."""

from __future__ import annotations

import pytest

from codexrt._sansio._plans import PlanTracker


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
