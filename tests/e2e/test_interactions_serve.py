"""``codexrt serve``: codex.replayInteractions and codex.executePlan against the stdio fake peer,
every stdout line checked against the shipped schema (R-INT-2, R-INT-5, R-D-1, R-OP-1)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tests._support import ROOT
from tests.trio.test_interactions import CMD, kind_scenario
from tests.trio.test_plans import PLAN_TURN
from tests.e2e.test_serve_e2e import ServeProcess


def scenario_cli(tmp_path: Path, scenario: dict) -> str:
    path = tmp_path / f"{scenario['name']}.json"
    path.write_text(json.dumps(scenario))
    script = tmp_path / f"fake-codex-{scenario['name']}"
    cmd = [sys.executable, "-m", "peer_fixtures.fake_app_server", str(path)]
    script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\nexec {shlex.join(cmd)}\n")
    script.chmod(0o755)
    return str(script)


async def test_r_int_2_serve_replay_rotates_tokens(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", scenario_cli(tmp_path, kind_scenario(CMD))) as sp:
        send = await sp.send("codex.send", {"channelId": "c", "message": "go"})
        first = (await sp.event("interactionRequested"))["payload"]
        none = await sp.request("codex.replayInteractions", {"channelId": "other"})
        assert none["result"] == {"interactions": []}
        replay = await sp.request("codex.replayInteractions", {"channelId": "c"})
        (again,) = replay["result"]["interactions"]
        assert again["interactionKey"] == first["interactionKey"] and again["replayed"] is True
        assert again["dialogToken"] != first["dialogToken"] and again["deliverySequence"] == first["deliverySequence"]
        await sp.event("interactionRequested", lambda l: l["payload"].get("replayed") is True)
        stale = await sp.request("codex.respondInteraction", {"interactionKey": first["interactionKey"],
                                                              "dialogToken": first["dialogToken"],
                                                              "result": {"decision": "decline"}})
        assert stale["ok"] is False and stale["error"]["code"] == "INTERACTION_STALE_TOKEN"
        ok = await sp.request("codex.respondInteraction", {"interactionKey": again["interactionKey"],
                                                           "dialogToken": again["dialogToken"],
                                                           "result": {"decision": "decline"}})
        assert ok["ok"] is True
        assert (await sp.response(send))["result"]["status"] == "completed"
        assert await sp.finish() == 0


async def test_r_int_5_serve_execute_plan_replies_keyed_by_request(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", scenario_cli(tmp_path, PLAN_TURN)) as sp:
        plan = await sp.request("codex.send", {"channelId": "c", "message": "plan it", "settings": {"model": "m1"}})
        thread_id = plan["result"]["threadId"]
        await sp.event("planCompleted")
        refused = await sp.request("codex.executePlan", {"channelId": "c", "threadId": thread_id,
                                                         "planItemId": "not-the-plan"}, id="exec-0")
        assert refused["result"]["ok"] is False and refused["result"]["requestId"] == "exec-0"
        assert refused["result"]["error"]["code"] == "PLAN_NOT_CURRENT"
        done = await sp.request("codex.executePlan", {"channelId": "c", "threadId": thread_id,
                                                      "planItemId": "plan_1", "model": "m1"}, id="exec-1")
        r = done["result"]
        assert (r["requestType"], r["requestId"], r["threadId"], r["ok"], r["status"]) == (
            "executePlan", "exec-1", thread_id, True, "completed")
        queued = await sp.event("operationQueued", lambda l: l["clientOperationId"] == r["clientOperationId"])
        assert queued["payload"]["requestId"] == "exec-1"
        assert await sp.finish() == 0
