"""The one method table of the server → client requests (R-INT-1 … R-INT-4, R-WIRE-7), pure.

In the spirit of lsprotocol's ``METHOD_TO_TYPES``: for every request method the real app-server
sends (the pinned schema's ``ServerRequest`` union), one row says

* its interaction **kind** (``commandApproval``, ``userInput`` …) — an MCP elicitation whose
  ``_meta.codex_approval_kind`` is ``"mcp_tool_call"`` is the kind ``mcpToolApproval``, an
  approval, not a form (:func:`interaction_kind`);
* the kind's **default deadline** (seconds; ``None`` = never) after which codexrt sends the
* **safe negative reply** — decline / grant nothing / no answers / cancel / tool failure, never an
  accept (what a deadline, ``decline()``, the built-in policies, helpers and serve send);
* its **reply validator** (:mod:`codexrt._sansio._replies`, values from the pinned schema);
* its **typed params** (a msgspec Struct of :mod:`codexrt._sansio._models`; :meth:`ServerRequestSpec.typed_params`);
* whether the safe negative reply is a *refusal* (``refuses``: a decision or action the server
  reads as "no") or an *empty answer* (permissions granted: none; answers: none; tool: failed) —
  helpers and the blocking facade's ``"decline"`` answer the latter kinds with a JSON-RPC error
  instead (:func:`refusal`).

Interactions, the blocking facade, helpers and ``codexrt serve`` all read this table; a method
not in it is not an interaction and gets ``-32601`` (R-WIRE-7). Nothing here grants anything by
default: :func:`safe_negative_reply` is never an accept (tests/sansio/test_interactions_schema.py
validates every row's negative reply with the row's own validator).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs
import msgspec

from codexrt._sansio import _elicitation as elic
from codexrt._sansio import _models as models
from codexrt._sansio import _replies as replies
from codexrt._sansio._errors import InteractionInvalidReply

__all__ = [
    "RequestKind",
    "ServerRequestSpec",
    "KINDS",
    "SERVER_REQUESTS",
    "METHOD_KINDS",
    "SUPPORTED_SERVER_REQUESTS",
    "DEFAULT_DEADLINES",
    "APPROVAL_KINDS",
    "REFUSAL_CODE",
    "spec_for",
    "interaction_kind",
    "validate_reply",
    "safe_negative_reply",
    "refusal",
    "DECISIONS",
    "decision_reply",
    "describe_request",
]

_HOURS = 3600.0

#: JSON-RPC error code of a refusal sent as an error (a request with no declining result).
REFUSAL_CODE = -32000

Validator = Callable[[str, dict[str, Any], Mapping[str, Any]], None]
NegativeReply = Callable[[Mapping[str, Any]], dict[str, Any]]


@attrs.frozen
class RequestKind:
    """An interaction kind: its default deadline and whether it is an approval (never granted
    by default; the decline policies decline exactly these)."""

    name: str
    deadline: float | None
    approval: bool


@attrs.frozen
class ServerRequestSpec:
    """One row of :data:`SERVER_REQUESTS`."""

    method: str
    kind: RequestKind
    params_type: type[msgspec.Struct]
    validate: Validator
    negative: NegativeReply
    #: the safe negative reply is a refusal the server reads as "no" (a decision/action), not
    #: an empty answer (no permissions, no answers, a failed tool)
    refuses: bool
    #: the short name ``codexrt.blocking.ApprovalRequest.kind`` shows (``command``, ``toolCall`` …)
    label: str
    legacy: bool = False

    def typed_params(self, params: Mapping[str, Any]) -> Any:
        """The params as this method's msgspec Struct (unknown fields ignored;
        ``msgspec.ValidationError`` when an identity is missing)."""
        return msgspec.convert(dict(params), self.params_type)


def _k(name: str, deadline: float | None, approval: bool) -> RequestKind:
    return RequestKind(name, deadline, approval)


#: Every interaction kind, by name.
KINDS: dict[str, RequestKind] = {k.name: k for k in (
    _k("commandApproval", 4 * _HOURS, True),
    _k("fileChangeApproval", 4 * _HOURS, True),
    _k("permissionsApproval", 4 * _HOURS, True),
    _k("userInput", 4 * _HOURS, False),
    _k("elicitation", 4 * _HOURS, False),
    _k("mcpToolApproval", 4 * _HOURS, True),
    _k("legacyExecApproval", 4 * _HOURS, True),
    _k("legacyPatchApproval", 4 * _HOURS, True),
    # a dynamic tool call is answered by a program, not a human
    _k("dynamicToolCall", 600.0, False),
)}


def _decline(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"decision": "decline"}


def _denied(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"decision": {"denied": {"rejection": "declined by codexrt (no approval from the user)"}}}


def _no_permissions(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"permissions": {}, "scope": "turn"}


def _no_answers(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"answers": {}}


def _elicitation_no(params: Mapping[str, Any]) -> dict[str, Any]:
    # an MCP tool-call approval is refused; a question is cancelled (nothing answered)
    return elic.decline_reply() if elic.is_tool_approval(params) else elic.cancel_reply()


def _tool_failed(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"contentItems": [{"type": "inputText", "text": "the client did not run this tool"}], "success": False}


def _row(method: str, kind: str, params_type: type[msgspec.Struct], validate: Validator, negative: NegativeReply,
         *, refuses: bool, label: str, legacy: bool = False) -> ServerRequestSpec:
    return ServerRequestSpec(method, KINDS[kind], params_type, validate, negative, refuses, label, legacy)


#: Server request method → its row. Legacy rows: turns started via the deprecated SendUserTurn
#: APIs, which codexrt never uses; a server that sends them anyway still gets a typed, validated answer.
SERVER_REQUESTS: dict[str, ServerRequestSpec] = {r.method: r for r in (
    _row("item/commandExecution/requestApproval", "commandApproval", models.CommandExecutionRequestApprovalParams,
         replies.check_command_approval, _decline, refuses=True, label="command"),
    _row("item/fileChange/requestApproval", "fileChangeApproval", models.FileChangeRequestApprovalParams,
         replies.check_file_change_approval, _decline, refuses=True, label="fileChange"),
    _row("item/permissions/requestApproval", "permissionsApproval", models.PermissionsRequestApprovalParams,
         replies.check_permissions, _no_permissions, refuses=False, label="permissions"),
    _row("item/tool/requestUserInput", "userInput", models.ToolRequestUserInputParams,
         replies.check_user_input, _no_answers, refuses=False, label="userInput"),
    _row("mcpServer/elicitation/request", "elicitation", models.McpServerElicitationRequestParams,
         replies.check_elicitation, _elicitation_no, refuses=True, label="elicitation"),
    _row("item/tool/call", "dynamicToolCall", models.DynamicToolCallParams,
         replies.check_tool_call, _tool_failed, refuses=False, label="toolCall"),
    _row("execCommandApproval", "legacyExecApproval", models.ExecCommandApprovalParams,
         replies.check_review_approval, _denied, refuses=True, label="execCommandApproval", legacy=True),
    _row("applyPatchApproval", "legacyPatchApproval", models.ApplyPatchApprovalParams,
         replies.check_review_approval, _denied, refuses=True, label="applyPatchApproval", legacy=True),
)}

#: Server request method → its kind name (derived from the table).
METHOD_KINDS: dict[str, str] = {m: r.kind.name for m, r in SERVER_REQUESTS.items()}
#: Server requests codexrt hands to the host; any other gets -32601 (R-WIRE-7).
SUPPORTED_SERVER_REQUESTS: frozenset[str] = frozenset(SERVER_REQUESTS)
#: Kind → seconds an interaction waits before codexrt sends the safe negative reply (``None`` = never).
DEFAULT_DEADLINES: dict[str, float | None] = {name: k.deadline for name, k in KINDS.items()}
#: The kinds that are approvals.
APPROVAL_KINDS: frozenset[str] = frozenset(name for name, k in KINDS.items() if k.approval)


def spec_for(method: str) -> ServerRequestSpec | None:
    return SERVER_REQUESTS.get(method)


def interaction_kind(method: str, params: Any = None) -> str:
    """The kind of a server request: :data:`METHOD_KINDS`, except that the real server's MCP
    tool-call approval (an elicitation whose ``_meta.codex_approval_kind`` is
    ``"mcp_tool_call"``) is ``mcpToolApproval`` — an approval, not a form. ``"unknown"`` for a
    method not in the table."""
    row = SERVER_REQUESTS.get(method)
    if row is None:
        return "unknown"
    if row.kind.name == "elicitation" and elic.is_tool_approval(params):
        return "mcpToolApproval"
    return row.kind.name


def validate_reply(method: str, result: Any, params: Mapping[str, Any] | None = None) -> None:
    """Refuse a reply that does not fit the request (R-INT-3), with
    ``InteractionError(INTERACTION_INVALID_REPLY)``. Values come from the pinned schema;
    ``availableDecisions`` is not the limit. A method not in the table is not checked here (it
    never becomes an interaction)."""
    params = params or {}
    if not isinstance(result, dict):
        raise replies.invalid_reply(f"{method} needs an object result")
    row = SERVER_REQUESTS.get(method)
    if row is not None:
        row.validate(method, result, params)


def safe_negative_reply(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The reply that grants nothing: what a deadline, ``decline()`` and the built-in policies
    send. Never an accept."""
    row = SERVER_REQUESTS.get(method)
    if row is None:
        raise InteractionInvalidReply(f"no safe reply is known for {method}")
    return row.negative(params or {})


def refusal(method: str, params: Any = None, *, message: str | None = None) -> tuple[str, Any]:
    """How to say "no" to ``method`` outright: ``("result", safe negative reply)`` when that reply
    is a refusal the server understands (approvals, MCP elicitations), else ``("error", (code,
    message))`` — a request whose negative reply is an empty answer (permissions, questions, a
    dynamic tool) or that is not in the table. Never an acceptance."""
    row = SERVER_REQUESTS.get(method)
    if row is not None and row.refuses:
        return "result", row.negative(params if isinstance(params, dict) else {})
    return "error", (REFUSAL_CODE, message or f"{method} declined by the client")


# -- the decision vocabulary (the blocking facade, ``codexrt run``, ``Interaction.answer``) ------------

#: The named decisions a host may answer a request with; anything else is a full result dict.
DECISIONS = ("accept", "acceptForSession", "decline", "cancel")

_LEGACY_DECISIONS = {"accept": "approved", "acceptForSession": "approved_for_session", "cancel": "abort"}


def decision_reply(method: str, decision: Any, params: Mapping[str, Any] | None = None) -> tuple[str, Any]:
    """A named decision as it goes on the wire (R-INT-3, R-INT-4): ``("result", result)`` or
    ``("error", (code, message))``.

    ``None`` means ``"decline"``; a dict is the result itself (validated when it is sent).
    Command/file approvals carry the decision; an MCP tool-call approval is accepted with
    ``content: {}`` (``acceptForSession`` remembered for the session when the server offers
    it); elicitations are declined/cancelled with ``content: null``; a request whose negative
    reply is an empty answer (questions, permissions, a dynamic tool) is declined with a
    JSON-RPC error. ``accept`` of a request that needs content (questions, a form) raises
    ``InteractionError(INTERACTION_INVALID_REPLY)``: nothing is accepted without its data."""
    if decision is None:
        decision = "decline"
    if isinstance(decision, dict):
        return "result", decision
    if decision not in DECISIONS:
        raise replies.invalid_reply(f"decision must be one of {list(DECISIONS)} or a result dict, not {decision!r}")
    kind = interaction_kind(method, params)
    if kind in ("commandApproval", "fileChangeApproval"):
        return "result", {"decision": decision}
    if kind in ("legacyExecApproval", "legacyPatchApproval"):
        if decision == "decline":
            return "result", safe_negative_reply(method, params)
        return "result", {"decision": _LEGACY_DECISIONS[decision]}
    if kind == "mcpToolApproval" and decision in ("accept", "acceptForSession"):
        el = elic.parse_elicitation(params or {})
        return "result", elic.tool_approval_reply(el, approve=True,
                                                  persist="session" if decision == "acceptForSession" else None)
    if decision in ("decline", "cancel"):
        if kind in ("elicitation", "mcpToolApproval"):
            return "result", {"action": decision, "content": None}
        return "error", (REFUSAL_CODE, f"{method} declined by the host")
    raise replies.invalid_reply(f"{method} cannot be answered with {decision!r}: pass a full result dict")


def _param(params: Mapping[str, Any], key: str) -> str | None:
    v = params.get(key)
    return v if isinstance(v, str) else None


def describe_request(method: str, params: Mapping[str, Any] | None = None) -> str:
    """One human line: what the request asks."""
    params = params or {}
    kind = interaction_kind(method, params)
    reason = _param(params, "reason")
    if kind == "commandApproval":
        cmd = params.get("command")
        text = " ".join(str(c) for c in cmd) if isinstance(cmd, list) else cmd if isinstance(cmd, str) else None
        cwd = _param(params, "cwd")
        return f"run command: {text}" + (f" (in {cwd})" if cwd else "")
    if kind == "fileChangeApproval":
        return "apply file changes" + (f": {reason}" if reason else "")
    if kind == "permissionsApproval":
        return "grant extra permissions" + (f": {reason}" if reason else "")
    if kind == "userInput":
        return "answer questions from the agent"
    if kind == "mcpToolApproval":
        tool = elic.parse_elicitation(params).tool_name or "?"
        return f"run tool {tool} of MCP server {params.get('serverName', '?')}"
    if kind == "elicitation":
        return f"answer a form from MCP server {params.get('serverName', '?')}"
    return f"answer {method}"
