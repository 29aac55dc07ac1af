"""R-H-5, issue 32 review: cells that look like the new attribution rules' cases but are not
certain keep the wrapper whole. Each case is a real 0.171.0 recording
(``tests/data/rollouts/code-*``) with its cell source (and, where the changed source would print
something else, its printed output) edited to the adversarial shape — the real binary writes
the same lines for these sources; recording each is not needed to show what the reader must do
with them. The replay cases go through the path of ``codexrt show --offline --json``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from codexrt._sansio._wrappers import KeepReason, WrapperCall, attribute_wrapper
from tests.sansio.test_wrappers_issue32 import _cells

# Seed sentences (历史显示与目录来源 / 边界行为补充), quoted.
S_ONLY_CERTAIN = "旧 wrapper 仅在操作完整可确认且结果可关联时被替换。"
S_INPUT_UNKNOWN = "输入的目标或结果无法确认时仍保留完整 wrapper。"


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
