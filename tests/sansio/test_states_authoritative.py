"""The runtime, operation and stop-path tables of ``codexrt._sansio._states`` are authoritative
(issue #20): an impossible transition raises naming machine, state and event; a transition that
may change nothing is a row of its table; the runtime never asks ``can()`` before firing; one
phase enum serves operations and single requests (R-RT-1, R-OP-2, R-OP-5, R-WIRE-4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codexrt._sansio import _rpc
from codexrt._sansio._errors import LocalProtocolError
from codexrt._sansio._states import (
    OP_TABLE,
    RUNTIME_TABLE,
    STOP_TABLE,
    Machine,
    OpEvent,
    OpPhase,
    Phase,
    RuntimeEvent,
    RuntimeState,
    StopPath,
)

ROOT = Path(__file__).resolve().parents[2]

#: Rows whose target is their source state: each one is commented as a no-op in its table.
RUNTIME_SELF_LOOPS = {
    (RuntimeState.STARTING, RuntimeEvent.START),  # startup fallback: the next candidate
    (RuntimeState.DRAINING, RuntimeEvent.FAULT),  # the child being retired exits
    (RuntimeState.DRAINING, RuntimeEvent.DRAIN),  # a retirement cut short is finished by the next
    (RuntimeState.FAILED, RuntimeEvent.FAULT),
}
OP_SELF_LOOPS = {
    (OpPhase.NATIVE_TURN_KNOWN, OpEvent.WRITTEN),
    (OpPhase.NATIVE_TURN_KNOWN, OpEvent.TURN_BOUND),
    (OpPhase.TERMINAL, OpEvent.WRITTEN),  # written after a stop budget settled it
}


@pytest.mark.parametrize("name,table,state,event", [
    ("runtime", RUNTIME_TABLE, RuntimeState.STOPPED, RuntimeEvent.INITIALIZED),
    ("runtime", RUNTIME_TABLE, RuntimeState.STOPPED, RuntimeEvent.FAULT),
    ("runtime", RUNTIME_TABLE, RuntimeState.READY, RuntimeEvent.START),
    ("operation", OP_TABLE, OpPhase.QUEUED, OpEvent.WRITTEN),
    ("operation", OP_TABLE, OpPhase.TERMINAL, OpEvent.SETTLE),
    ("operation", OP_TABLE, OpPhase.TERMINAL, OpEvent.DISPATCH),
])
def test_r_rt_1_r_op_2_an_impossible_transition_raises_naming_machine_state_and_event(name, table, state, event):
    machine = Machine(name, table, state)
    with pytest.raises(LocalProtocolError) as info:
        machine.fire(event)
    assert str(info.value).startswith(f"{name}:")
    assert repr(event.value) in str(info.value) and repr(state.value) in str(info.value)
    assert machine.state is state  # nothing applied


def test_the_only_self_loops_are_the_documented_no_ops():
    assert {k for k, v in RUNTIME_TABLE.items() if k[0] is v} == RUNTIME_SELF_LOOPS
    assert {k for k, v in OP_TABLE.items() if k[0] is v} == OP_SELF_LOOPS


def test_r_rt_1_drain_is_possible_from_every_runtime_state():
    """``_retire`` fires DRAIN unconditionally: the table must allow it everywhere."""
    assert {s for s, e in RUNTIME_TABLE if e is RuntimeEvent.DRAIN} == set(RuntimeState)


def test_r_op_5_the_stop_table_covers_every_operation_phase():
    assert set(STOP_TABLE) == set(Phase) - {Phase.ANSWERED}
    assert {p.value for p in STOP_TABLE.values()} == {
        "cancelledQueued", "cancelIntent", "interruptPending", "interruptSent", "alreadyTerminal"}
    assert STOP_TABLE[OpPhase.TERMINAL] is StopPath.ALREADY_TERMINAL


def test_r_wire_4_one_phase_enum():
    """The rpc core's request phase and the operation phase are one enum (``codexrt.OpPhase``)."""
    assert _rpc.Phase is Phase is OpPhase
    assert _rpc.OutboundCall(1, "m", b"").phase is OpPhase.NOT_WRITTEN


def test_the_runtime_fires_without_asking_can_first():
    """``if machine.can(e): machine.fire(e)`` dropped impossible transitions silently."""
    bad = []
    for path in sorted((ROOT / "codexrt/_runtime").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr == "can"
                    and isinstance(node.value, ast.Attribute) and node.value.attr == "machine"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "machine.can() in the runtime:\n" + "\n".join(bad)
