"""The FIFO worker and what it does for one operation: start the runtime, decide how IDE
context travels, start or resume the thread, gate compact/review on confirmed settings, then
write ``turn/start`` (or ``thread/compact/start`` / ``review/start``) exactly once
(R-RT-3, R-OP-1 … R-OP-3, R-OP-7, R-SET-2, R-CTX-1 … R-CTX-6)."""

from __future__ import annotations

import logging
from typing import Any

import trio

from codexrt._connection import Connection
from codexrt._sansio._errors import (
    CodexError,
    ConfigError,
    ContextNotDeliverable,
    InvalidParams,
    InvalidTextElements,
    LocalProtocolError,
    OperationCancelled,
    OperationFailed,
    RemoteProtocolError,
    RpcError,
    RpcTimeout,
    SettingsMismatch,
    SettingsUnconfirmed,
    ThreadNotFound,
    ThreadResumeError,
    WriterConflict,
    from_rpc_error,
)
from codexrt._sansio._context import (MAX_INPUT_CHARS, ContextDelivery, ContextFragment, ContextFragments,
                                     prepare_input)
from codexrt._sansio._states import OpEvent, OpPhase
from codexrt._sansio._settings import Settings
from codexrt._runtime._operations import STATUS_CANCELLED, STATUS_COMPLETED, STATUS_FAILED, Operation
from codexrt._runtime._config import resolved_cli

log = logging.getLogger("codexrt.runtime")

#: What a host can do about a failed cold resume, by error class.
_RESUME_HINTS: dict[type[CodexError], str] = {
    ThreadNotFound: "a thread that never ran a turn has no rollout and cannot be resumed; start a new thread",
    WriterConflict: "another app-server (often an orphan of an earlier crash) holds this thread; "
                    "stop that process or wait for it to exit",
}


def _settings_match(sent: Any, effective: Any) -> bool:
    """True when ``effective`` carries every value of ``sent`` (R-SET-2): objects by the keys
    sent (the server adds fields such as ``sandboxPolicy.writableRoots``); a None sent is
    "the server's choice" and matches anything."""
    if sent is None:
        return True
    if isinstance(sent, dict):
        return isinstance(effective, dict) and all(_settings_match(v, effective.get(k)) for k, v in sent.items())
    return bool(sent == effective)


def _effective_from_thread_result(result: Any) -> dict[str, Any]:
    """The effective settings a ``thread/start`` / ``thread/resume`` result reports, in the
    ``thread/settings/updated`` shape (``sandbox`` → ``sandboxPolicy``, ``reasoningEffort`` →
    ``effort``); only fields the result has."""
    if not isinstance(result, dict):
        return {}
    out: dict[str, Any] = {}
    for src, dst in (("model", "model"), ("approvalPolicy", "approvalPolicy"), ("sandbox", "sandboxPolicy"),
                     ("reasoningEffort", "effort"), ("cwd", "cwd")):
        if src in result and result[src] is not None:
            out[dst] = result[src]
    return out


class RuntimeDispatch:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

    async def _fifo_worker(self) -> None:
        while True:
            while not self._queue and self._pending_rebuild is None:
                self._queue_event = trio.Event()
                await self._queue_event.wait()
            if self._pending_rebuild is not None:
                # R-LC-2: a launch change is applied between operations, before the next one.
                rebuild, self._pending_rebuild = self._pending_rebuild, None
                await rebuild()
                continue
            op = self._queue.pop(0)
            if op.terminal:
                continue
            self.active = op
            try:
                await self._dispatch(op)
            finally:
                if not op.terminal:  # pragma: no cover - _dispatch always settles
                    op._settle(STATUS_FAILED, LocalProtocolError("operation ended without a terminal"))
                self.active = None
                self._idle_since = trio.current_time()

    async def _dispatch(self, op: Operation) -> None:
        op._fire(OpEvent.DISPATCH)
        op.settings = self.desired.merged(op.payload.get("settings") or Settings())
        op.payload["settingsRevision"] = self.settings_revision
        try:
            conn = await self.ensure_started()
            if op.terminal:
                return  # settled while the runtime started (stop budget ran out): nothing is written for it
            op.generation = self.generation
            if op.cancel_requested and op.phase is OpPhase.NOT_WRITTEN:
                # cancelled while the runtime started: no thread/start or resume is in flight yet
                op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before the thread was started"))
                return
            if op.kind == "send" and not await self._decide_context(op):
                return
            if op.kind == "send":
                self._check_input_size(op)  # before a thread is started or resumed
            await self._bootstrap_thread(op, conn)
            if op.thread_id is not None:
                self._last_root_thread = op.thread_id
            if op.cancel_requested:  # the gate honours the intent once bootstrap is confirmed
                op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before the turn was started"))
                return
            if op.kind == "preconnect":
                op._settle(STATUS_COMPLETED)
                return
            if op.kind == "send":
                await self._start_turn(op, conn)
            else:
                await self._start_compact_or_review(op, conn)
        except CodexError as exc:
            if not op.terminal:
                if op.cancel_requested and op.turn_id is None and (
                        isinstance(exc, (RpcError, RpcTimeout)) or exc.details.get("startupCancelled")):
                    op._settle(STATUS_CANCELLED, OperationCancelled(f"cancelled: {exc.message}"))
                else:
                    op._settle(STATUS_FAILED, exc)
            return
        except Exception as exc:  # fault barrier: answers of an unexpected shape fail the op, not the runtime
            log.warning("%s %s failed on unexpected data: %s", op.kind, op.id, type(exc).__name__, exc_info=True)
            if not op.terminal:
                op._settle(STATUS_FAILED, RemoteProtocolError(
                    f"{op.kind} failed on an answer of unexpected shape ({type(exc).__name__})",
                    phase=op.phase.value, details={"error": type(exc).__name__}))
            return
        await op._done.wait()

    async def _bootstrap_thread(self, op: Operation, conn: Connection) -> None:
        settings = op.settings or Settings()
        if op.thread_id is None:
            if op.kind not in ("send", "preconnect"):
                raise ConfigError(f"{op.kind} needs a thread id")
            if op.kind == "preconnect":
                return
            result = await conn.call("thread/start", settings.thread_start_params())
            thread = (result or {}).get("thread") or {}
            tid = thread.get("id")
            if not isinstance(tid, str):
                raise OperationFailed("thread/start returned no thread id", details={"result": result})
            op.thread_id = tid
            info = self._thread_info(tid)
            info.loaded_generation = self.generation
            info.started_effective = _effective_from_thread_result(result)
            return
        info = self._thread_info(op.thread_id)
        if info.loaded_generation == self.generation:
            return
        params: dict[str, Any] = {"threadId": op.thread_id, **settings.thread_start_params()}
        try:
            result = await conn.call("thread/resume", params)
        except RpcError as exc:
            cls: type[CodexError] | None = from_rpc_error(exc)
            if cls is not ThreadNotFound and cls is not WriterConflict:
                cls = ThreadResumeError
            hint = _RESUME_HINTS.get(cls)
            raise cls(f"thread/resume failed: {exc.message}",
                      details={"threadId": op.thread_id, "rpcCode": exc.rpc_code,
                               **({"hint": hint} if hint else {})}) from None
        info.loaded_generation = self.generation
        info.started_effective = _effective_from_thread_result(result)  # what this resume made effective
        ev = self._event("threadResumed", {"cold": True, "thread": (result or {}).get("thread", {}).get("id")}, op=op)
        self._deliver(ev, op)
        # R-SET-3: a cold resume clears session-scoped grants (acceptForSession) on the host.
        self._publish(self._event("sessionGrantsReset", {"reason": "cold resume"}, op=op))

    @staticmethod
    def _context_fragments(op: Operation) -> tuple[ContextFragments, dict[str, dict[str, Any]]]:
        frozen: ContextFragments = op.payload.get("context") or ContextFragments()
        ready: dict[str, dict[str, Any]] = op.payload.get("additionalContext") or {}
        fragments = ContextFragments(frozen.fragments + tuple(
            ContextFragment(k, v["value"]) for k, v in ready.items() if v.get("kind") == "application"), frozen.dropped)
        return fragments, ready

    async def _decide_context(self, op: Operation) -> bool:
        """IDE context (R-CTX-1..4, R-CTX-6): fragments were frozen at submit; how they travel
        is decided here, by the probe, for this CLI and child generation — before the thread
        is started or resumed, so cancelling during the probe creates no thread and no turn.
        Returns False when the operation was cancelled (and settled)."""
        fragments, ready = self._context_fragments(op)
        if not (fragments or ready):
            return True
        if op.cancel_requested:  # a cancelled operation leaves before the probe
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before the context probe"))
            return False

        cli, env = resolved_cli(self.config, self.cli_path)
        delivery = ContextDelivery.TEXT_CONVENTION
        with trio.CancelScope() as op._probe_scope:  # abort() cancels the probe at once
            try:
                delivery = await self.probe.decide(fragments or ContextFragments((ContextFragment("_", "_"),)),
                                                   cli=cli or (), env=env, generation=self.generation)
            except ValueError:  # no CLI to ask (started from transports): the text convention
                delivery = ContextDelivery.TEXT_CONVENTION
        op._probe_scope = None
        if op.cancel_requested:  # cancelled during the probe: no thread, no turn
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled during the context probe"))
            return False
        op.payload["contextDelivery"] = delivery.value
        return True

    def _check_input_size(self, op: Operation) -> None:
        """The server refuses a turn whose input text exceeds :data:`MAX_INPUT_CHARS` — only at
        ``turn/start``, after a new thread was created. The text it would get (context included
        when it travels in the text convention) is measured here instead, before anything is
        created; over the limit the send fails with ``INVALID_PARAMS``."""
        fragments, _ = self._context_fragments(op)
        delivery = ContextDelivery(op.payload.get("contextDelivery", ContextDelivery.NONE.value))
        text: str = op.payload["text"]
        if fragments and delivery is ContextDelivery.TEXT_CONVENTION:
            text = prepare_input(text, fragments, delivery).text
        if len(text) > MAX_INPUT_CHARS:
            raise InvalidParams(f"the input is {len(text)} characters; the app-server takes at most "
                                f"{MAX_INPUT_CHARS}; nothing was started",
                                details={"maxChars": MAX_INPUT_CHARS, "actualChars": len(text)})

    async def _start_turn(self, op: Operation, conn: Connection) -> None:
        settings = op.settings or Settings()
        images: list[dict[str, Any]] = []
        for image in op.payload.get("images") or []:
            if image.startswith(("http://", "https://", "data:")):
                images.append({"type": "image", "url": image})
            else:
                images.append({"type": "localImage", "path": image})
        fragments, ready = self._context_fragments(op)
        delivery = ContextDelivery(op.payload.get("contextDelivery", ContextDelivery.NONE.value))
        untrusted = {k: v for k, v in ready.items() if v.get("kind") != "application"}
        if untrusted and delivery is not ContextDelivery.ADDITIONAL_CONTEXT:
            raise ContextNotDeliverable("untrusted context cannot travel in the text convention (this CLI has no "
                                        "additionalContext); nothing was started",
                                        details={"keys": sorted(untrusted)})
        try:
            prepared = prepare_input(op.payload["text"], fragments if delivery is not ContextDelivery.NONE
                                     else ContextFragments(), delivery, images=images,
                                     text_elements=op.payload.get("textElements") or ())
        except LocalProtocolError as exc:
            raise InvalidTextElements(exc.message, details=exc.details) from None
        params: dict[str, Any] = {"threadId": op.thread_id,
                                  "input": [*prepared.input_items(), *(op.payload.get("skills") or ())],
                                  "clientUserMessageId": op.client_message_id, **settings.turn_params()}
        if prepared.additional_context is not None:
            # ready entries travel verbatim (kind/name kept), built ones as application entries
            params["additionalContext"] = {**prepared.additional_context, **ready}

        def written() -> None:
            op._fire(OpEvent.WRITTEN)

        op._turn_requested = True
        try:
            result = await conn.call("turn/start", params, on_written=written)
        except RpcTimeout as exc:
            if exc.phase == "writtenUnconfirmed":
                # The turn may be running: never re-send (R-OP-7). Wait for its native events,
                # a late response (bound to this operation), a stop, or the child's exit.
                self._note_late_owner(op, exc)
                self._deliver(self._event("error", {"message": exc.message, "code": exc.code,
                                                    "phase": exc.phase, "method": "turn/start",
                                                    "requestId": (exc.details or {}).get("requestId")},
                                          op=op), op)
                return
            raise
        turn = (result or {}).get("turn") or {}
        tid = turn.get("id")
        if op.terminal:
            return  # the reader already settled it (a fast turn): no ack after the terminal
        if isinstance(tid, str) and op._bind_turn(tid):
            if op.cancel_requested:
                self._nursery.start_soon(self._send_interrupt, op)
        ack: dict[str, Any] = {"turn": turn}
        if "contextDelivery" in op.payload:
            ack["contextDelivery"] = op.payload["contextDelivery"]
        self._deliver(self._event("operationAcked", ack, op=op), op)

    async def _start_compact_or_review(self, op: Operation, conn: Connection) -> None:
        await self._settings_gate(op, conn)
        if op.cancel_requested:
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before it started"))
            return
        if op.kind == "compact":
            method, params = "thread/compact/start", {"threadId": op.thread_id}
        else:
            method, params = "review/start", {"threadId": op.thread_id, "target": op.payload["target"]}
        op._fire(OpEvent.WRITTEN)
        op._turn_requested = True
        try:
            result = await conn.call(method, params)
        except RpcTimeout as exc:
            self._note_late_owner(op, exc)  # its late answer still names this operation (R-WIRE-4)
            raise
        if op.terminal:
            return
        # By identity (R-OP-3): review/start names its turn (a nested turn's turn/started, which may
        # come first, names the same turn as its rootTurnId); compact's {} names none, so its turn
        # is the first top-level turn of its thread after the request.
        turn = (result or {}).get("turn") if isinstance(result, dict) else None
        if not isinstance(turn, dict) or not isinstance(turn.get("id"), str):
            turn = None
        elif op.turn_id is None and op._bind_turn(turn["id"]) and op.cancel_requested:
            self._nursery.start_soon(self._send_interrupt, op)
        self._deliver(self._event("operationAcked", {"turn": turn, "result": result}, op=op), op)

    async def _settings_gate(self, op: Operation, conn: Connection) -> None:
        """R-SET-2: compact/review carry no settings, so the revision frozen at dispatch is pushed
        with ``thread/settings/update`` first, and the gate opens only on a
        ``thread/settings/updated`` whose effective settings match it (every field sent; objects
        by the fields sent, e.g. ``sandboxPolicy.type``). A confirmation that does not match
        fails the operation (``SETTINGS_MISMATCH``), none within ``settings_confirm_timeout``
        too (``SETTINGS_UNCONFIRMED``); nothing is started either way. When the thread's known
        effective settings already match, nothing is sent: the real server (0.171.0) sends no
        notification for an update that changes nothing."""
        params = (op.settings or Settings()).turn_params()
        if not params:
            return
        info = self._thread_info(op.thread_id or "")
        revision = op.payload.get("settingsRevision")
        # what this child confirmed last; else what its thread/start or thread/resume reported
        known = info.effective if info.effective_generation == self.generation else info.started_effective
        if known and _settings_match(params, known):
            return
        seen = info.settings_seq
        await conn.call("thread/settings/update", {"threadId": op.thread_id, **params})
        with trio.move_on_after(self.config.settings_confirm_timeout):
            while True:
                if info.settings_seq != seen:
                    if _settings_match(params, info.effective):
                        return
                    raise SettingsMismatch(
                        "thread/settings/updated does not match the settings revision frozen for this "
                        "operation; not starting",
                        details={"revision": revision, "expected": params,
                                 "effective": {k: info.effective.get(k) for k in params}})
                waiter = info.settings_event
                await waiter.wait()
        raise SettingsUnconfirmed("settings were not confirmed by thread/settings/updated; not starting",
                                  details={"revision": revision})
