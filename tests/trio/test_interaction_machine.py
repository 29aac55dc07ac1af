"""An :class:`Interaction` drives the table of ``codexrt._sansio._states`` (R-INT-1): an impossible
transition raises ``INTERACTION_STATE`` naming machine, state and event; ``_finish_answering`` ends
an answer's claim only while it holds."""

from __future__ import annotations

import msgspec
import pytest
import trio

from codexrt._runtime._interactions import Interaction
from codexrt._sansio._errors import InteractionError
from codexrt._sansio._states import InteractionState as S
from codexrt._sansio._wire import ServerRequest

class _Owner:
    session_epoch = "e"

    class config:  # noqa: N801 - a stand-in attribute bag
        channel_id = "c"


def _interaction() -> Interaction:
    return Interaction(_Owner(), ServerRequest(0, "item/tool/call", msgspec.Raw(b'{"threadId": "t"}')),
                       generation=1, sequence=1, deadline=None)


def test_interaction_fire_raises_interaction_state_and_finish_answering_is_a_no_op_once_settled():
    async def main() -> None:
        inter = _interaction()
        assert inter.state == "pending" and inter.pending and inter.to_wire()["state"] == "pending"
        inter._fire("answer")
        assert inter.state is S.ANSWERING and not inter.settled.is_set()
        inter._fire("resolve")  # serverRequest/resolved arrived while the reply was written
        inter._finish_answering("sent")  # nothing left to end
        assert inter.state is S.RESOLVED and inter.settled.is_set()
        with pytest.raises(InteractionError) as info:
            inter._fire("answer")
        assert info.value.code == "INTERACTION_STATE"
        assert "'answer'" in info.value.message and "'resolved'" in info.value.message
        assert "interaction" in info.value.message and inter.key in info.value.message

        other = _interaction()
        other._fire("answer")
        other._finish_answering("sent")
        assert other.state is S.ANSWERED and repr(other).startswith("<Interaction item/tool/call answered ")

    trio.run(main)
