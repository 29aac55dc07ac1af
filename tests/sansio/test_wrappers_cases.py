"""R-H-5 case table: legacy code-mode ``exec`` wrappers → individual records, or keep.

Every case cites the sentence of the original design text (sections "历史显示与目录来源",
"编辑、命令、图片和 compact 的显示" and "边界行为补充") that it covers, with an English
gloss, in its ``source`` field. A case gives the wrapper's JavaScript, its printed output and
the native receipts that follow it, and expects either the list of records (partial fields)
or "keep" with the reason code. The engine is sans-IO: no event loop, nothing executed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from codexrt._sansio._wrappers import (
    Attribution,
    KeepReason,
    Receipt,
    ReceiptPairer,
    WrapperCall,
    attribute_wrapper,
    normalize_dir,
    receipts_from_rollout_line,
)

# --- the sentences of the original (quoted verbatim) ------------------------------------
S_INDEX = "`Promise.all` / `Promise.allSettled` 的历史结果按原数组索引关联。"
S_LABELS = (
    "除 `{i, ...result}` 等索引信封外，也识别 `forEach` 和按批次数组长度遍历的 `for` 循环打印的独立索引标签"
    "（模板字符串或 `\"Result \" + i`），并核对随后打印的结果来自同一数组位置。"
)
S_NONJSON = "标签后的数组、基本值及普通文本也保留在对应槽位，不再要求结果必须是 JSON 对象；与标签同名的返回文字仍作为数据处理。"
S_MIXED = "混合的 `write_stdin` 与 `exec_command` 因此可分别回放；轮询只更新原进程的命令卡片，不生成额外命令。"
S_UNSURE = "无法确认结果归属时保留原 wrapper 与输出。"
S_RESOLVE = (
    "批次中的非工具 `Promise.resolve(...)` 条目保留原表达式及该索引的实际结果，作为内部编排数据，"
    "不显示独立工具卡片，也不计入或打断命令分组"
)
S_NOEXEC = "回放不执行表达式，不根据本地值中的 `exit_code` 等字段推断命令状态；"
S_STATUS_DATA = "`Promise.all` 返回对象内的 `status` 仍属于数据，不作为 `allSettled` 状态封套解包。"
S_SPREAD = "本地值直接展开到索引信封、缺少独立 `result` 时，保留整个 wrapper 与输出，避免把正文的 `status` / `error` 当成状态。"
S_SETTLED = (
    "`allSettled` 将 `r.value` 或条件分支结果放入 `result` 时，本地值也原样保留；"
    "只有源码明确按索引打印整个 settled receipt 时，才解包本地嵌套封套。"
)
S_REJECT = "内部 rejection 标记独立于结果正文，返回字段不能冒充失败状态；空数组、null 和明确 rejection 分别保留在原始消息数据中。"
S_NO_RESULT = "缺少可关联的独立结果时，保留整个 wrapper 与输出。"
S_BASH = "静态 shell_command/exec_command 可显示 Bash 卡片，未知或结果无法归属的 wrapper 保留通用卡片和输出。"
S_PATCH = "混合/部分动态 wrapper 中可确认的 literal 补丁也可预览；缺少单独结果时为灰色 unknown，完整 wrapper 与输出保留。历史只用于显示，不执行补丁"
S_DIRECT = "直接索引工具结果 `{i,result:actualResult}` 与原有 Promise 回执共用实际槽位关联，不将最终输出重新显示为 exec。"
S_POLL_ONLY = "纯轮询不创建卡片或分隔线。"
S_CWD = "历史 wrapper 中相同命令在不同显式绝对工作目录执行时，可按唯一匹配的命令及目录关联原生回执；"
S_FILE_URI = "原生 `file:` URI 与对应本地路径按目录比较，已确认结果归属的进程身份仍优先。"
S_SESSION = "无索引并行输出中的 `session_id` 不按到达顺序分配给源码调用；这类批次仅用独立原生回执确认各命令结果。"
S_WINDOWS = "Windows 路径统一分隔符，POSIX 绝对路径中的反斜杠保留为文件名字符。"
S_CONSERVATIVE = "相同目录、相对目录或缺少唯一目录证据时继续保留原有保守回退，不能靠完成顺序交换命令的输出。"
S_ENVELOPE = "Promise 数组接受 `i` 或 `index` 结果封套并按实际槽位配对，两者冲突时保留通用卡片。"
S_LATE = "运行中命令的延迟原生完成记录和空输入轮询均更新原命令，不生成第二张卡片。"
S_CTRL_C = (
    "`write_stdin` 的字面量输入（包括 Ctrl+C）关联已知进程，或通过原生 `process_id` 恢复对应命令；"
    "中断回执只结束原命令，后续命令保留各自结果。"
)
S_PID = (
    "原生回执带进程标识时优先按该标识匹配，避免相同命令文本误关联；同批次的同名命令以结果中的 `session_id` 和回执的 "
    "`process_id` 配对，即使完成顺序相反也不交换目录、输出或状态，缺少唯一关联时保留 wrapper"
)
S_LEGACY_IDS = (
    "旧回执缺少标识时，仅接受命令文本与线程/回合归属唯一的目标，或由显式绝对工作目录唯一确认的目标；"
    "仍有同名进程或同名后续命令无法区分时保留 wrapper。"
)
S_INPUT_TARGET = "输入的目标或结果无法确认时仍保留完整 wrapper。"
S_EXTRA = "历史来源选择按已恢复的具体调用身份判断，额外 exec 数量不能覆盖完整投影。"
S_MULTI_PATCH = "缺少独立结果的混合类型、多补丁、动态输入或不确定对象保留完整通用卡片和输出，其中静态补丁可另行灰色预览，不把共同结果归给各补丁。"
S_EDGE = "CRLF、顶层 Script failed 错误封套、结构化失败及未配对输入缓存预算均纳入处理。"
S_COMPLETE = "旧 wrapper 仅在操作完整可确认且结果可关联时被替换。"


# --- builders ------------------------------------------------------------------------------


def script(*lines: str, head: str = "Script completed") -> str:
    """A wrapper output as one string: the real header, then the printed lines."""
    return f"{head}\nWall time 0.1 seconds\nOutput:\n" + "\n".join(lines)


def call(cid: str, tool: str = "exec_command", **args: Any) -> Receipt:
    return Receipt("call", cid, tool=tool, arguments=args)


def done(cid: str, body: str, code: int = 0, **kw: Any) -> Receipt:
    """A native unified-exec output that exited with ``code``."""
    text = f"Chunk ID: c{cid}\nWall time: 0.0100 seconds\nProcess exited with code {code}\nOriginal token count: 1\nOutput:\n{body}"
    return Receipt("output", cid, output=text, **kw)


def running(cid: str, pid: int, body: str = "") -> Receipt:
    text = f"Chunk ID: c{cid}\nWall time: 0.1000 seconds\nProcess running with session ID {pid}\nOriginal token count: 1\nOutput:\n{body}"
    return Receipt("output", cid, output=text)


BATCH2 = (
    'const r = await Promise.all([tools.exec_command({cmd: "echo a"}), tools.exec_command({cmd: "echo b"})]);\n'
)
FOREACH = "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));"


@dataclasses.dataclass
class Case:
    id: str
    source: str  # the cited sentence and an English gloss
    js: str
    output: str | Sequence[str] | None
    receipts: Sequence[Receipt] = ()
    records: Sequence[Mapping[str, Any]] | None = None  # expected (partial) records, or None
    keep: KeepReason | None = None
    known: Mapping[Any, str] | None = None
    max_unpaired: int = 256
    check: Callable[[Attribution], None] | None = None


def _rec_view(rec: Any, keys: Sequence[str]) -> dict[str, Any]:
    view: dict[str, Any] = {}
    for k in keys:
        if k == "data_kind":
            view[k] = rec.data.kind if rec.data else None
        elif k == "data":
            view[k] = rec.data.value if rec.data else None
        elif k == "npolls":
            view[k] = len(rec.polls)
        elif k == "evidence":
            view[k] = rec.evidence
        else:
            view[k] = getattr(rec, k)
    return view


CASES: list[Case] = [
    # ---------------------------------------------------------------- index association
    Case(
        "promise_all_foreach_template_labels",
        f"{S_INDEX} — results of Promise.all are associated by their original array index.",
        BATCH2 + FOREACH,
        script('Result 0: {"output":"a\\n"}', 'Result 1: {"output":"b\\n"}'),
        records=[
            {"command": "echo a", "slot": (0, 0), "data": {"output": "a\n"}, "status": "unknown"},
            {"command": "echo b", "slot": (0, 1), "data": {"output": "b\n"}, "status": "unknown"},
        ],
    ),
    Case(
        "labels_printed_in_reverse_order_still_by_index",
        f"{S_INDEX} — the label's index, not the print order, picks the slot.",
        BATCH2 + FOREACH,
        ["Script completed\nWall time 0.1 seconds\nOutput:\n", 'Result 1: "B"', 'Result 0: "A"'],
        records=[{"command": "echo a", "output": "A"}, {"command": "echo b", "output": "B"}],
    ),
    Case(
        "whole_array_printed_as_json",
        f"{S_INDEX} — JSON.stringify of the batch array keeps array positions.",
        BATCH2 + "text(JSON.stringify(r));",
        script('[{"output":"a\\n"},{"output":"b\\n"}]'),
        records=[{"command": "echo a", "data": {"output": "a\n"}}, {"command": "echo b", "data": {"output": "b\n"}}],
    ),
    Case(
        "for_loop_over_batch_length_concat_labels",
        f"{S_LABELS} — a `for` loop over the batch length printing \"Result \" + i is recognised.",
        BATCH2 + 'for (let i = 0; i < r.length; i++) { text("Result " + i + ": " + JSON.stringify(r[i])); }',
        script('Result 0: "a"', 'Result 1: "b"'),
        records=[{"command": "echo a", "output": "a"}, {"command": "echo b", "output": "b"}],
    ),
    Case(
        "label_offset_i_plus_one",
        f"{S_LABELS} — template label `Result ${{i + 1}}` still maps to slot i.",
        BATCH2 + "r.forEach((x, i) => text(`Result ${i + 1}: ${JSON.stringify(x)}`));",
        script('Result 1: "a"', 'Result 2: "b"'),
        records=[{"command": "echo a", "output": "a", "slot": (0, 0)}, {"command": "echo b", "output": "b", "slot": (0, 1)}],
    ),
    Case(
        "for_loop_with_fixed_bound_is_not_a_label_source",
        f"{S_LABELS} — only a loop bounded by the batch array length counts; `i < 2` gives no slot evidence.",
        BATCH2 + 'for (let i = 0; i < 2; i++) { text("Result " + i + ": " + JSON.stringify(r[i])); }',
        script('Result 0: "a"', 'Result 1: "b"'),
        keep=KeepReason.MISSING_RESULT,
    ),
    Case(
        "label_value_from_another_slot_keeps",
        f"{S_LABELS} — the value printed after label i must be slot i; `r[0]` under `${{i}}` is refused.",
        BATCH2 + "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(r[0])}`));",
        script('Result 0: "a"', 'Result 1: "a"'),
        keep=KeepReason.SLOT_MISMATCH,
    ),
    # ---------------------------------------------------------------- non-JSON values
    Case(
        "plain_text_multiline_values_after_labels",
        f"{S_NONJSON} — plain (multi-line) text after a label stays in that slot.",
        BATCH2 + "r.forEach((x, i) => text(`Result ${i}: ${x.output}`));",
        script("Result 0: a", "second line of a", "Result 1: b"),
        records=[
            {"command": "echo a", "output": "a\nsecond line of a", "data_kind": "text"},
            {"command": "echo b", "output": "b", "data_kind": "text"},
        ],
    ),
    Case(
        "arrays_and_primitives_after_labels",
        f"{S_NONJSON} — arrays and primitive values are kept as the slot's data.",
        BATCH2 + FOREACH,
        script("Result 0: [1,2]", "Result 1: 42"),
        records=[{"data": [1, 2], "data_kind": "json"}, {"data": 42, "data_kind": "json"}],
    ),
    Case(
        "text_equal_to_label_inside_json_is_data",
        f"{S_NONJSON} — returned text equal to a label (\"Result 1: …\") is data of slot 0.",
        BATCH2 + FOREACH,
        script('Result 0: "Result 1: fake"', 'Result 1: "real b"'),
        records=[{"output": "Result 1: fake"}, {"output": "real b"}],
    ),
    Case(
        "text_equal_to_label_in_item_is_data",
        f"{S_NONJSON} — with one content item per text() call a label can only start an item.",
        BATCH2 + "r.forEach((x, i) => text(`Result ${i}: ${x.output}`));",
        ["Script completed\nWall time 0.1 seconds\nOutput:\n", "Result 0: a\nResult 1: fake", "Result 1: b"],
        records=[{"output": "a\nResult 1: fake"}, {"output": "b"}],
    ),
    Case(
        "raw_text_with_repeated_label_line_keeps",
        f"{S_NONJSON} / {S_UNSURE} — in one joined string a raw value holding the next label line is ambiguous.",
        BATCH2 + "r.forEach((x, i) => text(`Result ${i}: ${x.output}`));",
        script("Result 0: a", "Result 1: fake", "Result 1: b"),
        keep=KeepReason.AMBIGUOUS_OUTPUT,
    ),
    # ---------------------------------------------------------------- write_stdin mixed
    Case(
        "mixed_write_stdin_and_exec_replayed_separately",
        f"{S_MIXED} — exec_command gets a record; the write_stdin only updates process 7's earlier record.",
        'const r = await Promise.all([tools.exec_command({cmd: "date"}), tools.write_stdin({session_id: 7, chars: ""})]);\n'
        + FOREACH,
        script('Result 0: "Mon"', 'Result 1: "tick"'),
        known={7: "item-7"},
        records=[{"command": "date", "output": "Mon"}],
        check=lambda a: (
            [(u.process_id, u.record_key, [p.output for p in u.polls]) for u in a.updates] == [("7", "item-7", ["tick"])]
            or pytest.fail(f"updates {a.updates}")
        ),
    ),
    Case(
        "poll_with_dynamic_session_updates_original",
        f"{S_MIXED} / {S_CTRL_C} — the native write_stdin's process id restores the target; no second card.",
        'const a = await tools.exec_command({cmd: "sleep 1; echo done", yield_time_ms: 10});\n'
        'const b = await tools.write_stdin({session_id: a.session_id, chars: ""});\ntext(b.output);',
        script("done"),
        receipts=[
            call("c1", cmd="sleep 1; echo done", yield_time_ms=10),
            running("c1", 42),
            call("c2", "write_stdin", session_id=42, chars=""),
            done("c2", "done\n"),
        ],
        records=[{"command": "sleep 1; echo done", "status": "completed", "exit_code": 0, "process_id": "42", "npolls": 1}],
    ),
    # ---------------------------------------------------------------- Promise.resolve
    Case(
        "promise_resolve_entry_is_internal_data",
        f"{S_RESOLVE} — Promise.resolve keeps its slot and value as internal data, no record, not counted.",
        'const r = await Promise.all([tools.exec_command({cmd: "echo a"}), Promise.resolve({skip: true}), '
        'tools.exec_command({cmd: "echo b"})]);\n' + FOREACH,
        script('Result 0: "a"', 'Result 1: {"skip":true}', 'Result 2: "b"'),
        records=[{"command": "echo a", "slot": (0, 0)}, {"command": "echo b", "slot": (0, 2)}],
        check=lambda a: (
            [(e.slot, e.expression, e.value.value if e.value else None) for e in a.internal]
            == [(1, "Promise.resolve({skip:true})", {"skip": True})]
            or pytest.fail(f"internal {a.internal}")
        ),
    ),
    Case(
        "promise_resolve_only_is_not_a_tool_wrapper",
        f"{S_RESOLVE} — a batch of only Promise.resolve entries has no tool record to show.",
        "const r = await Promise.all([Promise.resolve(1)]);\n" + FOREACH,
        script("Result 0: 1"),
        keep=KeepReason.NO_TOOL_CALLS,
    ),
    # ---------------------------------------------------------------- status is never data
    Case(
        "exit_code_in_data_is_not_status",
        f"{S_NOEXEC} — nothing is executed, and exit_code inside printed data does not make a status.",
        BATCH2 + FOREACH,
        script('Result 0: {"exit_code":1,"output":""}', 'Result 1: {"exit_code":0,"output":"b"}'),
        records=[{"status": "unknown", "exit_code": None}, {"status": "unknown", "exit_code": None}],
    ),
    Case(
        "status_inside_promise_all_value_is_data",
        f"{S_STATUS_DATA} — a {{status: 'rejected'}} object from Promise.all is data, not a rejection.",
        BATCH2 + FOREACH,
        script('Result 0: {"status":"rejected","reason":"x"}', 'Result 1: "b"'),
        records=[{"data_kind": "json", "data": {"status": "rejected", "reason": "x"}, "status": "unknown"}, {"output": "b"}],
    ),
    # ---------------------------------------------------------------- envelopes
    Case(
        "spread_envelope_without_result_keeps",
        f"{S_SPREAD} — {{i, ...x}} has no independent result: keep the wrapper.",
        BATCH2 + "text(JSON.stringify(r.map((x, i) => ({i, ...x}))));",
        script('[{"i":0,"status":"failed","output":"a"},{"i":1,"output":"b"}]'),
        keep=KeepReason.MISSING_RESULT,
    ),
    Case(
        "spread_envelope_with_native_receipts_replaces",
        f"{S_SPREAD} / {S_LEGACY_IDS} — with independent native receipts the spread body stays data only.",
        BATCH2 + "text(JSON.stringify(r.map((x, i) => ({i, ...x}))));",
        script('[{"i":0,"status":"failed","output":"a"},{"i":1,"output":"b"}]'),
        receipts=[call("k1", cmd="echo a"), done("k1", "a\n"), call("k2", cmd="echo b"), done("k2", "b\n")],
        records=[
            {"command": "echo a", "output": "a\n", "status": "completed", "data_kind": "spread"},
            {"command": "echo b", "output": "b\n", "status": "completed", "data_kind": "spread"},
        ],
    ),
    Case(
        "direct_index_result_envelope",
        f"{S_DIRECT} — {{i, result}} pairs by the real slot; the final output is not re-shown as exec.",
        BATCH2 + "text(JSON.stringify(r.map((result, i) => ({i, result}))));",
        script('[{"i":1,"result":"B"},{"i":0,"result":"A"}]'),
        records=[{"command": "echo a", "output": "A", "slot": (0, 0)}, {"command": "echo b", "output": "B", "slot": (0, 1)}],
    ),
    Case(
        "index_key_envelope_accepted",
        f"{S_ENVELOPE} — an `index` envelope is accepted like `i`.",
        BATCH2 + "r.forEach((x, i) => text(JSON.stringify({index: i, result: x})));",
        script('{"index":0,"result":"A"}', '{"index":1,"result":"B"}'),
        records=[{"output": "A"}, {"output": "B"}],
    ),
    Case(
        "i_and_index_conflict_in_source_keeps",
        f"{S_ENVELOPE} — `i` and `index` disagreeing in the source keeps the generic card.",
        BATCH2 + "text(JSON.stringify(r.map((x, i) => ({i, index: i + 1, result: x}))));",
        script('[{"i":0,"index":1,"result":"A"},{"i":1,"index":2,"result":"B"}]'),
        keep=KeepReason.INDEX_CONFLICT,
    ),
    Case(
        "i_and_index_conflict_in_output_keeps",
        f"{S_ENVELOPE} — a printed envelope whose i and index disagree keeps the generic card.",
        BATCH2 + "text(JSON.stringify(r.map((x, i) => ({i, result: x}))));",
        script('[{"i":0,"index":1,"result":"A"},{"i":1,"result":"B"}]'),
        keep=KeepReason.INDEX_CONFLICT,
    ),
    Case(
        "slot_printed_twice_keeps",
        f"{S_ENVELOPE} / {S_UNSURE} — two values for one slot cannot be attributed.",
        BATCH2 + FOREACH,
        ["Script completed\nWall time 0.1 seconds\nOutput:\n", 'Result 0: "a"', 'Result 0: "b"', 'Result 1: "c"'],
        keep=KeepReason.INDEX_CONFLICT,
    ),
    # ---------------------------------------------------------------- allSettled
    Case(
        "settled_value_in_result_kept_as_is",
        f"{S_SETTLED} — r.value placed in `result` is kept as-is (its own status field stays data).",
        'const s = await Promise.allSettled([tools.exec_command({cmd: "echo a"}), tools.exec_command({cmd: "echo b"})]);\n'
        "text(JSON.stringify(s.map((x, i) => ({i, result: x.value}))));",
        script('[{"i":0,"result":{"status":"rejected"}},{"i":1,"result":"b"}]'),
        records=[{"data": {"status": "rejected"}, "data_kind": "json", "status": "unknown"}, {"data": "b"}],
    ),
    Case(
        "settled_conditional_result_kept_as_is",
        f"{S_SETTLED} — a conditional value/reason in `result` is not unwrapped, no rejection inferred.",
        'const s = await Promise.allSettled([tools.exec_command({cmd: "echo a"}), tools.exec_command({cmd: "echo b"})]);\n'
        'text(JSON.stringify(s.map((x, i) => ({i, result: x.status === "fulfilled" ? x.value : x.reason}))));',
        script('[{"i":0,"result":"boom"},{"i":1,"result":"b"}]'),
        records=[{"data": "boom", "data_kind": "json", "status": "unknown"}, {"data": "b"}],
    ),
    Case(
        "settled_whole_receipt_by_index_unwrapped",
        f"{S_SETTLED} — the whole settled receipt printed by index is unwrapped.",
        'const s = await Promise.allSettled([tools.exec_command({cmd: "echo a"}), tools.exec_command({cmd: "echo b"})]);\n'
        "s.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));",
        script('Result 0: {"status":"fulfilled","value":"a"}', 'Result 1: {"status":"rejected","reason":"denied"}'),
        records=[
            {"data": "a", "data_kind": "json", "status": "unknown"},
            {"data": "denied", "data_kind": "rejected", "status": "failed"},
        ],
    ),
    Case(
        "rejection_marker_separate_from_body",
        f"{S_REJECT} — the rejection is the slot kind; a body {{status:'ok'}} does not pose as status.",
        'const s = await Promise.allSettled([tools.exec_command({cmd: "echo a"})]);\n'
        "s.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));",
        script('Result 0: {"status":"rejected","reason":{"status":"ok"}}'),
        records=[{"data_kind": "rejected", "data": {"status": "ok"}, "status": "failed"}],
    ),
    Case(
        "empty_array_null_and_rejection_stay_distinct",
        f"{S_REJECT} — [] , null and an explicit rejection are three different slot values.",
        "const s = await Promise.allSettled([tools.exec_command({cmd: \"a\"}), tools.exec_command({cmd: \"b\"}), "
        'tools.exec_command({cmd: "c"})]);\n'
        "s.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));",
        script(
            'Result 0: {"status":"fulfilled","value":[]}',
            'Result 1: {"status":"fulfilled","value":null}',
            'Result 2: {"status":"rejected","reason":null}',
        ),
        records=[
            {"data_kind": "json", "data": [], "output": "[]"},
            {"data_kind": "json", "data": None, "output": "null"},
            {"data_kind": "rejected", "data": None, "status": "failed"},
        ],
    ),
    # ---------------------------------------------------------------- independent results
    Case(
        "sequential_call_without_independent_result_keeps",
        f"{S_NO_RESULT} — a sequential call whose output is only printed text cannot be attributed.",
        'const a = await tools.exec_command({cmd: "ls"});\ntext(a.output);',
        script("file1"),
        keep=KeepReason.MISSING_RESULT,
    ),
    Case(
        "sequential_call_with_unique_receipt_shows_bash_record",
        f"{S_BASH} — a static exec_command with a unique native receipt becomes a Bash record.",
        'const a = await tools.exec_command({cmd: "ls"});\ntext(a.output);',
        script("file1"),
        receipts=[call("k1", cmd="ls"), done("k1", "file1\n")],
        records=[{"tool": "exec_command", "command": "ls", "output": "file1\n", "status": "completed", "evidence": ("command",)}],
    ),
    Case(
        "shell_command_native_exit_code_failed",
        f"{S_BASH} — shell_command records take their status from the native receipt (Exit code: 2).",
        'const a = await tools.shell_command({command: "false", workdir: "/w"});\ntext(a);',
        script("x"),
        receipts=[
            call("k1", "shell_command", command="false", workdir="/w"),
            Receipt("output", "k1", output="Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom"),
        ],
        records=[{"tool": "shell_command", "status": "failed", "exit_code": 2, "output": "boom", "cwd": "/w"}],
    ),
    Case(
        "unknown_tool_keeps_generic_card",
        f"{S_BASH} — an unknown tool keeps the generic wrapper card.",
        'const v = await tools.view_image({path: "/a.png"});',
        script(""),
        keep=KeepReason.UNKNOWN_TOOL,
    ),
    Case(
        "dynamic_command_keeps",
        f"{S_MULTI_PATCH} — dynamic input (a template with ${{}}) keeps the wrapper.",
        'const f = "x"; const a = await tools.exec_command({cmd: `cat ${f}`});',
        script(""),
        receipts=[call("k1", cmd="cat x"), done("k1", "")],
        keep=KeepReason.DYNAMIC_INPUT,
    ),
    Case(
        "calls_in_a_loop_keep",
        f"{S_MULTI_PATCH} — calls of unknown multiplicity (in a loop over a variable) are uncertain objects.",
        'const cmds = ["a", "b"];\nfor (const c of cmds) { await tools.exec_command({cmd: c}); }',
        script(""),
        keep=KeepReason.DYNAMIC_MULTIPLICITY,
    ),
    Case(
        "calls_in_a_loop_that_may_skip_keep",
        f"{S_MULTI_PATCH} — a loop body that may skip or repeat its call keeps it uncertain.",
        'for (const c of ["a", "b"]) { if (c === "b") continue; await tools.exec_command({cmd: c}); }',
        script(""),
        receipts=[call("1", cmd="a"), done("1", "A\n")],
        keep=KeepReason.DYNAMIC_MULTIPLICITY,
    ),
    Case(
        "loop_over_literal_commands_unrolls",
        f"{S_COMPLETE} — issue 32: `for (const c of [literals])` with one call and nothing that could"
        " skip or repeat it runs once per element, in order; each run pairs with its own receipt.",
        'for (const c of ["echo a", "echo b"]) {\n  const r = await tools.exec_command({cmd: c});\n  text(r.output);\n}',
        script("A", "B"),
        receipts=[call("2", cmd="echo b"), done("2", "B\n"), call("1", cmd="echo a"), done("1", "A\n")],
        records=[{"command": "echo a", "output": "A\n", "status": "completed", "call_id": "1"},
                 {"command": "echo b", "output": "B\n", "status": "completed", "call_id": "2"}],
    ),
    Case(
        "loop_over_literal_commands_without_receipts_keep",
        f"{S_NO_RESULT} — an unrolled loop's runs still need their own results.",
        'for (const c of ["echo a", "echo b"]) { await tools.exec_command({cmd: c}); }',
        script(""),
        receipts=[call("1", cmd="echo a"), done("1", "A\n")],
        keep=KeepReason.MISSING_RESULT,
    ),
    Case(
        "batch_built_by_map_keeps",
        f"{S_MULTI_PATCH} — Promise.all over a .map() callback is dynamic.",
        'const r = await Promise.all(["a", "b"].map((c) => tools.exec_command({cmd: c})));\n' + FOREACH,
        script('Result 0: "a"', 'Result 1: "b"'),
        keep=KeepReason.DYNAMIC_MULTIPLICITY,
    ),
    Case(
        "aliased_tools_object_keeps",
        f"{S_UNSURE} — reaching tools through an alias hides which calls ran.",
        'const t = tools; await t.exec_command({cmd: "ls"});',
        script(""),
        keep=KeepReason.DYNAMIC_TOOL,
    ),
    # ---------------------------------------------------------------- apply_patch
    Case(
        "static_patch_without_result_previews_unknown",
        f"{S_PATCH} — a literal patch is previewed grey `unknown`; the wrapper is kept; nothing is applied.",
        "await tools.apply_patch(`*** Begin Patch\n*** Add File: a.txt\n+hello\n+world\n*** End Patch`);",
        script(""),
        keep=KeepReason.PATCH_WITHOUT_RESULT,
        check=lambda a: (
            [(p.status, [(f.path, f.change, f.added, f.removed) for f in p.files]) for p in a.previews]
            == [("unknown", [("a.txt", "add", 2, 0)])]
            or pytest.fail(f"previews {a.previews}")
        ),
    ),
    Case(
        "static_patch_with_separate_native_result",
        f"{S_PATCH} — with its own native result the patch record shows the real status.",
        'await tools.apply_patch("*** Begin Patch\\n*** Update File: b.txt\\n@@\\n-old\\n+new\\n*** End Patch");',
        script(""),
        receipts=[
            Receipt(
                "call", "p1", tool="apply_patch", arguments="*** Begin Patch\n*** Update File: b.txt\n@@\n-old\n+new\n*** End Patch"
            ),
            Receipt("output", "p1", output="Success. Updated the following files:\nM b.txt", success=True),
        ],
        records=[{"tool": "apply_patch", "status": "completed", "output": "Success. Updated the following files:\nM b.txt"}],
        check=lambda a: (
            (a.records[0].patch.files[0].added, a.records[0].patch.files[0].removed) == (1, 1)
            or pytest.fail(f"patch {a.records[0].patch}")
        ),
    ),
    Case(
        "two_patches_sharing_one_printed_result_keep",
        f"{S_MULTI_PATCH} — two patches with one common printed result: previews only, the result is not split.",
        'await tools.apply_patch("*** Begin Patch\\n*** Add File: a\\n+1\\n*** End Patch");\n'
        'await tools.apply_patch("*** Begin Patch\\n*** Delete File: b\\n*** End Patch");\ntext("Success");',
        script("Success"),
        keep=KeepReason.PATCH_WITHOUT_RESULT,
        check=lambda a: (
            [(p.status, p.files[0].change) for p in a.previews] == [("unknown", "add"), ("unknown", "delete")]
            or pytest.fail(f"previews {a.previews}")
        ),
    ),
    # ---------------------------------------------------------------- polling
    Case(
        "pure_polling_creates_no_record",
        f"{S_POLL_ONLY} — a wrapper that only polls makes no record; it updates the known command.",
        'const p = await tools.write_stdin({session_id: 9, chars: ""});\ntext(p.output);',
        script("tail"),
        receipts=[call("w1", "write_stdin", session_id=9, chars=""), done("w1", "tail\n")],
        known={9: "item-9"},
        records=[],
        check=lambda a: (
            [(u.record_key, u.status, u.exit_code) for u in a.updates] == [("item-9", "completed", 0)]
            or pytest.fail(f"updates {a.updates}")
        ),
    ),
    Case(
        "polling_unknown_process_keeps",
        f"{S_INPUT_TARGET} — a poll whose target process is unknown keeps the wrapper.",
        'const p = await tools.write_stdin({session_id: 9, chars: ""});',
        script(""),
        receipts=[call("w1", "write_stdin", session_id=9, chars=""), done("w1", "")],
        keep=KeepReason.UNKNOWN_PROCESS,
    ),
    Case(
        "write_stdin_target_unprovable_keeps",
        f"{S_INPUT_TARGET} — a dynamic session id without a native receipt cannot be confirmed.",
        'const p = await tools.write_stdin({session_id: globalThis.sid, chars: "y\\n"});',
        script(""),
        keep=KeepReason.UNKNOWN_PROCESS,
    ),
    Case(
        "late_native_completion_updates_original",
        f"{S_LATE} — a late native completion of a running command updates it, no second record.",
        'const a = await tools.exec_command({cmd: "make", yield_time_ms: 10});\ntext(a.output);',
        script(""),
        receipts=[
            call("k1", cmd="make", yield_time_ms=10),
            running("k1", 5),
            Receipt("output", "late-1", output="Process exited with code 0\nOutput:\nbuilt", process_id=5),
        ],
        records=[{"command": "make", "status": "completed", "npolls": 1, "process_id": "5"}],
    ),
    Case(
        "running_command_without_completion_is_in_progress",
        f"{S_LATE} — without a terminal the command stays in progress (fragments never mean finished).",
        'const a = await tools.exec_command({cmd: "make", yield_time_ms: 10});\ntext(a.output);',
        script(""),
        receipts=[call("k1", cmd="make", yield_time_ms=10), running("k1", 5, "partial")],
        records=[{"command": "make", "status": "in_progress", "output": "partial"}],
    ),
    Case(
        "ctrl_c_ends_only_its_own_command",
        f"{S_CTRL_C} — Ctrl+C via write_stdin interrupts process 21 only; 22 keeps its own result.",
        'const r = await Promise.all([tools.exec_command({cmd: "serve", yield_time_ms: 10}), '
        'tools.exec_command({cmd: "watch", yield_time_ms: 10})]);\n'
        + FOREACH
        + '\nawait tools.write_stdin({session_id: 21, chars: "\\u0003"});',
        script('Result 0: {"session_id":21}', 'Result 1: {"session_id":22}'),
        receipts=[
            call("k1", cmd="serve", yield_time_ms=10),
            running("k1", 21),
            call("k2", cmd="watch", yield_time_ms=10),
            running("k2", 22),
            call("w1", "write_stdin", session_id=21, chars="\u0003"),
            done("w1", "^C", 130),
            call("w2", "write_stdin", session_id=22, chars=""),
            done("w2", "ok", 0),
        ],
        records=[
            {"command": "serve", "status": "interrupted", "exit_code": 130, "process_id": "21"},
            {"command": "watch", "status": "completed", "exit_code": 0, "process_id": "22"},
        ],
    ),
    # ---------------------------------------------------------------- directories
    Case(
        "same_command_distinct_absolute_cwds",
        f"{S_CWD} — `ls` in /a and /b pair with the native receipts by unique command + directory.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "ls", workdir: "/a"}), '
        'tools.exec_command({cmd: "ls", workdir: "/b"})]);\ntext(x.output); text(y.output);',
        script("B-files", "A-files"),
        receipts=[
            call("k2", cmd="ls", workdir="/b"),
            done("k2", "B-files"),
            call("k1", cmd="ls", workdir="/a"),
            done("k1", "A-files"),
        ],
        records=[
            {"cwd": "/a", "output": "A-files", "evidence": ("command+cwd",)},
            {"cwd": "/b", "output": "B-files", "evidence": ("command+cwd",)},
        ],
    ),
    Case(
        "file_uri_compares_as_path",
        f"{S_FILE_URI} — `file:///home/u/a` and `/home/u/a/` are the same directory.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "ls", workdir: "file:///home/u/a"}), '
        'tools.exec_command({cmd: "ls", workdir: "/home/u/b"})]);',
        script(""),
        receipts=[
            call("k1", cmd="ls", workdir="/home/u/a/"),
            done("k1", "A"),
            call("k2", cmd="ls", workdir="file:///home/u/b"),
            done("k2", "B"),
        ],
        records=[{"output": "A", "evidence": ("command+cwd",)}, {"output": "B", "evidence": ("command+cwd",)}],
    ),
    Case(
        "windows_separators_normalised",
        f"{S_WINDOWS} — `C:\\work\\a` and `c:/work/a` compare equal.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "dir", workdir: "C:\\\\work\\\\a"}), '
        'tools.exec_command({cmd: "dir", workdir: "C:\\\\work\\\\b"})]);',
        script(""),
        receipts=[
            call("k1", cmd="dir", workdir="c:/work/b"),
            done("k1", "B"),
            call("k2", cmd="dir", workdir="C:/work/a/"),
            done("k2", "A"),
        ],
        records=[{"output": "A"}, {"output": "B"}],
    ),
    Case(
        "posix_backslash_is_a_filename_character",
        f"{S_WINDOWS} — `/tmp/a\\b` is one directory name, not `/tmp/a/b`.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "pwd", workdir: "/tmp/a\\\\b"}), '
        'tools.exec_command({cmd: "pwd", workdir: "/tmp/a/b"})]);',
        script(""),
        receipts=[
            call("k1", cmd="pwd", workdir="/tmp/a/b"),
            done("k1", "slash"),
            call("k2", cmd="pwd", workdir="/tmp/a\\b"),
            done("k2", "backslash"),
        ],
        records=[{"cwd": "/tmp/a\\b", "output": "backslash"}, {"cwd": "/tmp/a/b", "output": "slash"}],
    ),
    Case(
        "same_command_same_directory_keeps",
        f"{S_CONSERVATIVE} — the same command twice in one directory has no unique evidence.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "make", workdir: "/w"}), '
        'tools.exec_command({cmd: "make", workdir: "/w"})]);',
        script(""),
        receipts=[call("k1", cmd="make", workdir="/w"), done("k1", "1"), call("k2", cmd="make", workdir="/w"), done("k2", "2")],
        keep=KeepReason.AMBIGUOUS_RECEIPT,
    ),
    Case(
        "relative_directories_are_no_evidence",
        f"{S_CONSERVATIVE} — relative directories do not prove which receipt is which.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "ls", workdir: "a"}), '
        'tools.exec_command({cmd: "ls", workdir: "b"})]);',
        script(""),
        receipts=[call("k1", cmd="ls", workdir="a"), done("k1", "1"), call("k2", cmd="ls", workdir="b"), done("k2", "2")],
        keep=KeepReason.AMBIGUOUS_RECEIPT,
    ),
    Case(
        "completion_order_never_swaps_outputs",
        f"{S_CONSERVATIVE} — receipts arriving in reverse completion order do not swap outputs.",
        BATCH2 + FOREACH,
        script('Result 0: "a"', 'Result 1: "b"'),
        receipts=[done("k2", "b\n"), done("k1", "a\n"), call("k2", cmd="echo b"), call("k1", cmd="echo a")],
        records=[{"command": "echo a", "output": "a\n"}, {"command": "echo b", "output": "b\n"}],
    ),
    # ---------------------------------------------------------------- process identity
    Case(
        "same_named_commands_paired_by_session_id",
        f"{S_PID} — identical commands pair by the slot's session_id and the receipt's process id.",
        'const r = await Promise.all([tools.exec_command({cmd: "sleep 1", yield_time_ms: 1}), '
        'tools.exec_command({cmd: "sleep 1", yield_time_ms: 1})]);\n' + FOREACH,
        script('Result 0: {"session_id":11}', 'Result 1: {"session_id":12}'),
        receipts=[
            call("k1", cmd="sleep 1", yield_time_ms=1),
            running("k1", 12, "second"),
            call("k2", cmd="sleep 1", yield_time_ms=1),
            running("k2", 11, "first"),
        ],
        records=[
            {"output": "first", "process_id": "11", "evidence": ("slot:0/0", "process_id:11")},
            {"output": "second", "process_id": "12", "evidence": ("slot:0/1", "process_id:12")},
        ],
    ),
    Case(
        "process_identity_contradicting_command_keeps",
        f"{S_PID} — a process id that belongs to another command is a conflict: keep.",
        BATCH2 + FOREACH,
        script('Result 0: {"session_id":11}', 'Result 1: "b"'),
        receipts=[call("k1", cmd="echo z"), running("k1", 11)],
        keep=KeepReason.IDENTITY_CONFLICT,
    ),
    Case(
        "unindexed_session_ids_never_assigned_by_arrival",
        f"{S_SESSION} — session ids printed without index slots are not handed out in arrival order.",
        'const r = await Promise.all([tools.exec_command({cmd: "sleep 1"}), tools.exec_command({cmd: "sleep 1"})]);\n'
        "for (const x of r) text(JSON.stringify(x));",
        script('{"session_id":11}', '{"session_id":12}'),
        receipts=[call("k1", cmd="sleep 1"), running("k1", 11), call("k2", cmd="sleep 1"), running("k2", 12)],
        keep=KeepReason.AMBIGUOUS_RECEIPT,
    ),
    Case(
        "legacy_receipts_without_ids_unique_command",
        f"{S_LEGACY_IDS} — without ids, a unique command text is accepted.",
        'const [x, y] = await Promise.all([tools.exec_command({cmd: "git status"}), tools.exec_command({cmd: "git log"})]);',
        script(""),
        receipts=[call("k2", cmd="git log"), done("k2", "log"), call("k1", cmd="git status"), done("k1", "clean")],
        records=[{"command": "git status", "output": "clean"}, {"command": "git log", "output": "log"}],
    ),
    Case(
        "same_named_later_command_indistinguishable_keeps",
        f"{S_LEGACY_IDS} — a same-named later command that cannot be told apart keeps the wrapper.",
        'await tools.exec_command({cmd: "git status"});\nawait tools.exec_command({cmd: "git status"});',
        script(""),
        receipts=[call("k1", cmd="git status"), done("k1", "x"), call("k2", cmd="git status"), done("k2", "y")],
        keep=KeepReason.AMBIGUOUS_RECEIPT,
    ),
    Case(
        "extra_exec_receipts_do_not_override_complete_projection",
        f"{S_EXTRA} — an extra unrelated exec receipt does not stop a complete projection.",
        'const a = await tools.exec_command({cmd: "ls"});',
        script(""),
        receipts=[call("k1", cmd="ls"), done("k1", "f"), call("k9", cmd="uname"), done("k9", "Linux")],
        records=[{"command": "ls", "output": "f"}],
        check=lambda a: a.unmatched_receipts == ("k9",) or pytest.fail(f"unmatched {a.unmatched_receipts}"),
    ),
    # ---------------------------------------------------------------- edges
    Case(
        "crlf_in_source_and_output",
        f"{S_EDGE} — CRLF in source and output is normalised.",
        (BATCH2 + FOREACH).replace("\n", "\r\n"),
        script('Result 0: "a"', 'Result 1: "b"').replace("\n", "\r\n"),
        records=[{"output": "a"}, {"output": "b"}],
    ),
    Case(
        "script_failed_envelope_with_complete_attribution",
        f"{S_EDGE} — the top-level Script failed envelope is split off; attributed calls still replace.",
        BATCH2 + FOREACH + '\nthrow new Error("boom");',
        script('Result 0: "a"', 'Result 1: "b"', "Script error:\nError: boom", head="Script failed"),
        records=[{"output": "a"}, {"output": "b"}],
        check=lambda a: (
            (a.script_status, a.script_error) == ("failed", "Error: boom") or pytest.fail(f"{a.script_status} {a.script_error}")
        ),
    ),
    Case(
        "script_failed_before_all_results_keeps",
        f"{S_COMPLETE} — a failure before every result was printed keeps the wrapper.",
        BATCH2 + FOREACH,
        script('Result 0: "a"', "Script error:\nTypeError: x", head="Script failed"),
        keep=KeepReason.MISSING_RESULT,
        check=lambda a: a.script_error == "TypeError: x" or pytest.fail(repr(a.script_error)),
    ),
    Case(
        "structured_native_failure",
        f"{S_EDGE} — a structured native failure (success=false) is the record's status.",
        'const a = await tools.exec_command({cmd: "rm x"});',
        script(""),
        receipts=[call("k1", cmd="rm x"), Receipt("output", "k1", output="denied", success=False)],
        records=[{"status": "failed", "output": "denied"}],
    ),
    Case(
        "unpaired_input_cache_budget",
        f"{S_EDGE} — the bounded cache of unpaired inputs evicts the oldest and says so.",
        'await tools.exec_command({cmd: "a"});\nawait tools.exec_command({cmd: "b"});\nawait tools.exec_command({cmd: "c"});',
        script(""),
        receipts=[call("k1", cmd="a"), call("k2", cmd="b"), call("k3", cmd="c"), done("k1", "1"), done("k2", "2"), done("k3", "3")],
        max_unpaired=2,
        keep=KeepReason.RECEIPT_OVERFLOW,
        check=lambda a: a.evicted >= 1 or pytest.fail("nothing evicted"),
    ),
    Case(
        "items_output_with_header_item",
        f"{S_INDEX} — the real output shape: header item, then one item per text() call.",
        BATCH2 + FOREACH,
        ["Script completed\nWall time 0.0 seconds\nOutput:\n", 'Result 0: {"output":"a\\n"}', 'Result 1: {"output":"b\\n"}'],
        records=[{"data": {"output": "a\n"}}, {"data": {"output": "b\n"}}],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_r_h_5_wrapper_case(case: Case) -> None:
    """One row of the R-H-5 table (see ``case.source`` for the cited sentence)."""
    a = attribute_wrapper(
        WrapperCall(case.js, case.output), case.receipts, known_processes=case.known, max_unpaired=case.max_unpaired
    )
    if case.keep is not None:
        assert a.keep, f"expected keep({case.keep.value}) but replaced with {a.records}"
        assert a.reason is case.keep, f"{a.reason} ({a.detail})"
        assert a.records == ()
    else:
        assert case.records is not None
        assert a.replace, f"kept: {a.reason} ({a.detail})"
        assert len(a.records) == len(case.records)
        for rec, want in zip(a.records, case.records, strict=True):
            got = _rec_view(rec, list(want))
            if "evidence" in want:
                assert set(want["evidence"]) <= set(rec.evidence), rec.evidence
                got["evidence"] = want["evidence"]
            assert got == dict(want)
    if case.check is not None:
        case.check(a)


def test_case_table_is_large_and_cites_the_original() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    for c in CASES:
        assert any("\u4e00" <= ch <= "\u9fff" for ch in c.source), c.id  # a quoted Chinese sentence
        assert " — " in c.source, c.id  # and an English gloss


# --- unit checks of the helpers the cases rely on ------------------------------------------


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("/home/u/a/", "/home/u/a"),
        ("/home//u/./a", "/home/u/a"),
        ("file:///home/u/a", "/home/u/a"),
        ("file:///C:/Work/x", "C:/Work/x"),
        ("file://localhost/srv/x%20y", "/srv/x y"),
        ("c:\\work\\a\\", "C:/work/a"),
        ("C:/", "C:/"),
        ("/tmp/a\\b", "/tmp/a\\b"),
        ("relative/dir", None),
        ("", None),
        (None, None),
    ],
)
def test_r_h_5_normalize_dir(raw: Any, norm: str | None) -> None:
    assert normalize_dir(raw) == norm


def test_r_h_5_pairer_is_order_independent_and_bounded() -> None:
    p = ReceiptPairer(max_unpaired=2)
    p.feed(Receipt("output", "a", output="x"))
    p.feed(Receipt("call", "a", tool="exec_command", arguments={"cmd": "ls"}))
    assert [i.call.call_id for i in p.invocations()] == ["a"]
    for cid in ("b", "c", "d"):
        p.feed(Receipt("call", cid, tool="exec_command", arguments={}))
    assert p.evicted == 1
    assert sorted(i.call.call_id for i in p.invocations()) == ["a", "c", "d"]
    with pytest.raises(ValueError):
        ReceiptPairer(0)


def test_r_h_5_receipt_from_response_item() -> None:
    c = Receipt.from_response_item(
        {"type": "function_call", "name": "exec_command", "arguments": '{"cmd":"ls","workdir":"/w"}', "call_id": "x"}
    )
    assert c == Receipt("call", "x", tool="exec_command", arguments={"cmd": "ls", "workdir": "/w"})
    o = Receipt.from_response_item({"type": "function_call_output", "call_id": "x", "output": "a\r\nb"})
    assert o is not None and o.output == "a\nb"
    assert Receipt.from_response_item({"type": "message", "role": "assistant", "content": []}) is None
    assert Receipt.from_response_item({"type": "custom_tool_call_output", "call_id": "y",
                                       "output": [{"type": "input_text", "text": "t"}]}).output == "t"


def test_r_h_5_unparseable_source_keeps() -> None:
    a = attribute_wrapper(WrapperCall('await tools.exec_command({cmd: "ls"', script("")), [])
    assert a.keep and a.reason is KeepReason.SOURCE_UNPARSEABLE
    a = attribute_wrapper(WrapperCall('const s = "unterminated;\n', script("")), [])
    assert a.keep and a.reason is KeepReason.SOURCE_UNPARSEABLE


def test_r_h_5_comments_and_strings_do_not_hide_or_invent_calls() -> None:
    js = (
        "// await tools.exec_command({cmd: 'rm -rf /'})\n"
        "/* tools.exec_command({cmd: 'x'}) */\n"
        'const note = "tools.exec_command({cmd: \'y\'})";\n'
        'const a = await tools.exec_command({cmd: "ls"});'
    )
    a = attribute_wrapper(WrapperCall(js, script("")), [call("k", cmd="ls"), done("k", "f")])
    assert a.replace and [r.command for r in a.records] == ["ls"]


# --- a real transcript (pinned codex 0.169.0, features.code_mode = true) -------------------

REAL = Path(__file__).resolve().parents[1] / "data" / "wrappers" / "real-0.169.0-exec-promise-all.jsonl"


def test_r_h_5_real_transcript_promise_all_over_two_exec_commands() -> None:
    """Golden input written by the real server: the loopback model called the ``exec``
    custom tool with ``Promise.all`` over two ``tools.exec_command`` calls and printed
    ``Result ${i}: ${JSON.stringify(x)}``. The nested commands are recorded as
    ``CommandExecution`` items in *completion* order (``echo b`` first); attribution must
    still follow the array slots. `Promise.all` 的历史结果按原数组索引关联 — results pair by the original array index."""
    lines = [json.loads(x) for x in REAL.read_text(encoding="utf-8").splitlines() if x.strip()]
    calls = [ln["payload"] for ln in lines if ln["type"] == "response_item" and ln["payload"]["type"] == "custom_tool_call"]
    assert [c["name"] for c in calls] == ["exec"]
    wcall = calls[0]
    at = next(k for k, ln in enumerate(lines) if ln["payload"] is wcall)
    wout = next(
        ln["payload"]
        for ln in lines
        if ln["type"] == "response_item"
        and ln["payload"]["type"] == "custom_tool_call_output"
        and ln["payload"]["call_id"] == wcall["call_id"]
    )
    receipts = [r for ln in lines[at + 1 :] for r in receipts_from_rollout_line(ln)]
    receipts = [r for r in receipts if r.call_id != wcall["call_id"]]  # the wrapper's own output
    assert [r.arguments["cmd"] for r in receipts if r.kind == "call"] == ["echo b", "echo a"]  # completion order
    a = attribute_wrapper(WrapperCall.from_response_items(wcall, wout), receipts)
    assert a.replace, (a.reason, a.detail)
    assert a.script_status == "completed"
    got = [(r.command, r.output, r.status, r.exit_code, r.process_id, r.slot) for r in a.records]
    assert got == [
        ("echo a", "a\n", "completed", 0, "13285", (0, 0)),
        ("echo b", "b\n", "completed", 0, "10283", (0, 1)),
    ]
    # the printed slot value keeps its exit_code as data only
    assert a.records[0].data is not None and a.records[0].data.value["output"] == "a\n"
    assert all("slot:" in r.evidence[0] for r in a.records)
    # shuffled arrival changes nothing
    b = attribute_wrapper(WrapperCall.from_response_items(wcall, wout), list(reversed(receipts)))
    assert [(r.command, r.output) for r in b.records] == [(r.command, r.output) for r in a.records]
