"""Split from ``tests/trio/test_mcp_fake.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import json


from peer_fixtures.scenario import SCENARIO_DIR
from tests._support import ROOT


RECORDING = ROOT / "tests" / "data" / "real-mcp-session-0.169.0.jsonl"


SCENARIO = json.loads((SCENARIO_DIR / "mcp-elicitation.json").read_text())


ELICIT = "mcpServer/elicitation/request"


def _recorded() -> list[dict]:
    return [json.loads(line) for line in RECORDING.read_text().splitlines() if line.strip()]


def _templated(obj, thread_id: str, turn_id: str):
    return json.loads(json.dumps(obj).replace(thread_id, "$thread_id").replace(turn_id, "$turn_id"))


def test_r_int_4_fake_mcp_scenario_is_the_recorded_real_shapes():
    lines = _recorded()
    tid = next(m for m in lines if m.get("method") == "thread/started")["params"]["thread"]["id"]
    requests = [m for m in lines if m.get("method") == ELICIT]
    approval, form = requests[0], requests[1]
    assert approval["params"]["_meta"]["codex_approval_kind"] == "mcp_tool_call" and form["params"]["_meta"] is None
    turn = approval["params"]["turnId"]
    rules = SCENARIO["rules"]
    assert rules[0]["actions"][-1] == {"request": ELICIT, "params": _templated(approval["params"], tid, turn)}
    assert rules[1]["actions"][-1] == {"request": ELICIT, "params": _templated(form["params"], tid, turn)}
    # the tool-call item carries the recorded fields (timings left to the fake)
    (real_item,) = [m["params"]["item"] for m in lines if m.get("method") == "item/completed"
                    and m["params"]["turnId"] == turn and m["params"]["item"]["type"] == "mcpToolCall"]
    fake_item = rules[3]["actions"][1]["item"]
    assert set(real_item) - {"startedAtMs", "completedAtMs", "durationMs"} == set(fake_item)
    assert {k: v for k, v in real_item.items() if k not in ("result", "startedAtMs", "completedAtMs", "durationMs")} \
        == {k: v for k, v in fake_item.items() if k != "result"}
    # serverRequest/resolved closes each request by its raw id, in the thread
    resolved = [m["params"] for m in lines if m.get("method") == "serverRequest/resolved"]
    assert resolved[:2] == [{"threadId": tid, "requestId": approval["id"]}, {"threadId": tid, "requestId": form["id"]}]
