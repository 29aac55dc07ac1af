"""Review of ``codexrt acp`` (issue 30) from an editor author's side: regressions for what a
client driving it only from ``docs/acp.md`` and the ACP spec found wrong. Black-box, against the
scripted fake app-server, every line checked against the pinned official schema
(``tests/acp_support.AcpAgent``)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import trio

from peer_fixtures.fake_app_server import read_log
from tests._support import process_alive, wait_until
from tests.acp_support import ROOT, TEARDOWN_BOUND, AcpAgent, agent_env, descendants, fake_codex


async def _started(tmp_path: Path, agent: AcpAgent) -> Path:
    await agent.initialize()
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


async def test_load_of_an_unknown_session_is_a_typed_error_not_an_internal_one(tmp_path):
    """``session/load`` of an id that names no session and no thread: the app-server's refusal
    reaches the editor as codexrt's typed error (its ``code`` in ``data``), like
    ``session/resume`` of the same id — never ``-32603`` "internal error ...: ExceptionGroup"
    (the history reader's nursery wrapped the error in a group)."""
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        ws = await _started(tmp_path, agent)
        params = {"sessionId": "no-such-session", "cwd": str(ws), "mcpServers": []}
        load = await agent.request("session/load", params)
        resume = await agent.request("session/resume", {"sessionId": "no-such-session", "cwd": str(ws)})
        assert "error" in load and "error" in resume, (load, resume)
        assert load["error"]["code"] != -32603, load
        assert "ExceptionGroup" not in load["error"]["message"], load
        assert load["error"]["data"]["code"] == resume["error"]["data"]["code"], (load, resume)
        assert "internal error" not in agent.stderr(), agent.stderr()
        # the failed load left no session behind: a prompt on it is refused as unknown
        nosuch = await agent.request("session/prompt", {"sessionId": "no-such-session",
                                                        "prompt": [{"type": "text", "text": "hi"}]})
        assert nosuch["error"]["code"] == resume["error"]["code"] or "no such session" in nosuch["error"]["message"]
        assert await agent.finish() == 0


async def test_cancel_request_of_a_prompt_with_a_permission_open_withdraws_it_and_closes_the_call(tmp_path):
    """``$/cancel_request`` of a ``session/prompt`` while its command waits for the editor's
    permission (what the ACP SDKs send when the editor drops the prompt's request): before the
    ``-32800`` answer the permission request is withdrawn (``$/cancel_request`` of its id) and
    the command's tool call is closed (``failed``) — as after ``session/cancel`` — so no editor
    is left with a dialog or a spinner of a turn that is over; codex is never told ``accept``."""
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, str(ROOT / "peer_fixtures" / "scenarios" / "reverse-approval.json"), log=log)
    async with AcpAgent.open(tmp_path, "--codex-bin", cli) as agent:
        ws = await _started(tmp_path, agent)
        sid = (await agent.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]
        rid = await agent.prompt(sid, "run it")
        perm = await agent.agent_request("session/request_permission")
        call_id = perm["params"]["toolCall"]["toolCallId"]
        await agent.notify("$/cancel_request", {"requestId": rid})
        answer = await agent.response(rid)
        assert answer["error"]["code"] == -32800, answer
        before = agent.lines[:agent.lines.index(answer)]
        assert [m for m in before if m.get("method") == "$/cancel_request"
                and m["params"]["requestId"] == perm["id"]], "the permission request was not withdrawn first"
        closed = [m["params"]["update"] for m in before if m.get("method") == "session/update"
                  and m["params"]["update"].get("toolCallId") == call_id
                  and m["params"]["update"].get("status") in ("failed", "completed")]
        assert closed and closed[-1]["status"] == "failed", f"the tool call {call_id} was left running"
        assert "accept" not in [m.get("result", {}).get("decision") for m in read_log(log)
                                if m.get("id") == 0 and "method" not in m]
        assert await agent.finish() == 0


async def test_a_cwd_that_is_not_a_directory_is_refused_at_session_new(tmp_path):
    """``session/new`` (and ``session/load``/``session/resume``) with a ``cwd`` that does not
    exist or is a file — an editor whose project folder was deleted or moved — is ``-32602``
    naming ``cwd`` at once, not a session whose every prompt fails ``-32603`` "codex app-server
    could not be started: no usable Codex CLI … Hint: Update the Codex CLI" (the child is
    spawned in that directory)."""
    log = tmp_path / "fake.log"
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok", log=log)) as agent:
        ws = await _started(tmp_path, agent)
        a_file = ws / "file.txt"
        a_file.write_text("x")
        for cwd in (tmp_path / "gone", a_file):
            new = await agent.request("session/new", {"cwd": str(cwd), "mcpServers": []})
            load = await agent.request("session/load", {"sessionId": "s", "cwd": str(cwd), "mcpServers": []})
            resume = await agent.request("session/resume", {"sessionId": "s", "cwd": str(cwd)})
            for answer in (new, load, resume):
                assert answer.get("error", {}).get("code") == -32602, answer
                assert "cwd" in answer["error"]["message"], answer
        assert not log.exists() or not read_log(log), "no app-server is started for a refused cwd"
        ok = await agent.call("session/new", {"cwd": str(ws), "mcpServers": []})  # a directory is fine
        assert ok["sessionId"]
        assert await agent.finish() == 0


async def test_list_with_a_cursor_the_server_refuses_is_32602_naming_the_cursor(tmp_path):
    """``session/list`` with a ``cursor`` the app-server refuses (codex 0.171.0 answers
    ``thread/list`` "invalid cursor: …" with ``-32600``; an editor sending back a stale or
    mangled token) is the client's bad parameter: ``-32602`` naming ``cursor``, not ``-32603``
    (an internal error of the agent)."""
    sc = {"name": "bad-cursor", "description": "thread/list refuses the cursor as 0.171.0 does",
          "defaults": True, "rules": [{"match": {"method": "thread/list"},
                                       "actions": [{"error": {"code": -32600, "message": "invalid cursor: zzz"}}]}]}
    path = tmp_path / "bad-cursor.json"
    path.write_text(json.dumps(sc))
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, str(path))) as agent:
        await _started(tmp_path, agent)
        listed = await agent.request("session/list", {"cursor": "zzz"})
        assert listed.get("error", {}).get("code") == -32602, listed
        assert "cursor" in listed["error"]["message"], listed
        assert listed["error"]["data"]["details"]["rpcCode"] == -32600, listed  # the server's words kept
        assert await agent.finish() == 0


async def test_a_prompt_the_server_refuses_as_invalid_params_is_32602(tmp_path):
    """A prompt codex refuses before any turn runs with ``-32602`` (0.171.0: "Input exceeds the
    maximum length of 1048576 characters", ``input_too_large``) is the client's bad input:
    ``session/prompt`` answers ``-32602`` with the server's words and codexrt's code in ``data``,
    not ``-32603`` (which tells an editor the agent broke); the session goes on."""
    refusal = {"code": -32602, "message": "Input exceeds the maximum length of 1048576 characters.",
               "data": {"input_error_code": "input_too_large", "max_chars": 1048576, "actual_chars": 3000000}}
    sc = {"name": "too-large", "description": "turn/start refused as 0.171.0 refuses a huge input",
          "defaults": True, "rules": [{"match": {"method": "turn/start", "nth": 1}, "actions": [{"error": refusal}]}]}
    path = tmp_path / "too-large.json"
    path.write_text(json.dumps(sc))
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, str(path))) as agent:
        ws = await _started(tmp_path, agent)
        sid = (await agent.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]
        refused = await agent.response(await agent.prompt(sid, "y" * 1000))
        assert refused.get("error", {}).get("code") == -32602, refused
        assert "maximum length" in refused["error"]["message"], refused
        assert refused["error"]["data"]["details"]["rpcCode"] == -32602, refused
        ok = await agent.response(await agent.prompt(sid, "short"))
        assert ok["result"]["stopReason"] == "end_turn", ok
        assert await agent.finish() == 0


@contextlib.asynccontextmanager
async def _prompted_then_unread(tmp_path: Path, settings: dict[str, Any]) -> AsyncIterator[
        tuple[trio.Process, bytearray, set[int]]]:
    """``codexrt acp`` as a process on the fake app-server (``settings``: the scenario's), sent
    ``initialize``, ``session/new`` and a ``session/prompt`` (id 3), then left unread until its
    stdout pipe is full. Yields (the process, the bytes read so far, its descendants); killed
    and its children with it on the way out."""
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"name": "acp-stdout", "description": "a long stream", "rules": [],
                                "settings": settings}))
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = [sys.executable, "-m", "codexrt_cli", "--log-level", "info", "acp", "--codex-bin",
            fake_codex(tmp_path, str(path))]
    with open(tmp_path / "acp.stderr", "wb") as err:
        proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                                cwd=str(ROOT), env=agent_env(tmp_path))
    children: set[int] = set()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for rid, method, params in ((1, "initialize", {"protocolVersion": 1}),
                                    (2, "session/new", {"cwd": str(ws), "mcpServers": []})):
            await proc.stdin.send_all(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                                  "params": params}).encode() + b"\n")
        buf = bytearray()
        while buf.count(b"\n") < 2:
            buf += await proc.stdout.receive_some()
        sid = json.loads(buf.split(b"\n")[1])["result"]["sessionId"]
        await proc.stdin.send_all(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}}).encode() + b"\n")
        # we read nothing more: wait until the agent's stdout pipe is full — not writable (a
        # write end of it opened through our read end's /proc entry, polled; its byte count
        # says little: a pipe counts pages, so it can be full well below its capacity)
        probe = os.open(f"/proc/self/fd/{proc.stdout.fileno()}", os.O_WRONLY | os.O_NONBLOCK)
        try:
            await wait_until(lambda: not select.select([], [probe], [], 0)[1], "the stdout pipe to fill")
        finally:
            os.close(probe)
        children |= descendants(proc.pid)
        yield proc, buf, children
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for c in children:
            with contextlib.suppress(OSError):
                os.kill(c, signal.SIGKILL)


async def test_stdin_eof_from_a_client_that_stopped_reading_still_ends_the_agent(tmp_path):
    """An editor whose reading stalled (stdout pipe full, mid-stream) and that then ends the
    agent by closing stdin, keeping the pipe: the agent used to wait forever to write the
    turn's last updates and answers — never exiting, its app-server never reaped. After stdin
    EOF a stdout that takes nothing for ``eof_grace`` is given up (what is left unwritten is
    dropped): the agent exits and leaves no child. (The bound is a hang detector, far above the
    issue's 2 s; ``tests/e2e/test_acp_e2e.py`` checks 2 s for a client that reads.)"""
    async with _prompted_then_unread(tmp_path, {"text": "x" * 400_000, "deltas": 20_000}) as (proc, _, children):
        assert children, "the app-server child is running"
        assert proc.stdin is not None
        await proc.stdin.aclose()  # stdin EOF; the pipe stays open and unread
        with trio.move_on_after(TEARDOWN_BOUND):
            await proc.wait()
        assert proc.returncode == 0, "the agent did not exit after stdin EOF (stdout unread)"
        await wait_until(lambda: not [c for c in children if process_alive(c)], "the children to be reaped",
                         timeout=TEARDOWN_BOUND)


async def test_stdin_eof_from_a_client_reading_a_huge_line_slowly_still_gets_every_answer(tmp_path):
    """The other side of the give-up above: after stdin EOF a client that still reads — here one
    3 MB ``session/update`` line at about 0.8 MB/s, so for seconds no whole line is written —
    is not given up. The give-up counts bytes taken, not lines (``LineWriter.give_up_when_stuck``);
    the agent's own watch counted whole lines and dropped the prompt's answer after ``eof_grace``.
    Every line arrives whole, the prompt is answered, the agent exits 0 and leaves no child."""
    text = "y" * 3_000_000
    async with _prompted_then_unread(tmp_path, {"text": text, "deltas": 1}) as (proc, buf, children):
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.aclose()  # stdin EOF; then read on, slowly
        with trio.fail_after(TEARDOWN_BOUND + 10):
            while chunk := await proc.stdout.receive_some(16384):
                buf += chunk
                await trio.sleep(0.02)
            await proc.wait()
        assert proc.returncode == 0
        lines = [json.loads(line) for line in buf.split(b"\n") if line]  # every line whole
        answers = [m for m in lines if m.get("id") == 3 and "method" not in m]
        assert len(answers) == 1, answers
        # still waiting behind the huge line (≈ 3.75 s to read) when the shutdown cancelled it
        # (after 2 × eof_grace), it is answered -32800, saying why
        assert answers[0]["error"] == {"code": -32800, "message": "session/prompt: cancelled because "
                                       "the agent is shutting down"}, answers[0]
        streamed = "".join(m["params"]["update"]["content"]["text"] for m in lines
                           if m.get("method") == "session/update"
                           and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")
        assert streamed == text
        await wait_until(lambda: not [c for c in children if process_alive(c)], "the children to be reaped",
                         timeout=TEARDOWN_BOUND)


async def test_stdin_closed_while_the_reader_itself_waits_on_stdout_still_ends_the_agent(tmp_path):
    """A client that sends lines it never reads the answers of, then closes stdin and waits
    for the agent to exit (``proc.stdin.close(); proc.wait()``): the agent's reader answers a
    bad line itself, so it waits on the full stdout and never reaches the EOF. Seeing stdin
    closed while a write waits for room, the agent gives the stuck stdout up after
    ``eof_grace`` and exits 0."""
    argv = [sys.executable, "-m", "codexrt_cli", "--log-level", "info", "acp", "--codex-bin", "/nonexistent/codex"]
    with open(tmp_path / "acp.stderr", "wb") as err:
        proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                                cwd=str(ROOT), env=agent_env(tmp_path))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send_all(b"not json\n" * 3000)  # 27 KB in; ≈ 3000 error answers out, none read
        probe = os.open(f"/proc/self/fd/{proc.stdout.fileno()}", os.O_WRONLY | os.O_NONBLOCK)  # type: ignore[attr-defined]
        try:
            await wait_until(lambda: not select.select([], [probe], [], 0)[1], "the stdout pipe to fill")
        finally:
            os.close(probe)
        await proc.stdin.aclose()
        with trio.move_on_after(TEARDOWN_BOUND):
            await proc.wait()
        assert proc.returncode == 0, "the agent did not exit after stdin was closed (stdout unread)"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
