"""Conformance of codexrt's public API against the real ``codex app-server`` (issue 4).

Every test drives the pinned binary (and, for the core subset, the older 0.147.0) through
``codexrt.open_runtime`` with the loopback model; nothing here speaks raw JSON except the
bad-lines test, which writes garbage on purpose. The mock's request log is the proof of how
many model requests a turn made ("no turn is re-sent").
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

import codexrt
from codexrt import ChildExited, RuntimeConfig, RuntimeState, Settings
from tests._support import wait_until

WAIT = 30  # every wait here is bounded by this many seconds


@pytest.fixture(params=["pinned", "old"])
def any_bin(request, codex_bin):
    """The core subset runs against both the pinned binary and 0.147.0."""
    if request.param == "old":
        return request.getfixturevalue("codex_bin_old")
    return codex_bin


def _config(bin_path: Path, env: dict[str, str], cwd: Path, **kw: Any) -> RuntimeConfig:
    settings = kw.pop("settings", Settings(cwd=str(cwd)))
    return RuntimeConfig(codex_bin=str(bin_path), env=env, cwd=str(cwd), settings=settings, **kw)


async def _collect(op: codexrt.Operation, on_event=None) -> list[codexrt.CodexEvent]:
    events = []
    with trio.fail_after(WAIT):
        async for ev in op.events():
            events.append(ev)
            if on_event is not None:
                await on_event(ev)
    return events


def _items(events, kind="itemCompleted", item_type=None):
    out = [e.payload["item"] for e in events if e.kind == kind]
    return [i for i in out if item_type is None or i.get("type") == item_type]


async def test_r_wire_3_handshake_and_ready(any_bin, real_env, real_cwd):
    async with codexrt.open_runtime(_config(any_bin, real_env, real_cwd)) as rt:
        with trio.fail_after(WAIT):
            conn = await rt.ensure_started()
        assert rt.state is RuntimeState.READY
        assert conn.initialize_result["userAgent"].startswith("codexrt/")
        assert rt.runtime_snapshot()["pid"] == conn.pid
    assert rt.state is RuntimeState.STOPPED
    assert conn.transport.process.returncode == 0  # stdin EOF → clean exit, reaped


async def test_streamed_turn_every_delta_and_client_id(any_bin, real_env, real_cwd, mock_model):
    async with codexrt.open_runtime(_config(any_bin, real_env, real_cwd)) as rt:
        op = rt.send("count [[mock:deltas:200]]", client_message_id="client-msg-123")
        events = await _collect(op)
        result = await op.wait()
    assert result.status == "completed"
    text = "".join(e.payload["delta"] for e in events if e.kind == "itemUpdated"
                   and e.payload["stream"] == "item/agentMessage/delta")
    expected = "".join(f"d{i} " for i in range(200))
    assert text == expected == result.final_text  # coalesced or not: no text lost or reordered
    users = _items(events, item_type="userMessage")
    if users:  # R-OP-7: the submission's id comes back on the native userMessage item
        assert users[0].get("clientId") in ("client-msg-123", None)
    assert len(mock_model.requests_with_user_text("count")) == 1


async def test_r_op_7_client_message_id_echoed_as_client_id(codex_bin, real_env, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        op = rt.send("hello", client_message_id="client-msg-123")
        events = await _collect(op)
    assert _items(events, item_type="userMessage")[0]["clientId"] == "client-msg-123"


@pytest.mark.parametrize("decision, item_status, turn_status", [
    ("accept", "completed", "completed"),
    ("decline", "declined", "completed"),
    ("cancel", "declined", "interrupted"),
])
async def test_r_int_3_command_approval(any_bin, real_env, real_cwd, mock_model, decision, item_status,
                                        turn_status):
    marker = real_cwd / "touched"
    settings = Settings(cwd=str(real_cwd), approval_policy="untrusted", sandbox="workspace-write")
    async with codexrt.open_runtime(_config(any_bin, real_env, real_cwd, settings=settings)) as rt:
        op = rt.send(f"please [[mock:exec:touch {marker}]]")

        async def answer(ev):
            if ev.kind == "interactionRequested":
                assert ev.payload["method"] == "item/commandExecution/requestApproval"
                await rt.interactions[ev.payload["interactionKey"]].respond({"decision": decision})

        events = await _collect(op, answer)
        result = await op.wait()
    assert [e.kind for e in events].count("interactionRequested") == 1
    commands = _items(events, item_type="commandExecution")
    assert commands and commands[0]["status"] == item_status
    assert result.status == turn_status
    assert marker.exists() == (decision == "accept")


async def test_no_answer_means_no_approval(codex_bin, real_env, real_cwd, mock_model):
    """Approvals are never granted by default: with nobody answering, the command never runs."""
    marker = real_cwd / "never"
    settings = Settings(cwd=str(real_cwd), approval_policy="untrusted", sandbox="read-only")
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd, settings=settings)) as rt:
        with rt.subscribe() as events:
            op = rt.send(f"please [[mock:exec:touch {marker}]]")
            with trio.fail_after(WAIT):
                async for ev in op.events():
                    if ev.kind == "interactionRequested":
                        break
            await trio.sleep(1.0)  # time for a wrongly auto-approved command to run (not ordering)
            assert not marker.exists() and not op.terminal
            assert rt.abort(op) == "interruptSent"
            assert (await op.wait()).status == "interrupted"
            # the pending approval is closed by the server's serverRequest/resolved (R-INT-2),
            # which the real server sends after turn/completed
            with trio.fail_after(WAIT):
                async for ev in events:
                    if ev.kind == "interactionResolved":
                        break
        assert rt.pending_interactions() == []
    assert not marker.exists()


async def test_r_op_5_interrupt_during_streaming(any_bin, real_env, real_cwd, mock_model):
    async with codexrt.open_runtime(_config(any_bin, real_env, real_cwd)) as rt:
        op = rt.send("hang please [[mock:hang]]")
        with trio.fail_after(WAIT):
            async for ev in op.events():
                if ev.kind == "turnStarted":
                    break
        assert rt.abort(op) == "interruptSent"
        await _collect(op)
        result = await op.wait()
        assert result.status == "interrupted"
        nxt = await rt.send("after", thread_id=op.thread_id).wait()
        assert nxt.status == "completed"


async def test_r_set_1_settings_revision_reaches_the_model(codex_bin, real_env, real_cwd, mock_model):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        first = await rt.send("one").wait()
        assert rt.update_settings(model="mock-model-b") == 1
        with rt.subscribe() as events:
            second = await rt.send("two", thread_id=first.thread_id).wait()
            kinds = []
            while (ev := events.get_nowait()) is not None:
                kinds.append(ev.kind)
    assert second.status == "completed"
    assert mock_model.requests_with_user_text("two")[0].model == "mock-model-b"
    assert mock_model.requests_with_user_text("one")[0].model == "mock-model"


async def test_r_set_2_settings_update_confirmed_by_notification(codex_bin, real_env, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        first = await rt.send("one").wait()
        conn = await rt.ensure_started()
        waiter = rt.threads[first.thread_id].settings_event
        with trio.fail_after(WAIT):
            await conn.call("thread/settings/update", {"threadId": first.thread_id, "model": "mock-model-b"})
            await waiter.wait()
        assert rt.threads[first.thread_id].effective["model"] == "mock-model-b"


async def test_r_rt_4_sigkill_mid_turn_then_resume_without_resend(any_bin, real_env, real_cwd, mock_model):
    async with codexrt.open_runtime(_config(any_bin, real_env, real_cwd)) as rt:
        first = await rt.send("warm up").wait()
        lost = rt.send("the lost turn [[mock:hang]]", thread_id=first.thread_id)
        with trio.fail_after(WAIT):
            async for ev in lost.events():
                if ev.kind == "turnStarted":
                    break
            await wait_until(lambda: [r for r in mock_model.model_requests() if "the lost turn" in r.last_user_text],
                             "the lost turn to reach the model")
        os.kill(rt.runtime_snapshot()["pid"], signal.SIGKILL)
        result = await lost.wait()
        assert result.status == "failed" and isinstance(result.error, ChildExited)
        assert result.error.signal == signal.SIGKILL
        assert rt.state is RuntimeState.FAILED
        nxt = await rt.send("next turn", thread_id=first.thread_id).wait()
        assert nxt.status == "completed" and rt.generation == 2
    lost_requests = [r for r in mock_model.model_requests() if "the lost turn" in r.last_user_text]
    assert len(lost_requests) == 1  # never re-sent
    assert len(mock_model.requests_with_user_text("next turn")) == 1


async def test_r_wire_6_shutdown_by_stdin_eof_and_by_sigterm(codex_bin, real_env, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        conn = await rt.ensure_started()
        with trio.fail_after(WAIT):
            await rt.reset()
        assert conn.exit_status.returncode == 0  # stdin EOF
        conn2 = await rt.ensure_started()
        conn2.transport.process.terminate()
        with trio.fail_after(WAIT):
            await conn2.closed.wait()
        assert conn2.exit_status.returncode == 0  # SIGTERM: the server exits cleanly
        assert rt.state is RuntimeState.FAILED
        with pytest.raises(ChildExited):
            await conn2.call("model/list", {})


async def test_r_wire_5_bad_lines_to_the_server_never_hang_the_client(codex_bin, real_env, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd, rpc_timeout=5)) as rt:
        conn = await rt.ensure_started()
        await conn.transport.send_stream.send_all(b"{this is not json\n[1,2]\n")
        with trio.fail_after(WAIT):
            result = await conn.call("model/list", {})
        assert result["data"]


async def test_catalogs_and_history_pass_through(codex_bin, real_env, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        done = await rt.send("one").wait()
        await rt.send("two", thread_id=done.thread_id).wait()
        conn = await rt.ensure_started()
        with trio.fail_after(WAIT):
            assert (await conn.call("model/list", {}))["data"]
            assert "data" in await conn.call("skills/list", {})
            assert "data" in await conn.call("mcpServerStatus/list", {})
            modes = await conn.call("collaborationMode/list", {})
            listed = await conn.call("thread/list", {"limit": 10})
            read = await conn.call("thread/read", {"threadId": done.thread_id})
            page1 = await conn.call("thread/turns/list", {"threadId": done.thread_id, "limit": 1})
            page2 = await conn.call("thread/turns/list", {"threadId": done.thread_id, "limit": 1,
                                                          "cursor": page1["nextCursor"]})
            items = await conn.call("thread/items/list", {"threadId": done.thread_id, "limit": 50})
    assert {m["mode"] for m in (modes["data"] if isinstance(modes, dict) else modes)} >= {"plan", "default"}
    assert done.thread_id in [t["id"] for t in listed["data"]]
    assert read["thread"]["id"] == done.thread_id
    assert page1["data"][0]["id"] != page2["data"][0]["id"]  # the opaque cursor moved on
    assert any(e["item"]["type"] == "userMessage" for e in items["data"])


async def test_opt_out_notification_methods(codex_bin, real_env, real_cwd):
    config = _config(codex_bin, real_env, real_cwd,
                     opt_out_notification_methods=["item/agentMessage/delta"])
    async with codexrt.open_runtime(config) as rt:
        op = rt.send("count [[mock:deltas:10]]")
        events = await _collect(op)
    assert not [e for e in events if e.kind == "itemUpdated"]
    assert (await op.wait()).final_text == "".join(f"d{i} " for i in range(10))


async def test_old_binary_history_list(codex_bin_old, real_env, real_cwd):
    """0.147.0 defaults to legacy history; listing still works through the same API."""
    async with codexrt.open_runtime(_config(codex_bin_old, real_env, real_cwd)) as rt:
        done = await rt.send("one").wait()
        conn = await rt.ensure_started()
        listed = await conn.call("thread/list", {"limit": 10})
    assert done.thread_id in [t["id"] for t in listed["data"]]
