"""Split from ``tests/trio/test_fake_peer.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from peer_fixtures.scenario import (
    ActionQueue,
    CloseStdout,
    Exit,
    Scenario,
    ScenarioError,
    ScenarioPeer,
    Sleep,
    Stderr,
    Write,
    scenario_names,
)
from tests._support import pinned_schema_dir
from tests.trio.test_fake_peer import INIT


REQUIRED_SCENARIOS = {
    "handshake-ok", "initialize-refusal", "never-respond", "silent-start", "early-notification",
    "numeric-id-collision", "string-id-reverse", "unknown-server-request", "reverse-approval",
    "reverse-approval-with-traffic", "broken-framing", "stderr-flood", "disconnect-mid-turn",
    "crash-before-ready", "duplicate-terminal", "turn-start-error", "hang-turn", "settings-gate",
    "late-response",
}


def frames(actions: list[Any]) -> list[dict[str, Any]]:
    data = b"".join(a.data for a in actions if isinstance(a, Write))
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode()


class Feeder:
    """Drives a ``ScenarioPeer`` with client messages and auto-incrementing ids."""

    def __init__(self, scenario: Any, **kw: Any) -> None:
        self.peer = ScenarioPeer(scenario, **kw)
        self.next_id = 1

    def request(self, method: str, params: Any = None, **extra: Any) -> list[dict[str, Any]]:
        msg = {"id": self.next_id, "method": method, "params": {} if params is None else params, **extra}
        self.next_id += 1
        return frames(self.peer.on_line(line(msg)))

    def handshake(self) -> None:
        assert "result" in self.request("initialize", INIT)[0]
        self.peer.on_line(line({"method": "initialized"}))

    def thread(self) -> str:
        return self.request("thread/start")[0]["result"]["thread"]["id"]


def test_bundled_scenarios_cover_the_issue_list_and_load() -> None:
    assert REQUIRED_SCENARIOS <= set(scenario_names())
    for name in scenario_names():
        sc = Scenario.load(name)
        assert sc.name == name and sc.description


def test_r_wire_1_default_handshake_shapes_and_gating() -> None:
    f = Feeder("handshake-ok")
    assert f.request("model/list") == [{"error": {"code": -32600, "message": "Not initialized"}, "id": 1}]
    (init,) = f.request("initialize", INIT)
    assert init == {"id": 2, "result": {"userAgent": "fake-app-server/0.0.0", "codexHome": "/tmp/fake-codex-home",
                                        "platformFamily": "unix", "platformOs": "linux"}}
    assert f.request("initialize", INIT)[0]["error"] == {"code": -32600, "message": "Already initialized"}
    assert f.request("nonexistent/method")[0]["error"] == {
        "code": -32600, "message": "Invalid request: unknown variant `nonexistent/method`"}
    no_params = frames(f.peer.on_line(line({"id": 9, "method": "model/list"})))
    assert no_params[0]["error"]["message"] == "Invalid request: missing field `params`"
    assert f.peer.on_line(line({"method": "some/unknownNotification", "params": {}})) == []


def test_r_wire_1_default_turn_streams_like_the_real_server() -> None:
    f = Feeder({"name": "t", "settings": {"text": "abcdefgh", "deltas": 4, "seed": 7}})
    f.handshake()
    start = f.request("thread/start", {"cwd": "/w"})
    assert [m.get("method") for m in start] == [None, "thread/started"]
    thread = start[0]["result"]["thread"]
    assert thread["status"] == {"type": "idle"} and thread["turns"] == [] and thread["historyMode"] == "paginated"
    out = f.request("turn/start", {"threadId": thread["id"], "input": [{"type": "text", "text": "hi"}],
                                   "clientUserMessageId": "client-msg-123"})
    assert all("jsonrpc" not in m for m in out)
    assert out[0]["result"]["turn"]["status"] == "inProgress" and "emittedAtMs" not in out[0]
    notes = out[1:]
    assert all(isinstance(n["emittedAtMs"], int) for n in notes)
    assert [n["method"] for n in notes] == [
        "thread/status/changed", "turn/started", "item/started", "item/completed", "item/started",
        *["item/agentMessage/delta"] * 4, "item/completed", "thread/status/changed", "turn/completed"]
    assert notes[2]["params"]["item"]["clientId"] == "client-msg-123"
    assert "".join(n["params"]["delta"] for n in notes[5:9]) == "abcdefgh"
    assert notes[9]["params"]["item"]["text"] == "abcdefgh"
    done = notes[-1]["params"]["turn"]
    assert done["status"] == "completed" and done["id"] == out[0]["result"]["turn"]["id"]
    assert [i["type"] for i in done["items"]] == ["agentMessage"]  # userMessage is not in turn.items
    # history reflects the finished turn
    assert f.request("thread/turns/list", {"threadId": thread["id"]})[0]["result"]["data"][0]["id"] == done["id"]
    assert len(f.request("thread/items/list", {"threadId": thread["id"]})[0]["result"]["data"]) == 2


SCHEMA = pinned_schema_dir() / "codex_app_server_protocol.schemas.json"


def missing_required(schema: dict[str, Any], defs: dict[str, Any], value: Any, path: str = "$") -> list[str]:
    """Required keys absent from ``value``, following $ref, allOf, nullable anyOf and tagged oneOf."""
    if "$ref" in schema:
        return missing_required(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, value, path)
    for sub in schema.get("allOf", []):
        return missing_required(sub, defs, value, path)
    variants = schema.get("anyOf") or schema.get("oneOf")
    if variants:
        if value is None:
            return []
        for sub in variants:
            sub = defs[sub["$ref"].rsplit("/", 1)[-1]] if "$ref" in sub else sub
            tag = sub.get("properties", {}).get("type", {}).get("enum")
            if isinstance(value, dict) and tag and value.get("type") in tag:
                return missing_required(sub, defs, value, path)
        return []
    if not isinstance(value, dict):
        return []
    out = [f"{path}.{k}" for k in schema.get("required", []) if k not in value]
    for key, sub in schema.get("properties", {}).items():
        if key in value:
            out += missing_required(sub, defs, value[key], f"{path}.{key}")
    return out


def test_default_payloads_carry_the_real_schema_required_fields() -> None:
    """The fake's answers satisfy the pinned 0.169.0 schema's required keys (shapes, not values)."""
    defs = json.loads(SCHEMA.read_text())["definitions"]
    v2 = defs["v2"]
    by_method = {"thread/started": "ThreadStartedNotification", "turn/started": "TurnStartedNotification",
                 "turn/completed": "TurnCompletedNotification", "item/started": "ItemStartedNotification",
                 "item/completed": "ItemCompletedNotification", "item/agentMessage/delta": "AgentMessageDeltaNotification",
                 "thread/status/changed": "ThreadStatusChangedNotification",
                 "thread/settings/updated": "ThreadSettingsUpdatedNotification",
                 "serverRequest/resolved": "ServerRequestResolvedNotification",
                 "item/commandExecution/requestApproval": "CommandExecutionRequestApprovalParams"}
    f = Feeder("reverse-approval")
    checked: list[tuple[str, Any]] = [("InitializeResponse", f.request("initialize", INIT)[0]["result"])]
    start = f.request("thread/start")
    tid = start[0]["result"]["thread"]["id"]
    checked.append(("ThreadStartResponse", start[0]["result"]))
    out = [*start[1:], *f.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "x"}]})]
    out += frames(f.peer.on_line(line({"id": 0, "result": {"decision": "accept"}})))
    out += f.request("thread/settings/update", {"threadId": tid, "model": "m"})
    for name, method in (("ThreadResumeResponse", "thread/resume"), ("ThreadReadResponse", "thread/read"),
                         ("ModelListResponse", "model/list"), ("ThreadTurnsListResponse", "thread/turns/list"),
                         ("ThreadItemsListResponse", "thread/items/list"), ("SkillsListResponse", "skills/list"),
                         ("CollaborationModeListResponse", "collaborationMode/list"),
                         ("ThreadListResponse", "thread/list")):
        checked.append((name, [m for m in f.request(method, {"threadId": tid}) if "result" in m][0]["result"]))
    checked += [(by_method[m["method"]], m["params"]) for m in out if m.get("method") in by_method]
    assert {n for n, _ in checked} >= set(by_method.values())
    problems = [f"{name}: {miss}" for name, value in checked
                for miss in missing_required(v2.get(name) or defs[name], {**defs, **v2}, value)]
    assert problems == []


def test_default_thread_errors_and_resume() -> None:
    f = Feeder({"name": "t", "settings": {"resume_any_uuid": False, "known_threads": ["00000000-0000-4000-8000-000000000001"]}})
    f.handshake()
    unknown = "00000000-0000-4000-8000-0000000000ff"
    assert f.request("thread/resume", {"threadId": unknown})[0]["error"]["message"] == f"no rollout found for thread id {unknown}"
    assert f.request("thread/resume", {"threadId": "nope"})[0]["error"]["message"].startswith("invalid thread id:")
    assert f.request("turn/start", {"threadId": unknown, "input": []})[0]["error"]["message"] == f"thread not found: {unknown}"
    resumed = f.request("thread/resume", {"threadId": "00000000-0000-4000-8000-000000000001"})
    assert resumed[0]["method"] == "thread/status/changed"
    assert resumed[1]["result"]["thread"]["id"] == "00000000-0000-4000-8000-000000000001"
    assert "result" in f.request("turn/start", {"threadId": "00000000-0000-4000-8000-000000000001", "input": []})[0]


def test_experimental_methods_need_the_capability() -> None:
    f = Feeder("handshake-ok")
    f.request("initialize", {"clientInfo": {"name": "x", "version": "0"}})
    assert f.request("collaborationMode/list")[0]["error"]["message"] == "collaborationMode/list requires experimentalApi capability"


def test_interrupt_of_hung_turn_and_of_no_turn() -> None:
    f = Feeder("hang-turn")
    f.handshake()
    tid = f.thread()
    out = f.request("turn/start", {"threadId": tid, "input": []})
    assert "turn/completed" not in [m.get("method") for m in out]
    turn_id = out[0]["result"]["turn"]["id"]
    stop = f.request("turn/interrupt", {"threadId": tid, "turnId": turn_id})
    assert stop[0] == {"id": f.next_id - 1, "result": {}}
    assert stop[-1]["method"] == "turn/completed" and stop[-1]["params"]["turn"]["status"] == "interrupted"
    assert f.request("turn/interrupt", {"threadId": tid, "turnId": turn_id})[0]["error"]["message"] == "no active turn to interrupt"


def test_r_wire_5_invalid_lines_are_recorded_and_get_no_reply() -> None:
    peer = ScenarioPeer("handshake-ok")
    for bad in (b"{not json", b"[1,2]", b'{"id": 1.5, "method": "model/list", "params": {}}'):
        assert all(isinstance(a, Stderr) for a in peer.on_line(bad))
    assert peer.received[:2] == [{"_invalid": "{not json"}, {"_invalid": "[1,2]"}]
    quiet = ScenarioPeer({"name": "q", "settings": {"stderr_on_invalid": False}})
    assert quiet.on_line(b"garbage") == []


def test_templates_keep_json_types_and_rules_match_in_order() -> None:
    peer = ScenarioPeer({"name": "t", "defaults": False, "rules": [
        {"match": {"method": "ping", "nth": 2}, "actions": [{"respond": {"second": "$id"}}]},
        {"match": {"method": "ping", "params": {"x": 1}}, "actions": [{"respond": "$params.x"}], "times": 1},
        {"match": {"method": "ping"}, "actions": [{"respond": "id=$id p=$params.deep.k"}, {"raw": "{\"id\":$id}\n"}]},
    ]})
    assert frames(peer.on_line(line({"id": "a", "method": "ping", "params": {"x": 1}}))) == [{"id": "a", "result": 1}]
    assert frames(peer.on_line(line({"id": 5, "method": "ping", "params": {"x": 1}}))) == [{"id": 5, "result": {"second": 5}}]
    assert frames(peer.on_line(line({"id": "s", "method": "ping", "params": {"deep": {"k": "v"}}}))) == [
        {"id": "s", "result": "id=s p=v"}, {"id": "s"}]  # raw expands to JSON text
    assert frames(peer.on_line(line({"id": 7, "method": "other", "params": {}}))) == []  # no defaults


def test_server_request_ids_count_from_zero_and_replies_are_matched() -> None:
    peer = ScenarioPeer({"name": "t", "defaults": False, "rules": [
        {"match": {"method": "go"}, "actions": [{"request": "a/b", "params": {}}, {"request": "a/b", "params": {}},
                                               {"request": "a/b", "id": "s-1", "params": {}}]},
        {"match": {"reply_to": 1, "error": True}, "actions": [{"notify": "got/error", "params": {"reply": "$msg"}}]},
    ]})
    assert [m["id"] for m in frames(peer.on_line(line({"id": 0, "method": "go", "params": {}})))] == [0, 1, "s-1"]
    assert peer.pending_server_requests == {0: "a/b", 1: "a/b", "s-1": "a/b"}
    reply = {"id": 1, "error": {"code": -32601, "message": "unsupported server request: a/b"}}
    (note,) = frames(peer.on_line(line(reply)))
    assert note["method"] == "got/error" and note["params"]["reply"] == reply
    assert frames(peer.on_line(line({"id": "1", "result": {}}))) == []  # "1" is not 1
    assert 1 not in peer.pending_server_requests and "s-1" in peer.pending_server_requests


def test_exit_ends_the_interpreter() -> None:
    peer = ScenarioPeer("crash-before-ready")
    assert [type(a) for a in peer.start()] == [Stderr]
    actions = peer.on_line(line({"id": 0, "method": "initialize", "params": INIT}))
    assert isinstance(actions[-1], Exit) and actions[-1].code == 3 and not frames(actions)
    assert peer.finished and peer.on_line(line({"id": 1, "method": "model/list", "params": {}})) == []
    assert len(peer.received) == 2


def test_broken_framing_bytes_hold_garbage_then_valid_frames() -> None:
    peer = ScenarioPeer("broken-framing")
    actions = peer.on_line(line({"id": 0, "method": "initialize", "params": INIT}))
    assert any(isinstance(a, Sleep) for a in actions)
    writes = [a.data for a in actions if isinstance(a, Write)]
    assert any(w.endswith(b"\xc3") for w in writes)  # a UTF-8 character split across writes
    lines = b"".join(writes).split(b"\n")
    parsed = []
    for raw in lines:
        try:
            parsed.append(json.loads(raw))
        except ValueError:
            parsed.append(None)
    assert parsed[0] is None and parsed[1] == [1, 2, 3] and parsed[3] == {"neither": "request nor response"}
    objects = [p for p in parsed if isinstance(p, dict) and ("result" in p or "method" in p)]
    assert objects[0]["id"] == 0 and objects[0]["result"]["platformOs"] == "linux"
    assert [o["method"] for o in objects[1:]] == ["configWarning", "remoteControl/status/changed", "warning"]
    assert objects[-1]["params"]["message"] == "café split"


def test_scenario_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="unknown keys"):
        Scenario.load({"name": "x", "rulez": []})
    with pytest.raises(ScenarioError, match="exactly one kind"):
        Scenario.load({"name": "x", "rules": [{"match": {}, "actions": [{"explode": True}]}]})
    with pytest.raises(ScenarioError, match="unknown matcher keys"):
        Scenario.load({"name": "x", "rules": [{"match": {"metod": "a"}, "actions": []}]})
    with pytest.raises(ScenarioError, match="'result' needs 'reply_to'"):
        Scenario.load({"name": "x", "rules": [{"match": {"result": {}}, "actions": []}]})
    with pytest.raises(ScenarioError, match="unknown settings"):
        Scenario.load({"name": "x", "settings": {"delta": 2}})
    with pytest.raises(ScenarioError, match="no such scenario"):
        Scenario.load("does-not-exist")
    p = tmp_path / "mine.json"
    p.write_text(json.dumps({"name": "mine", "settings": {"deltas": 1}}))
    assert Scenario.load(p).settings["deltas"] == 1 and Scenario.load(str(p)).name == "mine"


def test_action_queue_splits_at_sleeps_and_keeps_order() -> None:
    q = ActionQueue()
    a, b, c, d = (Write(bytes([i])) for i in range(4))
    q.add(0.0, [a, Sleep(5), b, Sleep(1), CloseStdout()])
    q.add(1.0, [c])
    q.add(5.0, [d])
    assert q.pop_due(1.0) == [a, c]
    assert q.next_due() == 5.0
    assert q.pop_due(5.5) == [b, d]
    assert q.pop_due(6.0) == [CloseStdout()] and q.next_due() is None
