"""Runtime and operations against the scripted fake peer (R-RT, R-OP, R-SET, R-LC-2).

Memory peers on ``autojump_clock``; the fake peer's ``received`` log is the proof of what was
written (e.g. exactly one ``turn/start`` for one operation).
"""

from __future__ import annotations

import msgspec
import pytest
import trio
import trio.testing

import codexrt
from codexrt import ChildExited, RuntimeConfig, RuntimeState, Settings, ThreadResumeError


def _rt(peers, *scenarios, **kw):
    """A runtime with one startup candidate whose successive launches use ``scenarios``."""
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


def _candidates(peers, *scenarios, **kw):
    """A runtime with one startup candidate per scenario (R-CLI-5 fallback order)."""
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(s) for s in scenarios], **kw))


def _methods(peers, index=-1):
    return [m.get("method") for m in peers.received(index) if "method" in m]


async def test_r_rt_1_lifecycle_is_observable_and_lazy(peers):
    async with _rt(peers, "handshake-ok") as rt:
        assert rt.state is RuntimeState.STOPPED and peers.peers == []  # nothing spawned yet
        with rt.subscribe() as events:
            await rt.ensure_started()
            assert rt.state is RuntimeState.READY
            changes = [(e.payload["from"], e.payload["to"]) for e in events.statistics() and _drain(events)
                       if e.kind == "runtimeStateChanged"]
        assert changes == [("STOPPED", "STARTING"), ("STARTING", "INITIALIZING"), ("INITIALIZING", "READY")]
    assert rt.state is RuntimeState.STOPPED


def _drain(stream):
    out = []
    while (ev := stream.get_nowait()) is not None:
        out.append(ev)
    return out


async def test_r_op_7_send_streams_and_carries_client_message_id(peers):
    async with _rt(peers, "handshake-ok") as rt:
        op = rt.send("hello", client_message_id="client-msg-1")
        kinds = [ev.kind async for ev in op.events()]
        result = await op.wait()
    assert result.status == "completed" and result.final_text == "Hello from the fake peer."
    assert kinds[0] == "operationQueued" and kinds[-1] == "operationDone"
    assert "itemUpdated" in kinds and "turnStarted" in kinds
    start = peers.received(0, "turn/start")[0]["params"]
    assert start["clientUserMessageId"] == "client-msg-1"
    assert start["input"][0] == {"type": "text", "text": "hello", "text_elements": []}


async def test_r_op_3_binding_when_turn_started_precedes_the_response(peers):
    async with _rt(peers, "early-notification") as rt:
        op = rt.send("x")
        result = await op.wait()
        assert result.status == "completed" and op.turn_id == result.turn_id


async def test_r_op_1_fifo_order_under_concurrent_submits(peers):
    async with _rt(peers, "handshake-ok") as rt:
        first = rt.send("one")
        await first.wait()
        ops = [rt.send(f"msg {i}", thread_id=first.thread_id) for i in range(5)]
        results = [await op.wait() for op in ops]
    assert all(r.status == "completed" for r in results)
    texts = [m["params"]["input"][0]["text"] for m in peers.received(0, "turn/start")]
    assert texts == ["one"] + [f"msg {i}" for i in range(5)]


async def test_r_op_4_duplicate_terminal_settles_once(peers):
    async with _rt(peers, "duplicate-terminal") as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            await op.wait()
            second = rt.send("y", thread_id=op.thread_id)
            await second.wait()
            evs = _drain(events)
    done = [e for e in evs if e.kind == "operationDone"]
    assert [e.client_operation_id for e in done] == [op.id, second.id]
    assert any(e.kind == "orphanTurnTerminal" for e in evs)


async def test_r_op_8_turn_start_error_is_one_failed_terminal(peers):
    async with _rt(peers, "turn-start-error") as rt:
        op = rt.send("x", client_message_id="cm-err")
        result = await op.wait()
        assert result.status == "failed" and result.error.code == "RPC_ERROR"
        assert "refused" in result.error.message
        # the runtime is fine for the next one
        nxt = rt.send("y", thread_id=op.thread_id)
        assert (await nxt.wait()).status == "failed"
    assert len(peers.received(0, "turn/start")) == 2


RESUMING = {"name": "resuming", "defaults": True, "settings": {"resume_any_uuid": True}}


async def test_r_rt_4_disconnect_mid_turn_never_resends_and_resumes_next(peers):
    async with _rt(peers, "disconnect-mid-turn", RESUMING) as rt:
        op = rt.send("lost turn")
        queued = rt.send("queued behind", thread_id=None)
        result = await op.wait()
        assert result.status == "failed" and isinstance(result.error, ChildExited)
        assert result.error.returncode == 1
        assert (await queued.wait()).status == "failed"  # the queue is cleared (R-RT-4)
        assert rt.state is RuntimeState.FAILED
        assert rt.threads[op.thread_id].loaded_generation is None  # unloaded, id kept
        nxt = rt.send("next", thread_id=op.thread_id)
        assert (await nxt.wait()).status == "completed"
        assert rt.generation == 2
    assert len(peers.received(0, "turn/start")) == 1
    assert _methods(peers, 1) == ["initialize", "initialized", "thread/resume", "turn/start"]
    assert [m["params"]["input"][0]["text"] for m in peers.received(1, "turn/start")] == ["next"]


async def test_r_rt_2_old_generation_events_do_not_reach_the_new_one(peers):
    """After a crash and restart, anything the old generation's connection still delivers
    (a terminal, its close event) is dropped: it never settles or faults the new one."""
    async with _rt(peers, "disconnect-mid-turn", {**RESUMING, "rules": [
            {"match": {"method": "turn/start"}, "actions": [{"hang_turn": True}]}]}) as rt:
        lost = rt.send("lost")
        await lost.wait()
        op = rt.send("next", thread_id=lost.thread_id)
        async for ev in op.events():
            if ev.kind == "turnStarted":
                break
        assert rt.generation == 2
        old_terminal = codexrt._sansio._wire.Notification("turn/completed", msgspec.json.encode(
            {"threadId": op.thread_id, "turn": {"id": op.turn_id, "status": "completed"}}))
        rt._on_conn_event(1, old_terminal)
        rt._on_conn_event(1, codexrt._connection.ConnectionClosed(ChildExited(1, None), None))
        assert not op.terminal and rt.state is RuntimeState.READY
        rt.abort(op)
        assert (await op.wait()).status == "interrupted"


async def test_r_op_5_abort_queued_makes_zero_rpcs(peers):
    async with _rt(peers, "hang-turn") as rt:
        running = rt.send("hang")
        queued = rt.send("later")
        async for ev in running.events():
            if ev.kind == "turnStarted":
                break
        assert rt.abort(queued) == "cancelledQueued"
        assert (await queued.wait()).status == "cancelled"
        assert rt.abort(running) == "interruptSent"
        assert (await running.wait()).status == "interrupted"
    assert len(peers.received(0, "turn/start")) == 1
    assert all(m["params"]["input"][0]["text"] != "later" for m in peers.received(0, "turn/start"))


async def test_r_op_5_interrupt_known_turn(peers):
    async with _rt(peers, "hang-turn") as rt:
        op = rt.send("hang")
        async for ev in op.events():
            if ev.kind == "turnStarted":
                break
        assert op.phase.value == "nativeTurnKnown"
        assert rt.abort(op) == "interruptSent"
        assert rt.abort(op) == "interruptSent"  # a second request does not restart the budget
        result = await op.wait()
    assert result.status == "interrupted"
    assert len(peers.received(0, "turn/interrupt")) == 2


async def test_r_op_5_cancel_intent_before_bootstrap_writes_no_turn(peers, autojump_clock):
    scenario = {"name": "slow-thread-start", "defaults": True,
                "rules": [{"match": {"method": "thread/start"}, "actions": [{"sleep": 3}, {"default": True}]}]}
    async with _rt(peers, scenario) as rt:
        op = rt.send("x")
        # condition, not a fixed delay: thread/start is with the peer, which answers 3 s later
        await peers.wait_received(0, "thread/start")
        assert op.phase.value == "notWritten"
        assert rt.abort(op) == "cancelIntent"
        result = await op.wait()
        assert result.status == "cancelled"
    assert peers.received(0, "turn/start") == []
    assert len(peers.received(0, "thread/start")) == 1  # the thread may still be created


async def test_r_op_5_stop_budget_exhausted_kills_and_fails_once(peers, autojump_clock):
    scenario = {"name": "deaf-interrupt", "defaults": True,
                "rules": [{"match": {"method": "turn/start"}, "actions": [{"hang_turn": True}]},
                          {"match": {"method": "turn/interrupt"}, "actions": []}]}
    async with _rt(peers, scenario, stop_budget=10, rpc_timeout=60) as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            async for ev in op.events():
                if ev.kind == "turnStarted":
                    break
            t0 = trio.current_time()
            rt.abort(op)
            result = await op.wait()
            elapsed = trio.current_time() - t0
            kinds = [e.kind for e in _drain(events)]
    assert result.status == "failed"
    assert 10 <= elapsed < 11
    assert "runtimeUnhealthy" in kinds


async def test_r_op_6_child_thread_terminal_does_not_settle_parent(peers):
    async with _rt(peers, "hang-turn") as rt:
        op = rt.send("x")
        async for ev in op.events():
            if ev.kind == "turnStarted":
                break
        # a sub-agent's terminal arrives on another thread
        rt._on_notification(codexrt._sansio._wire.Notification(
            "turn/completed", __import__("msgspec").json.encode(
                {"threadId": "child-thread", "turn": {"id": op.turn_id, "status": "completed"}})))
        assert not op.terminal
        rt.abort(op)
        assert (await op.wait()).status == "interrupted"


async def test_r_set_1_2_send_freezes_desired_settings_inline(peers):
    async with _rt(peers, "handshake-ok") as rt:
        rev = rt.update_settings(model="m-1", approval_policy="untrusted", sandbox="workspace-write")
        assert rev == 1
        op = rt.send("x")
        rt.update_settings(model="m-2")  # after the freeze? no: frozen at dispatch — wait first
        await op.wait()
    start = peers.received(0, "thread/start")[0]["params"]
    assert start["sandbox"] == "workspace-write"  # kebab-case on thread/start (R-WIRE-11)
    turn = peers.received(0, "turn/start")[0]["params"]
    assert turn["sandboxPolicy"] == {"type": "workspaceWrite"}  # camelCase object on turn/start
    assert turn["approvalPolicy"] == "untrusted"


async def test_r_set_2_compact_waits_for_effective_settings(peers, autojump_clock):
    async with _rt(peers, "settings-gate") as rt:
        first = rt.send("x")
        await first.wait()
        rt.update_settings(model="m-2")
        t0 = trio.current_time()
        op = rt.compact(first.thread_id)
        await peers.wait_received(0, "thread/compact/start")
        assert trio.current_time() - t0 >= 2  # not before thread/settings/updated (2 s later)
        methods = _methods(peers, 0)
        assert methods.index("thread/settings/update") < methods.index("thread/compact/start")
        rt.abort(op)


async def test_r_set_2_compact_unconfirmed_does_not_start(peers, autojump_clock):
    scenario = {"name": "no-settings-updated", "defaults": True,
                "rules": [{"match": {"method": "thread/settings/update"}, "actions": [{"respond": {}}]}]}
    async with _rt(peers, scenario, settings_confirm_timeout=5) as rt:
        first = rt.send("x")
        await first.wait()
        rt.update_settings(model="m-2")
        result = await rt.compact(first.thread_id).wait()
    assert result.status == "failed" and result.error.code == "SETTINGS_UNCONFIRMED"
    assert peers.received(0, "thread/compact/start") == []


async def test_resume_unknown_thread_is_a_typed_error(peers):
    scenario = {"name": "no-rollout", "defaults": True, "rules": [
        {"match": {"method": "thread/resume"}, "actions": [{"error": {
            "code": -32600, "message": "no rollout found for thread id 00000000-0000-0000-0000-000000000000"}}]}]}
    async with _rt(peers, scenario) as rt:
        result = await rt.send("x", thread_id="00000000-0000-0000-0000-000000000000").wait()
    assert result.status == "failed" and isinstance(result.error, ThreadResumeError)
    assert result.error.code == "THREAD_NOT_FOUND" and "hint" in result.error.details


async def test_r_rt_5_concurrent_resets_share_one_retirement(peers):
    async with _rt(peers, "handshake-ok", "handshake-ok") as rt:
        await rt.ensure_started()
        with rt.subscribe() as events:
            async with trio.open_nursery() as n:
                for _ in range(3):
                    n.start_soon(rt.reset)
            resets = [e for e in _drain(events) if e.kind == "runtimeReset"]
        assert len(resets) == 1 and rt.state is RuntimeState.STOPPED
        await rt.ensure_started()
        assert rt.generation == 2 and len(peers.peers) == 2


async def test_r_lc_2_rebuild_deferred_while_a_turn_is_active(peers):
    async with _rt(peers, "hang-turn", RESUMING) as rt:
        op = rt.send("x")
        async for ev in op.events():
            if ev.kind == "turnStarted":
                break
        assert rt.request_rebuild(root_thread_id=op.thread_id) == "deferred"
        assert rt.generation == 1
        rt.abort(op)
        await op.wait()
        with trio.fail_after(10):  # the rebuild and its cold resume run after the terminal
            while rt.generation < 2 or rt.state is not RuntimeState.READY or rt.busy:
                await rt.wait_state(RuntimeState.READY)
                await trio.testing.wait_all_tasks_blocked()
    assert _methods(peers, 1)[:3] == ["initialize", "initialized", "thread/resume"]


async def test_r_cli_5_startup_fallback_to_next_candidate(peers):
    async with _candidates(peers, "crash-before-ready", "handshake-ok") as rt:
        with rt.subscribe() as events:
            result = await rt.send("x").wait()
            kinds = [e.kind for e in _drain(events)]
    assert result.status == "completed"
    assert "runtimeFallback" in kinds
    assert _methods(peers, 0) == ["initialize"]  # no business RPC to the failed candidate


async def test_r_cli_5_all_candidates_fail(peers):
    async with _candidates(peers, "crash-before-ready", "initialize-refusal") as rt:
        result = await rt.send("x").wait()
    assert result.status == "failed" and result.error.code == "CODEX_CLI_UNAVAILABLE"
    assert result.error.message.startswith("codex app-server exited")
    assert len(result.error.details["codexCliUnavailable"]["attempts"]) == 2


async def test_r_int_1_interaction_answer_rules(peers):
    async with _rt(peers, "reverse-approval") as rt:
        op = rt.send("x")
        inter = None
        async for ev in op.events():
            if ev.kind == "interactionRequested":
                inter = rt.interactions[ev.payload["interactionKey"]]
                break
        with pytest.raises(codexrt.InteractionError) as info:
            await rt.respond_interaction(inter.key, "wrong-token", {"decision": "accept"})
        assert info.value.code == "INTERACTION_STALE_TOKEN"
        with pytest.raises(codexrt.InteractionError):
            await inter.respond({"decision": "yes please"})
        await inter.decline()
        with pytest.raises(codexrt.InteractionError) as info:
            await inter.accept()
        assert info.value.code == "INTERACTION_DUPLICATE"
        assert (await op.wait()).status == "completed"
    replies = [m for m in peers.received(0) if "result" in m and "method" not in m]
    assert [r["result"] for r in replies] == [{"decision": "decline"}]


async def test_no_approval_is_granted_by_default(peers, autojump_clock):
    """Nobody answers: after a long wait the request is still pending, nothing was replied."""
    async with _rt(peers, "reverse-approval") as rt:
        op = rt.send("x")
        await trio.sleep(3600)
        assert not op.terminal and rt.pending_interactions()
        rt.abort(op)
        await op.wait()
    assert [m for m in peers.received(0) if "result" in m and "method" not in m] == []


async def test_r_rt_6_snapshot(peers):
    async with _rt(peers, "handshake-ok") as rt:
        op = rt.send("x")
        await op.wait()
        snap = rt.runtime_snapshot()
        assert snap["state"] == "READY" and snap["busy"] is False and snap["sessionCount"] == 1
        assert snap["runtimeGeneration"] == 1 and snap["queuedOperations"] == 0


async def test_settings_validation_errors_are_typed():
    with pytest.raises(codexrt.ConfigError):
        Settings(sandbox="workspaceWrite")
    with pytest.raises(codexrt.ConfigError):
        Settings.from_wire({"sandbox": "read-only", "bogus": 1})
    assert Settings.from_wire({"sandboxMode": "read-only"}).sandbox == "read-only"


async def test_r_lc_3_inactive_mode_spawns_nothing(monkeypatch):
    async def no_spawn(*a, **k):
        raise AssertionError("inactive mode must not spawn")

    monkeypatch.setattr(codexrt._runtime._config, "spawn_process_transport", no_spawn)
    async with codexrt.open_runtime(access_mode="inactive") as rt:
        result = await rt.send("x").wait()
        assert result.error.code == "ACCESS_INACTIVE" and rt.state is RuntimeState.STOPPED


async def test_r_cli_3_stale_explicit_override_is_an_error_not_a_skip(tmp_path):
    async with codexrt.open_runtime(codex_bin=str(tmp_path / "gone" / "codex")) as rt:
        result = await rt.send("x").wait()
    assert result.error.code == "CODEX_CLI_OVERRIDE_INVALID"


async def test_r_lc_1_2_launch_fingerprint_and_rebuild(peers):
    async with _rt(peers, "handshake-ok", RESUMING) as rt:
        first = await rt.send("x").wait()
        fp = rt.launch_fingerprint()
        assert rt.update_launch(app_server_args=("app-server",)) == "unchanged"
        rt.update_settings(model="other")  # settings are not part of the fingerprint
        assert rt.launch_fingerprint() == fp
        assert rt.update_launch(codex_home="/tmp/other-home") == "immediate"
        while rt.generation < 2 or rt.busy or rt.state is not RuntimeState.READY:
            await rt.wait_state(RuntimeState.READY, RuntimeState.STOPPED)
            await trio.testing.wait_all_tasks_blocked()
    assert _methods(peers, 1)[:3] == ["initialize", "initialized", "thread/resume"]
    assert peers.received(1, "thread/resume")[0]["params"]["threadId"] == first.thread_id


def test_r_lc_1_secrets_enter_the_fingerprint_only_as_hashes():
    import attrs as _attrs

    async def main():
        async with codexrt.open_runtime(env={"OPENAI_API_KEY": "sk-very-secret-value"}) as rt:
            fp1 = rt.launch_fingerprint()
            rt.config = _attrs.evolve(rt.config, env={"OPENAI_API_KEY": "sk-other-secret-value"})
            assert rt.launch_fingerprint() != fp1
            assert "sk-very-secret-value" not in repr(rt.config)

    trio.run(main)


async def test_r_rt_6_idle_reaper_keeps_a_runtime_with_a_loaded_session(peers, autojump_clock):
    async with _rt(peers, "handshake-ok", idle_timeout=60) as rt:
        op = await rt.send("x").wait()
        await trio.sleep(120)
        assert rt.state is RuntimeState.READY  # sessionCount == 1
        await rt.release_thread(op.thread_id)
        assert rt.runtime_snapshot()["sessionCount"] == 0
        await trio.sleep(61.5)
        assert rt.state is RuntimeState.STOPPED


async def test_r_ctx_6_cancel_during_the_probe_creates_no_thread_and_no_turn(peers):
    class SlowProbe:
        def __init__(self):
            self.entered = trio.Event()

        async def decide(self, fragments, **kw):
            self.entered.set()
            await trio.sleep_forever()  # cancelled only through the operation's abort path

    async with _rt(peers, "handshake-ok") as rt:
        rt.probe = probe = SlowProbe()
        op = rt.send("x", additional_context={"ide_context": {"kind": "application", "value": "a.py"}})
        await probe.entered.wait()
        assert rt.abort(op) == "cancelIntent"
        result = await op.wait()  # the abort cancels the probe itself: no budget wait
        assert result.status == "cancelled" and "probe" in result.error.message
    assert _methods(peers, 0) == ["initialize", "initialized"]  # no thread/start, no turn/start


async def _settled(rt, generation):
    """Wait (bounded) until the runtime runs ``generation``, is READY and has nothing to do."""
    with trio.fail_after(30):
        while rt.generation < generation or rt.busy or rt.state is not RuntimeState.READY:
            await rt.wait_state(RuntimeState.READY, RuntimeState.STOPPED)
            await trio.testing.wait_all_tasks_blocked()


async def test_r_lc_2_idle_change_rebuilds_at_once_and_cold_resumes_the_last_root(peers, autojump_clock):
    """R-LC-2, R-SET-3: idle → rebuilt at once; the root thread of the channel's *last* operation
    is cold-resumed on the new child with the current developerInstructions; the host is told
    (threadResumed cold, sessionGrantsReset, runtimeReset)."""
    async with _rt(peers, "handshake-ok", RESUMING, RESUMING) as rt:
        first = await rt.send("one").wait()
        second = await rt.send("two").wait()  # a second thread: the last operation's root
        assert first.thread_id != second.thread_id
        rt.update_settings(developer_instructions="be brief")
        with rt.subscribe() as events:
            assert rt.update_launch(codex_home="/tmp/launch-home-a") == "immediate"
            await _settled(rt, 2)
            kinds = [(e.kind, e.payload) for e in _drain(events)]
    resumes = peers.received(1, "thread/resume")
    assert [r["params"]["threadId"] for r in resumes] == [second.thread_id]
    assert resumes[0]["params"]["developerInstructions"] == "be brief"
    names = [k for k, _ in kinds]
    assert "runtimeReset" in names and "sessionGrantsReset" in names
    assert ("threadResumed", {"cold": True, "thread": second.thread_id}) in [(k, p) for k, p in kinds]
    assert names.index("runtimeReset") < names.index("threadResumed")


async def test_r_lc_2_change_during_a_turn_applies_before_the_next_queued_operation(peers, autojump_clock):
    """R-LC-2: a change during an active operation waits for its terminal only; the operation
    queued behind it runs on the new child (after the cold resume), never on the old one."""
    async with _rt(peers, "hang-turn", RESUMING) as rt:
        op = rt.send("x")
        async for ev in op.events():
            if ev.kind == "turnStarted":
                break
        queued = rt.send("next", thread_id=op.thread_id)
        assert rt.update_launch(codex_home="/tmp/launch-home-b") == "deferred"
        assert rt.generation == 1
        rt.abort(op)
        await op.wait()
        with trio.fail_after(30):
            result = await queued.wait()
    assert result.status == "completed", result
    assert len(peers.received(0, "turn/start")) == 1  # the queued send never reached the old child
    assert _methods(peers, 1)[:4] == ["initialize", "initialized", "thread/resume", "turn/start"]
    assert queued.generation == 2


async def test_r_lc_2_unchanged_and_rpc_settings_do_not_rebuild(peers, autojump_clock):
    async with _rt(peers, "handshake-ok") as rt:
        await rt.send("x").wait()
        fp = rt.launch_fingerprint()
        rt.update_settings(model="other-model", effort="high", sandbox="read-only")
        assert rt.update_launch(idle_timeout=None, cwd=None) == "unchanged"
        assert rt.launch_fingerprint() == fp and rt.generation == 1 and rt.state is RuntimeState.READY


async def test_r_lc_3_invalid_managed_change_is_refused_and_changes_nothing(peers):
    async with _rt(peers, "handshake-ok") as rt:
        fp = rt.launch_fingerprint()
        with pytest.raises(codexrt.ConfigError):
            rt.update_launch(access_mode="managed", provider={"baseUrl": "http://127.0.0.1:9/v1"})
        assert rt.config.access_mode == "cli_login" and rt.launch_fingerprint() == fp
