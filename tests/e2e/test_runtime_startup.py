"""Split from ``tests/trio/test_runtime_startup.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import trio
import trio.testing

import codexrt
from codexrt import RuntimeConfig, RuntimeState
from codexrt._sansio._errors import CodexError
from tests._support import fake_server_factory, process_alive


async def test_r_rt_1_cancelled_ensure_started_during_initialize_leaves_no_child():
    """A real child (the stdio fake, ``silent-start``: never answers ``initialize``): cancel
    ``ensure_started`` once the runtime is INITIALIZING — the child is reaped and the runtime
    is STOPPED, not stuck in INITIALIZING."""
    async with codexrt.open_runtime(RuntimeConfig(transports=[fake_server_factory("silent-start")],
                                                  handshake_timeout=60.0)) as rt:
        pid = None
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def start() -> None:
                with scope:
                    await rt.ensure_started()

            nursery.start_soon(start)
            with trio.fail_after(20):
                await rt.wait_state(RuntimeState.INITIALIZING)
                while rt._starting_conn is None:  # the connection object exists right after SPAWNED
                    await trio.testing.wait_all_tasks_blocked()
            pid = rt._starting_conn.pid
            assert isinstance(pid, int) and process_alive(pid)
            scope.cancel()
        assert scope.cancelled_caught
        assert rt.state is RuntimeState.STOPPED and rt.conn is None
        assert not process_alive(pid)


async def test_r_rt_5_reset_during_initializing_reaps_a_real_child():
    """Same as the memory-peer reset test with a real child process: its pid is gone."""
    pids = []
    async with codexrt.open_runtime(RuntimeConfig(transports=[fake_server_factory("silent-start")],
                                                  handshake_timeout=60.0)) as rt:
        async with trio.open_nursery() as nursery:
            errors = []

            async def start() -> None:
                try:
                    await rt.ensure_started()
                except CodexError as exc:
                    errors.append(exc)

            nursery.start_soon(start)
            with trio.fail_after(20):
                await rt.wait_state(RuntimeState.INITIALIZING)
                while rt._starting_conn is None:
                    await trio.testing.wait_all_tasks_blocked()
            pids.append(rt._starting_conn.pid)
            with trio.fail_after(20):
                await rt.reset(reason="test")
            assert rt.state is RuntimeState.STOPPED
        assert [e.code for e in errors] == ["CLOSED"]
        assert not process_alive(pids[0])
