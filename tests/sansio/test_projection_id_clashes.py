"""R-H-1: two id clashes leave the record store whole (found by the fast-path property test of
``test_projection_fast_paths.py``): a ``clientId`` that comes back on an id another entry holds,
and a native item whose id is the key a local submission takes."""

from __future__ import annotations

from typing import Any

from codexrt._sansio._projection import Projector

TID = "0190cccc-0000-7000-8000-000000000005"


def _entry(item: dict[str, Any], turn: str = "t1") -> dict[str, Any]:
    return {"turnId": turn, "item": item}


def test_r_h_1_a_client_id_moving_to_a_stored_id_or_a_native_id_like_a_local_key_leaves_the_store_whole() -> None:
    """Two id clashes the fast-path property test found (before, each left a key listed without its
    entry, and the next read raised ``KeyError``): a ``clientId`` that comes back on an id
    another entry holds (that entry is upserted, the earlier copy goes: R-H-1, never twice),
    and a native item whose id is the key a local submission takes, before or after it (the
    local copy is keyed apart; the native message is not replaced)."""
    user = {"type": "userMessage", "id": "a", "content": [{"type": "text", "text": "q"}], "clientId": "c1"}
    proj = Projector(TID)
    proj.add_native_entries([_entry(user), _entry({**user, "id": "c", "clientId": None}, "t2")])
    proj.add_native_entries([_entry({**user, "id": "c"})])  # c1 comes back on c, which t2 holds
    assert [(r.id, r.turn_id) for r in proj.records()] == [("c", "t2")]  # one message, where c was

    proj = Projector(TID)
    proj.add_native_entries([_entry({"type": "agentMessage", "id": "local:c1", "text": "hi"})])
    proj.add_local_submission("c1", "sent")
    assert [(r.id, r.text) for r in proj.records()] == [("local:c1", "hi"), ("local:c1+", "sent")]
    proj.add_native_entries([_entry(user)])  # the native copy of the submission: the local one goes
    assert [(r.id, r.text) for r in proj.records()] == [("local:c1", "hi"), ("a", "q")]

    # the other order: the local submission first, then a native item with its key
    proj = Projector(TID)
    proj.add_local_submission("c1", "sent")
    proj.add_native_entries([_entry({"type": "agentMessage", "id": "local:c1", "text": "hi"})])
    assert [(r.id, r.text) for r in proj.records()] == [("local:c1", "hi"), ("local:c1+", "sent")]
    proj.add_native_entries([_entry(user)])
    assert [(r.id, r.text) for r in proj.records()] == [("local:c1", "hi"), ("a", "q")]
