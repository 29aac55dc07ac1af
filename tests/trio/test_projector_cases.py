"""Split from ``tests/sansio/test_projector_cases.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

import io
import json
import shutil

from codexrt_cli._main import build_parser
from codexrt_cli._show import run_show
from tests.sansio.test_projector_cases import CASES_DIR, _, _load


async def test_r_h_3_cases_read_the_same_through_codexrt_show_offline_json(tmp_path, monkeypatch) -> None:
    """The cases above use the loader ``codexrt show --offline`` uses; the command itself
    prints the same records for them."""
    monkeypatch.setenv("CODEXRT_PRIVACY_DIR", str(tmp_path / "privacy"))
    day = tmp_path / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    names = ["ctrl_c_direct_on_wrapper_command", "mixed_call_with_its_own_file_change_shows_one_card",
             "array_reversed_before_print", "poll_finishes_direct_command"]
    for name in names:
        tid = json.loads((CASES_DIR / f"{name}.rollout.jsonl").read_text().splitlines()[0])["payload"]["id"]
        shutil.copy(CASES_DIR / f"{name}.rollout.jsonl", day / f"rollout-2026-11-30T10-00-00-{tid}.jsonl")
        out, err = io.StringIO(), io.StringIO()
        args = build_parser().parse_args(["show", tid, "--offline", "--json", "--codex-home", str(tmp_path)])
        assert await run_show(args, out, err) == 0, err.getvalue()
        shown = [r for t in json.loads(out.getvalue())["turns"] for r in t["records"]]
        recs, _ = _load(name)
        assert [(r["kind"], r["id"], r["status"], r.get("output")) for r in shown] == \
               [(r["kind"], r["id"], r["status"], r.get("output")) for r in recs]
