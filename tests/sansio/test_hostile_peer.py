"""Split from ``tests/trio/test_hostile_peer.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._wire import MAX_JSON_DEPTH, Violation, decode_envelope, json_depth_exceeds
from tests.trio.test_hostile_peer import _nested


def test_depth_check_matches_a_reference_walk_r_wire_5():
    """R-WIRE-5: json_depth_exceeds agrees with a recursive walk, strings with brackets included."""
    def depth(v):
        if isinstance(v, dict):
            v = list(v.values())
        return 1 + max(map(depth, v), default=0) if isinstance(v, list) else 0

    import random
    r = random.Random(18)

    def gen(d):
        if d == 0 or r.random() < 0.25:
            return r.choice([1, None, "x[", "]}\\\"[", ""])
        if r.random() < 0.5:
            return [gen(d - 1) for _ in range(r.choice([0, 1, 1, 2]))]
        return {f"k{i}[": gen(d - 1) for i in range(r.choice([0, 1, 1, 2]))}

    deepest = 0
    for _ in range(1000):
        v = gen(r.randint(0, 40))
        data = json.dumps(v).encode()
        d = depth(v)
        deepest = max(deepest, d)
        for limit in range(0, d + 2):
            assert json_depth_exceeds(data, limit) is (d > limit), (data, limit)
    assert deepest > 20  # past the 16 peeling passes: the run walk was exercised too



_JSON_TEXT = st.recursive(
    st.none() | st.integers() | st.text(alphabet='a\\"[]{}\n', max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(alphabet='k\\"[]{', max_size=4), kids,
                                                              max_size=3),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(value=_JSON_TEXT, indent=st.sampled_from([None, 1]))
def test_escapes_dropped_in_their_span_only_r_wire_5(value, indent):
    """R-WIRE-5, issue 34: ``_brackets_and_quotes`` drops escapes only between the first
    backslash and the character after the last one; the result equals dropping them over the
    whole text (backslash runs, escaped quotes and brackets in strings at either end of the span),
    and the depth verdict equals a recursive walk's."""
    from codexrt._sansio._wire import _NOT_SHAPE, _SHAPE_TABLE, _brackets_and_quotes

    def depth(v):
        if isinstance(v, dict):
            v = list(v.values())
        return 1 + max(map(depth, v), default=0) if isinstance(v, list) else 0

    for data in (json.dumps(value, indent=indent).encode(), json.dumps([value, "\\"]).encode(),
                 json.dumps(["\\\"[", value]).encode()):
        whole = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_SHAPE_TABLE, _NOT_SHAPE)
        assert _brackets_and_quotes(data) == whole, data
        d = depth(json.loads(data))
        for limit in (d - 1, d):
            assert json_depth_exceeds(data, limit) is (d > limit), (data, limit)


def test_a_long_line_is_checked_for_depth_as_a_short_one_r_wire_5():
    """R-WIRE-5, issue 34: a line past ``_LONG_LINE`` bytes skips the bracket pre-count and goes
    straight to the depth check; the verdict at the bound is the same as for a short line."""
    from codexrt._sansio._wire import _LONG_LINE

    pad = json.dumps("[{" * _LONG_LINE)  # brackets in a string count for nothing
    for n, too_deep in ((MAX_JSON_DEPTH - 1, False), (MAX_JSON_DEPTH, True)):
        for tail in ("", f',"pad":{pad}'):
            line = f'{{"id":1,"method":"x","params":{_nested(n)}{tail}}}'.encode()
            assert (len(line) > _LONG_LINE) is bool(tail)
            env = decode_envelope(line)
            assert isinstance(env, Violation) is too_deep, (n, len(line))


def test_too_deep_envelope_is_a_violation_r_wire_5():
    ok = decode_envelope(f'{{"id":1,"method":"x","params":{_nested(MAX_JSON_DEPTH - 1)}}}'.encode())
    assert not isinstance(ok, Violation)
    for n in (MAX_JSON_DEPTH, 900, 100_000):  # 900: decodes in msgspec on a shallow stack
        env = decode_envelope(f'{{"id":1,"method":"x","params":{_nested(n)}}}'.encode())
        assert isinstance(env, Violation) and "nested deeper" in env.reason


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(min_value=1, max_value=3000), where=st.sampled_from(["params", "result", "error.data"]),
       kind=st.sampled_from(["[", "{\"k\":"]), mid=st.sampled_from(["", "1", "\"x]}\"", "null"]))
def test_r_wire_5_fuzz_deep_lines_never_crash_the_core(depth, where, kind, mid):
    """R-WIRE-5: a request, notification or response with a value nested ``depth`` deep in any
    payload never raises out of RpcCore: past MAX_JSON_DEPTH it is a ProtocolViolation (and a
    pending call stays pending), within it it is handled normally."""
    from codexrt._sansio._rpc import CallFailed, CallSucceeded, ProtocolViolation, RpcCore

    core = RpcCore()
    call = core.start_request("x", {})
    close = "]" if kind == "[" else "}"
    nested = kind * depth + mid + close * depth
    if kind != "[" and not mid:
        nested = kind * depth + "1" + close * depth
    line = {"params": f'{{"method":"m","params":{{"v":{nested}}}}}',
            "result": f'{{"id":{call.id},"result":{{"v":{nested}}}}}',
            "error.data": f'{{"id":{call.id},"error":{{"code":1,"message":"m","data":{nested}}}}}'}[where]
    events = core.receive_line(line.encode())
    total = depth + 2  # the line object and the one holding the nested value
    if total > MAX_JSON_DEPTH:
        assert [type(e) for e in events] == [ProtocolViolation]
        assert call.id in core.outbound  # still waiting: a bad line answers nobody
    elif where != "params":
        assert type(events[0]) in (CallSucceeded, CallFailed)
