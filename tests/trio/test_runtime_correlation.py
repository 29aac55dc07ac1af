"""Exact correlation (issue 24): late responses tied to their operation (R-WIRE-4), sub-agent
relations (R-H-8, R-D-1, R-OP-6), the settings gate keyed by revision (R-SET-2).

Memory peers on ``autojump_clock``; the fake peer's ``received`` log is the proof of what was written.
"""

from __future__ import annotations

import trio
import trio.testing

import codexrt
from codexrt import RuntimeConfig
from tests._support import schema_problem


def _schema_problem(kind, payload):
    """The shipped schema's payload shape for ``kind`` (``$defs.eventPayloads``)."""
    return schema_problem(payload, f"eventPayloads/properties/{kind}")


def _rt(peers, *scenarios, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


LATE_TURN_START = {"name": "late-turn-start-no-started", "defaults": True, "rules": [
    # turn/start answered after 40 s (budget 30 s) and no turn/started ever: only the late
    # response can name the turn.
    {"match": {"method": "turn/start"}, "actions": [{"sleep": 40}, {"turn_response": True}]},
    {"match": {"method": "turn/interrupt"}, "actions": [{"respond": {}}, {"end_turn": "interrupted"}]},
]}


async def test_r_wire_4_late_turn_start_names_its_operation_and_binds_the_turn(peers, autojump_clock):
    async with _rt(peers, LATE_TURN_START, rpc_timeout=30) as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            seen = []
            async for ev in events:
                seen.append(ev)
                if ev.kind == "lateResponse":
                    break
            late = seen[-1]
            (start,) = peers.received(0, "turn/start")
            assert late.client_operation_id == op.id
            assert late.payload == {"method": "turn/start", "requestId": start["id"],
                                    "phase": "writtenUnconfirmed", "ok": True}
            assert _schema_problem("lateResponse", late.payload) is None
            timeout_err = next(e for e in seen if e.kind == "error" and e.client_operation_id == op.id)
            assert timeout_err.payload["requestId"] == start["id"] and timeout_err.payload["method"] == "turn/start"
            async for ev in events:
                if ev.kind == "operationAcked" and ev.client_operation_id == op.id:
                    break
            assert ev.payload["late"] is True
            assert op.turn_id == ev.payload["turn"]["id"] and not op.terminal
            rt.abort(op)
            result = await op.wait()
    assert result.status == "interrupted" and result.turn_id == op.turn_id
    interrupts = peers.received(0, "turn/interrupt")
    assert [m["params"]["turnId"] for m in interrupts] == [op.turn_id]
    assert len(peers.received(0, "turn/start")) == 1  # never re-sent (R-OP-7)


STARTED_THEN_LATE = {"name": "started-then-late-response", "defaults": True, "rules": [
    {"match": {"method": "turn/start"}, "actions": [
        {"turn_started": True}, {"sleep": 40}, {"turn_response": True},
        {"agent_message": "done"}, {"end_turn": "completed"}]},
]}


async def test_r_wire_4_late_turn_start_never_rebinds_a_bound_turn(peers, autojump_clock):
    """turn/started bound the turn first: the late result is reported with its operation,
    nothing is bound twice and no second acknowledgement is made."""
    async with _rt(peers, STARTED_THEN_LATE, rpc_timeout=30) as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            result = await op.wait()
            got = [e async for e in _until_empty(events)]
    assert result.status == "completed"
    (late,) = [e for e in got if e.kind == "lateResponse"]
    assert late.client_operation_id == op.id and late.payload["method"] == "turn/start"
    assert not [e for e in got if e.kind == "operationAcked"]
    assert [e.turn_id for e in got if e.kind == "turnStarted"] == [result.turn_id]


async def _until_empty(stream):
    while (ev := stream.get_nowait()) is not None:
        yield ev


# -- sub-agent relations (R-H-8, R-D-1, R-OP-6) --------------------------------------------------
# Shapes recorded from the real 0.171.0 server (docs/real-server-notes.md, "Sub-agents"): the
# child is announced by the parent's collabAgentToolCall item, never by thread/started; its own
# notifications carry its threadId; thread/read of it names the parent in parentThreadId.

ROOT_ID = "11111111-1111-4111-8111-111111111111"
CHILD_ID = "22222222-2222-4222-8222-222222222222"
CHILD_TURN = "33333333-3333-4333-8333-333333333333"


def _spawn_item():
    return {"item": {"type": "collabAgentToolCall", "id": "call_spawn_1", "tool": "spawnAgent",
                     "status": "completed", "senderThreadId": ROOT_ID, "receiverThreadIds": [CHILD_ID],
                     "prompt": "child task", "agentsStates": {CHILD_ID: {"status": "pendingInit", "message": None}}}}


def _child_started():
    return [{"notify": "thread/status/changed", "params": {"threadId": CHILD_ID, "status": {"type": "active", "activeFlags": []}}},
            {"notify": "turn/started", "params": {"threadId": CHILD_ID, "turn": {
                "id": CHILD_TURN, "rootTurnId": "$turn_id", "status": "inProgress", "items": []}}}]


def _child_completed(status="completed"):
    return [{"notify": "thread/status/changed", "params": {"threadId": CHILD_ID, "status": {"type": "idle"}}},
            {"notify": "turn/completed", "params": {"threadId": CHILD_ID, "turn": {
                "id": CHILD_TURN, "status": status, "items": []}}}]


def _read(thread_id, parent, status=None, sleep=None):
    thread = {"id": thread_id, "parentThreadId": parent, "threadSource": "subagent" if parent else None}
    if status is not None:
        thread["status"] = {"type": status}
    return {"match": {"method": "thread/read", "params": {"threadId": thread_id}},
            "actions": ([{"sleep": sleep}] if sleep else []) + [{"respond": {"thread": thread}}]}


def _spawn_scenario(turn_actions, *, child_status="active", extra_rules=(), read_sleep=None):
    return {"name": "spawn-subagent", "defaults": True, "settings": {"known_threads": [ROOT_ID]}, "rules": [
        *extra_rules,
        {"match": {"method": "turn/start", "nth": 1}, "actions": turn_actions},
        _read(CHILD_ID, ROOT_ID, child_status, read_sleep),
        _read(ROOT_ID, None, "idle"),
        {"match": {"method": "turn/interrupt", "params": {"threadId": CHILD_ID}},
         "actions": [{"respond": {}}, *_child_completed("interrupted")]},
        {"match": {"method": "thread/unsubscribe"}, "actions": [{"respond": {"status": "unsubscribed"}}]},
    ]}


PARENT_FINISHES_CHILD_RUNS = [
    {"turn_response": True}, {"turn_started": True}, {"item": _spawn_item()["item"]}, *_child_started(),
    {"agent_message": "parent done"}, {"end_turn": "completed"}]


async def _collect(events, until):
    got = []
    async for ev in events:
        got.append(ev)
        if until(ev):
            return got
    return got


async def test_r_h_8_verified_child_relation_and_parent_finish_leaves_child_active(peers, autojump_clock):
    async with _rt(peers, _spawn_scenario(PARENT_FINISHES_CHILD_RUNS)) as rt:
        with rt.subscribe() as events:
            op = rt.send("spawn", thread_id=ROOT_ID)
            result = await op.wait()
            got = await _collect(events, lambda e: e.kind == "threadRelationVerified")
        assert result.status == "completed" and result.thread_id == ROOT_ID
        rel = got[-1]
        assert rel.payload == {"rootThreadId": ROOT_ID, "threadId": CHILD_ID, "parentThreadId": ROOT_ID}
        assert rel.thread_id == CHILD_ID and rel.root_thread_id == ROOT_ID
        assert _schema_problem("threadRelationVerified", rel.payload) is None
        assert _schema_problem("threadRelationVerified", {"threadId": CHILD_ID}) is not None
        # the child's turn was never owned by the parent's operation (R-OP-6)
        child_started = [e for e in got if e.kind == "turnStarted" and e.thread_id == CHILD_ID]
        assert child_started and all(e.client_operation_id is None for e in child_started)
        # its turn names the parent's turn as rootTurnId, yet it is the child's own turn (it
        # runs on another thread: not a nested turn of the parent's operation)
        assert [e.turn_id for e in child_started] == [CHILD_TURN]
        # the parent finished; the child is still active, not shown complete (R-H-8)
        assert rt.relations(ROOT_ID) == {CHILD_ID: {"parentThreadId": ROOT_ID, "depth": 1, "status": "active"}}
        # verification only read: no resume/turn on the child (read-only history takes no writer)
        assert [m["params"]["threadId"] for m in peers.received(0, "thread/resume")] == [ROOT_ID]
        assert {m["params"]["threadId"] for m in peers.received(0, "turn/start")} == {ROOT_ID}


def _child_delta(text):
    return {"notify": "item/agentMessage/delta", "params": {"threadId": CHILD_ID, "turnId": CHILD_TURN,
                                                            "itemId": "child_msg", "delta": text}}


async def test_r_h_8_child_events_carry_null_root_until_verified_then_the_root_deltas_too(peers, autojump_clock):
    """Issue 31: a sub-agent's ``itemUpdated`` carried ``rootThreadId: null`` after
    ``threadRelationVerified`` while its other events carried the root, and before it its
    events carried the child's own id. Every event of the child — deltas included — has
    ``rootThreadId`` null until the relation is verified, the root after (docs/daemon-protocol.md)."""
    child_item = {"type": "agentMessage", "id": "child_msg", "text": "early late"}
    actions = [{"turn_response": True}, {"turn_started": True}, {"item": _spawn_item()["item"]}, *_child_started(),
               _child_delta("early "),
               {"notify": "item/started", "params": {"threadId": CHILD_ID, "turnId": CHILD_TURN,
                                                      "item": {**child_item, "text": ""}}},
               {"sleep": 3}, _child_delta("late"),
               {"notify": "item/completed", "params": {"threadId": CHILD_ID, "turnId": CHILD_TURN, "item": child_item}},
               {"agent_message": "parent done"}, {"end_turn": "completed"}]
    async with _rt(peers, _spawn_scenario(actions, read_sleep=1)) as rt:
        with rt.subscribe() as events:
            await rt.send("spawn", thread_id=ROOT_ID).wait()
            got = [e async for e in _until_empty(events)]
    child = [e for e in got if e.thread_id == CHILD_ID]
    verified = next(i for i, e in enumerate(child) if e.kind == "threadRelationVerified")
    before, after = child[:verified], child[verified + 1:]
    assert {e.kind for e in before} >= {"turnStarted", "itemUpdated", "itemStarted"}
    assert {e.kind for e in after} >= {"itemUpdated", "itemCompleted"}
    assert all(e.root_thread_id is None for e in before), [(e.kind, e.root_thread_id) for e in before]
    assert all(e.root_thread_id == ROOT_ID for e in after), [(e.kind, e.root_thread_id) for e in after]
    assert [e.payload["delta"] for e in after if e.kind == "itemUpdated"] == ["late"]


async def test_r_op_6_child_terminal_neither_settles_parent_nor_frees_the_fifo(peers, autojump_clock):
    actions = [{"hang_turn": True}, {"item": _spawn_item()["item"]}, *_child_started(), *_child_completed()]
    async with _rt(peers, _spawn_scenario(actions, child_status="idle")) as rt:
        with rt.subscribe() as events:
            op = rt.send("spawn", thread_id=ROOT_ID)
            second = rt.send("next", thread_id=ROOT_ID)
            got = await _collect(events, lambda e: e.kind == "threadRelationVerified")
            await trio.sleep(60)  # virtual: anything the child's terminal could have freed runs now
        orphan = [e for e in got if e.kind == "orphanTurnTerminal"]
        assert orphan and orphan[0].thread_id == CHILD_ID and orphan[0].client_operation_id is None
        assert not op.terminal and not second.terminal
        assert len(peers.received(0, "turn/start")) == 1  # the FIFO still holds the second send
        assert rt.relations(ROOT_ID)[CHILD_ID]["status"] == "idle"
        rt.abort(second)
        rt.abort(op)
        assert (await op.wait()).status == "interrupted"


async def test_r_d_1_release_root_drains_children_first(peers, autojump_clock):
    async with _rt(peers, _spawn_scenario(PARENT_FINISHES_CHILD_RUNS)) as rt:
        with rt.subscribe() as events:
            await rt.send("spawn", thread_id=ROOT_ID).wait()
            await _collect(events, lambda e: e.kind == "threadRelationVerified")
        await rt.release_thread(ROOT_ID)
        calls = [(m["method"], m["params"].get("threadId")) for m in peers.received(0)
                 if m.get("method") in ("turn/interrupt", "thread/unsubscribe")]
        assert calls == [("turn/interrupt", CHILD_ID), ("thread/unsubscribe", CHILD_ID),
                         ("thread/unsubscribe", ROOT_ID)]
        assert rt.relations(ROOT_ID) == {}
        assert rt.runtime_snapshot()["sessionCount"] == 0


async def test_r_h_8_unknown_child_status_means_keep_querying(peers, autojump_clock):
    """No status notification for the child and thread/read without a status: release asks
    again (bounded) instead of guessing; it proceeds once the server says idle."""
    actions = [{"turn_response": True}, {"turn_started": True}, {"item": _spawn_item()["item"]},
               {"agent_message": "parent done"}, {"end_turn": "completed"}]
    idle_on_5th = {"match": {"method": "thread/read", "nth": 5},
                   "actions": [{"respond": {"thread": {"id": CHILD_ID, "parentThreadId": ROOT_ID,
                                                       "status": {"type": "idle"}}}}]}
    async with _rt(peers, _spawn_scenario(actions, child_status=None, extra_rules=[idle_on_5th])) as rt:
        with rt.subscribe() as events:
            await rt.send("spawn", thread_id=ROOT_ID).wait()
            await _collect(events, lambda e: e.kind == "threadRelationVerified")
        assert rt.relations(ROOT_ID)[CHILD_ID]["status"] is None
        await rt.release_thread(ROOT_ID)
        reads = [m["params"]["threadId"] for m in peers.received(0, "thread/read")]
        assert reads == [CHILD_ID, ROOT_ID, CHILD_ID, CHILD_ID, CHILD_ID]
        assert peers.received(0, "turn/interrupt") == []


async def test_r_rt_2_relation_query_of_an_old_generation_never_publishes(peers, autojump_clock):
    async with _rt(peers, _spawn_scenario(PARENT_FINISHES_CHILD_RUNS, read_sleep=5), "handshake-ok") as rt:
        with rt.subscribe() as events:
            await rt.send("spawn", thread_id=ROOT_ID).wait()
            await trio.testing.wait_all_tasks_blocked()
            assert peers.received(0, "thread/read")  # the query is in flight
            await rt.reset(reason="test")
            await rt.ensure_started()
            await trio.sleep(30)
            kinds = [e.kind async for e in _until_empty(events)]
        assert "threadRelationVerified" not in kinds
        assert rt.relations(ROOT_ID) == {}


# -- settings gate keyed by revision (R-SET-2), R-SET-3, R-SET-4 -----------------------------------


async def test_r_set_2_gate_freezes_the_revision_and_opens_on_its_match(peers, autojump_clock):
    async with _rt(peers, "settings-gate") as rt:
        first = rt.send("x")
        await first.wait()
        rev = rt.update_settings(model="m-2", effort="high")
        op = rt.compact(first.thread_id)
        await peers.wait_received(0, "thread/settings/update")
        rt.update_settings(model="m-3")  # after the freeze: not this operation's revision
        await peers.wait_received(0, "thread/compact/start")
        (update,) = peers.received(0, "thread/settings/update")
        assert update["params"]["model"] == "m-2" and update["params"]["effort"] == "high"
        assert op.payload["settingsRevision"] == rev
        assert rt.threads[first.thread_id].effective["model"] == "m-2"
        rt.abort(op)
        await op.wait()
        # the same revision again: already effective, nothing to confirm, nothing sent
        rt.update_settings(model="m-2")
        again = rt.compact(first.thread_id)
        await peers.wait_received(0, "thread/compact/start", count=2)
        assert len(peers.received(0, "thread/settings/update")) == 1
        rt.abort(again)


MISMATCH = {"name": "settings-mismatch", "defaults": True, "rules": [
    {"match": {"method": "thread/settings/update"}, "actions": [
        {"respond": {}}, {"sleep": 1},
        {"notify": "thread/settings/updated", "params": {"threadId": "$thread_id", "threadSettings": {
            "model": "server-chose-another", "sandboxPolicy": {"type": "readOnly", "networkAccess": False}}}}]},
]}


async def test_r_set_2_mismatching_confirmation_fails_typed_and_starts_nothing(peers, autojump_clock):
    async with _rt(peers, MISMATCH) as rt:
        first = rt.send("x")
        await first.wait()
        rev = rt.update_settings(model="m-2")
        result = await rt.compact(first.thread_id).wait()
    assert result.status == "failed" and result.error.code == "SETTINGS_MISMATCH"
    assert result.error.details["revision"] == rev
    assert result.error.details["expected"]["model"] == "m-2"
    assert result.error.details["effective"]["model"] == "server-chose-another"
    assert peers.received(0, "thread/compact/start") == []


async def test_r_set_3_cold_resume_applies_new_developer_instructions_and_resets_grants(peers, autojump_clock):
    async with _rt(peers, {"name": "known", "defaults": True, "settings": {"known_threads": [ROOT_ID]}},
                   {"name": "known", "defaults": True, "settings": {"known_threads": [ROOT_ID]}}) as rt:
        with rt.subscribe() as events:
            rt.update_settings(developer_instructions="be brief")
            await rt.send("one", thread_id=ROOT_ID).wait()
            await rt.reset(reason="disconnect")  # only the thread is restored afterwards
            rt.update_settings(developer_instructions="be thorough")
            await rt.send("two", thread_id=ROOT_ID).wait()
            got = [e async for e in _until_empty(events)]
    resumes = [peers.received(i, "thread/resume")[0]["params"] for i in (0, 1)]
    assert [r["developerInstructions"] for r in resumes] == ["be brief", "be thorough"]
    assert [e.kind for e in got if e.kind in ("threadResumed", "sessionGrantsReset")] == [
        "threadResumed", "sessionGrantsReset", "threadResumed", "sessionGrantsReset"]
    assert all(e.thread_id == ROOT_ID for e in got if e.kind == "sessionGrantsReset")


async def test_r_set_4_sandbox_selection_has_source_user_and_plan_never_rewrites_it(peers):
    async with _rt(peers, "handshake-ok") as rt:
        with rt.subscribe() as events:
            rt.update_settings(sandbox="workspace-write")
            rt.update_settings(approval_policy="untrusted")
            got = [e for e in [events.get_nowait(), events.get_nowait()]]
    assert got[0].payload["sandboxSelection"] == {"mode": "workspace-write", "source": "user"}
    assert "sandboxSelection" not in got[1].payload
    assert got[1].payload["desired"]["sandbox"] == "workspace-write"


# -- launch preparation carries its generation (R-RT-2) ------------------------------------------


async def test_r_rt_2_launch_preparation_finishing_after_a_reset_never_starts_a_child(tmp_path, monkeypatch):
    """The env preparation (a login-shell lookup) ignores cancellation and returns only after
    ``reset()`` cancelled the start: its result is discarded, the CLI is never run."""
    import shlex

    import codexrt._runtime._launch
    from codexrt import ClosedError

    marker = tmp_path / "spawned"
    cli = tmp_path / "codex"
    cli.write_text(f'#!/bin/sh\n[ "$1" = "app-server" ] && touch {shlex.quote(str(marker))}\n'
                   'echo "codex-cli 0.171.0"\n')
    cli.chmod(0o755)
    lookup_started, lookup_may_end = trio.Event(), trio.Event()

    async def slow_prepare(launch, base_env, **kw):
        lookup_started.set()
        with trio.CancelScope(shield=True):  # a lookup that does not honour cancellation
            await lookup_may_end.wait()
        return dict(base_env)

    monkeypatch.setattr(codexrt._runtime._launch, "prepare_launch_env", slow_prepare)
    outcome = []
    async with codexrt.open_runtime(RuntimeConfig(codex_bin=str(cli), env={"PATH": "/usr/bin:/bin"})) as rt:
        async def start():
            try:
                await rt.ensure_started()
                outcome.append("started")
            except ClosedError as exc:
                outcome.append(exc.details.get("startupCancelled"))

        async with trio.open_nursery() as n:
            n.start_soon(start)
            await lookup_started.wait()
            async with trio.open_nursery() as r:
                r.start_soon(rt.reset)
                await trio.testing.wait_all_tasks_blocked()
                lookup_may_end.set()  # the preparation's result arrives after the reset
        assert rt.state.value == "STOPPED"
    assert outcome == [True]
    assert not marker.exists()


# -- R-OP-8 start-failure rules on the app-server ------------------------------------------------
# The app-server acknowledges a start by the turn/start response (a turn id) or refuses it with an
# RPC error tied to that request; there is no TUI-style "busy boundary" to guess from. These tests
# show each rule holds as the runtime implements it (docs/runtime.md, "Start failures").


async def test_r_op_8_consecutive_failed_starts_each_get_their_own_terminal(peers, autojump_clock):
    async with _rt(peers, "turn-start-error") as rt:
        with rt.subscribe() as events:
            a = rt.send("a", client_message_id="cm-a")
            b = rt.send("b", client_message_id="cm-b", thread_id=None)
            ra, rb = await a.wait(), await b.wait()
            got = [e async for e in _until_empty(events)]
    assert (ra.status, rb.status) == ("failed", "failed")
    done = [e for e in got if e.kind == "operationDone"]
    assert [(e.client_operation_id, e.payload["status"]) for e in done] == [(a.id, "failed"), (b.id, "failed")]
    # each terminal belongs to the submission whose clientMessageId was captured at submit time
    sent = [m["params"]["clientUserMessageId"] for m in peers.received(0, "turn/start")]
    assert sent == ["cm-a", "cm-b"] and (a.client_message_id, b.client_message_id) == ("cm-a", "cm-b")


EARLY_CLEANUP_THEN_TRAILING_ERROR = {"name": "early-cleanup", "defaults": True, "rules": [
    {"match": {"method": "turn/start", "nth": 1}, "actions": [
        # an early idle "cleanup" before the turn starts, then a normal turn that fails with a
        # full error, and a trailing error notification after its terminal
        {"notify": "thread/status/changed", "params": {"threadId": "$thread_id", "status": {"type": "idle"}}},
        {"turn_response": True}, {"turn_started": True},
        {"notify": "error", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                       "error": {"message": "model failed"}, "willRetry": False}},
        {"end_turn": "failed"},
        {"notify": "error", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                       "error": {"message": "trailing"}, "willRetry": False}}]},
]}


async def test_r_op_8_early_cleanup_never_ends_and_a_trailing_error_never_settles_the_next(peers, autojump_clock):
    async with _rt(peers, EARLY_CLEANUP_THEN_TRAILING_ERROR) as rt:
        first = rt.send("a", client_message_id="cm-a")
        second = rt.send("b", client_message_id="cm-b")
        r1 = await first.wait()
        r2 = await second.wait()
    assert r1.status == "failed" and first.errors == [{"message": "model failed"}]
    assert r2.status == "completed" and r2.turn_id != r1.turn_id
    assert second.errors == []  # the trailing error of the older turn never reached the newer send


async def test_r_set_2_after_a_reset_the_gate_trusts_only_the_new_child(peers, autojump_clock):
    """After a reset, what the old child confirmed no longer counts: the cold resume carries the
    frozen revision and the gate opens on what *its* result reports (R-SET-2, R-SET-3, R-RT-2)."""
    async with _rt(peers, "settings-gate", "settings-gate") as rt:
        first = rt.send("x")
        await first.wait()
        rt.update_settings(model="m-2")
        gated = rt.compact(first.thread_id)
        await peers.wait_received(0, "thread/compact/start")
        rt.abort(gated)
        await gated.wait()
        await rt.reset(reason="test")
        info = rt.threads[first.thread_id]
        again = rt.compact(first.thread_id)
        await peers.wait_received(1, "thread/compact/start")
        (resume,) = peers.received(1, "thread/resume")
        assert resume["params"]["model"] == "m-2"
        assert info.started_effective["model"] == "m-2"  # the new child's own report opened the gate
        assert peers.received(1, "thread/settings/update") == []
        rt.abort(again)


async def test_r_h_8_a_status_waiter_is_woken_by_the_next_status_line(peers):
    """R-H-8, issue 34: a thread's status event exists only while someone waits for the next
    change (the release of a sub-agent makes it); the next status line sets it and drops it,
    and a status line nobody waits for makes none."""
    from codexrt._sansio._wire import Notification

    async with _rt(peers, "handshake-ok") as rt:
        op = rt.send("x")
        tid = (await op.wait()).thread_id
        info = rt.threads[tid]
        assert info.status_event is None  # the turn's status lines made no event

        def status(kind):
            rt._on_notification(Notification("thread/status/changed", codexrt._sansio._wire.encode_json(
                {"threadId": tid, "status": {"type": kind}})))

        waiter = info.status_event = trio.Event()
        status("active")
        assert waiter.is_set() and info.status_event is None and info.status == "active"
        status("idle")
        assert info.status_event is None and info.status == "idle"
