"""R-H-5 property: receipt arrival order never changes which output goes to which command.

Hypothesis builds a ``Promise.all`` wrapper over 2–4 ``exec_command`` calls drawn from a
small pool (so identical commands, equal / different / relative / ``file:`` / Windows
directories and process ids collide often), prints the batch either with index labels or
without any index, and generates the native receipts each call really produced, with a
ground-truth output ``out<k>`` per call, some receipts missing and some extra ones. Then it
shuffles the receipts and checks:

* the shuffled answer is the canonical answer (same decision, same record ↔ output map);
* whenever the engine replaces the wrapper, every record carries *its own* output — a wrong
  attribution (which order-based pairing would produce) can never pass.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._wrappers import Receipt, WrapperCall, attribute_wrapper

CMDS = ["ls", "make", "echo a"]
# (as written in the source, as written in the native receipt): equal directories in
# different spellings, plus relative ones that prove nothing.
DIRS = [
    (None, None),
    ("/a", "/a/"),
    ("/b", "file:///b"),
    ("C:\\w", "c:/w"),
    ("/a\\b", "/a\\b"),
    ("rel", "rel"),
]


@st.composite
def scenarios(draw: Any) -> tuple[str, str, list[Receipt], int]:
    n = draw(st.integers(2, 4))
    cmds = [draw(st.sampled_from(CMDS)) for _ in range(n)]
    dirs = [draw(st.sampled_from(DIRS)) for _ in range(n)]
    with_pid = draw(st.booleans())
    pids = draw(st.permutations(range(100, 100 + n))) if with_pid else [None] * n
    labelled = draw(st.booleans())
    present = [draw(st.booleans()) or not labelled for _ in range(n)]

    def args(k: int, which: int) -> dict[str, Any]:
        a: dict[str, Any] = {"cmd": cmds[k]}
        if dirs[k][which] is not None:
            a["workdir"] = dirs[k][which]
        return a

    parts = []
    for k in range(n):
        lit = json.dumps(args(k, 0)).replace('{"cmd"', "{cmd").replace(', "workdir"', ", workdir")
        parts.append(f"tools.exec_command({lit})")
    js = f"const r = await Promise.all([{', '.join(parts)}]);\n"
    printed = []
    for k in range(n):
        value: dict[str, Any] = {"output": f"out{k}"}
        if pids[k] is not None:
            value["session_id"] = pids[k]
        printed.append(json.dumps(value))
    if labelled:
        js += "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));"
        lines = [f"Result {k}: {printed[k]}" for k in range(n)]
    else:
        js += "for (const x of r) text(JSON.stringify(x));"
        lines = list(printed)
    output = "Script completed\nWall time 0.1 seconds\nOutput:\n" + "\n".join(lines)

    receipts: list[Receipt] = []
    for k in range(n):
        if not present[k]:
            continue
        cid = f"exec-{k}"
        receipts.append(Receipt("call", cid, tool="exec_command", arguments=args(k, 1)))
        if pids[k] is not None:
            text = f"Process running with session ID {pids[k]}\nOutput:\nout{k}"
        else:
            text = f"Process exited with code 0\nOutput:\nout{k}"
        receipts.append(Receipt("output", cid, output=text))
    # extra receipts: never a stand-in for a missing real one (receipts are scoped to the
    # wrapper by the reader), but same-named extras may appear when every call has its own
    for e in range(draw(st.integers(0, 2))):
        cmd = draw(st.sampled_from(CMDS)) if all(present) else "uname"
        receipts.append(Receipt("call", f"extra-{e}", tool="exec_command", arguments={"cmd": cmd}))
        receipts.append(Receipt("output", f"extra-{e}", output="Process exited with code 0\nOutput:\nextra"))
    return js, output, receipts, n


def _view(a: Any) -> Any:
    if a.keep:
        return ("keep", a.reason)
    return tuple((r.source_index, r.output, r.process_id, r.cwd, r.status, r.call_id) for r in a.records)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), scenario=scenarios())
def test_r_h_5_shuffled_receipts_never_change_attribution(data: Any, scenario: Any) -> None:
    js, output, receipts, n = scenario
    canonical = attribute_wrapper(WrapperCall(js, output), receipts)
    shuffled = data.draw(st.permutations(receipts))
    again = attribute_wrapper(WrapperCall(js, output), shuffled)
    assert _view(again) == _view(canonical)
    if again.replace:
        assert [r.source_index for r in again.records] == list(range(n))
        for r in again.records:
            own = f"out{r.source_index}"
            assert r.output is not None and own in r.output, (r.source_index, r.output)
            others = [f"out{j}" for j in range(n) if j != r.source_index]
            assert not any(o in r.output for o in others), (r.source_index, r.output)
            assert "extra" not in r.output
