"""``codexrt acp`` end to end, black-box: the agent runs as a real subprocess
(``python -m codexrt_cli acp --codex-bin <fake>``) against the scripted fake app-server, driven by
a raw NDJSON ACP client (:class:`tests.acp_support.AcpAgent`) written from the ACP v1 spec and
issue 30 (research acceptance criteria: ``shared/research/acp.md`` §7).

Testing charter (enforced by the client for every test, not per assertion):

* **every line** the agent writes is one JSON object fitting the pinned official ACP schema
  (``@agentclientprotocol/sdk`` ``schema/v1/schema.json``) as an agent message and as what it
  is (a response to the method we called, ``session/update``, ``session/request_permission``…);
  stdout carries protocol lines only;
* every request is answered exactly once, with its id (same JSON type);
* each test ends with stdin EOF: the agent exits within 2 s and no process it started is alive.

Every wait is bounded; no sleep orders anything (the one timed pause is the scenario itself: a
client that stops reading). The fake's ``--log`` proves what reached the app-server.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from peer_fixtures.fake_app_server import read_log
from tests._support import wait_until
from tests.acp_support import (
    EXIT_BOUND,
    ROOT,
    AcpAgent,
    acp_problem,
    fake_codex,
    fake_launches,
    fake_pids,
    require_acp_schema,
    still_running,
)

SCENARIOS = ROOT / "peer_fixtures" / "scenarios"
FAKE_TEXT = "Hello from the fake peer."  # the fake's default answer (docs/fake-peer.md)
PAUSE = 8.0  # how long the slow client reads nothing (research acp.md §7.2)


# -- helpers ---------------------------------------------------------------------------------


def scenario_file(tmp_path: Path, name: str, scenario: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(scenario))
    return str(path)


def bundled(name: str) -> dict[str, Any]:
    return json.loads((SCENARIOS / f"{name}.json").read_text())


def replies_to_approval(log: Path) -> list[Any]:
    """The decisions the app-server got for its approval request (id 0)."""
    return [m.get("result", {}).get("decision") if "result" in m else ("error", m["error"])
            for m in read_log(log) if m.get("id") == 0 and "method" not in m]


def turn_starts(log: Path) -> list[dict[str, Any]]:
    return [m for m in read_log(log) if m.get("method") == "turn/start"]


def option(options: list[dict[str, Any]], role: str) -> dict[str, Any]:
    """The permission option playing ``role``: ``allow_once``, ``allow_always``, ``reject_once``
    (decline this call, the turn goes on) or ``stop`` (stop the turn) — issue 30 asks for all
    four, the stop one separate from reject once."""
    kinds = [o["kind"] for o in options]
    if role in ("allow_once", "allow_always"):
        [opt] = [o for o in options if o["kind"] == role] or [None]
        assert opt is not None, f"no {role} option in {options}"
        return opt
    rejects = [o for o in options if o["kind"] in ("reject_once", "reject_always")]
    assert len(rejects) >= 2, f"issue 30: reject once and a separate turn-stopping option; got kinds {kinds}"

    def stops(o: dict[str, Any]) -> bool:
        words = f"{o['optionId']} {o['name']}".lower()
        return any(w in words for w in ("stop", "cancel", "abort", "interrupt", "end turn"))

    stop = [o for o in rejects if stops(o)]
    assert len(stop) == 1, f"cannot tell the turn-stopping option from reject once: {options}"
    if role == "stop":
        return stop[0]
    [once] = [o for o in rejects if o is not stop[0] and o["kind"] == "reject_once"] or [None]
    assert once is not None, f"no reject_once option besides the stop option: {options}"
    return once


def selected(opt: dict[str, Any]) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": opt["optionId"]}}


async def started(tmp_path: Path, agent: AcpAgent) -> str:
    """initialize + session/new in ``tmp_path/ws``; the session id."""
    await agent.initialize()
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return await agent.new_session(ws)


async def turn_running(tmp_path: Path, agent: AcpAgent, log: Path) -> tuple[str, Any]:
    """A new session whose prompt ("never ends", on the ``hang-turn`` fake) has reached the
    app-server: (session id, the prompt's request id)."""
    sid = await started(tmp_path, agent)
    rid = await agent.prompt(sid, "never ends")
    await wait_until(lambda: turn_starts(log), "the turn to start")
    return sid, rid


def error_data_mentions(error: dict[str, Any], code: str) -> bool:
    return code in json.dumps(error.get("data"))


# -- the pinned schema itself -------------------------------------------------------------------


def test_pinned_acp_schema_checks_what_the_tests_rely_on():
    """The validator the client uses is not vacuous: it rejects the mistakes issue 30 names."""
    require_acp_schema()
    assert acp_problem({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}}) is None
    assert acp_problem({"protocolVersion": "1"}, "InitializeResponse") is not None  # string version
    assert acp_problem({"stopReason": "failed"}, "PromptResponse") is not None  # no "failed" stop reason
    assert acp_problem({"id": 1, "result": {}}) is not None  # no "jsonrpc"
    assert acp_problem({"jsonrpc": "2.0", "id": 1.5, "result": {}}) is not None
    update = {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "txt"}}}
    assert acp_problem(update, "SessionNotification") is not None
    assert acp_problem({"sessionId": "s", "toolCall": {"toolCallId": "t"},
                        "options": [{"optionId": "a", "name": "Allow", "kind": "allow_sometimes"}]},
                       "RequestPermissionRequest") is not None


def test_missing_schema_skips_locally_and_fails_in_ci(monkeypatch, tmp_path):
    """Like the real-binary tests: without the pinned schema a test skips with the fix in the
    reason, unless ``CODEXRT_REQUIRE_REAL=1`` (CI), where it fails."""
    import tests.acp_support as support

    monkeypatch.setattr(support, "acp_schema_path", lambda: tmp_path / "missing" / "schema.json")
    monkeypatch.delenv("CODEXRT_REQUIRE_REAL", raising=False)
    with pytest.raises(pytest.skip.Exception, match="bash .ci/setup"):
        support.require_acp_schema()
    monkeypatch.setenv("CODEXRT_REQUIRE_REAL", "1")
    with pytest.raises(pytest.fail.Exception, match="CODEXRT_REQUIRE_REAL=1"):
        support.require_acp_schema()


# -- initialize and the JSON-RPC edges ----------------------------------------------------------


async def test_initialize_integer_version_and_honest_capabilities(tmp_path):
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        result = await agent.initialize()
        assert result["protocolVersion"] == 1 and type(result["protocolVersion"]) is int
        caps = result.get("agentCapabilities", {})
        assert caps.get("loadSession") is True  # session/load is part of issue 30
        prompt_caps = caps.get("promptCapabilities", {})
        assert prompt_caps.get("audio", False) is False  # codex takes no audio
        assert result.get("authMethods", []) == []  # a custom provider needs no login
        # a client that speaks a newer version gets the version the agent speaks
        again = await agent.request("initialize", {"protocolVersion": 7, "clientCapabilities": {}})
        if "result" in again:
            assert again["result"]["protocolVersion"] == 1
        # what is advertised works (docs/acp.md: sessions list / resume / close)
        session_caps = caps.get("sessionCapabilities") or {}
        assert {k for k, v in session_caps.items() if v is not None} >= {"list", "resume", "close"}, session_caps
        ws = tmp_path / "ws"
        ws.mkdir()
        sid = await agent.new_session(ws)
        assert (await agent.response(await agent.prompt(sid, "hi")))["result"]["stopReason"] == "end_turn"
        listed = await agent.call("session/list", {})
        assert isinstance(listed["sessions"], list)
        resumed = await agent.call("session/resume", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        assert isinstance(resumed, dict)
        await agent.call("session/close", {"sessionId": sid})
        # nothing the agent does not do is advertised
        assert not (session_caps.get("delete") or session_caps.get("additionalDirectories")), session_caps


async def test_malformed_requests_get_32602_naming_the_field(tmp_path):
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        bad = await agent.request("initialize", {"protocolVersion": "1"})
        assert bad["error"]["code"] == -32602 and "protocolVersion" in bad["error"]["message"], bad
        missing = await agent.request("initialize", {})
        assert missing["error"]["code"] == -32602 and "protocolVersion" in missing["error"]["message"], missing
        sid = await started(tmp_path, agent)
        no_prompt = await agent.request("session/prompt", {"sessionId": sid})
        assert no_prompt["error"]["code"] == -32602 and "prompt" in no_prompt["error"]["message"], no_prompt
        # acplint's mistake: `content` instead of `prompt` is not an empty prompt
        content = await agent.request("session/prompt", {"sessionId": sid, "content": [{"type": "text", "text": "x"}]})
        assert content["error"]["code"] == -32602 and "prompt" in content["error"]["message"], content
        no_cwd = await agent.request("session/new", {"mcpServers": []})
        assert no_cwd["error"]["code"] == -32602 and "cwd" in no_cwd["error"]["message"], no_cwd
        wrong_type = await agent.request("session/prompt", {"sessionId": sid, "prompt": "hello"})
        assert wrong_type["error"]["code"] == -32602 and "prompt" in wrong_type["error"]["message"], wrong_type
        bad_block = await agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "nonsense"}]})
        assert bad_block["error"]["code"] == -32602, bad_block
        # nothing of those reached the model, and the session still works
        ok = await agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert ok["result"]["stopReason"] == "end_turn"
        assert agent.text(sid) == FAKE_TEXT


async def test_unknown_method_32601_and_unknown_session(tmp_path):
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        await agent.initialize()
        unknown = await agent.request("session/frobnicate", {"sessionId": "x"})
        assert unknown["error"]["code"] == -32601, unknown
        # fs/* and terminal/* are client methods; sent to the agent they are unknown too
        fs = await agent.request("fs/read_text_file", {"sessionId": "x", "path": "/etc/hostname"})
        assert fs["error"]["code"] == -32601, fs
        nosuch = await agent.request("session/prompt", {"sessionId": "no-such-session",
                                                        "prompt": [{"type": "text", "text": "hi"}]})
        assert "error" in nosuch and nosuch["error"]["code"] != -32601, nosuch
        # unknown notifications get no answer (JSON-RPC), and break nothing
        await agent.notify("some/unknownNotification", {"x": 1})
        await agent.notify("$/cancel_request", {"requestId": "never-sent"})
        again = await agent.request("session/frobnicate", {})
        assert again["error"]["code"] == -32601


async def test_ids_of_every_json_type_are_echoed(tmp_path):
    """Ids of every JSON type echoed as they came (the ACP side of R-WIRE-2)."""
    ids = ["abc", "", "ü-ß-😀", "1", 1, 0, -7, 2**53 + 1, None]
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        await agent.initialize()
        # unknown-method errors and real answers both echo the id, of the same JSON type
        for rid in ids:
            resp = await agent.request("no/such/method", {}, id=rid)
            assert resp["id"] == rid and type(resp["id"]) is type(rid)
        ws = tmp_path / "ws"
        ws.mkdir()
        for rid in ("s-1", 12345):
            resp = await agent.request("session/new", {"cwd": str(ws), "mcpServers": []}, id=rid)
            assert type(resp["id"]) is type(rid) and "sessionId" in resp["result"]


async def test_non_json_line_32700_and_the_agent_goes_on(tmp_path):
    """A bad line gets an error and never stops the loop (R-D-4 for `serve`, here for ACP)."""
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        await agent.initialize()
        agent.expect_null_id_errors = 1
        await agent.send_raw(b"this is not json\n")
        err = await agent.next(lambda m: m.get("id") is None and "error" in m, what="the -32700 answer")
        assert err["error"]["code"] == -32700
        agent.expect_null_id_errors = 2
        await agent.send_raw(b"[1, 2, 3]\n")
        await agent.send_raw(b'{"jsonrpc": "2.0", "params": {}}\n')
        for _ in range(2):
            err = await agent.next(lambda m: m.get("id") is None and "error" in m, what="a -32600 answer")
            assert err["error"]["code"] == -32600, err
        await agent.send_raw(b"\xff\xfe not utf-8\n")  # answered -32700 (id null) or ignored: never fatal
        # a cut line: -32700 with the id read from it (docs/acp.md)
        agent.may_answer("trunc-1")
        await agent.send_raw(b'{"jsonrpc": "2.0", "id": "trunc-1", "method": "initialize", "params": {\n')
        cut = await agent.next(lambda m: "error" in m and m.get("id") == "trunc-1", what="the answer to a cut line")
        assert cut["error"]["code"] == -32700, cut
        agent.expect_null_id_errors = 1
        sid = await started(tmp_path, agent)
        resp = await agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert resp["result"]["stopReason"] == "end_turn"
        assert agent.text(sid) == FAKE_TEXT


# -- prompts ------------------------------------------------------------------------------------


async def test_new_then_prompt_streams_the_text_exactly(tmp_path):
    text = "Ünïcødé 😀 line one\nline two\t\"quoted\" \\ back\\slash " * 7
    sc = {"name": "acp-stream", "description": "one turn of 57 deltas", "rules": [],
          "settings": {"text": text, "deltas": 57}}
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, scenario_file(tmp_path, "acp-stream", sc), log=log)
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        sid = await started(tmp_path, agent)
        rid = await agent.prompt(sid, "say it")
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == "end_turn"
        assert agent.text(sid) == text  # byte-exact, nothing injected, nothing lost or doubled
        assert not [u for u in agent.updates(sid, "agent_message_chunk") if u["content"]["text"] == ""]
        answer_at = agent.lines.index(resp)
        assert not [m for m in agent.lines[answer_at:] if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]  # no chunk after the turn
        [start] = turn_starts(log)
        assert "say it" in json.dumps(start["params"])
        # a second prompt on the same session: same thread, its own text
        since = len(agent.lines)
        resp2 = await agent.response(await agent.prompt(sid, "again", id="p-2"))
        assert resp2["result"]["stopReason"] == "end_turn" and agent.text(sid, since=since) == text
        starts = turn_starts(log)
        assert len(starts) == 2 and starts[0]["params"]["threadId"] == starts[1]["params"]["threadId"]
        assert fake_launches(tmp_path) == 1


async def test_updates_plan_usage_title_and_no_warning_as_answer_text(tmp_path):
    """``plan`` from the todo list (whole plan, priority ``medium``), ``usage_update``,
    ``session_info_update`` with the thread title; warnings and retry errors are never shown
    as the agent's answer (research §4: both codex-acp adapters inject them). Plans: R-INT-5."""
    usage = {"totalTokens": 15, "inputTokens": 10, "cachedInputTokens": 0, "cacheWriteInputTokens": 0,
             "outputTokens": 5, "reasoningOutputTokens": 0}
    sc = {"name": "acp-updates", "description": "a turn with chatter", "rules": [
        {"match": {"method": "turn/start"}, "actions": [
            {"turn_response": True}, {"turn_started": True}, {"user_message": True},
            {"notify": "warning", "params": {"threadId": "$thread_id", "message": "WARNING-TEXT model metadata"}},
            {"notify": "error", "params": {"threadId": "$thread_id", "turnId": "$turn_id", "willRetry": True,
                                           "error": {"message": "RETRY-TEXT reconnecting 1/5", "codexErrorInfo": None,
                                                     "additionalDetails": None}}},
            {"notify": "turn/plan/updated", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                                       "explanation": None, "plan": [
                                                           {"step": "Read the code", "status": "completed"},
                                                           {"step": "Fix the bug", "status": "inProgress"},
                                                           {"step": "Run the tests", "status": "pending"}]}},
            {"notify": "thread/tokenUsage/updated", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                                               "tokenUsage": {"total": usage, "last": usage,
                                                                              "modelContextWindow": 258400}}},
            {"notify": "thread/name/updated", "params": {"threadId": "$thread_id", "threadName": "Fixing the bug"}},
            {"agent_message": "The answer.", "deltas": 2},
            {"end_turn": "completed"}]}],
          "settings": {}}
    cli = fake_codex(tmp_path, scenario_file(tmp_path, "acp-updates", sc))
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        sid = await started(tmp_path, agent)
        resp = await agent.response(await agent.prompt(sid, "fix it"))
        assert resp["result"]["stopReason"] == "end_turn"
        assert agent.text(sid) == "The answer."
        shown = json.dumps(agent.updates(sid, "agent_message_chunk") + agent.updates(sid, "agent_thought_chunk"))
        assert "WARNING-TEXT" not in shown and "RETRY-TEXT" not in shown
        [plan] = agent.updates(sid, "plan")
        assert plan["entries"] == [
            {"content": "Read the code", "priority": "medium", "status": "completed"},
            {"content": "Fix the bug", "priority": "medium", "status": "in_progress"},
            {"content": "Run the tests", "priority": "medium", "status": "pending"}]
        usages = agent.updates(sid, "usage_update")
        assert usages and usages[-1]["used"] == 15 and usages[-1]["size"] == 258400
        infos = agent.updates(sid, "session_info_update")
        assert infos and infos[-1].get("title") == "Fixing the bug", infos


async def test_two_sessions_run_turns_concurrently(tmp_path):
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, "hang-turn", log=log)
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        await agent.initialize()
        ws = tmp_path / "ws"
        ws.mkdir()
        a, b = await agent.new_session(ws), await agent.new_session(ws)
        assert a != b
        ra, rb = await agent.prompt(a, "one"), await agent.prompt(b, "two")
        # both turns run at once: a turn that never ends on one session does not queue the other
        await wait_until(lambda: len(turn_starts(log)) == 2, "both turns to start")
        await agent.notify("session/cancel", {"sessionId": b})
        assert (await agent.response(rb))["result"]["stopReason"] == "cancelled"
        assert ra in agent.pending()
        await agent.notify("session/cancel", {"sessionId": a})
        assert (await agent.response(ra))["result"]["stopReason"] == "cancelled"


async def test_config_options_ask_by_default_and_permissive_only_by_choice(tmp_path):
    """Approval mode "ask" (every command and edit asks: ``untrusted``) is the default; anything
    more permissive reaches the app-server only after ``session/set_config_option``; a value the
    option does not list is ``-32602`` naming it, and changes nothing."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok", log=log)) as agent:
        await agent.initialize()
        ws = tmp_path / "ws"
        ws.mkdir()
        new = await agent.call("session/new", {"cwd": str(ws), "mcpServers": []})
        sid = new["sessionId"]
        options = {o["id"]: o for o in new.get("configOptions") or []}
        [approval] = [o for o in options.values() if o.get("category") == "mode" or o["id"] == "approval"]
        assert approval["currentValue"] == "ask", approval
        values = [v["value"] for v in approval["options"]]
        assert "ask" in values and "model" in {o.get("category") for o in options.values()}
        assert (await agent.response(await agent.prompt(sid, "one")))["result"]["stopReason"] == "end_turn"
        [start] = [m for m in read_log(log) if m.get("method") == "thread/start"]
        [turn] = turn_starts(log)
        policies = {start["params"].get("approvalPolicy"), turn["params"].get("approvalPolicy")} - {None}
        assert policies == {"untrusted"}, (start, turn)  # asks for every command and edit
        bad = await agent.request("session/set_config_option", {"sessionId": sid, "configId": approval["id"],
                                                                 "value": "yolo"})
        assert bad["error"]["code"] == -32602 and "yolo" in bad["error"]["message"], bad
        unknown = await agent.request("session/set_config_option", {"sessionId": sid, "configId": "no-such-option",
                                                                     "value": "x"})
        assert unknown["error"]["code"] == -32602, unknown
        permissive = next(v for v in values if v != "ask")
        changed = await agent.call("session/set_config_option", {"sessionId": sid, "configId": approval["id"],
                                                                  "value": permissive})
        [now] = [o for o in changed["configOptions"] if o["id"] == approval["id"]]
        assert now["currentValue"] == permissive
        assert (await agent.response(await agent.prompt(sid, "two")))["result"]["stopReason"] == "end_turn"
        second = turn_starts(log)[1]["params"]
        assert second.get("approvalPolicy") not in (None, "untrusted"), second
        # another session still asks: the choice was this session's
        other = await agent.new_session(ws)
        assert (await agent.response(await agent.prompt(other, "three")))["result"]["stopReason"] == "end_turn"
        third = [m for m in read_log(log) if m.get("method") in ("thread/start", "turn/start")][-2:]
        assert {m["params"].get("approvalPolicy") for m in third} - {None} == {"untrusted"}, third


# -- approvals ----------------------------------------------------------------------------------


async def permission_for(agent: AcpAgent, sid: str) -> dict[str, Any]:
    req = await agent.agent_request("session/request_permission")
    params = req["params"]
    assert params["sessionId"] == sid
    assert params["toolCall"]["toolCallId"]
    return req


async def asked(tmp_path: Path, agent: AcpAgent) -> tuple[str, Any, dict[str, Any]]:
    """A new session whose first prompt ("run it") waits on a permission: (session id, the
    prompt's request id, the ``session/request_permission`` request)."""
    sid = await started(tmp_path, agent)
    rid = await agent.prompt(sid, "run it")
    return sid, rid, await permission_for(agent, sid)


async def test_permission_offers_allow_once_always_reject_once_and_stop(tmp_path):
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "reverse-approval", log=log)) as agent:
        sid, rid, req = await asked(tmp_path, agent)
        options = req["params"]["options"]
        ids = [o["optionId"] for o in options]
        assert len(set(ids)) == len(ids)
        for role in ("allow_once", "allow_always", "reject_once", "stop"):
            option(options, role)
        # the tool call was announced (tool_call before/with the request), as a command
        calls = agent.updates(sid, "tool_call")
        tc = req["params"]["toolCall"]
        assert any(c["toolCallId"] == tc["toolCallId"] for c in calls) or tc.get("title"), (calls, tc)
        # nothing was granted by asking: the app-server has had no answer yet
        assert replies_to_approval(log) == []
        await agent.answer(req, selected(option(options, "allow_once")))
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == "end_turn"
        assert replies_to_approval(log) == ["accept"]
        assert agent.text(sid) == "The command printed 42."
        done = [u for u in agent.updates(sid, "tool_call_update") if u["toolCallId"] == tc["toolCallId"]]
        assert done and done[-1].get("status") == "completed", done


@pytest.mark.parametrize("role, decisions, stop_reason", [
    ("allow_always", ("acceptForSession", "acceptWithExecpolicyAmendment"), "end_turn"),
    ("reject_once", ("decline",), "end_turn"),
    ("stop", ("cancel",), "cancelled"),
])
async def test_each_permission_option_reaches_the_app_server(tmp_path, role, decisions, stop_reason):
    """allow always → accept for the session; reject once → ``decline`` and the turn goes on (the
    model sees the refusal); the stop option → ``cancel``: the turn stops (R-INT-3)."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "reverse-approval", log=log)) as agent:
        sid, rid, req = await asked(tmp_path, agent)
        await agent.answer(req, selected(option(req["params"]["options"], role)))
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == stop_reason, resp
        [decision] = replies_to_approval(log)
        name = decision if isinstance(decision, str) else next(iter(decision))
        assert name in decisions, decision
        tc_id = req["params"]["toolCall"]["toolCallId"]
        statuses = [u.get("status") for u in agent.updates(sid, "tool_call_update") if u["toolCallId"] == tc_id]
        if role != "allow_always":  # declined: never shown as run
            assert "completed" not in statuses and "in_progress" not in statuses[-1:], statuses


@pytest.mark.parametrize("answer, decision, stop_reason", [
    ({"error": {"code": -32603, "message": "the editor crashed its dialog"}}, "decline", "end_turn"),
    ({"result": selected({"optionId": "not-offered"})}, "decline", "end_turn"),
    ({"result": {"outcome": {"outcome": "maybe"}}}, "decline", "end_turn"),
    ({"result": {"no": "outcome"}}, "decline", "end_turn"),
    ({"result": {"outcome": {"outcome": "cancelled"}}}, "cancel", "cancelled"),
], ids=["error", "not-offered", "unknown-outcome", "malformed", "cancelled"])
async def test_other_permission_answers_approve_nothing(tmp_path, answer, decision, stop_reason):
    """docs/acp.md: an error answer, an option not offered or a malformed answer is a
    ``decline``; an outcome ``cancelled`` stops the turn. Never an accept."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "reverse-approval", log=log)) as agent:
        sid, rid, req = await asked(tmp_path, agent)
        await agent.answer(req, answer.get("result"), error=answer.get("error"))
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == stop_reason, resp
        assert replies_to_approval(log) == [decision]


async def test_cancel_with_a_permission_open_withdraws_it(tmp_path):
    """The open permission is withdrawn (``$/cancel_request``) and declined — never granted
    (R-INT-3) — and the prompt answers ``cancelled``."""
    log = tmp_path / "fake.log"
    sc = bundled("reverse-approval")
    # like the real server, a reply that comes after turn/interrupt changes nothing (the bundled
    # rules would go on with the interrupted turn); the second turn is a plain one
    sc["rules"] = [{"match": {"method": "turn/start", "nth": 2}, "actions": [{"default": True}]},
                   *[r for r in sc["rules"] if "reply_to" not in r["match"]],
                   {"match": {"reply_to": 0}, "actions": []}]
    cli = fake_codex(tmp_path, scenario_file(tmp_path, "approval-then-plain", sc), log=log)
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        sid, rid, req = await asked(tmp_path, agent)
        await agent.notify("session/cancel", {"sessionId": sid})
        withdrawn = await agent.notification("$/cancel_request")
        assert withdrawn["params"]["requestId"] == req["id"] and type(withdrawn["params"]["requestId"]) is type(req["id"])
        # the client MUST answer its open request `cancelled` (ACP); the agent takes it quietly
        await agent.answer(req, {"outcome": {"outcome": "cancelled"}})
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == "cancelled"
        assert "accept" not in json.dumps(replies_to_approval(log))  # nothing approved
        assert any(m.get("method") == "turn/interrupt" for m in read_log(log)) or replies_to_approval(log) == ["cancel"]
        after = agent.lines.index(resp)
        assert not [m for m in agent.lines[after:] if m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
        # the session goes on
        since = len(agent.lines)
        assert (await agent.response(await agent.prompt(sid, "again")))["result"]["stopReason"] == "end_turn"
        assert agent.text(sid, since=since) == FAKE_TEXT


async def test_elicitation_without_client_support_gets_the_safe_negative_answer(tmp_path):
    """An MCP elicitation (here the MCP tool-call approval) with a client that does not advertise
    ``elicitation``: never an accept."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "mcp-elicitation", log=log)) as agent:
        sid = await started(tmp_path, agent)
        agent.handlers["session/request_permission"] = lambda req: {"outcome": {"outcome": "cancelled"}}
        resp = await agent.response(await agent.prompt(sid, "use the tool"))
        assert "result" in resp or "error" in resp
        replies = [m for m in read_log(log) if m.get("id") == 0 and "method" not in m]
        assert replies, "the elicitation was never answered"
        assert all(m.get("result", {}).get("action") != "accept" for m in replies), replies
        assert not [m for m in agent.lines if m.get("method") == "elicitation/create"]


async def test_mcp_form_goes_to_elicitation_create_when_the_client_advertises_it(tmp_path):
    """The MCP tool-call approval is a permission; the MCP server's own form becomes
    ``elicitation/create`` (form mode, the requested schema, this session) and the user's answer
    reaches the app-server as given (R-INT-4)."""
    log = tmp_path / "fake.log"
    form = {"name": "Ada", "age": 36, "ratio": 0.5, "subscribe": True, "colors": ["red", "blue"]}
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "mcp-elicitation", log=log)) as agent:
        await agent.initialize(client_capabilities={"fs": {"readTextFile": False, "writeTextFile": False},
                                                    "terminal": False, "elicitation": {"form": {}}})
        ws = tmp_path / "ws"
        ws.mkdir()
        sid = await agent.new_session(ws)
        rid = await agent.prompt(sid, "use the tool")
        req = await agent.agent_request("session/request_permission")
        assert replies_to_approval(log) == []
        await agent.answer(req, selected(option(req["params"]["options"], "allow_once")))
        ask = await agent.agent_request("elicitation/create")
        params = ask["params"]
        assert params["mode"] == "form" and params.get("sessionId") == sid, params
        assert set(params["requestedSchema"]["properties"]) >= {"name", "age", "ratio", "subscribe", "colors"}
        assert "Please fill the test form." in params["message"]
        await agent.answer(ask, {"action": "accept", "content": form})
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == "end_turn"
        [reply] = [m for m in read_log(log) if m.get("id") == 1 and "method" not in m]
        assert reply["result"]["action"] == "accept" and reply["result"]["content"] == form, reply
        assert agent.text(sid) == "Form handled."


QUESTIONS_TURN = {"name": "acp-questions", "description": "a turn that asks two questions", "rules": [
    {"match": {"method": "turn/start"}, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"user_message": True},
        {"request": "item/tool/requestUserInput", "params": {
            "threadId": "$thread_id", "turnId": "$turn_id", "itemId": "call_q", "isBlocking": True, "questions": [
                {"id": "color", "header": "Colour", "question": "Which colour?", "isOther": False, "isSecret": False,
                 "options": [{"label": "red", "description": "warm"}, {"label": "blue", "description": "cool"}]},
                {"id": "name", "header": "Name", "question": "Your name?", "isOther": False, "isSecret": False,
                 "options": None}]}}]},
    {"match": {"reply_to": 0}, "actions": [{"agent_message": "Thanks."}, {"end_turn": "completed"}]}],
    "settings": {}}


@pytest.mark.parametrize("form_capable, action", [(True, "accept"), (True, "decline"), (False, None)],
                         ids=["form-accept", "form-decline", "no-elicitation-capability"])
async def test_request_user_input_goes_to_elicitation_create(tmp_path, form_capable, action):
    """``requestUserInput`` questions become one ``elicitation/create`` form when the editor
    advertises ``elicitation.form``; the answers reach codex per question. Declined, or with no
    such capability, codex gets the safe negative answer (no answer is made up)."""
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, scenario_file(tmp_path, "acp-questions", QUESTIONS_TURN), log=log)
    caps: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    if form_capable:
        caps["elicitation"] = {"form": {}}
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        await agent.initialize(client_capabilities=caps)
        ws = tmp_path / "ws"
        ws.mkdir()
        sid = await agent.new_session(ws)
        rid = await agent.prompt(sid, "ask me")
        if form_capable:
            ask = await agent.agent_request("elicitation/create")
            schema = ask["params"]["requestedSchema"]
            assert ask["params"]["mode"] == "form" and {"color", "name"} <= set(schema["properties"]), ask
            await agent.answer(ask, {"action": "accept", "content": {"color": "blue", "name": "Ada"}}
                               if action == "accept" else {"action": action})
        resp = await agent.response(rid)
        assert resp["result"]["stopReason"] == "end_turn"
        [reply] = [m for m in read_log(log) if m.get("id") == 0 and "method" not in m]
        answers = (reply.get("result") or {}).get("answers")
        if action == "accept":
            assert answers == {"color": {"answers": ["blue"]}, "name": {"answers": ["Ada"]}}, reply
        else:
            assert not any(a.get("answers") for a in (answers or {}).values()), reply
        assert not [m for m in agent.lines if m.get("method") == "elicitation/create"] or form_capable


# -- cancel -------------------------------------------------------------------------------------


async def test_cancel_mid_turn_answers_cancelled_and_interrupts(tmp_path):
    """session/cancel → turn/interrupt, the prompt answered ``cancelled`` (R-OP-5)."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "hang-turn", log=log)) as agent:
        sid = await started(tmp_path, agent)
        for round_ in range(3):
            rid = await agent.prompt(sid, f"round {round_}")
            await wait_until(lambda: len(turn_starts(log)) > round_, "the turn to start")
            await agent.notify("session/cancel", {"sessionId": sid})
            resp = await agent.response(rid)
            assert resp["result"]["stopReason"] == "cancelled"
            after = agent.lines.index(resp)
            assert not [m for m in agent.lines[after:] if m.get("method") == "session/update"
                        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
        interrupts = [m for m in read_log(log) if m.get("method") == "turn/interrupt"]
        assert len(interrupts) >= 3 and len(turn_starts(log)) == 3  # (a retried interrupt is harmless)
        # a cancel with nothing running is a no-op (a notification: no answer)
        await agent.notify("session/cancel", {"sessionId": sid})


async def test_cancel_request_of_a_prompt_answers_it(tmp_path):
    """``$/cancel_request`` for our ``session/prompt``: the prompt is answered once — ``-32800``
    or ``cancelled`` — and the turn is interrupted."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "hang-turn", log=log)) as agent:
        sid = await started(tmp_path, agent)
        rid = await agent.prompt(sid, "long", id="prompt-x")
        await wait_until(lambda: turn_starts(log), "the turn to start")
        await agent.notify("$/cancel_request", {"requestId": rid})
        resp = await agent.response(rid)
        assert resp.get("error", {}).get("code") == -32800 or resp["result"]["stopReason"] == "cancelled", resp
        await wait_until(lambda: any(m.get("method") == "turn/interrupt" for m in read_log(log)), "turn/interrupt")


# -- failure and lifetime -----------------------------------------------------------------------


async def test_app_server_crash_fails_the_prompt_once_and_the_next_one_resumes(tmp_path):
    """R-RT-4: a crash settles the running prompt once (an error with ``CHILD_EXITED``); the
    next prompt resumes the same thread on a new child; the lost turn is never re-sent."""
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, "disconnect-mid-turn", "handshake-ok", log=log)
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        sid = await started(tmp_path, agent)
        first = await agent.response(await agent.prompt(sid, "first prompt, crashes"))
        assert "error" in first, f"a crashed turn is a JSON-RPC error, never a stop reason: {first}"
        assert error_data_mentions(first["error"], "CHILD_EXITED"), first
        assert "Partial answer" not in first["error"]["message"]
        second = await agent.response(await agent.prompt(sid, "second prompt"))
        assert second["result"]["stopReason"] == "end_turn", second
        assert agent.text(sid).endswith(FAKE_TEXT)
        starts = turn_starts(log)
        firsts = [s for s in starts if "first prompt, crashes" in json.dumps(s["params"])]
        assert len(firsts) == 1, f"the crashed turn was re-sent: {len(firsts)} turn/start"
        assert len(starts) == 2
        assert fake_launches(tmp_path) == 2
        assert starts[0]["params"]["threadId"] == starts[1]["params"]["threadId"]  # the same session resumed


async def test_stdin_eof_mid_turn_exits_fast_and_leaves_no_child(tmp_path):
    """stdin EOF ends the agent within 2 s with every child reaped (R-OP-5 drain, R-RT-7)."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "hang-turn", log=log)) as agent:
        await turn_running(tmp_path, agent, log)
        kids = agent.note_children()
        assert fake_pids(tmp_path) and set(fake_pids(tmp_path)) <= kids, "the app-server is not the agent's child"
        code = await agent.finish(bound=EXIT_BOUND, allow_unanswered=True)  # exit ≤ 2 s, every child gone
        assert code == 0, agent.stderr()[-2000:]


async def test_stdin_eof_with_a_permission_open_grants_nothing(tmp_path):
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "reverse-approval", log=log)) as agent:
        sid = await started(tmp_path, agent)
        await agent.prompt(sid, "run it")
        await permission_for(agent, sid)
        assert await agent.finish(bound=EXIT_BOUND, allow_unanswered=True) == 0  # exit ≤ 2 s, no child left
    assert "accept" not in json.dumps(replies_to_approval(log))


async def test_a_line_over_the_limit_is_32600_and_the_agent_goes_on(tmp_path):
    cli = fake_codex(tmp_path, "handshake-ok")
    async with AcpAgent.open(tmp_path, "--codex-bin", cli, "--max-line-bytes", "4096") as agent:
        await agent.initialize()
        agent.may_answer("big-1")
        big = {"jsonrpc": "2.0", "id": "big-1", "method": "session/new", "params": {"cwd": "/" + "x" * 10_000,
                                                                                   "mcpServers": []}}
        await agent.send_msg(big)
        err = await agent.next(lambda m: "error" in m and m.get("id") in ("big-1", None), what="the oversize answer")
        assert err["error"]["code"] == -32600, err
        sid = await started(tmp_path, agent)  # a line within the limit still works
        assert (await agent.response(await agent.prompt(sid, "hi")))["result"]["stopReason"] == "end_turn"


async def test_hostile_lines_never_kill_the_agent(tmp_path):
    """Whatever arrives on stdin is answered (or, for what is no request, ignored) and the agent
    goes on: objects as ids, a method that is no string, 100,000-deep nesting, a 4 MB line, NUL
    bytes, invalid UTF-8 inside a string, an empty object."""
    hostile = [
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{"protocolVersion":1}}',
        b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":true,"method":"initialize"}',
        b'{"jsonrpc":"2.0","method":42}',
        b"{}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jsonrpc":"2.0","method":"some/notification","params":{"x":"' + b"a" * (4 << 20) + b'"}}',
        b"\x00\x00\x00",
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"\xff\xfe"}}',
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"'
        + "\udc80".encode("utf-8", "surrogatepass") + b'"}}',  # a lone surrogate, encoded anyway
        b'{"jsonrpc":"2.0","method":"session/cancel","params":"not an object"}',
    ]
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        agent.expect_null_id_errors = len(hostile)
        for line in hostile:
            await agent.send_raw(line + b"\n")
        sid = await started(tmp_path, agent)
        resp = await agent.response(await agent.prompt(sid, "still there?"))
        assert resp["result"]["stopReason"] == "end_turn" and agent.text(sid) == FAKE_TEXT
        errors = [m for m in agent.lines if m.get("id") is None and "error" in m]
        assert all(e["error"]["code"] in (-32700, -32600, -32602) for e in errors), errors


async def test_session_close_stops_the_turn_and_retires_its_child(tmp_path):
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "hang-turn", log=log)) as agent:
        sid, rid = await turn_running(tmp_path, agent, log)
        [child] = fake_pids(tmp_path)
        closed = await agent.request("session/close", {"sessionId": sid})
        assert closed.get("result") == {}, closed
        assert (await agent.response(rid))["result"]["stopReason"] == "cancelled"
        await wait_until(lambda: not still_running(child, None), "the session's app-server to be retired")
        # the closed session no longer takes prompts
        gone = await agent.response(await agent.prompt(sid, "again"))
        assert "error" in gone and gone["error"]["code"] != -32601, gone


async def test_sigterm_ends_like_stdin_eof(tmp_path):
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "hang-turn", log=log),
                             check_exit=False) as agent:
        await turn_running(tmp_path, agent, log)
        agent.note_children()
        agent.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(EXIT_BOUND):
            while await agent.read_one() is not None:
                pass
            code = await agent.proc.wait()
            while agent.children_alive():  # another process's state: polled
                await trio.sleep(0.01)
        assert code in (0, -signal.SIGTERM, 128 + signal.SIGTERM), code


async def test_sigkilled_agent_leaves_no_app_server_behind(tmp_path):
    """R-RT-7: even SIGKILLed mid-turn, the agent's app-server child exits with it."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "hang-turn", log=log),
                             check_exit=False) as agent:
        await turn_running(tmp_path, agent, log)
        assert set(fake_pids(tmp_path)) <= agent.note_children()
        agent.proc.kill()
        await agent.proc.wait()
        await wait_until(lambda: not agent.children_alive(), "the SIGKILLed agent's children to exit", timeout=10)


async def test_stdin_eof_while_idle_exits_zero(tmp_path):
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        sid = await started(tmp_path, agent)
        assert (await agent.response(await agent.prompt(sid, "hi")))["result"]["stopReason"] == "end_turn"
        assert await agent.finish(bound=EXIT_BOUND) == 0


async def test_a_client_that_stops_reading_gets_the_text_merged_and_exact(tmp_path):
    """20,000 deltas while the client reads nothing: the app-server is never held back (it
    finishes the turn and answers a later request during the pause), the text arrives byte-exact
    in far fewer notifications than deltas (research §7.2: ≤ 1,000)."""
    deltas = 20_000
    unit = "abcdefghijklmnopqrstuvwxyzÄÖÜ€😀0123456789"
    text = (unit * (deltas * 8 // len(unit) + 1))[: deltas * 8]
    sc = {"name": "acp-flood", "description": "20,000 deltas then a late server request", "rules": [
        {"match": {"method": "turn/start"}, "actions": [
            {"turn_response": True}, {"turn_started": True}, {"user_message": True},
            {"agent_message": text, "deltas": deltas}, {"end_turn": "completed"},
            {"request": "item/unknownThing/request", "id": 777, "params": {"threadId": "$thread_id"}}]}],
          "settings": {}}
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, scenario_file(tmp_path, "acp-flood", sc), log=log)
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        sid = await started(tmp_path, agent)
        rid = await agent.prompt(sid, "flood me")
        paused_at = trio.current_time()
        # the client reads nothing for 8 s (the research's scenario); within that pause the
        # app-server streams all and its last message is answered
        await wait_until(lambda: any(m.get("id") == 777 and "method" not in m for m in read_log(log)),
                         "the app-server to finish its stream while the client is not reading", timeout=PAUSE)
        [late] = [m for m in read_log(log) if m.get("id") == 777 and "method" not in m]
        assert late["error"]["code"] == -32601  # unknown server request: answered, not granted
        await trio.sleep(max(0.0, PAUSE - (trio.current_time() - paused_at)))
        resp = await agent.response(rid, timeout=60)
        assert resp["result"]["stopReason"] == "end_turn"
        await agent.finish()  # read everything the agent still writes
        at = agent.lines.index(resp)
        late = [m for m in agent.lines[at:] if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
        assert not late, f"{len(late)} chunks written after the prompt's answer: the text overtaken by the turn's end"
        got = agent.text(sid)
        assert len(got) == len(text) and got == text
        chunks = agent.updates(sid, "agent_message_chunk")
        assert len(chunks) <= 1_000, f"{len(chunks)} notifications for {deltas} deltas: not merged"


async def test_load_replays_the_conversation_before_answering(tmp_path):
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        sid = await started(tmp_path, agent)
        assert (await agent.response(await agent.prompt(sid, "first question")))["result"]["stopReason"] == "end_turn"
        since = len(agent.lines)
        ws = tmp_path / "ws"
        loaded = await agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        assert "result" in loaded, loaded
        replay = agent.lines[since:agent.lines.index(loaded)]
        kinds = [m["params"]["update"]["sessionUpdate"] for m in replay if m.get("method") == "session/update"]
        user = "".join(m["params"]["update"]["content"].get("text", "") for m in replay
                       if m.get("method") == "session/update"
                       and m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        assert "first question" in user, kinds
        assert FAKE_TEXT in agent.text(sid, since=since), kinds
        # resume never replays
        since = len(agent.lines)
        resumed = await agent.request("session/resume", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        if "result" in resumed:
            assert not [m for m in agent.lines[since:] if m.get("method") == "session/update"
                        and m["params"]["update"]["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")]
