"""Event kinds, payload types and decisions for type checkers (issue 33).

At run time every event is one class, :class:`~codexrt._runtime._events.CodexEvent` (its
``payload`` is a plain ``dict``, also the ``serve`` wire). For a checker, the event iterators
(``op.events()``, ``rt.subscribe()``, ``codexrt.aio``, ``codexrt.blocking``) yield
:data:`~codexrt._runtime._events.Event`: a union of ``CodexEvent`` subclasses, one per typed kind, whose ``kind`` is a
``Literal`` — so ``if ev.kind == "itemUpdated":`` narrows ``ev.payload`` to :class:`ItemUpdated`,
a misspelt key there is an error, and comparing ``ev.kind`` with a kind that does not exist is a
non-overlapping comparison (``mypy --strict``). The subclasses exist only for the checker: at
run time :data:`Event` *is* ``CodexEvent`` and nothing is built per event.

:data:`EventKind` lists every kind codexrt publishes (the ``eventKind`` enum of the ``serve``
schema; a test keeps them equal). :data:`Decision` is the answer vocabulary of approvals.
Native objects the server sends (``item``, ``turn``, ``thread``, ``params``) stay
``dict[str, Any]``: their shape is the app-server's and changes with its releases.
"""

# No ``from __future__ import annotations`` here: Python 3.11 reads ``NotRequired`` only from
# evaluated annotations when it computes a TypedDict's required keys.
from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "Decision", "EventKind", "TypedKind", "OtherKind", "ItemUpdated", "ItemEvent", "TurnStarted", "ThreadStarted",
    "OperationQueued", "OperationDone", "ErrorInfo", "InteractionRequested", "RuntimeStateChanged",
    "ProtocolError", "NativeNotification",
]

#: How an approval is answered (``Interaction.answer``, ``codexrt.blocking`` policies and callbacks).
Decision = Literal["accept", "acceptForSession", "decline", "cancel"]

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


#: The kinds with a payload type of their own (see :data:`Event`).
TypedKind = Literal["itemUpdated", "itemStarted", "itemCompleted", "turnStarted", "threadStarted",
                    "operationQueued", "operationDone", "interactionRequested", "runtimeStateChanged",
                    "protocolError", "nativeNotification"]
#: The other kinds codexrt publishes (payload: ``dict[str, Any]``).
OtherKind = Literal[
    "runtimeFallback", "runtimeReset", "runtimeUnhealthy", "threadResumed", "threadRelationVerified",
    "sessionGrantsReset", "operationAcked", "turnAborted", "interactionAnswered", "interactionResolved",
    "orphanTurnTerminal", "settingsUpdated", "thread/settings/updated", "error", "lateResponse",
    "unsupportedServerRequest", "eventsDropped", "threadTitle", "interactionExpired", "interactionOverflow",
    "interactionPolicyError", "privacyIndexWriteFailed", "planPreview", "planCompleted", "todosUpdated",
    "planOfferWithdrawn", "planExecutionDone",
]
#: Every event kind codexrt publishes.
EventKind = Literal[TypedKind, OtherKind]
