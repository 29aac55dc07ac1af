"""A review's / compact's turn is bound by identity, never by arrival order (issue 31, R-OP-3).

The real 0.171.0 runs ``review/start`` inline: its response names the review's turn, and the
review's *inner* turn (its own id, ``rootTurnId`` = the review's turn) sends ``turn/started``
— sometimes before that response — and never a ``turn/completed``; the items and the terminal
carry the review's turn id. Scenario ``review-inner-turn-first`` reproduces the bad order.
"""

from __future__ import annotations

import trio

import codexrt
from codexrt import RuntimeConfig


def _rt(peers, *scenarios):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)]))


def _drain(stream):
    out = []
    while (ev := stream.get_nowait()) is not None:
        out.append(ev)
    return out


async def test_r_op_3_review_binds_its_turn_by_the_response_not_the_inner_turn_started(peers, autojump_clock):
    async with _rt(peers, "review-inner-turn-first") as rt:
        first = rt.send("hello")
        await first.wait()
        with rt.subscribe() as events:
            ops = []
            for _ in range(3):
                op = rt.review(first.thread_id)
                with trio.fail_after(30):  # virtual time: the review must settle, not hang
                    result = await op.wait()
                ops.append((op, result))
            evs = _drain(events)
    for op, result in ops:
        assert result.status == "completed" and result.final_text == "No findings."
        assert result.turn_id is not None and result.turn_id.startswith("review-turn-")
        mine = [e for e in evs if e.client_operation_id == op.id]
        started = [e for e in mine if e.kind == "turnStarted"]
        # the inner turn is reported once, as part of its operation, under the review's turn
        assert len(started) == 1 and started[0].turn_id == result.turn_id
        assert started[0].payload["turn"]["rootTurnId"] == result.turn_id
        acked = [e for e in mine if e.kind == "operationAcked"]
        assert acked and acked[0].payload["turn"]["id"] == result.turn_id
        assert [e.kind for e in mine][-1] == "operationDone"
    # no turnStarted that no operation owns (a spinner that never ends), no orphan terminal
    assert not [e for e in evs if e.kind in ("turnStarted", "orphanTurnTerminal") and e.client_operation_id is None]


async def test_r_op_3_compact_binds_the_turn_of_its_thread(peers, autojump_clock):
    async with _rt(peers, "review-inner-turn-first") as rt:
        first = rt.send("hello")
        await first.wait()
        with trio.fail_after(30):
            result = await rt.compact(first.thread_id).wait()
        assert result.status == "completed" and result.turn_id.startswith("compact-turn-")
        review = await rt.review(first.thread_id).wait()  # the runtime is fine afterwards
        assert review.status == "completed"
