"""The runtime's side of interactions and plans: a server request becomes an
:class:`~codexrt._runtime._interactions.Interaction` (deadline, policy, overflow refusal),
answers are claimed once and sent with their privacy record (R-INT-1 … R-INT-4, R-PRIV-1),
and a completed plan is executed single-flight (R-INT-5). The registry and validators live in
``codexrt._runtime._interactions``."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from typing import Any

import trio

from codexrt._io._codex_home import resolve_codex_home
from codexrt._sansio._errors import (
    CodexError,
    InteractionError,
    InteractionExpired,
    InvalidParams,
    LocalProtocolError,
    PrivacyIndexWriteFailed,
)
from codexrt._sansio._wire import ServerRequest
from codexrt._sansio._settings import Settings
from codexrt._runtime._interactions import (
    PRIVACY_ERROR_CODE,
    Interaction,
    InteractionPolicy,
    PlanExecution,
    PrivacyStore,
    default_privacy_dir,
    privacy_record_for,
    safe_negative_reply,
    validate_reply,
)
from codexrt._sansio._plans import EXECUTE_PLAN_MESSAGE, default_collaboration_mode
from codexrt._sansio._privacy import PrivacyIndex
from codexrt._runtime._operations import STATUS_COMPLETED, Operation

log = logging.getLogger("codexrt.runtime")


class RuntimeInteractions:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

    # -- interactions (R-INT-1 … R-INT-4, R-PRIV-1; the registry is codexrt._runtime._interactions) --

    def _on_server_request(self, req: ServerRequest, gen: int) -> None:
        """On the reader: register, publish, and start the deadline watcher and the policy (if
        any) as tasks of the runtime nursery — nothing here waits. Past the pending cap
        (``InteractionRegistry.MAX_PENDING``) the request is refused at once instead."""
        if self._registry.pending_count() >= self._registry.MAX_PENDING:
            self._refuse_overflow(req)
            return
        self._overflow_refused = 0
        try:
            inter = Interaction(self, req, gen, self._registry.next_sequence(),
                                self._registry.deadline_for(req.method, req.params))
        except Exception as exc:  # params no interaction can be made of: refuse, never leave it hanging
            log.warning("server request %s could not become an interaction: %s", req.method, type(exc).__name__)
            self._answer_nowait(req, None, error=(-32603, "codexrt could not handle this request"))
            return
        self._registry.add(inter)
        op = self._op_for(inter.thread_id, inter.turn_id)
        inter.operation_id = op.id if op is not None else None
        ev = self._event("interactionRequested", inter.to_wire(), op=op, thread_id=inter.thread_id,
                         turn_id=inter.turn_id, item_id=inter.item_id)
        self._deliver(ev, op)
        if inter.deadline_at is not None:
            self._nursery.start_soon(self._interaction_deadline, inter)
        if self._interaction_policy is not None:
            self._nursery.start_soon(self._run_interaction_policy, inter, self._interaction_policy)

    def _answer_nowait(self, req: ServerRequest, result: Any, *, error: tuple[int, str] | None = None) -> None:
        conn = self.conn
        if conn is None:
            return
        try:
            conn.reply_nowait(req.id, result, error=error)
        except CodexError as exc:  # not pending any more (the server resolved it): nothing to answer
            log.debug("could not answer server request %r: %s", req.id, exc.message)

    def _refuse_overflow(self, req: ServerRequest) -> None:
        """A server request past the pending cap: its safe negative reply at once (never an
        approval), no interaction. ``interactionOverflow`` is published for the first refusal
        of an overflow episode and then at each power of two, so a flood costs a few events
        (``payload.refused`` counts the episode's refusals)."""
        try:
            reply: Any = safe_negative_reply(req.method, req.params if isinstance(req.params, dict) else {})
            error = None
        except Exception:  # no safe reply known for it: an error reply grants nothing either
            reply, error = None, (-32603, "too many pending requests")
        self._answer_nowait(req, reply, error=error)
        self._overflow_refused += 1
        n = self._overflow_refused
        if n & (n - 1) == 0:
            self._publish(self._event("interactionOverflow", {
                "method": req.method, "requestId": req.id, "limit": self._registry.MAX_PENDING,
                "refused": n, "reply": reply if error is None else None}))

    def _interaction_event(self, kind: str, inter: Interaction, payload: dict[str, Any]) -> None:
        ev = self._event(kind, {"interactionKey": inter.key, **payload}, thread_id=inter.thread_id,
                         turn_id=inter.turn_id, item_id=inter.item_id)
        self._deliver(ev, self._op_for(inter.thread_id, inter.turn_id))

    def _on_server_request_resolved(self, params: dict[str, Any]) -> None:
        """``serverRequest/resolved`` closes exactly the matching interaction of this
        generation (also sent when the server clears requests on turn end/interrupt)."""
        inter = self._registry.resolve(params.get("requestId"), self.generation)
        if inter is not None:
            self._interaction_event("interactionResolved", inter, {"dialogToken": inter.dialog_token})

    async def _interaction_deadline(self, inter: Interaction) -> None:
        """At the kind's deadline, answer the server with the safe negative reply (never an
        accept) and tell the host (``interactionExpired``)."""
        assert inter.deadline_at is not None
        with trio.move_on_at(inter.deadline_at):
            await inter.settled.wait()
            return
        if inter.state != "pending":
            return
        reply = safe_negative_reply(inter.method, inter.params)
        try:
            await self._send_answer(inter, reply, by="deadline", final="expire")
        except CodexError as exc:
            self._interaction_event("interactionExpired", inter, {"reason": "deadline", "reply": None,
                                                                  "error": exc.to_dict()})
            return
        self._interaction_event("interactionExpired", inter, {"reason": "deadline", "reply": reply,
                                                              "deadlineSeconds": inter.deadline_seconds})

    async def _run_interaction_policy(self, inter: Interaction, policy: InteractionPolicy) -> None:
        """The library policy, in its own task. Its errors become ``interactionPolicyError``
        events and leave the interaction pending for the host."""
        try:
            reply = await policy(inter)
        except Exception as exc:  # a broken policy must not take the runtime down
            self._interaction_event("interactionPolicyError", inter, {
                "error": self._redactor(f"{type(exc).__name__}: {exc}")})
            return
        if reply is None or inter.state != "pending":
            return
        try:
            validate_reply(inter.method, reply, inter.params)
            await self._send_answer(inter, reply, by="policy")
        except InteractionError as exc:
            if inter.state == "pending":
                self._interaction_event("interactionPolicyError", inter, {"error": exc.message, "code": exc.code})

    def set_interaction_policy(self, policy: InteractionPolicy | None) -> None:
        """Install (or remove, with None) the policy run for every *new* interaction, e.g.
        ``codexrt.decline_all_in_read_only``. It runs in its own task; returning
        None leaves the interaction to the host."""
        self._interaction_policy = policy

    def set_interaction_deadlines(self, **seconds: float | None) -> None:
        """Change deadlines per kind for new interactions, e.g.
        ``set_interaction_deadlines(commandApproval=600, dynamicToolCall=None)``."""
        self._registry.set_deadlines(seconds)

    def set_privacy_store(self, store: PrivacyStore) -> None:
        """Where the privacy index lives (R-PRIV-1); default: :func:`default_privacy_dir`
        scoped by the fingerprint of CODEX_HOME."""
        self._privacy_store = store

    def privacy_store(self) -> PrivacyStore:
        if self._privacy_store is None:
            env = self.config.env if self.config.env is not None else os.environ
            home = resolve_codex_home(self.config.codex_home, env)
            self._privacy_store = PrivacyStore.for_home(default_privacy_dir(env), str(home))
        return self._privacy_store

    def privacy_index(self) -> PrivacyIndex:
        """Load the privacy index (blocking file reads) for masking history (R-PRIV-2)."""
        return self.privacy_store().load()

    def _expire_interactions(self, reason: str) -> None:
        """The child is gone: its requests can never be answered. Also withdraws every
        execute-plan offer (R-INT-5: runtime reset/failure)."""
        for inter in self._registry.expire_all():
            self._interaction_event("interactionExpired", inter, {"reason": reason})
        for change in self.plans.withdraw_all(reason):
            self._publish(self._event(change.kind, change.payload, thread_id=change.thread_id))

    def pending_interactions(self) -> list[Interaction]:
        """Pending interactions in delivery order (R-INT-2)."""
        return self._registry.pending()

    def replay_interactions(self) -> list[Interaction]:
        """For a rebuilt host UI (R-INT-2): every pending interaction, in ``deliverySequence``
        order, with a rotated ``dialogToken`` (the old one is refused from now on), deadline and
        params snapshot kept. Each is also re-published as ``interactionRequested`` with
        ``replayed: true``."""
        out = self._registry.replay()
        for inter in out:
            self._interaction_event("interactionRequested", inter, inter.to_wire(replayed=True))
        return out

    replay_pending = replay_interactions

    async def _send_answer(self, inter: Interaction, result: Any, *, by: str, final: str = "sent",
                           error: tuple[int, str] | None = None) -> None:
        """Send a validated answer: claim (``answering``) before the first await, write the
        privacy record when the kind needs one (R-PRIV-1), then the reply with the raw id —
        or, with ``error=(code, message)``, a JSON-RPC error reply instead of ``result``."""
        conn = self.conn
        if conn is None:
            raise InteractionExpired("runtime is not connected")
        inter._fire("answer")
        inter.answered_by = by
        try:
            store = self.privacy_store() if error is None and inter.kind in ("userInput", "elicitation") else None
            record = privacy_record_for(inter, result, store) if store is not None else None
            if record is not None:
                assert store is not None
                try:
                    await trio.to_thread.run_sync(store.write, record)
                except OSError as exc:
                    inter._finish_answering("failed")
                    with contextlib.suppress(CodexError):
                        await conn.reply_error(inter._request_id, PRIVACY_ERROR_CODE,
                                               "the client could not record its privacy index; "
                                               "the answer was not forwarded")
                    why = exc.strerror or type(exc).__name__
                    self._interaction_event("privacyIndexWriteFailed", inter, {"error": why,
                                                                               "forwarded": False})
                    raise PrivacyIndexWriteFailed(f"privacy index write failed ({why}); the answer was not forwarded",
                                                  details={"interactionKey": inter.key}) from None
            def accepted() -> None:
                # Published when the answer is taken, before the write yields: the server's
                # reaction (the turn's end, the operation's terminal) can only come after it, so
                # the operation's own stream always has it (it used to race the terminal).
                if final == "sent":
                    self._interaction_event("interactionAnswered", inter,
                                            {"by": by, "error": True} if error is not None else {"by": by})

            if error is not None:
                await conn.reply_error(inter._request_id, *error, accepted=accepted)
            else:
                await conn.reply(inter._request_id, result, accepted=accepted)
        except LocalProtocolError as exc:
            inter._finish_answering("resolve")
            raise InteractionExpired(str(exc)) from None
        except BaseException:
            # Unknown whether it reached the server: never answered twice (R-OP-7 spirit).
            inter._finish_answering("failed")
            raise
        inter._finish_answering(final)


    async def respond_interaction(self, key: str, dialog_token: str, result: Any, *, by: str = "host") -> None:
        """Answer an interaction with a typed result (R-INT-1, R-INT-3). Refuses unknown,
        duplicate, expired, stale-token and wrong-generation answers and invalid replies with
        :class:`InteractionError` (``INTERACTION_*``), and a ``requestUserInput``/elicitation
        answer whose privacy record could not be written (``PRIVACY_INDEX_WRITE_FAILED``; the
        server then got an error reply instead). Cancelling it after the reply was claimed
        leaves the interaction answered (it is never sent twice). ``by`` (``"host"`` or
        ``"policy"``) is who answered, for ``interactionAnswered``."""
        if by not in ("host", "policy"):
            raise InvalidParams(f"by must be 'host' or 'policy', not {by!r}")
        inter = self._registry.lookup(key, dialog_token, self.generation)
        validate_reply(inter.method, result, inter.params)
        await self._send_answer(inter, result, by=by)

    async def respond_interaction_error(self, key: str, dialog_token: str, code: int, message: str) -> None:
        """Answer with a JSON-RPC error instead of a result (same refusals as above)."""
        inter = self._registry.lookup(key, dialog_token, self.generation)
        await self._send_answer(inter, None, by="host", error=(code, message))

    def execute_plan(self, thread_id: str, plan_item_id: str, *, request_id: str | None = None,
                     message: str = EXECUTE_PLAN_MESSAGE, model: str | None = None) -> PlanExecution:
        """Execute the authoritative plan on offer for ``thread_id`` (R-INT-5): single-flight,
        checks the thread/plan identity, then queues one new turn in the *default*
        collaboration mode — approval policy and sandbox are not touched. Returns at once; the
        :class:`PlanExecution` (keyed by ``request_id``) always ends with a result echoing
        requestType/threadId/requestId, also for an early refusal. The same ``request_id``
        again returns the same execution."""
        rid = request_id or f"plan-{secrets.token_hex(6)}"
        existing = self.plan_executions.get(rid)
        if existing is not None:
            return existing
        ex = PlanExecution(rid, thread_id, plan_item_id)
        self.plan_executions[rid] = ex
        if len(self.plan_executions) > 256:
            for key in [k for k, e in self.plan_executions.items() if e.done][:128]:
                del self.plan_executions[key]

        def refuse(code: str, msg: str) -> PlanExecution:
            ex._finish(ok=False, status="refused", error={"code": code, "message": msg})
            self._publish(self._event("planExecutionDone", ex.result or {}, thread_id=thread_id))
            return ex

        if self._plan_inflight is not None and not self._plan_inflight.done:
            return refuse("PLAN_EXECUTION_IN_FLIGHT",
                          f"plan execution {self._plan_inflight.request_id} is still running")
        if not self.plans.is_current(thread_id, plan_item_id):
            return refuse("PLAN_NOT_CURRENT", "that plan is not the completed plan on offer for this thread "
                                              "(withdrawn, superseded, or still a preview)")
        info = self.threads.get(thread_id)
        eff = info.effective if info is not None else {}
        collab = eff.get("collaborationMode") if isinstance(eff.get("collaborationMode"), dict) else {}
        collab_settings = collab.get("settings") if isinstance(collab.get("settings"), dict) else {}
        chosen = model or collab_settings.get("model") or eff.get("model") or self.desired.model
        if not isinstance(chosen, str) or not chosen:
            return refuse("PLAN_NO_MODEL", "no model is known for the default collaboration mode; pass model=")
        effort = self.desired.effort or collab_settings.get("reasoning_effort")
        try:
            op = self.send(message, thread_id=thread_id,
                           settings=Settings(collaboration_mode=default_collaboration_mode(chosen, effort)))
        except CodexError as exc:
            return refuse(exc.code, exc.message)
        ex.operation = op
        self._plan_inflight = ex
        self._nursery.start_soon(self._await_plan_execution, ex, op)
        return ex

    async def _await_plan_execution(self, ex: PlanExecution, op: Operation) -> None:
        try:
            result = await op.wait()
        except BaseException:
            ex._finish(ok=False, status="cancelled", error={"code": "CANCELLED", "message": "runtime closed"})
            raise
        finally:
            if self._plan_inflight is ex:
                self._plan_inflight = None
        ex._finish(ok=result.status == STATUS_COMPLETED, status=result.status,
                   error=result.error.to_dict() if result.error is not None else None, turn_id=result.turn_id)
        self._publish(self._event("planExecutionDone", ex.result or {}, op=op))
