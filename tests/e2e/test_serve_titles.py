"""``codexrt serve --auto-title``: automatic thread titles on a helper child, saved with
``thread/name/set``; release and reset cancel pending titles and wait for them (R-HLP-3, R-HLP-1).

Same harness as ``tests/e2e/test_serve_e2e.py``; the fake CLI's ``--log`` (shared by the main and
helper children) proves what reached an app-server. The default fake turn answers
"Hello from the fake peer.", which the title helper turns into the title.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from peer_fixtures.fake_app_server import read_log
from tests.e2e.test_serve_e2e import ROOT, ServeProcess, fake_cli

TITLE = "Hello from the fake peer"

#: Main turns complete as usual; helper turns (read-only, ``approvalPolicy: never``, reviewer
#: ``user`` — what a helper sends, never what serve's main turns send here) never end, so a title
#: stays pending until something cancels it.
HANG_HELPER = {
    "name": "hang-helper-turns",
    "description": "main turns complete; helper turns hang",
    "rules": [{"match": {"method": "turn/start", "params": {"approvalPolicy": "never", "approvalsReviewer": "user"}},
               "actions": [{"hang_turn": True}]}],
}


def _cli(tmp_path: Path, scenario: dict, log: Path) -> str:
    """An executable running the stdio fake app-server with this scenario (main and helpers)."""
    path = tmp_path / f"{scenario['name']}.json"
    path.write_text(json.dumps(scenario))
    script = tmp_path / f"fake-codex-{scenario['name']}"
    cmd = [sys.executable, "-m", "peer_fixtures.fake_app_server", str(path), "--log", str(log)]
    script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\nexec {shlex.join(cmd)}\n")
    script.chmod(0o755)
    return str(script)


def _names(log: Path) -> list[dict]:
    return [m["params"] for m in read_log(log) if m.get("method") == "thread/name/set"]


def _line_index(sp: ServeProcess, line: dict) -> int:
    return next(i for i, l in enumerate(sp.lines) if l is line)


async def test_r_hlp_3_auto_title_saved_once_per_created_thread(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok", log),
                                 "--auto-title") as sp:
        first = await sp.request("codex.send", {"channelId": "c", "message": "the login page fails"})
        tid = first["result"]["threadId"]
        titled = await sp.event("threadTitle", lambda l: l["threadId"] == tid)
        assert titled["payload"] == {"threadId": tid, "status": "saved", "title": TITLE, "reason": None, "error": None}
        again = await sp.request("codex.send", {"channelId": "c", "threadId": tid, "message": "and the logout"})
        assert again["result"]["status"] == "completed"
        assert await sp.finish() == 0
    assert _names(log) == [{"threadId": tid, "name": TITLE}]  # one attempt per created thread
    helper_starts = [m["params"] for m in read_log(log)
                     if m.get("method") == "thread/start" and m["params"].get("ephemeral")]
    assert len(helper_starts) == 1 and helper_starts[0]["sandbox"] == "read-only"
    assert not [m for m in read_log(log) if m.get("method") == "thread/resume"]
    assert [l for l in sp.lines if l["type"] == "daemon" and l["kind"] == "threadTitle"] == [titled]


async def test_r_hlp_3_reset_and_release_cancel_pending_titles_and_wait_for_them(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", _cli(tmp_path, HANG_HELPER, log), "--auto-title") as sp:
        a = (await sp.request("codex.send", {"channelId": "a", "message": "first"}))["result"]["threadId"]
        b = (await sp.request("codex.send", {"channelId": "b", "message": "second"}))["result"]["threadId"]
        # both titles are pending now (their helper turns can never end)
        assert not [l for l in sp.lines if l["type"] == "daemon" and l["kind"] == "threadTitle"]

        rid = await sp.send("codex.resetRuntime", {"channelId": "a"})
        reset = await sp.response(rid)
        cancelled_a = next(l for l in sp.lines if l["type"] == "daemon" and l["kind"] == "threadTitle"
                           and l["threadId"] == a)
        # the reset replied only after the title was cancelled and its helper reaped
        assert _line_index(sp, cancelled_a) < _line_index(sp, reset)
        assert cancelled_a["payload"]["status"] == "cancelled" and cancelled_a["payload"]["reason"] == "resetRuntime"
        assert reset["result"]["runtime"]["state"] == "STOPPED"

        rid = await sp.send("codex.releaseThread", {"channelId": "b", "threadId": b})
        release = await sp.response(rid)
        cancelled_b = next(l for l in sp.lines if l["type"] == "daemon" and l["kind"] == "threadTitle"
                           and l["threadId"] == b)
        assert _line_index(sp, cancelled_b) < _line_index(sp, release)
        assert cancelled_b["payload"]["status"] == "cancelled" and cancelled_b["payload"]["reason"] == "releaseThread"
        assert release["result"]["runtimeRetired"] is True
        assert await sp.finish() == 0
    assert _names(log) == []  # a cancelled title is never saved


async def test_r_hlp_3_a_rename_by_someone_else_wins_over_a_pending_title(tmp_path):
    """Another client names the thread (``thread/name/updated`` that is not the echo of our own
    save) while the automatic title is pending: the title is cancelled and never saved."""
    renamed = {**HANG_HELPER, "rules": HANG_HELPER["rules"] + [
        {"match": {"method": "turn/start"}, "actions": [
            {"default": True},
            {"notify": "thread/name/updated", "params": {"threadId": "$params.threadId", "threadName": "Mine"}}]}]}
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", _cli(tmp_path, renamed, log), "--auto-title") as sp:
        tid = (await sp.request("codex.send", {"channelId": "c", "message": "first"}))["result"]["threadId"]
        out = await sp.event("threadTitle", lambda l: l["threadId"] == tid)
        assert out["payload"]["status"] == "cancelled" and out["payload"]["reason"] == "manual name"
        assert await sp.finish() == 0
    assert _names(log) == []
