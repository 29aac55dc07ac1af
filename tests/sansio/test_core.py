"""Sans-IO core: framing, envelopes, RPC bookkeeping, redaction (R-WIRE-1,2,4,5,7,8,9).

No event loop here: the core is fed bytes and returns events.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._errors import LocalProtocolError
from codexrt._sansio._framing import LineBuffer, OversizedLine
from codexrt._sansio._redact import REDACTED, Redactor
from codexrt._sansio._rpc import (
    CallFailed,
    CallSucceeded,
    LateResponse,
    Phase,
    ProtocolViolation,
    RpcCore,
    UnsupportedServerRequest,
)
from codexrt._sansio._wire import Notification, ServerRequest, decode_envelope



# -- framing ------------------------------------------------------------------------------


def test_r_wire_5_split_and_joined_frames():
    buf = LineBuffer()
    assert buf.feed(b'{"a"') == []
    assert buf.feed(b':1}\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert buf.feed(b":3}\n") == [b'{"c":3}']
    assert buf.close() == []


def test_r_wire_5_oversized_line_is_reported_and_reading_continues():
    buf = LineBuffer(max_line=10)
    out = buf.feed(b"x" * 7)
    out += buf.feed(b"y" * 7)  # now over the limit, still no newline: discarding
    assert out == [] and buf.buffered == 0
    out = buf.feed(b"zz\nok\n")
    assert out == [OversizedLine(16, 10), b"ok"]


def test_framing_default_limit_is_far_above_64k():
    buf = LineBuffer()
    line = b"a" * (1024 * 1024)
    assert buf.feed(line + b"\n") == [line]


def test_framing_unterminated_tail_is_delivered_at_eof():
    buf = LineBuffer()
    assert buf.feed(b'{"x":1}') == []
    assert buf.close() == [b'{"x":1}']


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10),
    limit=st.integers(min_value=1, max_value=50),
)
def test_r_wire_5_fuzz_framing_never_loses_a_valid_line(lines, cuts, limit):
    """Any chunking of any byte lines yields every line within the limit, in order, and one
    OversizedLine for each longer one — nothing lost, nothing invented."""
    data = b"".join(line + b"\n" for line in lines)
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks, prev = [], 0
    for p in points + [len(data)]:
        chunks.append(data[prev:p])
        prev = p
    buf = LineBuffer(max_line=limit)
    out = []
    for c in chunks:
        out.extend(buf.feed(c))
    out.extend(buf.close())
    expected = [line if len(line) <= limit else OversizedLine(len(line), limit) for line in lines]
    # close() drops a whitespace-only unterminated tail; every line here is terminated.
    assert out == expected


# -- envelopes ----------------------------------------------------------------------------


def test_r_wire_1_classification_by_structure():
    assert isinstance(decode_envelope(b'{"method":"x","params":{}}'), Notification)
    req = decode_envelope(b'{"id":0,"method":"item/commandExecution/requestApproval","params":{}}')
    assert isinstance(req, ServerRequest) and req.id == 0
    n = decode_envelope(b'{"method":"turn/started","params":{"a":1},"emittedAtMs":12}')
    assert n.params == {"a": 1} and n.emitted_at_ms == 12
    for bad in [b"not json", b"[1,2]", b'{"id":1.5,"result":1}', b'{"foo":1}', b'{"id":1}',
                b'{"id":true,"result":1}', b'{"id":1,"result":1,"error":{"code":1}}']:
        assert type(decode_envelope(bad)).__name__ == "Violation", bad


def test_r_wire_2_string_and_numeric_ids_stay_distinct():
    core = RpcCore({"x/req"})
    call = core.start_request("a", {})
    assert call.id == 1
    ev = core.receive_line(b'{"id":"1","result":{}}')
    assert isinstance(ev[0], ProtocolViolation)  # "1" never answers 1
    ev = core.receive_line(b'{"id":1,"result":{"ok":true}}')
    assert isinstance(ev[0], CallSucceeded) and ev[0].call is call


def test_r_wire_2_numeric_id_collision_between_directions():
    """Scenario numeric-id-collision: server request id 1 while our request 1 is pending."""
    core = RpcCore({"item/commandExecution/requestApproval"})
    call = core.start_request("turn/start", {})
    ev = core.receive_line(b'{"id":1,"method":"item/commandExecution/requestApproval","params":{}}')
    assert isinstance(ev[0], ServerRequest) and ev[0].id == 1
    assert 1 in core.outbound and 1 in core.inbound
    reply = core.reply(1, {"decision": "decline"})
    assert json.loads(reply) == {"id": 1, "result": {"decision": "decline"}}
    assert 1 in core.outbound  # our pending request untouched
    ev = core.receive_line(b'{"id":1,"result":{}}')
    assert isinstance(ev[0], CallSucceeded) and ev[0].call is call


def test_r_wire_8_reply_echoes_string_id_and_rejects_duplicates():
    core = RpcCore({"r"})
    core.receive_line(b'{"id":"req-abc","method":"r","params":{}}')
    with pytest.raises(LocalProtocolError):
        core.reply(0, {})
    assert json.loads(core.reply("req-abc", {"x": 1})) == {"id": "req-abc", "result": {"x": 1}}
    with pytest.raises(LocalProtocolError):
        core.reply("req-abc", {})


def test_r_wire_7_unknown_server_request_gets_32601():
    core = RpcCore({"known"})
    ev = core.receive_line(b'{"id":7,"method":"item/unknownThing/request","params":{}}')
    assert ev == [UnsupportedServerRequest(7, "item/unknownThing/request")]
    out = [json.loads(x) for x in core.data_to_send()]
    assert out == [{"id": 7, "error": {"code": -32601,
                                       "message": "unsupported server request: item/unknownThing/request"}}]
    assert core.inbound == {}
    assert core.data_to_send() == []


def test_r_wire_4_late_response_after_abandon():
    core = RpcCore()
    call = core.start_request("model/list", {})
    core.mark_written(call)
    assert core.abandon(call) is Phase.WRITTEN_UNCONFIRMED
    ev = core.receive_line(b'{"id":1,"result":{"data":[]}}')
    assert isinstance(ev[0], LateResponse) and ev[0].phase is Phase.WRITTEN_UNCONFIRMED
    assert ev[0].method == "model/list"


def test_r_wire_4_unwritten_abandon_leaves_no_late_entry():
    core = RpcCore()
    call = core.start_request("model/list", {})
    assert core.abandon(call) is Phase.NOT_WRITTEN
    ev = core.receive_line(b'{"id":1,"result":{}}')
    assert isinstance(ev[0], ProtocolViolation)


def test_error_response_maps_to_call_failed():
    core = RpcCore()
    core.start_request("x", None)
    ev = core.receive_line(b'{"error":{"code":-32600,"message":"Invalid request"},"id":1}')
    assert isinstance(ev[0], CallFailed) and ev[0].error.code == -32600


def test_request_params_default_to_empty_object():
    """The real server rejects a request without params (research §2)."""
    core = RpcCore()
    assert json.loads(core.start_request("model/list", None).data) == {"id": 1, "method": "model/list", "params": {}}


def test_r_wire_6_close_returns_everything_pending_once():
    core = RpcCore({"r"})
    a = core.start_request("a", {})
    core.receive_line(b'{"id":0,"method":"r","params":{}}')
    calls, reqs = core.close()
    assert calls == [a] and [r.id for r in reqs] == [0]
    assert core.close() == ([], [])
    with pytest.raises(LocalProtocolError):
        core.start_request("b", {})


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_r_wire_5_fuzz_random_bytes_never_crash_the_core(data):
    core = RpcCore({"r"})
    buf = LineBuffer(max_line=100)
    for frame in buf.feed(data) + buf.close():
        for ev in core.receive_line(frame):
            assert ev is not None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "delta"]), st.text(max_size=20), max_size=3), max_size=10),
       st.binary(max_size=50))
def test_r_wire_5_valid_messages_survive_garbage_between_them(params_list, garbage):
    """Garbage lines around valid notifications never lose a valid one."""
    garbage = garbage.replace(b"\n", b" ")
    stream = b""
    for p in params_list:
        stream += garbage + b"\n" + msgspec.json.encode({"method": "n", "params": p}) + b"\n"
    core = RpcCore()
    buf = LineBuffer()
    got = [ev.params for f in buf.feed(stream) for ev in core.receive_line(f) if isinstance(ev, Notification)]
    # a garbage line may itself be a valid notification only if it decodes as one; ours never has "method"
    assert got[-len(params_list):] == params_list if params_list else True


# -- redaction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, secret",
    [
        ("error: OPENAI_API_KEY=sk-test-SECRET123 rejected", "sk-test-SECRET123"),
        ("Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
        ("header authorization=Basic Zm9vOmJhcg==", "Zm9vOmJhcg=="),
        ('{"access_token": "tok-very-secret"}', "tok-very-secret"),
        ("MY_SERVICE_SECRET: hunter2hunter2", "hunter2hunter2"),
        ("using key sk-proj-abcdefghijkl", "sk-proj-abcdefghijkl"),
    ],
)
def test_r_wire_9_stderr_redaction(line, secret):
    out = Redactor()(line)
    assert secret not in out and REDACTED in out


def test_r_wire_9_known_secret_values_are_masked_anywhere():
    r = Redactor(["plain-credential-value"])
    assert "plain-credential-value" not in r("the value plain-credential-value leaked")
    assert "plain" not in repr(r)


def test_redaction_leaves_ordinary_text_alone():
    text = "INFO thread started; tokens used: 42 (keyboard layout)"
    assert Redactor()(text) == text


def test_public_api_names_all_resolve():
    """Every name in codexrt.__all__ resolves (lazy ones included), and private ones stay out."""
    import codexrt

    for name in codexrt.__all__:
        assert getattr(codexrt, name) is not None, name
    assert not [n for n in codexrt.__all__ if n.startswith("_") and n != "__version__"]
