"""R-H-1 / issue 34: the native feed's five fast paths — a turn's plain messages appended as
deferred records (``NativeFeed._append_deferred``, ``add_native_turn(items_follow=True)``),
``thread/items/list`` entries that replace stored messages of their own turn
(``NativeFeed._replace_known``), entries that are all new plain messages
(``NativeFeed._append_new``: the items walk after a turns walk that loaded no items) and the same
given as the page's JSON text, decoded into structs (``NativeFeed._append_plain``: what
``read_thread``'s walk hands over), and a ``thread/turns/list`` page of turns without items given
as its JSON text, decoded into structs (``NativeFeed._add_item_less``: ``read_thread``'s turns
walk) — leave the projector exactly as the general path
(``_add_batch``) leaves it: the same records shown and the same store behind them (turn order
and keys, every entry's record, flags, times and deltas, the ``clientId`` bookkeeping), after
every step of any mix of turns, entries, live items, deltas and local submissions. The
reference projector has the fast paths turned off and is given every page decoded."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._paging import RawPageData
from codexrt._sansio._projection import Projector

TID = "0190cccc-0000-7000-8000-000000000004"
IDS = ["a", "b", "c", "local:c1"]
TURNS = ["t1", "t2", "t3"]
CLIENTS = ["c1", "c2", "", None, 5]
TEXTS = ["q", "r", "# Files mentioned by the user:\n## a.png: /tmp/a.png\n## My request for Codex:\nlook"]


def _general(proj: Projector) -> Projector:
    """``proj`` with the fast paths off: every batch takes ``_add_batch``."""
    proj._native._append_deferred = lambda turn_id, items: False  # type: ignore[method-assign]
    proj._native._replace_known = lambda entries: False  # type: ignore[method-assign]
    proj._native._append_new = lambda entries: False  # type: ignore[method-assign]
    proj._native._append_plain = lambda raw: False  # type: ignore[method-assign]
    proj._native._add_item_less = lambda raw: False  # type: ignore[method-assign]
    return proj


def _state(proj: Projector) -> Any:
    store = proj._store
    store.settle()
    return (proj.turns(), list(store.order), {k: attrs.astuple(t, recurse=False) for k, t in store.turns.items()},
            {k: attrs.astuple(e, recurse=False) for k, e in store.entries.items()}, dict(store.client_ids))


def _run(ops: list[Any], fast: bool, proj: Projector | None = None,
         check: Callable[[Projector], None] | None = None) -> list[Any]:
    """The states seen along ``ops`` (a ``look``, a step that raised, the end); ``check(proj)``
    after every step."""
    proj = Projector(TID) if proj is None else proj
    if not fast:
        _general(proj)
    out: list[Any] = []
    for op, *args in ops:
        if check is not None:
            check(proj)
        try:
            if op == "turn":
                proj.add_native_turn(args[0], items_follow=args[1])
            elif op == "turns":  # a turns walk's page, as its JSON text (the reference: one turn at a time)
                text = args[0] if isinstance(args[0], bytes) else msgspec.json.encode(args[0])
                if fast:
                    proj.add_native_turns(RawPageData(text), items_follow=args[1])
                else:
                    for t in RawPageData(text).dicts():
                        if isinstance(t, dict):
                            proj.add_native_turn(t, items_follow=args[1])
            elif op == "entries":  # as JSON text too: a walk's page, decoded by the feed
                as_text = fast and len(args) > 1 and args[1]
                # spaced (``"type": "image"``), the text's own check of item types passes it on to the structs
                page = json.dumps(args[0]).encode() if as_text == "spaced" else msgspec.json.encode(args[0])
                proj.add_native_entries(RawPageData(page) if as_text else msgspec.json.decode(page))
            elif op == "item":
                proj.add_native_item(args[0], args[1], completed=args[2], received_at_ms=args[3])
            elif op == "delta":
                proj.add_delta(*args)
            elif op == "local":
                proj.add_local_submission(args[0], "sent")
            elif op == "tid":  # the thread id known late (a rollout's session_meta): stored records lack it
                proj.thread_id = args[0]
            else:  # a look settles the deferred records early, as a reader showing a page does
                out.append(_state(proj))
        except Exception as exc:  # the same error at the same step
            out.append(("raises", len(out), type(exc)))
    out.append(_state(proj))
    return out


@st.composite
def messages(draw: Any) -> Any:
    """Plain messages (what the fast paths take) with every id, ``clientId`` and time they
    could meet, and now and then an item they leave to the general path."""
    kind = draw(st.sampled_from(["userMessage", "agentMessage"] * 6 + ["reasoning", "contextCompaction"]))
    item: dict[str, Any] = {"type": kind, "id": draw(st.sampled_from(IDS))}
    if kind == "userMessage":
        item["content"] = [{"type": draw(st.sampled_from(["text"] * 5 + ["image", 3])),
                            "text": draw(st.sampled_from(TEXTS))} for _ in range(draw(st.sampled_from([1, 1, 1, 0, 2])))]
        if draw(st.integers(0, 5)) == 0:  # a block the records do not show, or one the structs refuse
            item["content"].append(draw(st.sampled_from([
                {"type": "mention", "name": "m", "path": "/p", "text": "not shown"},
                {"type": "image", "url": "https://example.invalid/a.png"},
                {"type": "text", "text": None}, {"type": "text"}])))
        if draw(st.booleans()):
            item["clientId"] = draw(st.sampled_from(CLIENTS))
    elif kind == "agentMessage":
        if draw(st.integers(0, 7)):  # else its text is in another field, or nowhere
            item["text"] = draw(st.sampled_from(["hi", "yo", ""]))
        elif draw(st.booleans()):
            item["content"] = [{"type": "text", "text": "in content"}]
        if draw(st.booleans()):
            item["phase"] = draw(st.sampled_from(["final_answer", None]))
    if draw(st.booleans()):
        item["startedAtMs"] = draw(st.sampled_from([1, 7, None, True, 1.5]))
    if draw(st.booleans()):
        item["completedAtMs"] = draw(st.sampled_from([2, 9, None]))
    if draw(st.integers(0, 7)) == 0:  # a field the structs do not name
        item["extra"] = 1
    return item


#: per ``Turn`` field: values of its schema type, values of another, values the general path reads its own way
TURN_FIELDS: dict[str, list[Any]] = {
    "id": TURNS * 3 + ["local-turn:c1", "", 5, None],
    "status": ["completed", "completed", "interrupted", "failed", "inProgress", "in_progress", "Cancelled", "weird",
               None, {"type": "completed"}],
    "itemsView": ["notLoaded", "notLoaded", "full", None, 3],
    "error": [None, None, {"message": "boom", "codexErrorInfo": None}, "text", []],
    "startedAt": [1, 1764400000, None, True, 1.5, -3, 2**70],
    "completedAt": [2, None, False, 2.0],
    "durationMs": [1, None, "1"],
    "rootTurnId": ["t1", None, 7],
    "extra": [1, None],  # a field the schema does not name (rarely drawn)
}


@st.composite
def turn_pages(draw: Any) -> Any:
    """A ``thread/turns/list`` page: turns with or without each field, now and then one with
    items, a value of another type, or an entry that is not an object."""
    page: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 15)) == 0:
            page.append(draw(st.sampled_from([None, 3, "t1", []])))
            continue
        turn: dict[str, Any] = {}
        for name, values in TURN_FIELDS.items():
            present = draw(st.integers(0, 12)) == 0 if name == "extra" else draw(st.integers(0, 3)) > 0
            if present:  # most fields present, "extra" rarely
                turn[name] = draw(st.sampled_from(values))
        turn["items"] = [] if draw(st.integers(0, 5)) else draw(st.lists(messages(), max_size=2))
        if draw(st.integers(0, 9)) == 0:
            del turn["items"]
        page.append(turn)
    return page


@st.composite
def operations(draw: Any) -> Any:
    ops: list[Any] = []
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["turn", "turn", "turns", "turns", "entries", "entries", "entries", "item", "delta",
                                   "local", "look", "tid"]))
        if op == "tid":
            ops.append(("tid", draw(st.sampled_from([TID, "0190cccc-0000-7000-8000-000000000005", None]))))
        elif op == "turns":
            ops.append(("turns", draw(turn_pages()), draw(st.booleans())))
        elif op == "turn":
            turn = {"id": draw(st.sampled_from(TURNS)), "status": draw(st.sampled_from(["completed", "interrupted"])),
                    "items": draw(st.lists(messages(), max_size=3))}
            ops.append(("turn", turn, draw(st.booleans())))
        elif op == "entries":
            page = []
            for _ in range(draw(st.integers(0, 3))):
                e: dict[str, Any] = {"turnId": draw(st.sampled_from(TURNS * 3 + ["t4", "local-turn:c1"])),
                                     "item": draw(messages())}
                if draw(st.booleans()):
                    e["startedAtMs"], e["completedAtMs"] = draw(st.sampled_from([(3, 4), (None, 5), (6, None)]))
                if draw(st.integers(0, 5)) == 0:
                    e["outputDeferred"] = True
                page.append(e)
            ops.append(("entries", page, draw(st.sampled_from([False, "compact", "spaced"]))))
        elif op == "item":
            ops.append(("item", draw(st.sampled_from(TURNS)), draw(messages()), draw(st.booleans()),
                        draw(st.sampled_from([None, 11]))))
        elif op == "delta":
            ops.append(("delta", draw(st.sampled_from(TURNS)), draw(st.sampled_from(IDS)), "+"))
        elif op == "local":
            ops.append(("local", draw(st.sampled_from(["c1", "c2"]))))
        else:
            ops.append(("look",))
    return ops


@settings(max_examples=3000, deadline=None)
@given(ops=operations())
def test_r_h_1_the_fast_paths_leave_the_store_as_the_general_path_does(ops: list[Any]) -> None:
    assert _run(ops, fast=True) == _run(ops, fast=False)


def _finished_as_finish_makes_it(proj: Projector) -> None:
    store = proj._store
    store.settle()
    for t in store.turns.values():
        for shown in (None, "unknown"):
            assert store.finished(t, shown) == [store.finish(e, t, shown) for e in store.visible(t)]


@settings(max_examples=1000, deadline=None)
@given(ops=operations(), thread=st.sampled_from([TID, None]), redact=st.booleans())
def test_r_h_4_a_turns_records_are_those_finish_makes(ops: list[Any], thread: str | None, redact: bool) -> None:
    """``RecordStore.finished`` (what ``turns()`` shows of a turn on the native path) takes an
    entry's record as stored only where ``finish`` would give it unchanged (issue 34): open and
    incomplete entries, compaction boundaries, a record without the thread id (the projector
    made without one, its thread id set later by a ``tid`` step), redaction."""
    proj = Projector(thread, redact=(lambda s: s.upper()) if redact else None)
    command = {"type": "commandExecution", "id": "cmd", "command": "ls", "status": "inProgress"}
    _run([*ops, ("item", "t1", {"type": "contextCompaction", "id": "cc"}, False, 11),
          ("item", "t2", command, True, None)],  # complete, and open: still in progress
         True, proj, _finished_as_finish_makes_it)
    _finished_as_finish_makes_it(proj)


EMPTY = {"id": "t1", "status": "completed", "items": [], "itemsView": "notLoaded"}
TURN = {"id": "t1", "status": "completed", "items": [
    {"type": "userMessage", "id": "u", "clientId": "c1", "content": [{"type": "text", "text": "q"}], "startedAtMs": 5},
    {"type": "agentMessage", "id": "m", "text": "a", "completedAtMs": 6}]}


def _entry(item: dict[str, Any], turn: str = "t1", **times: int) -> dict[str, Any]:
    return {"turnId": turn, "item": item, **times}


CASES: dict[str, list[Any]] = {
    # each precondition of _replace_known, and each effect it must have
    "the items walk repeats the turn": [("turn", TURN, True), ("entries", [_entry(i) for i in TURN["items"]])],
    "an entry of another turn": [("turn", TURN, True), ("entries", [_entry(TURN["items"][1], "t2")])],
    "an entry of a turn not seen": [("turn", TURN, True), ("entries", [_entry(TURN["items"][1], "t9")])],
    "a clientId registered elsewhere": [
        ("turn", TURN, True), ("turn", {"id": "t2", "items": [{**TURN["items"][0], "id": "u2"}]}, True),
        ("entries", [_entry(TURN["items"][0])])],
    "a new clientId": [("turn", TURN, True), ("entries", [_entry({**TURN["items"][0], "clientId": "c9"})])],
    "a time missing keeps the old": [("turn", TURN, True),
                                     ("entries", [_entry({**TURN["items"][0], "startedAtMs": None}, completedAtMs=8)])],
    "an open item with deltas completed": [
        ("item", "t1", {"type": "agentMessage", "id": "m", "text": ""}, False, 11), ("delta", "t1", "m", "par"),
        ("entries", [_entry(TURN["items"][1])])],
    "a started copy after a completed one": [("turn", TURN, True), ("item", "t1", TURN["items"][1], False, None)],
    "a native id like a local submission's key": [
        ("local", "c1"), ("entries", [_entry({"type": "agentMessage", "id": "local:c1", "text": "hi"}, "local-turn:c1")])],
    # each precondition of _append_deferred
    "a local submission first": [("local", "c1"), ("turn", TURN, True)],
    "a clientId twice in one turn": [("turn", {"id": "t1", "items": [TURN["items"][0], {**TURN["items"][0], "id": "v"}]},
                                      True)],
    "an id twice in one turn": [("turn", {"id": "t1", "items": [TURN["items"][1], {**TURN["items"][1], "text": "b"}]},
                                 True)],
    "an id another turn holds": [("turn", TURN, True), ("turn", {"id": "t2", "items": [TURN["items"][1]]}, True)],
    "a clientId another turn holds": [("turn", TURN, True),
                                      ("turn", {"id": "t2", "items": [{**TURN["items"][0], "id": "w"}]}, True)],
    # each precondition of _append_new, and each effect it must have
    "the items walk after turns without items": [("turn", EMPTY, True), ("turn", {**EMPTY, "id": "t2"}, True),
                                                 ("entries", [_entry(TURN["items"][0], startedAtMs=3),
                                                              _entry(TURN["items"][1], "t2", completedAtMs=4)])],
    "new entries of turns not seen, interleaved": [
        ("entries", [_entry(TURN["items"][0], "t9"), _entry({**TURN["items"][1], "id": "n"}, "t8"),
                     _entry(TURN["items"][1], "t9")])],
    "new entries after a known one of their turn": [("turn", TURN, True),
                                                    ("entries", [_entry({**TURN["items"][1], "id": "n"})])],
    "a new entry beside a known one": [("turn", TURN, True),
                                       ("entries", [_entry({**TURN["items"][1], "id": "n"}), _entry(TURN["items"][1])])],
    "an id twice in one page": [("turn", EMPTY, True), ("entries", [_entry(TURN["items"][1]),
                                                                    _entry({**TURN["items"][1], "text": "b"})])],
    "a clientId twice in one page": [("entries", [_entry(TURN["items"][0]),
                                                  _entry({**TURN["items"][0], "id": "v"}, "t2")])],
    "a clientId a stored entry holds": [("turn", TURN, True),
                                        ("entries", [_entry({**TURN["items"][0], "id": "w"}, "t2")])],
    "a clientId of a local submission": [("local", "c1"), ("entries", [_entry(TURN["items"][0])])],
    "an entry of a local turn": [("entries", [_entry(TURN["items"][1], "local-turn:c1")])],
    "a clientId registered to a key the page stores first": [  # helper-34: c2 left on "y", then "y" stored
        ("item", "t1", {**TURN["items"][0], "id": "y", "clientId": "c1"}, True, None),
        ("item", "t1", {**TURN["items"][0], "id": "y", "clientId": "c2"}, True, None),
        ("item", "t1", {**TURN["items"][0], "id": "z", "clientId": "c1"}, True, None),
        ("entries", [_entry({**TURN["items"][1], "id": "y"}, "t2"),
                     _entry({**TURN["items"][0], "id": "q", "clientId": "c2"}, "t3")])],
    # _add_item_less: what the structs decline is left to the plain decode, which decides as before
    "a turns page, then its items": [("turns", [EMPTY, {**EMPTY, "id": "t2", "error": {"message": "m"}}], True),
                                     ("entries", [_entry(TURN["items"][0]), _entry(TURN["items"][1], "t2")])],
    "a turns page repeating a turn": [("turn", TURN, True), ("turns", [{**EMPTY, "status": "failed"}, EMPTY], True)],
    "a number out of range in a field the schema does not name": [
        ("turns", b'[{"id":"t1","status":"completed","items":[],"x":1e400}]', True)],
    "a number out of range in a named field": [("turns", b'[{"id":"t1","items":[],"durationMs":1e400}]', True)],
    "a key twice": [("turns", b'[{"id":"t1","id":"t2","status":"failed","status":"completed","items":[]}]', True)],
    "a turn with items": [("turns", [EMPTY, TURN], True), ("entries", [_entry(i) for i in TURN["items"]])],
    "text that is not a page": [("turns", b'[{"id":"t1","items":[]}', True)],
    "items null, items spaced, items out of range": [
        ("turns", b'[{"id":"t1","items":null},{"id":"t2","status":"failed","items":[ ]}]', True),
        ("turns", b'[{"id":"t3","items":[1e400]}]', True)],
    "an entry the fast paths leave": [("entries", [_entry(TURN["items"][1]),
                                                   _entry({"type": "reasoning", "id": "r", "summary": ["s"]})])],
}


def test_r_h_1_each_fast_path_case_leaves_the_store_as_the_general_path_does() -> None:
    for name, ops in CASES.items():
        ops = [*ops, ("local", "c1"), ("local", "c9"), ("delta", "t1", "m", "+")]
        assert _run(ops, fast=True) == _run(ops, fast=False), name
        for form in ("compact", "spaced"):  # each page as a walk hands it over
            as_text = [(*op, form) if op[0] == "entries" else op for op in ops]
            assert _run(as_text, fast=True) == _run(ops, fast=False), (name, form)


def test_r_h_1_the_fast_paths_are_taken() -> None:
    """The common case takes them (so the tests above compare two different paths)."""
    taken: list[str] = []
    proj = Projector(TID)
    feed = proj._native
    for name in ("_append_deferred", "_replace_known", "_append_new", "_append_plain", "_add_item_less"):
        real = getattr(feed, name)

        def spy(*args: Any, _real: Any = real, _name: str = name) -> bool:
            ok = _real(*args)
            taken.append(f"{_name}:{ok}")
            return bool(ok)

        setattr(feed, name, spy)
    proj.add_native_turn(TURN, items_follow=True)
    proj.add_native_entries([_entry(i) for i in TURN["items"]])
    assert taken == ["_append_deferred:True", "_replace_known:True"]
    assert [r.text for r in proj.records()] == ["q", "a"]
    taken.clear()
    proj.add_native_turn({**EMPTY, "id": "t2"}, items_follow=True)  # read_thread's turns walk: no items
    proj.add_native_entries([_entry({**i, "id": i["id"] + "2", "clientId": None}, "t2") for i in TURN["items"]])
    assert taken == ["_replace_known:False", "_append_new:True"]
    assert [r.text for r in proj.records()] == ["q", "a", "q", "a"]
    taken.clear()
    proj.add_native_turn({**EMPTY, "id": "t3"}, items_follow=True)  # the same page as read_thread's walk hands it over
    page = msgspec.json.encode([_entry({**i, "id": i["id"] + "3", "clientId": None}, "t3") for i in TURN["items"]])
    proj.add_native_entries(RawPageData(page))
    assert taken == ["_append_plain:True"]
    assert [r.text for r in proj.records()] == ["q", "a", "q", "a", "q", "a"]
    taken.clear()
    proj.add_native_entries(RawPageData(page))  # known ids: declined, decoded, replaced
    assert taken == ["_append_plain:False", "_replace_known:True"]
    taken.clear()
    turns = [{**EMPTY, "id": "t4", "startedAt": 3, "rootTurnId": "t4", "durationMs": 2},
             {**EMPTY, "id": "t5", "status": "failed", "error": {"message": "boom"}}]
    proj.add_native_turns(RawPageData(msgspec.json.encode(turns)))  # read_thread's turns walk
    assert taken == ["_add_item_less:True"]
    assert [(g.turn_id, g.status, g.started_at) for g in proj.turns()][-2:] == [("t4", "completed", 3), ("t5", "failed", None)]
    taken.clear()
    proj.add_native_turns(RawPageData(msgspec.json.encode([{**TURN, "id": "t6"}])), items_follow=True)  # items: declined
    assert taken == ["_add_item_less:False", "_append_deferred:False"]



_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                     | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                         st.sampled_from([*TURN_FIELDS, "items", "x"]), inner, max_size=5),
                     max_leaves=12)


@settings(max_examples=2000, deadline=None)
@given(page=st.lists(_JSON | st.fixed_dictionaries({}, optional={k: _JSON for k in (*TURN_FIELDS, "items")}),
                     max_size=4))
def test_r_h_1_any_turns_page_is_read_as_the_general_path_reads_it(page: list[Any]) -> None:
    """Any JSON array as a turns walk's page (any values, any of the Turn's fields): the struct
    path leaves the projector as the general path does, or raises what it raises."""
    ops = [("turns", page, True), ("look",)]
    assert _run(ops, fast=True) == _run(ops, fast=False)
