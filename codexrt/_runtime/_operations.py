"""Operations: :class:`Operation` (one queued send/compact/review/preconnect, its phase machine,
its event stream and its single terminal), :class:`OperationResult`, the runtime's per-thread
bookkeeping, :class:`ChildHandle` (the port's view of one child), and the part of the runtime
that creates and finds operations (R-OP-1, R-OP-2, R-OP-4, R-SET-1)."""

from __future__ import annotations

import secrets
from typing import Any, Sequence

import attrs
import trio

from codexrt._connection import Connection
from codexrt._sansio._errors import ClosedError, CodexError, ConfigError, InvalidParams, QueueFull
from codexrt._runtime._events import CodexEvent, EventStream
from codexrt._sansio._context import MAX_INPUT_CHARS, ContextFragments, EditorState, build_context
from codexrt._sansio._states import OP_TABLE, Machine, OpEvent, OpPhase
from codexrt._io._retry import call_read
from codexrt._sansio._settings import Settings


STATUS_COMPLETED = "completed"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
STATUS_CANCELLED = "cancelled"


@attrs.frozen
class OperationResult:
    """The terminal of an operation."""

    status: str  # completed | failed | interrupted | cancelled
    client_operation_id: str
    thread_id: str | None
    turn_id: str | None
    final_text: str | None = None
    error: CodexError | None = None

    @property
    def reason(self) -> str | None:
        """Why the operation did not complete — the error's message, hint included — or None."""
        return self.error.message if self.error is not None else None

    def __str__(self) -> str:
        """One line for people: the status, then the answer or why there is none
        (``print(result)`` never shows a bare ``failed``)."""
        if self.error is not None:
            return f"{self.status}: {self.error.message}"
        if self.final_text:
            return f"{self.status}: {self.final_text}"
        return self.status

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "clientOperationId": self.client_operation_id,
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "finalText": self.final_text,
        }
        if self.error is not None:
            out["error"] = self.error.to_dict()
        return out


class Operation:
    """A long operation (send/compact/review/preconnect). Iterate its events with
    ``async for ev in op.events()``; ``await op.wait()`` returns its :class:`OperationResult`.

    Event buffering (explicit policy): the operation's own stream keeps every event of the
    operation from ``operationQueued`` to ``operationDone`` until it is read — reading late
    (e.g. after ``wait()``) still yields all of them, text coalesced but never lost
    (``codexrt._runtime._events``). The buffer lives as long as the operation object; once it
    is terminal the runtime keeps only a settled record of it (ids, status, error — no text, no
    events) in its bounded recent table (:attr:`Runtime.MAX_RECENT_OPS`), so an operation
    nobody holds is freed with its buffer and its answer. A caller that will never read the
    stream (e.g. it follows ``rt.subscribe()`` instead, as ``codexrt serve`` does) calls
    :meth:`discard_events` right away: nothing is buffered for it from then on."""

    def __init__(self, runtime: "Runtime", kind: str, op_id: str, *, thread_id: str | None,
                 client_message_id: str | None, payload: dict[str, Any]) -> None:
        self.runtime = runtime
        self.kind = kind
        self.id = op_id
        self.thread_id = thread_id
        self.client_message_id = client_message_id
        self.payload = payload
        self.machine: Machine[OpPhase, OpEvent] = Machine("operation", OP_TABLE, OpPhase.QUEUED)
        self.turn_id: str | None = None
        self.generation: int | None = None
        self.settings: Settings | None = None
        self.cancel_requested = False
        self.cancel_requested_at: float | None = None
        self.result: OperationResult | None = None
        self.stream = EventStream()
        self._events_discarded = False
        self._done = trio.Event()
        self._final_text_parts: dict[str, str] = {}
        self._final_text: str | None = None
        self.errors: list[dict[str, Any]] = []
        self._turn_requested = False
        self._probe_scope: trio.CancelScope | None = None

    def __repr__(self) -> str:
        return f"<Operation {self.id} {self.kind} {self.phase.value} thread={self.thread_id} turn={self.turn_id}>"

    @property
    def phase(self) -> OpPhase:
        return self.machine.state

    @property
    def terminal(self) -> bool:
        return self.machine.state is OpPhase.TERMINAL

    def events(self) -> EventStream:
        """The operation's event stream (see the class doc for its buffering). Raises
        :class:`ClosedError` after :meth:`discard_events`."""
        if self._events_discarded:
            raise ClosedError("this operation's events were discarded (discard_events()); "
                              "follow rt.subscribe() instead")
        return self.stream

    def discard_events(self) -> None:
        """Stop buffering this operation's events: what is buffered is dropped and later
        events are not kept (they still reach ``rt.subscribe()`` subscribers). For callers
        that never read :meth:`events`; ``wait()`` and the result are unaffected. A task
        already iterating the stream gets what was buffered, then its iteration ends."""
        self._events_discarded = True
        old, self.stream = self.stream, _DiscardStream()
        old.close()  # a reader already iterating ends after what was buffered, instead of hanging

    async def wait(self) -> OperationResult:
        """Wait for the terminal. No bound of its own: a turn may run for hours; ``abort``
        bounds it (R-OP-5) and a child exit settles it (R-RT-4)."""
        await self._done.wait()
        assert self.result is not None
        return self.result

    async def abort(self) -> str:
        return self.runtime.abort(self)

    # -- used by the runtime (sync: may run on the reader) -------------------------------

    def _fire(self, event: OpEvent) -> None:
        self.machine.fire(event)  # an impossible transition raises LocalProtocolError (OP_TABLE)

    def _bind_turn(self, turn_id: str) -> bool:
        """Bind the native turn once (R-OP-3). False if another turn is already bound."""
        if self.turn_id is None:
            self.turn_id = turn_id
            self._fire(OpEvent.TURN_BOUND)
            return True
        return self.turn_id == turn_id

    def _note_item(self, item: dict[str, Any]) -> None:
        if item.get("type") == "agentMessage" and isinstance(item.get("text"), str):
            self._final_text = item["text"]

    def _settled_record(self) -> "Operation":
        """What the runtime's table of recent settled operations keeps of this one: ids, kind,
        thread, turn, generation, settings, the terminal phase and the result's status and
        error — not the answer text, the input or events (the caller has the text in the result
        it holds; 1 MB answers must not stay 256 deep per runtime, issue 31)."""
        assert self.result is not None
        rec = Operation(self.runtime, self.kind, self.id, thread_id=self.thread_id,
                        client_message_id=self.client_message_id, payload={})
        rec.machine = self.machine  # terminal: it never moves again
        rec.turn_id, rec.generation, rec.settings = self.turn_id, self.generation, self.settings
        rec.cancel_requested, rec.cancel_requested_at = self.cancel_requested, self.cancel_requested_at
        rec.result = attrs.evolve(self.result, final_text=None)
        rec.stream, rec._events_discarded = _DISCARDED, True  # shared: made once per turn on the reader
        rec._done.set()
        return rec

    def _settle(self, status: str, error: CodexError | None = None) -> bool:
        """Terminal, exactly once (R-OP-4). Returns False for a duplicate."""
        if self.terminal:
            return False
        self.machine.fire(OpEvent.SETTLE)
        self.result = OperationResult(status, self.id, self.thread_id, self.turn_id, self._final_text, error)
        # the same fields as serve's reply (docs/daemon-protocol.md): the result and its kind
        # and clientMessageId
        payload: dict[str, Any] = {"kind": self.kind, **self.result.to_wire(),
                                   "clientMessageId": self.client_message_id}
        ev = self.runtime._event("operationDone", payload, op=self)
        self.stream.put(ev)
        self.stream.close()
        self.runtime._publish(ev)
        self.runtime._forget_settled(self)
        self._done.set()
        return True


class _DiscardStream(EventStream):
    """The stream of an operation whose events were discarded: keeps nothing, always closed."""

    def __init__(self) -> None:
        super().__init__(max_droppable=0)
        super().close()

    def put(self, ev: CodexEvent) -> None:
        pass

    def put_text(self, key: tuple[Any, ...], text: str, count: int = 1) -> None:
        pass


#: The stream of every settled record (:meth:`Operation._settled_record`): it keeps nothing and
#: is always closed, and iterating it never yields, so one instance serves them all.
_DISCARDED = _DiscardStream()


@attrs.define
class _ThreadInfo:
    thread_id: str
    loaded_generation: int | None = None
    root: bool = True
    effective: dict[str, Any] = attrs.field(factory=dict)
    settings_event: trio.Event = attrs.field(factory=trio.Event)
    settings_seq: int = 0  # thread/settings/updated notifications seen (R-SET-2 gate)
    effective_generation: int | None = None  # the child generation that confirmed ``effective``
    # what the last thread/start or thread/resume result reported as in effect (gate only)
    started_effective: dict[str, Any] = attrs.field(factory=dict)
    # Sub-agent relations (R-H-8): set once the parentThreadId ancestry was verified.
    parent_id: str | None = None
    root_id: str | None = None
    relation_pending: bool = False
    # a root's relation set: verified descendants -> depth (1 = direct child)
    children: dict[str, int] = attrs.field(factory=dict)
    # native status (``thread/status/changed`` type) and running turn; None = unknown
    status: str | None = None
    active_turn: str | None = None
    #: set at the next status change, then dropped; made by whoever waits for that change (the
    #: release of a sub-agent): not one new Event per status line on the reader (issue 34)
    status_event: trio.Event | None = None


@attrs.frozen(eq=False)
class ChildHandle:
    """One child (one generation) of a :class:`Runtime`, as its public port hands it out
    (:meth:`Runtime.start_child`, :meth:`Runtime.current_child`): layers above the runtime call
    the child through this and never hold ``Runtime.conn``. A handle never starts, restarts
    or resumes anything; calls on a retired child fail like calls on its closed connection."""

    connection: Connection
    generation: int
    _runtime: "Runtime"

    def is_current(self) -> bool:
        """True while the runtime still holds this child: same generation, same connection
        (R-RT-2). Its connection may already be ending; a call then fails with the connection's
        final error: ``ChildExited`` when the child died, ``ClosedError`` when it was closed."""
        return self._runtime.generation == self.generation and self._runtime.conn is self.connection

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """One request on this child, never retried (for requests that change state)."""
        return await self.connection.call(method, params, timeout=timeout)

    async def call_read(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """A read on this child: retried on overload only for the methods of
        :data:`~codexrt._io._retry.READ_ONLY_RETRY_TABLE` (:func:`~codexrt._io._retry.call_read`)."""
        return await call_read(self.connection, method, params, timeout=timeout)


class RuntimeOperations:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

    #: Settled operations kept findable by id (``operation()``, ``abort(id)``); older ones are
    #: forgotten. The table keeps a settled record (:meth:`Operation._settled_record`), never the
    #: answer text, input or events: those live only as long as the caller's own object.
    MAX_RECENT_OPS = 256

    def operation(self, op_id: str) -> Operation | None:
        """The operation with client operation id ``op_id``: any unsettled one, or the settled
        record of one of the last :attr:`MAX_RECENT_OPS` settled ones (its ids, status and
        error; ``result.final_text`` is None and it has no events — the object ``send()``
        returned keeps those); else None."""
        return self._ops.get(op_id) or self._recent_ops.get(op_id)

    def _forget_settled(self, op: Operation) -> None:
        if self._ops.pop(op.id, None) is None:
            return
        self._recent_ops[op.id] = op._settled_record()
        while len(self._recent_ops) > self.MAX_RECENT_OPS:
            self._recent_ops.popitem(last=False)

    def update_settings(self, settings: Settings | None = None, **changes: Any) -> int:
        """Change the *desired* settings (R-SET-1); returns the new revision. The next
        dispatched operation freezes it; effective settings come from the server."""
        new = self.desired.merged(settings) if settings is not None else self.desired
        if changes:
            new = new.merged(Settings(**changes))
        self.desired = new
        self.settings_revision += 1
        payload: dict[str, Any] = {"revision": self.settings_revision, "desired": new.to_wire()}
        chosen = changes.get("sandbox") or (settings.sandbox if settings is not None else None)
        if chosen is not None:
            # R-SET-4: a sandbox chosen here is the user's selection (plan/approval never set it)
            payload["sandboxSelection"] = {"mode": chosen, "source": "user"}
        self._publish(self._event("settingsUpdated", payload))
        return self.settings_revision


    #: Most operations waiting in the FIFO; one more is refused with ``QUEUE_FULL`` (nothing
    #: is queued or written for it).
    MAX_QUEUED_OPS = 1024

    def _new_op(self, kind: str, *, thread_id: str | None, client_message_id: str | None,
                payload: dict[str, Any]) -> Operation:
        if self._closing:
            raise ClosedError("runtime is closed")
        if len(self._queue) >= self.MAX_QUEUED_OPS:
            raise QueueFull(f"{len(self._queue)} operations are already queued on this runtime (the limit is "
                            f"{self.MAX_QUEUED_OPS}); wait for some to finish",
                            details={"queued": len(self._queue), "maxQueued": self.MAX_QUEUED_OPS})
        op = Operation(self, kind, f"op-{self.generation}-{next(self._op_counter)}-{secrets.token_hex(3)}",
                       thread_id=thread_id, client_message_id=client_message_id, payload=payload)
        self._ops[op.id] = op
        self._queue.append(op)
        self._queue_event.set()
        ev = self._event("operationQueued", {"kind": kind, "clientMessageId": client_message_id,
                                             "position": len(self._queue)}, op=op)
        op.stream.put(ev)
        self._publish(ev)
        return op

    def send(self, text: str, *, thread_id: str | None = None, client_message_id: str | None = None,
             images: Sequence[str] = (), additional_context: dict[str, Any] | None = None,
             settings: Settings | None = None, editor_state: EditorState | None = None,
             context: ContextFragments | None = None,
             text_elements: Sequence[dict[str, Any]] = (), skills: Sequence[Any] = ()) -> Operation:
        """Queue a user message (R-OP-1). ``thread_id=None`` starts a new thread. Returns at
        once; the operation runs when the FIFO reaches it. ``client_message_id`` identifies
        this submission (R-OP-7); a fresh one is chosen when omitted.

        ``text`` is the user's input only (R-CTX-1). IDE context comes as ``editor_state``
        (built into fragments *now*: later editor changes never reach this send) or as
        ready ``context`` fragments, and/or ``additional_context`` (a ready
        ``{key: {kind, value, name?}}`` map, copied now). At dispatch the capability probe
        decides how it travels: ``turn/start.additionalContext`` beside the raw text, or the
        ``# Context from my IDE setup:`` text convention with ``text_elements`` byte ranges
        shifted (R-CTX-2 … R-CTX-4). ``skills`` (``{name, path}`` mappings or objects with
        ``name``/``path``, e.g. :class:`~codexrt._features._catalog.SkillRef`) are sent as native ``skill``
        input items after the text (R-CAT-1). Raises ``ConfigError`` for malformed context."""
        if not isinstance(text, str):
            raise ConfigError("text must be a string")
        if len(text) > MAX_INPUT_CHARS:  # the server's limit, refused before anything is queued
            raise InvalidParams(f"text is {len(text)} characters; the app-server takes at most {MAX_INPUT_CHARS}",
                                details={"maxChars": MAX_INPUT_CHARS, "actualChars": len(text)})
        if editor_state is not None and context is not None:
            raise ConfigError("give editor_state or context, not both")
        frozen = context if context is not None else (build_context(editor_state) if editor_state is not None
                                                      else ContextFragments())
        ready: dict[str, dict[str, Any]] = {}
        for key, entry in (additional_context or {}).items():
            if not (isinstance(key, str) and key and isinstance(entry, dict) and isinstance(entry.get("value"), str)
                    and entry.get("kind") in ("application", "untrusted")):
                raise ConfigError(f"additional_context[{key!r}] must be {{kind: application|untrusted, value: str, "
                                  "name?}", details={"key": str(key)})
            if key in frozen.keys():
                raise ConfigError(f"context key {key!r} is given twice", details={"key": key})
            ready[key] = dict(entry)
        skill_items: list[dict[str, Any]] = []
        for sk in skills:
            name = sk.get("name") if isinstance(sk, dict) else getattr(sk, "name", None)
            path = sk.get("path") if isinstance(sk, dict) else getattr(sk, "path", None)
            if not (isinstance(name, str) and name and isinstance(path, str) and path):
                raise InvalidParams("a skill needs a non-empty name and path")
            skill_items.append({"type": "skill", "name": name, "path": path})
        cmid = client_message_id or f"cm-{secrets.token_hex(8)}"
        return self._new_op("send", thread_id=thread_id, client_message_id=cmid, payload={
            "text": text, "images": list(images), "additionalContext": ready or None, "context": frozen,
            "textElements": [dict(e) for e in text_elements], "settings": settings, "skills": skill_items})

    def compact(self, thread_id: str) -> Operation:
        return self._new_op("compact", thread_id=thread_id, client_message_id=None, payload={})

    def review(self, thread_id: str, target: dict[str, Any] | None = None) -> Operation:
        return self._new_op("review", thread_id=thread_id, client_message_id=None,
                            payload={"target": target or {"type": "uncommittedChanges"}})

    def preconnect(self, thread_id: str | None = None) -> Operation:
        """Start or reuse the runtime and resume ``thread_id``; never starts a turn (R-D-1)."""
        return self._new_op("preconnect", thread_id=thread_id, client_message_id=None, payload={})
