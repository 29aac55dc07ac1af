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

import msgspec

from codexrt._features._history_json import plain_page_json, record_to_json
from codexrt._sansio._privacy import Masker, PrivacyIndex
from codexrt._sansio._projection import AssistantMessage, Projector, UserMessage, plain_message_json
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
                                                            "# AGENTS.md instructions for /w\n\nbody", "@f.py hi",
                                                            # the wrappers the sanitizer strips (R-CTX-5)
                                                            "# Files mentioned by the user:\n## a.png: /tmp/a.png\n"
                                                            "## My request for Codex:\nlook",
                                                            "# Context from my IDE setup:\n## Active file: x.py\n"
                                                            "## My request for Codex:\n fix it ",
                                                            "do it\n\n# Context from my IDE setup:\n## Open tabs: y"])}),
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


def _json_agrees(entries: list[Any]) -> bool:
    """``plain_page_json`` (issue 34: messages written as JSON directly) declines exactly where
    the direct record path does, and otherwise writes the general path's JSON records, byte for
    byte (keys in the same order)."""
    got = plain_page_json(entries, TID)
    if got is None:
        return plain_page_records(entries, TID) is None
    kind, records = _general(entries)
    assert kind == "records"
    return msgspec.json.encode(got) == msgspec.json.encode([record_to_json(r) for r in records])


@settings(max_examples=500, deadline=None)
@given(entries=st.lists(message_entries(), max_size=10))
def test_r_h_4_page_json_equals_the_general_path(entries: list[Any]) -> None:
    assert _json_agrees(entries)


def test_r_h_4_page_json_on_every_message_shape() -> None:
    """Each shape the direct JSON writer handles or hands back, in one page: wrappers the
    sanitizer strips (R-CTX-5) with and without file mentions, an image, odd ``clientId`` and
    ``phase`` values, an agent message's ``content`` forms."""
    def user(i: int, *blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"turnId": f"t{i % 3}", "item": {"type": "userMessage", "id": f"u{i}", "content": list(blocks), **extra}}

    def text(t: str) -> dict[str, Any]:
        return {"type": "text", "text": t}

    page = [
        user(0, text("# Context from my IDE setup:\n## Active file: x.py\n## My request for Codex:\n fix it ")),
        user(1, text("# Files mentioned by the user:\n## a.png: /tmp/a.png\n## My request for Codex:\nlook")),
        user(2, text("do it\n\n# Context from my IDE setup:\n## Open tabs: y")),
        user(3, text("<external_codex_apps_open_page>p</external_codex_apps_open_page>hello")),
        user(4, text("see"), {"type": "image", "url": "data:image/png;base64,AA"}),
        user(5, text("a"), 7, text("b"), clientId=5),
        user(6, text("x"), clientId=""),
        user(7, clientId="c7"),
        {"turnId": "t1", "item": {"type": "agentMessage", "id": "m1", "content": [text("p"), {"text": 3}, text("q")],
                                  "phase": 3}},
        {"turnId": "t2", "item": {"type": "agentMessage", "id": "m2", "content": "whole", "phase": "final_answer"}},
        {"turnId": "t0", "item": {"type": "agentMessage", "id": "m3"}},
    ]
    assert _json_agrees(page)
    got = plain_page_json(page, TID)
    assert got is not None
    by_id = {r["id"]: r for r in got}
    assert by_id["u0"]["stripped"] == ["ide_context"] and by_id["u0"]["text"] == "fix it"
    assert by_id["u1"]["fileMentions"] == [{"name": "a.png", "path": "/tmp/a.png"}]
    assert by_id["u2"]["stripped"] == ["appended_ide_context"] and by_id["u3"]["stripped"] == ["apps_open_page"]
    assert len(by_id["u4"]["images"]) == 1 and by_id["u5"]["clientId"] is None and by_id["m1"]["phase"] is None


def test_r_priv_2_a_privacy_masker_leaves_messages_as_they_are() -> None:
    """What lets serve write a page of messages as JSON without the masker (issue 34)."""
    page = _ids(6, lambda i: f"turn-{i // 2}")
    page[0]["item"]["content"] = [{"type": "text", "text": "q"}, {"type": "image", "url": "file:///x.png"}]
    for index in (PrivacyIndex("s"), PrivacyIndex("s", problems=["lost"], conservative=True)):
        masker = Masker(index)
        for r in _general(page)[1]:
            assert masker.mask(r) is r


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
    assert _json_agrees(page) and _json_agrees(interleaved)
    for declined in (
        page + [page[0]],  # an id seen twice: upserted in place
        page + [{**page[0], "item": {**page[0]["item"], "id": "other"}}],  # a clientId seen twice: re-keyed
        page + [{"turnId": "t", "item": {"type": "reasoning", "id": "r"}}],  # another kind
        [{"turnId": "local-turn:c", "item": page[1]["item"]}],  # a turn the projector orders last
    ):
        assert plain_page_records(declined, TID) is None
        assert _fast(declined) == _general(declined)
        assert plain_page_json(declined, TID) is None


def recorded_message_entries() -> list[dict[str, Any]]:
    """The real 0.169.0 session's message items (``item/completed``) as page entries."""
    items = []
    for line in (DATA / "real-session-0.169.0.jsonl").read_text().splitlines():
        msg = json.loads(line)
        params = msg.get("params")
        if msg.get("method") == "item/completed" and isinstance(params, dict):
            if params["item"].get("type") in ("userMessage", "agentMessage"):
                items.append({"turnId": params.get("turnId", ""), "item": params["item"]})
    assert items, "the recorded session has message items"
    return items


def test_r_h_4_recorded_session_messages_and_flood_pages_agree() -> None:
    """The real 0.169.0 session's message items (``item/completed``) as pages, and the flood
    peer's synthetic thread (the bench's pages): direct path, same records."""
    items = recorded_message_entries()
    assert plain_page_records(items, TID) is not None
    assert _fast(items) == _general(items)
    assert _json_agrees(items) and plain_page_json(items, TID) is not None
    assert all(plain_message_json(e["item"], thread_id=TID, turn_id=e["turnId"]) is not None for e in items)

    from peer_fixtures.flood_peer import FloodPeer

    peer = FloodPeer(0, 0, 0, 0, 0, history_items=250)
    cursor = None
    while True:
        res = peer.items_page({"limit": 100, **({"cursor": cursor} if cursor else {})})
        assert plain_page_records(res["data"], TID) is not None
        assert _fast(res["data"]) == _general(res["data"])
        assert _json_agrees(res["data"]) and plain_page_json(res["data"], TID) is not None
        cursor = res["nextCursor"]
        if cursor is None:
            break


def test_r_h_1_an_item_twice_in_one_page_is_one_record() -> None:
    """R-H-1 (upsert, never duplicate): a page holding the same item id twice before any item
    the projector knew — in its first entries, or on a fresh projector — gives one record, the
    later copy's, in the first copy's place, its times merged; as when the first copy was known.
    Before, both were kept (found by a hostile page through serve, issue 34)."""
    def agent(i: str, text: str, **times: Any) -> dict[str, Any]:
        return {"turnId": "t1", "item": {"type": "agentMessage", "id": i, "text": text}, **times}

    page = [agent("m1", "first", startedAtMs=5), agent("m2", "x"), agent("m1", "later", completedAtMs=9)]
    proj = Projector(TID)
    proj.add_native_entries(page)
    got = proj.records()
    assert [(r.id, r.text) for r in got] == [("m1", "later"), ("m2", "x")]
    assert proj._store.entries["m1"].times[:2] == (5, 9)
    known = Projector(TID)
    known.add_native_entries(page[:1])
    known.add_native_entries(page)
    assert [(r.id, r.text) for r in known.records()] == [(r.id, r.text) for r in got]
    assert _fast(page) == _general(page)
