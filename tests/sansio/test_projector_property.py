"""R-H-5 property through the projector: no record is ever attributed by position alone.

Hypothesis builds a legacy rollout with a ``Promise.all`` wrapper over 2–4 ``exec_command``
calls (from a small pool, so identical commands collide), printed in a way that cannot tie a
printed value to its call — without an index, after the array was reordered / re-bound /
aliased, or only through a derived array — with no native receipts (legacy mode) or with
receipts that cannot be told apart (same command, no process id), plus later *direct* calls of
the same commands. Read through the ``codexrt show --offline`` loader, the wrapper must stay
whole with its printed output, and the direct calls keep their own outputs.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codexrt._features._history import load_rollout_transcript, transcript_to_json

_spec = importlib.util.spec_from_file_location(
    "projector_cases_rollout", Path(__file__).resolve().parents[1] / "data" / "projector_cases" / "rollout.py")
assert _spec is not None and _spec.loader is not None
_rollout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rollout)

CMDS = ["ls", "make", "echo a"]
LABELS = "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));"
PRINTS = {
    "unindexed": "for (const x of r) text(JSON.stringify(x));",
    "reversed": "r.reverse();\n" + LABELS,
    "sorted": "r.sort();\n" + LABELS,
    "pushed": "r.push(r.shift());\n" + LABELS,
    "rebound": "r = r.slice().reverse();\n" + LABELS,
    "swapped": "[r[0], r[1]] = [r[1], r[0]];\n" + LABELS,
    "aliased": "const s = r; s.reverse();\n" + LABELS,
    "derived": "text(r.map(x => x.output).join(\"\\n\"));",
    "callback_array": "r.forEach((x, i, a) => { a.reverse(); text(`Result ${i}: ${JSON.stringify(x)}`); });",
}


@st.composite
def untieable(draw: Any) -> tuple[Any, int, list[str]]:
    n = draw(st.integers(2, 4))
    form = draw(st.sampled_from(sorted(PRINTS)))
    receipts = draw(st.sampled_from(["none", "colliding"]))
    cmds = [draw(st.sampled_from(CMDS)) for _ in range(n)]
    if receipts == "colliding":
        cmds = [cmds[0]] * n  # same command, no process id: receipts cannot tell the calls apart
    direct = draw(st.lists(st.sampled_from(CMDS), max_size=2))
    calls = ", ".join(f"tools.exec_command({{cmd: {json.dumps(c)}}})" for c in cmds)
    src = f"let r = await Promise.all([{calls}]);\n" + PRINTS[form]
    order = draw(st.permutations(range(n)))  # the printed order is not the source order
    values = [json.dumps({"output": f"out{k}\n"}, separators=(",", ":")) for k in order]
    if "Result" in PRINTS[form]:
        printed = [f"Result {i}: {v}" for i, v in enumerate(values)]
    elif form == "derived":
        printed = ["\n".join(f"out{k}" for k in order)]
    else:
        printed = values
    r = _rollout.Rollout("0190bbbb-0000-7000-8000-000000000001").start("t1").user("batch")
    r.wrapper("w1", src)
    if receipts == "colliding":
        for k in draw(st.permutations(range(n))):
            r.item_cmd(f"exec-{k}", cmds[k], output=f"native{k}\n", code=0)
    r.wrapper_out("w1", printed)
    for j, c in enumerate(direct):
        r.call(f"d{j}", "exec_command", {"cmd": c}).out(f"d{j}", _rollout.unified(f"direct{j}\n", code=0))
    return r.end(), n, printed


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=untieable())
def test_r_h_5_untieable_batch_keeps_the_wrapper_whole(tmp_path: Path, case: Any) -> None:
    rollout, n, printed = case
    path = tmp_path / "case.rollout.jsonl"
    path.write_text(rollout.text())
    tr = load_rollout_transcript(path)
    recs = [x for t in transcript_to_json(tr)["turns"] for x in t["records"]]
    assert not tr.wrappers["w1"].replace
    (wrapper,) = [x for x in recs if x["id"] == "w1"]
    shown = "".join(b.get("text") or "" for b in wrapper["content"])
    assert all(p in shown for p in printed)  # the printed output stays with the wrapper
    assert not any(x["id"].startswith("w1#") for x in recs)  # no record made by position
    for x in recs:
        if x["kind"] == "commandExecution" and x["id"].startswith("d"):
            assert x["output"] == f"direct{x['id'][1:]}\n" and x["status"] == "completed"
        elif x["kind"] == "commandExecution":
            # a nested receipt kept as its own card carries its own output, never a printed one
            assert x["id"].startswith("exec-") and x["output"] == f"native{x['id'][5:]}\n"
