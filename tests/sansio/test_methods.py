"""The one method table of server → client requests (``codexrt._sansio._methods``) against the
pinned schema and its own rows (R-INT-1, R-INT-3, R-WIRE-7, R-HLP-1)."""

from __future__ import annotations

import json

import msgspec
import pytest

from codexrt._sansio import _methods as m
from codexrt._sansio._errors import InteractionError
from tests._support import pinned_schema_dir

SCHEMA = json.loads((pinned_schema_dir() / "codex_app_server_protocol.schemas.json").read_text())
DEFS = SCHEMA["definitions"]
SCHEMA_PARAMS = {alt["properties"]["method"]["enum"][0]: alt["properties"]["params"]["$ref"].rsplit("/", 1)[-1]
                 for alt in DEFS["ServerRequest"]["oneOf"]}

TOOL_APPROVAL = {"threadId": "t", "serverName": "s", "mode": "form", "message": "Allow the s MCP server to run tool \"echo\"?",
                 "requestedSchema": {"type": "object", "properties": {}},
                 "_meta": {"codex_approval_kind": "mcp_tool_call", "persist": ["session"]}}


@pytest.mark.parametrize("method", sorted(m.SERVER_REQUESTS))
def test_r_wire_7_each_row_types_its_params_by_the_schema_definition(method):
    row = m.SERVER_REQUESTS[method]
    assert row.params_type.__schema__ == SCHEMA_PARAMS[method]
    assert row.kind is m.KINDS[row.kind.name]
    required = set(DEFS[SCHEMA_PARAMS[method]].get("required", ()))
    with pytest.raises(msgspec.ValidationError):  # an identity missing is refused, not guessed
        row.typed_params({})
    assert required  # (the schema does require identities for every request)


def test_typed_params_reads_a_real_shaped_request():
    row = m.spec_for("item/commandExecution/requestApproval")
    assert row is not None
    typed = row.typed_params({"threadId": "t", "turnId": "u", "itemId": "i", "command": "ls", "unknownNew": 1})
    assert (typed.thread_id, typed.turn_id, typed.item_id, typed.command) == ("t", "u", "i", "ls")


def test_r_int_1_derived_tables_come_from_the_rows():
    assert m.METHOD_KINDS == {k: r.kind.name for k, r in m.SERVER_REQUESTS.items()}
    assert m.SUPPORTED_SERVER_REQUESTS == frozenset(m.SERVER_REQUESTS)
    assert set(m.DEFAULT_DEADLINES) == set(m.KINDS)
    assert m.DEFAULT_DEADLINES["dynamicToolCall"] == 600.0
    assert m.DEFAULT_DEADLINES["commandApproval"] == 4 * 3600.0
    assert m.APPROVAL_KINDS == {"commandApproval", "fileChangeApproval", "permissionsApproval", "mcpToolApproval",
                                "legacyExecApproval", "legacyPatchApproval"}


def test_mcp_tool_call_approval_is_its_own_kind():
    assert m.interaction_kind("mcpServer/elicitation/request", TOOL_APPROVAL) == "mcpToolApproval"
    assert m.interaction_kind("mcpServer/elicitation/request", {"mode": "form"}) == "elicitation"
    assert m.interaction_kind("no/such/method") == "unknown"


@pytest.mark.parametrize("method", sorted(m.SERVER_REQUESTS))
def test_r_hlp_1_refusal_never_grants(method):
    how, value = m.refusal(method, {})
    if m.SERVER_REQUESTS[method].refuses:
        assert how == "result" and value == m.safe_negative_reply(method, {})
        m.validate_reply(method, value, {})
    else:
        assert how == "error" and value[0] == m.REFUSAL_CODE
    assert "accept" not in json.dumps(value) and "approved" not in json.dumps(value)


def test_r_wire_7_an_unknown_method_has_no_row_and_no_safe_reply():
    assert m.refusal("account/chatgptAuthTokens/refresh")[0] == "error"
    assert m.refusal("x/y", message="no")[1] == (m.REFUSAL_CODE, "no")
    with pytest.raises(InteractionError):
        m.safe_negative_reply("x/y")


def test_tool_call_approval_negative_is_a_decline_and_a_form_is_cancelled():
    method = "mcpServer/elicitation/request"
    assert m.safe_negative_reply(method, TOOL_APPROVAL) == {"action": "decline", "content": None}
    assert m.safe_negative_reply(method, {"mode": "form"}) == {"action": "cancel", "content": None}


def test_r_int_3_decision_vocabulary_maps_by_kind_and_never_accepts_without_data():
    assert m.DECISIONS == ("accept", "acceptForSession", "decline", "cancel")
    cmd = "item/commandExecution/requestApproval"
    assert m.decision_reply(cmd, None) == ("result", {"decision": "decline"})
    assert m.decision_reply(cmd, "acceptForSession") == ("result", {"decision": "acceptForSession"})
    assert m.decision_reply(cmd, {"decision": "cancel"}) == ("result", {"decision": "cancel"})
    assert m.decision_reply("execCommandApproval", "accept") == ("result", {"decision": "approved"})
    assert m.decision_reply("execCommandApproval", "cancel") == ("result", {"decision": "abort"})
    how, value = m.decision_reply("execCommandApproval", "decline")
    assert how == "result" and "denied" in value["decision"]
    m.validate_reply("execCommandApproval", value, {})
    assert m.decision_reply("mcpServer/elicitation/request", "accept", TOOL_APPROVAL) == (
        "result", {"action": "accept", "content": {}})
    assert m.decision_reply("mcpServer/elicitation/request", "cancel", {"mode": "form"}) == (
        "result", {"action": "cancel", "content": None})
    assert m.decision_reply("item/tool/requestUserInput", "decline")[0] == "error"
    for method, params in (("item/tool/requestUserInput", {}), ("mcpServer/elicitation/request", {"mode": "form"}),
                           ("item/tool/call", {})):
        with pytest.raises(InteractionError) as info:
            m.decision_reply(method, "accept", params)
        assert info.value.code == "INTERACTION_INVALID_REPLY"
    with pytest.raises(InteractionError):
        m.decision_reply(cmd, "yes")


def test_describe_request_says_what_is_asked():
    cmd = {"command": ["ls", "-l"], "cwd": "/repo"}
    assert m.describe_request("item/commandExecution/requestApproval", cmd) == "run command: ls -l (in /repo)"
    assert m.describe_request("item/fileChange/requestApproval", {"reason": "fix"}) == "apply file changes: fix"
    assert m.describe_request("mcpServer/elicitation/request", {**TOOL_APPROVAL, "serverName": "s"}) == (
        "run tool echo of MCP server s")
    assert m.describe_request("x/y") == "answer x/y"
