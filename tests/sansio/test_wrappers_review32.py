"""R-H-5, issue 32 review: cells that look like the new attribution rules' cases but are not
certain keep the wrapper whole. Each case is a real 0.171.0 recording
(``tests/data/rollouts/code-*``) with its cell source (and, where the changed source would print
something else, its printed output) edited to the adversarial shape — the real binary writes
the same lines for these sources; recording each is not needed to show what the reader must do
with them. The replay cases go through the path of ``codexrt show --offline --json``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codexrt._features._history import load_rollout_transcript, transcript_to_json
from codexrt._sansio._wrappers import KeepReason, WrapperCall, attribute_wrapper
from tests.sansio.test_wrappers_issue32 import DATA, _cells

# Seed sentences (历史显示与目录来源 / 边界行为补充), quoted.
S_ONLY_CERTAIN = "旧 wrapper 仅在操作完整可确认且结果可关联时被替换。"
S_INPUT_UNKNOWN = "输入的目标或结果无法确认时仍保留完整 wrapper。"
S_PID_FIRST = "原生回执带进程标识时优先按该标识匹配，避免相同命令文本误关联"
S_UNIQUE = "仍有同名进程或同名后续命令无法区分时保留 wrapper。"


def _engine(name: str, src: Any, *, idx: int = 0, receipts: bool = True, output: Any = None) -> Any:
    """Attribute cell ``idx`` of recording ``name`` with its source edited by ``src``."""
    cells, items = _cells(name)
    call, out = cells[idx]
    call = {**call, "input": src(call["input"])}
    if output is not None:
        out = {**out, "output": output(copy.deepcopy(out["output"]))}
    return attribute_wrapper(WrapperCall.from_response_items(call, out), items if receipts else [])


# --- the single whole print: the printed value must be the awaited call's own result ----------

_WHOLE = "text(JSON.stringify(r))"


@pytest.mark.parametrize("edit", [
    # `.then` / `.catch` / `||` after the call: `r` is that expression's value, not the result
    lambda s: s.replace("yield_time_ms: 300})", "yield_time_ms: 300}).then(x => ({...x, session_id: 9}))"),
    lambda s: s.replace("yield_time_ms: 300})", "yield_time_ms: 300}).catch(e => ({session_id: 9}))"),
    lambda s: s.replace("yield_time_ms: 300})", "yield_time_ms: 300}) || {session_id: 9}"),
    # `var` may be reached as globalThis.r; eval / Function reach any binding unseen
    lambda s: s.replace("const r", "var r").replace("text(", "globalThis.r = {session_id: 9};\ntext("),
    lambda s: s.replace("const r", "let r").replace("text(", 'eval("r = {session_id: 9}");\ntext('),
    lambda s: s.replace("text(", 'eval("r.session_id = 9");\ntext('),
    # what the print shows changed through a prototype, toJSON, or a rebound print function
    lambda s: s.replace("text(", "Object.prototype.toJSON = function () { return {session_id: 9}; };\ntext("),
    lambda s: s.replace("text(", 'JSON.stringify = () => "{\\"session_id\\":9}";\ntext('),
    lambda s: s.replace("text(", "const text = (x) => globalThis.text(x);\ntext("),
])
def test_r_h_5_a_whole_print_that_may_not_be_the_call_result_gives_no_identity(edit: Any) -> None:
    """The single whole print names a process only when the printed value is certainly the
    awaited call's own, unchanged result (issue 32 review). Seed: 旧 wrapper 仅在操作完整可确认且
    结果可关联时被替换。"""
    assert S_ONLY_CERTAIN
    base = _engine("stringify-running", lambda s: s, receipts=False)
    assert base.replace and base.records[0].evidence == ("slot:whole",)  # the rule's own case
    a = _engine("stringify-running", edit, receipts=False)
    assert not a.replace and a.reason is KeepReason.MISSING_RESULT, (a.reason, a.records)


def test_r_h_5_a_call_of_an_unrolled_loop_is_never_printed_whole() -> None:
    """`for (const c of [...]) { let r = await tools.exec_command({cmd: c}); }` then
    `text(JSON.stringify(r))`: the loop's `r` is not the printed one (block scope), and the
    loop runs the call three times — before the review the print was read as the first run's
    whole result (`slot:whole`). No slot; the runs pair by their own receipts (R-H-5)."""
    src = ('for (const c of ["echo a1", "echo a2", "echo a3"]) {\n  let r = await tools.exec_command({cmd: c});\n}\n'
           "text(JSON.stringify(r));")

    def printed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [items[0], {"type": "input_text", "text": '{"session_id":65145,"output":""}'}]

    a = _engine("loop", lambda s: src, output=printed)
    assert a.replace and all("slot:whole" not in r.evidence for r in a.records), [r.evidence for r in a.records]
    assert _engine("loop", lambda s: src, output=printed, receipts=False).reason is KeepReason.MISSING_RESULT


def test_r_h_5_a_batch_array_changed_by_then_is_not_the_promise_all_array() -> None:
    """`const r = await Promise.all([…]).then(x => x.reverse())`: `r` is the reversed array, so
    `Result 0:` prints the second call's result — before the review it was shown under the first
    command (R-H-5: never swap outputs). Kept (no slot is certain)."""
    def swap(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        a, b = items[1]["text"].split(": ", 1)[1], items[2]["text"].split(": ", 1)[1]
        items[1]["text"], items[2]["text"] = f"Result 0: {b}", f"Result 1: {a}"
        return items

    for tail in (".then(x => x.reverse())", ".then(x => [x[1], x[0]])"):
        a = _engine("all-labelled", lambda s, t=tail: s.replace("]);", f"]){t};"), receipts=False, output=swap)
        assert not a.replace and a.reason is KeepReason.MISSING_RESULT, (tail, [r.output for r in a.records])
    plain = _engine("all-labelled", lambda s: s, receipts=False)  # the plain batch still pairs by slot
    assert plain.replace and ['"output":"left' in (plain.records[0].output or ""),
                              '"output":"right' in (plain.records[1].output or "")] == [True, True]


# --- write_stdin({session_id: r.session_id}): `r` must still hold that call's result ----------

@pytest.mark.parametrize("edit", [
    lambda s: s.replace("const p", "Object.assign(r, {session_id: 9});\nconst p"),
    lambda s: s.replace("const p", 'r["session_id"] = 9;\nconst p'),
    lambda s: s.replace("const p", "delete r.session_id;\nconst p"),
    lambda s: s.replace("const p", "const s = r; s.session_id = 9;\nconst p"),
    lambda s: s.replace("const p", "((o) => { o.session_id = 9; })(r);\nconst p"),
    lambda s: s.replace("const p", "({a: r.session_id} = {a: 9});\nconst p"),
    lambda s: s.replace("const p", "for (r.session_id of [9]) {}\nconst p"),
    lambda s: s.replace("const p", 'eval("r.session_id = 9");\nconst p'),
    lambda s: s.replace("const p = await tools.write_stdin(", "{ const r = {session_id: 9};\nconst p = await tools.write_stdin(")
               .replace("text(p.output);", "text(p.output); }"),
    lambda s: s.replace("yield_time_ms: 300})", "yield_time_ms: 300}).then(x => ({session_id: 9}))"),
    lambda s: s.replace("session_id: r.session_id", "session_id: r.session_id + 1"),
    lambda s: s.replace("session_id: r.session_id", "session_id: r.session_id || 9"),
    lambda s: s.replace("session_id: r.session_id", "session_id: r.session_id ? 9 : 8"),
])
def test_r_h_5_a_poll_target_that_may_have_changed_is_unknown(edit: Any) -> None:
    """`session_id: r.session_id` targets call `r` only while `r` is the call's untouched result
    and the argument is that value itself; anything that could change it — another write,
    an alias, a shadowing block, an expression around it — leaves the target unknown and the
    cell kept (issue 32 review). Seed: 输入的目标或结果无法确认时仍保留完整 wrapper。"""
    assert S_INPUT_UNKNOWN
    assert _engine("stdin-tty-same-cell", lambda s: s).replace  # the rule's own case
    a = _engine("stdin-tty-same-cell", edit)
    assert not a.replace and a.reason is KeepReason.UNKNOWN_PROCESS, (a.reason, a.detail)


# --- interchangeable receipts: only while nothing tells the runs apart ------------------------

def test_r_h_5_equal_receipts_are_not_interchangeable_when_a_poll_targets_one_run() -> None:
    """`echo same` twice with equal receipts pairs in a fixed order only because any pairing
    shows the same; a `write_stdin({session_id: a.session_id})` makes the pairing decide which
    process the poll reached (and which process id call `a` shows) — a guess: kept (issue 32
    review). Seed: 输入的目标或结果无法确认时仍保留完整 wrapper。"""
    poll = 'await tools.write_stdin({session_id: a.session_id, chars: ""});\ntext(a.output);'
    assert _engine("same-twice", lambda s: s).replace
    a = _engine("same-twice", lambda s: s.replace("text(a.output);", poll))
    assert not a.replace and a.reason is KeepReason.AMBIGUOUS_RECEIPT, [(r.process_id, r.evidence) for r in a.records]


# --- the unrolled loop: the loop variable is the literal element only if nothing shadows it ------

@pytest.mark.parametrize("body", [
    '  const c = "rm -rf x";\n  const r = await tools.exec_command({cmd: c});\n  text(r.output);',
    '  { const c = "rm -rf x"; }\n  const r = await tools.exec_command({cmd: c});\n  text(r.output);',
    '  const d = c;\n  const r = await tools.exec_command({cmd: c});\n  text(r.output);',
])
def test_r_h_5_a_loop_variable_named_outside_the_call_is_not_unrolled(body: str) -> None:
    """`for (const c of [...]) { const c = "…"; tools.exec_command({cmd: c}) }` is legal JS: the
    body's own `c` shadows the element, so the command run is not the literal. A loop
    variable named anywhere in the body but the call's argument keeps the cell (issue 32
    review; R-H-5: a call's input must be certain)."""
    old = "  const r = await tools.exec_command({cmd: c});\n  text(r.output);"
    assert _engine("loop", lambda s: s).replace
    a = _engine("loop", lambda s: s.replace(old, body))
    assert not a.replace and a.reason is KeepReason.DYNAMIC_MULTIPLICITY, (a.reason, a.records)


# --- the replay: a receipt has one owner; a reused process id is not the same process -----------

def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (DATA / f"code-{name}.rollout.jsonl").read_text().splitlines() if x.strip()]


def _show(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    f = tmp_path / "case.rollout.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tr = load_rollout_transcript(f)
    js = transcript_to_json(tr)
    return [r for t in js["turns"] for r in t["records"] if r["kind"] not in ("userMessage", "assistantMessage")], tr


def _same_command_cells(drop_ordinal: int) -> list[dict[str, Any]]:
    """code-two-cells-running with both cells running one command text; the first prints its
    whole result (its process id 15399 is certain); the late item written at
    ``drop_ordinal`` is removed (that command never finished: an interrupt, a crash)."""
    out = []
    for ln in _lines("two-cells-running"):
        if ln["ordinal"] == drop_ordinal:
            continue
        ln = json.loads(json.dumps(ln).replace("echo one-late", "echo same").replace("echo two-late", "echo same"))
        p = ln["payload"]
        if p.get("call_id") == "call_mock_0_0" and p.get("type") == "custom_tool_call":
            p["input"] = p["input"].replace("text(r.output)", _WHOLE)
        if p.get("call_id") == "call_mock_0_0" and p.get("type") == "custom_tool_call_output":
            p["output"][1]["text"] = json.dumps({"chunk_id": "aa", "wall_time_seconds": 0.3, "session_id": 15399,
                                                 "original_token_count": 0, "output": ""}, separators=(",", ":"))
        out.append(ln)
    return out


def test_r_h_5_a_late_item_another_cell_owns_never_joins_a_second_cell(tmp_path: Path) -> None:
    """Two cells of a turn run `sleep 2; echo same`; the first is identified by its process id
    and owns the late item of process 15399; the second's command never finished. Before the
    review the second cell was replaced by that same item (its wrapper vanished, one command
    shown for two). The second cell is kept. Seed: 仍有同名进程或同名后续命令无法区分时保留 wrapper。"""
    assert S_UNIQUE
    recs, tr = _show(tmp_path, _same_command_cells(23))
    assert tr.wrappers["call_mock_0_0"].replace
    assert not tr.wrappers["call_mock_1_0"].replace
    cmds = [r for r in recs if r["kind"] == "commandExecution"]
    assert [(c["processId"], c["output"]) for c in cmds] == [("15399", "one-late\n")]
    assert sum(r["kind"] == "dynamicToolCall" for r in recs) == 1
    # with both late items each cell has its own (the second by elimination of 15399)
    recs, tr = _show(tmp_path, _same_command_cells(-1))
    assert all(w.replace for w in tr.wrappers.values())
    assert sorted(c["processId"] for c in recs if c["kind"] == "commandExecution") == ["15399", "49135"]


def test_r_h_5_a_process_id_reused_after_a_restart_is_not_the_cell_s_process(tmp_path: Path) -> None:
    """code-restart with the cut cell given an output naming process 54953 and the command the
    next turn runs (after the restart) with the same id: the later turn's item names its own
    turn, so it is not the first cell's late completion. Before the review the first cell took
    it (its command disappeared, merged into the later one). Seed: 原生回执带进程标识时优先按该
    标识匹配，避免相同命令文本误关联."""
    assert S_PID_FIRST
    lines = _lines("restart")
    second_out = next(x for x in lines if x["payload"].get("type") == "custom_tool_call_output"
                      and x["payload"]["call_id"] == "call_mock_1_0")
    out = []
    for ln in lines:
        ln = copy.deepcopy(ln)
        p = ln["payload"]
        out.append(ln)
        if p.get("type") == "custom_tool_call" and p["call_id"] == "call_mock_0_0":
            p["input"] = p["input"].replace("sleep 40; echo old", "sleep 2; echo new").replace("60000", "300")
            o = copy.deepcopy(second_out)  # the cell yielded: `{"session_id":54953,"output":""}`
            o["payload"]["call_id"] = "call_mock_0_0"
            o["payload"]["internal_chat_message_metadata_passthrough"]["turn_id"] = \
                p["internal_chat_message_metadata_passthrough"]["turn_id"]
            out.append(o)
    recs, tr = _show(tmp_path, out)
    cmds = [r for r in recs if r["kind"] == "commandExecution"]
    assert len(cmds) == 2, cmds
    first, second = cmds
    assert first["turnId"] != second["turnId"]
    assert (first["status"], first["exitCode"]) == ("unknown", None)
    assert (second["status"], second["output"], second["processId"]) == ("completed", "new\n", "54953")


def test_r_h_5_an_earlier_cell_s_late_item_inside_a_later_cell_s_window_is_not_taken(tmp_path: Path) -> None:
    """Cell A leaves `sleep 2; echo same` running (prints only `r.output`); cell B of the same
    turn runs the same command and is still in flight when A's command ends, so the server
    writes A's item inside B's window. Nothing in the file says whose it is (no printed
    process id): before the review B was replaced by A's item (A's `one-late` shown as B's).
    B is kept; A too. Seed: 仍有同名进程或同名后续命令无法区分时保留 wrapper。"""
    assert S_UNIQUE
    lines = [json.loads(json.dumps(x).replace("echo one-late", "echo same").replace("echo two-late", "echo same"))
             for x in _lines("two-cells-running")]
    a_item = next(x for x in lines if x["ordinal"] == 22)
    for drop in (None, 23):  # B's own item written later, or never (B's command cut)
        out = []
        for ln in lines:
            if ln is a_item or ln["ordinal"] == drop:
                continue
            if ln["payload"].get("type") == "custom_tool_call_output" and ln["payload"]["call_id"] == "call_mock_1_0":
                out.append(a_item)
            out.append(ln)
        recs, tr = _show(tmp_path, out)
        assert not tr.wrappers["call_mock_1_0"].replace, drop
        assert tr.wrappers["call_mock_1_0"].reason is KeepReason.AMBIGUOUS_RECEIPT
        assert not tr.wrappers["call_mock_0_0"].replace
        cmds = [r for r in recs if r["kind"] == "commandExecution"]
        assert sorted(c["processId"] for c in cmds) == (["15399"] if drop else ["15399", "49135"])


def _owners(tmp_path: Path, lines: list[dict[str, Any]]) -> dict[str, str]:
    _, tr = _show(tmp_path, lines)
    out: dict[str, str] = {}
    for key, a in tr.wrappers.items():
        for r in a.records if a.replace else ():
            assert r.call_id is None or r.call_id not in out, f"{r.call_id} owned by {out.get(r.call_id)} and {key}"
            if r.call_id:
                out[r.call_id] = key
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_r_h_5_where_the_server_wrote_an_item_never_gives_it_to_another_cell(tmp_path: Path, data: Any) -> None:
    """Where an item lands (inside another cell's window, after the turn, …) is arrival order,
    never evidence: moving a recorded command item anywhere after its own cell's call either
    leaves it with the cell the server says ran it or keeps the cells whole — never another
    cell's record, never two owners (R-H-5: 不能靠完成顺序交换命令的输出). Before the review, an
    `echo same` item moved into the next cell's window was taken by that cell."""
    name = data.draw(st.sampled_from(["same-two-cells", "two-cells-running", "two-cells", "two-cells-two-each"]))
    lines = _lines(name)
    truth = _owners(tmp_path, lines)
    calls = {ln["payload"]["call_id"]: i for i, ln in enumerate(lines) if ln["payload"].get("type") == "custom_tool_call"}
    items = [ln for ln in lines if ln["payload"].get("type") == "item_completed"
             and ln["payload"]["item"].get("type") == "CommandExecution" and ln["payload"]["item"]["id"] in truth]
    moved = list(lines)
    for it in data.draw(st.lists(st.sampled_from(items), min_size=1, max_size=len(items), unique_by=id)):
        moved.remove(it)
        lo = calls[truth[it["payload"]["item"]["id"]]] + 1
        moved.insert(data.draw(st.integers(lo, len(moved))), it)
    got = _owners(tmp_path, moved)
    assert all(truth[cid] == key for cid, key in got.items()), (name, got, truth)


def test_r_h_5_a_command_started_after_the_earlier_cell_ended_is_not_doubted(tmp_path: Path) -> None:
    """The doubt above is only for what an earlier cell could have started: an item whose
    ``started_at_ms`` is after the earlier cell's script ended (its output's ``create_time``;
    a finished script starts nothing) is not its. Earlier cell A loops over a variable (kept:
    it could run anything); B's own `sleep 2; echo same` item, started after A ended, still
    replaces B (R-H-5: a wrapper is replaced when every call's result is certain)."""
    lines = [json.loads(json.dumps(x).replace("echo one-late", "echo same").replace("echo two-late", "echo same"))
             for x in _lines("two-cells-running")]
    b_item = next(x for x in lines if x["ordinal"] == 23)
    out = []
    for ln in lines:
        p = ln["payload"]
        if ln is b_item:
            continue
        if p.get("type") == "custom_tool_call" and p["call_id"] == "call_mock_0_0":
            p["input"] = ('const cmds = ["sleep 2; echo same"];\n'
                          "for (const c of cmds) { await tools.exec_command({cmd: c, yield_time_ms: 300}); }")
        if p.get("type") == "custom_tool_call_output" and p["call_id"] == "call_mock_1_0":
            out.append(b_item)  # B's command ended inside B's window
        out.append(ln)
    recs, tr = _show(tmp_path, out)
    assert tr.wrappers["call_mock_0_0"].reason is KeepReason.DYNAMIC_MULTIPLICITY
    assert tr.wrappers["call_mock_1_0"].replace
    b_start = b_item["payload"]["started_at_ms"]
    for i, ln in enumerate(out):  # the same file with B's item started before A ended: doubted
        if ln is b_item:
            out[i] = json.loads(json.dumps(ln).replace(f'"started_at_ms": {b_start}', '"started_at_ms": 1796215996000'))
    _, tr = _show(tmp_path, out)
    assert tr.wrappers["call_mock_1_0"].reason is KeepReason.AMBIGUOUS_RECEIPT
