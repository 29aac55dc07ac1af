"""Plans: plan items, TODO lists and the "execute plan" offer, without I/O (R-INT-5).

Why: in plan collaboration mode the model writes a *plan item* (``item/plan/delta`` streams a
preview, ``item/completed`` carries the authoritative text). Separately, ``turn/plan/updated``
carries the turn's TODO list (steps with statuses) — a different thing that must not be mixed
in. A host offers "Execute plan" only for the authoritative plan of the current thread, and
must withdraw the offer when it can no longer be executed faithfully.

Theory of operation
-------------------
:class:`PlanTracker` is fed notifications (``feed(method, params)``) and keeps:

* **plan items** by native item id: ``item/started`` (type ``plan``) opens a *preview*,
  ``item/plan/delta`` appends to it (only while it is a preview), ``item/completed`` replaces
  it with the authoritative text of the *same item id* — deltas after that are ignored;
* **TODO lists** by ``(thread, turn)`` from ``turn/plan/updated`` — never turned into plan items;
* **offers**, one per thread: the latest authoritative plan item of that thread. An offer is
  withdrawn (``withdraw_*``) when the runtime resets or fails, or when the plan's turn ends
  ``failed``/``interrupted``; a turn that completes keeps it. Events of other threads never
  touch a thread's offer.

Every change is returned from ``feed`` as a small :class:`PlanChange` so the runtime can turn
it into an event. The single-flight execution itself (one new turn in the default
collaboration mode) is driven by the runtime (``Runtime.execute_plan``); this module only
answers "is this plan still the one on offer?".
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from codexrt._sansio._convert import to_wire, wire

__all__ = ["PlanItem", "TodoList", "PlanChange", "PlanTracker", "default_collaboration_mode",
           "EXECUTE_PLAN_MESSAGE"]

#: The user message of an "execute plan" turn (what the Codex TUI sends after a plan).
EXECUTE_PLAN_MESSAGE = "Implement the plan."


@wire()
@attrs.define
class PlanItem:
    item_id: str
    thread_id: str
    turn_id: str | None
    text: str
    authoritative: bool = False

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)


@attrs.frozen
class TodoList:
    thread_id: str
    turn_id: str
    steps: tuple[tuple[str, str], ...]  # (step, status)
    explanation: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"threadId": self.thread_id, "turnId": self.turn_id, "explanation": self.explanation,
                "steps": [{"step": s, "status": st} for s, st in self.steps]}


@attrs.frozen
class PlanChange:
    """``kind``: ``planPreview`` | ``planCompleted`` | ``todosUpdated`` | ``planOfferWithdrawn``."""

    kind: str
    thread_id: str
    payload: dict[str, Any]


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


class PlanTracker:
    #: Bounds (a runtime lives for days): plan items and TODO lists beyond these are forgotten
    #: oldest first — never an item on offer; offers are one per thread, the oldest withdrawn
    #: silently past ``MAX_OFFERS`` (its thread has long moved on).
    MAX_ITEMS = 256
    MAX_TODOS = 256
    MAX_OFFERS = 1024

    def __init__(self) -> None:
        self.items: dict[str, PlanItem] = {}
        self.todos: dict[tuple[str, str], TodoList] = {}
        self._offers: dict[str, str] = {}  # thread id → plan item id

    def __repr__(self) -> str:
        return f"<PlanTracker items={len(self.items)} offers={len(self._offers)} todos={len(self.todos)}>"

    def offer(self, thread_id: str) -> PlanItem | None:
        """The plan "Execute plan" is offered for on this thread (authoritative), if any."""
        item_id = self._offers.get(thread_id)
        return self.items.get(item_id) if item_id is not None else None

    def offers(self) -> list[PlanItem]:
        return [self.items[i] for i in self._offers.values() if i in self.items]

    def _trim(self) -> None:
        if len(self.items) > self.MAX_ITEMS:
            offered = set(self._offers.values())
            for key in [k for k in self.items if k not in offered][: len(self.items) - self.MAX_ITEMS]:
                del self.items[key]
        while len(self.todos) > self.MAX_TODOS:
            del self.todos[next(iter(self.todos))]
        while len(self._offers) > self.MAX_OFFERS:
            del self._offers[next(iter(self._offers))]

    def feed(self, method: str, params: Mapping[str, Any]) -> list[PlanChange]:
        out = self._feed(method, params)
        if out:
            self._trim()
        return out

    def _feed(self, method: str, params: Mapping[str, Any]) -> list[PlanChange]:
        # a dict first: isinstance against typing.Mapping is an ABC check (~5 us), on every item event
        p = params if type(params) is dict or isinstance(params, Mapping) else {}
        thread_id = _s(p.get("threadId"))
        if thread_id is None:
            return []
        if method in ("item/started", "item/completed"):
            item = p.get("item")
            if not isinstance(item, dict) or item.get("type") != "plan" or not isinstance(item.get("id"), str):
                return []
            return self._plan_item(thread_id, _s(p.get("turnId")), item, completed=method == "item/completed")
        if method == "item/plan/delta":
            item_id = _s(p.get("itemId"))
            delta = p.get("delta")
            if item_id is None or not isinstance(delta, str):
                return []
            cur = self.items.get(item_id)
            if cur is None:
                cur = self.items[item_id] = PlanItem(item_id, thread_id, _s(p.get("turnId")), "")
            if cur.authoritative:
                return []  # the completed text already replaced the preview
            cur.text += delta
            return [PlanChange("planPreview", thread_id, cur.to_wire())]
        if method == "turn/plan/updated":
            turn_id = _s(p.get("turnId"))
            if turn_id is None:
                return []
            steps = tuple((str(s.get("step", "")), str(s.get("status", "unknown")))
                          for s in p.get("plan") or () if isinstance(s, dict))
            todo = TodoList(thread_id, turn_id, steps, _s(p.get("explanation")))
            self.todos[(thread_id, turn_id)] = todo
            return [PlanChange("todosUpdated", thread_id, todo.to_wire())]
        if method == "turn/completed":
            turn = p.get("turn") if isinstance(p.get("turn"), dict) else {}
            turn_id = _s(p.get("turnId")) or _s(turn.get("id"))
            status = turn.get("status")
            offer = self.offer(thread_id)
            if offer is not None and offer.turn_id == turn_id and status in ("failed", "interrupted"):
                return self._withdraw(thread_id, f"plan turn {status}")
        return []

    def _plan_item(self, thread_id: str, turn_id: str | None, item: dict[str, Any], *, completed: bool) -> list[PlanChange]:
        item_id = item["id"]
        text = item.get("text") if isinstance(item.get("text"), str) else ""
        cur = self.items.get(item_id)
        if not completed:
            if cur is not None:
                return []  # a started copy never overrides what we have
            cur = self.items[item_id] = PlanItem(item_id, thread_id, turn_id, text)
            return [PlanChange("planPreview", thread_id, cur.to_wire())]
        cur = self.items[item_id] = PlanItem(item_id, thread_id, turn_id or (cur.turn_id if cur else None), text,
                                             authoritative=True)
        self._offers[thread_id] = item_id
        return [PlanChange("planCompleted", thread_id, cur.to_wire())]

    def _withdraw(self, thread_id: str, reason: str) -> list[PlanChange]:
        item_id = self._offers.pop(thread_id, None)
        if item_id is None:
            return []
        return [PlanChange("planOfferWithdrawn", thread_id, {"threadId": thread_id, "itemId": item_id,
                                                              "reason": reason})]

    def withdraw_all(self, reason: str) -> list[PlanChange]:
        """Runtime reset or failure: no offer survives."""
        out: list[PlanChange] = []
        for thread_id in list(self._offers):
            out += self._withdraw(thread_id, reason)
        return out

    def withdraw(self, thread_id: str, reason: str) -> list[PlanChange]:
        return self._withdraw(thread_id, reason)

    def is_current(self, thread_id: str, item_id: str) -> bool:
        """R-INT-5 identity check: is ``item_id`` the authoritative plan on offer for ``thread_id``?"""
        offer = self.offer(thread_id)
        return offer is not None and offer.item_id == item_id and offer.authoritative


def default_collaboration_mode(model: str, effort: str | None = None) -> dict[str, Any]:
    """The ``collaborationMode`` of an execute-plan turn: mode ``default`` with the built-in
    instructions (``developer_instructions: null``). Approval and sandbox are separate
    turn fields and are not touched."""
    settings: dict[str, Any] = {"model": model, "developer_instructions": None}
    if effort is not None:
        settings["reasoning_effort"] = effort
    return {"mode": "default", "settings": settings}
