"""``codexrt edits`` / ``codexrt undo`` (R-EDIT-1, R-EDIT-3) against the scripted fake app-server.

In process (memory peers, through :func:`list_edits`/:func:`undo_path`, the functions the
commands run) for the output and every error path; one subprocess run per command, as a user
would type it, with ``CODEX_BIN`` pointing at a wrapper that starts the fake stdio server. The
real binary is ``tests/real/test_edits_real.py``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from codexrt._io._edits import EditStore, default_store_path
from codexrt._runtime._runtime import RuntimeConfig
from codexrt_cli._edits_cli import EXIT_CONFLICT, list_edits, undo_path
from tests._support import MemoryPeers
from tests.trio.test_edits_live import TID, V1, V2, add, fc, history_rules, scenario, upd

MOVED = "print('a')\nprint('B')\n"


def history(tree: Path) -> list[dict]:
    """Two turns: an update of a.txt and an add; then a move of old.py and a failed change."""
    move = {"path": str(tree / "old.py"), "kind": {"type": "update", "move_path": str(tree / "pkg" / "new.py")},
            "diff": "@@ -1,2 +1,2 @@\n print('a')\n-print('b')\n+print('B')\n"
                    f"\n\nMoved to: {tree / 'pkg' / 'new.py'}"}
    return [
        {"id": "turn-1", "items": [{"type": "userMessage", "id": "u", "content": []},
                                   fc("fc-1", [upd(tree / "a.txt", 3, "line 3", "line three"),
                                               add(tree / "new.txt", "hello\n")], "completed")]},
        {"id": "turn-2", "items": [fc("fc-2", [move], "completed"),
                                   fc("fc-3", [add(tree / "declined.txt", "no\n")], "declined")]},
    ]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    (d / "a.txt").write_text(V2)
    (d / "new.txt").write_text("hello\n")
    (d / "pkg").mkdir()
    (d / "pkg" / "new.py").write_text(MOVED)
    return d


def config(nursery, tree: Path, *rules) -> RuntimeConfig:
    peers = MemoryPeers(nursery)
    return RuntimeConfig(transports=[peers.factory(scenario(tree, *(rules or history_rules(tree, history(tree)))))])


async def run_list(nursery, tree, state_dir, **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = await list_edits(TID, config=config(nursery, tree), state_dir=state_dir, out=out, err=err, **kw)
    return rc, out.getvalue(), err.getvalue()


async def run_undo(nursery, tree, state_dir, path, **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = await undo_path(TID, path, config=config(nursery, tree), state_dir=state_dir, out=out, err=err, **kw)
    return rc, out.getvalue(), err.getvalue()


async def test_r_edit_1_edits_table_shows_kind_counts_state_and_relative_paths(nursery, tree, state_dir):
    rc, out, err = await run_list(nursery, tree, state_dir)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"thread {TID}  cwd {tree}  (session sess-root, provider mock)"
    assert lines[1].split() == ["STATE", "KIND", "+ADD", "-DEL", "TURN", "PATH"]
    rows = [ln.split() for ln in lines[2:]]
    assert rows == [
        ["pending", "update", "+1", "-1", "turn-1", "a.txt"],
        ["pending", "add", "+1", "-0", "turn-1", "new.txt"],
        ["pending", "move", "+1", "-1", "turn-2", "pkg/new.py", "(from", "old.py)"],
        ["notApplied", "add", "+1", "-0", "turn-2", "declined.txt"],
    ]


async def test_r_edit_1_edits_json_and_pending_filter(nursery, tree, state_dir):
    rc, out, _ = await run_list(nursery, tree, state_dir, as_json=True)
    doc = json.loads(out)
    assert rc == 0 and doc["ok"] and doc["threadId"] == TID and doc["cwd"] == str(tree)
    assert [(e["path"], e["kind"], e["state"], e["status"]) for e in doc["entries"]] == [
        ("a.txt", "update", "pending", "completed"), ("new.txt", "add", "pending", "completed"),
        ("pkg/new.py", "move", "pending", "completed"), ("declined.txt", "add", "notApplied", "declined")]
    assert doc["entries"][2]["fromPath"] == "old.py"
    assert doc["entries"][0]["key"] == {"threadId": TID, "turnId": "turn-1", "itemId": "fc-1",
                                        "path": str(tree / "a.txt")}
    # an accepted checkpoint (written by any codexrt user of this workspace's store) shows up
    with EditStore(default_store_path(str(tree), state_dir=state_dir)) as store:
        from codexrt._io._edits import EditLedger
        led = EditLedger(session_id="sess-root", provider="mock", store=store)
        led.record_history(TID, history(tree), cwd=str(tree))
        led.accept(led.open_review(led.by_file("a.txt")[0].key))
    rc, out, _ = await run_list(nursery, tree, state_dir, as_json=True, pending=True)
    assert [e["path"] for e in json.loads(out)["entries"]] == ["new.txt", "pkg/new.py"]
    rc, out, _ = await run_list(nursery, tree, state_dir)
    assert out.splitlines()[2].split()[:2] == ["accepted", "update"]


async def test_r_edit_3_undo_dry_run_then_undo_each_file_restores_tree(nursery, tree, state_dir):
    rc, out, err = await run_undo(nursery, tree, state_dir, "a.txt", dry_run=True)
    assert rc == 0, err
    assert "-line three\n+line 3\n" in out and "nothing written" in out
    assert (tree / "a.txt").read_text() == V2
    rc, out, _ = await run_undo(nursery, tree, state_dir, "a.txt")
    assert rc == 0 and out == "undid 1 change(s) of a.txt: restored a.txt\n"
    rc, out, _ = await run_undo(nursery, tree, state_dir, str(tree / "new.txt"), as_json=True)
    doc = json.loads(out)
    assert rc == 0 and doc["ok"] and doc["ops"] == [{"path": str(tree / "new.txt"), "action": "delete"}]
    rc, out, _ = await run_undo(nursery, tree, state_dir, "pkg/new.py")
    assert rc == 0 and "restored old.py" in out and "removed pkg/new.py" in out
    assert (tree / "a.txt").read_text() == V1 and not (tree / "new.txt").exists()
    assert (tree / "old.py").read_text() == "print('a')\nprint('b')\n" and not (tree / "pkg" / "new.py").exists()
    # the store remembers: the list shows them undone, and a second undo finds nothing to do
    rc, out, _ = await run_list(nursery, tree, state_dir, as_json=True)
    assert [e["state"] for e in json.loads(out)["entries"]] == ["undone", "undone", "undone", "notApplied"]
    rc, _, err = await run_undo(nursery, tree, state_dir, "a.txt")
    assert rc == 1 and "no applied, not yet undone change of" in err and "[EDIT_NOT_FOUND]" in err


async def test_r_edit_3_undo_conflict_shows_diff_writes_nothing_exit_3(nursery, tree, state_dir):
    mine = V2.replace("line three\n", "line three\nmy own line\n")
    (tree / "a.txt").write_text(mine)
    rc, out, err = await run_undo(nursery, tree, state_dir, "a.txt")
    assert rc == EXIT_CONFLICT and out == ""
    assert "undo refused" in err and "nothing was written" in err and "my own line" in err
    assert (tree / "a.txt").read_text() == mine
    rc, out, _ = await run_undo(nursery, tree, state_dir, "a.txt", as_json=True)
    doc = json.loads(out)
    assert rc == EXIT_CONFLICT and doc["error"]["code"] == "EDIT_CONFLICT" and "my own line" in doc["error"]["details"]["diff"]


async def test_unknown_thread_and_unavailable_cli_are_clear_errors(nursery, tree, state_dir, tmp_path):
    missing = {"match": {"method": "thread/read"}, "actions": [
        {"error": {"code": -32600, "message": f"no rollout found for thread id {TID}"}}]}
    out, err = io.StringIO(), io.StringIO()
    rc = await list_edits(TID, config=config(nursery, tree, missing), state_dir=state_dir, out=out, err=err)
    assert rc == 1 and out.getvalue() == ""
    assert err.getvalue().startswith(f"codexrt: error: thread {TID} not found") and "[THREAD_NOT_FOUND]" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    cfg = RuntimeConfig(codex_bin=str(tmp_path / "no-such-codex"), env={"PATH": ""})
    rc = await undo_path(TID, "a.txt", config=cfg, state_dir=state_dir, out=out, err=err, as_json=True)
    doc = json.loads(out.getvalue())
    assert rc == 1 and doc["ok"] is False and doc["error"]["code"].startswith("CODEX_CLI")
