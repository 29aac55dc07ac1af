"""Typed payloads of the most used event kinds, for type checkers.

``CodexEvent.payload`` is a plain ``dict`` (it is also the ``serve`` wire). :func:`payload`
narrows it for one kind: ``payload(ev, "itemUpdated")`` is an :class:`ItemUpdated` when
``ev.kind == "itemUpdated"``, else ``None``, so a checker knows the keys and their types::

    async for ev in op.events():
        if (p := codexrt.payload(ev, "itemUpdated")) is not None and p["stream"] == AGENT_TEXT:
            print(p["delta"], end="")

Native objects the server sends (``item``, ``turn``, ``thread``, ``params``) stay
``dict[str, Any]``: their shape is the app-server's and changes with its releases.
``tests/trio/test_payloads.py`` checks these types against the events a turn really produces.
"""

# No ``from __future__ import annotations`` here: Python 3.11 reads ``NotRequired`` only from
# evaluated annotations when it computes a TypedDict's required keys.
from typing import Any, Literal, NotRequired, TypedDict, overload

from codexrt._runtime._events import CodexEvent

__all__ = [
    "AGENT_TEXT", "payload", "ItemUpdated", "ItemEvent", "TurnStarted", "ThreadStarted", "OperationQueued",
    "OperationDone", "ErrorInfo", "InteractionRequested", "RuntimeStateChanged", "ProtocolError",
    "NativeNotification",
]

#: ``ItemUpdated["stream"]`` of the assistant's answer text.
AGENT_TEXT = "item/agentMessage/delta"


class ItemUpdated(TypedDict):
    """Streamed text of one item (``itemUpdated``): answer, reasoning, command output…"""

    delta: str
    stream: str  #: the native method, e.g. :data:`AGENT_TEXT`
    deltaCount: NotRequired[int]  #: how many native deltas this event merged (when more than one)


class ItemEvent(TypedDict):
    """``itemStarted`` / ``itemCompleted``: the native item."""

    item: dict[str, Any]


class TurnStarted(TypedDict):
    turn: dict[str, Any]


class ThreadStarted(TypedDict):
    thread: dict[str, Any]


class OperationQueued(TypedDict):
    kind: str  #: send | compact | review | preconnect
    clientMessageId: str | None
    position: int


class ErrorInfo(TypedDict):
    code: str
    message: str
    details: NotRequired[dict[str, Any]]


class OperationDone(TypedDict):
    """The operation's terminal (the same fields as :class:`~codexrt.OperationResult`, plus
    its kind and clientMessageId: the same object as ``serve``'s reply result)."""

    kind: str
    status: Literal["completed", "failed", "interrupted", "cancelled"]
    clientOperationId: str
    threadId: str | None
    turnId: str | None
    finalText: str | None
    error: NotRequired[ErrorInfo]
    clientMessageId: str | None


class InteractionRequested(TypedDict):
    """A server request waiting for an answer: reply with ``interactionKey`` and ``dialogToken``."""

    interactionKey: str
    dialogToken: str
    method: str
    kind: str  #: commandApproval, fileChangeApproval, userInput, elicitation, mcpToolApproval, …
    params: dict[str, Any]
    deliverySequence: int
    state: str
    deadlineMs: int | None
    elicitation: NotRequired[dict[str, Any]]
    replayed: NotRequired[bool]


RuntimeStateChanged = TypedDict("RuntimeStateChanged", {"from": str, "to": str})


class ProtocolError(TypedDict):
    reason: str


class NativeNotification(TypedDict):
    method: str
    params: Any


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
