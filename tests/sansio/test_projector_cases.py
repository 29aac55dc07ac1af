"""Projector-level cases for legacy history (R-H-3, R-H-4, R-H-5): each case is a rollout file in
``tests/data/projector_cases/`` read through the path of ``codexrt show --offline --json``
(rollout → LegacyParser → Projector → JSON) and checked against the seed rule it cites.

The rollouts are written by ``tests/data/projector_cases/make_cases.py`` in the shapes the real
0.169.0 server writes (``tests/data/rollouts``, ``tests/data/wrappers``); a test below checks the
committed files are what the builder writes.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codexrt._features._history import load_rollout_transcript, transcript_to_json

CASES_DIR = Path(__file__).resolve().parents[1] / "data" / "projector_cases"

# Seed sentences (历史显示与目录来源 / 边界行为补充 / 编辑、命令、图片和 compact 的显示), quoted.
S_POLL = "轮询只更新原进程的命令卡片，不生成额外命令。"
S_PURE_POLL = "纯轮询不创建卡片或分隔线。"
S_LATE = "运行中命令的延迟原生完成记录和空输入轮询均更新原命令，不生成第二张卡片。"
S_STDIN = "`write_stdin` 的字面量输入（包括 Ctrl+C）关联已知进程，或通过原生 `process_id` 恢复对应命令；中断回执只结束原命令，后续命令保留各自结果。"
S_PID_FIRST = "原生回执带进程标识时优先按该标识匹配，避免相同命令文本误关联"
S_SAME_NAME = "同批次的同名命令以结果中的 `session_id` 和回执的 `process_id` 配对，即使完成顺序相反也不交换目录、输出或状态"
S_INPUT_UNKNOWN = "输入的目标或结果无法确认时仍保留完整 wrapper。"
S_UNIQUE = "旧回执缺少标识时，仅接受命令文本与线程/回合归属唯一的目标，或由显式绝对工作目录唯一确认的目标；仍有同名进程或同名后续命令无法区分时保留 wrapper。"
S_ONLY_CERTAIN = "旧 wrapper 仅在操作完整可确认且结果可关联时被替换。"
S_NO_OWNER = "无法确认结果归属时保留原 wrapper 与输出。"
S_INDEX = "`Promise.all` / `Promise.allSettled` 的历史结果按原数组索引关联。"
S_SAME_POS = "并核对随后打印的结果来自同一数组位置。"
S_ENVELOPE = "CRLF、顶层 Script failed 错误封套、结构化失败及未配对输入缓存预算均纳入处理。"
S_MIXED_ERR = "通用卡片展开可查看已有结果正文/图片，混合 wrapper 的实际错误输出也可查看。"
S_PATCH = "混合/部分动态 wrapper 中可确认的 literal 补丁也可预览；缺少单独结果时为灰色 unknown，完整 wrapper 与输出保留。"
S_PATCHES = "缺少独立结果的混合类型、多补丁、动态输入或不确定对象保留完整通用卡片和输出，其中静态补丁可另行灰色预览，不把共同结果归给各补丁。"
S_MIXED_FC = "具有独立 FileChange/CommandExecution/ImageView 或结构化结果的已知混合调用恢复为共用卡片"
S_REAL_STATUS = "`apply_patch`（直接或旧 exec 的静态实参）与 `fileChange` 共用 Claude 的编辑标题、操作栏、diff 和默认展开设置，展示全部文件、增删行和真实状态"
S_NO_INFER = "回放不执行表达式，不根据本地值中的 `exit_code` 等字段推断命令状态；`Promise.all` 返回对象内的 `status` 仍属于数据"
S_FRAGMENT = "输出片段不表示命令完成；明确终态及空的 MCP 结果仍会收尾。"
S_COMPACT_TIMES = "不同明确时间的 compact 记录继续独立显示。"
S_COMPACT_PLACE = "`contextCompaction` 和旧 `compacted` 即使没有摘要也在原消息位置显示压缩边界，禁止合入普通 assistant 或过滤空正文。"
S_NO_SWAP = "相同目录、相对目录或缺少唯一目录证据时继续保留原有保守回退，不能靠完成顺序交换命令的输出。"
S_NOT_BY_ORDER = "无索引并行输出中的 `session_id` 不按到达顺序分配给源码调用"


def _load(name: str) -> tuple[list[dict[str, Any]], Any]:
    tr = load_rollout_transcript(CASES_DIR / f"{name}.rollout.jsonl")
    js = transcript_to_json(tr)
    return [r for t in js["turns"] for r in t["records"]], tr


def _cmds(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["kind"] == "commandExecution"]


def _kinds(recs: list[dict[str, Any]]) -> list[str]:
    return [r["kind"] for r in recs]


def _text(rec: dict[str, Any]) -> str:
    return "".join(b.get("text") or "" for b in rec["content"])


def _reason(tr: Any, key: str = "w1") -> str | None:
    a = tr.wrappers[key]
    return None if a.replace else a.reason.value


# Each check: (rule quoted, assertion over (records, transcript)).
Check = Callable[[list[dict[str, Any]], Any], None]
EXPECT: dict[str, tuple[str, Check]] = {}


def expect(name: str, rule: str) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        EXPECT[name] = (rule, fn)
        return fn
    return deco


# --- polls ------------------------------------------------------------------------------------

@expect("poll_finishes_direct_command", S_POLL)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"], c["output"]) == ("completed", 0, "building\ndone\n")


@expect("poll_two_chunks_in_order_then_failure", S_POLL + " " + S_FRAGMENT)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"], c["output"]) == ("failed", 1, "collecting\n1 passed\n1 failed\n")


@expect("poll_still_running_appends_output_only", S_FRAGMENT)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"], c["output"]) == ("inProgress", None, "listening\nGET /\n")


@expect("poll_of_unknown_process_makes_no_card", S_PURE_POLL)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "commandExecution"]
    assert (_cmds(recs)[0]["output"], _cmds(recs)[0]["status"]) == ("a\n", "completed")


@expect("poll_in_a_later_turn_updates_the_first_turn", S_POLL + " " + S_PURE_POLL)
def _(recs, tr):
    turns = transcript_to_json(tr)["turns"]
    assert [r["kind"] for r in turns[1]["records"]] == ["userMessage", "assistantMessage"]
    (c,) = [r for r in turns[0]["records"] if r["kind"] == "commandExecution"]
    assert (c["status"], c["exitCode"], c["output"]) == ("completed", 0, "ok\n")


@expect("poll_reused_process_id_goes_to_the_latest_start", S_POLL)
def _(recs, tr):
    one, two = _cmds(recs)
    assert (one["command"], one["status"], one["output"]) == ("job one", "completed", "one\n")
    assert (two["command"], two["status"], two["exitCode"], two["output"]) == ("job two", "failed", 3, "two\n")


# --- Ctrl+C across calls -----------------------------------------------------------------------

@expect("ctrl_c_direct_on_direct_command", S_STDIN)
def _(recs, tr):
    tail, other = _cmds(recs)
    assert (tail["status"], tail["exitCode"], tail["output"]) == ("interrupted", 130, "line\n^C\n")
    assert (other["status"], other["output"]) == ("completed", "other\n")


@expect("ctrl_c_from_wrapper_on_direct_command", S_STDIN + " " + S_PURE_POLL)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "commandExecution"]  # the wrapper made no card
    (c,) = _cmds(recs)
    assert c["id"] == "c1" and c["status"] == "interrupted"
    assert c["exitCode"] is None  # 130 was only printed data, not a receipt
    (u,) = tr.wrappers["w1"].updates
    assert (u.process_id, u.record_key, u.status) == ("51", "c1", "interrupted")


@expect("ctrl_c_direct_on_wrapper_command", S_STDIN)
def _(recs, tr):
    dev, ready = _cmds(recs)
    assert dev["command"] == "npm run dev" and (dev["status"], dev["exitCode"]) == ("interrupted", 130)
    assert dev["output"] == '{"session_id":61,"output":"compiling\\n"}\nstopped\n'  # printed value, then the poll
    assert (ready["status"], ready["exitCode"], ready["output"]) == ("completed", 0, "ready\n")
    assert len(recs) == 3


@expect("ctrl_c_from_wrapper_only_ends_its_target", S_STDIN)
def _(recs, tr):
    a, b = _cmds(recs)
    assert (a["command"], a["status"]) == ("serve a", "interrupted")
    assert (b["command"], b["status"], b["output"]) == ("serve b", "inProgress", "b up\n")


# --- known processes ----------------------------------------------------------------------------

@expect("known_process_poll_from_wrapper_data_sets_no_status", S_NO_INFER + " " + S_POLL)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert tr.wrappers["w1"].replace
    assert c["status"] == "inProgress" and c["exitCode"] is None  # {"exit_code":0} is data
    assert c["output"].startswith("watching\n")


@expect("known_process_id_beats_same_command_text", S_PID_FIRST)
def _(recs, tr):
    one, two = _cmds(recs)
    assert one["command"] == two["command"] == "tail -f app.log"
    assert (one["id"], one["status"]) == ("c1", "inProgress")
    assert (two["id"], two["status"]) == ("c2", "interrupted")


@expect("unknown_process_keeps_the_wrapper", S_INPUT_UNKNOWN)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "dynamicToolCall"]
    assert _reason(tr) == "unknown_process"
    assert "Result 0:" in _text(recs[1])


@expect("process_started_by_an_earlier_wrapper_is_known_to_a_later_one", S_STDIN)
def _(recs, tr):
    assert tr.wrappers["w1"].replace and tr.wrappers["w2"].replace
    dev, hi = _cmds(recs)
    assert (dev["command"], dev["status"]) == ("npm run dev", "interrupted")
    assert (hi["status"], hi["output"]) == ("completed", "hi\n")
    assert len(recs) == 3  # the Ctrl+C wrapper made no card


# --- later direct calls ---------------------------------------------------------------------------

@expect("later_direct_call_of_the_same_command_is_not_a_receipt", S_UNIQUE)
def _(recs, tr):
    a, b, direct = _cmds(recs)
    assert (a["command"], b["command"], direct["command"]) == ("echo a", "echo b", "echo a")
    assert direct["id"] == "c1" and direct["output"] == "a again\n" and direct["status"] == "completed"
    assert "a again" not in a["output"] and a["status"] == "unknown"


@expect("later_direct_call_never_fills_a_missing_result", S_NO_OWNER)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "dynamicToolCall", "commandExecution"]
    assert _reason(tr) == "missing_result"
    assert (recs[2]["id"], recs[2]["output"]) == ("c1", "a\n")


@expect("parallel_direct_call_inside_the_wrapper_window_is_not_a_receipt", S_UNIQUE)
def _(recs, tr):
    mine, direct = _cmds(recs)
    assert mine["id"] == "w1#0" and "direct a" not in mine["output"]
    assert (direct["id"], direct["output"]) == ("c1", "direct a\n")


@expect("later_direct_snapshot_of_the_same_command_is_not_a_receipt", S_UNIQUE)
def _(recs, tr):
    nested, direct = _cmds(recs)
    assert (nested["id"], nested["output"]) == ("exec-d1", "Mon\n")
    assert (direct["id"], direct["output"]) == ("c1", "Tue\n")


# --- arrays mutated or re-bound ------------------------------------------------------------------

def _kept_whole(recs, tr):
    assert _kinds(recs) == ["userMessage", "dynamicToolCall"]
    assert _reason(tr) == "array_rebound"
    text = _text(recs[1])
    assert 'Result 0: {"output":"b\\n"}' in text  # the printed output stays with the wrapper


for _name in ("array_reversed_before_print", "array_sorted_before_print", "array_reassigned_before_print",
              "array_elements_swapped_by_destructuring", "array_aliased_then_mutated"):
    EXPECT[_name] = (S_INDEX + " " + S_SAME_POS + " " + S_NO_OWNER, _kept_whole)


@expect("array_read_only_is_still_replaced", S_INDEX)
def _(recs, tr):
    a, b = _cmds(recs)
    assert (a["command"], b["command"]) == ("echo a", "echo b")
    assert json.loads(a["output"]) == {"output": "a\n"} and json.loads(b["output"]) == {"output": "b\n"}


# --- error envelopes ----------------------------------------------------------------------------

@expect("script_failed_envelope_survives_replacement", S_ENVELOPE + " " + S_MIXED_ERR)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "commandExecution", "error"]
    assert recs[2]["message"] == "Error: boom" and recs[1]["status"] == "completed"


@expect("script_failed_envelope_kept_with_the_wrapper", S_ENVELOPE)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "dynamicToolCall"]
    a = tr.wrappers["w1"]
    assert not a.replace and a.script_status == "failed" and a.script_error == "Error: late"
    assert "Script error:\nError: late" in _text(recs[1])


@expect("crlf_wrapper_output_pairs_by_slot", S_ENVELOPE + " " + S_INDEX)
def _(recs, tr):
    a, b = _cmds(recs)
    assert json.loads(a["output"]) == {"output": "a\r\n"} and json.loads(b["output"]) == {"output": "b\r\n"}


# --- patches ------------------------------------------------------------------------------------

@expect("literal_patch_without_result_keeps_wrapper_and_grey_preview", S_PATCH)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "dynamicToolCall", "fileChange"]
    assert _reason(tr) == "patch_without_result"
    assert "Success. Updated" in _text(recs[1])
    fc = recs[2]
    assert fc["status"] == "unknown" and [c["path"] for c in fc["changes"]] == ["notes.txt"]


@expect("two_literal_patches_sharing_one_result_are_not_split", S_PATCHES)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "dynamicToolCall", "fileChange", "fileChange"]
    assert [r["status"] for r in recs[2:]] == ["unknown", "unknown"]
    assert all(r["output"] is None for r in recs[2:])  # the common "both applied" is not split


@expect("mixed_call_with_its_own_file_change_shows_one_card", S_MIXED_FC + " " + S_REAL_STATUS)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "commandExecution", "fileChange"]
    fc = recs[2]
    assert (fc["id"], fc["status"]) == ("exec-fc", "completed")
    assert fc["changes"][0]["path"] == "/w/notes.txt" and fc["changes"][0]["added"] == 2


@expect("mixed_call_with_failed_patch_end_shows_the_real_failure", S_MIXED_FC + " " + S_REAL_STATUS)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "commandExecution", "fileChange"]
    assert (recs[2]["id"], recs[2]["status"]) == ("exec-pe", "failed")


# --- status from receipts only --------------------------------------------------------------------

@expect("exit_zero_whose_body_says_exit_code_one", S_NO_INFER)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"], c["output"]) == ("completed", 0, "Exit code: 1\nOutput:\nnot really\n")


@expect("body_with_an_output_line_is_not_truncated", S_NO_INFER)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert c["output"] == "step 1\nOutput:\nstep 2\n"


@expect("aggregated_output_is_never_read_for_a_header", S_NO_INFER)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"], c["output"]) == ("completed", 0, "Exit code: 1\nOutput:\nall good\n")


@expect("exit_code_in_printed_data_is_not_a_status", S_NO_INFER)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"]) == ("unknown", None)


@expect("status_field_inside_promise_all_value_is_data", S_NO_INFER)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["output"]) == ("completed", '{"status":"rejected"}\n')


@expect("intercepted_apply_patch_nested_header_still_read", S_NO_INFER)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["status"], c["exitCode"], c["output"]) == ("completed", 0, "written\n")


@expect("running_words_in_a_body_start_no_process", S_NO_INFER + " " + S_POLL)
def _(recs, tr):
    notes, sleep = _cmds(recs)
    assert (notes["status"], notes["output"]) == ("completed", "Process running with session ID 9\n")
    assert (sleep["status"], sleep["output"]) == ("completed", "slept\n")


# --- compaction ---------------------------------------------------------------------------------

@expect("compactions_at_different_times_stay_separate", S_COMPACT_TIMES)
def _(recs, tr):
    comps = [r for r in recs if r["kind"] == "compaction"]
    assert [c["timeMs"] for c in comps] == [1796032800000, 1796036400000]
    assert comps[0]["summary"] == "summary one" and comps[1]["summary"] is None


@expect("facets_of_one_compaction_at_one_time_are_one_boundary", S_COMPACT_TIMES)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "assistantMessage", "compaction", "assistantMessage"]


@expect("compaction_without_summary_stays_in_place", S_COMPACT_PLACE)
def _(recs, tr):
    assert _kinds(recs) == ["userMessage", "assistantMessage", "compaction", "assistantMessage"]
    assert recs[2]["summary"] is None and recs[2]["timeSource"] == "item"


# --- late completions ------------------------------------------------------------------------------

@expect("late_completion_tied_by_process_id_updates_the_command", S_LATE)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["id"], c["status"], c["exitCode"], c["output"]) == ("exec-late", "completed", 0, "late\n")


@expect("later_item_of_another_process_is_not_tied", S_NOT_BY_ORDER + " " + S_UNIQUE)
def _(recs, tr):
    mine, other = _cmds(recs)
    assert mine["id"] == "w1#0" and mine["status"] == "unknown" and mine["processId"] == "181"
    assert (other["id"], other["output"]) == ("exec-other", "other\n")


@expect("reversed_completion_order_pairs_by_process_identity", S_SAME_NAME + " " + S_NO_SWAP)
def _(recs, tr):
    second, first = _cmds(recs)  # shown in the order they ended, as the server does (issue 32)
    assert (first["id"], first["output"], first["status"]) == ("exec-1", "first\n", "completed")
    assert (second["id"], second["output"], second["status"]) == ("exec-2", "second\n", "failed")


@expect("late_item_after_a_direct_poll_is_the_whole_output", S_LATE + " " + S_POLL)
def _(recs, tr):
    turns = transcript_to_json(tr)["turns"]
    first = [r for r in turns[0]["records"] if r["kind"] == "commandExecution"]
    # in the order they ended, as the server shows them (issue 32: tests/data/rollouts/code-all-*)
    assert [(c["id"], c["status"], c["exitCode"], c["output"]) for c in first] == [
        ("exec-now", "completed", 0, "now\n"), ("exec-late", "completed", 0, "late\n")]
    assert [r["kind"] for r in turns[1]["records"]] == ["userMessage"]  # the poll made no card


@expect("direct_command_snapshot_after_its_polls_is_the_whole_output", S_POLL + " " + S_FRAGMENT)
def _(recs, tr):
    (c,) = _cmds(recs)
    assert (c["id"], c["status"], c["exitCode"], c["output"]) == ("c1", "completed", 0, "a\nb\n")


def _case_files() -> list[str]:
    return sorted(p.name[: -len(".rollout.jsonl")] for p in CASES_DIR.glob("*.rollout.jsonl"))


def test_r_h_5_every_case_file_has_a_rule_and_there_are_at_least_40() -> None:
    assert _case_files() == sorted(EXPECT)
    assert len(EXPECT) >= 40
    assert all(rule.strip() for rule, _ in EXPECT.values())


def test_r_h_5_case_files_are_what_the_builder_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_cases", CASES_DIR / "make_cases.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, fn in mod.CASES.items():
        assert (CASES_DIR / f"{name}.rollout.jsonl").read_text() == fn().text(), name


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_r_h_5_projector_case(name: str) -> None:
    rule, check = EXPECT[name]
    recs, tr = _load(name)
    check(recs, tr)
