"""Hostile rollout files and ``CODEX_HOME`` contents (issue 32; R-H-3, R-H-6, R-H-9): regular
files only, bounded reads, deep lines skipped with a notice, deep values emitted without a
RecursionError, listing cost linear in the number of files.

The real codex never writes these files (they are what a damaged disk or a hostile archive
leaves), so they are built in the real shapes by ``tests/_hostile_home.py``.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codexrt._io._session_index as session_index
from codexrt._features._history import CLIPPED_VALUE, MAX_VALUE_DEPTH, legacy_thread_list, transcript_to_json
from codexrt._features._history_legacy import _session_names, load_rollout_transcript
from codexrt._io._history_files import find_rollout, find_rollouts, iter_rollout, open_regular
from codexrt._io._session_index import HEAD_BYTES, SessionIndex, read_head
from codexrt._sansio._legacy import LegacyParser
from codexrt._sansio._projection import McpToolCall
from codexrt._sansio._errors import HistoryReadFailed

from tests import _hostile_home as H


def _nested(depth: int) -> Any:
    v: Any = []
    for _ in range(depth):
        v = [v]
    return v


def test_r_h_3_a_line_nested_200k_deep_is_skipped_with_a_notice_not_the_whole_file(tmp_path: Path) -> None:
    paths = H.build(tmp_path / "home")
    tr = load_rollout_transcript(paths[H.DEEP_BODY], mask=lambda r: r)
    texts = [r.text for r in tr.records() if r.kind == "userMessage"]
    assert texts == ["before", "after"]
    assert [(p.line_no, p.kind) for p in tr.problems] == [(3, "too_deep")]
    assert any("line 3 (nested too deeply)" in n for n in tr.notices), tr.notices


@pytest.mark.parametrize("batch", [True, False])
def test_r_h_3_the_parser_reports_a_deep_line_on_both_decode_paths(batch: bool) -> None:
    data = (H.meta(1) + "\n" + "{" + '"type":"x","payload":' + H.deep(150_000) + "}\n" + H.user("u") + "\n").encode()
    p = LegacyParser(batch=batch)
    recs = p.feed(data) + p.close()
    assert [r.type for r in recs] == ["session_meta", "event_msg"]
    assert (p.stats.invalid, [x.kind for x in p.problems]) == (1, ["too_deep"])


def test_r_h_6_only_regular_files_inside_codex_home_are_listed_one_notice_each(tmp_path: Path) -> None:
    home = tmp_path / "home"
    paths = H.build(home)
    inside = H.rollout_path(home, 8)
    os.symlink(paths[H.GOOD], inside)  # a symlink that stays inside CODEX_HOME is followed
    notices: list[str] = []
    found = {r.thread_id for r in find_rollouts(home, notices=notices)}
    assert found == {H.tid(n) for n in (H.GOOD, H.DEEP_HEAD, H.DEEP_MCP, H.DEEP_BODY, 8)}
    assert len(notices) == 3
    assert any(str(paths[H.FIFO]) in n and "a FIFO" in n for n in notices)
    assert any(str(paths[H.DEVICE]) in n and "outside CODEX_HOME" in n for n in notices)
    assert any(str(paths[H.OUTSIDE]) in n and "outside CODEX_HOME" in n for n in notices)
    skipped: list[str] = []
    assert find_rollout(home, H.tid(H.FIFO), notices=skipped) is None and len(skipped) == 1


def test_r_h_6_a_symlinked_directory_leaving_codex_home_is_not_walked(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    H.write(elsewhere, 1, H.meta(1), H.user("x"))
    (home / "sessions").mkdir(parents=True)
    os.symlink(elsewhere / "sessions" / "2026", home / "sessions" / "2026")
    notices: list[str] = []
    assert find_rollouts(home, notices=notices) == [] and len(notices) == 1
    # CODEX_HOME itself reached through a symlink is fine: containment is checked on real paths
    link = tmp_path / "home-link"
    os.symlink(elsewhere, link)
    assert [r.thread_id for r in find_rollouts(link)] == [H.tid(1)]


def test_r_h_3_open_regular_refuses_a_fifo_without_blocking_and_a_device(tmp_path: Path) -> None:
    paths = H.build(tmp_path / "home")
    with pytest.raises(OSError, match="a FIFO"):
        open_regular(paths[H.FIFO])  # O_NONBLOCK: no writer needed to get the answer
    with pytest.raises(OSError):
        open_regular(paths[H.DEVICE])  # O_NOFOLLOW: the symlink itself is refused
    with pytest.raises(OSError, match="a device"):
        open_regular("/dev/zero")
    with pytest.raises(OSError):
        next(iter_rollout("/dev/zero"))
    with pytest.raises(HistoryReadFailed, match="not a regular file"):
        load_rollout_transcript("/dev/zero")


def test_r_h_9_a_300mb_first_line_is_read_up_to_the_head_limit_only(tmp_path: Path, monkeypatch) -> None:
    """Scaled down (8 MiB stands for 300 MB): what is read is counted, not timed."""
    p = H.rollout_path(tmp_path, 1)
    with open(p, "wb") as f:
        f.write(b'{"type":"session_meta","payload":{"x":"' + b"a" * (8 << 20) + b'"}}\n')
    read: list[int] = []
    real_open = session_index.open_regular

    def counting_open(path: Any) -> Any:
        f = real_open(path)
        orig = f.read
        f.read = lambda n=-1: read.append(n) or orig(n)  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(session_index, "open_regular", counting_open)
    tracemalloc.start()
    try:
        st = p.stat()
        entry = read_head(p, H.tid(1), st.st_mtime_ns, st.st_size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(read) == HEAD_BYTES + 1 and max(read) <= 64 * 1024  # small chunks, up to the bound
    assert peak < 3 * HEAD_BYTES
    assert entry.thread_id == H.tid(1) and entry.problem is not None and "longer than" in entry.problem


def test_r_h_6_session_index_lines_too_long_or_too_deep_cost_a_bounded_buffer_and_one_notice(tmp_path: Path) -> None:
    with open(tmp_path / "session_index.jsonl", "wb") as f:
        f.write(b'{"id":"a","thread_name":"' + b"x" * (8 << 20) + b'"}\n')
        f.write(b'{"id":"b","thread_name":' + H.deep(100_000).encode() + b"}\n")
        f.write(json.dumps({"id": "C", "thread_name": "kept"}).encode() + b"\n")
    notices: list[str] = []
    tracemalloc.start()
    try:
        names = _session_names(tmp_path, notices)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert names == {"c": "kept"}
    assert peak < 2 << 20
    assert len(notices) == 1 and "2 line(s)" in notices[0]
    os.unlink(tmp_path / "session_index.jsonl")
    os.mkfifo(tmp_path / "session_index.jsonl")
    notices.clear()
    assert _session_names(tmp_path, notices) == {} and "not a regular file" in notices[0]


def test_r_h_6_the_legacy_list_over_a_hostile_home_lists_the_others_with_one_notice_per_bad_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    H.build(home)
    notices: list[str] = []
    rows = legacy_thread_list(home, index=SessionIndex(home), notices=notices)
    assert {r.thread_id for r in rows} == {H.tid(n) for n in (H.GOOD, H.DEEP_HEAD, H.DEEP_MCP, H.DEEP_BODY)}
    by_id = {r.thread_id: r for r in rows}
    assert by_id[H.tid(H.GOOD)].name == "named good"
    assert by_id[H.tid(H.DEEP_HEAD)].preview == "after the deep line"
    # FIFO, device link, outside link, the deep head line, the deep session_index line
    assert len(notices) == 5, notices


def test_r_h_6_listing_20000_rollouts_reads_only_the_heads_it_shows(tmp_path: Path, monkeypatch) -> None:
    """Linear and streamed: a list of 50 out of 20,000 rollouts stats every file but opens only
    the 50 it shows, in memory that grows with the number of files (one small record each), not
    with their contents; the whole list opens each file once. Counted, never timed."""
    home = tmp_path / "home"
    n = 20_000
    for i in range(n):
        day = home / "sessions" / "2026" / "11" / f"{1 + i % 28:02d}"
        if i < 28:
            day.mkdir(parents=True)
        p = day / f"rollout-2026-11-{1 + i % 28:02d}T10-00-00-{H.tid(i)}.jsonl"
        p.write_text(H.meta(i) + "\n" + H.user(f"hello {i}") + "\n")
        os.utime(p, (1_800_000_000 + i, 1_800_000_000 + i))
    heads: list[str] = []
    real = session_index.read_head
    monkeypatch.setattr(session_index, "read_head", lambda p, *a: heads.append(str(p)) or real(p, *a))
    idx = SessionIndex(home)
    tracemalloc.start()
    try:
        rows = legacy_thread_list(home, index=idx, limit=50)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.thread_id for r in rows] == [H.tid(i) for i in range(n - 1, n - 51, -1)]
    assert len(heads) == 50
    # the stat of each file (a small record each, ~1 KB measured with its path), nothing of their
    # contents; 2 KB a file leaves room for what the rest of a long test session has cached
    assert peak < n * 2048
    heads.clear()
    rows = legacy_thread_list(home, index=idx)
    assert len(rows) == n and len(heads) == n - 50  # each file opened once: the first 50 from the cache


# -- the output path: deep and wide values -------------------------------------------------


def test_r_h_4_a_value_nested_5000_deep_is_emitted_clipped_never_a_recursion_error() -> None:
    rec = McpToolCall(id="c1", thread_id="t", turn_id="u", status="completed", server="s", tool="t",
                      structured_content={"a": _nested(5000)})
    from codexrt._features._history import record_to_json

    out = record_to_json(rec)
    text = json.dumps(out, indent=2)  # the show --json encoder: bounded depth, so no RecursionError
    assert CLIPPED_VALUE in text
    v, depth = out["structuredContent"]["a"], 2
    while isinstance(v, list):
        v, depth = v[0], depth + 1
    assert v == CLIPPED_VALUE and depth == MAX_VALUE_DEPTH  # the record is level 0


_depth = H.depth_of


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=3), kids, max_size=4),
                     max_leaves=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(0, 3000), wide=st.integers(0, 300), value=_json, chunk=st.integers(7, 5000))
def test_r_h_3_fuzz_the_file_reader_and_the_json_output_with_deep_and_wide_values(
        tmp_path_factory: Any, depth: int, wide: int, value: Any, chunk: int) -> None:
    """Any depth (past the decoder's limit too) and width in an MCP result and an unknown item,
    and bracket runs of any length in a tool's arguments, a tool's output and a cell's printed
    text (all tried as JSON by the projection and the wrapper replay): the file always reads (bad
    lines skipped with a notice), the transcript always encodes, nothing deeper than the bound is
    emitted."""
    home = tmp_path_factory.mktemp("fuzz")
    structured = "[" * depth + json.dumps(value) + "]" * depth
    wide_text = json.dumps({str(i): value for i in range(wide)})
    brackets = json.dumps("[" * depth)  # a JSON *string* that the projection and the wrapper replay try as JSON
    call = ('{"type":"response_item","payload":{"type":"function_call","call_id":"f1","name":"x","arguments":%s}}'
            % brackets)
    call_out = '{"type":"response_item","payload":{"type":"function_call_output","call_id":"f1","output":%s}}' % brackets
    cell = '{"type":"response_item","payload":{"type":"custom_tool_call","call_id":"w1","name":"exec","input":"text(1)"}}'
    cell_out = ('{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"w1","output":%s}}'
                % json.dumps("Script completed\nOutput:\n" + "[" * depth))
    unknown = '{"type":"response_item","payload":{"type":"brand_new","v":' + structured + "}}"
    p = H.write(home, 1, H.meta(1), H.user("go"), H.mcp_end("c1", structured), H.mcp_end("c2", wide_text), call,
                call_out, cell, cell_out, unknown)
    parser = LegacyParser()
    recs = list(iter_rollout(p, chunk_size=chunk, parser=parser))
    assert recs[0].type == "session_meta" and parser.stats.lines == 9
    tr = load_rollout_transcript(p, redact=lambda t: t.replace("go", "**"), mask=lambda r: r)
    assert tr.records()[0].kind == "userMessage"
    out = transcript_to_json(tr)
    json.dumps(out, indent=2)  # the show --json encoder
    assert max(_depth(r) for t in out["turns"] for r in t["records"]) <= MAX_VALUE_DEPTH
    assert bool(tr.problems) == any("could not be read" in n for n in tr.notices)
