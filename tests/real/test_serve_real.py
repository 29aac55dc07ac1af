"""``codexrt serve`` against the real ``codex app-server`` (pinned 0.169.0) and the loopback
model (R-D-1, R-OP-1, R-OP-5, R-RT-4, R-OP-7).

Same harness as ``tests/e2e/test_serve_e2e.py``: ``serve`` is a subprocess, every stdout line is
validated against the shipped schema, every wait is bounded. The model is scripted with prompt
directives (``peer_fixtures/mock_responses.py``).
"""

from __future__ import annotations

import json
import os
import signal


from tests._support import ROOT, wait_until
from tests.e2e.test_serve_e2e import WAIT, ServeProcess, child_pid, for_op, pid_alive


def _args(codex_bin, codex_home, real_cwd, *extra):
    return ("--codex-bin", str(codex_bin), "--codex-home", str(codex_home), "--cwd", str(real_cwd), *extra)


async def test_r_d_1_real_send_streams_and_replies(tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    async with ServeProcess.open(tmp_path, *_args(codex_bin, codex_home, real_cwd), env=real_env) as sp:
        rid = await sp.send("codex.send", {"channelId": "ide-1", "threadId": None, "clientMessageId": "cm-1",
                                           "message": "[[mock:deltas:5]] say hi", "cwd": str(real_cwd)})
        queued = await sp.event("operationQueued")
        assert queued["payload"]["requestId"] == rid
        reply = await sp.response(rid, timeout=60)
        result = reply["result"]
        assert result["status"] == "completed" and result["finalText"]
        op_events = [l for l in sp.lines if l["type"] == "daemon" and l["clientOperationId"] == result["clientOperationId"]]
        deltas = "".join(l["payload"]["delta"] for l in op_events
                         if l["kind"] == "itemUpdated" and l["payload"]["stream"] == "item/agentMessage/delta")
        assert deltas == result["finalText"]  # lossless, however the sidecar coalesced them
        user = [l for l in op_events if l["kind"] == "itemCompleted" and l["payload"]["item"]["type"] == "userMessage"]
        assert user and user[0]["payload"]["item"]["clientId"] == "cm-1"  # R-OP-7 identity round trip
        pid = await child_pid(sp, "ide-1")
        assert await sp.finish(timeout=60) == 0
    assert not pid_alive(pid)


async def test_r_op_1_real_approval_answered_while_send_pending(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                                mock_model):
    async with ServeProcess.open(tmp_path, *_args(codex_bin, codex_home, real_cwd), env=real_env) as sp:
        rid = await sp.send("codex.send", {
            "channelId": "c", "message": "[[mock:exec:python3 -c 'print(6*7)']]",
            "settings": {"approvalPolicy": "untrusted", "sandbox": "read-only"}})
        asked = await sp.event("interactionRequested", timeout=60)
        p = asked["payload"]
        assert p["method"] == "item/commandExecution/requestApproval" and "print(6*7)" in p["params"]["command"]
        assert not sp.has_response(rid)  # the send waits for this very answer
        ok = await sp.request("codex.respondInteraction", {"channelId": "c", "interactionKey": p["interactionKey"],
                                                           "dialogToken": p["dialogToken"],
                                                           "result": {"decision": "accept"}})
        assert ok["ok"] is True
        await sp.event("interactionAnswered", lambda l: l["payload"]["interactionKey"] == p["interactionKey"])
        reply = await sp.response(rid, timeout=60)
        assert sp.lines.index(ok) < sp.lines.index(reply)
        assert reply["result"]["status"] == "completed"
        assert "42" in (reply["result"]["finalText"] or "")  # the mock quotes the command's real output
        assert await sp.finish(timeout=60) == 0


async def test_r_op_5_real_abort_mid_stream_ends_interrupted(tmp_path, codex_bin, codex_home, real_env, real_cwd,
                                                             mock_model):
    async with ServeProcess.open(tmp_path, *_args(codex_bin, codex_home, real_cwd), env=real_env) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "[[mock:deltas:400:20]] stream slowly"})
        queued = await sp.event("operationQueued")
        op = queued["clientOperationId"]
        await sp.event("itemUpdated", for_op(op), timeout=60)  # mid-stream
        abort = await sp.request("codex.abortTurn", {"channelId": "c", "clientOperationId": op})
        assert abort["result"]["stopPath"] == "interruptSent"
        reply = await sp.response(rid, timeout=30)
        assert reply["result"]["status"] == "interrupted"
        assert sp.lines.index(abort) < sp.lines.index(reply)
        # the runtime keeps working on the same thread
        again = await sp.request("codex.send", {"channelId": "c", "threadId": reply["result"]["threadId"],
                                                "message": "after the interrupt"})
        assert again["result"]["status"] == "completed"
        assert await sp.finish(timeout=60) == 0


async def test_r_rt_4_real_sigkill_mid_turn_fails_once_and_next_send_resumes_without_resending(
        tmp_path, codex_bin, codex_home, real_env, real_cwd, mock_model):
    lost = "lost-turn-7f3a [[mock:hang]]"
    async with ServeProcess.open(tmp_path, *_args(codex_bin, codex_home, real_cwd), env=real_env) as sp:
        first = await sp.request("codex.send", {"channelId": "c", "message": "warm up the thread"})
        tid = first["result"]["threadId"]
        rid = await sp.send("codex.send", {"channelId": "c", "threadId": tid, "message": lost})
        await sp.event("turnStarted", lambda l: l["threadId"] == tid and not sp.has_response(rid), timeout=60)
        # the lost turn reached the model before the crash
        await wait_until(lambda: mock_model.requests_with_user_text("lost-turn-7f3a"), "the lost turn to reach the model",
                         timeout=WAIT)
        pid = await child_pid(sp)
        os.kill(pid, signal.SIGKILL)
        failed = await sp.response(rid, timeout=30)
        assert failed["ok"] is True and failed["result"]["status"] == "failed"
        assert failed["result"]["error"]["code"] == "CHILD_EXITED"
        assert failed["result"]["error"]["message"].startswith("codex app-server exited")
        assert sum(1 for l in sp.lines if l["type"] == "response" and l["id"] == rid) == 1  # settled once
        nxt = await sp.request("codex.send", {"channelId": "c", "threadId": tid, "message": "after the crash"})
        assert nxt["result"]["status"] == "completed" and nxt["result"]["threadId"] == tid
        resumed = [l for l in sp.lines if l["type"] == "daemon" and l["kind"] == "threadResumed"]
        assert resumed and resumed[-1]["threadId"] == tid
        assert pid != await child_pid(sp)
        assert await sp.finish(timeout=60) == 0
    as_prompt = mock_model.requests_with_user_text("lost-turn-7f3a")
    assert len(as_prompt) == 1  # the lost turn was sent to the model exactly once, before the crash
    after = mock_model.requests_with_user_text("after the crash")
    assert after and all(r.last_user_text.startswith("after the crash") for r in after)
    # the next turn carries the lost message once, as history — never re-sent as a new prompt
    assert sum("lost-turn-7f3a" in t for t in after[0].user_texts) == 1


def test_serve_loopback_runs_a_turn_offline(tmp_path, codex_bin):
    """``codexrt serve --loopback``: a host can try the wire with no account and no internet
    (issue 22). The CLI is chosen as for ``codexrt demo`` (in a checkout its pinned binary;
    from a wheel, discovery — the wheel path is what test_notebook_real checks)."""
    import subprocess
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").symlink_to(codex_bin)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX")}
    env["PATH"] = os.pathsep.join([str(bindir), "/usr/bin", "/bin"])
    env["PYTHONPATH"] = str(ROOT)
    line = json.dumps({"id": 1, "command": "codex.send", "params": {"channelId": "c", "message": "hi [[mock:deltas:5]]"}})
    proc = subprocess.run([sys.executable, "-m", "codexrt_cli", "serve", "--loopback"], input=line + "\n",
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = [json.loads(l) for l in proc.stdout.splitlines() if '"id"' in l]
    reply = next(r for r in replies if r.get("id") == 1)
    assert reply["result"]["status"] == "completed", reply
    assert reply["result"]["finalText"] == "d0 d1 d2 d3 d4 "
    assert "loopback model at http://127.0.0.1:" in proc.stderr
