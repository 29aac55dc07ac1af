"""``codexrt threads`` / ``codexrt show`` offline on real rollout files, and legacy exec wrappers
rendered through the attribution engine (R-H-3, R-H-5, R-H-6, R-H-7)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from codexrt_cli._main import build_parser
from codexrt_cli._show import run_show
from codexrt_cli._threads import run_threads

DATA = Path(__file__).resolve().parents[1] / "data"
WRAP = "01a22d2b-0343-7af2-9139-c7b435259297"


def _home(tmp_path: Path) -> tuple[Path, str]:
    tid = json.loads((DATA / "rollouts" / "paginated.native.json").read_text())["threadId"]
    day = tmp_path / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    shutil.copy(DATA / "rollouts" / "paginated.rollout.jsonl", day / f"rollout-2026-11-30T10-00-00-{tid}.jsonl")
    shutil.copy(DATA / "wrappers" / "real-0.169.0-exec-promise-all.jsonl", day / f"rollout-2026-11-30T11-00-00-{WRAP}.jsonl")
    return tmp_path, tid


async def test_r_h_6_threads_offline_json_has_the_documented_fields(tmp_path):
    home, tid = _home(tmp_path)
    args = build_parser().parse_args(["threads", "--offline", "--json", "--codex-home", str(home)])
    out, err = io.StringIO(), io.StringIO()
    assert await run_threads(args, out, err) == 0, err.getvalue()
    rows = {r["threadId"]: r for r in json.loads(out.getvalue())}
    assert set(rows) == {tid, WRAP}
    assert all({"threadId", "name", "updatedAt", "messageCount"} <= set(r) for r in rows.values())
    assert rows[tid]["messageCount"] == 8 and rows[tid]["source"] == "legacy"


async def test_r_h_7_threads_table_shows_unknown_as_question_mark_never_zero(tmp_path):
    home, _ = _home(tmp_path)
    args = build_parser().parse_args(["threads", "--offline", "--no-counts", "--codex-home", str(home)])
    out = io.StringIO()
    assert await run_threads(args, out, io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:4] == ["UPDATED", "MSGS", "THREAD", "ID"]
    assert all(line.split()[2] == "?" for line in lines[1:3]) and "source: legacy" in lines[-1]


async def test_r_h_3_show_offline_and_unknown_thread_is_a_clear_error(tmp_path, monkeypatch):
    home, tid = _home(tmp_path)
    monkeypatch.setenv("CODEXRT_PRIVACY_DIR", str(tmp_path / "privacy"))
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["show", tid, "--offline", "--codex-home", str(home)])
    assert await run_show(args, out, err) == 0
    text = out.getvalue()
    # the runtime's privacy index masks the legacy transcript: no "not guaranteed" notice (R-H-3)
    assert "source: legacy, 4 turn(s)" in text and "secret masking is not guaranteed" not in text
    assert "You:\n  list the files" in text and "| a.txt" in text and "(+2 −0)" in text
    args = build_parser().parse_args(["show", "99999999-9999-4999-8999-999999999999", "--offline",
                                      "--codex-home", str(home)])
    err = io.StringIO()
    assert await run_show(args, io.StringIO(), err) == 1
    assert "THREAD_NOT_FOUND" in err.getvalue()


async def test_r_h_5_show_renders_a_replaced_wrapper_as_commands_in_the_servers_order(tmp_path):
    home, _ = _home(tmp_path)
    out = io.StringIO()
    args = build_parser().parse_args(["show", WRAP, "--offline", "--json", "--codex-home", str(home)])
    assert await run_show(args, out, io.StringIO()) == 0
    recs = [r for t in json.loads(out.getvalue())["turns"] for r in t["records"]]
    assert [r["kind"] for r in recs] == ["userMessage", "commandExecution", "commandExecution", "assistantMessage"]
    # written in completion order (b before a) and shown so, each with its own output: the server
    # lists a cell's commands in the order they ended (issue 32: tests/data/rollouts/code-all-*)
    assert [(r["command"], r["output"]) for r in recs[1:3]] == [("/bin/bash -lc 'echo b'", "b\n"),
                                                                ("/bin/bash -lc 'echo a'", "a\n")]
