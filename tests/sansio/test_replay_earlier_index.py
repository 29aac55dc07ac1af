"""The index of earlier cells (issue 32 review, the ``wrappers`` bench row: a turn of N cells in
O(N)) is only a shortcut: with it, every rollout shows exactly what the cell-by-cell walk alone
shows (R-H-5) — on every recorded and case file, and on real multi-cell recordings with their
command items moved to any later place and their commands made the same text (where an earlier
cell's doubt decides)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codexrt._features._history import load_rollout_transcript, transcript_to_json
from codexrt._sansio._projection import _replay

DATA = Path(__file__).resolve().parents[1] / "data"
FILES = sorted([*DATA.glob("rollouts/*.rollout.jsonl"), *DATA.glob("projector_cases/*.rollout.jsonl"),
                *DATA.glob("wrappers/*.jsonl")])
MULTI_CELL = ["same-two-cells", "two-cells-running", "two-cells", "two-cells-two-each", "poll-second-cell",
              "stringify-running"]


def _both(path: Path) -> tuple[Any, Any]:
    """What ``path`` shows with the index, and with every earlier cell walked."""
    fast = transcript_to_json(load_rollout_transcript(path, mask=lambda r: r))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_replay._EarlierCells, "may_own", lambda *a, **k: True)
        walked = transcript_to_json(load_rollout_transcript(path, mask=lambda r: r))
    return fast, walked


def test_there_are_files_with_cells() -> None:
    assert len(FILES) > 80 and all((DATA / "rollouts" / f"code-{n}.rollout.jsonl").is_file() for n in MULTI_CELL)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_r_h_5_the_index_never_changes_what_a_file_shows(path: Path) -> None:
    fast, walked = _both(path)
    assert fast == walked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_r_h_5_the_index_agrees_with_the_walk_wherever_items_land(tmp_path: Path, data: Any) -> None:
    name = data.draw(st.sampled_from(MULTI_CELL))
    text = (DATA / "rollouts" / f"code-{name}.rollout.jsonl").read_text()
    if data.draw(st.booleans()):  # every command the same text: only identities and times tell them apart
        text = text.replace("echo one-late", "echo same").replace("echo two-late", "echo same")
    lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    first_call = next(i for i, ln in enumerate(lines) if ln["payload"].get("type") == "custom_tool_call")
    items = [ln for ln in lines if ln["payload"].get("type") == "item_completed"
             and ln["payload"]["item"].get("type") == "CommandExecution"]
    moved = list(lines)
    for it in data.draw(st.lists(st.sampled_from(items), max_size=len(items), unique_by=id)) if items else []:
        moved.remove(it)
        moved.insert(data.draw(st.integers(first_call + 1, len(moved))), it)
    f = tmp_path / "case.rollout.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in moved))
    fast, walked = _both(f)
    assert fast == walked
