"""Reply validators of the server → client requests (R-INT-3), pure (no I/O).

Each ``check_*`` refuses a reply that does not fit its request with
``InteractionError(INTERACTION_INVALID_REPLY)``. The values come from the pinned schema
(``tests/data/schema-<pinned version>``; tests/sansio/test_interactions_schema.py compares the
tables here with it). A request's ``availableDecisions`` is a UI hint, not the limit: the real
server accepts ``decline`` when it does not list it. Which validator answers which method is
the method table's business (:mod:`codexrt._sansio._methods`).
"""

from __future__ import annotations

from typing import Any, Mapping

from codexrt._sansio import _elicitation as elic
from codexrt._sansio._errors import InteractionError, InteractionInvalidReply

__all__ = [
    "COMMAND_DECISIONS",
    "COMMAND_DECISION_OBJECTS",
    "FILE_CHANGE_DECISIONS",
    "REVIEW_DECISIONS",
    "REVIEW_DECISION_OBJECTS",
    "PERMISSION_SCOPES",
    "ELICITATION_ACTIONS",
    "TOOL_CONTENT_TYPES",
    "check_command_approval",
    "check_file_change_approval",
    "check_review_approval",
    "check_permissions",
    "check_user_input",
    "check_elicitation",
    "check_tool_call",
    "invalid_reply",
]

# Decision values of the pinned schema — tests/sansio/test_interactions_schema.py checks them.
COMMAND_DECISIONS = frozenset({"accept", "acceptForSession", "decline", "cancel"})
COMMAND_DECISION_OBJECTS = frozenset({"acceptWithExecpolicyAmendment", "applyNetworkPolicyAmendment"})
FILE_CHANGE_DECISIONS = frozenset({"accept", "acceptForSession", "decline", "cancel"})
REVIEW_DECISIONS = frozenset({"approved", "approved_for_session", "approved_mcp_policy_amendment", "timed_out", "abort"})
REVIEW_DECISION_OBJECTS = frozenset({"approved_execpolicy_amendment", "network_policy_amendment", "denied"})
PERMISSION_SCOPES = frozenset({"turn", "session"})
ELICITATION_ACTIONS = frozenset({"accept", "decline", "cancel"})
TOOL_CONTENT_TYPES = {"inputText": "text", "inputImage": "imageUrl", "inputAudio": "audioUrl"}


def invalid_reply(msg: str, **details: Any) -> InteractionError:
    return InteractionInvalidReply(msg, details=details or None)


def only_keys(obj: dict[str, Any], allowed: set[str], what: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise invalid_reply(f"{what}: unknown field(s) {extra}", fields=extra)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _check_network_amendment(v: Any, what: str) -> None:
    if not isinstance(v, dict) or not isinstance(v.get("host"), str) or v.get("action") not in ("allow", "deny"):
        raise invalid_reply(f"{what} needs {{host, action: allow|deny}}")


def _check_command_decision(d: Any, method: str) -> None:
    if isinstance(d, str):
        if d in COMMAND_DECISIONS:
            return
        raise invalid_reply(f"invalid decision {d!r} for {method}; one of {sorted(COMMAND_DECISIONS)} "
                       f"or an object {sorted(COMMAND_DECISION_OBJECTS)}")
    if isinstance(d, dict) and len(d) == 1:
        (name, body), = d.items()
        if name == "acceptWithExecpolicyAmendment":
            if isinstance(body, dict) and _str_list(body.get("execpolicy_amendment")) and set(body) == {"execpolicy_amendment"}:
                return
            raise invalid_reply("acceptWithExecpolicyAmendment needs {execpolicy_amendment: [string]}")
        if name == "applyNetworkPolicyAmendment":
            if isinstance(body, dict) and set(body) == {"network_policy_amendment"}:
                _check_network_amendment(body["network_policy_amendment"], "network_policy_amendment")
                return
            raise invalid_reply("applyNetworkPolicyAmendment needs {network_policy_amendment: {host, action}}")
    raise invalid_reply(f"invalid decision for {method}")


def _check_review_decision(d: Any, method: str) -> None:
    if isinstance(d, str):
        if d in REVIEW_DECISIONS:
            return
        raise invalid_reply(f"invalid decision {d!r} for {method}; one of {sorted(REVIEW_DECISIONS)} "
                       f"or an object {sorted(REVIEW_DECISION_OBJECTS)}")
    if isinstance(d, dict) and len(d) == 1:
        (name, body), = d.items()
        if name == "approved_execpolicy_amendment" and isinstance(body, dict) \
                and _str_list(body.get("proposed_execpolicy_amendment")):
            return
        if name == "network_policy_amendment" and isinstance(body, dict):
            _check_network_amendment(body.get("network_policy_amendment"), "network_policy_amendment")
            return
        if name == "denied" and isinstance(body, dict) and isinstance(body.get("rejection"), str):
            return
    raise invalid_reply(f"invalid decision for {method}")


def _requested_paths(req: Any, key: str) -> set[str]:
    fs = req.get("fileSystem") if isinstance(req, dict) else None
    vals = fs.get(key) if isinstance(fs, dict) else None
    return {v for v in vals if isinstance(v, str)} if isinstance(vals, list) else set()


def check_permissions(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    only_keys(result, {"permissions", "scope", "strictAutoReview"}, "item/permissions/requestApproval")
    granted = result.get("permissions")
    if not isinstance(granted, dict):
        raise invalid_reply("item/permissions/requestApproval needs a 'permissions' object (grant {} to decline)")
    only_keys(granted, {"fileSystem", "network"}, "permissions")
    scope = result.get("scope", "turn")
    if not isinstance(scope, str) or scope not in PERMISSION_SCOPES:
        raise invalid_reply(f"scope must be one of {sorted(PERMISSION_SCOPES)}")
    if result.get("strictAutoReview") is not None and not isinstance(result["strictAutoReview"], bool):
        raise invalid_reply("strictAutoReview must be a boolean or null")
    requested = params.get("permissions") if isinstance(params.get("permissions"), dict) else {}
    fs = granted.get("fileSystem")
    if fs is not None:
        if not isinstance(fs, dict):
            raise invalid_reply("permissions.fileSystem must be an object or null")
        only_keys(fs, {"read", "write", "entries", "globScanMaxDepth"}, "permissions.fileSystem")
        for key in ("read", "write"):
            vals = fs.get(key)
            if vals is None:
                continue
            if not _str_list(vals):
                raise invalid_reply(f"permissions.fileSystem.{key} must be a list of paths")
            extra = set(vals) - _requested_paths(requested, key)
            if extra:
                raise invalid_reply(f"permissions.fileSystem.{key} grants paths that were not requested",
                               paths=sorted(extra))
        entries = fs.get("entries")
        if entries is not None:
            req_entries = ((requested.get("fileSystem") or {}).get("entries") or []) if isinstance(
                requested.get("fileSystem"), dict) else []
            if not isinstance(entries, list) or any(e not in req_entries for e in entries):
                raise invalid_reply("permissions.fileSystem.entries grants entries that were not requested")
        depth = fs.get("globScanMaxDepth")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
            raise invalid_reply("permissions.fileSystem.globScanMaxDepth must be a positive integer")
    net = granted.get("network")
    if net is not None:
        if not isinstance(net, dict):
            raise invalid_reply("permissions.network must be an object or null")
        only_keys(net, {"enabled"}, "permissions.network")
        enabled = net.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise invalid_reply("permissions.network.enabled must be a boolean or null")
        req_net = requested.get("network") if isinstance(requested.get("network"), dict) else {}
        if enabled is True and req_net.get("enabled") is not True:
            raise invalid_reply("permissions.network grants network access that was not requested")


def check_user_input(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    only_keys(result, {"answers"}, "item/tool/requestUserInput")
    answers = result.get("answers")
    if not isinstance(answers, dict):
        raise invalid_reply("item/tool/requestUserInput needs {answers: {questionId: {answers: [string]}}}")
    ids = {q.get("id") for q in params.get("questions") or () if isinstance(q, dict)}
    unknown = sorted(str(k) for k in answers if k not in ids)
    if unknown:
        raise invalid_reply(f"answers for unknown question id(s) {unknown}", questions=unknown)
    for qid, ans in answers.items():
        if not isinstance(ans, dict) or set(ans) != {"answers"} or not _str_list(ans["answers"]):
            raise invalid_reply(f"answer to {qid!r} must be {{answers: [string]}}", question=qid)


def check_elicitation(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    only_keys(result, {"action", "content", "_meta"}, "mcpServer/elicitation/request")
    action = result.get("action")
    if not isinstance(action, str) or action not in ELICITATION_ACTIONS:
        raise invalid_reply("elicitation replies need action accept/decline/cancel")
    content = result.get("content")
    if elic.is_tool_approval(params):
        # An MCP tool-call approval: accept is {content: {}}, remembered only as offered.
        parsed = elic.parse_elicitation(params)
        meta = result.get("_meta")
        if meta is not None:
            if action != "accept" or not isinstance(meta, dict) or set(meta) != {"persist"} \
                    or meta["persist"] not in parsed.persist_choices:
                raise invalid_reply(f"_meta of a tool-call approval is {{persist: one of {list(parsed.persist_choices)}}} "
                               "on an accept only")
        if action == "accept" and content != {}:
            raise invalid_reply("an MCP tool-call approval is accepted with content: {}")
        if action != "accept" and content is not None:
            raise invalid_reply(f"a {action} elicitation reply carries content: null")
        return
    if result.get("_meta") is not None and not isinstance(result.get("_meta"), dict):
        raise invalid_reply("_meta must be an object")
    if action != "accept":
        if content is not None:
            raise invalid_reply(f"a {action} elicitation reply carries content: null")
        return
    parsed = elic.parse_elicitation(params)
    if parsed.mode == "url":
        if content is not None:
            raise invalid_reply("a url elicitation is accepted with content: null (after the user opened it)")
        return
    if parsed.mode != "form":
        raise invalid_reply(f"this elicitation cannot be accepted by codexrt ({parsed.unsupported_reason}); "
                       "answer it with cancel")
    elic.validate_content(parsed, content)


def check_tool_call(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    only_keys(result, {"contentItems", "success"}, "item/tool/call")
    if not isinstance(result.get("success"), bool):
        raise invalid_reply("item/tool/call needs success: boolean")
    items = result.get("contentItems")
    if not isinstance(items, list):
        raise invalid_reply("item/tool/call needs contentItems: [...]")
    for i, it in enumerate(items):
        field = TOOL_CONTENT_TYPES.get(it["type"]) if isinstance(it, dict) and isinstance(it.get("type"), str) else None
        if field is None or not isinstance(it.get(field), str) or set(it) != {"type", field}:
            raise invalid_reply(f"contentItems[{i}] must be one of inputText{{text}}, inputImage{{imageUrl}}, "
                           "inputAudio{audioUrl}", index=i)


def _decision_of(result: dict[str, Any], method: str) -> Any:
    only_keys(result, {"decision"}, method)
    if "decision" not in result:
        raise invalid_reply(f"{method} needs a result with a 'decision'")
    return result["decision"]


def check_command_approval(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    _check_command_decision(_decision_of(result, method), method)


def check_file_change_approval(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    decision = _decision_of(result, method)
    if not isinstance(decision, str) or decision not in FILE_CHANGE_DECISIONS:
        raise invalid_reply(f"invalid decision for {method}; one of {sorted(FILE_CHANGE_DECISIONS)}")


def check_review_approval(method: str, result: dict[str, Any], params: Mapping[str, Any]) -> None:
    """The legacy ``execCommandApproval`` / ``applyPatchApproval`` (a ``ReviewDecision``)."""
    _check_review_decision(_decision_of(result, method), method)
