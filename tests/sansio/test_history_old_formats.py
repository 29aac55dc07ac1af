"""Older rollout formats read right (issue 32; R-H-3, R-H-7): the 0.46-era shell format (no task
events, ``turn_context`` without ``turn_id``) gets no extra empty first turn and one turn per user
message; the mid-2025 format (first line ``{id, timestamp, instructions}``, bare response items,
``record_type`` markers) is not shown empty; a file nothing of which can be shown says so and
its count is unknown, never 0.

Files in the real shapes of those releases, built here: no binary of those eras is installed (the
pinned ones are 0.171.0 and 0.147.0), and their rollout policy wrote no task events (shapes from
the codex-rs rollout writer of the time and published samples of 0.46.0 files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codexrt._features._history_legacy import load_rollout_transcript
from codexrt._sansio._legacy import LegacyParser

TID = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"


def _env(i: int, t: str, p: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": f"2025-10-29T00:59:{i:02d}.317Z", "type": t, "payload": p}


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


SHELL_CALL = {"type": "function_call", "name": "shell", "call_id": "call_1",
              "arguments": json.dumps({"command": ["bash", "-lc", "ls"], "workdir": "/w"})}
SHELL_OUT = {"type": "function_call_output", "call_id": "call_1",
             "output": json.dumps({"output": "a.txt\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}})}
CTX = {"cwd": "/w", "approval_policy": "on-request", "sandbox_policy": {"mode": "workspace-write"},
       "model": "gpt-5-codex", "effort": "medium", "summary": "auto"}


def _write(tmp_path: Path, name: str, lines: list[dict[str, Any]]) -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def _view(path: Path) -> Any:
    tr = load_rollout_transcript(path, mask=lambda r: r)
    return tr, [(g.status, [(r.kind, getattr(r, "text", None) or getattr(r, "command", None)) for r in g.records])
                for g in tr.turns]


def test_r_h_3_the_046_shell_format_has_one_turn_per_user_message_and_no_empty_first_turn(tmp_path: Path) -> None:
    path = _write(tmp_path, "old046.jsonl", [
        _env(0, "session_meta", {"id": TID, "timestamp": "2025-10-29T00:59:38.308Z", "cwd": "/w",
                                 "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": None,
                                 "source": "cli", "git": {}}),
        _env(0, "response_item", _user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")),
        _env(1, "response_item", _user("list files")),
        _env(1, "event_msg", {"type": "user_message", "message": "list files", "kind": "plain"}),
        _env(1, "turn_context", CTX),
        _env(2, "event_msg", {"type": "agent_reasoning", "text": "**Listing**"}),
        _env(2, "response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Listing**"}],
                                  "content": None, "encrypted_content": "gAAA"}),
        _env(3, "response_item", SHELL_CALL),
        _env(4, "response_item", SHELL_OUT),
        _env(5, "event_msg", {"type": "token_count", "info": None, "rate_limits": None}),
        _env(5, "event_msg", {"type": "agent_message", "message": "One file: a.txt"}),
        _env(5, "response_item", _assistant("One file: a.txt")),
        _env(6, "response_item", _user("thanks")),
        _env(6, "event_msg", {"type": "user_message", "message": "thanks", "kind": "plain"}),
        _env(6, "turn_context", CTX),
        _env(7, "event_msg", {"type": "agent_message", "message": "You are welcome."}),
        _env(7, "response_item", _assistant("You are welcome.")),
    ])
    tr, view = _view(path)
    assert view == [
        ("unknown", [("userMessage", "list files"), ("reasoning", None), ("commandExecution", "bash -lc ls"),
                     ("assistantMessage", "One file: a.txt")]),
        ("unknown", [("userMessage", "thanks"), ("assistantMessage", "You are welcome.")]),
    ]  # no task events were written then: the file cannot know how the turns ended
    assert tr.message_count == 4
    cmd = tr.turns[0].records[2]
    assert (cmd.status, cmd.exit_code, cmd.output) == ("completed", 0, "a.txt\n")


def test_r_h_3_a_made_up_turn_holding_only_injected_context_is_not_shown(tmp_path: Path) -> None:
    """The shape that gave the extra empty first turn: context before a task event without a turn id."""
    path = _write(tmp_path, "ctx-first.jsonl", [
        _env(0, "session_meta", {"id": TID, "cli_version": "0.46.0", "source": "cli"}),
        _env(0, "response_item", _user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>")),
        _env(1, "event_msg", {"type": "task_started", "model_context_window": 272000}),
        _env(1, "event_msg", {"type": "user_message", "message": "hi", "kind": "plain"}),
        _env(2, "response_item", _assistant("Hello.")),
        _env(3, "event_msg", {"type": "task_complete", "last_agent_message": "Hello."}),
    ])
    _, view = _view(path)
    assert view == [("completed", [("userMessage", "hi"), ("assistantMessage", "Hello.")])]


MID_2025 = [
    {"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-06-20T10:00:00.000Z", "instructions": None,
     "git": {"commit_hash": "abc", "branch": "main", "repository_url": None}},
    {"record_type": "state"},
    _user("<environment_context>\n<cwd>/w</cwd>\n</environment_context>"),
    _user("list the files"),
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "**Listing files**"}],
     "encrypted_content": "gAAAA"},
    SHELL_CALL,
    SHELL_OUT,
    {**_assistant("There is a.txt."), "id": "msg_1"},
    {"record_type": "state"},
    _user("thanks"),
    {**_assistant("You are welcome."), "id": "msg_2"},
    {"record_type": "state"},
]


def test_r_h_3_the_mid_2025_format_is_read_not_shown_empty(tmp_path: Path) -> None:
    tr, view = _view(_write(tmp_path, "mid2025.jsonl", MID_2025))
    assert tr.thread_id == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    assert view == [
        ("unknown", [("userMessage", "list the files"), ("reasoning", None), ("commandExecution", "bash -lc ls"),
                     ("assistantMessage", "There is a.txt.")]),
        ("unknown", [("userMessage", "thanks"), ("assistantMessage", "You are welcome.")]),
    ]
    assert tr.message_count == 4 and not tr.problems


def test_r_h_3_the_mid_2025_format_parses_the_same_in_batches_and_line_by_line() -> None:
    data = "".join(json.dumps(x) + "\n" for x in MID_2025).encode()
    out = []
    for batch in (True, False):
        p = LegacyParser(batch=batch)
        recs = p.feed(data) + p.close()
        out.append((recs, p.stats, p.problems, p.session_meta))
    assert out[0] == out[1]
    recs, stats, problems, meta = out[0]
    assert [r.type for r in recs] == ["session_meta"] + ["response_item"] * 8
    assert (stats.invalid, problems, meta["id"]) == (0, [], "5973b6c0-94b8-487b-a530-2aeb6098ae0e")


def test_r_h_7_a_file_nothing_of_which_can_be_shown_says_so_and_its_count_is_unknown(tmp_path: Path) -> None:
    path = _write(tmp_path, "future.jsonl", [{"timestamp": "t", "type": "brand_new_kind", "payload": {"x": 1}},
                                             {"timestamp": "t", "type": "another_kind", "payload": {}}])
    tr = load_rollout_transcript(path, mask=lambda r: r)
    assert tr.turns == () and tr.message_count is None
    assert any("nothing in this rollout file could be shown" in n for n in tr.notices)
    # an empty thread (only its session_meta) is simply empty: count 0, no notice
    empty = load_rollout_transcript(_write(tmp_path, "empty.jsonl", [_env(0, "session_meta", {"id": TID})]),
                                    mask=lambda r: r)
    assert empty.message_count == 0 and not [n for n in empty.notices if "nothing" in n]


def test_r_h_3_a_bare_mid_2025_line_nested_too_deeply_is_one_skipped_line() -> None:
    deep = b'{"type":"message","role":"user","x":' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    data = json.dumps(MID_2025[0]).encode() + b"\n" + deep + json.dumps(MID_2025[3]).encode() + b"\n"
    for batch in (True, False):
        p = LegacyParser(batch=batch)
        recs = p.feed(data) + p.close()
        assert [r.type for r in recs] == ["session_meta", "response_item"]
        assert [(x.line_no, x.kind) for x in p.problems] == [(2, "too_deep")]
