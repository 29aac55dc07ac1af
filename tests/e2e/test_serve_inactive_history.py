"""``codexrt serve --access-mode inactive`` answers history from rollout files and spawns
nothing (R-LC-3, R-H-3, R-H-6, R-H-7).

Same harness as ``tests/e2e/test_serve_e2e.py`` (every stdout line schema-checked). ``--codex-bin``
points at a script that would leave a marker file if it were ever run: its absence, and no
channel in ``status``, prove that nothing was spawned.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

from tests.trio.test_history_privacy import CALL, NAME, ORDINARY, SECRET, write_rollout
from tests.e2e.test_serve_e2e import ServeProcess

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"


def _would_spawn(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "spawned"
    cli = tmp_path / "would-spawn"
    cli.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
    cli.chmod(0o755)
    return cli, marker


async def test_r_lc_3_inactive_serve_lists_and_reads_rollouts_without_spawning(tmp_path):
    home = tmp_path / "home"
    golden = json.loads((DATA / "paginated.native.json").read_text())["threadId"]
    day = home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    shutil.copy(DATA / "paginated.rollout.jsonl", day / f"rollout-2026-11-30T09-00-00-{golden}.jsonl")
    (home / "session_index.jsonl").write_text(json.dumps({"id": golden, "thread_name": "golden"}) + "\n")
    secret_tid = "0199a000-0000-7000-8000-0000000000bb"
    write_rollout(home, secret_tid, "turn-1", {"name": {"answers": [NAME]}, "token": {"answers": [SECRET]}})
    cli, marker = _would_spawn(tmp_path)
    env = {**os.environ, "CODEXRT_PRIVACY_DIR": str(tmp_path / "privacy")}
    async with ServeProcess.open(tmp_path, "--codex-bin", str(cli), "--codex-home", str(home),
                                 "--access-mode", "inactive", env=env) as sp:
        listed = (await sp.request("codex.listThreads", {"channelId": "c"}))["result"]
        assert listed["source"] == "legacy" and listed["nextCursor"] is None and listed["partial"] is False
        rows = {r["id"]: r for r in listed["data"]}
        assert set(rows) == {golden, secret_tid}
        assert rows[golden]["name"] == "golden" and rows[golden]["source"] == "legacy"
        one = (await sp.request("codex.listThreads", {"channelId": "c", "limit": 1}))["result"]
        assert len(one["data"]) == 1

        read = (await sp.request("codex.readThread", {"channelId": "c", "threadId": golden}))["result"]
        tr = read["transcript"]
        assert read["thread"]["id"] == golden and tr["source"] == "legacy" and tr["messageCount"] == 8
        assert any(r["kind"] == "commandExecution" for t in tr["turns"] for r in t["records"])
        assert not any("masking is not guaranteed" in n for n in tr["notices"])  # the index is available

        secret = (await sp.request("codex.readThread", {"channelId": "c", "threadId": secret_tid,
                                                        "display": True}))["result"]["transcript"]
        text = json.dumps(secret)
        assert SECRET not in text and ORDINARY in text  # R-PRIV-2: masked, ordinary text untouched
        [call] = [r for t in secret["turns"] for r in t["records"] if r["id"] == CALL]
        assert json.loads(call["content"][0]["text"])["answers"]["token"] == {"answers": ["[masked]"]}

        count = (await sp.request("codex.countThreadMessages", {"channelId": "c", "threadId": golden}))["result"]
        assert count["messageCount"] == 8 and count["known"] is True
        missing = await sp.request("codex.readThread", {"channelId": "c", "threadId": "0199a000-0000-7000-8000-00000000dead"})
        assert missing["ok"] is False and missing["error"]["code"] == "THREAD_NOT_FOUND"
        native_only = await sp.request("codex.readHistoryPage", {"channelId": "c", "threadId": golden})
        assert native_only["ok"] is False and native_only["error"]["code"] == "ACCESS_INACTIVE"

        assert (await sp.request("status"))["result"]["channels"] == []
        assert await sp.finish() == 0
    assert not marker.exists()
