"""Interactions: native server → client requests waiting for the host (R-INT-1 … R-INT-4, R-PRIV-1).

Why a registry: the app-server asks the client things (approve this command, answer these
questions, fill this MCP form, run this dynamic tool) with JSON-RPC requests whose ids start at
``0`` on every connection. A host UI must never answer the wrong one — not a request of an older
child that had the same raw id, not a dialog it already answered, not a page it showed before a
rebuild. So the host never sees raw ids: it gets an opaque ``interactionKey`` bound to the
request *instance* and a ``dialogToken`` for the page that shows it, and answers with both.

Theory of operation
-------------------
*States* (one table, :data:`TRANSITIONS`)::

    pending ──answer──▶ answering ──sent──▶ answered
       │                    │ (reply failed / privacy index failed: error reply sent)
       │                    └────────────────▶ answered
       ├──serverRequest/resolved──▶ resolved      (also from answering/answered)
       ├──deadline──▶ (safe negative reply) ──▶ expired
       └──runtime reset / child exit──▶ expired

Only ``pending`` accepts an answer. ``answering`` is entered *before* the first await so two
concurrent answers can never both be sent (the second is ``INTERACTION_DUPLICATE``).

*Keys and tokens.* The key is ``ik-<digest>``, the digest taken over channel, session epoch,
generation, the raw id, a per-runtime delivery sequence and a nonce — unique per request
instance even when the raw id recurs. The token rotates on :meth:`InteractionRegistry.replay`
(R-INT-2); the previous token is then refused (``INTERACTION_STALE_TOKEN``). An answer for an
interaction of an older generation is ``INTERACTION_WRONG_GENERATION``.

*Deadlines* are explicit per kind (:data:`DEFAULT_DEADLINES`, seconds, changeable per runtime
with ``Runtime.set_interaction_deadlines``). Approvals and questions wait for a human, so they
get hours, not an RPC timeout; a dynamic tool call is answered by a program. When a deadline
passes codexrt answers the server with the kind's **safe negative** reply
(:func:`safe_negative_reply`: decline / grant nothing / no answers / cancel / tool failure —
never an accept) and publishes ``interactionExpired``. Replays keep the deadline.

*Typed replies* (R-INT-3) are validated by :func:`validate_reply` against the decision values
of the pinned schema (``tests/data/schema-<pinned version>``; a test compares the tables here with it).
A request's ``availableDecisions`` is a UI hint, not the limit: the real server accepts
``decline`` when it does not list it.

*Policies.* ``Runtime.set_interaction_policy(policy)``: ``policy(interaction)`` is awaited in its
own task in the runtime's nursery (never on the reader). It returns a reply (sent like a host
answer, marked ``by: "policy"``) or ``None`` (leave it to the host). A policy that raises, or
returns an invalid reply, produces ``interactionPolicyError`` and the interaction stays pending.

*Privacy* (R-PRIV-1). Before an answer to ``item/tool/requestUserInput`` or an accepted MCP
elicitation is sent, :class:`PrivacyStore` writes one atomic record file (identities and
``isSecret`` flags only, see ``codexrt._sansio._privacy``). If that write fails the answer is
**not** forwarded: the server gets a JSON-RPC error reply, the host gets a
``privacyIndexWriteFailed`` event and ``InteractionError(PRIVACY_INDEX_WRITE_FAILED)``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import tempfile
import time
import uuid
from typing import Any, Awaitable, Callable, Iterable, Mapping, Protocol

import trio

from codexrt._sansio._errors import (
    InteractionConfigError,
    InteractionDuplicate,
    InteractionError,
    InteractionExpired,
    InteractionInvalidReply,
    InteractionStaleToken,
    InteractionStateError,
    InteractionUnknown,
    InteractionWrongGeneration,
)
from codexrt._io._private import ensure_private_dir
from codexrt._sansio import _elicitation as elic
from codexrt._sansio._privacy import (
    PrivacyIndex,
    PrivacyRecord,
    home_fingerprint,
    legacy_file_name,
    load_index,
    marker_file_name,
    record_file_name,
    record_for_elicitation,
    record_for_user_input,
)
from codexrt._sansio._wire import ServerRequest



class InteractionOwner(Protocol):
    """What an :class:`Interaction` needs of the runtime that owns it (the
    :class:`~codexrt.Runtime`): its channel and session for the dialog token, and the two
    answering calls that validate, record and send a reply."""

    @property
    def session_epoch(self) -> str: ...

    @property
    def config(self) -> Any: ...

    async def respond_interaction(self, key: str, dialog_token: str, result: Any) -> None: ...

    async def respond_interaction_error(self, key: str, dialog_token: str, code: int, message: str) -> None: ...

__all__ = [
    "METHOD_KINDS",
    "SUPPORTED_SERVER_REQUESTS",
    "DEFAULT_DEADLINES",
    "TRANSITIONS",
    "COMMAND_DECISIONS",
    "FILE_CHANGE_DECISIONS",
    "REVIEW_DECISIONS",
    "Interaction",
    "InteractionRegistry",
    "InteractionPolicy",
    "PrivacyStore",
    "validate_reply",
    "safe_negative_reply",
    "decline_all",
    "decline_all_in_read_only",
    "default_privacy_dir",
    "PRIVACY_ERROR_CODE",
    "PlanExecution",
    "privacy_record_for",
    "INTERACTION_COMMANDS",
    "interaction_kind",
]

#: Server request method → short kind name.
METHOD_KINDS: dict[str, str] = {
    "item/commandExecution/requestApproval": "commandApproval",
    "item/fileChange/requestApproval": "fileChangeApproval",
    "item/permissions/requestApproval": "permissionsApproval",
    "item/tool/requestUserInput": "userInput",
    "mcpServer/elicitation/request": "elicitation",
    "item/tool/call": "dynamicToolCall",
    # Legacy (turns started via the deprecated SendUserTurn APIs, which codexrt never uses; a
    # server that sends them anyway still gets a typed, validated answer).
    "execCommandApproval": "legacyExecApproval",
    "applyPatchApproval": "legacyPatchApproval",
}
#: Server requests codexrt hands to the host; any other gets -32601 (R-WIRE-7).
SUPPORTED_SERVER_REQUESTS = frozenset(METHOD_KINDS)

_HOURS = 3600.0
#: Seconds an interaction waits before codexrt sends the safe negative reply. ``None`` = never.
DEFAULT_DEADLINES: dict[str, float | None] = {
    "commandApproval": 4 * _HOURS,
    "fileChangeApproval": 4 * _HOURS,
    "permissionsApproval": 4 * _HOURS,
    "userInput": 4 * _HOURS,
    "elicitation": 4 * _HOURS,
    "mcpToolApproval": 4 * _HOURS,
    "legacyExecApproval": 4 * _HOURS,
    "legacyPatchApproval": 4 * _HOURS,
    "dynamicToolCall": 600.0,
}

#: The state table (state → event → next state). Everything else is refused.
TRANSITIONS: dict[str, dict[str, str]] = {
    "pending": {"answer": "answering", "resolve": "resolved", "expire": "expired"},
    "answering": {"sent": "answered", "failed": "answered", "resolve": "resolved", "expire": "expired"},
    "answered": {"resolve": "resolved"},
    "resolved": {},
    "expired": {},
}

# Decision values of the pinned schema — tests/sansio/test_interactions_schema.py checks them.
COMMAND_DECISIONS = frozenset({"accept", "acceptForSession", "decline", "cancel"})
COMMAND_DECISION_OBJECTS = frozenset({"acceptWithExecpolicyAmendment", "applyNetworkPolicyAmendment"})
FILE_CHANGE_DECISIONS = frozenset({"accept", "acceptForSession", "decline", "cancel"})
REVIEW_DECISIONS = frozenset({"approved", "approved_for_session", "approved_mcp_policy_amendment", "timed_out", "abort"})
REVIEW_DECISION_OBJECTS = frozenset({"approved_execpolicy_amendment", "network_policy_amendment", "denied"})
PERMISSION_SCOPES = frozenset({"turn", "session"})
ELICITATION_ACTIONS = frozenset({"accept", "decline", "cancel"})
TOOL_CONTENT_TYPES = {"inputText": "text", "inputImage": "imageUrl", "inputAudio": "audioUrl"}

#: ``codexrt serve`` commands of this module (wired in ``codexrt._serve._daemon``).
INTERACTION_COMMANDS = frozenset({"codex.replayInteractions", "codex.executePlan"})

#: JSON-RPC error code of the reply sent instead of an answer whose privacy record failed.
PRIVACY_ERROR_CODE = -32000


def _invalid(msg: str, **details: Any) -> InteractionError:
    return InteractionInvalidReply(msg, details=details or None)


def _only_keys(obj: dict[str, Any], allowed: set[str], what: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise _invalid(f"{what}: unknown field(s) {extra}", fields=extra)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _check_network_amendment(v: Any, what: str) -> None:
    if not isinstance(v, dict) or not isinstance(v.get("host"), str) or v.get("action") not in ("allow", "deny"):
        raise _invalid(f"{what} needs {{host, action: allow|deny}}")


def _check_command_decision(d: Any, method: str) -> None:
    if isinstance(d, str):
        if d in COMMAND_DECISIONS:
            return
        raise _invalid(f"invalid decision {d!r} for {method}; one of {sorted(COMMAND_DECISIONS)} "
                       f"or an object {sorted(COMMAND_DECISION_OBJECTS)}")
    if isinstance(d, dict) and len(d) == 1:
        (name, body), = d.items()
        if name == "acceptWithExecpolicyAmendment":
            if isinstance(body, dict) and _str_list(body.get("execpolicy_amendment")) and set(body) == {"execpolicy_amendment"}:
                return
            raise _invalid("acceptWithExecpolicyAmendment needs {execpolicy_amendment: [string]}")
        if name == "applyNetworkPolicyAmendment":
            if isinstance(body, dict) and set(body) == {"network_policy_amendment"}:
                _check_network_amendment(body["network_policy_amendment"], "network_policy_amendment")
                return
            raise _invalid("applyNetworkPolicyAmendment needs {network_policy_amendment: {host, action}}")
    raise _invalid(f"invalid decision for {method}")


def _check_review_decision(d: Any, method: str) -> None:
    if isinstance(d, str):
        if d in REVIEW_DECISIONS:
            return
        raise _invalid(f"invalid decision {d!r} for {method}; one of {sorted(REVIEW_DECISIONS)} "
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
    raise _invalid(f"invalid decision for {method}")


def _requested_paths(req: Any, key: str) -> set[str]:
    fs = req.get("fileSystem") if isinstance(req, dict) else None
    vals = fs.get(key) if isinstance(fs, dict) else None
    return {v for v in vals if isinstance(v, str)} if isinstance(vals, list) else set()


def _check_permissions(result: dict[str, Any], params: Mapping[str, Any]) -> None:
    _only_keys(result, {"permissions", "scope", "strictAutoReview"}, "item/permissions/requestApproval")
    granted = result.get("permissions")
    if not isinstance(granted, dict):
        raise _invalid("item/permissions/requestApproval needs a 'permissions' object (grant {} to decline)")
    _only_keys(granted, {"fileSystem", "network"}, "permissions")
    scope = result.get("scope", "turn")
    if not isinstance(scope, str) or scope not in PERMISSION_SCOPES:
        raise _invalid(f"scope must be one of {sorted(PERMISSION_SCOPES)}")
    if result.get("strictAutoReview") is not None and not isinstance(result["strictAutoReview"], bool):
        raise _invalid("strictAutoReview must be a boolean or null")
    requested = params.get("permissions") if isinstance(params.get("permissions"), dict) else {}
    fs = granted.get("fileSystem")
    if fs is not None:
        if not isinstance(fs, dict):
            raise _invalid("permissions.fileSystem must be an object or null")
        _only_keys(fs, {"read", "write", "entries", "globScanMaxDepth"}, "permissions.fileSystem")
        for key in ("read", "write"):
            vals = fs.get(key)
            if vals is None:
                continue
            if not _str_list(vals):
                raise _invalid(f"permissions.fileSystem.{key} must be a list of paths")
            extra = set(vals) - _requested_paths(requested, key)
            if extra:
                raise _invalid(f"permissions.fileSystem.{key} grants paths that were not requested",
                               paths=sorted(extra))
        entries = fs.get("entries")
        if entries is not None:
            req_entries = ((requested.get("fileSystem") or {}).get("entries") or []) if isinstance(
                requested.get("fileSystem"), dict) else []
            if not isinstance(entries, list) or any(e not in req_entries for e in entries):
                raise _invalid("permissions.fileSystem.entries grants entries that were not requested")
        depth = fs.get("globScanMaxDepth")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
            raise _invalid("permissions.fileSystem.globScanMaxDepth must be a positive integer")
    net = granted.get("network")
    if net is not None:
        if not isinstance(net, dict):
            raise _invalid("permissions.network must be an object or null")
        _only_keys(net, {"enabled"}, "permissions.network")
        enabled = net.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise _invalid("permissions.network.enabled must be a boolean or null")
        req_net = requested.get("network") if isinstance(requested.get("network"), dict) else {}
        if enabled is True and req_net.get("enabled") is not True:
            raise _invalid("permissions.network grants network access that was not requested")


def _check_user_input(result: dict[str, Any], params: Mapping[str, Any]) -> None:
    _only_keys(result, {"answers"}, "item/tool/requestUserInput")
    answers = result.get("answers")
    if not isinstance(answers, dict):
        raise _invalid("item/tool/requestUserInput needs {answers: {questionId: {answers: [string]}}}")
    ids = {q.get("id") for q in params.get("questions") or () if isinstance(q, dict)}
    unknown = sorted(str(k) for k in answers if k not in ids)
    if unknown:
        raise _invalid(f"answers for unknown question id(s) {unknown}", questions=unknown)
    for qid, ans in answers.items():
        if not isinstance(ans, dict) or set(ans) != {"answers"} or not _str_list(ans["answers"]):
            raise _invalid(f"answer to {qid!r} must be {{answers: [string]}}", question=qid)


def _check_elicitation(result: dict[str, Any], params: Mapping[str, Any]) -> None:
    _only_keys(result, {"action", "content", "_meta"}, "mcpServer/elicitation/request")
    action = result.get("action")
    if not isinstance(action, str) or action not in ELICITATION_ACTIONS:
        raise _invalid("elicitation replies need action accept/decline/cancel")
    content = result.get("content")
    if elic.is_tool_approval(params):
        # An MCP tool-call approval: accept is {content: {}}, remembered only as offered.
        parsed = elic.parse_elicitation(params)
        meta = result.get("_meta")
        if meta is not None:
            if action != "accept" or not isinstance(meta, dict) or set(meta) != {"persist"} \
                    or meta["persist"] not in parsed.persist_choices:
                raise _invalid(f"_meta of a tool-call approval is {{persist: one of {list(parsed.persist_choices)}}} "
                               "on an accept only")
        if action == "accept" and content != {}:
            raise _invalid("an MCP tool-call approval is accepted with content: {}")
        if action != "accept" and content is not None:
            raise _invalid(f"a {action} elicitation reply carries content: null")
        return
    if result.get("_meta") is not None and not isinstance(result.get("_meta"), dict):
        raise _invalid("_meta must be an object")
    if action != "accept":
        if content is not None:
            raise _invalid(f"a {action} elicitation reply carries content: null")
        return
    parsed = elic.parse_elicitation(params)
    if parsed.mode == "url":
        if content is not None:
            raise _invalid("a url elicitation is accepted with content: null (after the user opened it)")
        return
    if parsed.mode != "form":
        raise _invalid(f"this elicitation cannot be accepted by codexrt ({parsed.unsupported_reason}); "
                       "answer it with cancel")
    elic.validate_content(parsed, content)


def _check_tool_call(result: dict[str, Any]) -> None:
    _only_keys(result, {"contentItems", "success"}, "item/tool/call")
    if not isinstance(result.get("success"), bool):
        raise _invalid("item/tool/call needs success: boolean")
    items = result.get("contentItems")
    if not isinstance(items, list):
        raise _invalid("item/tool/call needs contentItems: [...]")
    for i, it in enumerate(items):
        field = TOOL_CONTENT_TYPES.get(it["type"]) if isinstance(it, dict) and isinstance(it.get("type"), str) else None
        if field is None or not isinstance(it.get(field), str) or set(it) != {"type", field}:
            raise _invalid(f"contentItems[{i}] must be one of inputText{{text}}, inputImage{{imageUrl}}, "
                           "inputAudio{audioUrl}", index=i)


def validate_reply(method: str, result: Any, params: Mapping[str, Any] | None = None) -> None:
    """Refuse a reply that does not fit the request (R-INT-3), with
    ``InteractionError(INTERACTION_INVALID_REPLY)``. Values come from the pinned schema;
    ``availableDecisions`` is not the limit."""
    params = params or {}
    if not isinstance(result, dict):
        raise _invalid(f"{method} needs an object result")
    kind = METHOD_KINDS.get(method)
    if kind in ("commandApproval", "fileChangeApproval"):
        _only_keys(result, {"decision"}, method)
        if "decision" not in result:
            raise _invalid(f"{method} needs a result with a 'decision'")
        if kind == "commandApproval":
            _check_command_decision(result["decision"], method)
        elif not isinstance(result["decision"], str) or result["decision"] not in FILE_CHANGE_DECISIONS:
            raise _invalid(f"invalid decision for {method}; one of "
                           f"{sorted(FILE_CHANGE_DECISIONS)}")
    elif kind in ("legacyExecApproval", "legacyPatchApproval"):
        _only_keys(result, {"decision"}, method)
        if "decision" not in result:
            raise _invalid(f"{method} needs a result with a 'decision'")
        _check_review_decision(result["decision"], method)
    elif kind == "permissionsApproval":
        _check_permissions(result, params)
    elif kind == "userInput":
        _check_user_input(result, params)
    elif kind == "elicitation":
        _check_elicitation(result, params)
    elif kind == "dynamicToolCall":
        _check_tool_call(result)


def safe_negative_reply(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The reply that grants nothing: what a deadline, ``decline()`` and the built-in policies
    send. Never an accept."""
    kind = METHOD_KINDS.get(method)
    if kind in ("commandApproval", "fileChangeApproval"):
        return {"decision": "decline"}
    if kind in ("legacyExecApproval", "legacyPatchApproval"):
        return {"decision": {"denied": {"rejection": "declined by codexrt (no approval from the user)"}}}
    if kind == "permissionsApproval":
        return {"permissions": {}, "scope": "turn"}
    if kind == "userInput":
        return {"answers": {}}
    if kind == "elicitation":
        # an MCP tool-call approval is refused; a question is cancelled (nothing answered)
        return elic.decline_reply() if elic.is_tool_approval(params or {}) else elic.cancel_reply()
    if kind == "dynamicToolCall":
        return {"contentItems": [{"type": "inputText", "text": "the client did not run this tool"}],
                "success": False}
    raise InteractionInvalidReply(f"no safe reply is known for {method}")


def interaction_kind(method: str, params: Any = None) -> str:
    """The kind of a server request: :data:`METHOD_KINDS`, except that the real server's MCP
    tool-call approval (an elicitation whose ``_meta.codex_approval_kind`` is
    ``"mcp_tool_call"``) is ``mcpToolApproval`` — an approval, not a form."""
    kind = METHOD_KINDS.get(method, "unknown")
    if kind == "elicitation" and elic.is_tool_approval(params):
        return "mcpToolApproval"
    return kind


def _wall_ms() -> int:
    return int(time.time() * 1000)


class Interaction:
    """A native server → client request waiting for the host (R-INT-1).

    The host answers with the opaque ``key`` and current ``dialog_token`` only; the runtime
    maps them back to the raw RPC id. Nobody answers for the host: no method here sends an
    accept unless called.
    """

    def __init__(self, runtime: InteractionOwner, request: ServerRequest, generation: int, sequence: int,
                 deadline: float | None) -> None:
        self.runtime = runtime
        self.method = request.method
        # A snapshot: replays show what the server asked, whatever the host did to its copy.
        params = request.params if isinstance(request.params, dict) else {}
        self.params: dict[str, Any] = json.loads(json.dumps(params))
        self.kind = interaction_kind(request.method, self.params)
        self._request_id = request.id
        self.generation = generation
        self.session_epoch = runtime.session_epoch
        self.delivery_sequence = sequence
        nonce = secrets.token_hex(8)
        digest = hashlib.sha256(
            f"{runtime.config.channel_id}\0{runtime.session_epoch}\0{generation}\0"
            f"{type(request.id).__name__}:{request.id}\0{sequence}\0{nonce}".encode()).hexdigest()[:24]
        self.key = f"ik-{digest}"
        self.dialog_token = secrets.token_urlsafe(12)
        self.state = "pending"
        self.answered_by: str | None = None
        self.thread_id = self.params.get("threadId") or self.params.get("conversationId")
        self.turn_id = self.params.get("turnId")
        self.item_id = self.params.get("itemId") or self.params.get("callId")
        self.created_at = trio.current_time()
        self.deadline_seconds = deadline
        self.deadline_at = None if deadline is None else self.created_at + deadline
        self.deadline_ms = None if deadline is None else _wall_ms() + int(deadline * 1000)
        self.settled = trio.Event()
        self.resolved = self.settled  # compatibility name: set once the interaction is no longer pending

    def __repr__(self) -> str:
        return f"<Interaction {self.method} {self.state} key={self.key} seq={self.delivery_sequence}>"

    @property
    def pending(self) -> bool:
        return self.state == "pending"

    def _fire(self, event: str) -> None:
        nxt = TRANSITIONS[self.state].get(event)
        if nxt is None:
            raise InteractionStateError(f"interaction {self.key}: {event!r} is impossible in state {self.state!r}")
        self.state = nxt
        if nxt != "answering":
            self.settled.set()

    def to_wire(self, *, replayed: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interactionKey": self.key,
            "dialogToken": self.dialog_token,
            "method": self.method,
            "kind": self.kind,
            "params": self.params,
            "deliverySequence": self.delivery_sequence,
            "state": self.state,
            "deadlineMs": self.deadline_ms,
        }
        if self.kind in ("elicitation", "mcpToolApproval"):
            out["elicitation"] = elic.parse_elicitation(self.params).to_wire()
        if replayed:
            out["replayed"] = True
        return out

    # -- answering (each goes through Runtime.respond_interaction: validated, privacy-recorded) --

    async def respond(self, result: Any) -> None:
        await self.runtime.respond_interaction(self.key, self.dialog_token, result)

    async def respond_error(self, code: int, message: str) -> None:
        await self.runtime.respond_interaction_error(self.key, self.dialog_token, code, message)

    async def accept(self) -> None:
        """Approve (command / file change / MCP tool call / legacy approvals only)."""
        if self.kind == "mcpToolApproval":
            await self.respond(elic.tool_approval_reply(self.elicitation(), approve=True))
        elif self.kind in ("legacyExecApproval", "legacyPatchApproval"):
            await self.respond({"decision": "approved"})
        elif self.kind in ("commandApproval", "fileChangeApproval"):
            await self.respond({"decision": "accept"})
        else:
            raise _invalid(f"accept() is for command/file approvals; use the {self.kind} helpers")

    async def accept_for_session(self) -> None:
        if self.kind == "mcpToolApproval":
            await self.respond(elic.tool_approval_reply(self.elicitation(), approve=True, persist="session"))
        elif self.kind in ("legacyExecApproval", "legacyPatchApproval"):
            await self.respond({"decision": "approved_for_session"})
        elif self.kind in ("commandApproval", "fileChangeApproval"):
            await self.respond({"decision": "acceptForSession"})
        else:
            raise _invalid(f"accept_for_session() is for command/file approvals, not {self.kind}")

    async def decline(self) -> None:
        """The kind's safe negative reply (decline / grant nothing / no answers / cancel)."""
        await self.respond(safe_negative_reply(self.method, self.params))

    async def cancel(self) -> None:
        """Approvals: ``cancel`` (declines and interrupts the turn); elicitation: cancel."""
        if self.kind in ("commandApproval", "fileChangeApproval"):
            await self.respond({"decision": "cancel"})
        elif self.kind in ("legacyExecApproval", "legacyPatchApproval"):
            await self.respond({"decision": "abort"})
        elif self.kind == "mcpToolApproval":
            # observed (0.169.0): the call fails "user cancelled MCP tool call", the turn goes on
            await self.respond(elic.cancel_reply())
        else:
            await self.decline()

    async def grant_permissions(self, permissions: dict[str, Any], *, scope: str = "turn",
                                strict_auto_review: bool | None = None) -> None:
        """``item/permissions/requestApproval``: grant a subset of what was requested."""
        result: dict[str, Any] = {"permissions": permissions, "scope": scope}
        if strict_auto_review is not None:
            result["strictAutoReview"] = strict_auto_review
        await self.respond(result)

    async def answer_questions(self, answers: Mapping[str, str | Iterable[str]]) -> None:
        """``item/tool/requestUserInput``: answers by question id (a string or a list)."""
        wire = {qid: {"answers": [a] if isinstance(a, str) else list(a)} for qid, a in answers.items()}
        await self.respond({"answers": wire})

    def elicitation(self) -> elic.Elicitation:
        """The parsed MCP elicitation (form fields with stable ids, or the URL to surface)."""
        return elic.parse_elicitation(self.params)

    async def submit_elicitation(self, answers: Mapping[str, Any]) -> None:
        """Form mode: restore the schema's types and send ``{action: "accept", content}``."""
        await self.respond(elic.accept_reply(self.elicitation(), answers))

    async def decline_elicitation(self) -> None:
        """Form or URL mode: the user said no (``{action: "decline", content: null}``).
        :meth:`cancel` is the user dismissing it without a choice."""
        if self.kind != "elicitation":
            raise _invalid(f"decline_elicitation() is for MCP elicitations, not {self.kind}")
        await self.respond(elic.decline_reply())

    async def accept_url_elicitation(self) -> None:
        """URL mode, only after the user explicitly opened :attr:`Elicitation.url`."""
        await self.respond(elic.url_accept_reply(self.elicitation()))

    async def tool_result(self, content_items: list[dict[str, Any]], *, success: bool) -> None:
        """``item/tool/call``: the dynamic tool's output."""
        await self.respond({"contentItems": content_items, "success": success})


#: A policy: awaited with each new interaction in its own task; returns a reply or None.
InteractionPolicy = Callable[[Interaction], Awaitable[Any]]

_APPROVAL_KINDS = frozenset({"commandApproval", "fileChangeApproval", "permissionsApproval", "mcpToolApproval",
                             "legacyExecApproval", "legacyPatchApproval"})


async def decline_all(inter: Interaction) -> dict[str, Any] | None:
    """Policy: decline every approval (questions, forms and tools are left to the host)."""
    if inter.kind in _APPROVAL_KINDS:
        return safe_negative_reply(inter.method, inter.params)
    return None


def _thread_is_read_only(inter: Interaction) -> bool:
    rt = inter.runtime
    info = rt.threads.get(inter.thread_id) if isinstance(inter.thread_id, str) else None
    eff = info.effective if info is not None else {}
    policy = eff.get("sandboxPolicy") if isinstance(eff, dict) else None
    if isinstance(policy, dict) and isinstance(policy.get("type"), str):
        return policy["type"] == "readOnly"
    if isinstance(eff.get("sandbox"), str):
        return eff["sandbox"] in ("read-only", "readOnly")
    return rt.desired.sandbox == "read-only"


async def decline_all_in_read_only(inter: Interaction) -> dict[str, Any] | None:
    """Policy: decline every approval of a thread whose sandbox is read-only (effective settings
    from ``thread/settings/updated`` first, else the runtime's desired settings)."""
    if inter.kind in _APPROVAL_KINDS and _thread_is_read_only(inter):
        return safe_negative_reply(inter.method, inter.params)
    return None


# ------------------------------------------------------------------------------------------
# The privacy index on disk (R-PRIV-1)


def default_privacy_dir(env: Mapping[str, str] | None = None) -> str:
    """``$CODEXRT_PRIVACY_DIR``, else ``$XDG_STATE_HOME/codexrt/privacy``, else
    ``~/.local/state/codexrt/privacy``."""
    env = os.environ if env is None else env
    if env.get("CODEXRT_PRIVACY_DIR"):
        return env["CODEXRT_PRIVACY_DIR"]
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "codexrt", "privacy")


class PrivacyStore:
    """One scope (home fingerprint) of the index in ``directory`` (created 0700).

    :meth:`write` is synchronous and blocking (call it in a thread): temp file (0600) in the
    same directory, write, fsync, rename to ``<fp>.record.<uuid>.json``, fsync the directory.
    A process killed at any point leaves either no record or a whole one, never a torn file
    under a record name (temp files are ignored by :meth:`load`)."""

    def __init__(self, directory: str, fingerprint: str) -> None:
        self.directory = directory
        self.fingerprint = fingerprint

    @classmethod
    def for_home(cls, directory: str, codex_home: str) -> "PrivacyStore":
        return cls(directory, home_fingerprint(codex_home))

    def __repr__(self) -> str:
        return f"<PrivacyStore {self.directory} scope={self.fingerprint}>"

    def _ensure_dir(self) -> None:
        ensure_private_dir(self.directory)  # every directory it creates 0700, not only the last

    def write(self, record: PrivacyRecord) -> str:
        self._ensure_dir()
        data = json.dumps(record.to_json(), separators=(",", ":"), sort_keys=True).encode()
        final = os.path.join(self.directory, record_file_name(self.fingerprint, record.record_id))
        fd, tmp = tempfile.mkstemp(prefix=f".{self.fingerprint}.", suffix=".tmp", dir=self.directory)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        try:
            os.rename(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):
            dfd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return final

    def load(self) -> PrivacyIndex:
        """Read every record of this scope (and the legacy file). A corrupt file makes the index
        conservative, and that is persisted with a marker file so it survives later writes."""
        files: dict[str, bytes] = {}
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            names = []
        except OSError as exc:
            index = load_index(self.fingerprint, {}, marker=True)
            index.problems.append(f"index directory unreadable: {exc.strerror}")
            return index
        marker = marker_file_name(self.fingerprint) in names
        wanted_prefix = f"{self.fingerprint}.record."
        for name in names:
            if name == legacy_file_name(self.fingerprint) or (name.startswith(wanted_prefix) and name.endswith(".json")):
                try:
                    with open(os.path.join(self.directory, name), "rb") as fh:
                        files[name] = fh.read()
                except OSError:
                    files[name] = b"\0unreadable"
        index = load_index(self.fingerprint, files, marker=marker)
        if index.conservative and not marker:
            with contextlib.suppress(OSError):
                self._ensure_dir()
                fd = os.open(os.path.join(self.directory, marker_file_name(self.fingerprint)),
                             os.O_WRONLY | os.O_CREAT, 0o600)
                os.close(fd)
        return index


def privacy_record_for(inter: Interaction, result: dict[str, Any], store: PrivacyStore) -> PrivacyRecord | None:
    """The record an answer needs before it is forwarded, or None (nothing is answered:
    a decline/cancel or an empty answer carries no user data)."""
    host = inter.runtime.config.channel_id
    rid, now = str(uuid.uuid4()), _wall_ms()
    if inter.kind == "userInput":
        if not result.get("answers"):
            return None
        return record_for_user_input(inter.params, record_id=rid, scope=store.fingerprint, host=host, created_ms=now)
    if inter.kind == "elicitation":
        if result.get("action") != "accept" or result.get("content") is None:
            return None
        form = elic.parse_elicitation(inter.params)
        # MCP has no secrecy flag: free text and numbers may be anything, so they count as
        # secret; a choice among offered options or a yes/no does not.
        flags = [(f.id, not (f.options or f.type == "boolean")) for f in form.fields]
        return record_for_elicitation(inter.params, flags, record_id=rid, scope=store.fingerprint, host=host,
                                      created_ms=now)
    return None


class InteractionRegistry:
    """The interactions of one runtime: keyed, sequenced, bounded history of settled ones.

    At most :attr:`MAX_PENDING` interactions wait for the host at once: a server request past
    that cap is answered at once with its safe negative reply (never an accept) and never
    becomes an interaction, so a server that floods requests cannot grow the runtime without
    bound (the runtime publishes ``interactionOverflow``)."""

    MAX_SETTLED = 1000
    MAX_PENDING = 256

    def __init__(self) -> None:
        self.by_key: dict[str, Interaction] = {}
        self._seq = 0
        self.deadlines: dict[str, float | None] = dict(DEFAULT_DEADLINES)

    def __repr__(self) -> str:
        return f"<InteractionRegistry pending={len(self.pending())} total={len(self.by_key)}>"

    def deadline_for(self, method: str, params: Any = None) -> float | None:
        return self.deadlines.get(interaction_kind(method, params))

    def set_deadlines(self, changes: Mapping[str, float | None]) -> None:
        for kind, seconds in changes.items():
            if kind not in DEFAULT_DEADLINES:
                raise InteractionConfigError(f"unknown interaction kind {kind!r}; one of {sorted(DEFAULT_DEADLINES)}")
            if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                        or seconds <= 0):
                raise InteractionConfigError(f"deadline of {kind} must be a positive number of seconds or None")
        self.deadlines.update(changes)

    def next_sequence(self) -> int:
        self._seq += 1
        return self._seq

    def add(self, inter: Interaction) -> None:
        self.by_key[inter.key] = inter
        settled = [k for k, i in self.by_key.items() if i.state in ("answered", "resolved", "expired")]
        if len(settled) > self.MAX_SETTLED:
            for key in settled[: len(settled) - self.MAX_SETTLED // 2]:
                del self.by_key[key]

    def pending_count(self) -> int:
        """Interactions waiting for an answer (pending or being answered)."""
        return sum(1 for i in self.by_key.values() if i.state in ("pending", "answering"))

    def pending(self) -> list[Interaction]:
        return sorted((i for i in self.by_key.values() if i.state == "pending"), key=lambda i: i.delivery_sequence)

    def lookup(self, key: str, token: str, generation: int) -> Interaction:
        """The interaction a host answer names, or ``InteractionError`` with a code."""
        inter = self.by_key.get(key) if isinstance(key, str) else None
        if inter is None:
            raise InteractionUnknown(f"unknown interaction {key!r}")
        if not isinstance(token, str) or not secrets.compare_digest(inter.dialog_token.encode(), token.encode()):
            raise InteractionStaleToken("stale or wrong dialog token (the dialog was replayed with a new token, "
                                        "or this is not its page)",
                                        details={"interactionKey": key})
        if inter.state in ("answering", "answered"):
            raise InteractionDuplicate("interaction was already answered",
                                       details={"interactionKey": key, "answeredBy": inter.answered_by})
        if inter.generation != generation:
            raise InteractionWrongGeneration(f"interaction belongs to app-server generation {inter.generation}, the runtime "
                                             f"is at {generation}",
                                             details={"interactionKey": key})
        if inter.state != "pending":
            raise InteractionExpired(f"interaction is no longer pending ({inter.state})",
                                     details={"interactionKey": key, "state": inter.state})
        if inter.deadline_at is not None and trio.current_time() >= inter.deadline_at:
            raise InteractionExpired("interaction deadline passed",
                                     details={"interactionKey": key, "state": "expired"})
        return inter

    def replay(self) -> list[Interaction]:
        """R-INT-2: pending interactions in ``deliverySequence`` order, each with a new token
        (the old one is refused from now on); deadlines and params snapshots are kept."""
        out = self.pending()
        for inter in out:
            inter.dialog_token = secrets.token_urlsafe(12)
        return out

    def resolve(self, request_id: Any, generation: int) -> Interaction | None:
        """``serverRequest/resolved``: close exactly the interaction of this raw id in this
        generation (the id type matters: ``0`` is not ``"0"``)."""
        for inter in self.by_key.values():
            if (inter.generation == generation and inter._request_id == request_id
                    and type(inter._request_id) is type(request_id)
                    and inter.state in ("pending", "answering", "answered")):
                inter._fire("resolve")
                return inter
        return None

    def expire_all(self) -> list[Interaction]:
        out = []
        for inter in self.by_key.values():
            if inter.state in ("pending", "answering"):
                inter._fire("expire")
                out.append(inter)
        return out


class PlanExecution:
    """One "execute plan" request (R-INT-5), keyed by its ``request_id``. Its result always
    echoes ``requestType``/``threadId``/``requestId`` — on success, on failure of the turn and on
    an early refusal (not the current plan, another execution in flight, no model)."""

    REQUEST_TYPE = "executePlan"

    def __init__(self, request_id: str, thread_id: str, plan_item_id: str) -> None:
        self.request_id = request_id
        self.thread_id = thread_id
        self.plan_item_id = plan_item_id
        self.operation: Any = None
        self.result: dict[str, Any] | None = None
        self._done = trio.Event()

    def __repr__(self) -> str:
        state = "done" if self.done else "running"
        return f"<PlanExecution {self.request_id} thread={self.thread_id} {state}>"

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _finish(self, *, ok: bool, status: str, error: dict[str, Any] | None = None,
                turn_id: str | None = None) -> dict[str, Any]:
        if self.result is None:
            self.result = {"requestType": self.REQUEST_TYPE, "requestId": self.request_id, "threadId": self.thread_id,
                           "planItemId": self.plan_item_id, "ok": ok, "status": status, "turnId": turn_id,
                           "clientOperationId": self.operation.id if self.operation is not None else None,
                           "error": error}
            self._done.set()
        return self.result

    async def wait(self) -> dict[str, Any]:
        """The result; unbounded like ``Operation.wait`` (the turn's own terminal bounds it)."""
        await self._done.wait()
        assert self.result is not None
        return self.result

