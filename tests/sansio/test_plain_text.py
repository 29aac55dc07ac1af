"""R-H-4 / issue 34: a ``thread/items/list`` page of plain messages made straight from its text
(``decode_page`` → ``page_records_json``) gives, byte for byte, the JSON records of the general
path — ``Projector.page_records`` then ``record_to_json`` — or declines (None) and the general
path runs; a page it accepts decodes the same way as a plain decode (no error hidden) and nests
no deeper than ``PAGE_MAX_DEPTH``, the bound serve relies on instead of walking the reply
(R-WIRE-5)."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._features._history_json import record_to_json
from codexrt._sansio._projection import (PAGE_MAX_DEPTH, RECORDS_DEPTH, PlainPage, Projector, decode_page,
                                         page_records_json)
from codexrt._sansio._projection import _plain_text
from codexrt._sansio._wire import json_depth_exceeds
from tests.sansio.test_plain_page import TID, message_entries, recorded_message_entries

def _general(data: Any) -> Any:
    """What serve's general path makes of the page's ``data``: its records' JSON text, or the
    error it raises."""
    try:
        return ("records", msgspec.json.encode([record_to_json(r) for r in Projector.page_records(TID, data)]))
    except Exception as exc:
        return ("raises", type(exc))


def _agrees(text: bytes) -> str:
    """Checks one page text; says which way it went."""
    page = decode_page(text)
    if page is None:
        return "declined"
    value = msgspec.json.decode(text)  # a page the typed decode takes decodes plainly too
    if page.has_own_records():
        return "own records"
    assert page.nextCursor == value.get("nextCursor") and len(page.data) == len(value["data"])
    assert not json_depth_exceeds(text, PAGE_MAX_DEPTH)
    got = page_records_json(page, TID)
    if got is None:
        return "declined"
    assert ("records", got) == _general(value["data"])
    assert not json_depth_exceeds(got, RECORDS_DEPTH)
    return "typed"


_odd = st.sampled_from([None, 0, -1, 2**70, 1.5, True, "x", [], {}, [[1]], {"a": {"b": [1]}}])


@st.composite
def page_texts(draw: Any) -> bytes:
    """Pages of mostly plain messages, in the shapes the pinned server writes and others: extra
    or odd fields at every level, text elements, cursors of every type, a number out of range."""
    entries = draw(st.lists(message_entries(), max_size=8))
    for e in entries:
        if not isinstance(e, dict):
            continue
        item = e.get("item")
        if isinstance(item, dict):
            for b in item.get("content") or ():
                if isinstance(b, dict) and draw(st.integers(0, 3)) == 0:
                    b["text_elements"] = draw(st.sampled_from(
                        [[], [{"byteRange": {"start": 0, "end": 1}}], [{"byteRange": {"start": 0, "end": 1},
                                                                        "placeholder": "p"}],
                         [{"byteRange": {"start": 0}}], [{"byteRange": [0, 1]}], "x"]))
            if draw(st.integers(0, 6)) == 0:
                item[draw(st.sampled_from(["moderation", "memoryCitation", "questions", "delivery", "clientId",
                                           "phase", "startedAtMs", "text", "id", "other"]))] = draw(_odd)
        if draw(st.integers(0, 8)) == 0:
            e[draw(st.sampled_from(["turnId", "startedAtMs", "outputDeferred", "other"]))] = draw(_odd)
        if draw(st.integers(0, 3)) == 0:  # no turn id (a run of them: review11)
            e.pop("turnId", None)
        if isinstance(item, dict) and draw(st.integers(0, 5)) == 0:
            item.pop("id", None)
    page: dict[str, Any] = {"data": entries}
    for key in ("nextCursor", "backwardsCursor", "source", "records", "other"):
        if draw(st.integers(0, 4)) == 0:
            page[key] = draw(_odd | st.just("c2"))
    text = msgspec.json.encode(page)
    if draw(st.integers(0, 10)) == 0:  # a number a plain decode refuses (it stays valid JSON grammar)
        text = text.replace(b'"startedAtMs":1', b'"startedAtMs":1e999', 1)
    return text


@st.composite
def plain_page_texts(draw: Any) -> bytes:
    """Pages of well-formed messages only (most take the typed path): turns interleaved or
    absent, ids absent or repeated, ``clientId``s, wrapped user text, several text blocks."""
    def entry(k: int) -> dict[str, Any]:
        # mostly unique ids and clientIds (a repeated one makes the page decline)
        iid = draw(st.sampled_from([None, "", "i0"])) if draw(st.integers(0, 7)) == 0 else f"i{k}"
        if draw(st.booleans()):
            item: dict[str, Any] = {"type": "agentMessage", "text": draw(st.text(max_size=4))}
            if draw(st.booleans()):
                item["phase"] = draw(st.sampled_from([None, "final_answer", "commentary"]))
        else:
            texts = st.text(max_size=4) | st.sampled_from([
                "# Context from my IDE setup:\n## Active file: x.py\n## My request for Codex:\n fix it ",
                "do it\n\n# Context from my IDE setup:\n## Open tabs: y", "<external_codex_apps_open_page>p"
                                                                          "</external_codex_apps_open_page>hi"])
            item = {"type": "userMessage", "content": [{"type": "text", "text": draw(texts), "text_elements": []}
                                                       for _ in range(draw(st.integers(0, 2)))]}
            if draw(st.booleans()):
                item["clientId"] = draw(st.sampled_from([None, "", "c0"])) if draw(st.integers(0, 5)) == 0 else f"c{k}"
        if iid is not None:
            item["id"] = iid
        e: dict[str, Any] = {"item": item}
        turn = draw(st.sampled_from([None, "", "t1", "t2", "t3"]))
        if turn is not None:
            e["turnId"] = turn
        return e

    data = [entry(k) for k in range(draw(st.integers(0, 12)))]
    return msgspec.json.encode({"data": data, "nextCursor": draw(st.sampled_from([None, "c"]))})


@settings(max_examples=1500, deadline=None)
@given(text=page_texts())
def test_r_h_4_typed_page_records_equal_the_general_path(text: bytes) -> None:
    _agrees(text)


@settings(max_examples=1500, deadline=None)
@given(text=plain_page_texts())
def test_r_h_4_typed_records_of_plain_pages_equal_the_general_path(text: bytes) -> None:
    _agrees(text)


def test_r_h_4_plain_pages_take_the_typed_path() -> None:
    """The flood peer's thread (the bench's pages), the recorded real session's message items
    and every field the pinned schema gives a message and a text block: typed, same records."""
    from peer_fixtures.flood_peer import FloodPeer

    peer = FloodPeer(0, 0, 0, 0, 0, history_items=250)
    cursor = None
    while True:
        res = peer.items_page({"limit": 100, **({"cursor": cursor} if cursor else {})})
        assert _agrees(msgspec.json.encode(res)) == "typed"
        cursor = res["nextCursor"]
        if cursor is None:
            break
    items = recorded_message_entries()
    assert _agrees(msgspec.json.encode({"data": items, "nextCursor": None})) == "typed"
    full = {"data": [
        {"turnId": "t1", "startedAtMs": 1, "completedAtMs": None, "outputDeferred": False,
         "item": {"type": "userMessage", "id": "u1", "clientId": "c1", "startedAtMs": 1, "completedAtMs": 2,
                  "content": [{"type": "text", "text": "hi", "text_elements": [
                      {"byteRange": {"start": 0, "end": 2}, "placeholder": None}]},
                      {"type": "skill", "name": "s", "path": "/s"}, {"type": "mention", "name": "m", "path": "/m"},
                      {"type": "audio", "url": "u"}, {"type": "localAudio", "path": "/a"}]}},
        {"turnId": "t1", "item": {"type": "agentMessage", "id": "m1", "text": "yes", "phase": "final_answer",
                                  "moderation": None, "memoryCitation": None, "delivery": "async",
                                  "questions": None}}],
        "nextCursor": "c", "backwardsCursor": "b"}
    assert _agrees(msgspec.json.encode(full)) == "typed"


def test_r_h_4_what_the_typed_path_declines() -> None:
    """Each declines (the general path decides, as before): a field no schema names, a rare
    object, a value of another type, an image, a file mention, an id seen twice, a text not in
    ``text``, a number out of range (which the plain decode refuses too)."""
    def page(**item: Any) -> bytes:
        return msgspec.json.encode({"data": [{"turnId": "t", "item": {"type": "agentMessage", "id": "m", "text": "a",
                                                                      **item}}]})

    base = page()
    assert _agrees(base) == "typed"
    for text in (page(extra=1), page(memoryCitation={"entries": [], "threadIds": []}), page(id=5), page(text=None),
                 page(phase=3), page(type="reasoning"), base.replace(b'"data"', b'"other":1,"data"'),
                 msgspec.json.encode({"data": [{"turnId": "t", "item": {"type": "userMessage", "id": "u", "content": [
                     {"type": "image", "url": "data:image/png;base64,AA"}]}}]}),
                 msgspec.json.encode({"data": [{"turnId": "t", "item": {"type": "userMessage", "id": "u", "content": [
                     {"type": "text", "text": "# Files mentioned by the user:\n## a.png: /tmp/a.png\n"
                                              "## My request for Codex:\nlook"}]}}]}),
                 msgspec.json.encode({"data": [{"turnId": "t", "item": {"type": "agentMessage", "id": "m",
                                                                        "text": "a"}}] * 2}),
                 msgspec.json.encode({"data": [{"turnId": "t", "item": {"type": "agentMessage", "id": "m",
                                                                        "content": "a"}}]}),
                 msgspec.json.encode({"data": [{"turnId": "t", "item": {"type": "agentMessage", "id": "m", "content": [
                     {"type": "text", "text": "a"}]}}]}),
                 msgspec.json.encode({"data": [_user("u1", "t", "c1"), _user("u2", "t", "c1")]}),  # re-keyed
                 msgspec.json.encode({"data": [{"turnId": "local-turn:c", "item": {"type": "agentMessage", "id": "m",
                                                                                  "text": "a"}}]})):
        assert _agrees(text) == "declined", text
    out_of_range = base.replace(b'"text":"a"', b'"text":"a","startedAtMs":1e999')
    assert decode_page(out_of_range) is None
    try:
        msgspec.json.decode(out_of_range)
    except msgspec.DecodeError:
        pass
    else:
        raise AssertionError("a plain decode refuses it too")


def _user(iid: str, turn: str, client: str | None = None) -> dict[str, Any]:
    return {"turnId": turn, "item": {"type": "userMessage", "id": iid, "clientId": client,
                                     "content": [{"type": "text", "text": f"q {iid}"}]}}


def test_r_h_4_typed_records_come_turn_by_turn() -> None:
    """Turns in the order they first appear, a turn's entries in page order, as the store
    groups them — also when a turn comes back later in the page."""
    data = [_user("u1", "t1", "c1"), _user("u2", "t2"), _user("u3", "t1", ""), _user("u4", "t3", "c4"),
            _user("u5", "t2", "c5"), {"item": {"type": "agentMessage", "id": "m6", "text": "a"}}]
    text = msgspec.json.encode({"data": data, "nextCursor": None})
    assert _agrees(text) == "typed"
    got = msgspec.json.decode(page_records_json(decode_page(text), TID))  # type: ignore[arg-type]
    assert [r["id"] for r in got] == ["u1", "u3", "u2", "u5", "u4", "m6"]
    assert [r["clientId"] for r in got[:5]] == ["c1", "", None, "c5", "c4"] and got[5]["turnId"] == ""


def test_r_h_4_entries_without_a_turn_id_or_an_id_in_a_row() -> None:
    """An entry without ``turnId`` is in turn ``""``, an item without ``id`` has id ``""``, as
    the general path reads them — also for the second such entry in a row (review11: its
    record lost its ``turnId`` key)."""
    def msg(i: str) -> dict[str, Any]:
        return {"item": {"type": "agentMessage", "id": i, "text": "x"}}

    for data in ([msg("a"), msg("b")], [msg("a"), msg("b"), {"turnId": "", **msg("c")}, msg("d")],
                 [{"turnId": "t", **msg("a")}, msg("b"), msg("c")],
                 [{"turnId": "t", "item": {"type": "agentMessage", "text": "x"}}, msg("b")]):
        text = msgspec.json.encode({"data": data})
        assert _agrees(text) == "typed"
        got = msgspec.json.decode(page_records_json(decode_page(text), TID))  # type: ignore[arg-type]
        assert all(r["turnId"] in ("", "t") and isinstance(r["id"], str) for r in got)


def _depth(t: Any) -> int:
    """How deep a value of msgspec type ``t`` nests (scalars 0)."""
    if isinstance(t, msgspec.inspect.StructType):
        fields = [f for f in t.fields if not (t.cls is PlainPage and f.name in ("source", "records"))]
        return 1 + max((_depth(f.type) for f in fields), default=0)
    if isinstance(t, (msgspec.inspect.ListType, msgspec.inspect.SetType, msgspec.inspect.VarTupleType)):
        return 1 + _depth(t.item_type)
    if isinstance(t, msgspec.inspect.UnionType):
        return max(_depth(x) for x in t.types)
    assert not isinstance(t, (msgspec.inspect.AnyType, msgspec.inspect.DictType)), t  # unbounded
    return 0


def test_r_wire_5_the_depth_bounds_follow_from_the_types() -> None:
    """``PAGE_MAX_DEPTH`` is the deepest nesting the page types allow (none is ``Any``, but
    ``source``/``records``, whose pages are never answered from the types); ``RECORDS_DEPTH``
    the records'."""
    assert _depth(msgspec.inspect.type_info(PlainPage)) == PAGE_MAX_DEPTH
    records = max(_depth(msgspec.inspect.type_info(c)) for c in (_plain_text._AssistantJson, _plain_text._UserJson))
    assert 1 + records == RECORDS_DEPTH  # the records' list


def _decode_entries_by_counts(text: bytes) -> Any:
    """``decode_entries`` as it was before its pre-check became one regex pass: the four
    ``bytes.count`` passes (issue 34)."""
    keys = (b'"type":"userMessage"', b'"type":"agentMessage"', b'"type":"text"')
    if text.count(b'"type":"') != sum(text.count(k) for k in keys):
        return None
    try:
        return _plain_text._entries_decoder.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None


_FRAGMENTS = [b'"type":"', b'userMessage"', b'agentMessage"', b'text"', b'textual"', b'image"', b'type":"',
              b'"type": "', b'{', b'}', b'[', b']', b',', b':', b'"item":', b'{"type":"agentMessage","id":"a","text":"x"}',
              b'"', b'\\"', b'a', b'"turnId":"t"', b'"content":[{"type":"text","text":"q"}]']


_TYPES = ["agentMessage", "userMessage", "text", "reasoning", "textual", "agentMessages", "image", 'x\\"type\\":\\"y']


@st.composite
def type_check_texts(draw: Any) -> bytes:
    """A page of entries whose items and blocks name types a page of messages has and has not,
    keys spaced or not, strings holding an escaped ``"type":"``; or fragments joined at random."""
    if draw(st.integers(0, 3)) == 0:
        body = b"".join(draw(st.lists(st.sampled_from(_FRAGMENTS), max_size=14)))
        return b'[{"item":' + body + b'}]' if draw(st.booleans()) else body
    entries = []
    for k in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(['"type":"', '"type":"', '"type":"', '"type": "']))
        kind = draw(st.sampled_from(_TYPES[:2] * 3 + _TYPES[2:]))
        if kind == "userMessage":
            blocks = ",".join(f'{{{draw(st.sampled_from([key, chr(34) + "type" + chr(34) + ":" + chr(34)]))}'
                              f'{draw(st.sampled_from(_TYPES[2:3] * 4 + _TYPES))}","text":"q"}}'
                              for _ in range(draw(st.integers(0, 2))))
            item = f'{{{key}userMessage","id":"u{k}","content":[{blocks}]}}'
        else:
            item = f'{{{key}{kind}","id":"a{k}","text":"{draw(st.sampled_from(_TYPES))}"}}'
        entries.append(f'{{"turnId":"t","item":{item}}}')
    return ("[" + ",".join(entries) + "]").encode()


@settings(max_examples=3000, deadline=None)
@given(text=type_check_texts())
def test_issue_34_the_type_pre_check_decides_as_the_counts_did(text: bytes) -> None:
    """``decode_entries`` looks for a ``"type":"…"`` other than a message's or a text block's
    with one regex pass: its answer (structs or None) is the one the four counts gave, for any
    text — overlapping keys, spaced keys, a key split across fragments, broken JSON."""
    assert _plain_text.decode_entries(text) == _decode_entries_by_counts(text)


def test_issue_34_the_type_pre_check_on_the_edges() -> None:
    item = b'{"turnId":"t","item":{"type":"agentMessage","id":"a","text":"x"}}'
    for text in (b"[" + item + b"]", b"[" + item.replace(b"agentMessage", b"agentMessages") + b"]",
                 b'["type":"type":"text"]', b'[{"item":{"type":"type":"text"}}]', b'[{"item":{"type": "reasoning"}}]',
                 b"[" + item + b',{"turnId":"t","item":{"type":"userMessage","id":"u","content":[{"type":"image"}]}}]',
                 b'[{"turnId":"t","item":{"type":"userMessage","id":"u","content":[{"type":"text","text":"\\"type\\":\\"x\\""}]}}]'):
        assert _plain_text.decode_entries(text) == _decode_entries_by_counts(text), text
    assert _plain_text.decode_entries(b"[" + item + b"]") is not None
