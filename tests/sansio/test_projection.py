"""The display projection (R-H-4), its dedupe (R-H-1) and message counting (R-H-7).

Charter: every detail bullet of R-H-4 has a test here. Native inputs are ThreadItem JSON in
the shapes the real 0.169.0 server sends (schema + ``tests/data/rollouts/*.native.json``);
legacy inputs are rollout lines. Golden tests check that a real thread's native history and
its rollout file give the same display records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from codexrt._io._history_files import iter_rollout
from codexrt._sansio._legacy import LegacyParser
from codexrt._sansio._projection import (
    AssistantMessage,
    CommandExecution,
    CompactionBoundary,
    DynamicToolCall,
    ErrorRecord,
    FileChange,
    GenericRecord,
    ImageGeneration,
    ImageSource,
    ImageView,
    McpToolCall,
    Plan,
    Projector,
    Reasoning,
    SubAgent,
    UserMessage,
    WebSearch,
    count_messages,
    parse_apply_patch,
    project_native_item,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"
T = "turn-1"


def native(*items: dict[str, Any], turn_status: str | None = None, turn: str = T) -> list[Any]:
    p = Projector("thread-1")
    for it in items:
        p.add_native_item(turn, it)
    if turn_status:
        p.turn_status(turn, turn_status)
    return p.records()


def legacy(*lines: dict[str, Any]) -> Projector:
    p = Projector()
    parser = LegacyParser()
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    for rec in parser.feed(data) + parser.close():
        p.add_legacy_record(rec)
    return p


def ev(payload: dict[str, Any], ts: str = "2026-11-30T10:00:00.000Z") -> dict[str, Any]:
    return {"timestamp": ts, "type": "event_msg", "payload": payload}


def ri(payload: dict[str, Any], ts: str = "2026-11-30T10:00:00.000Z") -> dict[str, Any]:
    return {"timestamp": ts, "type": "response_item", "payload": payload}


META = {"timestamp": "2026-11-30T10:00:00.000Z", "type": "session_meta", "payload": {"id": "thread-L", "cwd": "/w"}}
START = ev({"type": "task_started", "turn_id": "t1", "started_at": 1796053693})


# -- golden: real rollouts ↔ real native history ---------------------------------------------


def _legacy_records(name: str) -> list[Any]:
    p = Projector()
    for rec in iter_rollout(DATA / f"{name}.rollout.jsonl"):
        p.add_legacy_record(rec)
    return p.records()


def _native(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"{name}.native.json").read_text())


def test_r_h_4_golden_paginated_rollout_equals_native_turns_list() -> None:
    nat = _native("paginated")
    p = Projector(nat["threadId"])
    for t in nat["turnsFull"]:
        p.add_native_turn(t)
    leg = _legacy_records("paginated")
    assert leg == p.records()  # `source` is not part of equality
    kinds = [r.kind for r in leg]
    assert kinds == ["userMessage", "reasoning", "assistantMessage", "userMessage", "commandExecution",
                     "assistantMessage", "userMessage", "fileChange", "assistantMessage", "userMessage",
                     "assistantMessage"]
    cmd = leg[4]
    assert (cmd.status, cmd.exit_code, cmd.output, cmd.actions[0].type) == ("completed", 0, "a.txt\nb.txt\n", "unknown")
    assert leg[3].text.startswith("list the files") and leg[3].stripped == ("ide_context",)
    fc = leg[7]
    assert (fc.changes[0].kind, fc.changes[0].added, fc.changes[0].removed) == ("add", 2, 0)
    assert {r.source for r in leg} == {"legacy"}


def test_r_h_4_golden_paginated_items_list_and_thread_read_agree() -> None:
    nat = _native("paginated")
    a = Projector(nat["threadId"])
    for t in nat["turnsFull"]:
        a.add_native_turn(t)
    b = Projector(nat["threadId"])
    b.add_native_entries(nat["itemsList"])
    c = Projector(nat["threadId"])
    for t in nat["readTurns"]:
        c.add_native_turn(t)
    d = Projector(nat["threadId"])
    for n in nat["liveCompleted"]:
        d.add_native_item(n["turnId"], n["item"])
    assert a.records() == b.records() == c.records() == d.records()


def _semantic(r: Any) -> Any:
    # Legacy-mode rollouts give user messages no id and commands without the shell wrapper.
    r = attrs.evolve(r, id="") if isinstance(r, UserMessage) else r
    return attrs.evolve(r, command="", actions=(), process_id=None, duration_ms=None) if isinstance(r, CommandExecution) else r


def test_r_h_4_golden_legacy_rollout_equals_live_items_and_fills_native_gaps() -> None:
    nat = _native("legacy")
    live = Projector(nat["threadId"])
    for n in nat["liveCompleted"]:
        live.add_native_item(n["turnId"], n["item"])
    leg = _legacy_records("legacy")
    assert [_semantic(r) for r in leg] == [_semantic(r) for r in live.records()]
    # thread/turns/list on a legacy thread lacks the command (R-H-3 "visibly lacks tools").
    hist = Projector(nat["threadId"])
    for t in nat["turnsFull"]:
        hist.add_native_turn(t)
    assert "commandExecution" not in [r.kind for r in hist.records()]
    cmd = next(r for r in leg if isinstance(r, CommandExecution))
    assert (cmd.status, cmd.exit_code, cmd.output, cmd.cwd) == ("completed", 0, "a.txt\nb.txt\n", "/TMP/work-legacy")


# -- user message ----------------------------------------------------------------------------


def test_r_h_4_user_message_images_kept_wrapper_stripped() -> None:
    [u] = native({"type": "userMessage", "id": "u1", "clientId": "c1", "content": [
        {"type": "text", "text": "# Context from my IDE setup:\n## Active file: a.py\n## My request for Codex:\nlook"},
        {"type": "image", "url": "https://x/img.png"},
        {"type": "localImage", "path": "/tmp/s.png"},
        {"type": "image", "url": "data:image/png;base64,QUJD"},
    ]})
    assert u.text == "look" and u.client_id == "c1" and u.thread_id == "thread-1" and u.turn_id == T
    assert u.images == (ImageSource("url", "https://x/img.png"), ImageSource("path", "/tmp/s.png"),
                        ImageSource("data", "QUJD", "image/png"))


def test_r_h_4_attachment_wrapper_and_apps_tag_stripped_from_user_only_never_assistant() -> None:
    wrapper = "# Files mentioned by the user:\n## a.png: /p/a.png\n## My request for Codex:\nfix it"
    tag = '<external_codex_apps_open_page>{"page_id":null}</external_codex_apps_open_page>'
    u, a = native(
        {"type": "userMessage", "id": "u", "content": [{"type": "text", "text": tag + wrapper}]},
        {"type": "agentMessage", "id": "a", "text": tag + wrapper},
    )
    assert u.text == "fix it" and u.file_mentions[0].path == "/p/a.png"
    assert a.text == tag + wrapper


def test_r_h_4_legacy_user_text_from_event_copy_with_images() -> None:
    p = legacy(META, START,
               ri({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]}),
               ri({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"},
                                                                  {"type": "input_image", "image_url": "data:image/jpeg;base64,AA"}]}),
               ev({"type": "user_message", "message": "hello", "images": ["data:image/jpeg;base64,AA"],
                   "local_images": ["/tmp/l.png"]}))
    [u] = p.records()
    assert u.text == "hello" and u.thread_id == "thread-L" and u.turn_id == "t1"
    assert u.images == (ImageSource("data", "AA", "image/jpeg"), ImageSource("path", "/tmp/l.png"))


def test_r_h_4_legacy_response_copy_used_when_no_event_copy() -> None:
    p = legacy(META, START,
               ri({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions\n…"}]}),
               ri({"type": "message", "role": "user", "id": "m1", "content": [{"type": "input_text", "text": "old style"}]}),
               ri({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}))
    assert [(r.kind, r.text) for r in p.records()] == [("userMessage", "old style"), ("assistantMessage", "ok")]


# -- assistant text --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [
    {"text": "hi there"},
    {"content": [{"type": "output_text", "text": "hi "}, {"type": "output_text", "text": "there"}]},
    {"content": "hi there"},
    {"content": [{"type": "Text", "text": "hi there"}]},
])
def test_r_h_4_assistant_text_shapes_share_one_projection(shape: dict[str, Any]) -> None:
    [a] = native({"type": "agentMessage", "id": "a1", **shape})
    assert a == AssistantMessage(id="a1", thread_id="thread-1", turn_id=T, status="completed", text="hi there")


def test_r_h_4_legacy_assistant_event_copy_hidden_when_response_copy_exists() -> None:
    p = legacy(META, START, ev({"type": "agent_message", "message": "ok"}),
               ri({"type": "message", "role": "assistant", "id": "msg_1", "content": [{"type": "output_text", "text": "ok"}]}))
    assert [(r.id, r.text) for r in p.records()] == [("msg_1", "ok")]
    only_event = legacy(META, START, ev({"type": "agent_message", "message": "from event"}))
    assert [r.text for r in only_event.records()] == ["from event"]


# -- reasoning -------------------------------------------------------------------------------


def test_r_h_4_reasoning_plain_vs_encrypted_never_ciphertext() -> None:
    plain, enc = native({"type": "reasoning", "id": "r1", "summary": ["**Plan**"], "content": ["raw"]},
                        {"type": "reasoning", "id": "r2", "summary": [], "content": []})
    assert (plain.state, plain.summary, plain.content) == ("plain", ("**Plan**",), ("raw",))
    assert enc.state == "encrypted"
    p = legacy(META, START, ri({"type": "reasoning", "id": "rs", "summary": [], "content": None,
                                "encrypted_content": "gAAAASECRET"}))
    [r] = p.records()
    assert r.state == "encrypted" and "gAAAASECRET" not in repr(r)


# -- command execution -----------------------------------------------------------------------

CMD = {"type": "commandExecution", "id": "c1", "command": "/bin/bash -lc 'cat a'", "cwd": "/w",
       "commandActions": [{"type": "read", "command": "cat a", "name": "a", "path": "/w/a"}],
       "status": "completed", "exitCode": 0, "aggregatedOutput": "x\n", "durationMs": 5, "processId": "9"}


def test_r_h_4_command_fields_and_actions() -> None:
    [c] = native(CMD)
    assert (c.command, c.cwd, c.status, c.exit_code, c.output, c.duration_ms) == (
        "/bin/bash -lc 'cat a'", "/w", "completed", 0, "x\n", 5)
    assert c.actions[0].type == "read" and c.actions[0].path == "/w/a"
    assert c.approval_reason is None and c.description is None


def test_r_h_4_command_missing_status_is_unknown_and_description_kept() -> None:
    item = {k: v for k, v in CMD.items() if k != "status"}
    [c] = native({**item, "description": "Show a", "reason": "needs network"})
    assert c.status == "unknown" and c.description == "Show a" and c.approval_reason == "needs network"


def test_r_h_4_legacy_command_justification_is_approval_reason_and_parsed_cmd_actions() -> None:
    p = legacy(META, START,
               ri({"type": "function_call", "name": "shell", "call_id": "k1",
                   "arguments": json.dumps({"command": ["bash", "-lc", "ls"], "workdir": "/w", "justification": "why"})}),
               ev({"type": "exec_command_end", "call_id": "k1", "exit_code": 2, "aggregated_output": "err",
                   "parsed_cmd": [{"type": "list_files", "cmd": "ls", "path": None}]}))
    [c] = p.records()
    assert (c.status, c.exit_code, c.output, c.approval_reason) == ("failed", 2, "err", "why")
    assert c.actions[0].type == "listFiles" and c.command == "bash -lc ls"


def test_r_h_4_output_fragments_never_finish_a_command() -> None:
    p = Projector("th")
    started = {**CMD, "status": "inProgress", "exitCode": None, "aggregatedOutput": None}
    p.add_native_item(T, started, completed=False)
    p.add_delta(T, "c1", "partial out", field="output")
    [c] = p.records()
    assert c.status == "inProgress" and c.output == "partial out" and c.exit_code is None
    # legacy: a "still running" receipt is not a finish either
    lp = legacy(META, START,
                ri({"type": "function_call", "name": "exec_command", "call_id": "k", "arguments": '{"cmd":"sleep 9"}'}),
                ri({"type": "function_call_output", "call_id": "k",
                    "output": "Chunk ID: 1\nWall time: 1.0 seconds\nProcess running with session ID 7\nOutput:\nzz"}))
    [lc] = lp.records()
    # not finished — and since the file ends inside the turn, not live either (issue 32)
    assert lc.status == "unknown" and lc.output == "zz" and lc.exit_code is None


def test_r_h_4_completed_snapshot_wins_over_deltas_and_late_started_copy() -> None:
    p = Projector("th")
    p.add_native_item(T, {"type": "agentMessage", "id": "a", "text": ""}, completed=False)
    p.add_delta(T, "a", "Hel")
    p.add_delta(T, "a", "lo wrld")
    p.add_native_item(T, {"type": "agentMessage", "id": "a", "text": "Hello world"})
    p.add_delta(T, "a", " LATE")
    p.add_native_item(T, {"type": "agentMessage", "id": "a", "text": ""}, completed=False)
    [a] = p.records()
    assert (a.text, a.status) == ("Hello world", "completed")


# -- interrupted / failed turns --------------------------------------------------------------


def test_r_h_4_open_items_closed_by_interrupted_turn_only_that_turn() -> None:
    p = Projector("th")
    p.add_native_item("t1", {**CMD, "status": "inProgress"}, completed=False)
    p.add_native_item("t1", {"type": "agentMessage", "id": "a1", "text": ""}, completed=False)
    p.add_delta("t1", "a1", "partial")
    p.add_native_item("t1", {**CMD, "id": "done"})
    p.turn_status("t1", "interrupted")
    p.add_native_item("t2", {**CMD, "id": "c2", "status": "inProgress"}, completed=False)
    p.turn_status("t2", "inProgress")
    recs = {r.id: r for r in p.records()}
    assert recs["c1"].status == "interrupted" and recs["a1"].status == "interrupted"
    assert recs["a1"].text == "partial"
    assert recs["done"].status == "completed"
    assert recs["c2"].status == "inProgress"


def test_r_h_4_failed_turn_closes_items_and_shows_its_error() -> None:
    p = Projector("th")
    p.add_native_item(T, {**CMD, "status": "inProgress"}, completed=False)
    p.turn_status(T, "failed", error={"message": "stream disconnected", "codexErrorInfo": "other"})
    c, e = p.records()
    assert c.status == "failed"
    assert isinstance(e, ErrorRecord) and e.message == "stream disconnected" and e.info == "other"


def test_r_h_4_legacy_aborted_turn_closes_calls_without_output() -> None:
    p = legacy(META, START,
               ri({"type": "function_call", "name": "exec_command", "call_id": "k", "arguments": '{"cmd":"sleep 9"}'}),
               ev({"type": "turn_aborted", "turn_id": "t1", "reason": "interrupted"}),
               ev({"type": "task_started", "turn_id": "t2"}),
               ri({"type": "function_call", "name": "exec_command", "call_id": "k2", "arguments": '{"cmd":"ls"}'}),
               ev({"type": "task_complete", "turn_id": "t2"}))
    g1, g2 = p.turns()
    assert (g1.status, g1.records[0].status) == ("interrupted", "interrupted")
    assert (g2.status, g2.records[0].status) == ("completed", "unknown")  # never guessed


def test_r_h_4_legacy_turn_without_terminal_is_unknown_not_guessed() -> None:
    p = legacy(META, {"timestamp": "t", "type": "turn_context", "payload": {"turn_id": "tx", "cwd": "/w"}},
               ev({"type": "user_message", "message": "hi"}))
    [g] = p.turns()
    assert g.status == "unknown" and g.records[0].turn_id == "tx"


# -- file change -----------------------------------------------------------------------------


def test_r_h_4_file_change_all_files_counts_kinds_real_status() -> None:
    [f] = native({"type": "fileChange", "id": "f", "status": "declined", "changes": [
        {"path": "a", "kind": {"type": "add"}, "diff": "1\n2\n3\n"},
        {"path": "b", "kind": {"type": "delete"}, "diff": "x\ny\n"},
        {"path": "c", "kind": {"type": "update", "move_path": None}, "diff": "@@ -1,2 +1,2 @@\n-old\n+new\n ctx\n"},
        {"path": "d", "kind": {"type": "update", "move_path": "e"}, "diff": "--- a/d\n+++ b/e\n+z\n"},
    ]})
    assert f.status == "declined"
    assert [(c.path, c.kind, c.added, c.removed, c.move_path) for c in f.changes] == [
        ("a", "add", 3, 0, None), ("b", "delete", 0, 2, None), ("c", "update", 1, 1, None), ("d", "move", 1, 0, "e")]
    assert f.changes[2].diff.startswith("@@")  # a hunk stays a hunk, never a whole file


def test_r_h_4_file_change_missing_status_unknown() -> None:
    [f] = native({"type": "fileChange", "id": "f", "changes": []})
    assert f.status == "unknown"


def test_r_h_4_legacy_apply_patch_custom_tool_counts_and_status_from_patch_apply_end() -> None:
    patch = ("*** Begin Patch\n*** Add File: n.txt\n+a\n+b\n*** Update File: m.py\n*** Move to: k.py\n@@\n-x\n+y\n+z\n"
             "*** Delete File: gone.txt\n*** End Patch")
    p = legacy(META, START, ri({"type": "custom_tool_call", "name": "apply_patch", "call_id": "p1", "input": patch}))
    [f] = p.records()
    assert f.status == "unknown"
    assert [(c.path, c.kind, c.added, c.removed, c.move_path) for c in f.changes] == [
        ("n.txt", "add", 2, 0, None), ("m.py", "move", 2, 1, "k.py"), ("gone.txt", "delete", 0, 0, None)]
    p2 = legacy(META, START, ri({"type": "custom_tool_call", "name": "apply_patch", "call_id": "p1", "input": patch}),
                ev({"type": "patch_apply_end", "call_id": "p1", "success": False, "stderr": "boom",
                    "changes": {"n.txt": {"type": "add", "content": "a\nb\n"}}}))
    [f2] = p2.records()
    assert f2.status == "failed" and f2.output == "boom"
    assert parse_apply_patch("no patch here") == ()


# -- tools -----------------------------------------------------------------------------------


def test_r_h_4_dynamic_tool_keeps_namespace_args_success_false_is_failed() -> None:
    ok, bad, running = native(
        {"type": "dynamicToolCall", "id": "d1", "namespace": "ns", "tool": "t", "arguments": {"a": 1},
         "status": "completed", "success": True, "contentItems": [{"type": "inputText", "text": "r"},
                                                                  {"type": "inputImage", "imageUrl": "https://i"}]},
        {"type": "dynamicToolCall", "id": "d2", "tool": "t", "arguments": {}, "status": "completed", "success": False},
        {"type": "dynamicToolCall", "id": "d3", "tool": "t", "arguments": {}, "status": "inProgress"},
    )
    assert (ok.namespace, ok.tool, ok.arguments, ok.status) == ("ns", "t", {"a": 1}, "completed")
    assert ok.content[0].text == "r" and ok.content[1].image == ImageSource("url", "https://i")
    assert bad.status == "failed" and running.status == "inProgress"


def test_r_h_4_mcp_content_blocks_images_structured_content_and_empty_result() -> None:
    full, empty, err = native(
        {"type": "mcpToolCall", "id": "m1", "server": "s", "tool": "t", "arguments": {}, "status": "completed",
         "result": {"content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "QUJD", "mimeType": "image/png"},
                                {"type": "resource", "resource": {"uri": "x"}}],
                    "structuredContent": {"k": [1]}}},
        {"type": "mcpToolCall", "id": "m2", "server": "s", "tool": "t", "arguments": {}, "status": "completed",
         "result": {"content": []}},
        {"type": "mcpToolCall", "id": "m3", "server": "s", "tool": "t", "arguments": {}, "status": "failed",
         "error": {"message": "nope"}},
    )
    assert [b.type for b in full.content] == ["text", "image", "resource"]
    assert full.content[1].image == ImageSource("data", "QUJD", "image/png")
    assert full.structured_content == {"k": [1]} and full.content[2].raw["resource"] == {"uri": "x"}
    assert empty.status == "completed" and empty.content == ()
    assert (err.status, err.error) == ("failed", "nope")


def test_r_h_4_legacy_mcp_end_replaces_generic_call() -> None:
    p = legacy(META, START,
               ri({"type": "function_call", "name": "srv__tool", "call_id": "m", "arguments": "{}"}),
               ev({"type": "mcp_tool_call_end", "call_id": "m", "invocation": {"server": "srv", "tool": "tool", "arguments": {}},
                   "result": {"Ok": {"content": [{"type": "image", "data": "AA", "mimeType": "image/gif"}],
                                     "structuredContent": None}}}))
    [m] = p.records()
    assert isinstance(m, McpToolCall) and m.status == "completed" and m.content[0].image.mime_type == "image/gif"


def test_r_h_4_web_search_image_view_image_generation_plan() -> None:
    ws, iv, ig, igf, pl = native(
        {"type": "webSearch", "id": "w", "query": "trio", "action": {"type": "search", "query": "trio"}},
        {"type": "imageView", "id": "v", "path": "/p.png"},
        {"type": "imageGeneration", "id": "g", "status": "completed", "savedPath": "/o.png", "revisedPrompt": "cat"},
        {"type": "imageGeneration", "id": "g2", "status": "failed",
         "failure": {"type": "usageLimitExceeded", "limitId": "x"}},
        {"type": "plan", "id": "p", "text": "1. do"},
    )
    assert isinstance(ws, WebSearch) and ws.query == "trio" and ws.status == "completed"
    assert isinstance(iv, ImageView) and iv.status == "completed"  # empty terminal completes
    assert isinstance(ig, ImageGeneration) and ig.image == ImageSource("path", "/o.png") and ig.revised_prompt == "cat"
    assert igf.status == "failed" and igf.failure["type"] == "usageLimitExceeded"
    assert isinstance(pl, Plan) and pl.text == "1. do"
    started = project_native_item({"type": "webSearch", "id": "w", "query": "q"}, thread_id=None, turn_id=T,
                                  completed=False)
    assert started.status == "inProgress"


def test_r_h_4_legacy_update_plan_view_image_and_write_stdin_polling() -> None:
    p = legacy(META, START,
               ri({"type": "function_call", "name": "update_plan", "call_id": "u",
                   "arguments": json.dumps({"plan": [{"step": "a", "status": "completed"}], "explanation": "e"})}),
               ri({"type": "function_call", "name": "view_image", "call_id": "v", "arguments": '{"path":"/i.png"}'}),
               ri({"type": "function_call_output", "call_id": "v", "output": "attached"}),
               ri({"type": "function_call", "name": "write_stdin", "call_id": "w", "arguments": '{"session_id":1,"chars":""}'}),
               ri({"type": "function_call_output", "call_id": "w", "output": "polled"}))
    pl, iv = p.records()
    assert pl.steps[0].step == "a" and pl.explanation == "e"
    assert (iv.path, iv.status) == ("/i.png", "completed")


def test_r_h_4_sub_agent_keeps_real_child_thread_ids() -> None:
    call, act = native(
        {"type": "collabAgentToolCall", "id": "s", "tool": "spawnAgent", "status": "completed", "senderThreadId": "thread-1",
         "receiverThreadIds": ["child-1"], "prompt": "go", "agentsStates": {"child-1": {"status": "running"}}},
        {"type": "subAgentActivity", "id": "sa", "kind": "started", "agentThreadId": "child-2", "agentPath": "/root/x"},
    )
    assert isinstance(call, SubAgent) and call.child_thread_ids == ("child-1",) and call.agent_states == (("child-1", "running"),)
    assert act.child_thread_ids == ("child-2",) and act.activity == "started"


def test_r_h_4_unknown_item_kept_generic() -> None:
    [g] = native({"type": "hologram", "id": "h", "x": 1})
    assert isinstance(g, GenericRecord) and g.item_type == "hologram" and g.raw["x"] == 1


# -- compaction ------------------------------------------------------------------------------


def test_r_h_4_compaction_time_sources_and_trigger_never_guessed() -> None:
    p = Projector("th")
    p.add_native_item("t1", {"type": "contextCompaction", "id": "c1"}, completed_at_ms=5000)
    p.add_native_item("t2", {"type": "contextCompaction", "id": "c2"})
    p.turn_status("t2", "completed", started_at=7, completed_at=9)
    p.add_native_item("t3", {"type": "contextCompaction", "id": "c3"}, received_at_ms=12345)
    p.add_native_item("t4", {"type": "contextCompaction", "id": "c4"})
    c1, c2, c3, c4 = p.records()
    assert (c1.time_ms, c1.time_source) == (5000, "item")
    assert (c2.time_ms, c2.time_source) == (7000, "turn")
    assert (c3.time_ms, c3.time_source) == (12345, "recorded")
    assert (c4.time_ms, c4.time_source) == (None, "unknown")
    assert {c.trigger for c in (c1, c2, c3, c4)} == {None}


def test_r_h_4_legacy_compaction_kept_in_place_facets_merged_distinct_compactions_not() -> None:
    p = legacy(META, START, ev({"type": "user_message", "message": "a"}),
               {"timestamp": "2026-11-30T10:00:01.000Z", "type": "compacted", "payload": {"message": "", "replacement_history": []}},
               ev({"type": "context_compacted"}, ts="2026-11-30T10:00:01.002Z"),
               ri({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "b"}]}),
               {"timestamp": "2026-11-30T10:00:05.000Z", "type": "compacted", "payload": {"message": "sum"}},
               {"timestamp": "2026-11-30T10:00:09.000Z", "type": "compacted", "payload": {"message": ""}})
    kinds = [r.kind for r in p.records()]
    assert kinds == ["userMessage", "compaction", "assistantMessage", "compaction", "compaction"]
    comps = [r for r in p.records() if isinstance(r, CompactionBoundary)]
    assert [c.time_source for c in comps] == ["item"] * 3
    assert comps[0].time_ms != comps[1].time_ms != comps[2].time_ms and comps[1].summary == "sum"


# -- dedupe / paging (R-H-1) -----------------------------------------------------------------


def test_r_h_1_overlapping_pages_upsert_never_duplicate_and_keep_order() -> None:
    u = {"type": "userMessage", "id": "u", "content": [{"type": "text", "text": "q"}]}
    r = {"type": "reasoning", "id": "r", "summary": ["s"], "content": []}
    c = {**CMD, "id": "c"}
    a = {"type": "agentMessage", "id": "a", "text": "done"}
    p = Projector("th")
    p.add_native_turn({"id": T, "status": "completed", "items": [u, a], "itemsView": "summary"})  # summary page
    p.add_native_entries([{"turnId": T, "item": r}, {"turnId": T, "item": c}, {"turnId": T, "item": a}])  # page 2
    p.add_native_entries([{"turnId": T, "item": u}, {"turnId": T, "item": r}])  # overlap
    assert [x.id for x in p.records()] == ["u", "r", "c", "a"]


def test_r_h_1_descending_turn_pages_prepend_keeps_chronological_order() -> None:
    p = Projector("th")
    for tid in ("t3", "t2"):
        p.add_native_turn({"id": tid, "status": "completed", "items": [{"type": "agentMessage", "id": tid, "text": tid}]}, prepend=True)
    p.add_native_turn({"id": "t2", "status": "completed", "items": []}, prepend=True)  # overlap
    p.add_native_turn({"id": "t1", "status": "completed", "items": [{"type": "agentMessage", "id": "t1", "text": "t1"}]}, prepend=True)
    assert [g.turn_id for g in p.turns()] == ["t1", "t2", "t3"]


def test_r_h_1_client_id_reconciles_a_differently_keyed_copy() -> None:
    p = Projector("th")
    p.add_native_item(T, {"type": "userMessage", "id": "local-1", "clientId": "cm", "content": [{"type": "text", "text": "x"}]})
    p.add_native_item(T, {"type": "agentMessage", "id": "a", "text": "y"})
    p.add_native_item(T, {"type": "userMessage", "id": "native-9", "clientId": "cm", "content": [{"type": "text", "text": "x"}]})
    assert [r.id for r in p.records()] == ["native-9", "a"]


def test_r_h_1_client_id_rekey_of_an_id_listed_twice_rekeys_every_listing() -> None:
    """A page listing one user message twice before any known id (one listing since R-H-1's
    fix; it was listed twice), then another id with the same ``clientId``: the re-key renames
    it, and ``records()`` does not raise (a listing left behind raised ``KeyError``; found in
    review)."""
    um = {"type": "userMessage", "id": "i0", "clientId": "c1", "content": []}
    p = Projector("th")
    p.add_native_entries([{"turnId": "t", "item": um}, {"turnId": "t", "item": dict(um)}])
    p.add_native_entries([{"turnId": "t", "item": {**um, "id": "i1"}}])
    assert [r.id for r in p.records()] == ["i1"]


def test_r_h_4_redact_hook_applies_to_display_text() -> None:
    p = Projector("th", redact=lambda s: s.replace("hunter2", "******"))
    p.add_native_item(T, {"type": "userMessage", "id": "u", "content": [{"type": "text", "text": "pw hunter2"}]})
    p.add_native_item(T, {**CMD, "aggregatedOutput": "hunter2\n", "command": "echo hunter2"})
    u, c = p.records()
    assert u.text == "pw ******" and c.output == "******\n" and c.command == "echo ******"


# -- counting (R-H-7) ------------------------------------------------------------------------


def test_r_h_7_count_messages_user_and_assistant_only() -> None:
    recs = _legacy_records("paginated")
    assert count_messages(recs) == 8  # 4 user + 4 assistant; reasoning/command/file change excluded
    assert count_messages([]) == 0
    assert count_messages(r for r in recs if isinstance(r, (Reasoning, CommandExecution, FileChange, DynamicToolCall))) == 0
