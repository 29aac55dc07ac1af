"""``codexrt threads --offline`` / ``show --offline`` and serve's inactive history over a
``CODEX_HOME`` holding hostile files (issue 32; R-H-3, R-H-6, R-H-7): the other threads are
listed with one notice per bad file and exit 0; ``show`` of a file nested ~900 deep prints; the
one file asked for that cannot be read is one clean error. Files built in the real shapes by
``tests/_hostile_home.py`` (the real codex never writes them)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import trio

import codexrt._features._history as history
from codexrt._features._history import CLIPPED_VALUE, open_history_reader
from codexrt._features._history_commands import run_legacy_history_command
from codexrt_cli._main import build_parser
from codexrt_cli._show import run_show
from codexrt_cli._threads import run_threads

from tests import _hostile_home as H

GOOD_ONES = {H.tid(n) for n in (H.GOOD, H.DEEP_HEAD, H.DEEP_MCP, H.DEEP_BODY)}


async def _cli(fn, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = await fn(build_parser().parse_args(list(argv)), out, err)
    return rc, out.getvalue(), err.getvalue()


async def test_r_h_6_threads_offline_over_hostile_files_lists_the_others_with_one_notice_each(tmp_path: Path):
    home = tmp_path / "home"
    H.build(home)
    rc, out, err = await _cli(run_threads, "threads", "--offline", "--json", "--codex-home", str(home))
    assert rc == 0, err
    rows = {r["threadId"]: r for r in json.loads(out)}
    assert set(rows) == GOOD_ONES
    assert rows[H.tid(H.DEEP_BODY)]["messageCount"] == 2  # the deep line skipped, the rest counted
    assert rows[H.tid(H.GOOD)]["name"] == "named good"
    notices = [line for line in err.splitlines() if line.startswith("codexrt threads: notice: ")]
    assert len(notices) == 5 and "Traceback" not in err, err


async def test_r_h_4_show_json_of_mcp_structured_content_nested_900_deep_prints_clipped(tmp_path: Path):
    home = tmp_path / "home"
    H.build(home)
    rc, out, err = await _cli(run_show, "show", H.tid(H.DEEP_MCP), "--offline", "--json", "--codex-home", str(home))
    assert rc == 0, err
    (mcp,) = [r for t in json.loads(out)["turns"] for r in t["records"] if r["kind"] == "mcpToolCall"]
    assert CLIPPED_VALUE in json.dumps(mcp["structuredContent"])
    rc, out, err = await _cli(run_show, "show", H.tid(H.DEEP_MCP), "--offline", "--codex-home", str(home))
    assert rc == 0 and "mcp srv/tool [completed]" in out, err


async def test_r_h_3_show_of_a_thread_with_a_200k_deep_line_shows_the_rest_and_says_so(tmp_path: Path):
    home = tmp_path / "home"
    H.build(home)
    rc, out, err = await _cli(run_show, "show", H.tid(H.DEEP_BODY), "--offline", "--json", "--codex-home", str(home))
    assert rc == 0, err
    tr = json.loads(out)
    assert [r["text"] for t in tr["turns"] for r in t["records"]] == ["before", "after"]
    assert any("line 3 (nested too deeply)" in n for n in tr["notices"])


async def test_r_h_3_show_of_a_fifo_a_device_or_a_link_outside_is_one_clean_error(tmp_path: Path):
    home = tmp_path / "home"
    paths = H.build(home)
    for n in (H.FIFO, H.DEVICE, H.OUTSIDE):
        rc, out, err = await _cli(run_show, "show", H.tid(n), "--offline", "--codex-home", str(home))
        assert rc == 1 and out == "", err
        assert err.startswith("codexrt show: HISTORY_READ_FAILED:") and str(paths[n]) in err
        assert "Traceback" not in err


async def test_r_h_7_counting_listed_rows_never_rescans_the_home(tmp_path: Path, monkeypatch):
    """The listed row's file is counted directly: 50 counts over a large home cost 50 reads,
    not 50 scans of every rollout."""
    home = tmp_path / "home"
    H.build(home)
    scans: list[str] = []
    real = history.find_rollout
    monkeypatch.setattr(history, "find_rollout", lambda *a, **k: scans.append(a[1]) or real(*a, **k))
    async with open_history_reader(None, codex_home=home) as reader:
        page = await reader.list_all_threads(limit=50)
        counts, _ = await reader.count_many(t.thread_id for t in page.threads)
    assert scans == []
    assert {k for k, c in counts.items() if c.known} == GOOD_ONES
    assert len(page.notices) == 5


async def test_r_h_6_serve_inactive_list_threads_carries_the_notices(tmp_path: Path):
    home = tmp_path / "home"
    H.build(home)
    async with trio.open_nursery() as nursery:
        res = await run_legacy_history_command("codex.listThreads", {}, codex_home=home, privacy=None,
                                               nursery=nursery)
        assert {r["id"] for r in res["data"]} == GOOD_ONES and len(res["notices"]) == 5
        res = await run_legacy_history_command("codex.readThread", {"threadId": H.tid(H.DEEP_MCP)},
                                               codex_home=home, privacy=None, nursery=nursery)
        json.dumps(res)  # bounded depth: encodes
