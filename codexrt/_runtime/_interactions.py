"""Interactions: native server → client requests waiting for the host (R-INT-1 … R-INT-4, R-PRIV-1).

Why a registry: the app-server asks the client things (approve this command, answer these
questions, fill this MCP form, run this dynamic tool) with JSON-RPC requests whose ids start at
``0`` on every connection. A host UI must never answer the wrong one — not a request of an older
child that had the same raw id, not a dialog it already answered, not a page it showed before a
rebuild. So the host never sees raw ids: it gets an opaque ``interactionKey`` bound to the
request *instance* and a ``dialogToken`` for the page that shows it, and answers with both.

Theory of operation
-------------------
*States* (one table, :data:`codexrt._sansio._states.INTERACTION_TABLE`; an impossible transition
raises ``InteractionError(INTERACTION_STATE)`` naming machine, state and event)::

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

*The method table.* Kinds, deadlines, safe negative replies, reply validators and typed params
of every server request come from one table, :mod:`codexrt._sansio._methods` (re-exported
here: ``METHOD_KINDS``, ``DEFAULT_DEADLINES``, ``validate_reply``, ``safe_negative_reply`` …).

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

import hashlib
import json
import os
import secrets
import time
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, Protocol

import trio

from codexrt._sansio._errors import (
    InteractionConfigError,
    InteractionDuplicate,
    InteractionExpired,
    InteractionStaleToken,
    InteractionStateError,
    InteractionUnknown,
    InteractionWrongGeneration,
    LocalProtocolError,
)
from codexrt._io._privacy_store import PrivacyStore, default_privacy_dir
from codexrt._sansio import _elicitation as elic
from codexrt._sansio._privacy import PrivacyRecord, record_for_elicitation, record_for_user_input
from codexrt._sansio._methods import (
    DEFAULT_DEADLINES,
    METHOD_KINDS,
    SUPPORTED_SERVER_REQUESTS,
    decision_reply,
    describe_request,
    interaction_kind,
    safe_negative_reply,
    validate_reply,
)
from codexrt._sansio._replies import (
    COMMAND_DECISION_OBJECTS,
    COMMAND_DECISIONS,
    ELICITATION_ACTIONS,
    FILE_CHANGE_DECISIONS,
    PERMISSION_SCOPES,
    REVIEW_DECISION_OBJECTS,
    REVIEW_DECISIONS,
    TOOL_CONTENT_TYPES,
)
from codexrt._sansio._replies import invalid_reply as _invalid
from codexrt._sansio._states import (
    INTERACTION_OPEN,
    INTERACTION_SETTLED,
    INTERACTION_TABLE,
    InteractionEvent,
    InteractionState,
    Machine,
)
from codexrt._sansio._wire import ServerRequest

if TYPE_CHECKING:
    from codexrt._runtime._event_types import Decision



class InteractionOwner(Protocol):
    """What an :class:`Interaction` needs of the runtime that owns it (the
    :class:`~codexrt.Runtime`): its channel and session for the dialog token, and the two
    answering calls that validate, record and send a reply."""

    @property
    def session_epoch(self) -> str: ...

    @property
    def config(self) -> Any: ...

    async def respond_interaction(self, key: str, dialog_token: str, result: Any, *, by: str = "host") -> None: ...

    async def respond_interaction_error(self, key: str, dialog_token: str, code: int, message: str) -> None: ...

__all__ = [
    "METHOD_KINDS",
    "SUPPORTED_SERVER_REQUESTS",
    "DEFAULT_DEADLINES",
    "COMMAND_DECISIONS",
    "FILE_CHANGE_DECISIONS",
    "REVIEW_DECISIONS",
    # the rest of the reply vocabulary, re-exported from codexrt._sansio._replies
    "COMMAND_DECISION_OBJECTS",
    "REVIEW_DECISION_OBJECTS",
    "ELICITATION_ACTIONS",
    "PERMISSION_SCOPES",
    "TOOL_CONTENT_TYPES",
    "Interaction",
    "InteractionRegistry",
    "InteractionPolicy",
    "PrivacyStore",
    "validate_reply",
    "safe_negative_reply",
    "default_privacy_dir",
    "PRIVACY_ERROR_CODE",
    "PlanExecution",
    "privacy_record_for",
    "INTERACTION_COMMANDS",
    "interaction_kind",
]

#: ``codexrt serve`` commands of this module (wired in ``codexrt._serve._daemon``).
INTERACTION_COMMANDS = frozenset({"codex.replayInteractions", "codex.executePlan"})

#: JSON-RPC error code of the reply sent instead of an answer whose privacy record failed.
PRIVACY_ERROR_CODE = -32000


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
        self._machine = Machine("interaction", INTERACTION_TABLE, InteractionState.PENDING)
        self.answered_by: str | None = None
        #: the client operation id of the operation this request arrived for (None: none), set by
        #: the runtime when it delivers the interaction, before any policy runs
        self.operation_id: str | None = None
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
    def state(self) -> InteractionState:
        """``pending``, ``answering``, ``answered``, ``resolved`` or ``expired`` (a str enum)."""
        return self._machine.state

    @property
    def pending(self) -> bool:
        return self.state is InteractionState.PENDING

    def _fire(self, event: InteractionEvent | str) -> None:
        """One transition of :data:`INTERACTION_TABLE`; an impossible one raises
        :class:`InteractionStateError` (``INTERACTION_STATE``) naming machine, state and event."""
        try:
            nxt = self._machine.fire(InteractionEvent(event))
        except LocalProtocolError as exc:
            raise InteractionStateError(f"{exc} ({self.key})") from None
        if nxt is not InteractionState.ANSWERING:
            self.settled.set()

    def _finish_answering(self, event: InteractionEvent | str) -> None:
        """End an answer's claim with ``event`` (``sent``, ``failed``, ``resolve``, ``expire``)
        if it still holds it. A ``serverRequest/resolved`` or an expiry that arrived while the
        reply was being written has settled the interaction already: then this does nothing."""
        if self.state is InteractionState.ANSWERING:
            self._fire(event)

    def to_wire(self, *, replayed: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interactionKey": self.key,
            "dialogToken": self.dialog_token,
            "method": self.method,
            "kind": self.kind,
            "params": self.params,
            "deliverySequence": self.delivery_sequence,
            "state": self.state.value,
            "deadlineMs": self.deadline_ms,
        }
        if self.kind in ("elicitation", "mcpToolApproval"):
            out["elicitation"] = elic.parse_elicitation(self.params).to_wire()
        if replayed:
            out["replayed"] = True
        return out

    def describe(self) -> str:
        """One human line: what is being asked (``run command: ls (in /repo)`` …)."""
        return describe_request(self.method, self.params)

    def reply_for(self, decision: Decision | Mapping[str, Any] | None) -> tuple[str, Any]:
        """What :meth:`answer` would send for ``decision`` (``"accept"``, ``"acceptForSession"``,
        ``"decline"``, ``"cancel"``, None = decline, or a full result dict): ``("result", result)``
        or ``("error", (code, message))``. Sends nothing; raises
        ``InteractionError(INTERACTION_INVALID_REPLY)`` for a decision this request cannot take
        (``accept`` of questions or a form: nothing is accepted without its data)."""
        return decision_reply(self.method, decision, self.params)

    async def answer(self, decision: Decision | Mapping[str, Any] | None) -> None:
        """Answer with a named decision (see :meth:`reply_for`): a request without a declining
        result (questions, permissions, a dynamic tool) is declined with a JSON-RPC error."""
        how, value = self.reply_for(decision)
        if how == "result":
            await self.respond(value)
        else:
            await self.respond_error(*value)

    # -- answering (each goes through Runtime.respond_interaction: validated, privacy-recorded) --

    async def respond(self, result: Any, *, by: str = "host") -> None:
        await self.runtime.respond_interaction(self.key, self.dialog_token, result, by=by)

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

    async def decline(self, *, by: str = "host") -> None:
        """The kind's safe negative reply (decline / grant nothing / no answers / cancel).
        ``by`` is who answered, as ``interactionAnswered`` reports it: ``"host"``, or
        ``"policy"`` for code answering in the host's stead (``serve`` after stdin EOF)."""
        await self.respond(safe_negative_reply(self.method, self.params), by=by)

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
        settled = [k for k, i in self.by_key.items() if i.state in INTERACTION_SETTLED]
        if len(settled) > self.MAX_SETTLED:
            for key in settled[: len(settled) - self.MAX_SETTLED // 2]:
                del self.by_key[key]

    def pending_count(self) -> int:
        """Interactions waiting for an answer (pending or being answered)."""
        return sum(1 for i in self.by_key.values() if i.state in INTERACTION_OPEN)

    def pending(self) -> list[Interaction]:
        return sorted((i for i in self.by_key.values() if i.state is InteractionState.PENDING), key=lambda i: i.delivery_sequence)

    def lookup(self, key: str, token: str, generation: int) -> Interaction:
        """The interaction a host answer names, or ``InteractionError`` with a code."""
        inter = self.by_key.get(key) if isinstance(key, str) else None
        if inter is None:
            raise InteractionUnknown(f"unknown interaction {key!r}")
        if not isinstance(token, str) or not secrets.compare_digest(inter.dialog_token.encode(), token.encode()):
            raise InteractionStaleToken("stale or wrong dialog token (the dialog was replayed with a new token, "
                                        "or this is not its page)",
                                        details={"interactionKey": key})
        if inter.state in (InteractionState.ANSWERING, InteractionState.ANSWERED) or inter.answered_by in ("host",
                                                                                                            "policy"):
            # one code whatever the timing: also once the server resolved or the runtime expired
            # the dialog after the answer (was INTERACTION_EXPIRED then, issue 31)
            raise InteractionDuplicate("interaction was already answered",
                                       details={"interactionKey": key, "answeredBy": inter.answered_by})
        if inter.generation != generation:
            raise InteractionWrongGeneration(f"interaction belongs to app-server generation {inter.generation}, the runtime "
                                             f"is at {generation}",
                                             details={"interactionKey": key})
        if inter.state is not InteractionState.PENDING:
            raise InteractionExpired(f"interaction is no longer pending ({inter.state.value})",
                                     details={"interactionKey": key, "state": inter.state.value})
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
                    and inter.state in (*INTERACTION_OPEN, InteractionState.ANSWERED)):
                inter._fire(InteractionEvent.RESOLVE)
                return inter
        return None

    def expire_all(self) -> list[Interaction]:
        out = []
        for inter in self.by_key.values():
            if inter.state in INTERACTION_OPEN:
                inter._fire(InteractionEvent.EXPIRE)
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

