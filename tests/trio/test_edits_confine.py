"""Undo stays inside the workspace (R-EDIT-3, issue 18): ``..`` and absolute paths outside the
submission's cwd, symbolic links to directories along the path, and a link swapped in between
the check and the write. Without the host's opt-in nothing outside the cwd changes; with it
(``allow_outside_workspace`` / ``allowOutsideWorkspace`` / ``--allow-outside-workspace``) the
right file changes and nothing else — and links are still never followed.

Each test plays Codex's part (it writes the "after" state itself and records the native change
the server would send), then compares a snapshot of the *whole* tmp dir — workspace, the
"outside" directory, links included — before and after.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

import codexrt._io._edits as edits
from codexrt._io._edits import EditLedger, EditStore
from codexrt._sansio._errors import CodexError, OutsideWorkspace, UndoError
from tests.trio.test_edits_live import TID, V1, V2, Wire, fc, history_rules, scenario, upd
from tests._support import MemoryPeers
from tests.sansio.test_private_files import assert_private
from codexrt._runtime._runtime import RuntimeConfig


def snapshot(top: Path) -> dict[str, object]:
    """Every entry under ``top`` (not following links): file bytes, link targets, dirs."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(top))
            if rel.startswith("state"):
                continue
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def changed(before: dict, after: dict) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def item(*changes: dict, item_id: str = "call-1") -> dict:
    return {"type": "fileChange", "id": item_id, "changes": list(changes), "status": "completed"}


def add(path: str, text: str) -> dict:
    return {"path": path, "kind": {"type": "add"}, "diff": text}


def delete(path: str, text: str) -> dict:
    return {"path": path, "kind": {"type": "delete"}, "diff": text}


def update(path: str, diff: str, move_path: str | None = None) -> dict:
    return {"path": path, "kind": {"type": "update", "move_path": move_path}, "diff": diff}


ONE_LINE = "@@ -1,2 +1,2 @@\n keep\n-old\n+new\n"


@pytest.fixture
def top(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path


@pytest.fixture
def ledger(top: Path):
    store = EditStore(str(top / "state" / "edits.sqlite3"))
    led = EditLedger(session_id="s", store=store)
    yield led
    store.close()


def rec(led: EditLedger, top: Path, *changes: dict, item_id: str = "call-1"):
    return led.record_item(item(*changes, item_id=item_id), thread_id="th", turn_id="t", cwd=str(top / "ws"))


async def refused(led: EditLedger, key, top: Path, **kw) -> OutsideWorkspace:
    before = snapshot(top)
    with pytest.raises(OutsideWorkspace) as ei:
        await led.undo_file(key, **kw)
    assert snapshot(top) == before, changed(before, snapshot(top))
    err = ei.value
    assert err.code == "OUTSIDE_WORKSPACE" and isinstance(err, UndoError) and isinstance(err, CodexError)
    assert err.details["path"] in err.message and err.details["keys"] == [key.to_dict()]
    assert not led.is_undone(key)
    if not kw.get("dry_run"):
        assert led.undo_failure(key) is err  # a failed undo keeps its record
    return err


async def test_r_edit_3_dotdot_add_is_refused_then_removed_with_opt_in(top: Path, ledger: EditLedger):
    (top / "outside" / "x.txt").write_text("not yours\n")  # codex "added" ../outside/x.txt
    e, = rec(ledger, top, add("../outside/x.txt", "not yours\n"))
    assert e.target == str(top / "outside" / "x.txt")
    err = await refused(ledger, e.key, top)
    assert err.details["path"] == str(top / "outside" / "x.txt") and err.details["roots"] == [str(top / "ws")]
    await refused(ledger, e.key, top, dry_run=True)  # a dry run is refused the same way
    before = snapshot(top)
    receipt = await ledger.undo_file(e.key, allow_outside_workspace=True)
    assert [(op.path, op.content) for op in receipt.ops] == [(str(top / "outside" / "x.txt"), None)]
    assert changed(before, snapshot(top)) == {"outside/x.txt"} and not (top / "outside" / "x.txt").exists()
    assert ledger.is_undone(e.key) and ledger.undo_failure(e.key) is None


async def test_r_edit_3_absolute_delete_outside_creates_no_directory(top: Path, ledger: EditLedger):
    gone = top / "outside" / "deep" / "gone.txt"  # its directory does not exist any more
    e, = rec(ledger, top, delete(str(gone), "secret\n"))
    await refused(ledger, e.key, top)
    # even with the opt-in, no parent directory is created outside the workspace
    err = await refused(ledger, e.key, top, allow_outside_workspace=True)
    assert err.details["missing"] == str(top / "outside" / "deep")
    (top / "outside" / "deep").mkdir()
    before = snapshot(top)
    await ledger.undo_file(e.key, allow_outside_workspace=True)
    assert changed(before, snapshot(top)) == {"outside/deep/gone.txt"} and gone.read_text() == "secret\n"


async def test_r_edit_3_inside_delete_still_recreates_its_directory(top: Path, ledger: EditLedger):
    e, = rec(ledger, top, delete("sub/dir/gone.txt", "back\n"))
    before = snapshot(top)
    await ledger.undo_file(e.key)
    assert (top / "ws" / "sub" / "dir" / "gone.txt").read_text() == "back\n"
    assert changed(before, snapshot(top)) == {"ws/sub", "ws/sub/dir", "ws/sub/dir/gone.txt"}


@pytest.mark.parametrize("opt_in", [False, True])
async def test_r_edit_3_symlinked_parent_is_refused_even_with_opt_in(top: Path, ledger: EditLedger, opt_in: bool):
    (top / "outside" / "f.txt").write_text("keep\nnew\n")
    (top / "ws" / "a").mkdir()
    os.symlink(top / "outside", top / "ws" / "a" / "link")  # ws/a/link -> ../../outside
    e, = rec(ledger, top, update("a/link/f.txt", ONE_LINE))
    err = await refused(ledger, e.key, top, allow_outside_workspace=opt_in)
    assert err.details["link"] == str(top / "ws" / "a" / "link") and "symbolic link" in err.message
    assert (top / "outside" / "f.txt").read_text() == "keep\nnew\n"


async def test_r_edit_3_symlinked_parent_of_an_outside_path_is_refused_with_opt_in(top: Path, ledger: EditLedger):
    (top / "real").mkdir()
    (top / "real" / "f.txt").write_text("keep\nnew\n")
    os.symlink(top / "real", top / "outside" / "via")
    e, = rec(ledger, top, update(str(top / "outside" / "via" / "f.txt"), ONE_LINE))
    err = await refused(ledger, e.key, top, allow_outside_workspace=True)
    assert err.details["link"] == str(top / "outside" / "via")


async def test_r_edit_3_move_back_to_a_dotfile_outside_is_refused(top: Path, ledger: EditLedger):
    """Undoing a recorded move ``../home/.bash_profile → notes.txt`` would write the profile."""
    (top / "home").mkdir()
    (top / "ws" / "notes.txt").write_text("keep\nnew\n")
    e, = rec(ledger, top, update("../home/.bash_profile", ONE_LINE, move_path="notes.txt"))
    assert e.rename_source == str(top / "home" / ".bash_profile")
    await refused(ledger, e.key, top)
    before = snapshot(top)
    receipt = await ledger.undo_file(e.key, allow_outside_workspace=True)
    assert {op.path for op in receipt.ops} == {str(top / "home" / ".bash_profile"), str(top / "ws" / "notes.txt")}
    assert changed(before, snapshot(top)) == {"home/.bash_profile", "ws/notes.txt"}
    assert (top / "home" / ".bash_profile").read_text() == "keep\nold\n"


async def test_r_edit_3_link_swapped_in_between_check_and_write(top: Path, ledger: EditLedger, monkeypatch):
    """After everything was read and checked, ``ws/sub`` is renamed away and replaced by a link
    to the outside directory (which holds a tempting file of the same name and content). The
    write goes through the directory descriptor opened at check time: the outside file is
    untouched and the real file (now under its new directory name) is the one restored."""
    (top / "ws" / "sub").mkdir()
    (top / "ws" / "sub" / "a.txt").write_text("keep\nnew\n")
    (top / "outside" / "a.txt").write_text("keep\nnew\n")
    e, = rec(ledger, top, update("sub/a.txt", ONE_LINE))
    seen: list[list[str]] = []

    def swap(paths):
        seen.append(list(paths))
        os.rename(top / "ws" / "sub", top / "ws" / "sub.moved")
        os.symlink(top / "outside", top / "ws" / "sub")

    monkeypatch.setattr(edits, "_after_check", swap)
    await ledger.undo_file(e.key)
    assert seen == [[str(top / "ws" / "sub" / "a.txt")]]  # the swap ran, between check and write
    assert (top / "outside" / "a.txt").read_text() == "keep\nnew\n"
    assert (top / "ws" / "sub.moved" / "a.txt").read_text() == "keep\nold\n"
    assert sorted(os.listdir(top / "outside")) == ["a.txt"]  # no temp file left there either


async def test_r_edit_3_link_swapped_in_for_a_missing_directory(top: Path, ledger: EditLedger, monkeypatch):
    """The directory of a deleted file is missing at check time; a link to the outside appears
    before the write. Creating the directory then meets the link and refuses."""
    e, = rec(ledger, top, delete("gone/f.txt", "data\n"))
    monkeypatch.setattr(edits, "_after_check", lambda paths: os.symlink(top / "outside", top / "ws" / "gone"))
    with pytest.raises(OutsideWorkspace):
        await ledger.undo_file(e.key)
    assert os.listdir(top / "outside") == []


async def test_r_edit_3_final_component_link_is_still_refused(top: Path, ledger: EditLedger):
    (top / "outside" / "t.txt").write_text("keep\nnew\n")
    os.symlink(top / "outside" / "t.txt", top / "ws" / "t.txt")
    e, = rec(ledger, top, update("t.txt", ONE_LINE))
    before = snapshot(top)
    with pytest.raises(UndoError) as ei:
        await ledger.undo_file(e.key, allow_outside_workspace=True)
    assert ei.value.code == "NOT_A_REGULAR_FILE" and snapshot(top) == before


# ------------------------------------------------------------------------------ serve and CLI


def outside_history(top: Path) -> list[dict]:
    """One turn: an update inside the cwd and a move of ``../home/.bash_profile`` to notes.txt."""
    move = update("../home/.bash_profile", "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+line three\n line 4\n",
                  move_path="notes.txt")
    return [{"id": "t1", "items": [fc("fc-1", [upd("a.txt", 3, "line 3", "line three"), move], "completed")]}]


@pytest.fixture
def moved(top: Path) -> Path:
    (top / "home").mkdir()
    (top / "ws" / "a.txt").write_text(V2)
    (top / "ws" / "notes.txt").write_text(V2)
    return top


async def test_r_edit_3_serve_undo_outside_needs_allow_outside_workspace(nursery, moved: Path, monkeypatch):
    top = moved
    monkeypatch.setenv("CODEXRT_STATE_DIR", str(top / "state"))
    ws = top / "ws"
    peers = MemoryPeers(nursery)
    wire = await Wire(RuntimeConfig(transports=[peers.factory(scenario(ws, *history_rules(ws, outside_history(top))))])).start(nursery)
    before = snapshot(top)
    no = await wire.request("codex.undoFile", {"threadId": TID, "path": "notes.txt"})
    assert not no["ok"] and no["error"]["code"] == "OUTSIDE_WORKSPACE"
    assert no["error"]["details"]["path"] == str(top / "home" / ".bash_profile")
    assert snapshot(top) == before
    bad = await wire.request("codex.undoFile", {"threadId": TID, "path": "notes.txt", "allowOutsideWorkspace": "yes"})
    assert not bad["ok"] and bad["error"]["code"] == "INVALID_PARAMS" and snapshot(top) == before
    inside = await wire.request("codex.undoFile", {"threadId": TID, "path": "a.txt"})
    assert inside["ok"] and changed(before, snapshot(top)) == {"ws/a.txt"}
    mid = snapshot(top)
    yes = await wire.request("codex.undoFile", {"threadId": TID, "path": "notes.txt", "allowOutsideWorkspace": True})
    assert yes["ok"], yes
    assert changed(mid, snapshot(top)) == {"home/.bash_profile", "ws/notes.txt"}
    assert (top / "home" / ".bash_profile").read_text() == V1
    await wire.close()
    assert_private(top / "state")  # what serve wrote for itself is private (R-PRIV-1)


async def test_r_edit_3_cli_undo_outside_needs_the_flag(nursery, moved: Path):
    from codexrt_cli._edits_cli import undo_path
    from codexrt_cli._main import build_parser

    top = moved
    ws = top / "ws"
    state = str(top / "state")

    def cfg():
        return RuntimeConfig(transports=[MemoryPeers(nursery).factory(
            scenario(ws, *history_rules(ws, outside_history(top))))])

    args = build_parser().parse_args(["undo", TID, "notes.txt", "--allow-outside-workspace"])
    assert args.allow_outside_workspace is True
    assert build_parser().parse_args(["undo", TID, "notes.txt"]).allow_outside_workspace is False
    before = snapshot(top)
    out, err = io.StringIO(), io.StringIO()
    rc = await undo_path(TID, "notes.txt", config=cfg(), state_dir=state, out=out, err=err)
    assert rc == 1 and "OUTSIDE_WORKSPACE" in err.getvalue() and snapshot(top) == before
    assert "hint: " in err.getvalue() and "--allow-outside-workspace" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    rc = await undo_path(TID, "notes.txt", config=cfg(), state_dir=state, out=out, err=err,
                         allow_outside_workspace=True)
    assert rc == 0, err.getvalue()
    assert changed(before, snapshot(top)) == {"home/.bash_profile", "ws/notes.txt"}
