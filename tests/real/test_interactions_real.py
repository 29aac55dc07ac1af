"""Interactions against the real ``codex app-server`` (pinned) with the loopback model (R-INT-1..3).

A command approval accepted (after a UI rebuild: replayed with a rotated token) and one declined
by a library policy, each with the command's real outcome in the turn's items. ``touch`` is used
because 0.147.0 auto-approves ``echo``.
"""

from __future__ import annotations

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig, Settings
from codexrt._runtime._interaction_policies import decline_all_in_read_only

WAIT = 30


def _config(codex_bin, env, cwd, **settings) -> RuntimeConfig:
    return RuntimeConfig(codex_bin=str(codex_bin), env=env, cwd=str(cwd),
                         settings=Settings(cwd=str(cwd), approval_policy="untrusted", **settings))


async def _events_until_done(stream, on_event):
    out = []
    with trio.fail_after(WAIT):
        async for ev in stream:
            out.append(ev)
            await on_event(ev)
            if ev.kind == "operationDone":
                return out
    raise AssertionError("operation stream ended without operationDone")


def _command_items(events):
    return [e.payload["item"] for e in events
            if e.kind == "itemCompleted" and e.payload["item"].get("type") == "commandExecution"]


async def test_r_int_2_real_approval_accepted_after_replay(codex_bin, real_env, real_cwd, mock_model):
    marker = real_cwd / "accepted"
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd, sandbox="workspace-write")) as rt:
        op = rt.send(f"please [[mock:exec:touch {marker}]]")
        seen = {}

        async def on_event(ev):
            if ev.kind == "interactionRequested" and not ev.payload.get("replayed"):
                p = ev.payload
                assert p["kind"] == "commandApproval" and "touch" in p["params"]["command"]
                assert p["deadlineMs"] is not None
                (replayed,) = rt.replay_interactions()  # the host UI was rebuilt
                assert replayed.key == p["interactionKey"] and replayed.dialog_token != p["dialogToken"]
                with pytest.raises(codexrt.InteractionError) as info:
                    await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": "accept"})
                assert info.value.code == "INTERACTION_STALE_TOKEN"
                await replayed.accept()
                seen["key"] = p["interactionKey"]
            if ev.kind == "interactionResolved":
                seen["resolved"] = ev.payload["interactionKey"]

        events = await _events_until_done(op.events(), on_event)
        result = await op.wait()
        assert rt.pending_interactions() == []
    assert result.status == "completed"
    (item,) = _command_items(events)
    assert item["status"] == "completed" and item["exitCode"] == 0
    assert marker.exists()
    assert seen["resolved"] == seen["key"]  # the server's serverRequest/resolved closed exactly it


async def test_r_int_3_real_approval_declined_by_policy(codex_bin, real_env, real_cwd, mock_model):
    marker = real_cwd / "declined"
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd, sandbox="read-only")) as rt:
        rt.set_interaction_policy(decline_all_in_read_only)
        op = rt.send(f"please [[mock:exec:touch {marker}]]")
        answered = []

        async def on_event(ev):
            if ev.kind == "interactionAnswered":
                answered.append(ev.payload)

        events = await _events_until_done(op.events(), on_event)
        result = await op.wait()
    assert [a["by"] for a in answered] == ["policy"]
    assert result.status == "completed"  # decline lets the turn go on
    (item,) = _command_items(events)
    assert item["status"] == "declined"
    assert not marker.exists()
