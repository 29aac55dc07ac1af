"""Tests of the scripted fake app-server itself (``peer_fixtures/``), not of codexrt.

Charter: codexrt's wire tests trust this fixture to speak the real server's dialect and to
misbehave exactly as each scenario promises.  So we check (1) the sans-IO interpreter by feeding
lines and reading actions, (2) every bundled scenario's promise through the Trio memory peer on
``autojump_clock`` (delays are asserted with ``trio.current_time()``), and (3) the stdio runner
as a real child process (handshake + turn, ``--log``, exit codes, a stderr flood read
concurrently, sleeps that do not stop reading).  Requirement ids name the behaviour a scenario
exists for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import trio
import trio.testing

from peer_fixtures.fake_app_server import read_log
from peer_fixtures.memory import MemoryPeer, open_memory_peer
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

ROOT = Path(__file__).resolve().parents[2]

INIT = {"clientInfo": {"name": "codexrt-test", "title": None, "version": "0"}, "capabilities": {"experimentalApi": True}}

REQUIRED_SCENARIOS = {
    "handshake-ok", "initialize-refusal", "never-respond", "silent-start", "early-notification",
    "numeric-id-collision", "string-id-reverse", "unknown-server-request", "reverse-approval",
    "reverse-approval-with-traffic", "broken-framing", "stderr-flood", "disconnect-mid-turn",
    "crash-before-ready", "duplicate-terminal", "turn-start-error", "hang-turn", "settings-gate",
    "late-response",
}


# ---------------------------------------------------------------------------------------------
# sans-IO helpers


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


# ---------------------------------------------------------------------------------------------
# 1. the interpreter (sans-IO)


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


# ---------------------------------------------------------------------------------------------
# 2. the memory peer (Trio, autojump_clock)


class Client:
    """The client's side of a peer: JSON lines out, JSON lines in."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send_stream, self.receive_stream = send, receive
        self.buf = b""
        self.next_id = 1

    async def send(self, obj: Any) -> None:
        await self.send_stream.send_all(json.dumps(obj).encode() + b"\n")

    async def request(self, method: str, params: Any = None) -> int:
        rid = self.next_id
        self.next_id += 1
        await self.send({"id": rid, "method": method, "params": {} if params is None else params})
        return rid

    async def line(self) -> bytes | None:
        while b"\n" not in self.buf:
            chunk = await self.receive_stream.receive_some(65536)
            if not chunk:
                return None
            self.buf += chunk
        out, self.buf = self.buf.split(b"\n", 1)
        return out

    async def recv(self) -> dict[str, Any] | None:
        raw = await self.line()
        return None if raw is None else json.loads(raw)

    async def until(self, pred: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        got = []
        while True:
            msg = await self.recv()
            assert msg is not None, f"EOF before the expected message; got {got}"
            got.append(msg)
            if pred(msg):
                return got

    async def rest(self) -> list[dict[str, Any]]:
        got = []
        while (msg := await self.recv()) is not None:
            got.append(msg)
        return got

    async def handshake(self) -> None:
        rid = await self.request("initialize", INIT)
        assert (await self.until(lambda m: m.get("id") == rid))[-1]["result"]["userAgent"]
        await self.send({"method": "initialized"})

    async def thread(self) -> str:
        """thread/start, then read up to its response and its thread/started notification."""
        rid = await self.request("thread/start")
        tid = (await self.until(id_is(rid)))[-1]["result"]["thread"]["id"]
        await self.until(method_is("thread/started"))
        return tid


def method_is(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == name


def id_is(rid: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda m: "method" not in m and m.get("id") == rid


async def test_memory_handshake_turn_and_eof_exit_0(nursery: trio.Nursery) -> None:
    send, receive, _stderr, peer = open_memory_peer(nursery, "handshake-ok")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "hi"}]})
    got = await c.until(method_is("turn/completed"))
    assert got[-1]["params"]["turn"]["status"] == "completed"
    await send.aclose()
    await peer.finished.wait()
    assert peer.exit_code == 0 and await c.recv() is None
    assert peer.received_methods() == ["initialize", "initialized", "thread/start", "turn/start"]


async def test_memory_eof_writes_what_is_due_and_drops_the_delayed_rest(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "never-respond")
    c = Client(send, receive)
    await c.request("initialize", INIT)
    await c.request("model/list")  # due in 60 s: dropped at EOF, like the stdio runner
    await send.aclose()
    got = await c.rest()
    assert [m["id"] for m in got] == [1] and peer.exit_code == 0 and trio.current_time() < 1


async def test_r_wire_3_initialize_refusal_keeps_refusing(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "initialize-refusal")
    c = Client(send, receive)
    rid = await c.request("initialize", INIT)
    assert (await c.recv()) == {"error": {"code": -32600, "message": "Invalid request: initialize refused by the fake peer"}, "id": rid}
    rid = await c.request("thread/start")
    assert (await c.recv())["error"]["message"] == "Not initialized"


async def test_r_wire_3_silent_start_never_answers(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "silent-start")
    c = Client(send, receive)
    await c.request("initialize", INIT)
    with trio.move_on_after(3600) as scope:
        await c.recv()
    assert scope.cancelled_caught and peer.received_methods() == ["initialize"]


async def test_r_wire_4_never_respond_late_ack_while_other_requests_flow(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "never-respond")
    c = Client(send, receive)
    await c.handshake()
    t0 = trio.current_time()
    slow = await c.request("model/list")
    never = await c.request("thread/list")
    tid = await c.thread()  # answered at once although model/list is still pending
    assert tid and trio.current_time() == t0
    late = (await c.until(id_is(slow)))[-1]
    assert late["result"]["data"] and trio.current_time() - t0 == pytest.approx(60)
    with trio.move_on_after(3600):
        msg = await c.recv()
        pytest.fail(f"thread/list must never be answered, got {msg}")
    assert never


async def test_r_wire_4_late_response_after_40s(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "late-response")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    t0 = trio.current_time()
    rid = await c.request("turn/start", {"threadId": tid, "input": []})
    resp = (await c.until(id_is(rid)))[-1]
    assert trio.current_time() - t0 == pytest.approx(40) and resp["result"]["turn"]["status"] == "inProgress"


async def test_settings_gate_notification_2s_after_ack(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "settings-gate")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    t0 = trio.current_time()
    rid = await c.request("thread/settings/update", {"threadId": tid, "model": "mock-model-b"})
    assert (await c.recv()) == {"id": rid, "result": {}} and trio.current_time() == t0
    note = await c.recv()
    assert note["method"] == "thread/settings/updated" and note["params"]["threadSettings"]["model"] == "mock-model-b"
    assert trio.current_time() - t0 == pytest.approx(2)


async def test_early_notification_precedes_turn_start_response(nursery: trio.Nursery) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "early-notification")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    rid = await c.request("turn/start", {"threadId": tid, "input": []})
    got = await c.until(method_is("turn/completed"))
    order = [m.get("method") or f"response:{m['id']}" for m in got]
    assert order.index("turn/started") < order.index(f"response:{rid}")
    assert order.index("item/completed") < order.index(f"response:{rid}")
    assert {m["params"]["turn"]["id"] for m in got if m.get("method") in ("turn/started", "turn/completed")} == {
        got[order.index(f"response:{rid}")]["result"]["turn"]["id"]}


async def test_r_wire_2_numeric_id_collision(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "numeric-id-collision")
    c = Client(send, receive)
    await c.handshake()
    rid = await c.request("thread/start")
    server_req = await c.recv()
    assert server_req["id"] == rid and server_req["method"] == "item/unknownThing/request"
    resp = await c.recv()
    assert resp["id"] == rid and "result" in resp  # the client's own response follows
    await c.send({"id": rid, "error": {"code": -32601, "message": "unsupported server request: item/unknownThing/request"}})
    await c.until(id_is(await c.request("model/list")))
    assert peer.received[-2]["error"]["code"] == -32601 and not peer.interpreter.pending_server_requests


async def test_r_wire_2_string_id_reverse(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "string-id-reverse")
    c = Client(send, receive)
    await c.handshake()
    await c.thread()
    ids = [(await c.recv())["id"], (await c.recv())["id"]]
    assert ids == ["req-abc", "0"]
    for rid in ids:
        await c.send({"id": rid, "result": {}})
    await c.until(id_is(await c.request("model/list")))
    assert peer.interpreter.pending_server_requests == {}


async def test_r_wire_7_unknown_server_request_reply_is_echoed(nursery: trio.Nursery) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "unknown-server-request")
    c = Client(send, receive)
    await c.handshake()
    await c.thread()
    req = (await c.until(method_is("item/unknownThing/request")))[-1]
    assert req["id"] == 0 and "emittedAtMs" not in req
    reply = {"id": 0, "error": {"code": -32601, "message": "unsupported server request: item/unknownThing/request"}}
    await c.send(reply)
    note = await c.recv()
    assert note["method"] == "item/unknownThing/resolved" and note["params"] == {"requestId": 0, "reply": reply}


async def start_approval_turn(c: Client) -> tuple[str, list[dict[str, Any]]]:
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "run it"}]})
    return tid, await c.until(method_is("item/commandExecution/requestApproval"))


@pytest.mark.parametrize(("decision", "item_status", "turn_status"), [
    ("accept", "completed", "completed"), ("decline", "declined", "completed"), ("cancel", "declined", "interrupted")])
async def test_reverse_approval_decisions(nursery: trio.Nursery, decision: str, item_status: str, turn_status: str) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "reverse-approval")
    c = Client(send, receive)
    tid, got = await start_approval_turn(c)
    req = got[-1]
    assert req["id"] == 0
    assert {"kind", "threadId", "turnId", "itemId", "command", "cwd", "availableDecisions"} <= set(req["params"])
    assert req["params"]["threadId"] == tid
    await c.send({"id": 0, "result": {"decision": decision}})
    rest = await c.until(method_is("turn/completed"))
    assert rest[0] == {"method": "serverRequest/resolved", "params": {"threadId": tid, "requestId": 0}, "emittedAtMs": rest[0]["emittedAtMs"]}
    (cmd,) = [m for m in rest if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "commandExecution"]
    assert cmd["params"]["item"]["status"] == item_status
    assert rest[-1]["params"]["turn"]["status"] == turn_status


async def test_reverse_approval_interrupt_while_pending_resolves_it(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, "reverse-approval")
    c = Client(send, receive)
    tid, got = await start_approval_turn(c)
    rid = await c.request("turn/interrupt", {"threadId": tid, "turnId": got[-1]["params"]["turnId"]})
    out = await c.until(method_is("serverRequest/resolved"))
    assert out[0] == {"id": rid, "result": {}}
    assert [m.get("method") for m in out[1:]] == ["thread/status/changed", "turn/completed", "serverRequest/resolved"]
    assert out[2]["params"]["turn"]["status"] == "interrupted" and not peer.interpreter.pending_server_requests


async def test_reverse_approval_with_traffic_keeps_talking(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "reverse-approval-with-traffic")
    c = Client(send, receive)
    await start_approval_turn(c)
    t0 = trio.current_time()
    rid = await c.request("model/list")
    assert (await c.recv())["id"] == rid  # answered while the approval waits
    got = await c.until(method_is("item/unknownThing/progress"))
    assert [m["method"] for m in got].count("warning") == 5 and trio.current_time() - t0 == pytest.approx(0.3)
    await c.send({"id": 0, "result": {"decision": "accept"}})
    assert (await c.until(method_is("turn/completed")))[-1]["params"]["turn"]["status"] == "completed"


async def test_r_wire_5_broken_framing_then_normal_traffic(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, _e, _peer = open_memory_peer(nursery, "broken-framing")
    c = Client(send, receive)
    rid = await c.request("initialize", INIT)
    raw = [await c.line() for _ in range(5)]
    assert raw[0] == b"{this is not json" and raw[1] == b"[1,2,3]" and raw[4] == b""
    assert json.loads(await c.line())["id"] == rid
    notes = [json.loads(await c.line()) for _ in range(3)]
    assert [n["method"] for n in notes] == ["configWarning", "remoteControl/status/changed", "warning"]
    assert notes[-1]["params"]["message"] == "café split"
    await c.send({"method": "initialized"})
    assert await c.thread()


async def test_r_wire_9_stderr_flood_lockstep_needs_concurrent_drain(nursery: trio.Nursery) -> None:
    send, receive, stderr, peer = open_memory_peer(nursery, "stderr-flood", lockstep=True)
    c = Client(send, receive)
    drained = 0

    async def drain() -> None:
        nonlocal drained
        while chunk := await stderr.receive_some(65536):
            drained += len(chunk)

    with trio.fail_after(30):
        async with trio.open_nursery() as inner:
            inner.start_soon(drain)
            await c.handshake()
            tid = await c.thread()
            await c.request("turn/start", {"threadId": tid, "input": []})
            await c.until(method_is("turn/completed"))
            await send.aclose()
    assert drained == (256 + 32) * 4096 and peer.exit_code == 0


async def test_r_wire_6_disconnect_mid_turn_exits_1_without_terminal(nursery: trio.Nursery, autojump_clock: Any) -> None:
    send, receive, stderr, peer = open_memory_peer(nursery, "disconnect-mid-turn")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": []})
    rest = await c.rest()  # ends in EOF
    methods = [m.get("method") for m in rest]
    assert methods.count("item/agentMessage/delta") == 4 and "turn/completed" not in methods
    assert peer.exit_code == 1 and b"panicked" in await stderr.receive_some(65536)


async def test_r_wire_9_crash_before_ready_exits_3_with_secrets_on_stderr(nursery: trio.Nursery) -> None:
    send, receive, stderr, peer = open_memory_peer(nursery, "crash-before-ready")
    c = Client(send, receive)
    await c.request("initialize", INIT)
    assert await c.rest() == []
    err = b""
    while chunk := await stderr.receive_some(65536):
        err += chunk
    assert b"OPENAI_API_KEY=sk-test-SECRET123" in err and b"Authorization: Bearer abc.def" in err
    assert peer.exit_code == 3


async def test_duplicate_terminal_and_turn_start_error(nursery: trio.Nursery) -> None:
    send, receive, _e, _p = open_memory_peer(nursery, "duplicate-terminal")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    await c.request("turn/start", {"threadId": tid, "input": []})
    first = await c.until(method_is("turn/completed"))
    second = await c.recv()
    assert second["method"] == "turn/completed" and second["params"] == first[-1]["params"]

    send, receive, _e, peer = open_memory_peer(nursery, "turn-start-error")
    c = Client(send, receive)
    await c.handshake()
    tid = await c.thread()
    rid = await c.request("turn/start", {"threadId": tid, "input": []})
    got = await c.until(id_is(rid))
    assert got[-1]["error"]["code"] == -32600
    await send.aclose()
    assert not [m for m in await c.rest() if m.get("method", "").startswith(("turn/", "item/"))]


async def test_memory_peer_close_stdout_and_external_cancel(nursery: trio.Nursery) -> None:
    send, receive, _e, peer = open_memory_peer(nursery, {"name": "c", "rules": [
        {"match": {"method": "bye"}, "actions": [{"respond": "ok"}, {"close_stdout": True}]}]})
    c = Client(send, receive)
    await c.request("bye")
    assert (await c.recv())["result"] == "ok" and await c.recv() is None
    await c.request("bye")  # still reading after stdout closed
    await trio.testing.wait_all_tasks_blocked()
    assert peer.received_methods() == ["bye", "bye"] and peer.exit_code is None

    with trio.CancelScope() as scope:
        mp = MemoryPeer("handshake-ok")
        a_send, a_recv = trio.testing.memory_stream_one_way_pair()
        b_send, _b_recv = trio.testing.memory_stream_one_way_pair()
        async with trio.open_nursery() as inner:
            inner.start_soon(mp.run, a_recv, b_send, None)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert mp.exit_code == -9 and mp.finished.is_set()


# ---------------------------------------------------------------------------------------------
# 3. the stdio runner (a real child process)


async def spawn(*args: str, cwd: Path = ROOT) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)


async def reap(proc: trio.Process) -> int:
    with trio.fail_after(10):
        return await proc.wait()


async def test_stdio_handshake_turn_log_and_eof_exit_0(tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    proc = await spawn("-m", "peer_fixtures.fake_app_server", "handshake-ok", "--log", str(log))
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            await c.handshake()
            tid = await c.thread()
            await c.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "hi"}]})
            got = await c.until(method_is("turn/completed"))
        assert "".join(m["params"]["delta"] for m in got if m.get("method") == "item/agentMessage/delta") == "Hello from the fake peer."
        await proc.stdin.aclose()
        assert await reap(proc) == 0
    finally:
        proc.kill()
        await reap(proc)
    entries = read_log(log)
    assert [e.get("method") for e in entries] == ["initialize", "initialized", "thread/start", "turn/start"]
    assert entries[0]["params"] == INIT


async def test_stdio_runnable_by_path_and_sleep_does_not_block_reading(tmp_path: Path) -> None:
    scenario = tmp_path / "slow.json"
    scenario.write_text(json.dumps({"name": "slow", "rules": [
        {"match": {"method": "model/list"}, "actions": [{"sleep": 0.5}, {"default": True}]}]}))
    proc = await spawn(str(ROOT / "peer_fixtures" / "fake_app_server.py"), str(scenario), cwd=tmp_path)
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            await c.handshake()
            slow = await c.request("model/list")
            fast = await c.request("skills/list")
            order = [(await c.recv())["id"], (await c.recv())["id"]]
        assert order == [fast, slow]
    finally:
        proc.kill()
        await reap(proc)


@pytest.mark.parametrize(("scenario", "code", "secret"), [("disconnect-mid-turn", 1, b"panicked"),
                                                          ("crash-before-ready", 3, b"sk-test-SECRET123")])
async def test_stdio_exit_codes(scenario: str, code: int, secret: bytes) -> None:
    proc = await spawn("-m", "peer_fixtures.fake_app_server", scenario)
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            if scenario == "crash-before-ready":
                await c.request("initialize", INIT)
            else:
                await c.handshake()
                tid = await c.thread()
                await c.request("turn/start", {"threadId": tid, "input": []})
            rest = await c.rest()
        assert "turn/completed" not in [m.get("method") for m in rest]
        assert await reap(proc) == code
        assert secret in await proc.stderr.receive_some(1 << 20)
    finally:
        proc.kill()
        await reap(proc)


async def test_r_wire_9_stdio_stderr_flood_read_concurrently() -> None:
    proc = await spawn("-m", "peer_fixtures.fake_app_server", "stderr-flood")
    drained = 0

    async def drain() -> None:
        nonlocal drained
        while chunk := await proc.stderr.receive_some(1 << 16):
            drained += len(chunk)

    try:
        with trio.fail_after(20):
            async with trio.open_nursery() as inner:
                inner.start_soon(drain)
                c = Client(proc.stdin, proc.stdout)
                await c.handshake()
                tid = await c.thread()
                await c.request("turn/start", {"threadId": tid, "input": []})
                await c.until(method_is("turn/completed"))
                await proc.stdin.aclose()
        assert drained == (256 + 32) * 4096
        assert await reap(proc) == 0
    finally:
        proc.kill()
        await reap(proc)


@pytest.mark.parametrize(("sigterm", "expect"), [("exit", 0), ("ignore", -signal.SIGKILL)])
async def test_stdio_sigterm_behaviour(tmp_path: Path, sigterm: str, expect: int) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"name": "s", "settings": {"sigterm": sigterm}}))
    proc = await spawn("-m", "peer_fixtures.fake_app_server", str(scenario))
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            await c.handshake()  # the handler is installed before the first answer
        proc.terminate()
        with trio.move_on_after(1 if sigterm == "ignore" else 10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
        assert await reap(proc) == expect
    finally:
        proc.kill()
        await reap(proc)


def test_stdio_bad_scenario_exits_2() -> None:
    done = subprocess.run([sys.executable, "-m", "peer_fixtures.fake_app_server", "no-such-scenario"],
                          cwd=ROOT, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and b"no such scenario" in done.stderr


def test_stdio_module_has_no_third_party_imports() -> None:
    code = ("import sys; import peer_fixtures.fake_app_server, peer_fixtures.scenario; "
            "bad = [m for m in ('trio', 'msgspec', 'attrs', 'cattrs', 'codexrt') if m in sys.modules]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=20,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
