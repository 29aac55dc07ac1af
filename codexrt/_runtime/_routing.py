"""Event routing: what the reader hands the runtime (notifications, deltas, late responses,
protocol faults, the connection's end) becomes events on the operation's stream and every
subscriber's, by thread and turn (R-OP-3, R-OP-6, R-OP-8, R-WIRE-4, R-H-8 status). Runs on
the reader: synchronous, never blocks."""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import trio

from codexrt._connection import ConnectionClosed, ConnectionEvent
from codexrt._sansio._errors import ChildExited, OperationFailed, RpcTimeout
from codexrt._runtime._events import DELTA_METHODS, CodexEvent, EventStream
from codexrt._sansio._rpc import LateResponse, ProtocolViolation, UnsupportedServerRequest
from codexrt._sansio._states import RuntimeState
from codexrt._sansio._wire import Notification, ServerRequest, decode_json
from codexrt._runtime._operations import (
    STATUS_COMPLETED,
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    Operation,
    _ThreadInfo,
)


#: Notifications the plan tracker reads (R-INT-5); a set check keeps the hook cheap on deltas.
_PLAN_METHODS = frozenset({"item/started", "item/completed", "item/plan/delta", "turn/plan/updated",
                           "turn/completed"})

_DELTA_IDS = frozenset({"threadId", "turnId", "itemId", "delta"})
_NATIVE_TERMINALS = {STATUS_COMPLETED, STATUS_FAILED, STATUS_INTERRUPTED}


_STATUS_METHODS = frozenset({"thread/status/changed", "turn/started", "turn/completed"})
#: Longest thread/turn/item id accepted from the app-server (native ids are 36-character UUIDs).
#: The runtime keeps such ids in its tables (threads, finished turns, relations), which are
#: capped by count; this caps their bytes (issue 35). A notification with a longer one is a
#: ``protocolError`` and is not routed.
MAX_NATIVE_ID_CHARS = 1024


def _oversized_id(*values: Any) -> int | None:
    """The length of the first string in ``values`` longer than :data:`MAX_NATIVE_ID_CHARS`."""
    for v in values:
        if type(v) is str and len(v) > MAX_NATIVE_ID_CHARS:
            return len(v)
    return None
_TURN_METHODS = frozenset({"turn/started", "turn/completed"})
_ITEM_METHODS = frozenset({"item/started", "item/completed"})


def _native_ids(params: dict[str, Any]) -> tuple[Any, Any, Any, dict[str, Any] | None, dict[str, Any] | None]:
    """``(threadId, turnId, itemId, turn, item)`` of a notification's params, each looked up
    once: the turn's and item's ids fall back to ``turn.id`` / ``item.id``; ``turn`` and
    ``item`` are the objects when they are dicts, else None. Runs for every routed line,
    right after the reader woke up, where each step costs several times its warm price
    (issue 34)."""
    get = params.get
    turn = get("turn")
    if not isinstance(turn, dict):
        turn = None
    item = get("item")
    if not isinstance(item, dict):
        item = None
    return (get("threadId"), get("turnId") or (turn.get("id") if turn is not None else None),
            get("itemId") or (item.get("id") if item is not None else None), turn, item)


class RuntimeRouting:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

    def _event(self, kind: str, payload: dict[str, Any] | None = None, *, op: Operation | None = None,
               thread_id: str | None = None, turn_id: str | None = None, item_id: str | None = None) -> CodexEvent:
        tid = thread_id if thread_id is not None else (op.thread_id if op else None)
        root = self._root_of(tid)
        return CodexEvent(
            kind,
            payload or {},
            runtime_generation=self.generation,
            channel_id=self.config.channel_id,
            client_operation_id=op.id if op else None,
            root_thread_id=root,
            thread_id=tid,
            turn_id=turn_id if turn_id is not None else (op.turn_id if op else None),
            item_id=item_id,
        )

    def _root_of(self, thread_id: str | None) -> str | None:
        """The ``rootThreadId`` of an event of ``thread_id`` (R-H-8): the thread itself when it
        is a known root; a child's verified root; None while that is not known (a child not yet
        verified, a thread this runtime never saw)."""
        info = self.threads.get(thread_id) if thread_id else None
        if info is None:
            return None
        return thread_id if info.root else info.root_id

    def _publish(self, ev: CodexEvent) -> None:
        for sub in self._subscribers:
            sub.put(ev)

    def publish(self, kind: str, payload: dict[str, Any] | None = None, *, thread_id: str | None = None,
                turn_id: str | None = None, item_id: str | None = None) -> None:
        """Publish one event to every subscriber, stamped like the runtime's own (generation,
        channel, root thread; R-D-2). Never blocks: each subscriber buffers its own copy."""
        self._publish(self._event(kind, payload, thread_id=thread_id, turn_id=turn_id, item_id=item_id))

    @contextlib.contextmanager
    def subscribe(self, *, max_droppable: int = 1000) -> Any:
        """``with rt.subscribe() as events: async for ev in events: …`` — every event of this
        runtime, buffered per subscriber (lossless for text, see ``codexrt._runtime._events``)."""
        stream = EventStream(max_droppable=max_droppable)
        self._subscribers.append(stream)
        try:
            yield stream
        finally:
            stream.close()
            self._subscribers.remove(stream)


    def _on_conn_event(self, gen: int, ev: ConnectionEvent) -> None:
        if gen != self.generation:
            return  # an older generation never acts on a newer one (R-RT-2)
        if isinstance(ev, Notification):
            self._on_notification(ev)
        elif isinstance(ev, ServerRequest):
            self._on_server_request(ev, gen)
        elif isinstance(ev, LateResponse):
            self._on_late_response(gen, ev)
        elif isinstance(ev, ProtocolViolation):
            self._publish(self._event("protocolError", {"reason": self._redactor(ev.reason)}))
        elif isinstance(ev, UnsupportedServerRequest):
            self._publish(self._event("unsupportedServerRequest", {"method": ev.method, "requestId": ev.id}))
        elif isinstance(ev, ConnectionClosed):
            if ev.error is not None and self.conn is not None and self.state is not RuntimeState.DRAINING:
                if not isinstance(ev.error, ChildExited):
                    # not an exit: the connection gave up on a live child (its reader failed)
                    self._publish(self._event("runtimeUnhealthy", {"reason": ev.error.message,
                                                                   "code": ev.error.code}))
                self._fault(ev.error)

    MAX_LATE_OWNERS = 256

    def _note_late_owner(self, op: Operation, exc: RpcTimeout) -> None:
        """Remember which operation a timed-out, written request belongs to (R-WIRE-4)."""
        rid = (exc.details or {}).get("requestId")
        if rid is None or op.generation is None:
            return
        self._late_owners[(op.generation, rid)] = op.id
        while len(self._late_owners) > self.MAX_LATE_OWNERS:
            self._late_owners.popitem(last=False)

    def _on_late_response(self, gen: int, ev: LateResponse) -> None:
        """R-WIRE-4: a response after its budget, named by its operation (``clientOperationId``),
        method, request id and the phase at timeout. A late ``turn/start`` result binds its turn
        to the operation when nothing else did (``turn/started`` did not come); never a second turn."""
        op_id = self._late_owners.pop((gen, ev.id), None)
        op = self.operation(op_id) if op_id is not None else None
        payload: dict[str, Any] = {"method": ev.method, "requestId": ev.id, "phase": ev.phase.value,
                                   "ok": ev.error is None}
        late = self._event("lateResponse", payload, op=op)
        if op is None and op_id is not None:  # settled and forgotten: still name it
            late = attrs.evolve(late, client_operation_id=op_id)
        self._publish(late)
        if op is None or ev.error is not None or ev.method != "turn/start" or op.terminal:
            return
        try:
            result = decode_json(ev.result_raw) if ev.result_raw is not None else None
        except Exception:  # a malformed late result binds nothing
            return
        turn = (result or {}).get("turn") if isinstance(result, dict) else None
        tid = turn.get("id") if isinstance(turn, dict) else None
        if isinstance(tid, str) and op.turn_id is None and tid not in self._finished_turns and op._bind_turn(tid):
            self._deliver(self._event("operationAcked", {"turn": turn, "late": True}, op=op), op)
            if op.cancel_requested:
                self._nursery.start_soon(self._send_interrupt, op)

    MAX_THREADS = 1024

    def _thread_info(self, thread_id: str) -> _ThreadInfo:
        """The bookkeeping of ``thread_id``, created on first sight. The table is bounded: past
        ``MAX_THREADS`` the oldest entries not used by a queued or active operation are
        forgotten (unloaded ones first). Forgetting is safe: a later send to such a thread
        simply resumes it, which the server accepts for a loaded thread too."""
        info = self.threads.get(thread_id)
        if info is not None:
            return info
        info = self.threads[thread_id] = _ThreadInfo(thread_id)
        if len(self.threads) > self.MAX_THREADS:
            busy = {op.thread_id for op in [self.active, *self._queue] if op is not None}
            busy.add(thread_id)
            candidates = [t for t in self.threads.values() if t.thread_id not in busy]
            candidates.sort(key=lambda t: t.loaded_generation == self.generation)  # unloaded first, stable
            for victim in candidates[: len(self.threads) - self.MAX_THREADS]:
                del self.threads[victim.thread_id]
        return info

    def _op_for(self, thread_id: str | None, turn_id: str | None) -> Operation | None:
        """The operation a thread/turn event belongs to, if any. Routing is by thread id, so a
        child thread never reaches its parent's operation (R-OP-6); an operation whose turn is
        not yet known only takes events after its ``turn/start`` was queued, and never events
        of a turn that already ended (R-OP-3, R-OP-8)."""
        op = self.active
        if op is None or op.terminal or thread_id is None or op.thread_id != thread_id:
            return None
        if turn_id is not None:
            if op.turn_id is not None:
                return op if op.turn_id == turn_id else None
            if not op._turn_requested or turn_id in self._finished_turns:
                return None
        return op

    def _remember_finished(self, turn_id: str) -> None:
        self._finished_turns[turn_id] = None
        while len(self._finished_turns) > 1024:
            self._finished_turns.popitem(last=False)

    def _on_notification(self, n: Notification) -> None:
        method = n.method
        if method in DELTA_METHODS:
            if method == "item/plan/delta":
                self._track_plans(method, n.params)  # R-INT-5: the plan's preview text
            self._on_delta(n)  # the hot path of a flood; no other branch takes these methods
            return
        params = n.params
        if not isinstance(params, dict):
            params = {}
        thread_id, turn_id, item_id, turn, item = _native_ids(params)
        if method in _PLAN_METHODS and (method not in _ITEM_METHODS
                                        or (item is not None and item.get("type") == "plan")):
            # R-INT-5: plan items / TODOs (never blocks). Of the items, the tracker reads only
            # plan items: the others (most lines of a turn) are not handed to it (issue 34).
            self._track_plans(method, params)
        get = params.get
        size = _oversized_id(thread_id, turn_id, item_id)
        if size is None and method == "thread/started":
            started = get("thread")
            size = _oversized_id(started.get("id")) if isinstance(started, dict) else None
        if size is None and item is not None and method == "item/completed":
            receivers = item.get("receiverThreadIds")
            size = _oversized_id(*receivers) if isinstance(receivers, list) else None
        if size is not None:
            self._publish(self._event("protocolError", {"reason": f"{method}: an id of {size} characters (at most "
                                                                  f"{MAX_NATIVE_ID_CHARS}); not routed"}))
            return

        inner = None
        if turn is not None and turn_id and method in _TURN_METHODS:
            root_turn = turn.get("rootTurnId")
            if (isinstance(root_turn, str) and root_turn and root_turn != turn_id
                    and self._op_for(thread_id, root_turn) is not None):
                # A nested turn of an operation's turn on the same thread (a review's inner turn,
                # R-OP-3): routed and reported under the turn it belongs to, named by identity —
                # never bound as the operation's own turn. (A sub-agent's turn also names its
                # parent's turn as rootTurnId, but runs on its own thread: not this case.)
                inner, turn_id = turn_id, root_turn

        if thread_id and method in _STATUS_METHODS and not (inner and method == "turn/completed"):
            self._track_status(method, thread_id, params, turn_id)
        if method == "item/completed" and item is not None and item.get("type") == "collabAgentToolCall":
            for child in item.get("receiverThreadIds") or ():
                if isinstance(child, str) and child:
                    self._want_relation(child)  # a spawned sub-agent (R-H-8)

        if method == "thread/started":
            thread = params.get("thread") or {}
            tid = thread.get("id")
            if tid:
                info = self._thread_info(tid)
                info.root = not thread.get("parentThreadId")
                info.loaded_generation = self.generation
            self._publish(self._event("threadStarted", {"thread": thread}, thread_id=tid))
            return
        if method == "thread/settings/updated" and thread_id:
            info = self._thread_info(thread_id)
            info.effective = params.get("threadSettings") or {}
            info.effective_generation = self.generation
            info.settings_seq += 1
            info.settings_event.set()
            info.settings_event = trio.Event()
            self._publish(self._event("thread/settings/updated", params, thread_id=thread_id))
            return
        if method == "serverRequest/resolved":
            self._on_server_request_resolved(params)
            return

        op = self._op_for(thread_id, turn_id)
        if method == "turn/started" and turn_id:
            if op is not None and op._bind_turn(turn_id):
                self._deliver(self._event("turnStarted", {"turn": turn}, op=op), op)
                if op.cancel_requested:
                    self._nursery.start_soon(self._send_interrupt, op)
            else:
                self._publish(self._event("turnStarted", {"turn": turn}, thread_id=thread_id, turn_id=turn_id))
            return
        if method == "turn/completed" and inner is not None:
            # the end of a nested turn is not its root's terminal: it settles nothing
            self._deliver(self._event("nativeNotification", {"method": method, "params": params}, op=op,
                                      thread_id=thread_id, turn_id=turn_id), op)
            return
        if method == "turn/completed" and turn_id:
            status = (turn or {}).get("status")
            self._remember_finished(turn_id)
            if op is not None and op._bind_turn(turn_id) and status in _NATIVE_TERMINALS:
                error = None
                if status == STATUS_FAILED:
                    terr = (turn or {}).get("error") or {}
                    error = OperationFailed(terr.get("message") or "turn failed", details={"turnError": terr})
                op._settle(status, error)
            else:
                # No operation owns it: a sub-agent, another client, or a duplicate terminal.
                self._publish(self._event("orphanTurnTerminal", {"status": status, "turn": turn},
                                          thread_id=thread_id, turn_id=turn_id))
            return
        if method in ("item/started", "item/completed") and item is not None:
            kind = "itemStarted" if method == "item/started" else "itemCompleted"
            if op is not None and method == "item/completed":
                op._note_item(item)
            self._deliver(self._event(kind, {"item": item}, op=op, thread_id=thread_id, turn_id=turn_id,
                                      item_id=item_id), op)
            return
        if method == "error":
            if op is not None:
                op.errors.append(params.get("error") or {})
            self._deliver(self._event("error", params, op=op, thread_id=thread_id, turn_id=turn_id), op)
            return
        if op is not None or self._subscribers:  # else nobody would receive it: not built (issue 34)
            self._deliver(self._event("nativeNotification", {"method": method, "params": params}, op=op,
                                      thread_id=thread_id, turn_id=turn_id, item_id=item_id), op)

    def _on_delta(self, n: Notification) -> None:
        """Streaming text (``itemUpdated``): the same identities :meth:`_event` would give, but
        filed as a text run in each consumer's buffer — no event object per native delta; the
        consumer gets one merged ``itemUpdated`` per run it takes (``codexrt._runtime._events``)."""
        d = n.delta
        extra: tuple[tuple[str, Any], ...] | None = None
        if d is not None:  # the exact shape, typed (``_wire.DeltaParams``)
            thread_id: Any = d.threadId
            turn_id: Any = d.turnId or None
            item_id: Any = d.itemId or None
            delta: Any = d.delta
        else:
            params = n.params
            if not isinstance(params, dict):
                params = {}
            get = params.get
            thread_id, turn_id, item_id, _turn, _item = _native_ids(params)
            extra = tuple((k, v) for k, v in params.items() if k not in _DELTA_IDS) or None
            delta = get("delta", "")
            if type(delta) is not str:
                delta = str(delta)
        op = self.active
        if op is None or turn_id is None or op.turn_id != turn_id or op.thread_id != thread_id or op.terminal:
            op = self._op_for(thread_id, turn_id)  # the fast test above is _op_for's common hit
        root = self._root_of(thread_id)
        if turn_id is None and op is not None:
            turn_id = op.turn_id
        # delta_key(), inlined: this runs once per native delta
        key = (self.generation, self.config.channel_id, op.id if op is not None else None, root,
               thread_id, turn_id, item_id, n.method, extra)
        count = n.delta_count  # > 1: the reader merged back-to-back lines (one read)
        if op is not None:
            op.stream.put_text(key, delta, count)
        for sub in self._subscribers:
            sub.put_text(key, delta, count)

    def _deliver(self, ev: CodexEvent, op: Operation | None) -> None:
        if op is not None:
            op.stream.put(ev)
        self._publish(ev)


    def _track_plans(self, method: str, params: Any) -> None:
        for change in self.plans.feed(method, params if isinstance(params, dict) else {}):
            self._publish(self._event(change.kind, change.payload, thread_id=change.thread_id,
                                      turn_id=change.payload.get("turnId")))

    def _track_status(self, method: str, thread_id: str, params: dict[str, Any], turn_id: str | None) -> None:
        """Native status of every thread, from its own notifications only: a parent's terminal
        never changes a child's (R-H-8). A turn on a thread never seen before may be a sub-agent's."""
        info = self.threads.get(thread_id)
        if info is None:
            if method != "turn/started":
                return
            info = self._thread_info(thread_id)
            info.root = False  # not known to be a root until its ancestry is read (R-H-8)
            self._want_relation(thread_id)
        if method == "thread/status/changed":
            st = params.get("status")
            info.status = st.get("type") if isinstance(st, dict) and isinstance(st.get("type"), str) else None
        elif method == "turn/started":
            info.active_turn = turn_id
            info.status = "active"
        elif turn_id is not None and info.active_turn == turn_id:  # turn/completed of its own turn
            info.active_turn = None
        waiting, info.status_event = info.status_event, None
        if waiting is not None:
            waiting.set()
