"""Startup edge cases (issue 17; R-RT-1, R-RT-5, R-OP-5): a stop whose budget runs out while
the runtime is still starting, a reset during STARTING/INITIALIZING, a cancelled
``ensure_started`` during ``initialize``.

Memory peers on ``autojump_clock`` (the peer's ``received`` log proves what was written), and
the stdio fake as a real child where the proof is that no process is left.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import codexrt
from codexrt import RuntimeConfig, RuntimeState

#: initialize is answered only after 60 s (virtual time): the runtime sits in INITIALIZING.
SLOW_INITIALIZE = {
    "name": "slow-initialize",
    "defaults": True,
    "rules": [{"match": {"method": "initialize"}, "actions": [{"sleep": 60}, {"default": True}]}],
}


def _methods(peers, index):
    return [m.get("method") for m in peers.received(index) if "method" in m]


async def test_r_op_5_stop_budget_out_while_starting_writes_nothing_for_the_op(peers, autojump_clock):
    """Abort during INITIALIZING, budget 5 s < the 60 s handshake: the op fails once at the
    budget (the starting child is closed), and no ``thread/start`` or ``turn/start`` is ever
    written for it; the next send starts a new child and completes."""
    cfg = RuntimeConfig(transports=[peers.sequence(SLOW_INITIALIZE, "handshake-ok")], stop_budget=5.0,
                        handshake_timeout=120.0)
    async with codexrt.open_runtime(cfg) as rt:
        op = rt.send("hello")
        with trio.fail_after(10):
            await rt.wait_state(RuntimeState.INITIALIZING)
        assert rt.abort(op) == "cancelIntent"
        start = trio.current_time()
        result = await op.wait()
        assert result.status == "failed" and result.error.details.get("stopBudgetExhausted") is True
        assert trio.current_time() - start == pytest.approx(5.0, abs=0.5)
        await trio.sleep(120)  # virtual: past the moment the slow peer would have answered
        assert _methods(peers, 0) == ["initialize"]  # nothing after it, for the settled op
        assert peers.peers[0].finished.is_set()  # the starting child was closed
        assert rt.state in (RuntimeState.STOPPED, RuntimeState.FAILED)
        nxt = await rt.send("next").wait()
        assert nxt.status == "completed"
        assert _methods(peers, 1).count("turn/start") == 1


async def test_r_op_5_cancel_while_starting_is_honoured_before_thread_start(peers, autojump_clock):
    """Abort during INITIALIZING, the handshake completes within the budget: the op is
    cancelled right after READY — no ``thread/start`` is written (none was in flight)."""
    cfg = RuntimeConfig(transports=[peers.factory(SLOW_INITIALIZE)], stop_budget=100.0, handshake_timeout=120.0)
    async with codexrt.open_runtime(cfg) as rt:
        op = rt.send("hello")
        with trio.fail_after(10):
            await rt.wait_state(RuntimeState.INITIALIZING)
        assert rt.abort(op) == "cancelIntent"
        result = await op.wait()
        assert result.status == "cancelled"
        assert rt.state is RuntimeState.READY
        assert "thread/start" not in _methods(peers, 0) and "turn/start" not in _methods(peers, 0)


async def test_r_rt_5_reset_during_initializing_retires_the_starting_child(peers, autojump_clock):
    """``reset()`` while the child is still in its handshake: that child is closed, the runtime
    ends STOPPED (not READY with a child nobody asked to keep), and the op that was starting it
    fails with ``CLOSED`` (``startupCancelled``); nothing else is written."""
    cfg = RuntimeConfig(transports=[peers.factory(SLOW_INITIALIZE)], handshake_timeout=120.0)
    async with codexrt.open_runtime(cfg) as rt:
        op = rt.send("hello")
        with trio.fail_after(10):
            await rt.wait_state(RuntimeState.INITIALIZING)
        start = trio.current_time()
        await rt.reset(reason="test")
        assert trio.current_time() - start < 60  # did not wait for the handshake
        assert rt.state is RuntimeState.STOPPED and rt.conn is None
        assert peers.peers[0].finished.is_set()
        result = await op.wait()
        assert result.status == "failed" and result.error.code == "CLOSED"
        assert result.error.details.get("startupCancelled") is True
        await trio.sleep(120)
        assert set(_methods(peers, 0)) <= {"initialize"}  # (it may be closed before reading it)
