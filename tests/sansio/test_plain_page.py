"""R-H-4 / issue 34: the direct projection of a ``thread/items/list`` page of plain messages
(``Projector.page_records`` → ``plain_page_records``) gives exactly the records of the general
path — a fresh projector fed the page, then ``records()`` — or declines (None) and the
general path runs. Checked on generated pages (repeated ids and ``clientId``s, interleaved
turns, odd shapes, other item kinds), on the recorded real session's messages and on the flood
peer's synthetic thread, with ``redact`` and ``mask`` hooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._projection import AssistantMessage, Projector, UserMessage
from codexrt._sansio._projection._native_feed import plain_page_records

TID = "0190cccc-0000-7000-8000-000000000002"
DATA = Path(__file__).resolve().parent.parent / "data"


def _general(entries: list[Any], **hooks: Any) -> Any:
    proj = Projector(TID, **hooks)
    try:
        proj.add_native_entries([e for e in entries if isinstance(e, dict)])
        return ("records", proj.records())
    except Exception as exc:
        return ("raises", type(exc))


def _fast(entries: list[Any], **hooks: Any) -> Any:
    try:
        return ("records", Projector.page_records(TID, entries, **hooks))
    except Exception as exc:
        return ("raises", type(exc))


def _redact(s: str) -> str:
    return s.replace("secret", "[REDACTED]")


def _mask(r: Any) -> Any:
    return attrs.evolve(r, text=r.text.upper()) if isinstance(r, (UserMessage, AssistantMessage)) else r


_scalar = st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=3)


@st.composite
def message_entries(draw: Any) -> Any:
    """Mostly well-formed message entries, with the shapes that make the store do more."""
    shape = draw(st.integers(0, 30))
    if shape == 0:
        return draw(_scalar)  # not an object
    kind = draw(st.sampled_from(["userMessage", "agentMessage"] * 4 + ["reasoning", "commandExecution", "other"]))
    item: dict[str, Any] = {"type": kind, "id": draw(st.sampled_from(["a", "b", "c", "d", "e", "f", "", "local:x"]))}
    if kind == "userMessage":
        item["content"] = draw(st.lists(st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=6)}),
            st.fixed_dictionaries({"type": st.just("text"),
                                   "text": st.sampled_from(["a secret", "<environment_context>x</environment_context>",
                                                            "# AGENTS.md instructions for /w\n\nbody", "@f.py hi"])}),
            st.fixed_dictionaries({"type": st.sampled_from(["image", "localImage"]),
                                   "url": st.sampled_from(["data:image/png;base64,AA", "file:///x.png"])})),
            max_size=3))
        if draw(st.booleans()):
            item["clientId"] = draw(st.sampled_from(["c1", "c2", "", None, 5]))
    elif kind == "agentMessage":
        item[draw(st.sampled_from(["text", "content"]))] = draw(st.sampled_from(["hi", "a secret", ""]))
        if draw(st.booleans()):
            item["phase"] = draw(st.sampled_from(["final_answer", None, 3]))
    else:
        item["status"] = draw(st.sampled_from(["completed", "inProgress"]))
        item["command"] = "ls"
    if draw(st.integers(0, 20)) == 0:
        item["status"] = draw(st.sampled_from(["inProgress", "failed"]))  # a message never has one
    e: dict[str, Any] = {"turnId": draw(st.sampled_from(["t1", "t2", "t3", "local-turn:c1"] if shape == 1 else
                                                         ["t1", "t2", "t3"])), "item": item}
    if shape == 2:
        e["item"] = draw(_scalar)
    if shape == 3:
        del e["turnId"]
    if draw(st.booleans()):
        e["startedAtMs"], e["completedAtMs"] = 1, 2
    if draw(st.integers(0, 5)) == 0:
        e["outputDeferred"] = True
    return e


@settings(max_examples=500, deadline=None)
@given(entries=st.lists(message_entries(), max_size=10), hooks=st.sampled_from(["none", "redact", "mask", "both"]))
def test_r_h_4_page_records_equal_the_general_path(entries: list[Any], hooks: str) -> None:
    kw: dict[str, Any] = {"none": {}, "redact": {"redact": _redact}, "mask": {"mask": _mask},
                          "both": {"redact": _redact, "mask": _mask}}[hooks]
    assert _fast(entries, **kw) == _general(entries, **kw)


def _ids(n: int, turn_of: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        item = ({"type": "userMessage", "id": f"u{i}", "clientId": f"c{i}", "content": [{"type": "text", "text": f"q {i}"}]}
                if i % 2 == 0 else {"type": "agentMessage", "id": f"m{i}", "text": f"a {i}", "phase": None})
        out.append({"turnId": turn_of(i), "item": item, "startedAtMs": i, "completedAtMs": i})
    return out


def test_r_h_4_plain_pages_take_the_direct_path_and_others_decline() -> None:
    page = _ids(100, lambda i: f"turn-{i // 2}")
    got = plain_page_records(page, TID)
    assert got is not None and got == _general(page)[1] and len(got) == 100
    interleaved = _ids(6, lambda i: ["t1", "t2"][i % 2])  # a turn seen again later: grouped as the store does
    got = plain_page_records(interleaved, TID)
    assert got is not None and [r.id for r in got] == ["u0", "u2", "u4", "m1", "m3", "m5"]
    assert got == _general(interleaved)[1]
    for declined in (
        page + [page[0]],  # an id seen twice: upserted in place
        page + [{**page[0], "item": {**page[0]["item"], "id": "other"}}],  # a clientId seen twice: re-keyed
        page + [{"turnId": "t", "item": {"type": "reasoning", "id": "r"}}],  # another kind
        [{"turnId": "local-turn:c", "item": page[1]["item"]}],  # a turn the projector orders last
    ):
        assert plain_page_records(declined, TID) is None
        assert _fast(declined) == _general(declined)


def test_r_h_4_recorded_session_messages_and_flood_pages_agree() -> None:
    """The real 0.169.0 session's message items (``item/completed``) as pages, and the flood
    peer's synthetic thread (the bench's pages): direct path, same records."""
    items = []
    for line in (DATA / "real-session-0.169.0.jsonl").read_text().splitlines():
        msg = json.loads(line)
        params = msg.get("params")
        if msg.get("method") == "item/completed" and isinstance(params, dict):
            if params["item"].get("type") in ("userMessage", "agentMessage"):
                items.append({"turnId": params.get("turnId", ""), "item": params["item"]})
    assert items, "the recorded session has message items"
    assert plain_page_records(items, TID) is not None
    assert _fast(items) == _general(items)

    from peer_fixtures.flood_peer import FloodPeer

    peer = FloodPeer(0, 0, 0, 0, 0, history_items=250)
    cursor = None
    while True:
        res = peer.items_page({"limit": 100, **({"cursor": cursor} if cursor else {})})
        assert plain_page_records(res["data"], TID) is not None
        assert _fast(res["data"]) == _general(res["data"])
        cursor = res["nextCursor"]
        if cursor is None:
            break
