"""Interactions against the scripted fake peer (R-INT-1 … R-INT-4, R-PRIV-1, R-OP-1).

Memory peers on ``autojump_clock``. What the peer *received* is the proof of what codexrt sent:
exactly one reply per server request, with the raw id, and never an accept nobody chose.
"""

from __future__ import annotations

import os
import stat

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig
from codexrt._runtime._interaction_policies import decline_all_in_read_only
from codexrt._runtime._interactions import DEFAULT_DEADLINES, safe_negative_reply

THREAD_SCOPED = {"threadId": "$thread_id", "turnId": "$turn_id"}


def kind_scenario(*requests: tuple[str, dict], name: str = "kinds") -> dict:
    """``turn/start`` → the given server requests (ids 0, 1, …); each reply → resolved; after the
    last reply the turn completes."""
    actions: list[dict] = [{"turn_response": True}, {"turn_started": True}, {"user_message": True}]
    for method, params in requests:
        actions.append({"request": method, "params": {**THREAD_SCOPED, **params}})
    rules = []
    for i in range(len(requests)):
        end = [{"agent_message": "done"}, {"end_turn": "completed"}] if i == len(requests) - 1 else []
        rules.append({"match": {"reply_to": i}, "actions": [
            {"notify": "serverRequest/resolved", "params": {"threadId": "$thread_id", "requestId": i}}, *end]})
    # Only the first turn asks; later turns are plain (default) turns.
    return {"name": name, "rules": [{"match": {"method": "turn/start"}, "actions": actions, "times": 1}, *rules]}


def _rt(peers, *scenarios, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


def _replies(peers, index=-1):
    return [m for m in peers.received(index) if "method" not in m and ("result" in m or "error" in m)]


async def _next(events, kind, pred=lambda ev: True, timeout=60):
    with trio.fail_after(timeout):
        async for ev in events:
            if ev.kind == kind and pred(ev):
                return ev
    raise AssertionError(f"stream ended before {kind}")


CMD = ("item/commandExecution/requestApproval",
       {"itemId": "call_1", "startedAtMs": 1, "command": "touch x", "availableDecisions": ["accept", "cancel"]})
FILE = ("item/fileChange/requestApproval", {"itemId": "call_2", "startedAtMs": 1, "reason": None, "grantRoot": None})
PERMS = ("item/permissions/requestApproval",
         {"itemId": "call_3", "startedAtMs": 1, "cwd": "/w",
          "permissions": {"fileSystem": {"write": ["/w/out", "/w/tmp"]}, "network": {"enabled": True}}})
INPUT = ("item/tool/requestUserInput",
         {"itemId": "call_4", "isBlocking": True,
          "questions": [{"id": "name", "header": "Name", "question": "Your name?"},
                        {"id": "token", "header": "Token", "question": "API token?", "isSecret": True}]})
ELICIT = ("mcpServer/elicitation/request",
          {"serverName": "srv", "mode": "form", "message": "Configure",
           "requestedSchema": {"type": "object", "required": ["port"],
                               "properties": {"port": {"type": "integer", "minimum": 1},
                                              "verbose": {"type": "boolean"},
                                              "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}})
TOOL = ("item/tool/call", {"callId": "call_6", "tool": "lookup", "arguments": {"q": 1}})
LEGACY = ("execCommandApproval", {"conversationId": "$thread_id", "callId": "call_7", "command": ["touch", "x"],
                                   "cwd": "/w", "parsedCmd": []})

# (request, a valid host reply, an invalid reply)
KIND_CASES = [
    (CMD, {"decision": "decline"}, {"decision": "approve"}),
    (CMD, {"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch"]}}},
     {"decision": {"acceptWithExecpolicyAmendment": {}}}),
    (FILE, {"decision": "acceptForSession"}, {"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": []}}}),
    (PERMS, {"permissions": {"fileSystem": {"write": ["/w/out"]}}, "scope": "session"},
     {"permissions": {"fileSystem": {"write": ["/etc"]}}}),
    (INPUT, {"answers": {"name": {"answers": ["Ada"]}}}, {"answers": {"nope": {"answers": ["x"]}}}),
    (ELICIT, {"action": "accept", "content": {"port": 8080, "verbose": True}}, {"action": "accept", "content": {}}),
    (TOOL, {"contentItems": [{"type": "inputText", "text": "42"}], "success": True},
     {"contentItems": [{"type": "text", "text": "42"}], "success": True}),
    (LEGACY, {"decision": {"denied": {"rejection": "no"}}}, {"decision": "accept"}),
]


@pytest.mark.parametrize("request_, good, bad", KIND_CASES, ids=lambda v: v[0] if isinstance(v, tuple) else None)
async def test_r_int_3_each_kind_typed_reply_validated_then_forwarded(peers, privacy_store, request_, good, bad):
    async with _rt(peers, kind_scenario(request_)) as rt:
        rt.set_privacy_store(privacy_store)
        with rt.subscribe() as events:
            op = rt.send("go")
            ev = await _next(events, "interactionRequested")
            p = ev.payload
            assert p["method"] == request_[0] and p["deliverySequence"] == 1 and p["interactionKey"].startswith("ik-")
            assert "0" not in p["interactionKey"].split("-", 1)[0]  # the raw id is not what the host answers with
            with pytest.raises(codexrt.InteractionError) as info:
                await rt.respond_interaction(p["interactionKey"], p["dialogToken"], bad)
            assert info.value.code in ("INTERACTION_INVALID_REPLY", "ELICITATION_INVALID_ANSWER")
            assert rt.pending_interactions()  # a refused reply changes nothing
            await rt.respond_interaction(p["interactionKey"], p["dialogToken"], good)
            answered = await _next(events, "interactionAnswered")
            assert answered.payload == {"interactionKey": p["interactionKey"], "by": "host"}
            await _next(events, "interactionResolved")
            assert (await op.wait()).status == "completed"
    assert [(r["id"], r["result"]) for r in _replies(peers)] == [(0, good)]


async def test_r_int_1_duplicate_and_concurrent_answers_send_once(peers):
    async with _rt(peers, kind_scenario(CMD)) as rt:
        with rt.subscribe() as events:
            op = rt.send("go")
            p = (await _next(events, "interactionRequested")).payload
            errors, sent = [], []

            async def answer(decision):
                try:
                    await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": decision})
                    sent.append(decision)
                except codexrt.InteractionError as exc:
                    errors.append(exc.code)

            async with trio.open_nursery() as n:
                n.start_soon(answer, "decline")
                n.start_soon(answer, "cancel")
            assert errors == ["INTERACTION_DUPLICATE"]
            with pytest.raises(codexrt.InteractionError) as info:
                await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": "decline"})
            assert info.value.code in ("INTERACTION_DUPLICATE", "INTERACTION_EXPIRED")
            with pytest.raises(codexrt.InteractionError) as info:
                await rt.respond_interaction("ik-unknown", "t", {"decision": "decline"})
            assert info.value.code == "INTERACTION_UNKNOWN"
            await op.wait()
    assert len(sent) == 1
    assert len(_replies(peers)) == 1 and _replies(peers)[0]["result"] == {"decision": sent[0]}


async def test_r_int_2_replay_in_delivery_order_with_rotated_tokens(peers):
    async with _rt(peers, kind_scenario(CMD, FILE, TOOL)) as rt:
        with rt.subscribe() as events:
            op = rt.send("go")
            first = [(await _next(events, "interactionRequested")).payload for _ in range(3)]
            assert [f["deliverySequence"] for f in first] == [1, 2, 3]
            # The host answers the middle one, then its UI is rebuilt.
            await rt.respond_interaction(first[1]["interactionKey"], first[1]["dialogToken"], {"decision": "decline"})
            replayed = rt.replay_interactions()
            assert [i.key for i in replayed] == [first[0]["interactionKey"], first[2]["interactionKey"]]
            again = [(await _next(events, "interactionRequested", lambda e: e.payload.get("replayed"))).payload
                     for _ in range(2)]
            assert [a["deliverySequence"] for a in again] == [1, 3]
            assert all(a["dialogToken"] != f["dialogToken"] for a, f in zip(again, (first[0], first[2])))
            assert again[0]["params"] == first[0]["params"] and again[0]["deadlineMs"] == first[0]["deadlineMs"]
            with pytest.raises(codexrt.InteractionError) as info:  # the old page's token is dead
                await rt.respond_interaction(first[0]["interactionKey"], first[0]["dialogToken"], {"decision": "decline"})
            assert info.value.code == "INTERACTION_STALE_TOKEN"
            await rt.respond_interaction(again[0]["interactionKey"], again[0]["dialogToken"], {"decision": "decline"})
            await rt.respond_interaction(again[1]["interactionKey"], again[1]["dialogToken"],
                                         {"contentItems": [], "success": False})
            await op.wait()
    assert [r["id"] for r in _replies(peers)] == [1, 0, 2]


async def test_r_int_1_deadline_sends_the_safe_negative_reply(peers, autojump_clock):
    async with _rt(peers, kind_scenario(TOOL)) as rt:
        with rt.subscribe() as events:
            op = rt.send("go")
            p = (await _next(events, "interactionRequested")).payload
            start = trio.current_time()
            expired = await _next(events, "interactionExpired", timeout=3600)
            assert trio.current_time() - start == pytest.approx(DEFAULT_DEADLINES["dynamicToolCall"], abs=1)
            assert expired.payload["reason"] == "deadline"
            assert expired.payload["reply"] == safe_negative_reply("item/tool/call")
            with pytest.raises(codexrt.InteractionError) as info:
                await rt.respond_interaction(p["interactionKey"], p["dialogToken"],
                                             {"contentItems": [], "success": True})
            assert info.value.code == "INTERACTION_EXPIRED"
            await op.wait()
    assert _replies(peers)[0]["result"]["success"] is False


async def test_r_int_1_deadlines_are_per_kind_and_configurable(peers, autojump_clock):
    async with _rt(peers, kind_scenario(CMD)) as rt:
        rt.set_interaction_deadlines(commandApproval=90)
        with pytest.raises(codexrt.InteractionError):
            rt.set_interaction_deadlines(noSuchKind=1)
        with rt.subscribe() as events:
            op = rt.send("go")
            await _next(events, "interactionRequested")
            start = trio.current_time()
            await _next(events, "interactionExpired", timeout=3600)
            assert trio.current_time() - start == pytest.approx(90, abs=1)
            await op.wait()
    assert _replies(peers)[0]["result"] == {"decision": "decline"}  # never an accept


async def test_r_int_2_resolved_by_server_closes_exactly_that_interaction(peers):
    """``turn/interrupt`` while an approval is pending: the server resolves it without a reply."""
    async with _rt(peers, "reverse-approval") as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            p = (await _next(events, "interactionRequested")).payload
            rt.abort(op)
            resolved = await _next(events, "interactionResolved")
            assert resolved.payload["interactionKey"] == p["interactionKey"]
            assert resolved.payload["dialogToken"] == p["dialogToken"]  # the page closes exactly this dialog
            assert rt.pending_interactions() == []
            with pytest.raises(codexrt.InteractionError) as info:
                await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": "decline"})
            assert info.value.code == "INTERACTION_EXPIRED"
            assert (await op.wait()).status == "interrupted"
    assert _replies(peers) == []


async def test_r_int_1_raw_ids_recur_across_generations_keys_do_not(peers):
    async with _rt(peers, "reverse-approval", "reverse-approval") as rt:
        with rt.subscribe() as events:
            op = rt.send("x")
            old = (await _next(events, "interactionRequested")).payload
            await rt.reset(reason="test")
            assert (await op.wait()).status == "failed"
            op2 = rt.send("y")
            new = (await _next(events, "interactionRequested")).payload
            assert new["interactionKey"] != old["interactionKey"]  # same raw id 0, another instance
            with pytest.raises(codexrt.InteractionError) as info:
                await rt.respond_interaction(old["interactionKey"], old["dialogToken"], {"decision": "accept"})
            assert info.value.code == "INTERACTION_WRONG_GENERATION"
            await rt.respond_interaction(new["interactionKey"], new["dialogToken"], {"decision": "decline"})
            assert (await op2.wait()).status == "completed"
    assert _replies(peers, 0) == [] and [r["result"] for r in _replies(peers, 1)] == [{"decision": "decline"}]


async def test_policy_declines_in_read_only_in_its_own_task(peers):
    async with _rt(peers, kind_scenario(CMD), settings=codexrt.Settings(sandbox="read-only")) as rt:
        rt.set_interaction_policy(decline_all_in_read_only)
        with rt.subscribe() as events:
            op = rt.send("go")
            answered = await _next(events, "interactionAnswered")
            assert answered.payload["by"] == "policy"
            await op.wait()
    assert _replies(peers)[0]["result"] == {"decision": "decline"}


async def test_policy_leaves_writable_threads_to_the_host(peers):
    async with _rt(peers, kind_scenario(CMD), settings=codexrt.Settings(sandbox="workspace-write")) as rt:
        rt.set_interaction_policy(decline_all_in_read_only)
        with rt.subscribe() as events:
            op = rt.send("go")
            p = (await _next(events, "interactionRequested")).payload
            await trio.testing.wait_all_tasks_blocked()
            assert rt.pending_interactions()  # the policy returned None
            await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": "accept"})
            await op.wait()
    assert _replies(peers)[0]["result"] == {"decision": "accept"}


async def test_policy_errors_are_events_and_leave_it_pending(peers):
    release = trio.Event()

    async def broken(inter):
        await release.wait()  # a slow policy never blocks the reader
        raise RuntimeError("policy bug")

    async with _rt(peers, kind_scenario(CMD)) as rt:
        rt.set_interaction_policy(broken)
        with rt.subscribe() as events:
            op = rt.send("go")
            p = (await _next(events, "interactionRequested")).payload
            release.set()
            err = await _next(events, "interactionPolicyError")
            assert err.payload["interactionKey"] == p["interactionKey"] and "policy bug" in err.payload["error"]
            assert [i.key for i in rt.pending_interactions()] == [p["interactionKey"]]
            await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": "decline"})
            await op.wait()
    assert len(_replies(peers)) == 1


async def test_policy_with_an_invalid_reply_is_reported(peers):
    async def invalid(inter):
        return {"decision": "yes"}

    async with _rt(peers, kind_scenario(FILE)) as rt:
        rt.set_interaction_policy(invalid)
        with rt.subscribe() as events:
            op = rt.send("go")
            p = (await _next(events, "interactionRequested")).payload
            err = await _next(events, "interactionPolicyError")
            assert err.payload["code"] == "INTERACTION_INVALID_REPLY"
            await rt.respond_interaction(p["interactionKey"], p["dialogToken"], {"decision": "decline"})
            await op.wait()


async def test_r_int_4_elicitation_helpers_restore_types(peers, privacy_store):
    async with _rt(peers, kind_scenario(ELICIT)) as rt:
        rt.set_privacy_store(privacy_store)
        with rt.subscribe() as events:
            op = rt.send("go")
            ev = await _next(events, "interactionRequested")
            form = ev.payload["elicitation"]
            assert form["mode"] == "form" and [f["id"] for f in form["fields"]] == ["port", "verbose", "tags"]
            inter = rt.interactions[ev.payload["interactionKey"]]
            with pytest.raises(codexrt.InteractionError):
                await inter.submit_elicitation({"verbose": "yes"})  # port is required
            await inter.submit_elicitation({"port": "8080", "verbose": "no", "tags": "a, b"})
            await op.wait()
    assert _replies(peers)[0]["result"] == {"action": "accept",
                                            "content": {"port": 8080, "verbose": False, "tags": ["a", "b"]}}


async def test_r_int_4_unsupported_elicitation_is_cancelled_never_accepted(peers):
    verify = ("mcpServer/elicitation/request", {"serverName": "srv", "mode": "openai/userVerification",
                                                "challenge": "c", "description": "d", "title": "t"})
    async with _rt(peers, kind_scenario(verify)) as rt:
        with rt.subscribe() as events:
            op = rt.send("go")
            ev = await _next(events, "interactionRequested")
            assert ev.payload["elicitation"]["mode"] == "unsupported"
            inter = rt.interactions[ev.payload["interactionKey"]]
            with pytest.raises(codexrt.InteractionError):
                await inter.respond({"action": "accept", "content": {"proof": "x"}})
            await inter.decline()
            await op.wait()
    assert _replies(peers)[0]["result"] == {"action": "cancel", "content": None}


async def test_r_priv_1_user_input_answer_is_recorded_before_it_is_forwarded(peers, privacy_store):
    async with _rt(peers, kind_scenario(INPUT)) as rt:
        rt.set_privacy_store(privacy_store)
        with rt.subscribe() as events:
            op = rt.send("go")
            ev = await _next(events, "interactionRequested")
            await rt.interactions[ev.payload["interactionKey"]].answer_questions({"name": "Ada", "token": "s3cr3t"})
            await op.wait()
    files = os.listdir(privacy_store.directory)
    assert len(files) == 1 and files[0].startswith(f"{privacy_store.fingerprint}.record.") and files[0].endswith(".json")
    path = os.path.join(privacy_store.directory, files[0])
    assert stat.S_IMODE(os.stat(privacy_store.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = open(path).read()
    for forbidden in ("Ada", "s3cr3t", "Your name", "API token", "Token"):
        assert forbidden not in text
    idx = privacy_store.load()
    assert idx.records[0].secret_ids() == {"token"} and idx.records[0].item_id == "call_4"
    assert _replies(peers)[0]["result"]["answers"]["token"] == {"answers": ["s3cr3t"]}


async def test_declining_questions_writes_no_record(peers, privacy_store):
    async with _rt(peers, kind_scenario(INPUT)) as rt:
        rt.set_privacy_store(privacy_store)
        with rt.subscribe() as events:
            op = rt.send("go")
            ev = await _next(events, "interactionRequested")
            await rt.interactions[ev.payload["interactionKey"]].decline()
            await op.wait()
    assert not os.path.exists(privacy_store.directory) or os.listdir(privacy_store.directory) == []
    assert _replies(peers)[0]["result"] == {"answers": {}}


async def test_r_op_1_respond_interaction_error_is_a_control_call(peers):
    async with _rt(peers, kind_scenario(TOOL)) as rt:
        with rt.subscribe() as events:
            op = rt.send("go")
            p = (await _next(events, "interactionRequested")).payload
            queued = rt.send("behind it")  # waits in the FIFO behind the very turn that asks
            await rt.respond_interaction_error(p["interactionKey"], p["dialogToken"], -32000, "host cannot run tools")
            assert queued.phase.value == "queued"  # answered without waiting for the queue (R-OP-1)
            ans = await _next(events, "interactionAnswered")
            assert ans.payload["error"] is True
            await op.wait()
            with trio.fail_after(60):
                assert (await queued.wait()).status == "completed"
    assert _replies(peers)[0]["error"] == {"code": -32000, "message": "host cannot run tools"}
