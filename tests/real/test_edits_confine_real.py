"""Undo confinement against the real ``codex app-server`` (pinned 0.169.0) and the loopback
model (R-EDIT-3, issue 18).

One full-access turn (``sandbox: "danger-full-access"``, ``approvalPolicy: "never"``) makes the
model run ``apply_patch`` that adds one file inside the cwd and one outside it (``../outside``).
The live ledger records both as the real server reports them. Undo of the inside file works;
undo of the outside file is refused with ``OUTSIDE_WORKSPACE`` and touches nothing — through
the library and through ``codexrt undo`` — and works with the opt-in
(``--allow-outside-workspace``), removing exactly that file. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from codexrt._features._edits_live import open_live_edits
from codexrt._sansio._errors import OutsideWorkspace
from codexrt._runtime._runtime import RuntimeConfig, open_runtime
from codexrt._sansio._settings import Settings
from peer_fixtures.mock_responses import Script
from tests._support import wait_until

ROOT = Path(__file__).resolve().parents[2]
WAIT = 60.0
PATCH = ("*** Begin Patch\n"
         "*** Add File: inside.txt\n+mine\n"
         "*** Add File: ../outside/leak.txt\n+not in the workspace\n"
         "*** End Patch\n")


def snapshot(top: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(top.rglob("*")):
        rel = str(p.relative_to(top))
        if rel.startswith(("state", "codex-home", "mock-requests")):
            continue
        out[rel] = "dir" if p.is_dir() else p.read_bytes()
    return out


async def test_r_edit_3_real_full_access_turn_outside_undo_needs_opt_in(
        tmp_path, codex_bin, real_env, real_cwd, mock_model):
    outside = tmp_path / "outside"
    outside.mkdir()
    state_dir = tmp_path / "state"
    mock_model.enqueue(Script.exec_command(f"apply_patch <<'EOF'\n{PATCH}EOF\n"))
    settings = Settings(cwd=str(real_cwd), approval_policy="never", sandbox="danger-full-access")
    config = RuntimeConfig(codex_bin=str(codex_bin), env=real_env, cwd=str(real_cwd), settings=settings)
    async with open_runtime(config) as rt:
        async with open_live_edits(rt, state_dir=str(state_dir)) as live:
            with trio.fail_after(WAIT):
                result = await rt.send("edit inside and outside").wait()
            assert result.status == "completed", result
            tid = result.thread_id
            # the feeder records what the op's stream already showed
            await wait_until(lambda: (te := live.get(tid)) is not None
                             and sum(e.status == "completed" for e in te.ledger.by_thread(tid)) >= 2,
                             "the live ledger to record both completed edits", timeout=WAIT)
            te = live.get(tid)
            assert (real_cwd / "inside.txt").read_text() == "mine\n"
            assert (outside / "leak.txt").read_text() == "not in the workspace\n"
            targets = {e.target for e in te.ledger.by_thread(tid)}
            assert targets == {str(real_cwd / "inside.txt"), str(outside / "leak.txt")}
            before = snapshot(tmp_path)
            with pytest.raises(OutsideWorkspace) as ei:
                await te.ledger.undo_file((tid, str(outside / "leak.txt")))
            assert ei.value.details["path"] == str(outside / "leak.txt")
            assert snapshot(tmp_path) == before
            await te.ledger.undo_file((tid, "inside.txt"))
            assert not (real_cwd / "inside.txt").exists()

    env = {**real_env, "CODEX_BIN": str(codex_bin), "CODEXRT_STATE_DIR": str(state_dir), "PYTHONPATH": str(ROOT)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "codexrt_cli", "undo", tid, *args, "--json"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=WAIT)

    before = snapshot(tmp_path)
    refused = cli("../outside/leak.txt")
    assert refused.returncode == 1, refused.stderr
    assert json.loads(refused.stdout)["error"]["code"] == "OUTSIDE_WORKSPACE"
    assert snapshot(tmp_path) == before
    done = cli("../outside/leak.txt", "--allow-outside-workspace")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ops"] == [{"path": str(outside / "leak.txt"), "action": "delete"}]
    after = snapshot(tmp_path)
    assert {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} == {"outside/leak.txt"}
    assert os.listdir(outside) == []


async def test_r_edit_3_real_serve_undo_outside_needs_allow_outside_workspace(
        nursery, tmp_path, codex_bin, real_env, real_cwd, mock_model, monkeypatch):
    """The same turn through ``codexrt serve`` (in process): ``codex.undoFile`` of the outside
    file answers ``OUTSIDE_WORKSPACE`` and writes nothing; with ``allowOutsideWorkspace: true``
    it removes exactly that file."""
    from tests.trio.test_edits_live import Wire

    monkeypatch.setenv("CODEXRT_STATE_DIR", str(tmp_path / "state"))
    outside = tmp_path / "outside"
    outside.mkdir()
    mock_model.enqueue(Script.exec_command(f"apply_patch <<'EOF'\n{PATCH}EOF\n"))
    wire = await Wire(RuntimeConfig(codex_bin=str(codex_bin), env=real_env, cwd=str(real_cwd))).start(nursery)
    rid = await wire.send("codex.send", {"message": "edit inside and outside", "cwd": str(real_cwd),
                                         "settings": {"approvalPolicy": "never", "sandbox": "danger-full-access"}})
    sent = await wire.response(rid, WAIT)
    assert sent["ok"] and sent["result"]["status"] == "completed", sent
    tid = sent["result"]["threadId"]
    assert (outside / "leak.txt").exists() and (real_cwd / "inside.txt").exists()
    before = snapshot(tmp_path)
    no = await wire.response(await wire.send("codex.undoFile", {"threadId": tid, "path": str(outside / "leak.txt")}),
                             WAIT)
    assert not no["ok"] and no["error"]["code"] == "OUTSIDE_WORKSPACE", no
    assert snapshot(tmp_path) == before
    yes = await wire.response(await wire.send("codex.undoFile", {"threadId": tid, "path": str(outside / "leak.txt"),
                                                                 "allowOutsideWorkspace": True}), WAIT)
    assert yes["ok"], yes
    after = snapshot(tmp_path)
    assert {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} == {"outside/leak.txt"}
    await wire.close()
