"""Helper requests against the scripted fake peer (R-HLP-1, R-HLP-2).

Every helper child is an in-memory peer; ``peer.finished`` proves the child was closed and its
end awaited, and ``peer.received`` proves what the helper wrote (ephemeral read-only thread,
refusals, never an acceptance). Timing on ``autojump_clock``.
"""

from __future__ import annotations

import pytest
import trio

from codexrt import ConfigError, OperationFailed, RuntimeConfig
from codexrt._features._helpers import enhance_prompt, generate_commit_message, generate_title, run_helper


def _cfg(peers, *scenarios):
    return RuntimeConfig(transports=[peers.factory(s) for s in scenarios])


def _text(text):
    return {"name": "helper-text", "defaults": True, "settings": {"text": text, "deltas": 2}}


TURN_START = {"method": "turn/start"}

PREVIEW_THEN_FINAL = {
    "name": "preview-then-final",
    "defaults": True,
    "rules": [{"match": TURN_START, "actions": [
        {"turn_response": True}, {"turn_started": True},
        {"notify": "item/agentMessage/delta", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                                         "itemId": "m1", "delta": "draft that must not win"}},
        {"notify": "item/completed", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                                "item": {"type": "agentMessage", "id": "m1", "text": "Final answer"}}},
        {"end_turn": "completed"},
    ]}],
}

INTERACTIVE = {
    "name": "helper-interactive",
    "defaults": True,
    "rules": [
        {"match": TURN_START, "actions": [
            {"turn_response": True}, {"turn_started": True},
            {"request": "item/commandExecution/requestApproval",
             "params": {"threadId": "$thread_id", "turnId": "$turn_id", "itemId": "c1", "command": "rm -rf /"}},
            {"request": "item/fileChange/requestApproval",
             "params": {"threadId": "$thread_id", "turnId": "$turn_id", "itemId": "f1"}},
            {"request": "mcpServer/elicitation/request", "params": {"threadId": "$thread_id", "serverName": "s"}},
            {"request": "item/tool/requestUserInput",
             "params": {"threadId": "$thread_id", "turnId": "$turn_id", "itemId": "q1", "questions": []}},
            {"request": "account/chatgptAuthTokens/refresh", "params": {}},
        ]},
        {"match": {"reply_to": 4}, "actions": [{"agent_message": "Done anyway"}, {"end_turn": "completed"}]},
    ],
}

FAILED_TURN = {
    "name": "helper-failed",
    "defaults": True,
    "rules": [{"match": TURN_START, "actions": [
        {"turn_response": True}, {"turn_started": True},
        {"agent_message": "partial", "complete": False},
        # (``end_turn`` + ``error`` trips the fake's action-kind check, so the error goes separately)
        {"notify": "error", "params": {"threadId": "$thread_id", "turnId": "$turn_id",
                                       "error": {"message": "model exploded"}, "willRetry": False}},
        {"end_turn": "failed"},
    ]}],
}

INTERRUPTED_TURN = {
    "name": "helper-interrupted",
    "defaults": True,
    "rules": [{"match": TURN_START, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"end_turn": "interrupted"}]}],
}

EMPTY_ANSWER = {
    "name": "helper-empty",
    "defaults": True,
    "rules": [{"match": TURN_START, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"agent_message": "   "}, {"end_turn": "completed"}]}],
}

EXIT_MID_TURN = {
    "name": "helper-exit",
    "defaults": True,
    "rules": [{"match": TURN_START, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"exit": 1}]}],
}


def _all_finished(peers):
    return all(p.finished.is_set() for p in peers.peers)


async def test_r_hlp_1_ephemeral_read_only_never_thread_on_its_own_child(peers):
    res = await run_helper(_cfg(peers, "handshake-ok"), "hello?", kind="t", cwd="/tmp/ws")
    assert res.text == "Hello from the fake peer." and res.thread_id and res.turn_id
    assert len(peers.peers) == 1 and _all_finished(peers)
    (ts,) = peers.received(0, "thread/start")
    assert ts["params"] == {"ephemeral": True, "sandbox": "read-only", "approvalPolicy": "never",
                            "approvalsReviewer": "user", "cwd": "/tmp/ws"}
    (tt,) = peers.received(0, "turn/start")
    assert tt["params"]["sandboxPolicy"] == {"type": "readOnly"}
    assert tt["params"]["approvalPolicy"] == "never" and tt["params"]["approvalsReviewer"] == "user"
    assert tt["params"]["input"] == [{"type": "text", "text": "hello?", "text_elements": []}]
    methods = [m.get("method") for m in peers.received(0) if "method" in m]
    assert "thread/resume" not in methods  # helpers never resume a chat thread


async def test_r_hlp_2_final_answer_replaces_the_preview(peers):
    res = await run_helper(_cfg(peers, PREVIEW_THEN_FINAL), "q")
    assert res.text == "Final answer"


async def test_r_hlp_1_every_interactive_request_is_refused_never_accepted(peers):
    res = await run_helper(_cfg(peers, INTERACTIVE), "q")
    assert res.text == "Done anyway"
    replies = {m["id"]: m for m in peers.received(0) if "method" not in m and "id" in m}
    assert replies[0]["result"] == {"decision": "decline"}
    assert replies[1]["result"] == {"decision": "decline"}
    assert replies[2]["result"] == {"action": "cancel", "content": None}
    assert "error" in replies[3]  # user input: refused with an error, never answered
    assert replies[4]["error"]["code"] == -32601  # not an interactive request: unsupported
    assert not any("accept" in str(r.get("result")) for r in replies.values())
    assert set(res.refused) == {"item/commandExecution/requestApproval", "item/fileChange/requestApproval",
                                "mcpServer/elicitation/request", "item/tool/requestUserInput"}
    assert _all_finished(peers)


@pytest.mark.parametrize("scenario,code", [(FAILED_TURN, "HELPER_FAILED"), (INTERRUPTED_TURN, "HELPER_INTERRUPTED"),
                                           (EMPTY_ANSWER, "HELPER_EMPTY"), (EXIT_MID_TURN, "HELPER_FAILED"),
                                           ("turn-start-error", "HELPER_FAILED")])
async def test_r_hlp_2_only_a_completed_turn_succeeds_and_the_child_is_reaped(peers, scenario, code):
    with pytest.raises(OperationFailed) as info:
        await run_helper(_cfg(peers, scenario), "q", kind="commitMessage")
    assert info.value.code == code and info.value.details["helper"] == "commitMessage"
    assert _all_finished(peers)


async def test_r_hlp_2_timeout_closes_and_awaits_the_child(peers, autojump_clock):
    start = trio.current_time()
    with pytest.raises(OperationFailed) as info:
        await run_helper(_cfg(peers, "hang-turn"), "q", timeout=7.0)
    assert info.value.code == "HELPER_TIMEOUT"
    assert 7.0 <= trio.current_time() - start < 8.0
    assert _all_finished(peers)


async def test_r_hlp_2_cancelling_the_caller_closes_and_awaits_the_child(peers, autojump_clock):
    with trio.move_on_after(3.0) as scope:
        await run_helper(_cfg(peers, "hang-turn"), "q", timeout=60.0)
    assert scope.cancelled_caught and _all_finished(peers)


async def test_r_hlp_1_startup_fallback_to_the_next_candidate(peers):
    res = await run_helper(_cfg(peers, "initialize-refusal", "handshake-ok"), "q")
    assert res.text == "Hello from the fake peer." and len(peers.peers) == 2 and _all_finished(peers)
    assert peers.received(0, "thread/start") == []  # nothing but initialize on the refused one


async def test_r_lc_3_inactive_access_spawns_no_helper(peers):
    cfg = RuntimeConfig(transports=[peers.factory("handshake-ok")], access_mode="inactive")
    with pytest.raises(ConfigError) as info:
        await generate_title(cfg, "hi")
    assert info.value.code == "ACCESS_INACTIVE" and peers.peers == []


async def test_r_hlp_1_the_three_helpers_ask_and_clean_up(peers):
    cfg = _cfg(peers, _text("```\nAdd login retries\n```"), _text("Fix the flaky login test, then run it."),
               _text('"Login bug fix."'))
    # each call spawns a new child: successive factories would be wrong, so give one per call
    assert await generate_commit_message(RuntimeConfig(transports=[cfg.transports[0]]), "diff --git a b") \
        == "Add login retries"
    assert await enhance_prompt(RuntimeConfig(transports=[cfg.transports[1]]), "fix login") \
        == "Fix the flaky login test, then run it."
    assert await generate_title(RuntimeConfig(transports=[cfg.transports[2]]), "the login is broken") \
        == "Login bug fix"
    assert len(peers.peers) == 3 and _all_finished(peers)
    asks = [peers.received(i, "turn/start")[0]["params"]["input"][0]["text"] for i in range(3)]
    assert "diff --git a b" in asks[0] and "fix login" in asks[1] and "the login is broken" in asks[2]
    assert all(peers.received(i, "thread/start")[0]["params"]["developerInstructions"] for i in range(3))


async def test_r_hlp_1_empty_inputs_are_refused_before_spawning(peers):
    cfg = _cfg(peers, "handshake-ok")
    with pytest.raises(ConfigError):
        await generate_commit_message(cfg, "  ")
    with pytest.raises(ConfigError):
        await enhance_prompt(cfg, "")
    assert peers.peers == []
