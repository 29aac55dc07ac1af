"""The edit ledger against the real ``codex app-server`` (pinned 0.169.0) and the loopback model
(R-EDIT-1, R-EDIT-3).

One turn under ``approvalPolicy: "untrusted"`` / ``sandbox: "workspace-write"`` makes the model
run ``apply_patch`` through ``exec_command`` (approved through the runtime's interaction):
it creates a file and edits another with two hunks. The live ledger (fed from the runtime's
events) lists both; after the runtime is gone, ``codexrt edits --json`` (a subprocess, as a
user runs it, reading the history read-only) lists the same keys; ``codexrt undo`` restores
the tree byte for byte and a second listing shows them undone. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from codexrt._features._edits_live import open_live_edits
from codexrt._runtime._runtime import RuntimeConfig, open_runtime
from codexrt._sansio._settings import Settings
from peer_fixtures.mock_responses import Script
from tests._support import wait_until

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0

BEFORE = {"a.txt": "".join(f"line {i}\n" for i in range(1, 21)), "keep.txt": "untouched\n"}
PATCH = ("*** Begin Patch\n"
         "*** Add File: new/hello.txt\n+hello\n+world\n"
         "*** Update File: a.txt\n@@\n line 2\n-line 3\n+line three\n@@\n line 16\n+inserted\n line 17\n"
         "*** End Patch\n")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codexrt_cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=WAIT)


async def test_r_edit_3_real_turn_edits_then_ledger_lists_and_cli_undo_restores_tree(
        tmp_path, codex_bin, real_env, real_cwd, mock_model):
    for rel, text in BEFORE.items():
        (real_cwd / rel).write_bytes(text.encode())
    before = snapshot(real_cwd)
    state_dir = tmp_path / "state"
    mock_model.enqueue(Script.exec_command(f"apply_patch <<'EOF'\n{PATCH}EOF\n"))
    settings = Settings(cwd=str(real_cwd), approval_policy="untrusted", sandbox="workspace-write")
    config = RuntimeConfig(codex_bin=str(codex_bin), env=real_env, cwd=str(real_cwd), settings=settings)
    async with open_runtime(config) as rt:
        async with open_live_edits(rt, state_dir=str(state_dir)) as live:
            op = rt.send("edit the files")
            asked = 0
            with trio.fail_after(WAIT):
                async for ev in op.events():
                    if ev.kind == "interactionRequested":
                        asked += 1
                        await rt.interactions[ev.payload["interactionKey"]].accept()
            result = await op.wait()
            assert result.status == "completed" and asked >= 1
            tid = result.thread_id
            # the feeder records what the op's stream already showed
            await wait_until(lambda: (te := live.get(tid)) is not None
                             and sum(e.status == "completed" for e in te.ledger.by_thread(tid)) >= 2,
                             "the live ledger to record both completed edits", timeout=WAIT)
            te = live.get(tid)
            live_keys = {(e.key, e.kind.value, e.added, e.removed) for e in te.ledger.by_thread(tid)}
            assert te.meta.cwd == str(real_cwd)
    assert {(os.path.relpath(k.path, real_cwd), kind, a, r) for k, kind, a, r in live_keys} == {
        ("new/hello.txt", "add", 2, 0), ("a.txt", "update", 2, 1)}
    assert (real_cwd / "new" / "hello.txt").read_text() == "hello\nworld\n"

    env = {**real_env, "CODEX_BIN": str(codex_bin), "CODEXRT_STATE_DIR": str(state_dir),
           "PYTHONPATH": str(ROOT)}
    shell_cwd = tmp_path / "elsewhere"  # the user's shell is not in the workspace
    shell_cwd.mkdir()
    listed = cli(env, "edits", tid, "--json", cwd=shell_cwd)
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["cwd"] == str(real_cwd)
    assert {(e["path"], e["kind"], e["state"]) for e in doc["entries"]} == {
        ("new/hello.txt", "add", "pending"), ("a.txt", "update", "pending")}
    # history and live agree on the operation identity (thread, turn, item, file)
    assert {(e["key"]["turnId"], e["key"]["itemId"], e["key"]["path"]) for e in doc["entries"]} == {
        (k.turn_id, k.item_id, k.path) for k, *_ in live_keys}

    dry = cli(env, "undo", tid, "a.txt", "--dry-run", cwd=shell_cwd)
    assert dry.returncode == 0 and "-line three\n+line 3\n" in dry.stdout
    for rel in ("a.txt", "new/hello.txt"):
        undo = cli(env, "undo", tid, rel, cwd=shell_cwd)
        assert undo.returncode == 0, undo.stderr
    assert snapshot(real_cwd) == before  # byte for byte
    again = cli(env, "edits", tid, "--json", cwd=shell_cwd)
    assert {e["state"] for e in json.loads(again.stdout)["entries"]} == {"undone"}


async def test_r_edit_1_real_serve_edit_commands_live_ledger_and_undo(nursery, codex_bin, real_env, real_cwd,
                                                                     mock_model, tmp_path, monkeypatch):
    """``serve`` in process on the real binary: the channel's live ledger is started first
    (an unknown thread answers ``THREAD_NOT_FOUND``), then an approved patch turn; listEdits
    shows the changes, undoFile of both files restores the tree byte for byte."""
    from tests.trio.test_edits_live import Wire

    monkeypatch.setenv("CODEXRT_STATE_DIR", str(tmp_path / "state"))
    for rel, text in BEFORE.items():
        (real_cwd / rel).write_bytes(text.encode())
    before = snapshot(real_cwd)
    mock_model.enqueue(Script.exec_command(f"apply_patch <<'EOF'\n{PATCH}EOF\n"))
    wire = await Wire(RuntimeConfig(codex_bin=str(codex_bin), env=real_env, cwd=str(real_cwd))).start(nursery)
    missing = await wire.request("codex.listEdits", {"threadId": "00000000-0000-7000-8000-000000000000"})
    assert not missing["ok"] and missing["error"]["code"] == "THREAD_NOT_FOUND", missing
    rid = await wire.send("codex.send", {"message": "edit the files", "cwd": str(real_cwd), "settings": {
        "approvalPolicy": "untrusted", "sandbox": "workspace-write"}})
    answered: set[str] = set()
    while True:
        line = await wire.wait_for(lambda l: (l.get("type") == "response" and l["id"] == rid) or (
            l.get("kind") == "interactionRequested" and l["payload"]["interactionKey"] not in answered), WAIT)
        if line.get("type") == "response":
            break
        p = line["payload"]
        answered.add(p["interactionKey"])
        ok = await wire.request("codex.respondInteraction", {"interactionKey": p["interactionKey"],
                                                             "dialogToken": p["dialogToken"],
                                                             "result": {"decision": "accept"}})
        assert ok["ok"], ok
    assert line["result"]["status"] == "completed" and answered
    tid = line["result"]["threadId"]
    listed = await wire.request("codex.listEdits", {"threadId": tid})
    entries = listed["result"]["entries"]
    assert {(e["path"], e["kind"], e["state"], e["added"], e["removed"]) for e in entries} == {
        ("new/hello.txt", "add", "pending", 2, 0), ("a.txt", "update", "pending", 2, 1)}
    r1 = await wire.send("codex.undoFile", {"channelId": "c", "threadId": tid, "path": "a.txt"})
    r2 = await wire.send("codex.undoFile", {"channelId": "c", "threadId": tid, "path": "new/hello.txt"})
    assert (await wire.response(r1, WAIT))["ok"] and (await wire.response(r2, WAIT))["ok"]
    assert snapshot(real_cwd) == before
    await wire.close()
