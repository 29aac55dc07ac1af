"""MCP elicitation mapping, sans-IO (R-INT-4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt import InteractionError
from codexrt._sansio._elicitation import (
    accept_reply,
    cancel_reply,
    parse_elicitation,
    restore_content,
    url_accept_reply,
)

FORM = {
    "serverName": "db",
    "threadId": "t1",
    "turnId": "u1",
    "mode": "form",
    "message": "Connect to the database",
    "requestedSchema": {
        "type": "object",
        "required": ["host", "port"],
        "properties": {
            "host": {"type": "string", "title": "Host", "minLength": 1},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "ratio": {"type": "number"},
            "tls": {"type": "boolean", "default": True},
            "env": {"type": "string", "enum": ["dev", "prod"], "enumNames": ["Development", "Production"]},
            "level": {"type": "string", "oneOf": [{"const": "lo", "title": "Low"}, {"const": "hi", "title": "High"}]},
            "features": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 2},
        },
    },
}


def test_r_int_4_form_fields_have_stable_ids_and_required_from_schema():
    e = parse_elicitation(FORM)
    assert e.mode == "form" and e.server_name == "db" and e.message == "Connect to the database"
    assert [f.id for f in e.fields] == ["host", "port", "ratio", "tls", "env", "level", "features"]
    assert {f.id for f in e.fields if f.required} == {"host", "port"}
    assert [(o.value, o.label) for o in e.field("env").options] == [("dev", "Development"), ("prod", "Production")]
    assert [(o.value, o.label) for o in e.field("level").options] == [("lo", "Low"), ("hi", "High")]
    assert parse_elicitation(FORM) == e  # stable across replays


def test_r_int_4_types_are_restored_on_submit():
    e = parse_elicitation(FORM)
    content = restore_content(e, {"host": "db.local", "port": "5432", "ratio": "0.5", "tls": "no", "env": "prod",
                                  "level": "hi", "features": ["a", "c"]})
    assert content == {"host": "db.local", "port": 5432, "ratio": 0.5, "tls": False, "env": "prod", "level": "hi",
                       "features": ["a", "c"]}
    assert type(content["port"]) is int and type(content["ratio"]) is float and content["tls"] is False
    assert restore_content(e, {"host": "h", "port": 7, "ratio": "3", "features": "b, c"}) == {
        "host": "h", "port": 7, "ratio": 3, "features": ["b", "c"]}
    assert accept_reply(e, {"host": "h", "port": "1"}) == {"action": "accept", "content": {"host": "h", "port": 1}}


def test_r_int_4_optional_empty_fields_are_omitted_required_ones_refused():
    e = parse_elicitation(FORM)
    assert restore_content(e, {"host": "h", "port": "80", "ratio": "", "features": []}) == {"host": "h", "port": 80}
    with pytest.raises(InteractionError) as info:
        restore_content(e, {"host": "h"})
    assert info.value.code == "ELICITATION_INVALID_ANSWER" and info.value.details["field"] == "port"


@pytest.mark.parametrize("answers, field", [
    ({"host": "h", "port": "80.5"}, "port"),
    ({"host": "h", "port": "0"}, "port"),
    ({"host": "h", "port": "forty-two"}, "port"),
    ({"host": "h", "port": True}, "port"),
    ({"host": "h", "port": "1", "ratio": "nan"}, "ratio"),
    ({"host": "h", "port": "1", "tls": "maybe"}, "tls"),
    ({"host": "h", "port": "1", "env": "staging"}, "env"),
    ({"host": "h", "port": "1", "features": ["a", "z"]}, "features"),
    ({"host": "h", "port": "1", "features": ["a", "b", "c"]}, "features"),
    ({"host": 5, "port": "1"}, "host"),
])
def test_r_int_4_invalid_answers_name_the_field_not_the_value(answers, field):
    with pytest.raises(InteractionError) as info:
        restore_content(parse_elicitation(FORM), answers)
    assert info.value.details["field"] == field
    value = answers[field]
    if isinstance(value, str) and len(value) >= 4:
        assert value not in info.value.message  # answers may be secrets


def test_unknown_field_ids_are_refused():
    with pytest.raises(InteractionError):
        restore_content(parse_elicitation(FORM), {"host": "h", "port": "1", "extra": "x"})


def test_r_int_4_url_mode_only_surfaces_the_url():
    e = parse_elicitation({"serverName": "s", "threadId": "t", "mode": "url", "message": "Sign in",
                           "url": "https://example.invalid/auth", "elicitationId": "el-1"})
    assert e.mode == "url" and e.url == "https://example.invalid/auth" and e.elicitation_id == "el-1"
    assert e.to_wire()["url"] == e.url and "fields" not in e.to_wire()
    assert url_accept_reply(e) == {"action": "accept", "content": None}
    with pytest.raises(InteractionError):
        restore_content(e, {})


@pytest.mark.parametrize("params", [
    {"mode": "openai/form", "message": "m", "requestedSchema": {"type": "object"}},
    {"mode": "openaiForm", "message": "m", "requestedSchema": True},
    {"mode": "openai/userVerification", "challenge": "c", "description": "d", "title": "t"},
    {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {
        "nested": {"type": "object", "properties": {}}}}},
    {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {
        "s": {"type": "string", "pattern": "^x$"}}}},
    {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}, "required": ["gone"]}},
    {"mode": "url", "message": "m"},
    {},
])
def test_r_int_4_unsupported_schemas_are_cancelled(params):
    e = parse_elicitation(params)
    assert e.mode == "unsupported" and e.unsupported_reason
    assert cancel_reply() == {"action": "cancel", "content": None}
    with pytest.raises(InteractionError):
        url_accept_reply(e)


@settings(max_examples=60, deadline=None)
@given(port=st.integers(1, 65535), ratio=st.floats(allow_nan=False, allow_infinity=False, width=32),
       tls=st.booleans())
def test_r_int_4_restoration_round_trips_text_inputs(port, ratio, tls):
    e = parse_elicitation(FORM)
    content = restore_content(e, {"host": "h", "port": str(port), "ratio": repr(float(ratio)),
                                  "tls": "true" if tls else "false"})
    assert content["port"] == port and content["tls"] is tls
    assert content["ratio"] == pytest.approx(float(ratio))


# The real server's MCP tool-call approval (0.169.0, recorded in docs/real-server-notes.md).
TOOL_APPROVAL = {
    "threadId": "t1", "turnId": "u1", "serverName": "testsrv", "mode": "form",
    "_meta": {"codex_approval_kind": "mcp_tool_call", "persist": ["session", "always"], "tool_name": "echo",
              "tool_description": "Echo the text back.", "tool_params": {"text": "hi"},
              "tool_params_display": [{"name": "text", "value": "hi", "display_name": "text"}]},
    "message": "Allow the testsrv MCP server to run tool \"echo\"?",
    "requestedSchema": {"type": "object", "properties": {}},
}


def test_r_int_4_mcp_tool_call_approval_is_an_approval_not_an_empty_form():
    from codexrt._runtime._interactions import interaction_kind

    el = parse_elicitation(TOOL_APPROVAL)
    assert el.mode == "toolApproval" and el.fields == ()
    wire = el.to_wire()["toolApproval"]
    assert wire == {"tool": "echo", "toolDescription": "Echo the text back.", "params": {"text": "hi"},
                    "paramsDisplay": [{"name": "text", "value": "hi", "display_name": "text"}],
                    "persistChoices": ["session", "always"]}
    assert interaction_kind("mcpServer/elicitation/request", TOOL_APPROVAL) == "mcpToolApproval"
    # the MCP server's own form (``_meta: null`` on the real server) stays an elicitation
    assert interaction_kind("mcpServer/elicitation/request", {**FORM, "_meta": None}) == "elicitation"


def test_r_int_4_mcp_tool_call_approval_replies_and_safe_negative():
    from codexrt._runtime._interactions import safe_negative_reply, validate_reply
    from codexrt._sansio._elicitation import tool_approval_reply

    el = parse_elicitation(TOOL_APPROVAL)
    method = "mcpServer/elicitation/request"
    assert tool_approval_reply(el, approve=True) == {"action": "accept", "content": {}}
    assert tool_approval_reply(el, approve=True, persist="session") == {
        "action": "accept", "content": {}, "_meta": {"persist": "session"}}
    assert tool_approval_reply(el, approve=False) == {"action": "decline", "content": None}
    with pytest.raises(InteractionError):
        tool_approval_reply(el, approve=True, persist="forever")  # not offered
    # never granted by default: the deadline/policy reply refuses the call
    assert safe_negative_reply(method, TOOL_APPROVAL) == {"action": "decline", "content": None}
    for ok in ({"action": "accept", "content": {}}, {"action": "accept", "content": {}, "_meta": {"persist": "always"}},
               {"action": "decline", "content": None}, {"action": "cancel", "content": None}):
        validate_reply(method, ok, TOOL_APPROVAL)
    for bad in ({"action": "accept", "content": {"x": 1}}, {"action": "accept", "content": None},
                {"action": "accept", "content": {}, "_meta": {"persist": "forever"}},
                {"action": "decline", "content": None, "_meta": {"persist": "session"}}):
        with pytest.raises(InteractionError) as info:
            validate_reply(method, bad, TOOL_APPROVAL)
        assert info.value.code == "INTERACTION_INVALID_REPLY"


def test_r_int_4_tool_approval_of_0_147_names_the_tool_in_its_message_only():
    """0.147.0 sends the same approval without ``_meta.tool_name`` (recorded by hand)."""
    old = {**TOOL_APPROVAL, "_meta": {k: v for k, v in TOOL_APPROVAL["_meta"].items() if k != "tool_name"}}
    el = parse_elicitation(old)
    assert el.mode == "toolApproval" and el.tool_name == "echo"
    assert parse_elicitation({**old, "message": "Allow this?"}).tool_name is None
