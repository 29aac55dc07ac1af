"""R-H-3 source choice by recovered call identity: the legacy transcript wins only when the
native projection misses calls, plaintext reasoning or pre-compaction turns the rollout
identifies — never because the rollout has more records.

Seed (历史显示与目录来源 / 边界行为补充): "在 inactive、CLI/传输不可用，或原生投影遗漏工具、明文思考及
compact 前记录时，选择整个 legacy 只读 transcript" and "历史来源选择按已恢复的具体调用身份判断，额外 exec
数量不能覆盖完整投影。"
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from codexrt._features._history import Transcript, load_rollout_transcript, missing_identities
from codexrt._sansio._projection import Projector

_spec = importlib.util.spec_from_file_location(
    "projector_cases_rollout", Path(__file__).resolve().parents[1] / "data" / "projector_cases" / "rollout.py")
assert _spec is not None and _spec.loader is not None
_rollout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rollout)
unified = _rollout.unified
TID = "0190cccc-0000-7000-8000-000000000001"


def native(turns: dict[str, list[dict[str, Any]]]) -> Transcript:
    p = Projector(TID)
    for tid, items in turns.items():
        p.add_native_turn({"id": tid, "status": "completed", "items": items})
    return Transcript(thread_id=TID, source="native", turns=tuple(p.turns()), pagination="fullRead")


def legacy(tmp_path: Path, r: Any) -> Transcript:
    path = tmp_path / "r.jsonl"
    path.write_text(r.text())
    return load_rollout_transcript(path)


def ncmd(iid: str, command: str) -> dict[str, Any]:
    return {"type": "commandExecution", "id": iid, "command": command, "cwd": "/w", "status": "completed",
            "exitCode": 0, "aggregatedOutput": "ok\n", "commandActions": []}


def nuser(iid: str, text: str) -> dict[str, Any]:
    return {"type": "userMessage", "id": iid, "content": [{"type": "text", "text": text}]}


def two_commands() -> Any:
    r = _rollout.Rollout(TID).start("t1").user("go")
    r.call("c1", "exec_command", {"cmd": "ls"}).out("c1", unified("a\n", code=0))
    r.call("c2", "exec_command", {"cmd": "pwd"}).out("c2", unified("/w\n", code=0))
    return r.end()


def test_r_h_3_native_missing_an_identified_call_loses_to_the_rollout(tmp_path):
    leg = legacy(tmp_path, two_commands())
    nat = native({"t1": [nuser("u1", "go"), ncmd("c1", "ls")]})
    assert missing_identities(nat, leg) == ["tool c2"]


def test_r_h_3_extra_legacy_records_never_override_a_complete_projection(tmp_path):
    # The rollout has more tool records (a call without a call id, a wrapper kept whole beside
    # its nested items) but every identified call is in the native projection.
    r = two_commands()
    r.start("t2").user("again")
    r._line("response_item", {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "id"}',
                              "internal_chat_message_metadata_passthrough": {"turn_id": "t2"}})
    r.end()
    leg = legacy(tmp_path, r)
    assert sum(x.kind == "commandExecution" for x in leg.records()) == 3
    nat = native({"t1": [nuser("u1", "go"), ncmd("c1", "ls"), ncmd("c2", "pwd")], "t2": [nuser("u2", "again")]})
    assert missing_identities(nat, leg) == []


def test_r_h_3_more_native_records_do_not_hide_a_missing_call(tmp_path):
    leg = legacy(tmp_path, two_commands())
    nat = native({"t1": [nuser("u1", "go"), ncmd("c1", "ls"), ncmd("x1", "a"), ncmd("x2", "b"), ncmd("x3", "c")]})
    assert missing_identities(nat, leg) == ["tool c2"]


def test_r_h_3_plaintext_reasoning_only_in_the_rollout_wins(tmp_path):
    r = _rollout.Rollout(TID).start("t1").user("think").reasoning("rs1", "**Plan** it").say("done", "m1").end()
    leg = legacy(tmp_path, r)
    nat_encrypted = native({"t1": [nuser("u1", "think"), {"type": "reasoning", "id": "rs1", "summary": [],
                                                           "content": []}, {"type": "agentMessage", "id": "m1",
                                                                            "text": "done"}]})
    assert missing_identities(nat_encrypted, leg) == ["reasoning t1"]
    nat_plain = native({"t1": [nuser("u1", "think"), {"type": "reasoning", "id": "rs1", "summary": ["**Plan** it"],
                                                      "content": []}, {"type": "agentMessage", "id": "m1",
                                                                       "text": "done"}]})
    assert missing_identities(nat_plain, leg) == []


def test_r_h_3_pre_compaction_turn_missing_natively_wins(tmp_path):
    r = _rollout.Rollout(TID).start("t0").user("early").say("early answer", "m0").end()
    r.start("t1").user("later").compacted("sum", "2026-11-30T10:00:00.000Z").say("after", "m1").end()
    leg = legacy(tmp_path, r)
    nat = native({"t1": [nuser("u1", "later"), {"type": "agentMessage", "id": "m1", "text": "after"}]})
    assert missing_identities(nat, leg) == ["turn t0"]
    full = native({"t0": [nuser("u0", "early")], "t1": [nuser("u1", "later")]})
    assert missing_identities(full, leg) == []


def test_r_h_3_replaced_wrapper_records_count_by_the_wrapper_call_id(tmp_path):
    r = _rollout.Rollout(TID).start("t1").user("batch")
    r.wrapper("w1", 'const r = await Promise.all([tools.exec_command({cmd: "echo a"})]);\n'
                    "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));")
    r.wrapper_out("w1", ['Result 0: {"output":"a\\n"}']).end()
    leg = legacy(tmp_path, r)
    assert [x.id for x in leg.records() if x.kind == "commandExecution"] == ["w1#0"]
    assert missing_identities(native({"t1": [nuser("u1", "batch")]}), leg) == ["tool w1"]
    with_wrapper = native({"t1": [nuser("u1", "batch"), {"type": "dynamicToolCall", "id": "w1", "tool": "exec",
                                                         "arguments": {}, "status": "completed"}]})
    assert missing_identities(with_wrapper, leg) == []
