"""R-H-9 session index cache: versioned (v10), rebuilt when stale or damaged, per-file reuse
by (mtime, size), sub-agent and Guardian rollouts filtered from the legacy list by their
``session_meta`` source; a file is written only where asked (R-H-6, R-H-9)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from codexrt._features._history import legacy_thread_list
from codexrt._io._session_index import SESSION_INDEX_VERSION, SessionIndex, shared_index, source_kind

ATTACH = "# Files mentioned by the user:\n\n## a.png: /p/a.png\n\n## My request for Codex:\nfix the login page"


def rollout(home: Path, n: int, *, source: Any = "vscode", text: str = "hello", stamp: str = "10-00-00") -> Path:
    tid = f"0190dddd-0000-7000-8000-0000000000{n:02d}"
    day = home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True, exist_ok=True)
    p = day / f"rollout-2026-11-30T{stamp}-{tid}.jsonl"
    lines = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": tid, "source": source, "cwd": "/w",
                                                              "cli_version": "0.169.0", "history_mode": "legacy"}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>\n<cwd>/w</cwd>\n</environment_context>"}]}},
        {"timestamp": "t", "type": "event_msg", "payload": {"type": "user_message", "message": text}},
    ]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    os.utime(p, (1_800_000_000 + n, 1_800_000_000 + n))
    return p


def test_r_h_9_source_kinds() -> None:
    assert source_kind("vscode") == ("top", None)
    assert source_kind("cli") == ("top", None)
    assert source_kind({"subagent": "review"}) == ("subagent", None)
    assert source_kind({"subagent": {"thread_spawn": {"parent_thread_id": "p1", "depth": 1}}}) == ("subagent", "p1")
    assert source_kind({"subagent": {"other": "guardian"}}) == ("guardian", None)
    assert source_kind("guardian") == ("guardian", None)


def test_r_h_9_sub_agent_and_guardian_rollouts_are_not_top_level_threads(tmp_path: Path) -> None:
    rollout(tmp_path, 1, source="vscode", text="top one")
    rollout(tmp_path, 2, source={"subagent": {"thread_spawn": {"parent_thread_id": "x", "depth": 1}}})
    rollout(tmp_path, 3, source={"subagent": {"other": "guardian"}}, text="assess this command")
    rollout(tmp_path, 4, source="cli", text="top two")
    rows = legacy_thread_list(tmp_path, index=SessionIndex(tmp_path))
    assert [(r.thread_id[-2:], r.preview) for r in rows] == [("04", "top two"), ("01", "top one")]


def test_r_h_9_titles_are_sanitized_and_context_messages_skipped(tmp_path: Path) -> None:
    rollout(tmp_path, 1, text=ATTACH)
    (e,) = SessionIndex(tmp_path).refresh()
    assert e.title == "fix the login page" and e.kind == "top" and e.history_mode == "legacy"


def test_r_h_9_unchanged_files_are_reused_changed_ones_reread_and_gone_ones_dropped(tmp_path: Path) -> None:
    a = rollout(tmp_path, 1, text="first")
    b = rollout(tmp_path, 2, text="second")
    path = tmp_path / "state" / "index.json"
    idx = SessionIndex(tmp_path, path=path)
    idx.refresh()
    assert (idx.stats.rebuilt, idx.stats.scanned, idx.stats.reused) == (True, 2, 0)
    idx2 = SessionIndex(tmp_path, path=path)  # a new process: from the file
    idx2.refresh()
    assert (idx2.stats.rebuilt, idx2.stats.scanned, idx2.stats.reused) == (False, 0, 2)
    a.write_text(a.read_text().replace("first", "first, edited"))
    b.unlink()
    entries = idx2.refresh()
    assert (idx2.stats.scanned, idx2.stats.reused, idx2.stats.dropped) == (1, 0, 1)
    assert [e.title for e in entries] == ["first, edited"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_r_h_9_another_version_or_a_damaged_cache_is_rebuilt_with_todays_titles(tmp_path: Path) -> None:
    p = rollout(tmp_path, 1, text=ATTACH)
    path = tmp_path / "index.json"
    st = p.stat()
    old_entry = {"path": str(p), "mtime_ns": st.st_mtime_ns, "size": st.st_size, "thread_id": "x", "kind": "top",
                 "source": "vscode", "parent_thread_id": None, "title": ATTACH.splitlines()[0], "cwd": None,
                 "cli_version": None, "history_mode": None, "created_at": None}
    path.write_text(json.dumps({"version": 9, "codexHome": str(tmp_path), "entries": [old_entry]}))
    idx = SessionIndex(tmp_path, path=path)
    (e,) = idx.refresh()
    assert idx.stats.rebuilt and e.title == "fix the login page"
    assert json.loads(path.read_text())["version"] == SESSION_INDEX_VERSION == 10
    path.write_text("{not json")
    idx = SessionIndex(tmp_path, path=path)
    (e,) = idx.refresh()
    assert idx.stats.rebuilt and e.title == "fix the login page"
    # the same version with the cached (old) title is trusted while the file is unchanged
    path.write_text(json.dumps({"version": 10, "codexHome": str(tmp_path), "entries": [old_entry]}))
    idx = SessionIndex(tmp_path, path=path)
    (e,) = idx.refresh()
    assert not idx.stats.rebuilt and idx.stats.reused == 1 and e.title == old_entry["title"]


def test_r_h_9_nothing_is_written_unless_a_state_dir_is_given(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    rollout(home, 1)
    monkeypatch.delenv("CODEXRT_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    idx = shared_index(home)
    assert idx.path is None and [e.thread_id[-2:] for e in idx.refresh()] == ["01"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["home"]
    monkeypatch.setenv("CODEXRT_STATE_DIR", str(tmp_path / "state"))
    idx = shared_index(home)
    idx.refresh()
    assert idx.path is not None and idx.path.parent == tmp_path / "state" and idx.path.is_file()
