"""Approvals and questions of ``codexrt acp``: each interaction the app-server opens is asked in a
task of its own (never on the forwarder or the reader), and answered from the client's answer.

* Approvals (command, file change, MCP tool call, permissions, legacy approvals) →
  ``session/request_permission`` with allow once / allow for the session / reject once (decline:
  that call is refused, the turn goes on) / reject and stop the turn (cancel). Outcome
  ``cancelled``, an error answer or an option we did not offer → the safe negative answer;
  nothing is ever granted by default.
* Questions (``requestUserInput``) and MCP form elicitations → ``elicitation/create`` (form mode)
  when the client advertised ``elicitation.form``; else — and for anything ACP has no form of
  (URL elicitations without the capability, dynamic tool calls) — the safe negative answer
  (never an accept).
* The ask ends when the interaction stops waiting by itself (answered, expired, the child
  gone), or the session's turn is cancelled: the client's request is then withdrawn with
  ``$/cancel_request`` and the interaction declined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio

from codexrt._acp._mapping import PERMISSION_DECISIONS, permission_request
from codexrt._acp._wire import decode_elicitation_response, decode_permission_outcome
from codexrt._runtime._runtime import Interaction
from codexrt._sansio._errors import CodexError
from codexrt._sansio._methods import APPROVAL_KINDS, describe_request, safe_negative_reply

if TYPE_CHECKING:
    from codexrt._acp._session import Session
    from codexrt._acp._wire import ClientCapabilities

__all__ = ["ask", "no_host_policy", "question_schema"]

log = logging.getLogger("codexrt.acp")

T = TypeVar("T")


class _Answer(Protocol):
    result: Any
    error: Any


class AcpAgent(Protocol):
    """What an ask needs of the agent: the client's capabilities and a request to it."""

    client_capabilities: ClientCapabilities

    async def call_client(self, method: str, params: Any) -> _Answer: ...


async def no_host_policy(inter: Any) -> Any:
    """After stdin EOF: every server request gets its safe negative reply (never an approval)."""
    return safe_negative_reply(inter.method, inter.params)


def question_schema(inter: Interaction) -> dict[str, Any] | None:
    """The ``requestedSchema`` of an ``elicitation/create`` for a question or an MCP form; None
    when there is no form to show."""
    if inter.kind == "elicitation":
        schema = inter.params.get("requestedSchema")
        if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
            return {"type": "object", "properties": schema["properties"],
                    **({"required": schema["required"]} if isinstance(schema.get("required"), list) else {})}
        return None
    if inter.kind == "userInput":
        props: dict[str, Any] = {}
        for q in inter.params.get("questions") or ():
            if not isinstance(q, dict) or not isinstance(q.get("id"), str):
                continue
            prop: dict[str, Any] = {"type": "string", "title": str(q.get("header") or q["id"]),
                                    "description": str(q.get("question") or "")}
            labels = [o.get("label") for o in q.get("options") or () if isinstance(o, dict)]
            if labels and all(isinstance(lb, str) for lb in labels) and not q.get("isOther"):
                prop["enum"] = labels
            props[q["id"]] = prop
        return {"type": "object", "properties": props, "required": list(props)} if props else None
    return None


async def ask(agent: AcpAgent, s: Session, inter: Interaction) -> None:
    """Ask the client about ``inter`` and answer it (module doc). Runs in a task of its own."""
    if inter.key in s.asks:
        return
    scope = trio.CancelScope()
    s.asks[inter.key] = scope
    decision: Any = None
    try:
        with scope:
            async with trio.open_nursery() as n:
                async def watch() -> None:  # the interaction stopped waiting on its own
                    await inter.settled.wait()
                    n.cancel_scope.cancel()

                n.start_soon(watch)
                decision = await _ask_client(agent, s, inter)
                n.cancel_scope.cancel()
        if not inter.pending:
            return
        if decision is None:  # withdrawn (session/cancel, shutdown): nothing runs
            await inter.decline()
            return
        await _apply(s, inter, decision)
    except CodexError as exc:  # answered meanwhile, expired, or the child is gone
        log.info("session %s: interaction %s not answered: %s", s.id, inter.key, exc.code)
    finally:
        s.asks.pop(inter.key, None)
        s.touch()


async def _ask_client(agent: AcpAgent, s: Session, inter: Interaction) -> Any:
    """The decision for ``inter``: ``"accept"``, ``"acceptForSession"``, ``"decline"``,
    ``"cancel"``, ``("answers", content)`` — or the safe ``"decline"`` when ACP cannot ask."""
    if inter.kind in APPROVAL_KINDS:
        params = permission_request(s.id, inter.kind, inter.method, inter.params,
                                    description=describe_request(inter.method, inter.params),
                                    tool_call_id=inter.item_id if isinstance(inter.item_id, str) else inter.key,
                                    cwd=s.cwd, read=s.mapper.read)
        outcome = await _call(agent, s, "session/request_permission", params, decode_permission_outcome)
        if outcome is None:
            return "decline"
        if outcome.option_id is None:
            return "cancel"
        return PERMISSION_DECISIONS.get(outcome.option_id, "decline")
    schema = question_schema(inter)
    elicitation = agent.client_capabilities.elicitation
    if schema is None or elicitation is None or elicitation.form is None:
        return "decline"
    params = {"mode": "form", "sessionId": s.id, "message": _message(inter), "requestedSchema": schema}
    if isinstance(inter.item_id, str):
        params["toolCallId"] = inter.item_id
    res = await _call(agent, s, "elicitation/create", params, decode_elicitation_response)
    if res is None:
        return "decline"
    if res.action == "accept":
        return ("answers", res.content or {})
    return res.action


async def _call(agent: AcpAgent, s: Session, method: str, params: Any, decode: Callable[[Any], T]) -> T | None:
    """The client's decoded answer to ``method``; None (decline) for an error answer or one
    that does not decode."""
    answer = await agent.call_client(method, params)
    if answer.error is not None:
        log.info("session %s: the client answered %s with an error; declined", s.id, method)
        return None
    try:
        return decode(answer.result)
    except ValueError as exc:
        log.info("session %s: %s; declined", s.id, exc)
        return None


def _message(inter: Interaction) -> str:
    msg = inter.params.get("message")
    if isinstance(msg, str) and msg:
        return msg
    return describe_request(inter.method, inter.params)


async def _apply(s: Session, inter: Interaction, decision: Any) -> None:
    if isinstance(decision, tuple):
        content = decision[1]
        if inter.kind == "userInput":
            await inter.answer_questions({k: v if isinstance(v, (str, list)) else str(v) for k, v in content.items()})
        else:
            await inter.submit_elicitation(content)
        return
    if decision == "cancel":
        # reject and stop the turn: the call is refused and the turn ends `cancelled`
        prompt = s.prompt
        if prompt is not None:
            prompt.cancel_requested = True
        if inter.kind in ("commandApproval", "fileChangeApproval", "legacyExecApproval", "legacyPatchApproval"):
            await inter.cancel()  # declines and interrupts the turn
        else:
            await inter.decline()
        if prompt is not None and s.rt is not None:
            s.rt.abort(prompt.op)
        return
    if inter.kind == "permissionsApproval":
        if decision in ("accept", "acceptForSession"):
            perms = inter.params.get("permissions")
            await inter.grant_permissions(perms if isinstance(perms, dict) else {},
                                          scope="session" if decision == "acceptForSession" else "turn")
        else:
            await inter.decline()
        return
    if decision in ("accept", "acceptForSession"):
        await inter.answer(decision)
    else:
        await inter.decline()
