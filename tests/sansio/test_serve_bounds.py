"""Split from ``tests/trio/test_serve_bounds.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

def test_r_int_5_plan_tracker_tables_are_bounded() -> None:
    """Plans of many threads over days: items, TODO lists and offers stay within their caps,
    the newest offers stay current and an item on offer is never dropped."""
    from codexrt._sansio._plans import PlanTracker

    pt = PlanTracker()
    for i in range(2000):
        tid, turn = f"t{i}", f"turn{i}"
        pt.feed("item/completed", {"threadId": tid, "turnId": turn, "item": {"type": "plan", "id": f"p{i}",
                                                                              "text": "1. do it"}})
        pt.feed("turn/plan/updated", {"threadId": tid, "turnId": turn, "plan": [{"step": "a", "status": "pending"}]})
    assert len(pt.todos) <= PlanTracker.MAX_TODOS
    assert len(pt._offers) <= PlanTracker.MAX_OFFERS
    assert len(pt.items) <= max(PlanTracker.MAX_ITEMS, len(pt._offers))
    assert all(item_id in pt.items for item_id in pt._offers.values())  # offered items are kept
    assert pt.is_current("t1999", "p1999") and not pt.is_current("t0", "p0")


def test_r_hlp_3_title_manager_tables_are_bounded() -> None:
    """``serve --auto-title`` for days: per-thread bookkeeping (attempted, manual names,
    outcomes) keeps the newest ``MAX_TRACKED_THREADS`` threads."""
    from codexrt._runtime._events import CodexEvent
    from codexrt._features._helpers import TitleManager

    tm = TitleManager(object(), None)  # type: ignore[arg-type]  # only the sans-I/O event path is used
    n = TitleManager.MAX_TRACKED_THREADS + 500
    for i in range(n):
        tm._on_event(CodexEvent("threadStarted", {"thread": {"id": f"t{i}", "name": "named by the host"}}))
        tm._on_event(CodexEvent("nativeNotification", {"method": "thread/name/updated",
                                                       "params": {"threadId": f"t{i}"}}))
    for table in (tm.attempted, tm.manual, tm.outcomes):
        assert len(table) == TitleManager.MAX_TRACKED_THREADS
    assert f"t{n - 1}" in tm.outcomes and "t0" not in tm.outcomes
    assert tm.outcomes[f"t{n - 1}"].reason == "manual name"
