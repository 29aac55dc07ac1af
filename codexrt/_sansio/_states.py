"""The runtime, operation and interaction state machines, as data (R-RT-1, R-OP-2, R-OP-4, R-INT-1).

Invariants
----------
* Every transition of a machine is one row of its table; anything else raises
  :class:`~codexrt._sansio._errors.LocalProtocolError` naming machine, state and event (h11's rule).
* Runtime: ``STOPPED → STARTING → INITIALIZING → READY → DRAINING → STOPPED``; any active
  state may go to ``FAILED`` on a protocol or process fault; ``FAILED`` and ``STOPPED`` may
  start again (the next user operation does that, R-RT-1, R-RT-3).
* Operation: ``queued → notWritten → writtenUnconfirmed → nativeTurnKnown → terminal``; a
  queued or not-yet-written operation may be cancelled to ``terminal`` directly (R-OP-5);
  ``terminal`` is absorbing — a second terminal is ignored by the caller, never applied twice.
  One enum, :class:`Phase` (public name ``codexrt.OpPhase``), is also the phase of a single
  request in the rpc core (``notWritten → writtenUnconfirmed → answered``, R-WIRE-4).
* A transition that may legitimately change nothing is a row of its table (commented "no-op");
  callers fire and never ask ``can()`` first.
* Stop paths (R-OP-5): :data:`STOP_TABLE` maps an operation's phase to the path ``abort()``
  takes; it covers every phase.
"""

from __future__ import annotations

import enum
from typing import Generic, TypeVar

from codexrt._sansio._errors import LocalProtocolError

__all__ = ["RuntimeState", "RuntimeEvent", "OpPhase", "Phase", "OpEvent", "Machine", "RUNTIME_TABLE", "OP_TABLE",
           "StopPath", "STOP_TABLE", "InteractionState", "InteractionEvent", "INTERACTION_TABLE"]


class RuntimeState(str, enum.Enum):
    STOPPED = "STOPPED"
    STARTING = "STARTING"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    DRAINING = "DRAINING"
    FAILED = "FAILED"


class RuntimeEvent(str, enum.Enum):
    START = "start"  # ensure_runtime begins launching a child
    SPAWNED = "spawned"  # the transport is up; handshake next
    INITIALIZED = "initialized"  # handshake done
    DRAIN = "drain"  # reset / rebuild / idle retirement / close begins
    STOPPED = "stopped"  # the child is confirmed gone after a drain
    FAULT = "fault"  # unexpected exit, protocol fault, startup failure


R, E = RuntimeState, RuntimeEvent
RUNTIME_TABLE: dict[tuple[RuntimeState, RuntimeEvent], RuntimeState] = {
    (R.STOPPED, E.START): R.STARTING,
    (R.FAILED, E.START): R.STARTING,
    (R.STARTING, E.SPAWNED): R.INITIALIZING,
    (R.STARTING, E.START): R.STARTING,  # startup fallback: next candidate (R-CLI-5)
    (R.INITIALIZING, E.START): R.STARTING,  # a candidate failed before READY; try the next
    (R.INITIALIZING, E.INITIALIZED): R.READY,
    (R.READY, E.DRAIN): R.DRAINING,
    (R.STARTING, E.DRAIN): R.DRAINING,
    (R.INITIALIZING, E.DRAIN): R.DRAINING,
    (R.FAILED, E.DRAIN): R.DRAINING,
    (R.STOPPED, E.DRAIN): R.DRAINING,
    (R.DRAINING, E.STOPPED): R.STOPPED,
    (R.DRAINING, E.DRAIN): R.DRAINING,  # no-op: a retirement cut short mid-close is finished by the next
    (R.DRAINING, E.FAULT): R.DRAINING,  # the child we are retiring exits: expected
    (R.STARTING, E.FAULT): R.FAILED,
    (R.INITIALIZING, E.FAULT): R.FAILED,
    (R.READY, E.FAULT): R.FAILED,
    (R.FAILED, E.FAULT): R.FAILED,
}
del R, E


class OpPhase(str, enum.Enum):
    QUEUED = "queued"
    NOT_WRITTEN = "notWritten"
    WRITTEN_UNCONFIRMED = "writtenUnconfirmed"
    NATIVE_TURN_KNOWN = "nativeTurnKnown"
    TERMINAL = "terminal"
    ANSWERED = "answered"  # a single request's end (the rpc core's calls); operations end ``terminal``


class OpEvent(str, enum.Enum):
    DISPATCH = "dispatch"  # the FIFO took it
    WRITTEN = "written"  # turn/start line written
    TURN_BOUND = "turnBound"  # turn/started or the turn/start response named the turn
    SETTLE = "settle"  # terminal


P, O = OpPhase, OpEvent
OP_TABLE: dict[tuple[OpPhase, OpEvent], OpPhase] = {
    (P.QUEUED, O.DISPATCH): P.NOT_WRITTEN,
    (P.QUEUED, O.SETTLE): P.TERMINAL,  # cancelled while queued: zero RPCs
    (P.NOT_WRITTEN, O.WRITTEN): P.WRITTEN_UNCONFIRMED,
    (P.NOT_WRITTEN, O.SETTLE): P.TERMINAL,
    (P.NOT_WRITTEN, O.TURN_BOUND): P.NATIVE_TURN_KNOWN,  # turn/started before our write was confirmed
    (P.WRITTEN_UNCONFIRMED, O.TURN_BOUND): P.NATIVE_TURN_KNOWN,
    (P.WRITTEN_UNCONFIRMED, O.SETTLE): P.TERMINAL,
    (P.NATIVE_TURN_KNOWN, O.WRITTEN): P.NATIVE_TURN_KNOWN,
    (P.NATIVE_TURN_KNOWN, O.TURN_BOUND): P.NATIVE_TURN_KNOWN,  # same turn named again
    (P.NATIVE_TURN_KNOWN, O.SETTLE): P.TERMINAL,
    # no-op: the turn/start (or compact/review) line was written after the operation had already
    # been settled (its stop budget ran out while it was being written)
    (P.TERMINAL, O.WRITTEN): P.TERMINAL,
}
del P, O

S = TypeVar("S", bound=enum.Enum)
V = TypeVar("V", bound=enum.Enum)


class Machine(Generic[S, V]):
    """A tiny table-driven state machine: ``fire(event)`` or a LocalProtocolError."""

    __slots__ = ("name", "table", "state")

    def __init__(self, name: str, table: dict[tuple[S, V], S], initial: S) -> None:
        self.name = name
        self.table = table
        self.state = initial

    def can(self, event: V) -> bool:
        return (self.state, event) in self.table

    def fire(self, event: V) -> S:
        try:
            self.state = self.table[(self.state, event)]
        except KeyError:
            raise LocalProtocolError(
                f"{self.name}: impossible transition on {event.value!r} in state {self.state.value!r}"
            ) from None
        return self.state

    def __repr__(self) -> str:
        return f"<{self.name} {self.state.value}>"


#: The one phase enum: an operation's (R-OP-2) and a single request's (R-WIRE-4).
Phase = OpPhase


class StopPath(str, enum.Enum):
    """What ``Runtime.abort()`` does for an operation, by its phase (R-OP-5); the value is
    the answer ``abort()`` returns."""

    CANCELLED_QUEUED = "cancelledQueued"  # removed from the FIFO: zero RPCs
    CANCEL_INTENT = "cancelIntent"  # not written yet: nothing will be written once bootstrap is confirmed
    INTERRUPT_PENDING = "interruptPending"  # written, turn id unknown: interrupt as soon as it arrives
    INTERRUPT_SENT = "interruptSent"  # turn known: ``turn/interrupt`` now
    ALREADY_TERMINAL = "alreadyTerminal"


#: Operation phase → stop path; total over the operation phases (``answered`` is a request's
#: phase, never an operation's).
STOP_TABLE: dict[OpPhase, StopPath] = {
    OpPhase.QUEUED: StopPath.CANCELLED_QUEUED,
    OpPhase.NOT_WRITTEN: StopPath.CANCEL_INTENT,
    OpPhase.WRITTEN_UNCONFIRMED: StopPath.INTERRUPT_PENDING,
    OpPhase.NATIVE_TURN_KNOWN: StopPath.INTERRUPT_SENT,
    OpPhase.TERMINAL: StopPath.ALREADY_TERMINAL,
}


# -- the interaction machine (R-INT-1) ------------------------------------------------------------


class InteractionState(str, enum.Enum):
    """Where a server → client request stands. Only ``pending`` accepts an answer; ``answering``
    is entered before the first await so two concurrent answers can never both be sent."""

    PENDING = "pending"
    ANSWERING = "answering"
    ANSWERED = "answered"
    RESOLVED = "resolved"
    EXPIRED = "expired"

    def __str__(self) -> str:
        return self.value


class InteractionEvent(str, enum.Enum):
    ANSWER = "answer"  # an answer claimed it (host, policy or deadline)
    SENT = "sent"  # the reply was written
    FAILED = "failed"  # the reply (or its privacy record) failed: never sent twice, so answered
    RESOLVE = "resolve"  # serverRequest/resolved, or the server no longer waits for it
    EXPIRE = "expire"  # deadline reply sent, or the child is gone

    def __str__(self) -> str:
        return self.value


I, IE = InteractionState, InteractionEvent
INTERACTION_TABLE: dict[tuple[InteractionState, InteractionEvent], InteractionState] = {
    (I.PENDING, IE.ANSWER): I.ANSWERING,
    (I.PENDING, IE.RESOLVE): I.RESOLVED,
    (I.PENDING, IE.EXPIRE): I.EXPIRED,
    (I.ANSWERING, IE.SENT): I.ANSWERED,
    (I.ANSWERING, IE.FAILED): I.ANSWERED,
    (I.ANSWERING, IE.RESOLVE): I.RESOLVED,
    (I.ANSWERING, IE.EXPIRE): I.EXPIRED,
    (I.ANSWERED, IE.RESOLVE): I.RESOLVED,
}
del I, IE
#: States in which the server still waits for a reply from us.
INTERACTION_OPEN = frozenset({InteractionState.PENDING, InteractionState.ANSWERING})
#: States that end the interaction for the host (no answer is accepted any more).
INTERACTION_SETTLED = frozenset({InteractionState.ANSWERED, InteractionState.RESOLVED, InteractionState.EXPIRED})
