"""codexrt ↔ ACP mapping (``codexrt/_acp/_mapping.py``), without an event loop: events →
``session/update``s (every one checked against the pinned official schema), approvals → the
permission request and its options, prompt content → ``Runtime.send`` input, history records →
the ``session/load`` replay with recorded statuses, config options (issue 30)."""

from __future__ import annotations

from typing import Any

import pytest

from codexrt._acp import _mapping as mp
from codexrt._acp import _wire as w
from codexrt._sansio._projection._records import (AssistantMessage, CommandAction, CommandExecution, FileChange,
                                                  FileChangeEntry, McpToolCall, UserMessage, WebSearch)
from tests.sansio.test_acp_wire import _schema


def _valid(instance: Any, ref: str) -> None:
    from jsonschema import Draft202012Validator

    schema = _schema()
    v = Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{ref}"})
    errors = sorted(v.iter_errors(instance), key=str)
    assert not errors, f"{ref}: {errors[0].message} in {instance}"


def _updates(*events: tuple[str, dict[str, Any]], read: Any = None, cwd: str = "/w") -> list[dict[str, Any]]:
    m = mp.UpdateMapper(cwd=cwd, read=read)
    out = []
    for kind, payload in events:
        for u in m.updates(kind, payload):
            _valid(u, "SessionUpdate")
            out.append(u)
    return out


CMD = {"type": "commandExecution", "id": "c1", "command": "/bin/bash -lc 'cat a.py'", "cwd": "/w",
       "commandActions": [{"type": "read", "command": "cat a.py", "name": "a.py", "path": "a.py"}],
       "status": "inProgress", "aggregatedOutput": None, "exitCode": None}


def test_text_and_reasoning_deltas_become_chunks_byte_exact():
    ups = _updates(("itemUpdated", {"delta": "d1 d2 ", "stream": "item/agentMessage/delta", "deltaCount": 2}),
                   ("itemUpdated", {"delta": "hm", "stream": "item/reasoning/summaryTextDelta"}),
                   ("itemUpdated", {"delta": "out", "stream": "item/commandExecution/outputDelta"}),
                   ("error", {"error": {"message": "stream disconnected"}}))
    assert ups == [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "d1 d2 "}},
                   {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}]


@pytest.mark.parametrize("actions,kind", [
    ([{"type": "read", "path": "a"}], "read"),
    ([{"type": "search", "query": "x"}, {"type": "listFiles"}], "search"),
    ([{"type": "read", "path": "a"}, {"type": "unknown"}], "execute"),
    ([], "execute"),
])
def test_command_kind_from_actions(actions, kind):
    assert mp.command_kind(actions) == kind


def test_a_command_is_one_tool_call_then_updates():
    done = {**CMD, "status": "completed", "aggregatedOutput": "x = 1\n", "exitCode": 0}
    ups = _updates(("itemStarted", {"item": CMD}), ("itemCompleted", {"item": done}))
    assert ups[0]["sessionUpdate"] == "tool_call" and ups[0]["kind"] == "read" and ups[0]["status"] == "in_progress"
    assert ups[0]["locations"] == [{"path": "/w/a.py"}]
    assert ups[1]["sessionUpdate"] == "tool_call_update" and ups[1]["status"] == "completed"
    assert ups[1]["content"] == [{"type": "content", "content": {"type": "text", "text": "x = 1\n"}}]


def test_a_completion_without_a_start_still_announces_the_call():
    ups = _updates(("itemCompleted", {"item": {**CMD, "status": "declined"}}))
    assert [(u["sessionUpdate"], u["status"]) for u in ups] == [("tool_call", "failed")]


def test_an_edit_carries_the_whole_old_and_new_text():
    files = {"/w/a.py": "one\ntwo\nthree\n"}
    change = {"path": "/w/a.py", "kind": {"type": "update", "move_path": None},
              "diff": "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"}
    item = {"type": "fileChange", "id": "f1", "status": "inProgress",
            "changes": [change, {"path": "new.txt", "kind": {"type": "add"}, "diff": "hello\n"}]}
    ups = _updates(("itemStarted", {"item": item}), read=files.get)
    assert ups[0]["kind"] == "edit"
    assert ups[0]["content"] == [
        {"type": "diff", "path": "/w/a.py", "oldText": "one\ntwo\nthree\n", "newText": "one\nTWO\nthree\n"},
        {"type": "diff", "path": "/w/new.txt", "oldText": None, "newText": "hello\n"}]
    # applied: the file on disk is the new text; the old one is rebuilt from it
    files["/w/a.py"] = "one\nTWO\nthree\n"
    ups = _updates(("itemCompleted", {"item": {**item, "status": "completed"}}), read=files.get)
    assert ups[0]["content"][0]["oldText"] == "one\ntwo\nthree\n"
    # unreadable: the hunks stand in
    ups = _updates(("itemStarted", {"item": item}), read=lambda p: None)
    assert ups[0]["content"][0] == {"type": "diff", "path": "/w/a.py", "oldText": "one\ntwo\nthree\n",
                                    "newText": "one\nTWO\nthree\n"}


def test_mcp_calls_web_searches_plans_usage_and_titles():
    mcp = {"type": "mcpToolCall", "id": "m1", "server": "docs", "tool": "lookup", "status": "completed",
           "arguments": {"q": 1}, "result": {"content": [{"type": "text", "text": "found"}]}, "error": None}
    web = {"type": "webSearch", "id": "s1", "query": "trio nursery", "status": "inProgress"}
    ups = _updates(("itemCompleted", {"item": mcp}), ("itemStarted", {"item": web}),
                   ("todosUpdated", {"steps": [{"step": "a", "status": "completed"},
                                               {"step": "b", "status": "inProgress"},
                                               {"step": "c", "status": "pending"}]}),
                   ("nativeNotification", {"method": "thread/tokenUsage/updated", "params": {"tokenUsage": {
                       "last": {"totalTokens": 1200}, "total": {"totalTokens": 5000}, "modelContextWindow": 200000}}}),
                   ("nativeNotification", {"method": "thread/name/updated", "params": {"threadName": "Fix login"}}),
                   ("threadTitle", {"status": "saved", "title": "Fix login"}))
    assert ups[0]["title"] == "docs: lookup" and ups[0]["content"][0]["content"]["text"] == "found"
    assert ups[1]["kind"] == "fetch" and ups[1]["title"] == "Web search: trio nursery"
    assert ups[2] == {"sessionUpdate": "plan", "entries": [
        {"content": "a", "priority": "medium", "status": "completed"},
        {"content": "b", "priority": "medium", "status": "in_progress"},
        {"content": "c", "priority": "medium", "status": "pending"}]}
    assert ups[3] == {"sessionUpdate": "usage_update", "used": 1200, "size": 200000}
    assert ups[4] == {"sessionUpdate": "session_info_update", "title": "Fix login"}
    assert len(ups) == 5  # the same title again is not repeated


def test_interrupted_closes_every_open_call_failed():
    m = mp.UpdateMapper(cwd="/w")
    for u in m.updates("itemStarted", {"item": CMD}):
        m.track(u)
    assert m.open == {"c1"}
    assert m.interrupted() == [{"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed"}]
    assert m.interrupted() == []


# -- permissions -----------------------------------------------------------------------------

def test_a_command_approval_offers_four_options_and_maps_them():
    params = {"command": "rm -rf build", "cwd": "/w", "commandActions": [{"type": "unknown", "command": "rm"}],
              "availableDecisions": ["accept", "cancel"]}
    req = mp.permission_request("s1", "commandApproval", "item/commandExecution/requestApproval", params,
                                description="run command: rm -rf build", tool_call_id="c9")
    _valid(req, "RequestPermissionRequest")
    kinds = [(o["optionId"], o["kind"]) for o in req["options"]]
    assert kinds == [("allow", "allow_once"), ("allow_always", "allow_always"), ("reject", "reject_once"),
                     ("stop", "reject_once")]
    assert [mp.PERMISSION_DECISIONS[o] for o, _ in kinds] == ["accept", "acceptForSession", "decline", "cancel"]
    assert req["toolCall"]["toolCallId"] == "c9" and req["toolCall"]["kind"] == "execute"


def test_a_file_change_approval_shows_the_diff():
    params = {"changes": [{"path": "/w/n.txt", "kind": {"type": "add"}, "diff": "x\n"}]}
    req = mp.permission_request("s1", "fileChangeApproval", "item/fileChange/requestApproval", params,
                                description="apply file changes", tool_call_id="f1")
    _valid(req, "RequestPermissionRequest")
    assert req["toolCall"]["content"] == [{"type": "diff", "path": "/w/n.txt", "oldText": None, "newText": "x\n"}]


# -- prompts ---------------------------------------------------------------------------------

def _blocks(*blocks: dict[str, Any]) -> list[Any]:
    m = w.decode_message(w.encode(w.request(1, "session/prompt", {"sessionId": "s", "prompt": list(blocks)})))
    assert isinstance(m, w.Request)
    return m.params.prompt


def test_prompt_content_maps_to_send_input():
    inp = mp.prompt_input(_blocks(
        {"type": "text", "text": "explain"}, {"type": "resource_link", "name": "a.py", "uri": "file:///w/a%20b.py"},
        {"type": "resource_link", "name": "spec", "uri": "https://example.invalid/spec"},
        {"type": "resource", "resource": {"uri": "file:///w/b.py", "text": "print(1)", "mimeType": "text/x-python"}},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"}), images_ok=True)
    assert inp.text == "explain\n\n[spec](https://example.invalid/spec)"  # the embedded text is not inlined
    assert inp.files == ("/w/a b.py",)
    assert inp.additional_context == {"acp_resource_3": {"kind": "untrusted", "name": "b_py_3",
                                                         "value": "file:///w/b.py\nprint(1)"}}
    assert inp.images == ("data:image/png;base64,aGk=",)


@pytest.mark.parametrize("uri", ["file:///w/Ä b.py", "file:///", "https://x.invalid/9lives", "urn:x"])
def test_context_names_fit_the_servers_pattern(uri):
    import re

    name = mp.prompt_input(_blocks({"type": "resource", "resource": {"uri": uri, "text": "t"}}),
                           images_ok=False).additional_context["acp_resource_0"]["name"]
    assert re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name), name


@pytest.mark.parametrize("blocks,images_ok,match", [
    ([{"type": "image", "data": "aGk=", "mimeType": "image/png"}], False, "image"),
    ([{"type": "audio", "data": "aGk=", "mimeType": "audio/wav"}], True, "audio"),
    ([{"type": "resource", "resource": {"uri": "file:///x", "blob": "AAA="}}], True, "binary"),
    ([{"type": "text", "text": ""}], True, "empty"),
])
def test_prompt_content_this_agent_cannot_take(blocks, images_ok, match):
    with pytest.raises(mp.PromptError, match=match):
        mp.prompt_input(_blocks(*blocks), images_ok=images_ok)


# -- replay ----------------------------------------------------------------------------------

def test_replay_keeps_recorded_statuses_and_never_shows_a_dead_call_running():
    recs = [
        UserMessage("u1", "t", "turn1", "completed", "list files"),
        CommandExecution("c1", "t", "turn1", "completed", "ls", cwd="/w", exit_code=0, output="a.py\n",
                         actions=(CommandAction("listFiles", "ls"),)),
        CommandExecution("c2", "t", "turn1", "declined", "rm -rf /", cwd="/w"),
        CommandExecution("c3", "t", "turn1", "inProgress", "sleep 100", cwd="/w"),
        FileChange("f1", "t", "turn1", "completed", (FileChangeEntry("/w/a.py", "add", "x = 1\n", 1, 0),)),
        McpToolCall("m1", "t", "turn1", "failed", "docs", "lookup", error="boom"),
        WebSearch("s1", "t", "turn1", "completed", "trio"),
        AssistantMessage("a1", "t", "turn1", "completed", "done"),
    ]
    ups = mp.replay_updates(recs, cwd="/w")
    for u in ups:
        _valid(u, "SessionUpdate")
    assert [u["sessionUpdate"] for u in ups] == ["user_message_chunk"] + ["tool_call"] * 6 + ["agent_message_chunk"]
    assert [u.get("status") for u in ups[1:7]] == ["completed", "failed", "failed", "completed", "failed", "completed"]
    assert ups[1]["kind"] == "search" and ups[4]["content"][0]["newText"] == "x = 1\n"
    assert not [u for u in ups if u.get("status") in ("pending", "in_progress")]


# -- config options ---------------------------------------------------------------------------

def test_config_options_default_to_asking_and_change_only_by_choice():
    state = mp.ConfigState()
    opts = mp.config_options(state)
    for o in opts:
        _valid(o, "SessionConfigOption")
    assert {o["id"]: o["currentValue"] for o in opts} == {"model": "default", "reasoning_effort": "default",
                                                          "approval": "ask", "sandbox": "workspace-write"}
    assert state.settings_changes() == {"approval_policy": "untrusted", "sandbox": "workspace-write"}
    state = mp.apply_config_option(state, "approval", "never")
    state = mp.apply_config_option(state, "model", "gpt-x")
    state = mp.apply_config_option(state, "reasoning_effort", "high")
    assert state.settings_changes() == {"approval_policy": "never", "sandbox": "workspace-write", "model": "gpt-x",
                                        "effort": "high"}
    for cid, value, field in [("approval", "always", "value"), ("nope", "x", "configId"), ("sandbox", True, "value")]:
        with pytest.raises(mp.ConfigOptionError, match=field):
            mp.apply_config_option(state, cid, value)


def test_replay_rebuilds_whole_texts_from_the_files_now_walking_back():
    """Two applied updates of one file, then a declined one: each diff shows the whole file as
    it was before and after that change, rebuilt from the file's text now."""
    disk = {"/w/a.txt": "1\nB\n3\n"}
    first = FileChangeEntry("/w/a.txt", "update", "@@ -1,3 +1,3 @@\n 1\n-2\n+b\n 3\n", 1, 1)
    second = FileChangeEntry("/w/a.txt", "update", "@@ -1,3 +1,3 @@\n 1\n-b\n+B\n 3\n", 1, 1)
    refused = FileChangeEntry("/w/a.txt", "update", "@@ -1,3 +1,3 @@\n-1\n+one\n B\n 3\n", 1, 1)
    recs = [FileChange("f1", "t", "turn1", "completed", (first,)),
            FileChange("f2", "t", "turn2", "completed", (second,)),
            FileChange("f3", "t", "turn3", "declined", (refused,)),
            FileChange("f0", "t", "turn3", "completed", (FileChangeEntry("/w/new.txt", "add", "n\n", 1, 0),))]
    ups = mp.replay_updates(recs, cwd="/w", read=disk.get)
    diffs = [(u["toolCallId"], u["content"][0]["oldText"], u["content"][0]["newText"]) for u in ups]
    assert diffs == [("f1", "1\n2\n3\n", "1\nb\n3\n"), ("f2", "1\nb\n3\n", "1\nB\n3\n"),
                     ("f3", "1\nB\n3\n", "one\nB\n3\n"), ("f0", None, "n\n")]
    # a file changed outside codex since: the hunks stand in, never a wrong whole text
    disk["/w/a.txt"] = "something else\n"
    ups = mp.replay_updates(recs[:2], cwd="/w", read=disk.get)
    assert [u["content"][0]["oldText"] for u in ups] == ["1\n2\n3\n", "1\nb\n3\n"]
    assert [u["content"][0]["newText"] for u in ups] == ["1\nb\n3\n", "1\nB\n3\n"]
