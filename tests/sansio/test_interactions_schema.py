"""The reply tables of ``codexrt._runtime._interactions`` against the pinned 0.169.0 schema (R-INT-3, R-WIRE-7).

The decision values, content-item types, elicitation actions and permission scopes are read
from ``tests/data/schema-0.169.0``; a server upgrade that changes them fails here first.
"""

from __future__ import annotations

import json

import pytest

from codexrt import InteractionError
from codexrt._runtime._interactions import (
    COMMAND_DECISION_OBJECTS,
    COMMAND_DECISIONS,
    ELICITATION_ACTIONS,
    FILE_CHANGE_DECISIONS,
    METHOD_KINDS,
    PERMISSION_SCOPES,
    REVIEW_DECISION_OBJECTS,
    REVIEW_DECISIONS,
    SUPPORTED_SERVER_REQUESTS,
    TOOL_CONTENT_TYPES,
    safe_negative_reply,
    validate_reply,
)
from tests._support import ROOT, pinned_schema_dir

SCHEMA = json.loads((pinned_schema_dir() / "codex_app_server_protocol.schemas.json").read_text())
DEFS = SCHEMA["definitions"]

#: Server requests that are not questions for a user: codexrt answers them -32601 (R-WIRE-7).
NOT_INTERACTIONS = {"account/chatgptAuthTokens/refresh", "attestation/generate", "currentTime/read"}


def _alternatives(name: str, defs=DEFS) -> tuple[set[str], set[str]]:
    strings, objects = set(), set()
    for alt in defs[name]["oneOf"]:
        if "enum" in alt:
            strings.update(alt["enum"])
        else:
            objects.update(alt["required"])
    return strings, objects


def test_every_schema_server_request_is_an_interaction_or_refused():
    methods = {alt["properties"]["method"]["enum"][0] for alt in DEFS["ServerRequest"]["oneOf"]}
    assert SUPPORTED_SERVER_REQUESTS == methods - NOT_INTERACTIONS
    assert set(METHOD_KINDS) == SUPPORTED_SERVER_REQUESTS


def test_r_int_3_decision_tables_match_the_pinned_schema():
    assert _alternatives("CommandExecutionApprovalDecision") == (set(COMMAND_DECISIONS), set(COMMAND_DECISION_OBJECTS))
    assert _alternatives("FileChangeApprovalDecision") == (set(FILE_CHANGE_DECISIONS), set())
    assert _alternatives("ReviewDecision") == (set(REVIEW_DECISIONS), set(REVIEW_DECISION_OBJECTS))
    assert set(DEFS["McpServerElicitationAction"]["enum"]) == ELICITATION_ACTIONS
    assert set(DEFS["PermissionGrantScope"]["enum"]) == PERMISSION_SCOPES
    items = DEFS["v2"]["DynamicToolCallOutputContentItem"]["oneOf"]
    schema_items = {a["properties"]["type"]["enum"][0]: (set(a["required"]) - {"type"}).pop() for a in items}
    assert schema_items == TOOL_CONTENT_TYPES
    assert DEFS["ToolRequestUserInputResponse"]["required"] == ["answers"]
    assert DEFS["DynamicToolCallResponse"]["required"] == ["contentItems", "success"]


PARAMS = {
    "item/permissions/requestApproval": {"permissions": {"fileSystem": {"read": ["/a"]}, "network": {"enabled": True}}},
    "item/tool/requestUserInput": {"questions": [{"id": "q", "header": "h", "question": "?"}]},
    "mcpServer/elicitation/request": {"mode": "form", "message": "m",
                                      "requestedSchema": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize("method", sorted(SUPPORTED_SERVER_REQUESTS))
def test_r_int_3_safe_negative_replies_are_valid_and_never_accept(method):
    reply = safe_negative_reply(method, PARAMS.get(method))
    validate_reply(method, reply, PARAMS.get(method, {}))
    text = json.dumps(reply)
    assert '"accept' not in text and '"approved' not in text and '"success": true' not in text
    assert reply.get("permissions", {}) == {}  # a grant of nothing


def test_available_decisions_is_a_hint_not_the_limit():
    params = {"availableDecisions": ["accept", "cancel"]}
    validate_reply("item/commandExecution/requestApproval", {"decision": "decline"}, params)


@pytest.mark.parametrize("method, result", [
    ("item/commandExecution/requestApproval", {"decision": "decline", "extra": 1}),
    ("item/commandExecution/requestApproval", {"decision": {"applyNetworkPolicyAmendment": {
        "network_policy_amendment": {"host": "h", "action": "maybe"}}}}),
    ("item/commandExecution/requestApproval", ["accept"]),
    ("item/permissions/requestApproval", {"permissions": {"network": {"enabled": True}}, "scope": "forever"}),
    ("item/permissions/requestApproval", {"permissions": {"fileSystem": {"read": ["/b"]}}}),
    ("item/permissions/requestApproval", {}),
    ("item/tool/requestUserInput", {"answers": {"q": {"answers": "not a list"}}}),
    ("item/tool/requestUserInput", {"answers": {"q": ["bare list"]}}),
    ("mcpServer/elicitation/request", {"action": "decline", "content": {"x": 1}}),
    ("mcpServer/elicitation/request", {"action": {"accept": 1}}),
    ("item/tool/call", {"contentItems": [{"type": "inputImage", "url": "x"}], "success": True}),
    ("item/tool/call", {"contentItems": [], "success": "yes"}),
    ("applyPatchApproval", {"decision": "accept"}),
    ("applyPatchApproval", {"decision": {"denied": {}}}),
])
def test_r_int_3_invalid_replies_are_refused(method, result):
    with pytest.raises(InteractionError) as info:
        validate_reply(method, result, PARAMS.get(method, {}))
    assert info.value.code in ("INTERACTION_INVALID_REPLY", "ELICITATION_INVALID_ANSWER")


def test_permissions_grant_a_subset_of_the_request():
    params = PARAMS["item/permissions/requestApproval"]
    validate_reply("item/permissions/requestApproval",
                   {"permissions": {"fileSystem": {"read": ["/a"]}, "network": {"enabled": True}}, "scope": "session"},
                   params)
    validate_reply("item/permissions/requestApproval", {"permissions": {"network": {"enabled": False}}}, params)
    with pytest.raises(InteractionError):
        validate_reply("item/permissions/requestApproval", {"permissions": {"network": {"enabled": True}}},
                       {"permissions": {}})
