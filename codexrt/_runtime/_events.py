"""The events codexrt publishes (R-D-2) and how they are buffered for consumers.

One event type, :class:`CodexEvent`, for operation streams, runtime subscriptions and the
``serve`` wire: ``kind`` (``turnStarted``, ``itemUpdated``, ``operationDone``, …), the
identities (generation, channel, operation, thread, turn, item) and a JSON-able ``payload``.

Streaming text — assistant deltas, reasoning deltas, command output — is ``itemUpdated`` with
``payload["delta"]`` and ``payload["stream"]`` (the native method). Buffers coalesce
consecutive deltas of one item and stream into one event when the consumer lags: fewer events,
never less text (see ``codexrt._sansio._buffer`` and ``docs/streaming.md``). An event that
merged several native deltas says how many in ``payload["deltaCount"]``.

The reader files text with :meth:`EventStream.put_text` (a run key from :func:`delta_key` plus
the text), not as ready-made events: that is the hot path of a delta flood, and it costs a list
append; the :class:`CodexEvent` is built when the consumer takes it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Literal, Union

import attrs
import trio

from codexrt._sansio._errors import BusyResourceError
from codexrt._sansio._buffer import EventBuffer

if TYPE_CHECKING:
    from codexrt._runtime._event_types import (InteractionRequested, ItemEvent, ItemUpdated, NativeNotification,
                                               OperationDone, OperationQueued, OtherKind, ProtocolError,
                                               RuntimeStateChanged, ThreadStarted, TurnStarted)

__all__ = ["CodexEvent", "Event", "EventStream", "DELTA_METHODS", "DROPPABLE_KINDS", "delta_key"]

log = logging.getLogger("codexrt.runtime")

#: Native notifications whose ``delta`` text becomes ``itemUpdated``.
DELTA_METHODS = frozenset(
    {
        "item/agentMessage/delta",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/textDelta",
        "item/commandExecution/outputDelta",
        "item/fileChange/outputDelta",
        "item/plan/delta",
        "item/mcpToolCall/progress",
    }
)

#: Kinds that may be dropped (oldest first) when a consumer lags far behind.
DROPPABLE_KINDS = frozenset({"nativeNotification"})
_DROPPABLE_METHODS = frozenset(
    {
        "thread/tokenUsage/updated",
        "account/rateLimits/updated",
        "thread/readState/changed",
        "thread/status/changed",
        "remoteControl/status/changed",
    }
)


@attrs.frozen
class CodexEvent:
    kind: str
    payload: dict[str, Any] = attrs.field(factory=dict)
    runtime_generation: int | None = None
    channel_id: str | None = None
    client_operation_id: str | None = None
    root_thread_id: str | None = None
    thread_id: str | None = None
    turn_id: str | None = None
    item_id: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The ``serve`` line form (R-D-2)."""
        return {
            "type": "daemon",
            "event": "codex_event",
            "provider": "codex",
            "runtimeGeneration": self.runtime_generation,
            "channelId": self.channel_id,
            "clientOperationId": self.client_operation_id,
            "rootThreadId": self.root_thread_id,
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "itemId": self.item_id,
            "kind": self.kind,
            "payload": self.payload,
        }

    @property
    def is_delta(self) -> bool:
        return self.kind == "itemUpdated" and isinstance(self.payload.get("delta"), str)


if TYPE_CHECKING:
    # Seen by checkers only: narrower ``kind`` and ``payload`` per kind (payload overrides the
    # base's ``dict[str, Any]`` with a TypedDict, hence the ignores).
    class ItemUpdatedEvent(CodexEvent):
        kind: Literal["itemUpdated"]
        payload: ItemUpdated  # type: ignore[assignment]

    class ItemEventEvent(CodexEvent):
        kind: Literal["itemStarted", "itemCompleted"]
        payload: ItemEvent  # type: ignore[assignment]

    class TurnStartedEvent(CodexEvent):
        kind: Literal["turnStarted"]
        payload: TurnStarted  # type: ignore[assignment]

    class ThreadStartedEvent(CodexEvent):
        kind: Literal["threadStarted"]
        payload: ThreadStarted  # type: ignore[assignment]

    class OperationQueuedEvent(CodexEvent):
        kind: Literal["operationQueued"]
        payload: OperationQueued  # type: ignore[assignment]

    class OperationDoneEvent(CodexEvent):
        kind: Literal["operationDone"]
        payload: OperationDone  # type: ignore[assignment]

    class InteractionRequestedEvent(CodexEvent):
        kind: Literal["interactionRequested"]
        payload: InteractionRequested  # type: ignore[assignment]

    class RuntimeStateChangedEvent(CodexEvent):
        kind: Literal["runtimeStateChanged"]
        payload: RuntimeStateChanged  # type: ignore[assignment]

    class ProtocolErrorEvent(CodexEvent):
        kind: Literal["protocolError"]
        payload: ProtocolError  # type: ignore[assignment]

    class NativeNotificationEvent(CodexEvent):
        kind: Literal["nativeNotification"]
        payload: NativeNotification  # type: ignore[assignment]

    class OtherEvent(CodexEvent):
        kind: OtherKind

    #: An event as a checker sees it: narrow it with ``ev.kind == "…"``.
    Event = Union[ItemUpdatedEvent, ItemEventEvent, TurnStartedEvent, ThreadStartedEvent, OperationQueuedEvent,
                  OperationDoneEvent, InteractionRequestedEvent, RuntimeStateChangedEvent, ProtocolErrorEvent,
                  NativeNotificationEvent, OtherEvent]
else:
    Event = CodexEvent


def _coalesce(prev: CodexEvent, new: CodexEvent) -> CodexEvent | None:
    # ``prev.is_delta and new.is_delta``, the kinds first: this runs for every event put behind
    # another (issue 34), and almost none is a whole delta event
    if prev.kind != "itemUpdated" or new.kind != "itemUpdated" or not (prev.is_delta and new.is_delta):
        return None
    if (prev.item_id, prev.turn_id, prev.thread_id, prev.client_operation_id) != (
        new.item_id, new.turn_id, new.thread_id, new.client_operation_id
    ):
        return None
    if (prev.runtime_generation, prev.root_thread_id) != (new.runtime_generation, new.root_thread_id):
        return None
    a, b = prev.payload, new.payload
    if a.keys() - _COUNT != b.keys() - _COUNT or any(a[k] != b[k] for k in a if k not in _MERGED):
        return None
    merged = dict(a)
    merged["delta"] = a["delta"] + b["delta"]
    merged["deltaCount"] = a.get("deltaCount", 1) + b.get("deltaCount", 1)
    return attrs.evolve(prev, payload=merged)


_COUNT = frozenset({"deltaCount"})
_MERGED = frozenset({"delta", "deltaCount"})


def delta_key(
    generation: int | None,
    channel_id: str | None,
    operation_id: str | None,
    root_thread_id: str | None,
    thread_id: str | None,
    turn_id: str | None,
    item_id: str | None,
    stream: str,
    extra: tuple[tuple[str, Any], ...] | None = None,
) -> tuple[Any, ...]:
    """The identity of a text run: deltas with equal keys that arrive back to back may be
    merged. ``extra`` holds the native params other than the ids and ``delta`` (e.g.
    ``summaryIndex``), so deltas that differ there are never merged."""
    return (generation, channel_id, operation_id, root_thread_id, thread_id, turn_id, item_id, stream, extra)


def _materialize(key: tuple[Any, ...], text: str, count: int) -> CodexEvent:
    gen, channel, op_id, root, thread, turn, item, stream, extra = key
    payload: dict[str, Any] = dict(extra) if extra else {}
    payload["delta"] = text
    payload["stream"] = stream
    if count > 1:
        payload["deltaCount"] = count
    return CodexEvent("itemUpdated", payload, gen, channel, op_id, root, thread, turn, item)


def _droppable(ev: CodexEvent) -> bool:
    return ev.kind in DROPPABLE_KINDS and ev.payload.get("method") in _DROPPABLE_METHODS


def _marker(n: int) -> CodexEvent:
    return CodexEvent("eventsDropped", {"count": n, "reason": "consumer lagging; status chatter dropped"})


class EventStream:
    """One consumer's view: a bounded, coalescing buffer plus a wakeup. ``put`` never blocks
    (it runs on the reader). Iterate with ``async for``; iteration ends after ``close()`` once
    the buffer is drained. Only one task may iterate at a time.

    A consumer that can take an event without waiting may say so with
    :meth:`take_directly`: while nothing is queued, ``put`` hands the event to it on the
    producer's task instead of queueing it and waking the consumer's (issue 34: ``codexrt
    serve`` writes an event line at once when its stdout pipe takes it whole — a task wake-up
    and a scheduler pass less per event)."""

    def __init__(self, *, max_droppable: int = 1000) -> None:
        self._buf: EventBuffer[CodexEvent] = EventBuffer(
            coalesce=_coalesce, droppable=_droppable, make_marker=_marker, max_droppable=max_droppable,
            materialize=_materialize,
        )
        self._wakeup = trio.Event()
        self._iterating = False
        self._direct: Callable[[CodexEvent], bool] | None = None

    def take_directly(self, take: Callable[[CodexEvent], bool] | None) -> None:
        """From now on, an event put while the buffer is empty (so nothing is ahead of it)
        goes to ``take(ev)`` first, on the producer's task: ``True`` — it was consumed, is not
        queued and the iterator never sees it; ``False`` — it is queued as usual, and so is
        every event after it until the consumer has emptied the buffer (the order of events
        is kept). Text is handed over as the ``itemUpdated`` event the iterator would have
        made of it. ``take`` runs on the task that puts the event (most often the connection's
        reader, or a task publishing an event of its own): it must not wait; if it raises, the event is
        queued, the error logged and ``take`` not called again. None: back to queueing all."""
        self._direct = take

    def _taken(self, ev: CodexEvent) -> bool:
        take = self._direct
        assert take is not None
        try:
            return take(ev)
        except Exception:
            self._direct = None
            log.exception("an event stream's direct consumer raised; queueing its events from now on")
            return False

    def put(self, ev: CodexEvent) -> None:
        if self._direct is not None and not self._buf and not self._buf.closed and self._taken(ev):
            return
        self._buf.put(ev)
        self._wakeup.set()

    def put_text(self, key: tuple[Any, ...], text: str, count: int = 1) -> None:
        """Text of ``count`` native deltas for run ``key`` (see :func:`delta_key`); never blocks."""
        if (self._direct is not None and not self._buf and not self._buf.closed
                and self._taken(_materialize(key, text, count))):
            return
        self._buf.put_text(key, text, count)
        self._wakeup.set()

    def close(self) -> None:
        self._buf.close()
        self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._buf.closed

    def get_nowait(self) -> Event | None:
        return self._buf.get_nowait()  # type: ignore[return-value]  # Event is CodexEvent at run time

    def statistics(self) -> dict[str, Any]:
        return self._buf.statistics()

    async def get(self) -> Event | None:
        """Next event, or None once closed and drained. Waits without a bound: the producer
        is the server's stream; closing the stream (operation terminal, runtime closed) ends it."""
        while True:
            ev = self._buf.get_nowait()
            if ev is not None:
                return ev  # type: ignore[return-value]
            if self._buf.closed:
                return None
            self._wakeup = trio.Event()
            await self._wakeup.wait()

    def __aiter__(self) -> "EventStream":  # yields Event: narrow it with ``ev.kind == "…"``
        return self

    async def __anext__(self) -> Event:
        if self._iterating:
            raise BusyResourceError("another task is already iterating this event stream")
        self._iterating = True
        try:
            ev = await self.get()
        finally:
            self._iterating = False
        if ev is None:
            raise StopAsyncIteration
        return ev
