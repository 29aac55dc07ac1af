"""100 consecutive real reviews all settle, each bound to its own turn by identity (issue 31,
R-OP-3): the real 0.171.0 answers ``review/start`` with the review's turn and runs an inner
turn (``rootTurnId`` = the review's turn) whose ``turn/started`` may come before that answer
and which never gets a ``turn/completed``. Loopback model; ~15 s on the shared CI box."""

from __future__ import annotations

import trio

import codexrt
from codexrt import RuntimeConfig

REVIEWS = 100


async def test_r_op_3_real_reviews_all_settle_and_own_their_inner_turn(codex_bin, real_env, real_cwd, mock_model):
    cfg = RuntimeConfig(codex_bin=str(codex_bin), env=real_env, cwd=str(real_cwd))
    async with codexrt.open_runtime(cfg) as rt:
        with trio.fail_after(60):
            first = await rt.send("hello").wait()
        assert first.status == "completed"
        with rt.subscribe(max_droppable=1_000_000) as events:
            results = []
            for _ in range(REVIEWS):
                op = rt.review(first.thread_id)
                op.discard_events()
                with trio.fail_after(60):  # one hung review fails the test here
                    results.append((op.id, await op.wait()))
            evs = []
            while (ev := events.get_nowait()) is not None:
                evs.append(ev)
            # the runtime is still usable: no review left a turn running
            with trio.fail_after(60):
                assert (await rt.send("after the reviews", thread_id=first.thread_id).wait()).status == "completed"
    assert [r.status for _, r in results] == ["completed"] * REVIEWS
    for op_id, r in results:
        mine = [e for e in evs if e.client_operation_id == op_id]
        (ack,) = [e for e in mine if e.kind == "operationAcked"]
        assert ack.payload["turn"]["id"] == r.turn_id
        started = [e for e in mine if e.kind == "turnStarted"]
        assert len(started) == 1 and started[0].turn_id == r.turn_id  # the inner turn, owned
        assert started[0].payload["turn"]["rootTurnId"] == r.turn_id
        assert mine[-1].kind == "operationDone"
    assert not [e for e in evs if e.kind in ("turnStarted", "orphanTurnTerminal") and e.client_operation_id is None]
