"""The Runtime's public port (issue #20): what the features, ``serve``, the facades and the CLI
use instead of ``Runtime.conn`` / ``Runtime.threads`` / ``Runtime._publish``.
Memory peers (``tests/_support.MemoryPeers``); what a peer received is the proof of what was sent.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import codexrt
from codexrt import CodexError, RuntimeConfig, RuntimeState
from tests._support import MemoryPeers


def _rt(peers, *scenarios, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


async def test_r_rt_2_a_child_handle_is_bound_to_its_generation(peers):
    async with _rt(peers, "handshake-ok", "handshake-ok") as rt:
        assert not rt.is_connected() and rt.current_child() is None  # lazy: nothing started
        child = await rt.start_child()
        assert child.generation == rt.generation == 1 and child.is_current()
        assert rt.is_connected()
        now = rt.current_child()
        assert now is not None and now.generation == 1 and now.connection is child.connection
        await rt.reset()
        assert not rt.is_connected() and rt.current_child() is None and not child.is_current()
        second = await rt.start_child()
        assert second.generation == 2 and second.is_current() and not child.is_current()


async def test_r_rt_4_kill_child_kills_the_current_child_only(peers):
    async with _rt(peers, "handshake-ok") as rt:
        assert rt.kill_child() is False  # no child: nothing to kill, nothing started
        assert peers.peers == []
        child = await rt.start_child()
        assert rt.kill_child() is True
        with trio.fail_after(5):
            await child.connection.closed.wait()
            await rt.wait_state(RuntimeState.STOPPED, RuntimeState.FAILED)
        assert not rt.is_connected()


async def test_r_d_2_publish_stamps_events_like_the_runtimes_own(peers):
    async with _rt(peers, "handshake-ok", channel_id="ch-9") as rt:
        op = await rt.send("x").wait()
        with rt.subscribe() as events:
            rt.publish("threadTitle", {"title": "t"}, thread_id=op.thread_id)
            ev = events.get_nowait()
            rt.publish("threadTitle", {"title": "u"}, thread_id="th-never-seen")
            unknown = events.get_nowait()
        assert ev is not None and ev.kind == "threadTitle" and ev.payload == {"title": "t"}
        assert (ev.channel_id, ev.runtime_generation, ev.thread_id, ev.root_thread_id) == (
            "ch-9", 1, op.thread_id, op.thread_id)
        # a thread the runtime never saw: its root is not known (R-H-8, issue 31)
        assert unknown is not None and (unknown.thread_id, unknown.root_thread_id) == ("th-never-seen", None)


async def test_r_rt_6_unload_thread_marks_unloaded_and_unsubscribes_once(peers):
    async with _rt(peers, "handshake-ok") as rt:
        op = await rt.send("x").wait()
        assert rt.runtime_snapshot()["sessionCount"] == 1 and not rt.idle_retirable()
        # the fake peer does not know thread/unsubscribe: its error is raised, the thread is unloaded anyway
        with pytest.raises(CodexError):
            await rt.unload_thread(op.thread_id)
        assert rt.runtime_snapshot()["sessionCount"] == 0 and rt.idle_retirable()
        assert await rt.unload_thread(op.thread_id) is None  # not loaded: nothing sent
        assert await rt.unload_thread("never-seen") is None
        sent = [m for m in peers.received(0) if m.get("method") == "thread/unsubscribe"]
        assert [m["params"] for m in sent] == [{"threadId": op.thread_id}]


async def test_r_rt_5_a_start_that_completes_as_reset_cancels_it_is_retired_too(peers, monkeypatch):
    """The race: ``reset()`` cancels a start whose last checkpoint is already behind it, so the
    start completes (READY, a fresh child) anyway. The reset retires that child; a start after
    it is never touched (generation-safe)."""
    from codexrt._connection import Connection

    original = Connection.initialize
    resets: list[trio.Event] = []

    async def initialize(self, *args, **kwargs):
        result = await original(self, *args, **kwargs)
        if not resets:
            done = trio.Event()
            resets.append(done)

            async def reset_now():
                await rt.reset(reason="race")
                done.set()

            nursery.start_soon(reset_now)
            with trio.CancelScope(shield=True):  # reset() cancels this start now, past its last checkpoint
                await trio.testing.wait_all_tasks_blocked()
        return result

    monkeypatch.setattr(Connection, "initialize", initialize)
    async with trio.open_nursery() as nursery:
        async with _rt(peers, "handshake-ok", "handshake-ok") as rt:
            conn = await rt.ensure_started()  # the start finished despite the cancel
            with trio.fail_after(5):
                await resets[0].wait()
            assert conn.closed.is_set() and not rt.is_connected() and rt.state is RuntimeState.STOPPED
            # a later start is a new generation, and no stale reset retires it
            child = await rt.start_child()
            assert child.generation == 2 and child.is_current() and rt.state is RuntimeState.READY


class _HookedLock:
    """The runtime's start lock with a hook right after it is acquired — the instant between a
    start taking the lock and registering itself, where trio's ``Lock.acquire`` yields."""

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.after_acquire = None

    def locked(self) -> bool:
        return self.lock.locked()

    async def __aenter__(self) -> None:
        await self.lock.acquire()
        hook, self.after_acquire = self.after_acquire, None
        if hook is not None:
            await hook()

    async def __aexit__(self, *exc: object) -> None:
        self.lock.release()


async def test_r_rt_5_a_reset_in_the_instant_a_start_takes_the_lock_leaves_no_child(peers, autojump_clock):
    """The race left from the last round: ``reset()`` came while a start held the lock but had
    not registered yet (no start scope to cancel), so the reset waited, the start then made a
    fresh child and the reset — seeing no child when it was called — left it running. Now a
    start that was asked for before the reset never begins: it fails ``CLOSED``
    (``startupCancelled``) and spawns nothing; a later start is untouched."""
    from codexrt import ClosedError

    async with _rt(peers, "handshake-ok", "handshake-ok") as rt:
        rt._start_lock = lock = _HookedLock()
        resets: list[None] = []
        async with trio.open_nursery() as nursery:
            async def reset_now() -> None:
                await rt.reset(reason="race")
                resets.append(None)

            async def hook() -> None:
                nursery.start_soon(reset_now)
                await trio.testing.wait_all_tasks_blocked()  # the reset waits for the lock now

            lock.after_acquire = hook
            with pytest.raises(ClosedError) as info:
                await rt.ensure_started()
            assert info.value.details.get("startupCancelled") is True
        assert resets and peers.peers == []  # no child was ever spawned
        assert not rt.is_connected() and rt.state is RuntimeState.STOPPED
        child = await rt.start_child()  # asked after the reset: starts normally
        assert child.is_current() and rt.state is RuntimeState.READY and len(peers.peers) == 1
