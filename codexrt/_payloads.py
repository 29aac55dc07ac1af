"""Typed payloads of the most used event kinds, for type checkers.

``CodexEvent.payload`` is a plain ``dict`` (it is also the ``serve`` wire). For a checker the
event iterators yield :data:`Event`, which ``ev.kind == "…"`` narrows (see
:mod:`codexrt._runtime._event_types`)::

    async for ev in op.events():
        if ev.kind == "itemUpdated" and ev.payload["stream"] == AGENT_TEXT:
            print(ev.payload["delta"], end="")       # ev.payload is an ItemUpdated here

:func:`payload` does the same for one kind in an expression: ``payload(ev, "itemUpdated")`` is
an :class:`ItemUpdated` when ``ev.kind == "itemUpdated"``, else ``None``.

Native objects the server sends (``item``, ``turn``, ``thread``, ``params``) stay
``dict[str, Any]``: their shape is the app-server's and changes with its releases.
``tests/trio/test_payloads.py`` checks these types against the events a turn really produces.
"""

from typing import Any, Literal, overload

from codexrt._runtime._event_types import (Decision, ErrorInfo, EventKind, InteractionRequested, ItemEvent, ItemUpdated,
                                           NativeNotification, OperationDone, OperationQueued, ProtocolError,
                                           RuntimeStateChanged, ThreadStarted, TurnStarted)
from codexrt._runtime._events import CodexEvent, Event

__all__ = [
    "AGENT_TEXT", "payload", "ItemUpdated", "ItemEvent", "TurnStarted", "ThreadStarted", "OperationQueued",
    "OperationDone", "ErrorInfo", "InteractionRequested", "RuntimeStateChanged", "ProtocolError",
    "NativeNotification", "Event", "EventKind", "Decision",
]

#: ``ItemUpdated["stream"]`` of the assistant's answer text.
AGENT_TEXT = "item/agentMessage/delta"


@overload
def payload(ev: CodexEvent, kind: Literal["itemUpdated"]) -> ItemUpdated | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["itemStarted", "itemCompleted"]) -> ItemEvent | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["turnStarted"]) -> TurnStarted | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["threadStarted"]) -> ThreadStarted | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["operationQueued"]) -> OperationQueued | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["operationDone"]) -> OperationDone | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["interactionRequested"]) -> InteractionRequested | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["runtimeStateChanged"]) -> RuntimeStateChanged | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["protocolError"]) -> ProtocolError | None: ...
@overload
def payload(ev: CodexEvent, kind: Literal["nativeNotification"]) -> NativeNotification | None: ...
@overload
def payload(ev: CodexEvent, kind: str) -> dict[str, Any] | None: ...
def payload(ev: CodexEvent, kind: str) -> Any:
    """``ev.payload`` typed for ``kind`` when ``ev.kind == kind``, else ``None``."""
    return ev.payload if ev.kind == kind else None
