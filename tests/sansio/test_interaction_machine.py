"""The interaction machine (``codexrt._sansio._states.INTERACTION_TABLE``) and the one helper that
ends an answer's claim (R-INT-1: only ``pending`` accepts an answer, never sent twice)."""

from __future__ import annotations

import pytest

from codexrt._sansio._errors import LocalProtocolError
from codexrt._sansio._states import INTERACTION_TABLE, InteractionEvent, InteractionState, Machine

S, E = InteractionState, InteractionEvent


def test_r_int_1_only_pending_accepts_an_answer_and_terminal_states_absorb():
    assert [s for s in S if (s, E.ANSWER) in INTERACTION_TABLE] == [S.PENDING]
    for state in (S.RESOLVED, S.EXPIRED):
        assert not [e for e in E if (state, e) in INTERACTION_TABLE]
    assert INTERACTION_TABLE[(S.ANSWERING, E.FAILED)] is S.ANSWERED  # unknown whether sent: never again


def test_impossible_transition_names_machine_state_and_event():
    m = Machine("interaction", INTERACTION_TABLE, S.PENDING)
    m.fire(E.EXPIRE)
    with pytest.raises(LocalProtocolError, match=r"interaction: impossible transition on 'answer' in state 'expired'"):
        m.fire(E.ANSWER)
