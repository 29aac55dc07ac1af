"""MCP against the real ``codex app-server`` (pinned) running a real MCP server (R-INT-4,
R-PRIV-1..3, R-H-4, R-CAT-1).

The MCP server is ``peer_fixtures/mcp_server.py`` (official ``mcp`` SDK), started by the
app-server from the throw-away ``CODEX_HOME``'s ``[mcp_servers.testsrv]``; the loopback model
calls its tools with ``[[mock:mcp:testsrv:<tool>]]`` (a ``function_call`` in the namespace
``mcp__testsrv``). Every MCP tool call first asks for approval (``approvalPolicy: untrusted``)
as a field-less elicitation, which codexrt surfaces as an ``mcpToolApproval``. The tools report
what they received (action, values and their Python types) in their result, so each test
checks what reached the MCP server, not only what codexrt sent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig, Settings
from codexrt._features._catalog import mcp_status, reload_mcp
from codexrt._features._history import open_history_reader, transcript_to_json
from codexrt._runtime._interaction_policies import decline_all
from codexrt._sansio._privacy import MASK
from peer_fixtures.codex_home import codex_env, make_codex_home
from peer_fixtures.mcp_server import mcp_server_toml
from peer_fixtures.mock_responses import Script
from tests._support import process_alive, wait_until

WAIT = 60
SERVER = "testsrv"
SECRET = "correct-horse-7f3a9"


@pytest.fixture
def mcp_home(tmp_path: Path, mock_model) -> Path:
    return make_codex_home(tmp_path / "codex-home", mock_model.base_url,
                           extra_toml=mcp_server_toml(SERVER, required=True))


@pytest.fixture
def mcp_env(mcp_home: Path, tmp_path: Path) -> dict[str, str]:
    return codex_env(mcp_home, extra={"CODEXRT_PRIVACY_DIR": str(tmp_path / "privacy")})


def _config(codex_bin, env, home, cwd) -> RuntimeConfig:
    return RuntimeConfig(codex_bin=str(codex_bin), env=env, cwd=str(cwd), codex_home=str(home),
                         settings=Settings(cwd=str(cwd), approval_policy="untrusted", sandbox="read-only"))


def _interaction(rt, key):
    (inter,) = [i for i in rt.pending_interactions() if i.key == key]
    return inter


async def _ready_thread(rt) -> str:
    """A thread whose MCP server is up. Without ``required = true`` the app-server starts a
    thread's MCP servers in the background and does not wait for them before the first model
    request, so a first turn may not be offered ``mcp__testsrv`` yet: warm the thread up until
    ``ready`` is announced (the fixture's server is ``required``; this is for the others)."""
    seen_ready, thread_id = False, None
    with rt.subscribe() as events, trio.fail_after(WAIT):
        op = rt.send("warm up")
        async for ev in events:
            if ev.kind == "nativeNotification" and ev.payload["method"] == "mcpServer/startupStatus/updated":
                p = ev.payload["params"]
                assert p["name"] == SERVER and p["status"] in ("starting", "ready"), p
                seen_ready = seen_ready or p["status"] == "ready"
            if ev.kind == "operationDone" and ev.client_operation_id == op.id:
                thread_id = ev.payload["threadId"]
            if seen_ready and thread_id is not None:
                return thread_id
    raise AssertionError("unreachable")


async def _run(rt, message, on_interaction, thread_id=None):
    """Send ``message`` (a new thread unless ``thread_id``; the fixture's MCP server is
    ``required``, so the first request already offers its tools); hand every interaction to
    ``on_interaction(inter)``; return (events, result)."""
    op = rt.send(message, thread_id=thread_id)
    events = []
    with trio.fail_after(WAIT):
        async for ev in op.events():
            events.append(ev)
            if ev.kind == "interactionRequested" and not ev.payload.get("replayed") and on_interaction is not None:
                await on_interaction(_interaction(rt, ev.payload["interactionKey"]))
            if ev.kind == "operationDone":
                break
    return events, await op.wait()


def _mcp_items(events):
    return [e.payload["item"] for e in events
            if e.kind == "itemCompleted" and e.payload["item"].get("type") == "mcpToolCall"]


def _tool_report(item) -> dict:
    (block,) = [b for b in item["result"]["content"] if b["type"] == "text"]
    return json.loads(block["text"])


async def test_r_int_4_real_tool_approval_then_form_typed_per_schema(codex_bin, mcp_env, mcp_home, real_cwd,
                                                                     mock_model):
    asked = []

    async def answer(inter):
        asked.append(inter.to_wire())
        if inter.kind == "mcpToolApproval":
            await inter.accept()
        else:  # the host's text boxes give strings; codexrt restores the schema's types
            await inter.submit_elicitation({"name": "Ann", "age": "42", "ratio": "0.5", "subscribe": "yes",
                                            "colors": "red, blue", "nickname": ""})

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f"[[mock:mcp:{SERVER}:ask_form]]", answer)
    assert result.status == "completed"
    approval, form = asked
    assert approval["kind"] == "mcpToolApproval"
    ta = approval["elicitation"]["toolApproval"]
    assert ta["tool"] == "ask_form" and ta["persistChoices"] == ["session", "always"] and ta["params"] == {}
    assert form["kind"] == "elicitation" and form["elicitation"]["mode"] == "form"
    fields = {f["id"]: f for f in form["elicitation"]["fields"]}
    assert {k: (f["type"], f["required"]) for k, f in fields.items()} == {
        "name": ("string", True), "age": ("integer", True), "ratio": ("number", True),
        "subscribe": ("boolean", True), "colors": ("array", True), "nickname": ("string", False)}
    assert [o["value"] for o in fields["colors"]["options"]] == ["red", "green", "blue"]
    (item,) = _mcp_items(events)
    assert item["status"] == "completed" and item["server"] == SERVER and item["tool"] == "ask_form"
    report = _tool_report(item)
    assert report["action"] == "accept"
    assert report["values"] == {"name": {"value": "Ann", "type": "str"}, "age": {"value": 42, "type": "int"},
                                "ratio": {"value": 0.5, "type": "float"},
                                "subscribe": {"value": True, "type": "bool"},
                                "colors": {"value": ["red", "blue"], "type": "list"}}
    resolved = [e for e in events if e.kind == "interactionResolved"]
    assert len(resolved) == 2  # serverRequest/resolved closed both requests
    # what the model is offered: the MCP tools as one namespace (the mock's call names it so)
    first = mock_model.model_requests()[0].body["tools"]
    (ns,) = [t for t in first if t.get("type") == "namespace" and t.get("name") == f"mcp__{SERVER}"]
    assert {"echo", "ask_form", "rich"} <= {t["name"] for t in ns["tools"]}


async def test_r_int_4_real_form_declined_and_cancelled(codex_bin, mcp_env, mcp_home, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        async def decline(inter):
            if inter.kind == "mcpToolApproval":
                await inter.accept_for_session()  # remembered: the second call is not asked again
            else:
                await inter.decline_elicitation()

        ev1, r1 = await _run(rt, f"[[mock:mcp:{SERVER}:ask_form]]", decline)
        tid = r1.thread_id
        kinds = []

        async def cancel(inter):
            kinds.append(inter.kind)
            await inter.cancel()

        ev2, r2 = await _run(rt, f"[[mock:mcp:{SERVER}:ask_form]]", cancel, thread_id=tid)
    assert r1.status == r2.status == "completed"
    assert _tool_report(_mcp_items(ev1)[0]) == {"action": "decline"}
    assert _tool_report(_mcp_items(ev2)[0]) == {"action": "cancel"}
    assert kinds == ["elicitation"]  # the session-wide approval held


async def test_r_int_4_real_tool_approval_declined_by_policy(codex_bin, mcp_env, mcp_home, real_cwd):
    """Never granted by default: the built-in policy declines, and the tool does not run."""
    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        rt.set_interaction_policy(decline_all)

        events, result = await _run(rt, f'[[mock:mcp:{SERVER}:echo:{{"text": "must not run"}}]]', None)
    asked = [e.payload for e in events if e.kind == "interactionRequested"]
    assert [a["kind"] for a in asked] == ["mcpToolApproval"]
    answered = [e.payload for e in events if e.kind == "interactionAnswered"]
    assert [a["by"] for a in answered] == ["policy"]
    (item,) = _mcp_items(events)
    assert item["status"] == "failed" and item["result"] is None
    assert item["error"] == {"message": "user rejected MCP tool call"}
    assert result.status == "completed"


async def test_r_int_4_real_url_elicitation_cancelled_without_opening(codex_bin, mcp_env, mcp_home, real_cwd):
    seen = []

    async def answer(inter):
        if inter.kind == "mcpToolApproval":
            await inter.accept()
        else:
            seen.append(inter.to_wire()["elicitation"])
            await inter.cancel()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f"[[mock:mcp:{SERVER}:ask_url]]", answer)
    (el,) = seen
    assert el["mode"] == "url" and el["url"] == "https://example.invalid/codexrt-test"
    assert el["elicitationId"] == "elic-test-1"
    assert _tool_report(_mcp_items(events)[0]) == {"action": "cancel"}
    assert result.status == "completed"


async def test_r_h_4_real_mcp_image_and_structured_content(codex_bin, mcp_env, mcp_home, real_cwd):
    async def approve(inter):
        await inter.accept()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f"[[mock:mcp:{SERVER}:rich]]", approve)
        async with open_history_reader(rt) as reader:
            tr = await reader.read_thread(result.thread_id)
    (rec,) = [r for r in tr.records() if r.kind == "mcpToolCall"]
    assert rec.status == "completed" and rec.server == SERVER and rec.tool == "rich"
    assert [b.type for b in rec.content] == ["text", "image"]
    assert rec.content[1].image.kind == "data" and rec.content[1].image.mime_type == "image/png"
    assert rec.structured_content == {"answer": 42, "items": ["a", "b"]}


async def test_r_cat_1_real_mcp_status_and_reload(codex_bin, mcp_env, mcp_home, real_cwd):
    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        st = await mcp_status(rt)
        (srv,) = st.servers
        assert srv["name"] == SERVER
        assert {"echo", "rich", "fail", "slow", "ask_form", "ask_url", "ask_secret"} <= set(srv["tools"])
        assert srv["tools"]["echo"]["inputSchema"]["required"] == ["text"]
        assert "added_tool" not in srv["tools"]
        # the user edits the config: the server now offers one more tool
        cfg = mcp_home / "config.toml"
        cfg.write_text(cfg.read_text().replace(
            mcp_server_toml(SERVER, required=True),
            mcp_server_toml(SERVER, required=True, env={"MCP_TEST_EXTRA_TOOL": "added_tool"})))
        await reload_mcp(rt)
        with trio.fail_after(WAIT):  # the reload restarts the servers in the background
            while True:
                (srv,) = (await mcp_status(rt)).servers
                if "added_tool" in srv["tools"]:
                    break
                await trio.sleep(0.2)


def _no_secret(text: str, where: str) -> None:
    assert SECRET not in text, f"the secret answer leaked into {where}"


async def test_r_priv_2_real_secret_answer_masked_in_native_and_rollout_history(
        tmp_path, codex_bin, mcp_env, mcp_home, real_cwd, mock_model):
    """A careless MCP server puts the secret answer in its result, so the app-server's history
    holds it; every history codexrt renders masks it — native, rollout, ``codexrt show --json``."""
    async def answer(inter):
        if inter.kind == "mcpToolApproval":
            await inter.accept()
        else:
            await inter.submit_elicitation({"passphrase": SECRET})

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        tid = await _ready_thread(rt)
        # the model must not repeat the tool output itself (assistant text is never masked)
        mock_model.enqueue(Script.mcp_tool(SERVER, "ask_secret", {"echo": True}), Script.reply("Passphrase handled."))
        events, result = await _run(rt, "use the passphrase tool", answer, thread_id=tid)
        assert result.status == "completed"
        (item,) = _mcp_items(events)
        assert _tool_report(item)["passphrase"] == SECRET  # the MCP server really got it (and echoed it)
        answered = [e.to_wire() for e in events if e.kind.startswith("interaction")]
        _no_secret(json.dumps(answered), "interaction events")
        async with open_history_reader(rt) as reader:
            native = await reader.read_thread(tid)
        index = rt.privacy_index()
    assert native.source == "native"
    native_json = json.dumps(transcript_to_json(native))
    _no_secret(native_json, "the native transcript")
    (rec,) = [r for r in native.records() if r.kind == "mcpToolCall" and r.tool == "ask_secret"]
    assert [b.text for b in rec.content] == [MASK] and rec.structured_content == {"result": MASK}
    # the rollout file holds the answer in clear (the app-server wrote it); codexrt's reader masks it
    rollouts = list((mcp_home / "sessions").rglob("*.jsonl"))
    assert any(SECRET in p.read_text() for p in rollouts)
    async with open_history_reader(None, codex_home=mcp_home, privacy=index) as reader:
        legacy = await reader.read_thread(tid)
    assert legacy.source == "legacy"
    _no_secret(json.dumps(transcript_to_json(legacy)), "the rollout transcript")
    (lrec,) = [r for r in legacy.records() if r.kind == "mcpToolCall" and r.tool == "ask_secret"]
    assert all(b.text in (None, MASK) for b in lrec.content)
    # the CLI, offline (rollout) with the same privacy index
    with trio.fail_after(WAIT):
        proc = await trio.run_process(
            [sys.executable, "-m", "codexrt_cli", "show", tid, "--json", "--offline", "--codex-home", str(mcp_home)],
            capture_stdout=True, capture_stderr=True, env=mcp_env, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    _no_secret(proc.stdout.decode() + proc.stderr.decode(), "codexrt show")
    assert MASK in proc.stdout.decode()
    for f in (tmp_path / "privacy").iterdir():
        _no_secret(f.read_text(), f"the privacy index ({f.name})")


async def test_r_h_4_real_show_json_has_mcp_image_and_structured_content(codex_bin, mcp_env, mcp_home, real_cwd):
    async def approve(inter):
        await inter.accept()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        _, result = await _run(rt, f"[[mock:mcp:{SERVER}:rich]]", approve)
    assert result.status == "completed"
    for extra in ((), ("--offline",)):  # the app-server's history, then the rollout file
        with trio.fail_after(WAIT):
            proc = await trio.run_process(
                [sys.executable, "-m", "codexrt_cli", "show", result.thread_id, "--json", "--codex-home",
                 str(mcp_home), "--codex-bin", str(codex_bin), *extra],
                capture_stdout=True, capture_stderr=True, env=mcp_env, check=False)
        assert proc.returncode == 0, proc.stderr.decode()
        doc = json.loads(proc.stdout)
        recs = [r for t in doc["turns"] for r in t["records"] if r["kind"] == "mcpToolCall"]
        (rec,) = recs
        assert rec["server"] == SERVER and rec["tool"] == "rich" and rec["status"] == "completed", extra
        assert rec["structuredContent"] == {"answer": 42, "items": ["a", "b"]}, extra
        image = [b for b in rec["content"] if b["type"] == "image"]
        assert image and image[0]["image"]["mimeType"] == "image/png", (extra, rec["content"])


# -- through ``codexrt serve`` --------------------------------------------------------------------


def _serve_args(codex_bin, home, cwd):
    return ("--codex-bin", str(codex_bin), "--codex-home", str(home), "--cwd", str(cwd))


async def _serve_ready_thread(sp) -> str:
    first = await sp.request("codex.send", {"channelId": "c", "message": "warm up",
                                            "settings": {"approvalPolicy": "untrusted", "sandbox": "read-only"}})
    tid = first["result"]["threadId"]
    await sp.event("nativeNotification", lambda l: l["payload"]["method"] == "mcpServer/startupStatus/updated"
                   and l["payload"]["params"]["status"] == "ready" and l["threadId"] == tid, timeout=WAIT)
    return tid


async def _serve_answer(sp, answers_by_kind) -> list[dict]:
    """Answer the interactions of one send with ``codex.respondInteraction`` until ``answers_by_kind``
    (kind → raw result) is used up; return the ``interactionRequested`` payloads."""
    asked = []
    for kind, result in answers_by_kind:
        line = await sp.event("interactionRequested", lambda l, k=kind: l["payload"]["kind"] == k, timeout=WAIT)
        p = line["payload"]
        asked.append(p)
        ok = await sp.request("codex.respondInteraction", {"channelId": "c", "interactionKey": p["interactionKey"],
                                                           "dialogToken": p["dialogToken"], "result": result})
        assert ok["ok"] is True, ok
    return asked


async def test_r_int_4_real_serve_form_typed_and_secret_absent_from_every_output(
        tmp_path, codex_bin, mcp_env, mcp_home, real_cwd):
    from tests.e2e.test_serve_e2e import ServeProcess

    async with ServeProcess.open(tmp_path, *_serve_args(codex_bin, mcp_home, real_cwd), env=mcp_env) as sp:
        tid = await _serve_ready_thread(sp)
        rid = await sp.send("codex.send", {"channelId": "c", "threadId": tid,
                                           "message": f"[[mock:mcp:{SERVER}:ask_form]]"})
        form_answer = {"action": "accept", "content": {"name": "Bo", "age": 7, "ratio": 0.25, "subscribe": False,
                                                       "colors": ["green"], "nickname": "b"}}
        approval, form = await _serve_answer(sp, [("mcpToolApproval", {"action": "accept", "content": {}}),
                                                  ("elicitation", form_answer)])
        assert approval["elicitation"]["toolApproval"]["tool"] == "ask_form"
        assert [f["id"] for f in form["elicitation"]["fields"]] == ["age", "colors", "name", "nickname", "ratio",
                                                                      "subscribe"]
        reply = await sp.response(rid, timeout=WAIT)
        assert reply["result"]["status"] == "completed"
        (item,) = [l["payload"]["item"] for l in sp.lines if l["type"] == "daemon" and l["kind"] == "itemCompleted"
                   and l["payload"]["item"]["type"] == "mcpToolCall"]
        assert _tool_report(item)["values"] == {
            "name": {"value": "Bo", "type": "str"}, "age": {"value": 7, "type": "int"},
            "ratio": {"value": 0.25, "type": "float"}, "subscribe": {"value": False, "type": "bool"},
            "colors": {"value": ["green"], "type": "list"}, "nickname": {"value": "b", "type": "str"}}

        # a secret question, answered through serve: the answer reaches the MCP server only
        rid = await sp.send("codex.send", {"channelId": "c", "threadId": tid,
                                           "message": f"[[mock:mcp:{SERVER}:ask_secret]]"})
        approval, secret_q = await _serve_answer(sp, [("mcpToolApproval", {"action": "accept", "content": {}}),
                                                      ("elicitation", {"action": "accept",
                                                                       "content": {"passphrase": SECRET}})])
        reply = await sp.response(rid, timeout=WAIT)
        assert reply["result"]["status"] == "completed"
        items = [l["payload"]["item"] for l in sp.lines if l["type"] == "daemon" and l["kind"] == "itemCompleted"
                 and l["payload"]["item"]["type"] == "mcpToolCall"]
        assert _tool_report(items[-1]) == {"action": "accept", "length": len(SECRET)}

        # a badly typed answer is refused by codexrt, never forwarded
        rid = await sp.send("codex.send", {"channelId": "c", "threadId": tid,
                                           "message": f"[[mock:mcp:{SERVER}:ask_form]]"})
        await _serve_answer(sp, [("mcpToolApproval", {"action": "accept", "content": {}, "_meta": {"persist": "session"}})])
        line = await sp.event("interactionRequested", lambda l: l["payload"]["kind"] == "elicitation"
                              and l["turnId"] != form["params"]["turnId"], timeout=WAIT)
        p = line["payload"]
        bad = await sp.request("codex.respondInteraction", {
            "channelId": "c", "interactionKey": p["interactionKey"], "dialogToken": p["dialogToken"],
            "result": {"action": "accept", "content": {"name": "x", "age": "7", "ratio": 1, "subscribe": True,
                                                       "colors": ["red"]}}})  # age: a string, not an integer
        assert bad["ok"] is False and bad["error"]["code"] == "INTERACTION_INVALID_REPLY"
        ok = await sp.request("codex.respondInteraction", {
            "channelId": "c", "interactionKey": p["interactionKey"], "dialogToken": p["dialogToken"],
            "result": {"action": "decline", "content": None}})
        assert ok["ok"] is True
        reply = await sp.response(rid, timeout=WAIT)
        assert reply["result"]["status"] == "completed"
        assert await sp.finish(timeout=WAIT) == 0
    _no_secret(json.dumps(sp.lines), "serve's stdout")
    _no_secret(sp.stderr(), "serve's stderr")
    for p in mcp_home.rglob("*"):
        if p.is_file():
            _no_secret(p.read_text(errors="replace"), str(p.relative_to(mcp_home)))
    for f in (tmp_path / "privacy").iterdir():
        _no_secret(f.read_text(), f"the privacy index ({f.name})")


async def test_r_cat_1_real_serve_get_mcp_status_and_reload(tmp_path, codex_bin, mcp_env, mcp_home, real_cwd):
    from tests.e2e.test_serve_e2e import ServeProcess

    async with ServeProcess.open(tmp_path, *_serve_args(codex_bin, mcp_home, real_cwd), env=mcp_env) as sp:
        st = await sp.request("codex.getMcpStatus", {"channelId": "c"})
        (srv,) = st["result"]["data"]
        assert srv["name"] == SERVER and "ask_form" in srv["tools"] and "added_tool" not in srv["tools"]
        cfg = mcp_home / "config.toml"
        cfg.write_text(cfg.read_text().replace(
            mcp_server_toml(SERVER, required=True),
            mcp_server_toml(SERVER, required=True, env={"MCP_TEST_EXTRA_TOOL": "added_tool"})))
        reloaded = await sp.request("codex.reloadMcp", {"channelId": "c"})
        assert reloaded["ok"] is True and reloaded["result"] == {}
        with trio.fail_after(WAIT):
            while True:
                st = await sp.request("codex.getMcpStatus", {"channelId": "c"})
                (srv,) = st["result"]["data"]
                if "added_tool" in srv["tools"]:
                    break
                await trio.sleep(0.2)
        assert await sp.finish(timeout=WAIT) == 0


async def test_r_int_4_real_titled_schema_is_cancelled_by_the_app_server(codex_bin, mcp_env, mcp_home, real_cwd):
    """docs/real-server-notes.md row 17: the SDK's ``ctx.elicit`` schema (top-level ``title``) never
    reaches the client; 0.169.0 answers ``cancel`` itself. When a new pin fixes that, this fails."""
    kinds = []

    async def answer(inter):
        kinds.append(inter.kind)
        await inter.accept()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f"[[mock:mcp:{SERVER}:ask_titled]]", answer)
    assert kinds == ["mcpToolApproval"]
    assert _tool_report(_mcp_items(events)[0]) == {"action": "cancel"}


async def test_r_h_4_real_failing_mcp_tool_is_a_failed_record(codex_bin, mcp_env, mcp_home, real_cwd):
    async def approve(inter):
        await inter.accept()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f"[[mock:mcp:{SERVER}:fail]]", approve)
        async with open_history_reader(rt) as reader:
            tr = await reader.read_thread(result.thread_id)
    (item,) = _mcp_items(events)
    assert item["status"] == "failed"  # isError: true
    (rec,) = [r for r in tr.records() if r.kind == "mcpToolCall"]
    assert rec.status == "failed" and [b.text for b in rec.content] == ["the tool failed on purpose"]
    assert result.status == "completed"  # a failed tool does not fail the turn


async def test_r_op_5_real_abort_while_an_mcp_tool_runs(codex_bin, mcp_env, mcp_home, real_cwd):
    """A slow MCP tool is running (approved, item started): aborting ends the turn interrupted,
    bounded, and the runtime goes on."""
    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        tid = await _ready_thread(rt)
        op = rt.send(f'[[mock:mcp:{SERVER}:slow:{{"seconds": 50}}]]', thread_id=tid)
        with trio.fail_after(WAIT):
            approved = False
            async for ev in op.events():
                if ev.kind == "interactionRequested":
                    await _interaction(rt, ev.payload["interactionKey"]).accept()
                    approved = True
                if approved and ev.kind == "interactionResolved":
                    break
        with trio.fail_after(20):  # far below the tool's 50 s
            await op.abort()
            result = await op.wait()
        assert result.status == "interrupted"
        _, again = await _run(rt, f'[[mock:mcp:{SERVER}:echo:{{"text": "after"}}]]', _accept_all, thread_id=tid)
        assert again.status == "completed"


async def _accept_all(inter):
    await inter.accept()



async def test_r_rt_4_real_mcp_server_does_not_outlive_the_runtime(tmp_path, codex_bin, mock_model, real_cwd):
    """Closing the runtime while an MCP tool runs: the app-server child is reaped, and the MCP
    server it started (a grandchild) is gone too, within a bound."""
    pids = tmp_path / "mcp-pids"
    pids.mkdir()
    home = make_codex_home(tmp_path / "home-pids", mock_model.base_url,  # not required: _ready_thread waits
                           extra_toml=mcp_server_toml(SERVER, env={"MCP_TEST_PID_DIR": str(pids)}))
    env = codex_env(home, extra={"CODEXRT_PRIVACY_DIR": str(tmp_path / "privacy")})
    async with codexrt.open_runtime(_config(codex_bin, env, home, real_cwd)) as rt:
        tid = await _ready_thread(rt)
        op = rt.send(f'[[mock:mcp:{SERVER}:slow:{{"seconds": 50}}]]', thread_id=tid)
        with trio.fail_after(WAIT):
            async for ev in op.events():
                if ev.kind == "interactionRequested":
                    await _interaction(rt, ev.payload["interactionKey"]).accept()
                if ev.kind == "interactionResolved":
                    break
        started = [int(p.name) for p in pids.iterdir()]
        assert started and all(process_alive(p) for p in started)
    # far below the tool's 50 s
    await wait_until(lambda: not any(process_alive(p) for p in started), "the MCP servers' processes to end",
                     timeout=20)


async def test_r_op_4_real_required_mcp_server_that_cannot_start_fails_the_send(tmp_path, codex_bin, mock_model,
                                                                                 real_cwd):
    """``required = true`` and the server cannot start: the app-server refuses to create the
    thread; the send fails with its message, nothing reaches the model."""
    home = make_codex_home(tmp_path / "home-broken", mock_model.base_url, extra_toml=(
        mcp_server_toml(SERVER, required=True)
        + '[mcp_servers.broken]\ncommand = "/nonexistent/mcp-server"\nrequired = true\n'))
    env = codex_env(home, extra={"CODEXRT_PRIVACY_DIR": str(tmp_path / "privacy")})
    async with codexrt.open_runtime(_config(codex_bin, env, home, real_cwd)) as rt:
        op = rt.send("hello")
        with trio.fail_after(WAIT):
            result = await op.wait()
    assert result.status == "failed"
    assert "required MCP servers failed to initialize" in result.error.message
    assert "broken" in result.error.message
    assert mock_model.model_requests() == []


async def test_r_priv_2_real_old_binary_mcp_approval_and_secret_masked_in_its_rollout(
        tmp_path, codex_bin_old, mock_model, real_cwd):
    """0.147.0: the approval has no ``_meta.tool_name`` (the tool comes from the message) and
    the rollout records the call as ``mcp_tool_call_end``; the secret is masked there too."""
    home = make_codex_home(tmp_path / "home-old", mock_model.base_url, extra_toml=mcp_server_toml(SERVER, required=True))
    env = codex_env(home, extra={"CODEXRT_PRIVACY_DIR": str(tmp_path / "privacy")})
    tools = []

    async def answer(inter):
        if inter.kind == "mcpToolApproval":
            tools.append(inter.elicitation().tool_name)
            await inter.accept()
        else:
            await inter.submit_elicitation({"passphrase": SECRET})

    async with codexrt.open_runtime(_config(codex_bin_old, env, home, real_cwd)) as rt:
        mock_model.enqueue(Script.mcp_tool(SERVER, "ask_secret", {"echo": True}), Script.reply("Passphrase handled."))
        events, result = await _run(rt, "use the passphrase tool", answer)
        index = rt.privacy_index()
    assert result.status == "completed" and tools == ["ask_secret"]
    assert _tool_report(_mcp_items(events)[0])["passphrase"] == SECRET
    rollouts = list((home / "sessions").rglob("*.jsonl"))
    assert any(SECRET in p.read_text() for p in rollouts) and any(
        "mcp_tool_call_end" in p.read_text() for p in rollouts)
    async with open_history_reader(None, codex_home=home, privacy=index) as reader:
        legacy = await reader.read_thread(result.thread_id)
    _no_secret(json.dumps(transcript_to_json(legacy)), "the 0.147 rollout transcript")
    (rec,) = [r for r in legacy.records() if r.kind == "mcpToolCall"]
    assert rec.tool == "ask_secret" and all(b.text in (None, MASK) for b in rec.content)


async def test_r_int_4_real_tool_approval_cancelled_fails_the_call_turn_goes_on(codex_bin, mcp_env, mcp_home,
                                                                              real_cwd):
    async def cancel(inter):
        await inter.cancel()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f'[[mock:mcp:{SERVER}:echo:{{"text": "x"}}]]', cancel)
    (item,) = _mcp_items(events)
    assert item["status"] == "failed" and item["result"] is None
    assert item["error"] == {"message": "user cancelled MCP tool call"}
    assert result.status == "completed"


async def test_r_int_4_real_url_elicitation_accepted_after_the_user_opened_it(codex_bin, mcp_env, mcp_home,
                                                                             real_cwd):
    """codexrt never opens the URL; once the *user* did, ``accept_url_elicitation()`` sends
    ``{action: accept, content: null}`` and the MCP server sees the accept."""
    opened = []

    async def answer(inter):
        if inter.kind == "mcpToolApproval":
            await inter.accept()
        else:
            opened.append(inter.elicitation().url)  # stands for the user opening it in a browser
            await inter.accept_url_elicitation()

    async with codexrt.open_runtime(_config(codex_bin, mcp_env, mcp_home, real_cwd)) as rt:
        events, result = await _run(rt, f"[[mock:mcp:{SERVER}:ask_url]]", answer)
    assert opened == ["https://example.invalid/codexrt-test"]
    assert _tool_report(_mcp_items(events)[0]) == {"action": "accept"}
