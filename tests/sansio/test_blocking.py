"""Split from ``tests/e2e/test_blocking.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import pytest

import codexrt
import codexrt.blocking
from codexrt.blocking import ApprovalRequest, approval_reply


def test_approval_reply_mapping():
    assert approval_reply("item/commandExecution/requestApproval", None) == ("result", {"decision": "decline"})
    assert approval_reply("item/fileChange/requestApproval", "acceptForSession") == (
        "result", {"decision": "acceptForSession"})
    assert approval_reply("mcpServer/elicitation/request", "cancel") == (
        "result", {"action": "cancel", "content": None})
    how, (code, message) = approval_reply("item/tool/requestUserInput", "decline")
    assert how == "error" and "declined" in message
    with pytest.raises(codexrt.ConfigError):
        approval_reply("item/tool/requestUserInput", "accept")  # never accepted without its data
    with pytest.raises(codexrt.ConfigError):
        approval_reply("item/commandExecution/requestApproval", "yes")
    with pytest.raises(codexrt.ConfigError):
        codexrt.blocking.connect(approvals="always")


def test_r_int_4_mcp_tool_call_approval_policies():
    """The real server's MCP tool-call approval is an approval: ``accept`` runs that call,
    ``acceptForSession`` remembers it for the session, the default declines."""
    from tests.sansio.test_interactions_elicitation import TOOL_APPROVAL

    method = "mcpServer/elicitation/request"
    req = ApprovalRequest("k", "t", method, TOOL_APPROVAL)
    assert req.kind == "mcpToolApproval" and req.describe() == "run tool echo of MCP server testsrv"
    assert approval_reply(method, "accept", TOOL_APPROVAL) == ("result", {"action": "accept", "content": {}})
    assert approval_reply(method, "acceptForSession", TOOL_APPROVAL) == (
        "result", {"action": "accept", "content": {}, "_meta": {"persist": "session"}})
    assert approval_reply(method, None, TOOL_APPROVAL) == ("result", {"action": "decline", "content": None})
    no_session = {**TOOL_APPROVAL, "_meta": {**TOOL_APPROVAL["_meta"], "persist": []}}
    with pytest.raises(codexrt.ConfigError):
        approval_reply(method, "acceptForSession", no_session)
    # an MCP server's own form still needs its content: "accept" alone is refused
    form = {**TOOL_APPROVAL, "_meta": None}
    assert ApprovalRequest("k", "t", method, form).kind == "elicitation"
    with pytest.raises(codexrt.ConfigError):
        approval_reply(method, "accept", form)
