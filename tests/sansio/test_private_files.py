"""Files codexrt writes hold private data: directories 0700, files 0600, whatever the umask
(issue 18, R-PRIV-1). Each test writes through the public paths (the edit store with its
sqlite side files in both journal modes, the privacy index) into a fresh state directory,
then walks *everything* under it and checks every mode."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from codexrt._io._edits import EditKey, EditLedger, EditStore, default_store_path
from codexrt._runtime._interactions import PrivacyStore, default_privacy_dir
from codexrt._sansio._privacy import record_for_user_input

PARAMS = {"threadId": "th", "turnId": "tu", "itemId": "call_1", "isBlocking": True,
          "questions": [{"id": "pw", "header": "Password", "question": "Password?", "isSecret": True}]}


def modes(top: Path) -> dict[str, int]:
    """Mode bits of ``top`` and of everything below it (links are not followed)."""
    out = {".": stat.S_IMODE(top.lstat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(top))] = stat.S_IMODE(p.lstat().st_mode)
    return out


def assert_private(top: Path) -> dict[str, int]:
    found = modes(top)
    wrong = {}
    for rel, mode in found.items():
        want = 0o700 if (top / rel).is_dir() else 0o600
        if mode != want:
            wrong[rel] = oct(mode)
    assert not wrong, wrong
    return found


@pytest.fixture(params=[0o022, 0o000], ids=["umask022", "umask000"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "xdg-state"  # does not exist yet: codexrt creates every level
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    monkeypatch.delenv("CODEXRT_STATE_DIR", raising=False)
    monkeypatch.delenv("CODEXRT_PRIVACY_DIR", raising=False)
    return home


def test_r_priv_1_edit_store_and_privacy_index_are_private(tmp_path: Path, state_home: Path, umask: int):
    ws = tmp_path / "ws"
    ws.mkdir()
    store = EditStore.for_workspace(str(ws))
    assert store.path == default_store_path(str(ws)) and store.path.startswith(str(state_home))
    led = EditLedger(session_id="s", store=store)
    key = EditKey("th", "t", "i", "a.txt")
    # rollback journal: a second connection holds a write transaction open, so the -journal
    # file exists while we look at it
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO undone VALUES (?, ?)", (key.to_json(), 1.0))
    journal = Path(store.path + "-journal")
    assert journal.exists()
    assert_private(state_home)
    other.execute("COMMIT")
    other.close()
    # write-ahead log: -wal and -shm exist while the database is open
    store._db.execute("PRAGMA journal_mode=WAL")
    store.mark_undone([EditKey("th", "t", "i2", "b.txt")], 2.0)
    assert Path(store.path + "-wal").exists() and Path(store.path + "-shm").exists()
    # the privacy index under the same state home
    priv = PrivacyStore.for_home(default_privacy_dir(), str(tmp_path / "codex-home"))
    priv.write(record_for_user_input(PARAMS, record_id="r1", scope=priv.fingerprint, host="ch", created_ms=1))
    found = assert_private(state_home)
    assert {"codexrt", "codexrt/workspaces", "codexrt/privacy"} <= set(found)
    assert any(n.endswith("-wal") for n in found) and any(n.endswith("-shm") for n in found)
    assert len(led.store.undone_keys()) == 2
    store.close()
    assert_private(state_home)


def test_r_priv_1_loose_store_of_an_older_version_is_tightened(tmp_path: Path, state_home: Path):
    workspaces = state_home / "codexrt" / "workspaces"
    workspaces.mkdir(parents=True)
    path = default_store_path(str(tmp_path / "ws"))
    Path(path).write_bytes(b"")
    os.chmod(path, 0o644)
    os.chmod(workspaces, 0o755)
    os.chmod(workspaces.parent, 0o755)
    os.chmod(state_home, 0o755)  # not codexrt's own: left alone
    EditStore(path).close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(workspaces.stat().st_mode) == 0o700
    assert stat.S_IMODE(workspaces.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(state_home.stat().st_mode) == 0o755


def test_a_state_dir_chosen_by_the_user_is_not_tightened(tmp_path: Path, monkeypatch):
    """``$CODEXRT_STATE_DIR`` may be a shared directory: only codexrt's own ``workspaces``
    below it and the store file become private; a sticky directory is never touched."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    monkeypatch.setenv("CODEXRT_STATE_DIR", str(shared))
    store = EditStore.for_workspace(str(tmp_path / "ws"))
    store.close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE((shared / "workspaces").stat().st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
