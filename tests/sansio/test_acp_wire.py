"""The ``codexrt acp`` wire (``codexrt/_acp/_wire.py``), without an event loop: strict decoding
(-32602 naming the field, -32601, -32700 with the id recovered, -32600), ids of every JSON-RPC
type echoed, the Structs checked against the pinned official schema, and a bounded fuzz of the
decoder (issue 30)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codexrt._acp import _wire as w

ROOT = Path(__file__).resolve().parents[2]


def _schema() -> dict[str, Any]:
    version = (ROOT / ".ci" / "acp-sdk-version").read_text().strip()
    path = (ROOT / ".cache" / f"acp-sdk-{version}" / "node_modules" / "@agentclientprotocol" / "sdk" / "schema"
            / "v1" / "schema.json")
    if not path.is_file():
        why = f"the pinned ACP schema is not installed at {path.relative_to(ROOT)}; run `bash .ci/setup`"
        if os.environ.get("CODEXRT_REQUIRE_REAL") == "1":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return json.loads(path.read_text(encoding="utf-8"))


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def req(method: str, params: Any, rid: Any = 1) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


NEW = {"cwd": "/w", "mcpServers": []}


def test_initialize_decodes_with_its_capabilities():
    m = w.decode_message(req("initialize", {"protocolVersion": 1, "clientCapabilities": {
        "fs": {"readTextFile": True}, "elicitation": {"form": {}}}, "_meta": {"x": 1}}))
    assert isinstance(m, w.Request) and m.method == "initialize"
    assert m.params.protocol_version == 1
    assert m.params.client_capabilities.fs.read_text_file is True
    assert m.params.client_capabilities.elicitation.form == {}


def test_a_string_protocol_version_is_invalid_params_naming_the_field():
    m = w.decode_message(req("initialize", {"protocolVersion": "1"}, rid="a"))
    assert isinstance(m, w.Invalid) and m.code == -32602 and m.id == "a"
    assert "$.params.protocolVersion" in m.message and "Expected `int`" in m.message


def test_a_protocol_version_out_of_range_is_invalid_params():
    m = w.decode_message(req("initialize", {"protocolVersion": 70000}))
    assert isinstance(m, w.Invalid) and m.code == -32602 and "protocolVersion" in m.message


def test_a_prompt_without_prompt_is_invalid_params_naming_it():
    m = w.decode_message(req("session/prompt", {"sessionId": "s"}, rid=9))
    assert isinstance(m, w.Invalid) and (m.code, m.id) == (-32602, 9)
    assert "`prompt`" in m.message and m.message.startswith("session/prompt:")
    reply = m.reply()
    assert reply == {"jsonrpc": "2.0", "id": 9, "error": {"code": -32602, "message": m.message}}


def test_prompt_content_blocks_are_typed():
    m = w.decode_message(req("session/prompt", {"sessionId": "s", "prompt": [
        {"type": "text", "text": "hi"}, {"type": "resource_link", "name": "a.py", "uri": "file:///w/a.py"},
        {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "print(1)"}},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"}]}))
    assert isinstance(m, w.Request)
    assert [type(b).__name__ for b in m.params.prompt] == ["TextContent", "ResourceLink", "EmbeddedResource",
                                                           "ImageContent"]
    bad = w.decode_message(req("session/prompt", {"sessionId": "s", "prompt": [{"type": "video"}]}))
    assert isinstance(bad, w.Invalid) and bad.code == -32602 and "$.params.prompt[0]" in bad.message


def test_unknown_methods_and_notifications():
    m = w.decode_message(req("session/teleport", {}, rid="u"))
    assert isinstance(m, w.Invalid) and (m.code, m.id) == (-32601, "u")
    assert isinstance(w.decode_message(line({"jsonrpc": "2.0", "method": "x/y", "params": {}})), w.Ignored)
    # a malformed notification is never answered
    assert isinstance(w.decode_message(line({"jsonrpc": "2.0", "method": "session/cancel", "params": {}})), w.Ignored)


def test_a_notification_sent_with_an_id_is_a_request():
    m = w.decode_message(req("session/cancel", {"sessionId": "s"}, rid=4))
    assert isinstance(m, w.Request) and m.params.session_id == "s"
    bad = w.decode_message(req("session/cancel", {}, rid=5))
    assert isinstance(bad, w.Invalid) and bad.code == -32602


def test_cancel_notifications_decode():
    m = w.decode_message(line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}))
    assert isinstance(m, w.Notification) and m.params.session_id == "s"
    for rid in (3, "r", None):
        m = w.decode_message(line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}}))
        assert isinstance(m, w.Notification) and m.params.request_id == rid


@pytest.mark.parametrize("rid", ["s", "", 0, -5, 2**53, 1.5, None])
def test_ids_of_every_json_rpc_type_are_kept(rid):
    m = w.decode_message(req("session/new", NEW, rid=rid))
    assert isinstance(m, w.Request) and m.id == rid and type(m.id) is type(rid)
    bad = w.decode_message(req("session/new", {"cwd": 3}, rid=rid))
    assert isinstance(bad, w.Invalid) and bad.id == rid and type(bad.id) is type(rid)


@pytest.mark.parametrize("rid", [True, {"a": 1}, [1]])
def test_unusable_ids_are_invalid_requests_with_a_null_id(rid):
    m = w.decode_message(req("session/new", NEW, rid=rid))
    assert isinstance(m, w.Invalid) and (m.code, m.id) == (-32600, None)


@pytest.mark.parametrize("text,rid", [
    (b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{', 7),
    (b'{"id":"a b","method":', "a b"),
    (b'{"method":"x","params":{"id":3},"id":null,', None),
    (b'{"params":{"id":3}', None),
    (b'{"x":"{\\"id\\":4}","id":5 ', 5),
    (b'not json at all', None),
    (b'[{"id":1}', None),
])
def test_a_line_that_is_not_json_gets_parse_error_with_the_id_it_has(text, rid):
    m = w.decode_message(text)
    assert isinstance(m, w.Invalid) and m.code == -32700 and m.id == rid


def test_structurally_bad_messages():
    assert w.decode_message(b"[1,2]") == w.Invalid(None, -32600, "a JSON-RPC message must be an object")
    m = w.decode_message(line({"jsonrpc": "2.0", "id": 1}))
    assert isinstance(m, w.Invalid) and m.code == -32600
    m = w.decode_message(line({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": [1]}))
    assert isinstance(m, w.Invalid) and m.code == -32602
    assert isinstance(w.decode_message(b"   "), w.Ignored)


def test_too_deep_is_refused_with_the_id():
    deep = b'{"jsonrpc":"2.0","id":"d","method":"session/new","params":{"cwd":"/","mcpServers":[' + b"[" * 200 + \
        b"]" * 200 + b"]}}"
    m = w.decode_message(deep)
    assert isinstance(m, w.Invalid) and (m.code, m.id) == (-32600, "d")
    m = w.decode_message(b'{"id":"d","x":' + b"[" * 100_000)
    assert isinstance(m, w.Invalid) and m.id == "d"


def test_responses_to_our_requests():
    m = w.decode_message(line({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}))
    assert m == w.Response(0, {"outcome": {"outcome": "cancelled"}}, None)
    assert w.decode_permission_outcome(m.result).option_id is None
    assert w.decode_permission_outcome({"outcome": {"outcome": "selected", "optionId": "allow"}}).option_id == "allow"
    with pytest.raises(ValueError, match="request_permission"):
        w.decode_permission_outcome({"outcome": {"outcome": "selected"}})
    assert w.decode_elicitation_response({"action": "accept", "content": {"a": 1}}).content == {"a": 1}
    assert w.decode_elicitation_response({"action": "later"}).action == "cancel"  # never an accept


def test_output_lines_are_one_line_each():
    data = w.encode(w.response("x", {"t": "a\nb"}))
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data) == {"jsonrpc": "2.0", "id": "x", "result": {"t": "a\nb"}}


# -- against the pinned official schema -------------------------------------------------------

REQUEST_DEFS = {
    "initialize": "InitializeRequest", "session/new": "NewSessionRequest", "session/load": "LoadSessionRequest",
    "session/resume": "ResumeSessionRequest", "session/list": "ListSessionsRequest",
    "session/close": "CloseSessionRequest", "session/prompt": "PromptRequest",
    "session/set_config_option": "SetSessionConfigOptionRequest",
}


@pytest.mark.parametrize("method", sorted(w.AGENT_METHODS))
def test_params_structs_match_the_schema(method):
    """Every field a params Struct names is a property of the schema's request definition, and
    every field the schema requires is required by the Struct."""
    schema = _schema()
    d = schema["$defs"][REQUEST_DEFS[method]]
    info = msgspec.inspect.type_info(w.AGENT_METHODS[method])
    names = {f.encode_name for f in info.fields}
    required = {f.encode_name for f in info.fields if f.required}
    props = set(d.get("properties", {}))
    if method == "session/set_config_option":  # value/type live in the anyOf branches
        props |= {"value", "type"}
    assert names <= props, names - props
    assert set(d.get("required", ())) <= required, set(d.get("required", ())) - required
    if method == "session/set_config_option":
        assert "value" in required


def test_the_methods_are_the_stable_v1_ones():
    schema = _schema()
    stable = {d.get("x-method") for d in schema["$defs"].values() if isinstance(d, dict)}
    assert set(w.AGENT_METHODS) <= stable
    assert set(w.AGENT_NOTIFICATIONS) <= stable


# -- fuzz ------------------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: (st.lists(inner, max_size=4)
                                    | st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=20)
_methods = st.sampled_from(sorted(w.AGENT_METHODS) + sorted(w.AGENT_NOTIFICATIONS) + ["x", ""])


def _check(m: Any) -> None:
    assert isinstance(m, (w.Request, w.Notification, w.Response, w.Invalid, w.Ignored))
    if isinstance(m, w.Invalid):
        assert m.id is None or isinstance(m.id, (str, int, float)) and not isinstance(m.id, bool)
        assert json.loads(w.encode(m.reply()))["error"]["code"] == m.code


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_bytes_never_raise(data):
    _check(w.decode_message(data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_methods, _json, st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans()), st.booleans())
def test_fuzz_messages_never_raise(method, params, rid, with_id):
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if with_id:
        obj["id"] = rid
    data = json.dumps(obj).encode()
    m = w.decode_message(data)
    _check(m)
    _check(w.decode_message(data[: len(data) // 2]))  # cut lines too
