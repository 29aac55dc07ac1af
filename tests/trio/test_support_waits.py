"""The test suite's own wait helpers (``tests/_support``): ``MemoryPeers.wait_received`` wakes
on the peer's arrivals (no polling) and fails naming what arrived; ``wait_until`` polls other
processes' state under a bound and fails naming what it waited for."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import codexrt
from codexrt import RuntimeConfig
from tests._support import wait_until


async def test_wait_received_waits_for_a_peer_not_started_yet(peers, nursery):
    got = []

    async def waiter():
        got.extend(await peers.wait_received(0, "thread/start"))

    nursery.start_soon(waiter)
    await trio.testing.wait_all_tasks_blocked()
    assert got == [] and peers.peers == []
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory("handshake-ok")])) as rt:
        await rt.send("x").wait()
        await trio.testing.wait_all_tasks_blocked()
    assert [m["method"] for m in got] == ["thread/start"]


async def test_wait_received_wakes_on_arrival_without_polling(peers, autojump_clock):
    """Under the autojump clock a poll loop would advance virtual time; the wait does not."""
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory("handshake-ok")])) as rt:
        t0 = trio.current_time()
        op = rt.send("x")
        (start,) = await peers.wait_received(0, "turn/start")
        assert trio.current_time() == t0
        assert start["params"]["threadId"]
        await op.wait()


async def test_wait_received_fails_at_once_when_the_peer_ended_without_it(peers, autojump_clock):
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory("handshake-ok")])) as rt:
        await rt.ensure_started()
    t0 = trio.current_time()
    with pytest.raises(AssertionError, match=r"ended after 0 of 1 thread/compact/start.*'initialize'"):
        await peers.wait_received(0, "thread/compact/start")
    assert trio.current_time() == t0  # no timeout was needed to know


async def test_wait_received_is_bounded(peers, autojump_clock):
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory("handshake-ok")])) as rt:
        await rt.ensure_started()
        with pytest.raises(AssertionError, match=r"timed out after 7 s waiting for 2 initialize"):
            await peers.wait_received(0, "initialize", count=2, timeout=7)


async def test_wait_until_fails_naming_what_it_waited_for():
    with pytest.raises(AssertionError, match="timed out after 0.05 s waiting for the moon"):
        await wait_until(lambda: False, "the moon", timeout=0.05, interval=0.01)
    calls = []
    await wait_until(lambda: calls.append(1) or len(calls) >= 3, "three calls", interval=0)
    assert len(calls) == 3
