"""R-H-1 / R-H-4 / issue 34: ``Projector.add_native_turn(turn, items_follow=True)`` — what
``HistoryReader.read_thread`` feeds its ``thread/turns/list`` walk with, before the
``thread/items/list`` walk feeds the same items again — shows exactly what the projector showed
when every turn item was projected on arrival: the same turns, records, order, times, statuses,
the same ``clientId`` bookkeeping (local submissions) and the same error at the same step.
Checked on generated threads (repeated ids and ``clientId``s, items the items walk lacks or puts
in another turn or order, failed and interrupted turns, compaction times, malformed items,
hooks), on the recorded native threads (``tests/data/rollouts/*.native.json``), on the recorded
real session's pages and on the flood peer's synthetic thread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._projection import AssistantMessage, Projector, UserMessage

TID = "0190cccc-0000-7000-8000-000000000003"
DATA = Path(__file__).resolve().parent.parent / "data"


def _redact(s: str) -> str:
    return s.replace("secret", "[REDACTED]")


def _mask(r: Any) -> Any:
    return attrs.evolve(r, text=r.text.upper()) if isinstance(r, (UserMessage, AssistantMessage)) else r


HOOKS: dict[str, dict[str, Any]] = {"none": {}, "redact": {"redact": _redact}, "mask": {"mask": _mask}}


def _state(proj: Projector) -> Any:
    """The store behind what a projector shows, records made: every turn (order, keys, status,
    times, error), every entry (its record, turn, flags, channel, times, deltas) and the
    ``clientId`` bookkeeping — state no record shows yet (a plain message's times, a
    ``clientId`` a later local submission meets) is compared too."""
    store = proj._store
    store.settle()
    return (list(store.order), {k: attrs.astuple(t, recurse=False) for k, t in store.turns.items()},
            {k: attrs.astuple(e, recurse=False) for k, e in store.entries.items()}, dict(store.client_ids))


def _feed(turn_pages: list[list[Any]], entry_pages: list[list[Any]], locals_: list[tuple[str, str]],
          follow: bool, hooks: str = "none", live: list[tuple[str, str, str]] = ()) -> list[Any]:
    """What a projector shows, step by step: after the turns, after the entries and local
    submissions, after live deltas; an error ends the list with the step and its type."""
    proj = Projector(TID, **HOOKS[hooks])
    out: list[Any] = []
    try:
        for page in turn_pages:
            for t in page:
                if isinstance(t, dict):
                    proj.add_native_turn(t, items_follow=follow) if follow else proj.add_native_turn(t)
        out.append(("turns", proj.turns(), _state(proj)))
        for page in entry_pages:
            proj.add_native_entries(page)
        for cid, text in locals_:
            proj.add_local_submission(cid, text)
        out.append(("entries", proj.turns(), _state(proj)))
        for turn_id, item_id, delta in live:
            proj.add_delta(turn_id, item_id, delta)
        out.append(("live", proj.turns(), _state(proj)))
    except Exception as exc:  # the same error at the same step
        out.append(("raises", len(out), type(exc)))
    return out


def _both_agree(turn_pages: list[list[Any]], entry_pages: list[list[Any]], locals_: list[tuple[str, str]] = (),
                hooks: str = "none", live: list[tuple[str, str, str]] = ()) -> None:
    """The check itself, in the order ``read_thread`` feeds (turns only read after the entries:
    a reader looks once, so the deferred path is also checked without the early look)."""
    args = (turn_pages, entry_pages, list(locals_))
    assert _feed(*args, follow=True, hooks=hooks, live=list(live)) == _feed(*args, follow=False, hooks=hooks,
                                                                             live=list(live))
    once = []
    for follow in (True, False):
        proj = Projector(TID, **HOOKS[hooks])
        try:
            for page in turn_pages:
                for t in page:
                    if isinstance(t, dict):
                        proj.add_native_turn(t, items_follow=follow)
            for page in entry_pages:
                proj.add_native_entries(page)
            for cid, text in locals_:
                proj.add_local_submission(cid, text)
            once.append(("records", proj.turns(), _state(proj)))
        except Exception as exc:
            once.append(("raises", type(exc)))
    assert once[0] == once[1]


# -- generated threads ------------------------------------------------------------------------

IDS = ["a", "b", "c", "d", "local:c1"]
TURNS = ["t1", "t2", "t3"]


@st.composite
def items(draw: Any) -> Any:
    """Mostly messages (the deferred kind), with every shape that makes the store do more."""
    shape = draw(st.integers(0, 40))
    if shape == 0:
        return draw(st.none() | st.integers(0, 2) | st.text(max_size=2))  # not an object
    kind = draw(st.sampled_from(["userMessage", "agentMessage"] * 4 + ["reasoning", "commandExecution",
                                                                        "contextCompaction", "collabAgentToolCall"]))
    item: dict[str, Any] = {"type": kind, "id": draw(st.sampled_from(IDS))}
    if kind == "userMessage":
        block = st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.sampled_from(["q", "a secret", ""])}),
            st.fixed_dictionaries({"type": st.sampled_from(["image", "localImage"]),
                                   "url": st.sampled_from(["data:image/png;base64,AA", "file:///x.png"])}),
            st.fixed_dictionaries({"type": st.sampled_from([["text"], {"t": 1}, 3, None]),  # odd block types
                                   "text": st.just("odd")}),
            st.integers(0, 1))
        item["content"] = draw(st.lists(block, max_size=2) | st.sampled_from([None, "text", {}]))
        if draw(st.booleans()):
            item["clientId"] = draw(st.sampled_from(["c1", "c2", "", None, 5]))
    elif kind == "agentMessage":
        item[draw(st.sampled_from(["text", "content"]))] = draw(st.sampled_from(["hi", "a secret", ""]))
    elif kind == "collabAgentToolCall":
        item["receiverThreadIds"] = draw(st.sampled_from([["x"], 5]))  # 5: projecting it raises
    else:
        item["status"] = draw(st.sampled_from(["completed", "inProgress", None]))
    if draw(st.booleans()):
        item["startedAtMs"] = draw(st.sampled_from([1, 7, None]))
    if draw(st.booleans()):
        item["completedAtMs"] = draw(st.sampled_from([2, 9, None]))
    if draw(st.integers(0, 12)) == 0:
        item["status"] = "inProgress"  # a message never has one: ignored
    return item


@st.composite
def threads(draw: Any) -> Any:
    pool = draw(st.lists(items(), min_size=1, max_size=8))
    turn_pages = []
    for _ in range(draw(st.integers(0, 2))):
        page: list[Any] = []
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.integers(0, 15)) == 0:
                page.append(draw(st.none() | st.integers(0, 1)))
                continue
            turn: dict[str, Any] = {"id": draw(st.sampled_from(TURNS)),
                                    "status": draw(st.sampled_from(["completed", "failed", "interrupted",
                                                                    "inProgress"]))}
            if draw(st.booleans()):
                turn["startedAt"], turn["completedAt"] = draw(st.sampled_from([(1, 2), (None, 3), (4, None)]))
            if turn["status"] == "failed" and draw(st.booleans()):
                turn["error"] = {"message": "boom"}
            turn["items"] = draw(st.lists(st.sampled_from(pool), max_size=4) | st.sampled_from([None, "x"]))
            page.append(turn)
        turn_pages.append(page)
    entry_pages = []
    for _ in range(draw(st.integers(0, 3))):
        page = []
        for _ in range(draw(st.integers(0, 4))):
            e: dict[str, Any] = {"turnId": draw(st.sampled_from(TURNS + ["t4"])), "item": draw(st.sampled_from(pool))}
            if draw(st.booleans()):
                e["startedAtMs"], e["completedAtMs"] = draw(st.sampled_from([(3, 4), (None, 5), (6, None)]))
            if draw(st.integers(0, 6)) == 0:
                e["outputDeferred"] = True
            page.append(e)
        entry_pages.append(page)
    locals_ = draw(st.lists(st.tuples(st.sampled_from(["c1", "c2"]), st.just("sent")), max_size=2))
    live = draw(st.lists(st.tuples(st.sampled_from(TURNS), st.sampled_from(IDS), st.just("+")), max_size=2))
    return turn_pages, entry_pages, locals_, live


@settings(max_examples=1500, deadline=None)
@given(thread=threads(), hooks=st.sampled_from(sorted(HOOKS)))
def test_r_h_1_turn_items_that_follow_show_what_projecting_them_showed(thread: Any, hooks: str) -> None:
    turn_pages, entry_pages, locals_, live = thread
    _both_agree(turn_pages, entry_pages, locals_, hooks=hooks, live=live)


@settings(max_examples=400, deadline=None)
@given(thread=threads())
def test_r_h_1_turn_items_the_items_walk_repeats_exactly(thread: Any) -> None:
    """The common case of ``read_thread``: the items walk lists the turns' own items, page by
    page (every deferred record replaced), possibly cut short (a page limit: some never are)."""
    turn_pages, _entries, locals_, _live = thread
    entries = [{"turnId": t["id"], "item": i} for page in turn_pages for t in page
               if isinstance(t, dict) and isinstance(t.get("items"), list) for i in t["items"]]
    for cut in (len(entries), len(entries) // 2):
        _both_agree(turn_pages, [entries[:cut][k:k + 3] for k in range(0, cut, 3)], locals_)


def test_r_h_1_a_deferred_message_keeps_its_place_times_and_client_id() -> None:
    """The cases that make the store merge by anchors, keep an earlier time, re-key a local
    submission or close an open item — each where a deferred record is never replaced."""
    user = {"type": "userMessage", "id": "u", "clientId": "c1", "content": [{"type": "text", "text": "q"}],
            "startedAtMs": 5}
    agent = {"type": "agentMessage", "id": "m", "text": "a"}
    compaction = {"type": "contextCompaction", "id": "k"}
    turn = {"id": "t1", "status": "interrupted", "items": [user, compaction, agent]}
    cases = [
        ([[turn]], [[{"turnId": "t1", "item": {"type": "reasoning", "id": "r"}}, {"turnId": "t1", "item": agent}]]),
        ([[turn]], [[{"turnId": "t1", "item": {**user, "startedAtMs": None}}]]),  # keeps the turn item's time
        ([[turn]], [[{"turnId": "t2", "item": user}], [{"turnId": "t1", "item": agent}]]),  # another turn
        ([[turn]], [[{"turnId": "t1", "item": {**user, "id": "u2"}}]]),  # the same clientId, another id
        ([[turn], [{**turn, "id": "t2"}]], []),  # the same items in two turns
        ([[turn]], []),
        # projecting this turn item raises (a block type that is a list), its later copy does not
        ([[{"id": "t1", "items": [{"type": "userMessage", "id": "o", "content": [{"type": ["text"], "text": "x"}]}]}]],
         [[{"turnId": "t1", "item": {"type": "userMessage", "id": "o", "content": [{"type": "text", "text": "x"}]}}]]),
    ]
    for turn_pages, entry_pages in cases:
        _both_agree(turn_pages, entry_pages, [("c1", "sent"), ("c2", "sent")], live=[("t1", "m", "+")])
    # a local submission first, then its native copy only in a turn
    proj = [Projector(TID), Projector(TID)]
    for p, follow in zip(proj, (True, False)):
        p.add_local_submission("c1", "sent")
        p.add_native_turn(turn, items_follow=follow)
    assert proj[0].turns() == proj[1].turns()


# -- recorded threads --------------------------------------------------------------------------


def _recorded() -> list[tuple[str, list[list[Any]], list[list[Any]]]]:
    """(name, turn pages, entry pages) of every recorded native thread and the real session."""
    out = []
    for path in sorted((DATA / "rollouts").glob("*.native.json")):
        d = json.loads(path.read_text())
        for key in ("turnsFull", "readTurns"):
            turns = d.get(key) or []
            entries = d.get("itemsList") or [{"turnId": t.get("id"), "item": i} for t in turns
                                             for i in t.get("items") or ()]
            out.append((f"{path.name}:{key}", [turns], [entries[k:k + 5] for k in range(0, len(entries), 5)]))
    session: dict[str, list[list[Any]]] = {"thread/turns/list": [], "thread/items/list": []}
    for line in (DATA / "real-session-0.169.0.jsonl").read_text().splitlines():
        msg = json.loads(line)
        method = str(msg.get("id", "")).split("#")[0]
        if method in session and isinstance(msg.get("result"), dict):
            session[method].append(msg["result"]["data"])
    assert session["thread/turns/list"] and session["thread/items/list"]
    out.append(("real-session-0.169.0", session["thread/turns/list"], session["thread/items/list"]))
    return out


def test_r_h_1_recorded_threads_show_the_same() -> None:
    recorded = _recorded()
    assert len(recorded) > 60
    for name, turn_pages, entry_pages in recorded:
        for hooks in HOOKS:
            try:
                _both_agree(turn_pages, entry_pages, [("c1", "sent")], hooks=hooks)
            except AssertionError as exc:
                raise AssertionError(name) from exc


def test_r_h_1_the_flood_peers_thread_shows_the_same() -> None:
    from peer_fixtures.flood_peer import FloodPeer

    peer = FloodPeer.__new__(FloodPeer)
    peer.history_items = 401
    turn_pages, entry_pages = [], []
    for pages, fn, extra in ((turn_pages, peer.turns_page, {"sortDirection": "asc"}), (entry_pages, peer.items_page, {})):
        cursor = None
        while True:
            res = fn({"limit": 50, **extra, **({"cursor": cursor} if cursor else {})})
            pages.append(res["data"])
            cursor = res["nextCursor"]
            if cursor is None:
                break
    _both_agree(turn_pages, entry_pages)
    _both_agree(turn_pages, entry_pages[:3])  # a read cut short: most deferred records are made
