"""``codexrt show --offline --json`` on every real 0.171.0 code-mode recording gives what the
in-process reader gives (issue 32; R-H-3, R-H-5): the CLI path is the one a user without a login
sees, so the records the comparison test checks against the server must be the ones it prints.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codexrt._features._history import MAX_VALUE_DEPTH, load_rollout_transcript, transcript_to_json
from codexrt_cli._main import build_parser
from codexrt_cli._show import run_show
from tests import _hostile_home as H

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"
NAMES = sorted(p.name[len("code-"):-len(".native.json")] for p in DATA.glob("code-*.native.json"))


def test_every_recording_is_checked() -> None:
    assert len(NAMES) >= 26


@pytest.mark.parametrize("name", NAMES)
async def test_r_h_3_show_offline_json_is_the_in_process_transcript(name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CODEXRT_PRIVACY_DIR", str(tmp_path / "privacy"))
    tid = json.loads((DATA / f"code-{name}.native.json").read_text())["threadId"]
    day = tmp_path / "home" / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    path = day / f"rollout-2026-12-02T08-00-00-{tid}.jsonl"
    shutil.copy(DATA / f"code-{name}.rollout.jsonl", path)
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["show", tid, "--offline", "--json", "--codex-home", str(tmp_path / "home")])
    assert await run_show(args, out, err) == 0, err.getvalue()
    shown = json.loads(out.getvalue())
    want = transcript_to_json(load_rollout_transcript(path, thread_id=tid, mask=lambda r: r))
    assert (shown["threadId"], shown["source"], shown["messageCount"]) == (tid, "legacy", want["messageCount"])
    assert shown["turns"] == want["turns"] and shown["turns"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(0, 3000), wide=st.integers(0, 400), yielded=st.booleans())
def test_r_h_3_fuzz_show_json_on_cells_printing_deep_and_wide_values(
        tmp_path_factory: Any, depth: int, wide: int, yielded: bool) -> None:
    """The new attribution paths read what a cell printed as JSON (a single call printed whole,
    a `wait` finishing a yielded cell): a printed value nested to any depth (past the decoder's
    limit too) or thousands of keys wide, as the real 0.171.0 lines carry it, through the whole
    `codexrt show --offline --json` path — it always exits 0 with a transcript, nothing deeper
    than the bound is emitted."""
    home = tmp_path_factory.mktemp("fuzz")
    src = (DATA / "code-stringify-yield.rollout.jsonl" if yielded else DATA / "code-stringify-running.rollout.jsonl")
    tid = json.loads((src.with_name(src.name.replace(".rollout.jsonl", ".native.json"))).read_text())["threadId"]
    printed = {"session_id": 1, "deep": "[" * depth + "]" * depth, **{f"k{i}": [i] for i in range(wide)}}
    deep_json = '{"session_id":1,"v":' + "[" * depth + "]" * depth + "}"
    out_lines = []
    for line in src.read_text().splitlines():
        o = json.loads(line)
        p = o.get("payload", {})
        if p.get("type") in ("custom_tool_call_output", "function_call_output") and isinstance(p.get("output"), list):
            head = p["output"][0]
            p["output"] = [head, {"type": "input_text", "text": deep_json if depth % 2 else json.dumps(printed)}]
            line = json.dumps(o)
        out_lines.append(line)
    day = home / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    (day / f"rollout-2026-12-02T08-00-00-{tid}.jsonl").write_text("\n".join(out_lines) + "\n")
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["show", tid, "--offline", "--json", "--codex-home", str(home)])
    assert trio.run(run_show, args, out, err) == 0, err.getvalue()
    shown = json.loads(out.getvalue())
    assert shown["turns"] and max(H.depth_of(r) for t in shown["turns"] for r in t["records"]) <= MAX_VALUE_DEPTH
