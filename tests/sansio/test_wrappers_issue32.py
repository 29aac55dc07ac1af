"""R-H-5, issue 32: what the wrapper engine can attribute with certainty in real 0.171.0 cells
(``tests/data/rollouts/code-*``, recorded by ``tests/data/rollouts/record_code_mode.py``), and
what it still keeps. Each case feeds the engine the cell and receipts the real server wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._wrappers import KeepReason, WrapperCall, attribute_wrapper, receipts_from_rollout_line

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"


def _cells(name: str) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[Any]]:
    """The recording's cells (call, output) and every item receipt in the file."""
    lines = [json.loads(x) for x in (DATA / f"code-{name}.rollout.jsonl").read_text().splitlines() if x.strip()]
    pay = [ln["payload"] for ln in lines]
    calls = [p for p in pay if p.get("type") == "custom_tool_call"]
    outs = {p["call_id"]: p for p in pay if p.get("type") == "custom_tool_call_output" and "name" not in p}
    items = [r for ln in lines if ln["type"] == "event_msg" for r in receipts_from_rollout_line(ln)]
    return [(c, outs[c["call_id"]]) for c in calls], items


def test_r_h_5_a_running_command_printed_whole_is_identified_by_its_process_id() -> None:
    """`const r = await tools.exec_command(…); text(JSON.stringify(r))` — the only print, `r`
    used nowhere else: the printed object is the call's result, its `session_id` the process
    the server's late item names (it was a kept cell, the known difference of issue 32)."""
    (first, poll), items = _cells("stringify-running")
    w = WrapperCall.from_response_items(*first)
    alone = attribute_wrapper(w, [])
    assert alone.replace and alone.records[0].process_id == "84033" and alone.records[0].status == "unknown"
    a = attribute_wrapper(w, items)
    (rec,) = a.records
    assert (rec.status, rec.exit_code, rec.output, rec.evidence) == ("completed", 0, "late\n",
                                                                     ("slot:whole", "process_id:84033"))


def test_r_h_5_a_printed_value_that_could_have_been_changed_gives_no_identity() -> None:
    (first, _), _ = _cells("stringify-running")
    call, out = first
    for src in (call["input"].replace("text(", 'r.session_id = 1;\ntext('),  # changed before the print
                call["input"] + '\ntext("more");',  # a second print: which item is r?
                call["input"].replace("text(JSON.stringify(r))", "text(JSON.stringify(r, null, 2))")):
        a = attribute_wrapper(WrapperCall.from_response_items({**call, "input": src}, out), [])
        assert not a.replace and a.reason is KeepReason.MISSING_RESULT, src


def test_r_h_5_the_same_command_twice_with_equal_receipts_is_interchangeable() -> None:
    """`echo same` twice in one cell: two receipts that say the same in everything shown —
    any pairing gives the same records (it was kept as `ambiguous_receipt`)."""
    (cell,), items = _cells("same-twice")
    a = attribute_wrapper(WrapperCall.from_response_items(*cell), items)
    assert a.replace, (a.reason, a.detail)
    assert [(r.command, r.output, r.status) for r in a.records] == [("echo same", "same\n", "completed")] * 2
    assert all("interchangeable" in r.evidence for r in a.records)
    assert len({r.call_id for r in a.records}) == 2
    # receipts that differ in what is shown are not interchangeable: still kept
    last = next(r for r in reversed(items) if r.kind == "output")
    diff = [attrs.evolve(r, output="different\n") if r is last else r for r in items]
    k = attribute_wrapper(WrapperCall.from_response_items(*cell), diff)
    assert not k.replace and k.reason is KeepReason.AMBIGUOUS_RECEIPT


def test_r_h_5_a_poll_of_a_settled_process_needs_no_result_of_its_own() -> None:
    """`tools.write_stdin({session_id: N})` in a later cell, `text(p.output)`: nothing ties a
    result to the poll, but the command's record is the server's completed item (its whole
    output): the poll changes nothing and the cell goes (it was kept as `missing_result`)."""
    (_, second), _ = _cells("poll-second-cell")
    w = WrapperCall.from_response_items(*second)
    pid = "18191"
    assert f"session_id: {pid}," in second[0]["input"]
    a = attribute_wrapper(w, [], known_processes={pid: "exec-x"}, settled_processes={pid})
    assert a.replace and a.records == () and a.updates == ()
    k = attribute_wrapper(w, [], known_processes={pid: "exec-x"})  # a command still open: its output is needed
    assert not k.replace and k.reason is KeepReason.MISSING_RESULT


def test_r_h_5_a_poll_names_its_target_by_the_result_it_was_given_only_when_that_is_certain() -> None:
    """`session_id: r.session_id` with `const r = await tools.exec_command(…)`: the poll targets
    call 0's process (code-stdin-tty-same-cell). With `let r`, or `r.session_id` assigned, the
    target is not provable: kept (`unknown_process`)."""
    (cell,), items = _cells("stdin-tty-same-cell")
    call, out = cell
    a = attribute_wrapper(WrapperCall.from_response_items(call, out), items)
    assert a.replace and [r.tool for r in a.records] == ["exec_command"]
    for src in (call["input"].replace("const r", "let r"),
                call["input"].replace("const p", "r.session_id = 7;\nconst p")):
        k = attribute_wrapper(WrapperCall.from_response_items({**call, "input": src}, out), items)
        assert not k.replace and k.reason is KeepReason.UNKNOWN_PROCESS, src


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_r_h_5_the_new_rules_never_depend_on_receipt_order(data: Any) -> None:
    """Arrival order is never evidence: the unrolled loop, the interchangeable pair and the
    cell's own poll give the same records for any order of the recorded receipts."""
    for name in ("loop", "same-twice", "stdin-tty-same-cell", "two-printed"):
        (cell,), items = _cells(name)
        w = WrapperCall.from_response_items(*cell)
        want = attribute_wrapper(w, items)
        assert want.replace, name
        got = attribute_wrapper(w, data.draw(st.permutations(items)))
        assert [(r.command, r.output, r.status, r.exit_code, r.call_id) for r in got.records] == \
            [(r.command, r.output, r.status, r.exit_code, r.call_id) for r in want.records], name
