"""Automatic thread titles against the scripted fake peer (R-HLP-3).

Two groups of memory peers: the main runtime's child and the helper children (each title
attempt spawns one). Proofs: what each peer received (``thread/name/set`` on the main child
only when allowed; how many helper children were started) and ``peer.finished`` (every helper
child was closed and awaited). ``autojump_clock`` makes the slow helpers instant.
"""

from __future__ import annotations

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig
from codexrt._runtime._events import CodexEvent
from codexrt._features._helpers import open_title_manager
from tests._support import MemoryPeers

SLOW_TITLE = {
    "name": "slow-title",
    "defaults": True,
    "rules": [{"match": {"method": "turn/start"}, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"sleep": 30},
        {"agent_message": "Slow title"}, {"end_turn": "completed"}]}],
}
TITLE = {"name": "title", "defaults": True, "settings": {"text": "# Login bug fix.", "deltas": 2}}
DOUBLE_STARTED = {
    "name": "double-thread-started",
    "defaults": True,
    "rules": [{"match": {"method": "thread/start"}, "actions": [
        {"default": True}, {"notify": "thread/started", "params": {"thread": "$thread"}}]}],
}


@pytest.fixture
async def main(nursery):
    return MemoryPeers(nursery)


@pytest.fixture
async def helpers(nursery):
    return MemoryPeers(nursery)


def _main_rt(main, scenario="handshake-ok"):
    return codexrt.open_runtime(RuntimeConfig(transports=[main.factory(scenario)]))


def _helper_cfg(helpers, *scenarios):
    return RuntimeConfig(transports=[helpers.sequence(*scenarios)])


def _name_sets(main):
    return [m["params"] for m in main.received(0, "thread/name/set")]


async def test_r_hlp_3_title_generated_on_thread_started_and_saved(main, helpers):
    async with _main_rt(main) as rt:
        with rt.subscribe() as events:
            async with open_title_manager(rt, config=_helper_cfg(helpers, TITLE)) as titles:
                op = rt.send("the login is broken [[please]]")
                await op.wait()
                with trio.fail_after(10):
                    out = await titles.wait_outcome(op.thread_id)
            kinds = [ev for ev in _drain(events) if ev.kind == "threadTitle"]
    assert out.status == "saved" and out.title == "Login bug fix"
    assert _name_sets(main) == [{"threadId": op.thread_id, "name": "Login bug fix"}]
    assert op.thread_id not in titles.manual  # our own thread/name/updated echo is not a manual name
    ask = helpers.received(0, "turn/start")[0]["params"]["input"][0]["text"]
    assert "the login is broken [[please]]" in ask
    assert helpers.received(0, "thread/start")[0]["params"]["ephemeral"] is True
    assert [e.payload["status"] for e in kinds] == ["saved"]
    assert all(p.finished.is_set() for p in helpers.peers)


def _drain(stream):
    out = []
    while (ev := stream.get_nowait()) is not None:
        out.append(ev)
    return out


async def test_r_hlp_3_titles_do_not_wait_for_the_turn(main, helpers, autojump_clock):
    async with _main_rt(main, "hang-turn") as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, TITLE)) as titles:
            op = rt.send("long task")
            with trio.fail_after(10):
                while not titles.outcomes:
                    await titles._changed.wait()
            (tid, out), = titles.outcomes.items()
            assert out.status == "saved" and not op.terminal  # the turn is still running
            rt.abort(op)
            await op.wait()
    assert _name_sets(main) == [{"threadId": tid, "name": "Login bug fix"}]


async def test_r_hlp_3_one_attempt_per_created_thread(main, helpers):
    async with _main_rt(main, DOUBLE_STARTED) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, "turn-start-error", TITLE)) as titles:
            op = rt.send("first")
            await op.wait()
            with trio.fail_after(10):
                out = await titles.wait_outcome(op.thread_id)
            again = rt.send("second", thread_id=op.thread_id)
            await again.wait()
            await titles.wait_idle()
    assert out.status == "failed" and out.error["code"] == "HELPER_FAILED"
    assert len(helpers.peers) == 1  # a duplicate thread/started and a failure never retry
    assert _name_sets(main) == []


async def test_r_hlp_3_manual_name_wins_over_a_pending_title(main, helpers, autojump_clock):
    async with _main_rt(main) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, SLOW_TITLE)) as titles:
            op = rt.send("x")
            await op.wait()
            assert titles.pending() == [op.thread_id]
            titles.name_set_manually(op.thread_id)
            out = await titles.wait_outcome(op.thread_id)
    assert out.status == "cancelled" and out.reason == "manual name"
    assert _name_sets(main) == [] and all(p.finished.is_set() for p in helpers.peers)


async def test_r_hlp_3_a_native_rename_by_someone_else_wins(main, helpers, autojump_clock):
    async with _main_rt(main) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, SLOW_TITLE)) as titles:
            op = rt.send("x")
            await op.wait()
            await rt.conn.call("thread/name/set", {"threadId": op.thread_id, "name": "Mine"})
            out = await titles.wait_outcome(op.thread_id)
    assert out.status == "cancelled" and out.reason == "manual name"
    assert _name_sets(main) == [{"threadId": op.thread_id, "name": "Mine"}]


async def test_r_hlp_3_reset_cancels_pending_titles_and_their_children_are_reaped(main, helpers, autojump_clock):
    async with _main_rt(main) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, "hang-turn")) as titles:
            op = rt.send("x")
            await op.wait()
            assert titles.pending() == [op.thread_id]
            await rt.reset(reason="resetRuntime")
            out = await titles.wait_outcome(op.thread_id)
    assert out.status == "cancelled" and "reset" in out.reason
    assert all(p.finished.is_set() for p in helpers.peers)
    assert _name_sets(main) == []


async def test_r_hlp_3_interrupt_cancels_the_pending_title(main, helpers, autojump_clock):
    async with _main_rt(main, "hang-turn") as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, "hang-turn")) as titles:
            op = rt.send("x")
            with trio.fail_after(10):
                async for ev in op.events():
                    if ev.kind == "turnStarted":
                        break
            rt.abort(op)
            result = await op.wait()
            out = await titles.wait_outcome(op.thread_id)
    assert result.status == "interrupted"
    assert out.status == "cancelled" and out.reason in ("turn interrupted", "send interrupted")
    assert all(p.finished.is_set() for p in helpers.peers)


async def test_r_hlp_3_never_restarts_a_crashed_writer(main, helpers, autojump_clock):
    async with _main_rt(main, "disconnect-mid-turn") as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, SLOW_TITLE)) as titles:
            op = rt.send("x")
            result = await op.wait()
            out = await titles.wait_outcome(op.thread_id)
        assert result.status == "failed"
        assert out.status == "cancelled" and out.reason == "runtime failed"
        assert len(main.peers) == 1 and rt.conn is None  # nobody started the writer again


async def test_r_hlp_3_a_title_that_arrives_after_the_runtime_stopped_is_not_saved(main, helpers):
    """Every metadata write first checks that the main runtime is READY with a live child; a
    retired one is never started again for a title."""
    async with _main_rt(main) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, TITLE)) as titles:
            op = rt.send("x")
            await op.wait()
            with trio.fail_after(10):
                assert (await titles.wait_outcome(op.thread_id)).status == "saved"
            await rt.reset()
            late = await titles._save(op.thread_id, "Late title")
    assert late.status == "skipped" and late.reason == "runtime not ready"
    assert len(main.peers) == 1 and [p["name"] for p in _name_sets(main)] == ["Login bug fix"]


async def test_r_hlp_3_closing_the_manager_cancels_and_waits(main, helpers, autojump_clock):
    async with _main_rt(main) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, "hang-turn")) as titles:
            op = rt.send("x")
            await op.wait()
            assert titles.pending()
        assert titles.outcomes[op.thread_id].status == "cancelled"
        assert all(p.finished.is_set() for p in helpers.peers)


async def test_r_hlp_3_sub_agents_ephemeral_and_textless_threads_get_no_title(main, helpers):
    async with _main_rt(main) as rt:
        async with open_title_manager(rt, config=_helper_cfg(helpers, TITLE)) as titles:
            titles._on_event(CodexEvent("threadStarted", {"thread": {"id": "child", "parentThreadId": "root"}}))
            titles._on_event(CodexEvent("threadStarted", {"thread": {"id": "eph", "ephemeral": True}}))
            titles._on_event(CodexEvent("threadStarted", {"thread": {"id": "other"}}))  # no send created it
            titles._on_event(CodexEvent("threadStarted", {"thread": {"id": "named", "name": "Given"}}))
    assert titles.outcomes["other"].reason == "no user text for this thread"
    assert titles.outcomes["named"].reason == "manual name"
    assert "child" not in titles.outcomes and "eph" not in titles.outcomes
    assert helpers.peers == []
