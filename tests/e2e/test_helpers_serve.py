"""``codexrt serve``: the context param of ``codex.send``, the helper commands, the workspace
diff and catalog commands, end to end against the stdio fake app-server (R-CTX-1, R-CTX-2,
R-HLP-1, R-HLP-3, R-DIFF-1, R-CAT-1, R-D-1).

Same harness as ``tests/e2e/test_serve_e2e.py``: every stdout line is validated against the shipped
schema; the fake's ``--log`` is the proof of what reached an app-server (main and helper
children share the fake CLI, so they share the log).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from peer_fixtures.fake_app_server import read_log
from tests.e2e.test_serve_e2e import ROOT, ServeProcess, fake_cli


def _starts(log):
    return [m for m in read_log(log) if m.get("method") == "thread/start"]


async def test_r_ctx_1_send_with_editor_state_travels_as_the_probe_decided(tmp_path):
    """The fake CLI cannot print a schema, so the probe answers "not supported" and the
    context travels in the text convention — decided per CLI, never by a failed turn/start."""
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok", log)) as sp:
        reply = await sp.request("codex.send", {
            "channelId": "c", "message": "why does it fail?",
            "context": {"activeFile": {"path": "src/app.py", "selection": {"start": 3, "end": 4}},
                        "openTabs": ["README.md"], "referencedFiles": [{"path": "b.py", "lines": None}]}})
        assert reply["result"]["status"] == "completed"
        assert await sp.finish() == 0
    (start,) = [m for m in read_log(log) if m.get("method") == "turn/start"]
    text = start["params"]["input"][0]["text"]
    assert text.startswith("# Context from my IDE setup:\n\n## Active file: src/app.py\nSelected lines 3-4")
    assert "## Referenced file: b.py" in text and text.endswith("## My request for Codex:\nwhy does it fail?")
    assert "additionalContext" not in start["params"]


async def test_r_ctx_1_bad_editor_state_is_refused_and_nothing_starts(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok", log)) as sp:
        bad = await sp.request("codex.send", {"channelId": "c", "message": "m",
                                              "context": {"activeFile": {"path": "a", "selection": {"start": 9, "end": 2}}}})
        assert bad["ok"] is False and bad["error"]["code"] == "CONFIG_ERROR"
        typo = await sp.request("codex.send", {"channelId": "c", "message": "m", "context": {"openTab": ["x"]}})
        assert typo["ok"] is False and typo["error"]["code"] == "INVALID_PARAMS"
        assert await sp.finish() == 0
    assert not log.exists() or [m for m in read_log(log) if m.get("method") == "turn/start"] == []


async def test_r_hlp_3_generate_title_on_a_helper_child_and_save_it(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok", log)) as sp:
        sent = await sp.request("codex.send", {"channelId": "c", "message": "first message"})
        tid = sent["result"]["threadId"]
        title = await sp.request("codex.generateTitle", {"channelId": "c", "threadId": tid,
                                                         "message": "first message"})
        assert title["result"] == {"title": "Hello from the fake peer", "threadId": tid, "saved": True,
                                   "reason": None}
        unsaved = await sp.request("codex.generateTitle", {"channelId": "other", "threadId": tid, "message": "m"})
        assert unsaved["result"]["saved"] is False and unsaved["result"]["reason"] == "runtime not ready"
        enhanced = await sp.request("codex.enhancePrompt", {"channelId": "c", "prompt": "fix it"})
        assert enhanced["result"] == {"prompt": "Hello from the fake peer."}
        commit = await sp.request("codex.generateCommitMessage", {"channelId": "c", "diff": "diff --git a/x b/x"})
        assert commit["result"] == {"message": "Hello from the fake peer.", "diffStatus": None}
        nogit = await sp.request("codex.generateCommitMessage", {"channelId": "c", "cwd": str(tmp_path)})
        assert nogit["ok"] is False and nogit["error"]["code"] == "DIFF_UNAVAILABLE"
        repo = tmp_path / "repo"  # no diff given: the workspace's diff is read (a new, untracked file)
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "a.txt").write_text("hi\n")
        fromgit = await sp.request("codex.generateCommitMessage", {"channelId": "c", "cwd": str(repo)})
        assert fromgit["result"] == {"message": "Hello from the fake peer.", "diffStatus": "ok"}
        assert await sp.finish() == 0
    msgs = read_log(log)
    names = [m["params"] for m in msgs if m.get("method") == "thread/name/set"]
    assert names == [{"threadId": tid, "name": "Hello from the fake peer"}]
    helper_starts = [m["params"] for m in _starts(log) if m["params"].get("ephemeral")]
    assert len(helper_starts) == 5  # one ephemeral helper thread per helper request
    assert all(p["sandbox"] == "read-only" and p["approvalPolicy"] == "never"
               and p["approvalsReviewer"] == "user" for p in helper_starts)
    assert not [m for m in msgs if m.get("method") == "thread/resume"]  # helpers never resume a chat thread


async def test_r_diff_1_read_workspace_diff_works_even_when_inactive(tmp_path):
    async with ServeProcess.open(tmp_path, "--access-mode", "inactive") as sp:
        res = await sp.request("codex.readWorkspaceDiff", {"cwd": str(tmp_path), "sessionId": "s-1"})
        assert res["ok"] is True
        assert (res["result"]["status"], res["result"]["sessionId"], res["result"]["cwd"]) == ("notGit", "s-1",
                                                                                               str(tmp_path))
        helper = await sp.request("codex.generateTitle", {"channelId": "c", "message": "m"})
        assert helper["ok"] is False and helper["error"]["code"] == "ACCESS_INACTIVE"
        assert await sp.finish() == 0


async def test_r_cat_1_serve_catalogs_walk_pages_and_return_errors(tmp_path):
    scenario = tmp_path / "pages.json"
    model = {"id": "m", "model": "m", "displayName": "M", "description": "", "hidden": False, "isDefault": True,
             "defaultReasoningEffort": "low", "supportedReasoningEfforts": [{"reasoningEffort": "low",
                                                                             "description": ""}]}
    scenario.write_text(json.dumps({"name": "pages", "description": "two model pages, then a looping cursor",
                                    "defaults": True, "rules": [
        {"match": {"method": "model/list", "nth": 1}, "actions": [{"respond": {"data": [model], "nextCursor": "p2"}}]},
        {"match": {"method": "model/list", "nth": 2}, "actions": [{"respond": {"data": [], "nextCursor": None}}]},
        {"match": {"method": "model/list"}, "actions": [{"respond": {"data": [], "nextCursor": "loop"}}]},
    ]}))
    script = tmp_path / "fake-codex-pages"
    script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\n"
                      f"exec {shlex.join([sys.executable, '-m', 'peer_fixtures.fake_app_server', str(scenario)])}\n")
    script.chmod(0o755)
    async with ServeProcess.open(tmp_path, "--codex-bin", str(script)) as sp:
        models = await sp.request("codex.listModels", {"channelId": "c"})
        assert models["result"]["pages"] == 2
        assert models["result"]["models"] == [{"slug": "m", "id": "m", "displayName": "M", "hidden": False,
                                                "isDefault": True, "defaultReasoningEffort": "low",
                                                "reasoningEfforts": ["low"]}]
        looping = await sp.request("codex.listModels", {"channelId": "c"})
        assert looping["ok"] is False and looping["error"]["code"] == "CATALOG_CURSOR_REPEATED"
        assert await sp.finish() == 0
