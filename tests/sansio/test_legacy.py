"""Legacy rollout parsing, file discovery and the user-text sanitizer (R-H-3, R-CTX-5).

Charter: the parser is fed bytes the way a file is read — in arbitrary chunks — and must give
the same records whatever the chunking; bad lines are counted and skipped, never fatal; unknown
types are kept. Golden files are real rollouts written by the pinned codex (see
``tests/data/rollouts/generate.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._io._history_files import find_rollout, find_rollouts, iter_rollout
from codexrt._sansio._legacy import MAX_REPORTED_PROBLEMS, LegacyParser
from codexrt._sansio._sanitize import FileMention, sanitize_user_text

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"
PAGINATED = DATA / "paginated.rollout.jsonl"
LEGACY = DATA / "legacy.rollout.jsonl"


def _parse_all(data: bytes, sizes: list[int] | None = None) -> tuple[list, LegacyParser]:
    p = LegacyParser()
    out = []
    if sizes is None:
        out += p.feed(data)
    else:
        i = 0
        for n in sizes:
            out += p.feed(data[i : i + n])
            i += n
        out += p.feed(data[i:])
    out += p.close()
    return out, p


# -- golden rollouts ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", [PAGINATED, LEGACY], ids=["paginated", "legacy"])
def test_r_h_3_golden_rollout_parses_every_line(path: Path) -> None:
    data = path.read_bytes()
    recs, p = _parse_all(data)
    assert p.stats.records == len(data.splitlines()) == len(recs)
    assert p.stats.invalid == 0 and not p.stats.truncated_tail and p.problems == []
    assert p.stats.unknown == 0, [r.type + "/" + str(r.subtype) for r in recs if not r.known]
    assert recs[0].type == "session_meta"
    assert p.session_meta is not None and p.session_meta["id"] in path.with_suffix("").with_suffix(".native.json").read_text()
    assert [r.line_no for r in recs] == list(range(1, len(recs) + 1))


def test_r_h_3_ordinal_only_in_paginated_files() -> None:
    pag, _ = _parse_all(PAGINATED.read_bytes())
    leg, _ = _parse_all(LEGACY.read_bytes())
    assert [r.ordinal for r in pag] == list(range(len(pag)))
    assert all(r.ordinal is None for r in leg)
    subtypes = {(r.type, r.subtype) for r in leg}
    assert ("event_msg", "user_message") in subtypes and ("event_msg", "agent_message") in subtypes
    assert ("event_msg", "item_completed") in {(r.type, r.subtype) for r in pag}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4000), max_size=40))
def test_r_h_3_chunking_never_changes_records(sizes: list[int]) -> None:
    data = LEGACY.read_bytes()
    whole, _ = _parse_all(data)
    chunked, _ = _parse_all(data, sizes)
    assert chunked == whole


def test_r_h_3_iter_rollout_streams_in_small_chunks_with_bounded_buffer() -> None:
    p = LegacyParser()
    seen_max = 0
    recs = []
    for rec in iter_rollout(LEGACY, chunk_size=512, parser=p):
        recs.append(rec)
        seen_max = max(seen_max, p._lines.buffered)  # noqa: SLF001 - memory bound check
    longest = max(len(line) for line in LEGACY.read_bytes().splitlines())
    assert seen_max <= longest and len(recs) == p.stats.records
    with pytest.raises(ValueError):
        next(iter_rollout(LEGACY, chunk_size=0))


# -- tolerance ---------------------------------------------------------------------------------


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_r_h_3_invalid_lines_counted_reported_skipped() -> None:
    data = (
        _line({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}})
        + b"{not json\n"
        + b"[1,2]\n"
        + _line({"payload": {}})  # no type
        + b"\n   \n"  # blank lines are not transcript lines
        + _line({"timestamp": "t", "type": "event_msg", "payload": {"type": "agent_message", "message": "hi"}})
    )
    recs, p = _parse_all(data)
    assert [r.subtype for r in recs] == [None, "agent_message"]
    assert p.stats.invalid == 3 and [x.kind for x in p.problems] == ["invalid"] * 3
    assert [x.line_no for x in p.problems] == [2, 3, 4]
    assert recs[1].line_no == 5


def test_r_h_3_truncated_last_line_is_reported_not_fatal() -> None:
    good = _line({"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}})
    recs, p = _parse_all(good + b'{"type":"event_msg","payload":{"type":"agent_me')
    assert len(recs) == 1 and p.stats.truncated_tail and p.stats.invalid == 0
    assert p.problems[0].kind == "truncated"
    # A complete last line without its newline is simply a record.
    recs2, p2 = _parse_all(good + good.rstrip(b"\n"))
    assert len(recs2) == 2 and not p2.stats.truncated_tail


def test_r_h_3_unknown_types_kept_as_generic() -> None:
    data = _line({"type": "brand_new_kind", "payload": {"a": 1}}) + _line(
        {"type": "response_item", "payload": {"type": "hologram", "x": 2}}
    ) + _line({"type": "event_msg", "payload": {"type": "future_event"}})
    recs, p = _parse_all(data)
    assert [(r.type, r.subtype, r.known) for r in recs] == [
        ("brand_new_kind", None, False),
        ("response_item", "hologram", False),
        ("event_msg", "future_event", False),
    ]
    assert p.stats.unknown == 3 and recs[0].payload == {"a": 1}


def test_r_h_3_oversized_line_discarded_and_reported() -> None:
    p = LegacyParser(max_line=100)
    big = _line({"type": "event_msg", "payload": {"type": "agent_message", "message": "x" * 500}})
    small = _line({"type": "event_msg", "payload": {"type": "task_started"}})
    out = p.feed(big[:50]) + p.feed(big[50:]) + p.feed(small) + p.close()
    assert len(out) == 1 and p.stats.oversized == 1 and p.problems[0].kind == "oversized"
    assert p._lines.buffered == 0  # noqa: SLF001


def test_r_h_3_problem_list_is_bounded_but_count_exact() -> None:
    recs, p = _parse_all(b"oops\n" * (MAX_REPORTED_PROBLEMS + 50))
    assert recs == [] and p.stats.invalid == MAX_REPORTED_PROBLEMS + 50
    assert len(p.problems) == MAX_REPORTED_PROBLEMS


def test_feed_after_close_is_a_usage_error() -> None:
    p = LegacyParser()
    p.close()
    assert p.close() == []
    with pytest.raises(ValueError):
        p.feed(b"{}")


# -- discovery ---------------------------------------------------------------------------------

TID_A = "01a22d24-751f-7da1-b88c-118f14c6a3d7"
TID_B = "01a22d24-784b-70a1-b4d2-eee60df61981"


def test_r_h_3_find_rollouts_thread_id_mtime_size(tmp_path: Path) -> None:
    assert find_rollouts(tmp_path) == []  # no sessions dir: no legacy history, no error
    d = tmp_path / "sessions" / "2026" / "11" / "30"
    d.mkdir(parents=True)
    a = d / f"rollout-2026-11-30T15-48-13-{TID_A}.jsonl"
    b = d / f"rollout-2026-11-30T15-48-14-{TID_B.upper()}.jsonl"
    a.write_bytes(PAGINATED.read_bytes())
    b.write_text("x")
    (d / "notes.jsonl").write_text("ignored")
    (d / "rollout-broken.jsonl").write_text("ignored")
    os.utime(a, (1_000_000, 1_000_000))
    os.utime(b, (2_000_000, 2_000_000))
    arch = tmp_path / "archived_sessions"
    arch.mkdir()
    (arch / f"rollout-2026-01-01T00-00-00-{TID_A}.jsonl").write_text("old")
    found = find_rollouts(tmp_path)
    assert [(r.thread_id, r.size, r.archived) for r in found] == [(TID_B, 1, False), (TID_A, a.stat().st_size, False)]
    assert found[1].mtime == 1_000_000 and found[1].started == "2026-11-30T15-48-13"
    assert len(find_rollouts(tmp_path, include_archived=True)) == 3
    assert find_rollout(tmp_path, TID_B.upper()).path == b  # type: ignore[union-attr]
    assert find_rollout(tmp_path, "00000000-0000-0000-0000-000000000000") is None


# -- sanitizer (R-CTX-5) -----------------------------------------------------------------------


def test_r_ctx_5_ide_convention_stripped_to_users_text() -> None:
    s = sanitize_user_text(
        "# Context from my IDE setup:\n\n## Active file: src/app.py\n\n## Open tabs:\n- a.py: a.py\n\n"
        "## My request for Codex:\nfix the bug\nplease\n"
    )
    assert s.text == "fix the bug\nplease" and s.stripped == ("ide_context",)


def test_r_ctx_5_desktop_attachment_wrapper_keeps_file_mentions() -> None:
    s = sanitize_user_text(
        "# Files mentioned by the user:\n\n## shot.png: C:/Temp/codex-clipboard-1.png\n"
        "## spec.txt: /home/u/spec.txt\n\n## My request for Codex:\n查看图片"
    )
    assert s.text == "查看图片"
    assert s.file_mentions == (FileMention("shot.png", "C:/Temp/codex-clipboard-1.png"),
                               FileMention("spec.txt", "/home/u/spec.txt"))
    assert s.stripped == ("files_mentioned",)


def test_r_ctx_5_apps_open_page_tag_removed_text_kept() -> None:
    s = sanitize_user_text('<external_codex_apps_open_page>{"page_id":null}</external_codex_apps_open_page>\nreal words')
    assert s.text == "real words" and s.stripped == ("apps_open_page",)
    only = sanitize_user_text('<external_codex_apps_open_page>{"page_id":"p"}</external_codex_apps_open_page>')
    assert only.text == ""


def test_r_ctx_5_older_appended_context_form() -> None:
    s = sanitize_user_text("rename foo to bar\n\n# Context from my IDE setup:\n## Active file: x.py\n")
    assert s.text == "rename foo to bar" and s.stripped == ("appended_ide_context",)


@pytest.mark.parametrize(
    "text",
    [
        "plain question",
        "# Context from my IDE setup: is a heading I like",  # header but no request marker
        "I wrote ## My request for Codex: inline",
        "talking about external_codex_apps_open_page by name",
        "# Context from my IDE setup:\n## Active file: a\n",  # context only: nothing to keep → left alone
    ],
)
def test_r_ctx_5_text_without_a_known_wrapper_is_unchanged(text: str) -> None:
    s = sanitize_user_text(text)
    assert s.text == text and s.stripped == ()


def test_r_ctx_5_users_text_after_marker_kept_verbatim_including_marker_lookalikes() -> None:
    s = sanitize_user_text("# Context from my IDE setup:\n## Active file: a\n## My request for Codex:\n"
                           "explain '## My request for Codex:' please")
    assert s.text == "explain '## My request for Codex:' please"
