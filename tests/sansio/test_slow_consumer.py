"""Slow consumers: bounded memory, lossless text, a reader that keeps answering (issue 12, R-D-2).

The overflow policy under test (``codexrt/_sansio/_buffer.py``, ``docs/streaming.md``): text
is merged, never dropped or reordered; essential events are kept; status chatter beyond
``max_droppable`` is dropped oldest-first and reported by an ``eventsDropped`` marker. The
sans-IO part runs on the buffer directly; the end-to-end part floods a real pipe from
``peer_fixtures.flood_peer`` into a consumer that sleeps after every event.

Also here: the hot-path helpers that make a flood cheap must classify every line exactly as the
general path does (``merge_delta_lines`` vs ``decode_envelope``, fast vs byte-by-byte framing).
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._runtime._events import CodexEvent, EventStream, delta_key
from codexrt._sansio._framing import LineBuffer, OversizedLine
from codexrt._sansio._wire import (_DELTA_HINT, Notification, decode_delta_line, decode_envelope, merge_delta_lines,
                                   merge_delta_read)

KEY_A = delta_key(1, "c", "op-1", "t", "t", "u", "item-a", "item/agentMessage/delta")
KEY_B = delta_key(1, "c", "op-1", "t", "t", "u", "item-b", "item/agentMessage/delta")


def chatter(i: int) -> CodexEvent:
    return CodexEvent("nativeNotification", {"method": "thread/tokenUsage/updated", "params": {"i": i}})


def essential(i: int) -> CodexEvent:
    return CodexEvent("itemCompleted", {"item": {"id": f"x{i}"}})


def rebuild(events: list[CodexEvent]) -> dict[str | None, str]:
    text: dict[str | None, str] = {}
    for ev in events:
        if ev.kind == "itemUpdated":
            text[ev.item_id] = text.get(ev.item_id, "") + ev.payload["delta"]
    return text


def test_r_d_2_lagging_consumer_queue_is_bounded_and_text_is_exact() -> None:
    """100,000 deltas with chatter every 10 and an essential event every 1,000, nobody
    reading: the queue stays O(max_droppable + essential), all text arrives in order, every
    essential event arrives, and the dropped chatter is counted in eventsDropped markers."""
    s = EventStream(max_droppable=100)
    sent: list[str] = []
    for i in range(100_000):
        t = f"w{i} "
        sent.append(t)
        s.put_text(KEY_A, t)
        if i % 10 == 9:
            s.put(chatter(i))
        if i % 1000 == 999:
            s.put(essential(i))
        assert len(s._buf) <= 2 * 100 + 2 * 100 + 3  # chatter + text runs between them + essentials
    s.close()
    out = []
    while (ev := s.get_nowait()) is not None:
        out.append(ev)
    assert rebuild(out)["item-a"] == "".join(sent)
    assert sum(ev.payload.get("deltaCount", 1) for ev in out if ev.kind == "itemUpdated") == 100_000
    assert [ev.payload["item"]["id"] for ev in out if ev.kind == "itemCompleted"] == [f"x{i}" for i in range(999, 100_000, 1000)]
    kept = sum(1 for ev in out if ev.kind == "nativeNotification")
    dropped = sum(ev.payload["count"] for ev in out if ev.kind == "eventsDropped")
    assert kept + dropped == 10_000 and kept <= 100 and dropped > 0


def test_r_d_2_runs_of_different_items_never_merge_and_keep_order() -> None:
    s = EventStream()
    for i in range(30):
        s.put_text(KEY_A if (i // 3) % 2 == 0 else KEY_B, str(i % 10))
    s.close()
    out = [ev for ev in iter(s.get_nowait, None)]
    assert [(ev.item_id, ev.payload["delta"]) for ev in out] == [
        ("item-a" if k % 2 == 0 else "item-b", "".join(str(i % 10) for i in range(3 * k, 3 * k + 3))) for k in range(10)]
    assert all(ev.payload["deltaCount"] == 3 for ev in out)


def test_r_d_2_a_consumer_that_keeps_up_gets_single_deltas_unchanged() -> None:
    s = EventStream()
    s.put_text(KEY_A, "hello")
    ev = s.get_nowait()
    assert ev is not None and ev.kind == "itemUpdated" and ev.payload == {"delta": "hello", "stream": "item/agentMessage/delta"}
    assert (ev.item_id, ev.turn_id, ev.client_operation_id) == ("item-a", "u", "op-1")


# -- hot-path equivalence ------------------------------------------------------------------

_ids = st.sampled_from(["t1", "t2"])
_line = st.one_of(
    st.builds(lambda m, th, tu, it, d: {"method": m, "params": {"threadId": th, "turnId": tu, "itemId": it, "delta": d},
                                        "emittedAtMs": 5},
              st.sampled_from(["item/agentMessage/delta", "item/reasoning/textDelta"]), _ids, _ids, _ids, st.text(max_size=5)),
    st.builds(lambda d: {"method": "item/agentMessage/delta", "params": {"threadId": "t1", "turnId": "t1", "itemId": "t1",
                                                                       "delta": d, "summaryIndex": 0}}, st.text(max_size=3)),
    st.just({"method": "thread/status/changed", "params": {"threadId": "t1", "status": {"type": "idle"}}}),
    st.just({"id": 3, "result": {}}),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_line, max_size=30))
def test_merge_delta_lines_is_the_general_classification_joined(msgs: list[dict[str, Any]]) -> None:
    """Merging back-to-back exact delta lines never changes what a consumer can rebuild:
    same notifications in the same order, adjacent same-item deltas joined, count kept."""
    lines = [msgspec.json.encode(m) for m in msgs]
    merged = merge_delta_lines(list(lines))
    general = [decode_envelope(x) for x in lines]

    def flat(items: list[Any]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for it in items:
            if isinstance(it, bytes):
                it = decode_envelope(it)
            if isinstance(it, Notification):
                p = it.params
                out.append(("n", it.method, p.get("threadId"), p.get("turnId"), p.get("itemId"), p.get("delta"),
                            tuple(sorted(k for k in p if k not in ("threadId", "turnId", "itemId", "delta")))))
            else:
                out.append(("other", type(it).__name__))
        return out

    def joined(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for r in rows:
            if out and r[0] == "n" and out[-1][0] == "n" and r[5] is not None and out[-1][5] is not None \
                    and r[:5] == out[-1][:5] and r[6] == () and out[-1][6] == ():
                out[-1] = out[-1][:5] + (out[-1][5] + r[5], ())
            else:
                out.append(r)
        return out

    assert joined(flat(merged)) == joined(flat(general))
    native = sum(1 for g in general if isinstance(g, Notification) and g.method.startswith("item/"))
    counted = 0
    for it in merged:
        if isinstance(it, bytes):
            it = decode_envelope(it)
        if isinstance(it, Notification) and it.method.startswith("item/"):
            counted += it.delta_count
    assert counted == native  # delta_count keeps the number of native notifications


_D = b'{"method":"item/agentMessage/delta","params":{"threadId":"t1","turnId":"t1","itemId":"%s","delta":"%s"}}'
_raw_line = st.one_of(
    st.builds(lambda m: msgspec.json.encode(m), _line),
    st.builds(lambda it, d: _D % (it.encode(), d.encode()), st.sampled_from(["a", "b"]), st.sampled_from(["x", "yy", "\\n"])),
    st.just(_D % (b"a", b"1") + _D % (b"a", b"2")),  # two values on one line: a violation, never two deltas
    st.just(_D % (b"a", b"1") + b" " + _D % (b"a", b"2")),
    st.just(b" " + _D % (b"a", b"3")),  # starts otherwise: decoded on its own
    st.sampled_from([b"", b"  ", b"\r", b"{not json", b"[1]", b"x" * 300]),
    st.just(_D % (b"a", b"4") + b"\r"),
    # starts like a delta line but is another item notification (most lines of a real turn)
    st.just(b'{"method":"item/started","params":{"threadId":"t1","turnId":"t1","item":{"type":"agentMessage","id":"a"}}}'),
    # the real server's order, "item" first (issue 34: such a line alone skips the typed try),
    # and near misses: an escaped quote in the method, a line cut short, another first key
    st.just(b'{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"a"},"threadId":"t1"}}'),
    st.just(b'{"method":"item/a\\","params":{"item":1}}'),
    st.just(b'{"method":"item/a\\","params":{"item":1},"x":"","params":{"threadId":"t1","turnId":"t1","itemId":"a",'
            b'"delta":"z"}}'),
    st.just(b'{"method":"item/started","params":{"item":'),
    st.just(b'{"method":"item/agentMessage/delta","params":{"itemId":"a","threadId":"t1","turnId":"t1","delta":"q"}}'),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_raw_line, max_size=40), st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=20),
       st.sampled_from([256, 1 << 20]))
def test_r_wire_5_merge_delta_read_means_line_by_line(lines: list[bytes], cuts: list[int], max_line: int) -> None:
    """R-WIRE-5, R-D-2: the one-call decode of a read (``merge_delta_read``) yields what
    framing and classifying line by line yields, for any split of the stream into reads:
    same notifications in order (deltas of one item joined, their count kept), the same
    violations and oversized lines, blank lines skipped; two values on one line stay a
    violation."""
    data = b"".join(x + b"\n" for x in lines)
    framer = LineBuffer(max_line)
    got: list[Any] = []
    i = k = 0
    while i < len(data):
        j = i + cuts[k % len(cuts)]
        k += 1
        got += merge_delta_read(framer, data[i:j])
        i = j
    got += framer.close()
    ref: list[Any] = []
    for x in lines:
        ref.append(OversizedLine(len(x), max_line) if len(x) > max_line else x)

    def flat(items: list[Any], merged: bool) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for it in items:
            if isinstance(it, OversizedLine):
                out.append(("oversized", it.size))
                continue
            if isinstance(it, bytes):
                if not it or it.isspace():
                    continue  # the RPC core skips blank lines
                if merged and it.startswith(_DELTA_HINT):
                    # a line merge_delta_read left as bytes that starts like a delta line is not
                    # an exact one: the connection classifies it with try_delta=False (issue 34)
                    assert decode_delta_line(it) is None
                it = decode_envelope(it, try_delta=not merged)
            if isinstance(it, Notification):
                p = it.params
                out.append(("n", it.method, p.get("itemId"), p.get("delta"), it.delta_count))
            else:
                out.append(("other", type(it).__name__))
        return out

    def joined(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for r in rows:
            if out and r[0] == "n" == out[-1][0] and r[3] is not None and out[-1][3] is not None and r[1:3] == out[-1][1:3]:
                out[-1] = out[-1][:3] + (out[-1][3] + r[3], out[-1][4] + r[4])
            else:
                out.append(r)
        return out

    assert joined(flat(got, True)) == joined(flat(ref, False))


@settings(max_examples=150, deadline=None)
@given(_raw_line)
def test_r_wire_1_decode_envelope_without_the_delta_try_classifies_alike(line: bytes) -> None:
    """R-WIRE-1: ``try_delta=False`` (issue 34, for lines known not to be exact delta lines)
    skips only the typed first try: every line is classified as the same kind, and a
    notification keeps its method and params — the typed ``delta`` is all it lacks."""
    a, b = decode_envelope(line), decode_envelope(line, try_delta=False)
    assert type(a) is type(b)
    if isinstance(a, Notification):
        assert (a.method, a.params, a.emitted_at_ms) == (b.method, b.params, b.emitted_at_ms)
        assert b.delta is None


def test_one_item_line_is_tried_against_the_delta_shape_once() -> None:
    """Issue 34: a read of one line that starts like a delta line but is not one (an
    ``item/started``) is handed back as bytes after one failed typed decode, not decoded again
    line by line."""
    import codexrt._sansio._wire as wire

    line = b'{"method":"item/started","params":{"threadId":"t","turnId":"u","item":{"type":"agentMessage","id":"a"}}}'
    saved = wire.merge_delta_lines

    def must_not_run(frames: list[Any]) -> list[Any]:
        raise AssertionError("decoded line by line again")

    wire.merge_delta_lines = must_not_run
    try:
        assert merge_delta_read(LineBuffer(1 << 20), line + b"\n") == [line]
    finally:
        wire.merge_delta_lines = saved
    n = merge_delta_read(LineBuffer(1 << 20), _D % (b"a", b"x") + b"\n")  # an exact delta line: decoded
    assert len(n) == 1 and isinstance(n[0], Notification) and n[0].delta is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bb", b"\n", b"ccc\n", b"\n\n", b"x" * 9, b"\r\n"]), max_size=25),
       st.integers(min_value=1, max_value=7))
def test_r_wire_5_fast_framing_equals_reference(pieces: list[bytes], max_line: int) -> None:
    data = b"".join(pieces)
    buf = LineBuffer(max_line)
    got: list[Any] = []
    rnd = random.Random(len(data))
    i = 0
    while i < len(data):
        j = i + rnd.randint(1, 6)
        got += buf.feed(data[i:j])
        i = j
    got += buf.close()
    ref: list[Any] = []
    parts = data.split(b"\n")
    tail = parts.pop()
    for p in parts:
        ref.append(OversizedLine(len(p), max_line) if len(p) > max_line else p)
    if tail.strip():
        ref.append(OversizedLine(len(tail), max_line) if len(tail) > max_line else tail)
    assert got == ref


# -- end to end: a real pipe, a consumer that sleeps ------------------------------------------


_json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet=st.sampled_from('ab[]{}"\\\n/é'), max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(alphabet=st.sampled_from('k[]{}"\\'), max_size=4), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json_values, st.booleans())
def test_r_wire_5_strings_cut_out_in_c_passes_equal_the_string_regex(value: Any, ascii_only: bool) -> None:
    """R-WIRE-5: the depth check's C-level bracket shape (escaped backslashes, then escaped
    quotes dropped; only brackets and quotes kept; adjacent quote pairs dropped; then every other
    piece between quotes) is exactly the brackets left after removing every JSON string literal
    with a regex, for strings full of quotes, backslashes and brackets."""
    import json
    import re

    from codexrt._sansio._wire import _bracket_shape

    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    outside = re.sub(rb'"[^"\\]*(?:\\.[^"\\]*)*"', b"", data)
    assert _bracket_shape(data) == bytes(c for c in outside.replace(b"{", b"[").replace(b"}", b"]") if c in b"[]")


_plain_json_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet=st.sampled_from('ab"\\\n/é:,'), max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(alphabet=st.sampled_from('k"\\,'), max_size=4), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_plain_json_values, _json_values, st.booleans())
def test_r_wire_5_the_two_count_shortcut_for_strings_without_brackets(plain: Any, any_value: Any,
                                                                     ascii_only: bool) -> None:
    """R-WIRE-5: when no string holds a bracket (the usual line), two counts prove every string
    is an adjacent quote pair and the shape is the brackets with the quotes deleted; the
    shortcut is taken exactly then (a string with a bracket in it fails the counts), and either
    way the shape is the brackets outside the strings."""
    import json
    import re

    from codexrt._sansio._wire import _brackets_and_quotes, _cut_strings

    for value in (plain, any_value, [plain, any_value]):
        data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
        strings = re.findall(rb'"[^"\\]*(?:\\.[^"\\]*)*"', data)
        kept = _brackets_and_quotes(data)
        shortcut = kept.count(b'""') * 2 == kept.count(b'"')
        assert shortcut == (not any(c in s for s in strings for c in b"[]{}"))
        outside = re.sub(rb'"[^"\\]*(?:\\.[^"\\]*)*"', b"", data)
        assert _cut_strings(kept) == bytes(c for c in outside.replace(b"{", b"[").replace(b"}", b"]") if c in b"[]")
