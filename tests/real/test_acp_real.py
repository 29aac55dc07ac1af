"""``codexrt acp`` against the real ``codex app-server`` (pinned 0.171.0) and the loopback model
(issue 30 "Done when"; research ``acp.md`` §7: streaming exact, allow / reject / edit approvals,
cancel mid-stream and with a permission open, a permission left unanswered for 60 s, app-server
SIGKILL mid-turn, agent SIGKILL then load, a client that stops reading).

Same client as ``tests/e2e/test_acp_e2e.py`` (:class:`tests.acp_support.AcpAgent`): every agent
line is checked against the pinned official ACP schema, every request answered exactly once, and
stdin EOF must end the agent and the app-server within 2 s. Run only inside a loopback-only
network namespace::

    unshare -rn sh -c 'ip link set lo up && exec "$0" "$@"' .venv/bin/python -m pytest -q tests/real/test_acp_real.py
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import trio

from codexrt.loopback._model import Script
from tests._support import wait_until
from tests.acp_support import EXIT_BOUND, AcpAgent, agent_env, descendants
from tests.e2e.test_acp_e2e import PAUSE, error_data_mentions, option, selected

WAIT = 60.0  # a turn of the real binary on a loaded 2-core machine


def _args(codex_bin: Path, codex_home: Path) -> tuple[str, ...]:
    return ("--codex-bin", str(codex_bin), "--codex-home", str(codex_home))


def _open(tmp_path: Path, codex_bin: Path, codex_home: Path, real_env: dict[str, str], **kw: Any):
    return AcpAgent.open(tmp_path, *_args(codex_bin, codex_home), env=agent_env(tmp_path, real_env), **kw)


async def _session(agent: AcpAgent, cwd: Path) -> str:
    await agent.initialize()
    return await agent.new_session(cwd)


async def _asked_to_touch(agent: AcpAgent, cwd: Path, marker: Path) -> tuple[str, Any, dict[str, Any]]:
    """A new session whose first prompt has the model run ``touch marker``: (session id, the
    prompt's request id, the permission request it is waiting on)."""
    sid = await _session(agent, cwd)
    rid = await agent.prompt(sid, f"please [[mock:exec:touch {marker}]]")
    return sid, rid, await agent.agent_request("session/request_permission", timeout=WAIT)


def app_servers(agent: AcpAgent) -> list[int]:
    """The agent's live ``codex app-server`` descendants."""
    out = []
    for pid in descendants(agent.proc.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"app-server" in cmdline:
            out.append(pid)
    return out


def chunks_after(agent: AcpAgent, msg: dict[str, Any]) -> list[dict[str, Any]]:
    at = agent.lines.index(msg)
    return [m for m in agent.lines[at:] if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")]


def call_updates(agent: AcpAgent, sid: str, tool_call_id: str) -> list[dict[str, Any]]:
    return [u for u in agent.updates(sid) if u.get("toolCallId") == tool_call_id]


# -- streaming ----------------------------------------------------------------------------------


async def test_real_streaming_is_exact(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    text = "Real stream: ünïcødé 😀, \"quotes\", back\\slash,\nnew lines\tand tabs. " * 5
    mock_model.enqueue(Script.reply(text, deltas=40))
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        resp = await agent.response(await agent.prompt(sid, "stream something"), timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        assert agent.text(sid) == text
        assert chunks_after(agent, resp) == []
        assert len(mock_model.model_requests()) == 1


async def test_real_prompt_with_a_resource_link_and_an_embedded_resource(tmp_path, codex_bin, codex_home, real_env,
                                                                          real_cwd, mock_model):
    """``resource_link`` (baseline) and an embedded ``resource`` (advertised ``embeddedContext``)
    reach the model with the prompt (IDE context, R-CTX-1/R-CTX-3): the turn ends ``end_turn``
    and the request carries both."""
    (real_cwd / "a.py").write_text("print(1)\n")
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        caps = (await agent.initialize())["agentCapabilities"]
        assert caps["promptCapabilities"]["embeddedContext"] is True
        sid = await agent.new_session(real_cwd)
        resp = await agent.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "look at these"},
            {"type": "resource_link", "name": "a.py", "uri": (real_cwd / "a.py").as_uri()},
            {"type": "resource", "resource": {"uri": (real_cwd / "b.py").as_uri(), "mimeType": "text/x-python",
                                              "text": "EMBEDDED-CONTENT-42"}}]}, timeout=WAIT)
        assert "result" in resp and resp["result"]["stopReason"] == "end_turn", resp
        [rec] = mock_model.model_requests()
        body = json.dumps(rec.body)
        assert "look at these" in rec.last_user_text
        assert "EMBEDDED-CONTENT-42" in body and "a.py" in body


async def test_real_loopback_mode_runs_a_turn_offline(tmp_path, codex_bin, real_env):
    """``codexrt acp --loopback`` (docs/acp.md): the bundled loopback model and a throw-away
    ``CODEX_HOME`` — an editor can try the agent with no account."""
    ws = tmp_path / "ws"
    ws.mkdir()
    async with AcpAgent.open(tmp_path, "--loopback", "--codex-bin", str(codex_bin),
                             env=agent_env(tmp_path, real_env)) as agent:
        sid = await _session(agent, ws)
        resp = await agent.response(await agent.prompt(sid, "hello"), timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn" and agent.text(sid)


async def test_real_session_list_names_sessions_by_their_ids(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                              mock_model):
    """docs/acp.md: ``session/list`` lists the codex threads, each under the session id that
    created it; a listed session loads in a new agent process."""
    async with _open(tmp_path, codex_bin, codex_home, real_env, name="first") as agent:
        await agent.initialize()
        ids = [await agent.new_session(real_cwd) for _ in range(2)]
        for n, sid in enumerate(ids):
            resp = await agent.response(await agent.prompt(sid, f"question {n}"), timeout=WAIT)
            assert resp["result"]["stopReason"] == "end_turn"
        listed = await agent.call("session/list", {"cwd": str(real_cwd)}, timeout=WAIT)
        assert set(ids) <= {s["sessionId"] for s in listed["sessions"]}, listed
        assert all(s["cwd"] == str(real_cwd) for s in listed["sessions"] if s["sessionId"] in ids), listed
    async with _open(tmp_path, codex_bin, codex_home, real_env, name="second") as agent:
        await agent.initialize()
        listed = await agent.call("session/list", {}, timeout=WAIT)
        assert set(ids) <= {s["sessionId"] for s in listed["sessions"]}, listed
        loaded = await agent.request("session/load", {"sessionId": ids[1], "cwd": str(real_cwd), "mcpServers": []},
                                     timeout=WAIT)
        assert "result" in loaded and "question 1" in agent.text(ids[1], "user_message_chunk"), loaded


# -- approvals ----------------------------------------------------------------------------------


async def test_real_allow_once_runs_the_command(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    marker = real_cwd / "allowed"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid, rid, req = await _asked_to_touch(agent, real_cwd, marker)
        tc = req["params"]["toolCall"]
        assert not marker.exists()  # asked before anything ran: never granted by default
        await agent.answer(req, selected(option(req["params"]["options"], "allow_once")))
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        assert marker.exists()
        statuses = [u.get("status") for u in call_updates(agent, sid, tc["toolCallId"]) if u.get("status")]
        assert statuses and statuses[-1] == "completed", statuses
        kinds = {u.get("kind") for u in call_updates(agent, sid, tc["toolCallId"])} | {tc.get("kind")}
        assert "execute" in kinds, kinds
        assert "mock saw tool output" in agent.text(sid)


async def test_real_allow_always_is_remembered_for_the_session(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                               mock_model):
    marker = real_cwd / "always"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid, rid, req = await _asked_to_touch(agent, real_cwd, marker)
        await agent.answer(req, selected(option(req["params"]["options"], "allow_always")))
        assert (await agent.response(rid, timeout=WAIT))["result"]["stopReason"] == "end_turn"
        assert marker.exists()
        marker.unlink()
        # the same command again in this session runs without asking (asked, it would be refused)
        agent.handlers["session/request_permission"] = (
            lambda r: selected(option(r["params"]["options"], "reject_once")))
        again = await agent.response(await agent.prompt(sid, f"again [[mock:exec:touch {marker}]]"), timeout=WAIT)
        assert again["result"]["stopReason"] == "end_turn"
        assert marker.exists()
        assert len([m for m in agent.lines if m.get("method") == "session/request_permission"]) == 1


async def test_real_never_ask_is_an_explicit_choice(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    """By default every command asks; after ``approval`` = ``never`` (set on the session) the same
    kind of command runs unasked — on that session only."""
    asked_marker, unasked_marker, other_marker = real_cwd / "asked", real_cwd / "unasked", real_cwd / "other"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid, rid, req = await _asked_to_touch(agent, real_cwd, asked_marker)
        await agent.answer(req, selected(option(req["params"]["options"], "reject_once")))
        assert (await agent.response(rid, timeout=WAIT))["result"]["stopReason"] == "end_turn"
        assert not asked_marker.exists()
        changed = await agent.call("session/set_config_option", {"sessionId": sid, "configId": "approval",
                                                                  "value": "never"})
        assert [o["currentValue"] for o in changed["configOptions"] if o["id"] == "approval"] == ["never"]
        agent.handlers["session/request_permission"] = (  # asked now, it would be refused
            lambda r: selected(option(r["params"]["options"], "reject_once")))
        done = await agent.response(await agent.prompt(sid, f"[[mock:exec:touch {unasked_marker}]]"), timeout=WAIT)
        assert done["result"]["stopReason"] == "end_turn" and unasked_marker.exists()
        asks = len([m for m in agent.lines if m.get("method") == "session/request_permission"])
        assert asks == 1
        other = await agent.new_session(real_cwd)  # another session still asks (and is refused here)
        done = await agent.response(await agent.prompt(other, f"[[mock:exec:touch {other_marker}]]"), timeout=WAIT)
        assert done["result"]["stopReason"] == "end_turn" and not other_marker.exists()
        assert len([m for m in agent.lines if m.get("method") == "session/request_permission"]) == asks + 1


async def test_real_reject_once_declines_and_the_turn_goes_on(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                              mock_model):
    marker = real_cwd / "rejected"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid, rid, req = await _asked_to_touch(agent, real_cwd, marker)
        await agent.answer(req, selected(option(req["params"]["options"], "reject_once")))
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"  # the turn went on
        assert not marker.exists()
        reqs = mock_model.model_requests()
        assert len(reqs) == 2 and reqs[1].input[-1]["type"] == "function_call_output"  # the model saw the refusal
        tc_id = req["params"]["toolCall"]["toolCallId"]
        statuses = [u.get("status") for u in call_updates(agent, sid, tc_id) if u.get("status")]
        assert "completed" not in statuses and statuses[-1:] != ["in_progress"], statuses


async def test_real_edit_approval_carries_the_diff(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    target = real_cwd / "hello.txt"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        rid = await agent.prompt(sid, "add a file [[mock:patch:hello.txt:hello world]]")
        req = await agent.agent_request("session/request_permission", timeout=WAIT)
        tc = req["params"]["toolCall"]
        assert not target.exists()
        await agent.answer(req, selected(option(req["params"]["options"], "allow_once")))
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        assert target.read_text() == "hello world\n"
        shown = [tc, *call_updates(agent, sid, tc["toolCallId"])]
        assert "edit" in {u.get("kind") for u in shown}, shown
        diffs = [c for u in shown for c in (u.get("content") or []) if c.get("type") == "diff"]
        assert diffs, f"no diff content for the edit: {shown}"
        assert any(d["path"].endswith("hello.txt") and d["newText"] == "hello world\n" and not d.get("oldText")
                   for d in diffs), diffs


async def test_real_update_edit_shows_the_whole_old_and_new_text(tmp_path, codex_bin, codex_home, real_env,
                                                                  real_cwd, mock_model):
    """An *Update File* patch: the permission and the call's updates carry a ``diff`` with the whole
    file before and after (issue 30: "diff content holding the whole old and new text"), not the
    hunk's lines only."""
    target = real_cwd / "notes.txt"
    before = "".join(f"line {i}\n" for i in range(1, 21))
    after = before.replace("line 10\n", "line TEN\n")
    target.write_text(before)
    patch = ("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: notes.txt\n@@\n line 9\n-line 10\n+line TEN\n"
             " line 11\n*** End Patch\nEOF\n")
    mock_model.enqueue(Script("patch", cmd=patch))
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        rid = await agent.prompt(sid, "change line 10")
        req = await agent.agent_request("session/request_permission", timeout=WAIT)
        tc = req["params"]["toolCall"]
        assert target.read_text() == before  # asked before anything was written
        await agent.answer(req, selected(option(req["params"]["options"], "allow_once")))
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        assert target.read_text() == after
        shown = [tc, *call_updates(agent, sid, tc["toolCallId"])]
        diffs = [c for u in shown for c in (u.get("content") or []) if c.get("type") == "diff"]
        assert diffs, f"no diff content for the edit: {shown}"
        for d in diffs:
            assert d["path"].endswith("notes.txt") and d["oldText"] == before and d["newText"] == after, d
        # the replay of session/load shows the same whole texts, with the call's recorded status
        since = len(agent.lines)
        loaded = await agent.request("session/load", {"sessionId": sid, "cwd": str(real_cwd), "mcpServers": []},
                                     timeout=WAIT)
        assert "result" in loaded, loaded
        replay = [m["params"]["update"] for m in agent.lines[since:agent.lines.index(loaded)]
                  if m.get("method") == "session/update"]
        calls = [u for u in replay if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
        edits = [u for u in calls if u.get("kind") == "edit"
                 or any(c.get("type") == "diff" for c in u.get("content") or [])]
        assert edits, replay
        replayed = [c for u in edits for c in (u.get("content") or []) if c.get("type") == "diff"]
        assert replayed and all(d["oldText"] == before and d["newText"] == after for d in replayed), replayed
        assert [u.get("status") for u in edits if u.get("status")][-1] == "completed", edits


async def test_real_mcp_form_through_elicitation_create(tmp_path, codex_bin, real_env, real_cwd, mock_model):
    """A real MCP server's form (``peer_fixtures/mcp_server.py``, ``ask_form``): the tool call is a
    permission, the form an ``elicitation/create`` (the editor advertises ``elicitation.form``),
    and the values the user gave reach the MCP server with their types (R-INT-4)."""
    from peer_fixtures.codex_home import codex_env, make_codex_home
    from peer_fixtures.mcp_server import mcp_server_toml

    home = make_codex_home(tmp_path / "mcp-home", mock_model.base_url,
                           extra_toml=mcp_server_toml("testsrv", required=True))
    env = {**real_env, **codex_env(home)}
    form = {"name": "Ann", "age": 42, "ratio": 0.5, "subscribe": True, "colors": ["red", "blue"]}
    async with AcpAgent.open(tmp_path, *_args(codex_bin, home), env=agent_env(tmp_path, env)) as agent:
        await agent.initialize(client_capabilities={"fs": {"readTextFile": False, "writeTextFile": False},
                                                    "terminal": False, "elicitation": {"form": {}}})
        sid = await agent.new_session(real_cwd)
        rid = await agent.prompt(sid, "[[mock:mcp:testsrv:ask_form]]")
        req = await agent.agent_request("session/request_permission", timeout=WAIT)
        await agent.answer(req, selected(option(req["params"]["options"], "allow_once")))
        ask = await agent.agent_request("elicitation/create", timeout=WAIT)
        assert ask["params"]["mode"] == "form" and ask["params"].get("sessionId") == sid, ask
        assert {"name", "age", "ratio", "subscribe", "colors"} <= set(ask["params"]["requestedSchema"]["properties"])
        await agent.answer(ask, {"action": "accept", "content": form})
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        # the mock model quotes the tool's report of what it received (JSON inside JSON: unescape)
        report = agent.text(sid).replace("\\", "")
        assert '"action": "accept"' in report and '"value": "Ann"' in report, report
        assert '"type": "int", "value": 42' in report and '"type": "bool", "value": true' in report, report


# -- cancel -------------------------------------------------------------------------------------


async def test_real_cancel_mid_stream(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        rid = await agent.prompt(sid, "[[mock:deltas:400:20]] stream slowly")
        await agent.update("agent_message_chunk", sid, timeout=WAIT)  # mid-stream
        await agent.notify("session/cancel", {"sessionId": sid})
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "cancelled"
        assert chunks_after(agent, resp) == []
        nxt = await agent.response(await agent.prompt(sid, "after the cancel"), timeout=WAIT)
        assert nxt["result"]["stopReason"] == "end_turn"


async def test_real_cancel_with_a_permission_open(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    marker = real_cwd / "never"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid, rid, req = await _asked_to_touch(agent, real_cwd, marker)
        await agent.notify("session/cancel", {"sessionId": sid})
        withdrawn = await agent.notification("$/cancel_request", timeout=WAIT)
        assert withdrawn["params"]["requestId"] == req["id"]
        await agent.answer(req, {"outcome": {"outcome": "cancelled"}})
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "cancelled"
        assert not marker.exists()
        tc_id = req["params"]["toolCall"]["toolCallId"]
        statuses = [u.get("status") for u in call_updates(agent, sid, tc_id) if u.get("status")]
        assert "completed" not in statuses, statuses


async def test_real_permission_unanswered_for_60s_waits(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                        mock_model):
    """Nothing runs and the turn stays open while the user thinks (60 s), then the answer counts."""
    marker = real_cwd / "after-a-minute"
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid, rid, req = await _asked_to_touch(agent, real_cwd, marker)
        await agent.read_for(60.0)
        assert rid in agent.pending(), "the turn ended while its permission was unanswered"
        assert not marker.exists()
        assert [r for r in agent.held if r["id"] == req["id"]]
        assert not [m for m in agent.lines if m.get("method") == "$/cancel_request"]
        await agent.answer(req, selected(option(req["params"]["options"], "allow_once")))
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        assert marker.exists()


# -- failure and lifetime -----------------------------------------------------------------------


async def test_real_app_server_sigkill_mid_turn(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    """R-RT-4 on the real binary: the prompt fails once with ``CHILD_EXITED``, the next resumes the
    thread on a new child, the lost turn reached the model exactly once."""
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        warm = await agent.response(await agent.prompt(sid, "warm up the thread"), timeout=WAIT)
        assert warm["result"]["stopReason"] == "end_turn"
        rid = await agent.prompt(sid, "lost-turn-7f3a [[mock:hang]]")
        await wait_until(lambda: mock_model.requests_with_user_text("lost-turn-7f3a"), "the turn to reach the model",
                         timeout=WAIT)
        [pid] = app_servers(agent)
        os.kill(pid, signal.SIGKILL)
        failed = await agent.response(rid, timeout=WAIT)
        assert "error" in failed, f"a crashed turn is a JSON-RPC error: {failed}"
        assert error_data_mentions(failed["error"], "CHILD_EXITED"), failed
        nxt = await agent.response(await agent.prompt(sid, "after the crash"), timeout=WAIT)
        assert nxt["result"]["stopReason"] == "end_turn"
        assert app_servers(agent) and pid not in app_servers(agent)
        # research §7.5: a later load replays the interrupted message, no call left running
        since = len(agent.lines)
        loaded = await agent.request("session/load", {"sessionId": sid, "cwd": str(real_cwd), "mcpServers": []},
                                     timeout=WAIT)
        assert "result" in loaded, loaded
        replay = [m["params"]["update"] for m in agent.lines[since:agent.lines.index(loaded)]
                  if m.get("method") == "session/update"]
        user = "".join(u["content"].get("text", "") for u in replay if u["sessionUpdate"] == "user_message_chunk")
        assert "lost-turn-7f3a" in user and "after the crash" in user, user
        assert not [u for u in replay if u.get("status") in ("pending", "in_progress")], replay
    assert len(mock_model.requests_with_user_text("lost-turn-7f3a")) >= 1
    as_prompt = [r for r in mock_model.model_requests() if r.last_user_text.startswith("lost-turn-7f3a")]
    assert len(as_prompt) == 1, "the lost turn was re-sent to the model"
    after = mock_model.requests_with_user_text("after the crash")
    assert after and all(r.last_user_text.startswith("after the crash") for r in after)


async def test_real_agent_sigkill_then_load_in_a_new_process(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                             mock_model):
    marker = real_cwd / "loaded-marker"
    async with _open(tmp_path, codex_bin, codex_home, real_env, name="first", check_exit=False) as agent:
        sid = await _session(agent, real_cwd)
        agent.handlers["session/request_permission"] = (
            lambda req: selected(option(req["params"]["options"], "allow_once")))
        one = await agent.response(await agent.prompt(sid, "first question"), timeout=WAIT)
        assert one["result"]["stopReason"] == "end_turn"
        two = await agent.response(await agent.prompt(sid, f"run it [[mock:exec:touch {marker}]]"), timeout=WAIT)
        assert two["result"]["stopReason"] == "end_turn" and marker.exists()
        await agent.prompt(sid, "interrupted question [[mock:hang]]")
        await wait_until(lambda: mock_model.requests_with_user_text("interrupted question"), "the hung turn",
                         timeout=WAIT)
        agent.note_children()
        agent.proc.kill()
        await agent.proc.wait()
        # R-RT-7: its app-server dies with it (the teardown kills what would be left, on failure)
        await wait_until(lambda: not agent.children_alive(), "the SIGKILLed agent's children to exit", timeout=10)
    n_model = len(mock_model.model_requests())
    async with _open(tmp_path, codex_bin, codex_home, real_env, name="second") as agent:
        await agent.initialize()
        loaded = await agent.request("session/load", {"sessionId": sid, "cwd": str(real_cwd), "mcpServers": []},
                                     timeout=WAIT)
        assert "result" in loaded, loaded
        replay = agent.lines[:agent.lines.index(loaded)]
        updates = [m["params"]["update"] for m in replay if m.get("method") == "session/update"
                   and m["params"]["sessionId"] == sid]
        user = "".join(u["content"].get("text", "") for u in updates if u["sessionUpdate"] == "user_message_chunk")
        for text in ("first question", "run it", "interrupted question"):
            assert text in user, (text, user)
        agent_text = "".join(u["content"].get("text", "") for u in updates if u["sessionUpdate"] == "agent_message_chunk")
        assert "Hello from the mock model." in agent_text and "mock saw tool output" in agent_text
        calls: dict[str, str | None] = {}
        for u in updates:
            if u["sessionUpdate"] in ("tool_call", "tool_call_update"):
                calls[u["toolCallId"]] = u.get("status", calls.get(u["toolCallId"]))
        assert calls, "the executed command is not in the replay"
        assert not [s for s in calls.values() if s in ("pending", "in_progress")], calls  # no dead call shown live
        assert len(mock_model.model_requests()) == n_model  # load makes no model call
        nxt = await agent.response(await agent.prompt(sid, "after the reload"), timeout=WAIT)
        assert nxt["result"]["stopReason"] == "end_turn"


async def test_real_stdin_eof_mid_turn_leaves_no_child(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                       mock_model):
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        await agent.prompt(sid, "[[mock:hang]]")
        await wait_until(lambda: mock_model.model_requests(), "the model request", timeout=WAIT)
        assert set(app_servers(agent)) <= agent.note_children() and app_servers(agent)
        await agent.finish(bound=EXIT_BOUND, allow_unanswered=True)  # exit ≤ 2 s, the app-server gone too


async def test_real_client_that_stops_reading(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    """20,000 unpaced deltas while the client reads nothing for at least 8 s: the model's stream
    finishes during the pause (codex is never held back), then the text arrives byte-exact in at
    most 1,000 notifications (research §7.2)."""
    deltas = 20_000
    unit = "0123456789abcdefghijklmnopqrstuvwxyzäöü€😀 "
    text = (unit * (deltas * 6 // len(unit) + 1))[: deltas * 6]
    mock_model.enqueue(Script.reply(text, deltas=deltas))
    async with _open(tmp_path, codex_bin, codex_home, real_env) as agent:
        sid = await _session(agent, real_cwd)
        rid = await agent.prompt(sid, "flood me")
        paused_at = trio.current_time()
        await wait_until(lambda: [r for r in mock_model.model_requests() if r.outcome is not None],
                         "the model to finish its stream while the client is not reading", timeout=PAUSE)
        [rec] = mock_model.model_requests()
        assert rec.outcome not in ("client_disconnected",), rec.outcome
        await trio.sleep(max(0.0, PAUSE - (trio.current_time() - paused_at)))  # the scenario: 8 s unread
        resp = await agent.response(rid, timeout=WAIT)
        assert resp["result"]["stopReason"] == "end_turn"
        await agent.finish()  # read everything the agent still writes
        late = chunks_after(agent, resp)
        assert not late, (f"{len(late)} chunks ({sum(len(m['params']['update']['content']['text']) for m in late)} "
                          "chars) written after the prompt's answer: the turn's text overtaken by its end")
        got = agent.text(sid)
        assert len(got) == len(text) and got == text
        chunks = agent.updates(sid, "agent_message_chunk")
        assert len(chunks) <= 1_000, f"{len(chunks)} notifications for {deltas} deltas"
