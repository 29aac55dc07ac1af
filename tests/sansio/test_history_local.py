"""R-H-1: local unconfirmed submissions reconciled with native pages by ``clientId`` — shown
once, at the end, until the native history carries them; then only the native copy, in its
own turn (never both, never lost)."""

from __future__ import annotations

from typing import Any


from codexrt._features._history import LocalSubmission, local_submissions
from codexrt._sansio._projection import Projector


def umsg(iid: str, text: str, client_id: str | None) -> dict[str, Any]:
    return {"type": "userMessage", "id": iid, "clientId": client_id, "content": [{"type": "text", "text": text}]}


def test_r_h_1_local_submission_shown_until_the_native_copy_arrives_then_replaced() -> None:
    p = Projector("th")
    p.add_native_turn({"id": "t1", "status": "completed", "items": [umsg("u1", "first", "cm-1")]})
    p.add_local_submission("cm-1", "first")  # already confirmed: nothing
    p.add_local_submission("cm-2", "second")
    recs = p.records()
    assert [(r.id, r.status, r.source) for r in recs] == [("u1", "completed", "native"),
                                                         ("local:cm-2", "inProgress", "local")]
    p.add_native_turn({"id": "t2", "status": "inProgress", "items": [umsg("u2", "second", "cm-2")]})
    groups = p.turns()
    assert [(g.turn_id, [r.id for r in g.records]) for g in groups] == [("t1", ["u1"]), ("t2", ["u2"])]


def test_r_h_1_local_turns_stay_last_whatever_order_pages_arrive_in() -> None:
    p = Projector("th")
    p.add_local_submission("cm-9", "queued")
    p.add_native_turn({"id": "t1", "status": "completed", "items": [umsg("u1", "older", "cm-1")]})
    assert [r.id for r in p.records()] == ["u1", "local:cm-9"]


class _Op:
    def __init__(self, kind: str, thread_id: str, cmid: str, text: str, terminal: bool) -> None:
        self.kind, self.thread_id, self.client_message_id = kind, thread_id, cmid
        self.payload, self.terminal = {"text": text}, terminal


def test_r_h_1_only_unfinished_sends_of_the_thread_are_local_submissions() -> None:
    class Rt:
        _ops = {"a": _Op("send", "T", "cm-a", "done", True), "b": _Op("send", "T", "cm-b", "running", False),
                "c": _Op("compact", "T", "", "", False), "d": _Op("send", "U", "cm-d", "other", False),
                "e": _Op("send", "T", "cm-e", "queued", False)}

    assert local_submissions(Rt(), "T") == [LocalSubmission("cm-b", "running"), LocalSubmission("cm-e", "queued")]
