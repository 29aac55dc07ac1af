"""``serve`` never writes a line nested deeper than it accepts on its own input (issue 35):
the app-server may nest 128 levels (R-WIRE-5's bound); a host must not have to accept more than
the 64 levels serve accepts from it. A deep notification is forwarded as a ``protocolError``
event naming the event it stands for; a deep answer to a read is a ``PROTOCOL_ERROR`` reply
to the same id. Every line the host sees fits the shipped schema (the ``Wire`` harness checks).
"""

from __future__ import annotations

import json
from typing import Any

from codexrt import RuntimeConfig
from codexrt._serve._codec import MAX_COMMAND_DEPTH
from codexrt._serve._daemon import DaemonConfig
from codexrt._sansio._wire import json_depth_exceeds
from tests._support import MemoryPeers
from tests.trio.test_serve_bounds import Wire


def _nested(n: int) -> str:
    return "[" * n + "]" * n


DEEP_NOTE = '{"method":"x/deep","params":{"v":' + _nested(100) + '}}\n'
SCENARIO = {"name": "deep-to-host", "defaults": True, "rules": [
    {"match": {"method": "model/list"}, "actions": [{"raw": DEEP_NOTE}, {"default": True}]},
    {"match": {"method": "thread/read"},
     "actions": [{"raw": '{"id":$id,"result":{"thread":{"id":"t","turns":' + _nested(100) + '}}}\n'}]},
]}


async def test_issue_35_serve_forwards_nothing_deeper_than_it_accepts(nursery: Any) -> None:
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory(SCENARIO)]),
                                   idle_timeout=None)).start(nursery)
    seen: list[dict[str, Any]] = []
    mid = await wire.send("codex.listModels", {"channelId": "c"})
    reply = await wire.wait_for(lambda l: seen.append(l) or (l.get("type") == "response" and l["id"] == mid))
    assert reply["ok"], reply
    rid = await wire.send("codex.readThread", {"channelId": "c", "threadId": "t"})
    deep_reply = await wire.wait_for(lambda l: seen.append(l) or (l.get("type") == "response" and l["id"] == rid))
    assert deep_reply["ok"] is False and deep_reply["error"]["code"] == "PROTOCOL_ERROR"
    assert deep_reply["error"]["details"]["maxDepth"] == MAX_COMMAND_DEPTH
    await wire.to_send.aclose()
    lines = seen + await wire.read_to_end()
    stand_ins = [l for l in lines if l.get("kind") == "protocolError" and l["payload"].get("kind") == "nativeNotification"]
    assert stand_ins and "deeper than 64" in stand_ins[0]["payload"]["reason"]
    assert not any(json_depth_exceeds(json.dumps(l).encode(), MAX_COMMAND_DEPTH) for l in lines)


def test_a_raw_result_keeps_its_depth_verdict_and_it_equals_the_whole_line_check():
    """Issue 34: serve's writer checks a reply whose result is a ``msgspec.Raw`` (a history
    page) by the result's depth, one level less, once per object; every verdict equals the
    check of the whole line (:func:`_encode_shallow`), at the bound and past it, the first time
    and again; the kept verdicts are bounded."""
    import msgspec

    from codexrt._serve._codec import response_ok
    from codexrt._serve._core import _encode_shallow, _ShallowEncoder

    enc = _ShallowEncoder()
    for n in (0, 1, MAX_COMMAND_DEPTH - 2, MAX_COMMAND_DEPTH - 1, MAX_COMMAND_DEPTH, MAX_COMMAND_DEPTH + 1):
        raw = msgspec.Raw(('{"data":' + _nested(n) + ',"c":"{\\"k\\":[1]}"}').encode() if n else b"7")
        for rid in ("h1", 7, None):
            obj = response_ok(rid, raw)
            want = _encode_shallow(obj)
            assert enc(obj) == want and enc(obj) == want, (n, rid)
            assert (b"PROTOCOL_ERROR" in want) is (n + 2 > MAX_COMMAND_DEPTH)  # the line: envelope + data
    deep = msgspec.Raw(('{"v":' + _nested(MAX_COMMAND_DEPTH) + "}").encode())
    odd = {"type": "response", "id": ["not", "scalar"], "ok": True, "result": deep}  # checked whole
    assert enc(odd) == _encode_shallow(odd)
    for k in range(_ShallowEncoder.MAX_KEPT + 5):
        enc(response_ok(f"h{k}", msgspec.Raw(b'{"k":%d}' % k)))
    assert len(enc._verdicts) == _ShallowEncoder.MAX_KEPT
    enc.MAX_KEPT_BYTES = 100  # a byte bound too: large replies are not held
    big = msgspec.Raw(b'{"k":"' + b"x" * 60 + b'"}')
    for _ in range(3):
        enc(response_ok("b", msgspec.Raw(bytes(big))))
    assert enc._held_bytes == sum(len(r) for r, _ in enc._verdicts.values()) <= 100
    enc(response_ok("c", msgspec.Raw(b"[" + b"1," * 80 + b"1]")))  # over the bound alone: checked, not kept
    assert enc._held_bytes <= 100 and len(enc._verdicts) == 1


def _count_checks(monkeypatch: Any) -> list[bytes]:
    """The texts serve's writer walks for their depth from now on."""
    import codexrt._serve._core as core

    checked: list[bytes] = []
    exceeds = core.json_depth_exceeds

    def counting(data: bytes, limit: int) -> bool:
        checked.append(data)
        return exceeds(data, limit)

    monkeypatch.setattr(core, "json_depth_exceeds", counting)
    return checked


def test_issue_34_a_page_written_again_keeps_its_depth_verdict_while_other_pages_come(monkeypatch):
    """The verdicts are dropped least recently written first, and cover the pages serve's page
    cache holds: an editor that re-reads one thread's 20 pages while reading 20 new ones each
    time (the bench's pairs) has each of the 20 checked once — before, the oldest went first
    and 32 were kept, so every one of them was checked again each time (R-WIRE-5, issue 34)."""
    import msgspec

    import codexrt._serve._core as core
    from codexrt._serve._codec import response_ok

    checked = _count_checks(monkeypatch)
    enc = core._ShallowEncoder()
    again = [msgspec.Raw(b'{"page":%d,"data":[[1]]}' % k) for k in range(20)]
    for round_ in range(6):
        for raw in again:
            enc(response_ok("h", raw))
        for k in range(20):
            enc(response_ok("h", msgspec.Raw(b'{"new":%d,"round":%d}' % (k, round_))))
    assert sum(1 for d in checked if b'"page"' in d) == 20  # each page read again: checked once
    assert sum(1 for d in checked if b'"new"' in d) == 120 and len(enc._verdicts) <= enc.MAX_KEPT
    # least recently written first: a verdict written again outlives the ones written after it once
    first = again[0]
    for k in range(enc.MAX_KEPT):
        enc(response_ok("h", first))
        enc(response_ok("h", msgspec.Raw(b'{"later":%d}' % k)))
    assert id(first) in enc._verdicts


def test_issue_34_a_reply_whose_depth_is_known_is_written_without_a_walk(monkeypatch):
    """A history page made straight from its text (``BoundedText``: the typed decode proved how
    deep it nests) is written as its text, unchecked, when that bound is within serve's
    (R-WIRE-5); a bound past it is checked as any ``Raw`` result is, and a reply that really
    is too deep becomes the ``PROTOCOL_ERROR`` reply. The bytes equal the ``Raw``'s (the text
    joined from its pieces)."""
    import msgspec

    import codexrt._serve._core as core
    from codexrt._sansio._wire import BoundedText
    from codexrt._serve._codec import response_ok

    text = msgspec.Raw(b'{"data":[{"a":[1]}],"records":[]}')
    deep = msgspec.Raw(('{"v":' + _nested(MAX_COMMAND_DEPTH) + "}").encode())
    want = {rid: core._encode_shallow(response_ok(rid, t)) for rid, t in (("h1", text), (7, text), ("d", deep))}
    parts = (memoryview(bytes(text))[:9], bytes(text)[9:])  # the text in pieces, one of them a view
    assert bytes(BoundedText(parts, 3)) == bytes(text)
    checked = _count_checks(monkeypatch)
    enc = core._ShallowEncoder()
    for bound in (3, MAX_COMMAND_DEPTH - 1):
        for rid in ("h1", 7):
            assert enc(response_ok(rid, BoundedText(parts, bound))) == want[rid]
    assert checked == []
    assert enc(response_ok("h1", BoundedText(parts, MAX_COMMAND_DEPTH))) == want["h1"]
    assert len(checked) == 1  # a bound past serve's: walked
    line = enc(response_ok("d", BoundedText((bytes(deep),), MAX_COMMAND_DEPTH + 5)))
    assert b"PROTOCOL_ERROR" in line and line == want["d"]
    # the line is the envelope with the text in the result's place; keys in another order too
    odd = {"result": BoundedText(parts, 3), "type": "response", "id": "h1", "ok": True}
    assert enc(odd) == core.encode_line({**odd, "result": text}) == b'{"result":%s,"type":"response",' \
        b'"id":"h1","ok":true}\n' % bytes(text)


def _msg(i: int, **extra: Any) -> str:
    return json.dumps({"turnId": "t", "item": {"type": "agentMessage", "id": f"m{i}", "text": f"a{i}", **extra}})


#: thread/items/list pages by cursor: a page the typed path takes, then pages each of its
#: declines meets — a field no schema names nesting past serve's bound, a number out of range
#: (a plain decode refuses it too), an id seen twice, data that is not a list of objects
HOSTILE_PAGES = {
    None: '{"data":[' + _msg(0) + "," + _msg(1) + '],"nextCursor":"c1"}',
    "c1": '{"data":[' + _msg(2, other=json.loads(_nested(70))) + '],"nextCursor":"c2"}',
    "c2": '{"data":[' + _msg(3).replace('"text"', '"startedAtMs":1e999,"text"') + '],"nextCursor":"c3"}',
    "c3": '{"data":[' + _msg(4) + "," + _msg(4) + '],"nextCursor":"c4"}',
    "c4": '{"data":[7,' + _msg(5) + '],"nextCursor":"c5"}',
    "c5": '{"data":{"not":"a list"},"nextCursor":null}',
}
HOSTILE_SCENARIO = {"name": "hostile-pages", "defaults": True, "rules": [
    {"match": {"method": "thread/items/list", "params": {"cursor": c}} if c else {"method": "thread/items/list"},
     "actions": [{"raw": '{"id":$id,"result":' + page + "}\n"}]}
    for c, page in reversed(list(HOSTILE_PAGES.items()))]}


async def test_issue_34_hostile_pages_through_serve_get_one_reply_each(nursery: Any) -> None:
    """Every page the typed path cannot take goes the general way through serve: one reply per
    request, with its id — the records, a PROTOCOL_ERROR for a reply deeper than serve's bound
    (R-WIRE-5), a typed error for what cannot be decoded — and serve goes on (R-D-4)."""
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory(HOSTILE_SCENARIO)]),
                                   idle_timeout=None)).start(nursery)
    got: dict[Any, dict[str, Any]] = {}
    for cursor in HOSTILE_PAGES:
        rid = await wire.send("codex.readHistoryPage", {"channelId": "c", "threadId": "t", "scope": "items",
                                                         **({"cursor": cursor} if cursor else {})})
        got[cursor] = await wire.wait_for(lambda l, rid=rid: l.get("type") == "response" and l["id"] == rid)
    assert [r["id"] for r in got.values()] == list(range(1, len(HOSTILE_PAGES) + 1))
    assert [r["id"] for r in got[None]["result"]["records"]] == ["m0", "m1"]
    assert got["c1"]["ok"] is False and got["c1"]["error"]["code"] == "PROTOCOL_ERROR"
    assert got["c1"]["error"]["details"]["maxDepth"] == MAX_COMMAND_DEPTH
    assert got["c2"]["ok"] is False and got["c2"]["error"]["code"].isupper()
    assert [r["id"] for r in got["c3"]["result"]["records"]] == ["m4"]  # upserted: one record
    assert [r["id"] for r in got["c4"]["result"]["records"]] == ["m5"]
    assert got["c5"]["ok"] is False and got["c5"]["error"]["code"] == "PROTOCOL_ERROR"
    status = await wire.send("status", {})
    assert (await wire.wait_for(lambda l: l.get("type") == "response" and l["id"] == status))["ok"]
    await wire.to_send.aclose()
    await wire.read_to_end()
