"""R-H-1: id clashes leave the record store whole — a ``clientId`` that comes back on an id
another entry holds, a native item whose id is the key a local submission takes (both found by
the fast-path property test of ``test_projection_fast_paths.py``), and any mix of ids shared across
item types, turns and ``clientId``s, checked as the store's invariants after every step."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._projection import Projector, UserMessage

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

    # c1 back on a (re-keyed from c) in a started copy the stored completed one refuses, then
    # c again without a clientId: one message each, never the same id twice (helper-32)
    proj.add_native_item("t1", user, completed=False)
    proj.add_native_entries([_entry({**user, "id": "c", "clientId": None}, "t2")])
    _whole(proj)

    # a native item with the key the local copy was keyed apart onto, pending in the same page:
    # the local copy is keyed apart again, nothing is merged into it (helper-33)
    proj = Projector(TID)
    proj.add_local_submission("c1", "sent")
    proj.add_native_entries([_entry({"type": "agentMessage", "id": "local:c1+", "text": "agent"}),
                             _entry({**user, "id": "local:c1", "clientId": "c9", "content": [{"type": "text", "text": "nat"}]})])
    _whole(proj)
    assert sorted((r.id, r.text, r.turn_id) for r in proj.records()) == [
        ("local:c1", "nat", "t1"), ("local:c1+", "agent", "t1"), ("local:c1++", "sent", "local-turn:c1")]
    proj.add_native_entries([_entry({**user, "id": "x"}, "t2")])  # the submission's native copy
    assert sorted((r.id, r.text) for r in proj.records()) == [("local:c1", "nat"), ("local:c1+", "agent"), ("x", "q")]

    # the other order: the local submission first, then a native item with its key
    proj = Projector(TID)
    proj.add_local_submission("c1", "sent")
    proj.add_native_entries([_entry({"type": "agentMessage", "id": "local:c1", "text": "hi"})])
    assert [(r.id, r.text) for r in proj.records()] == [("local:c1", "hi"), ("local:c1+", "sent")]
    proj.add_native_entries([_entry(user)])
    assert [(r.id, r.text) for r in proj.records()] == [("local:c1", "hi"), ("a", "q")]



def test_r_h_1_the_native_copy_on_the_key_the_local_copy_holds_replaces_it_in_its_own_turn() -> None:
    """The local copy of ``c1``, keyed apart onto an id a page holds pending, then the page's
    copy of ``c1`` on that very id (found by hypothesis in ``..._never_break_the_store``): the
    local copy goes and the native one lands in its own turn, replacing the page's earlier item
    of that id (R-H-1). Before, the native record was upserted into the local entry, which
    merging the page's pending items had re-keyed meanwhile: an entry ``local:c1++`` held a
    record ``local:c1+``, and the two pending items joined the local turn."""

    def user(iid: str, client: str | None = None) -> dict[str, Any]:
        return {"type": "userMessage", "id": iid, "content": [{"type": "text", "text": iid}], "clientId": client}

    for follow in (False, True):
        proj = Projector(TID)
        proj.add_local_submission("c1", "sent")
        proj.add_native_turn({"id": "t1", "status": "completed",
                              "items": [user("local:c1+"), user("local:c1"), user("local:c1+", "c1")]},
                             items_follow=follow)
        _whole(proj)
        assert [(r.id, r.turn_id, r.client_id, r.source) for r in proj.records()] == [
            ("local:c1+", "t1", "c1", "native"), ("local:c1", "t1", None, "native")]
        assert proj._store.client_ids == {"c1": "local:c1+"}

def _whole(proj: Projector) -> None:
    """The store's invariants (R-H-1): every listed key has its entry, in that entry's turn;
    every entry is listed exactly once, under its record's id; no id, and no user message's
    ``clientId``, is shown twice."""
    store = proj._store
    listed = [(k, tid) for tid, t in store.turns.items() for k in t.keys]
    assert sorted(k for k, _ in listed) == sorted(store.entries), (listed, list(store.entries))
    for k, tid in listed:
        assert store.entries[k].key == k and store.entries[k].turn_id == tid
    records = proj.records()  # settles every deferred record
    assert all(e.record.id == k for k, e in store.entries.items())  # a record is known by its own id
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids)), ids
    clients = [r.client_id for r in records if isinstance(r, UserMessage) and r.client_id]
    assert len(clients) == len(set(clients)), clients


@settings(max_examples=3000, deadline=None)
@given(ops=st.lists(st.tuples(
    st.sampled_from(["turn", "entries", "item", "local", "delta"]),
    st.lists(st.tuples(st.sampled_from(["t1", "t2", "local-turn:c1"]),
                       st.sampled_from(["a", "b", "local:c1", "local:c1+"]),
                       st.sampled_from(["userMessage", "agentMessage", "reasoning"]),
                       st.sampled_from([None, "c1", "c2"]), st.booleans()), max_size=3)), max_size=6))
def test_r_h_1_hostile_ids_never_break_the_store(ops: list[Any]) -> None:
    """Ids shared across item types, turns and clientIds, native ids like local keys, in any
    order and batching: the store stays whole after every step."""
    proj = Projector(TID)
    for op, spec in ops:
        items = [({"type": kind, "id": iid, "content": [{"type": "text", "text": iid}], "clientId": cid}
                  if kind == "userMessage" else {"type": kind, "id": iid, "text": iid}, tid, follow)
                 for tid, iid, kind, cid, follow in spec]
        if op == "turn" and items:
            proj.add_native_turn({"id": items[0][1], "status": "completed", "items": [i for i, _, _ in items]},
                                 items_follow=items[0][2])
        elif op == "entries":
            proj.add_native_entries([{"turnId": tid, "item": i} for i, tid, _ in items])
        elif op == "item" and items:
            proj.add_native_item(items[0][1], items[0][0], completed=items[0][2])
        elif op == "local":
            proj.add_local_submission(spec[0][3] or "c1" if spec else "c1", "sent")
        elif op == "delta" and items:
            proj.add_delta(items[0][1], items[0][0]["id"], "+")
        _whole(proj)
