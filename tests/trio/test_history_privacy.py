"""History reads apply the privacy index (R-PRIV-2, R-PRIV-3, R-H-3).

A thread whose ``requestUserInput`` had a secret question is run against the scripted fake peer:
the host answers through ``rt.interactions[key].answer_questions`` (which writes the privacy
record before forwarding, R-PRIV-1), the fake records a ``dynamicToolCall`` item holding the
answers it received, and the thread is read back — natively through the runtime, and from a
rollout file holding the same answers. The secret answer is masked, the other answer and
ordinary text are not; without an index the legacy transcript says masking is not guaranteed;
a damaged index masks conservatively.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

import codexrt
from codexrt._features._history import MASKING_NOTICE, PRIVACY_DAMAGED_NOTICE, open_history_reader, record_to_json
from codexrt._sansio._privacy import MASK
from codexrt._runtime._runtime import RuntimeConfig

SECRET = "hunter2-secret"
NAME = "Ada"
CALL = "call_4"
QUESTIONS = [{"id": "name", "header": "Name", "question": "Your name?"},
             {"id": "token", "header": "Token", "question": "API token?", "isSecret": True}]
ORDINARY = "Thanks, token received. The name field said Ada."


def secret_question_scenario() -> dict[str, Any]:
    """``turn/start`` asks the questions (server request 0); the reply becomes the turn's
    ``request_user_input`` tool call item whose result body is the answers the client sent."""
    ask = [{"turn_response": True}, {"turn_started": True}, {"user_message": True},
           {"request": "item/tool/requestUserInput",
            "params": {"threadId": "$thread_id", "turnId": "$turn_id", "itemId": CALL, "isBlocking": True,
                       "questions": QUESTIONS}}]
    answered = [
        {"notify": "serverRequest/resolved", "params": {"threadId": "$thread_id", "requestId": 0}},
        {"item": {"type": "dynamicToolCall", "id": CALL, "namespace": None, "tool": "request_user_input",
                  "arguments": {"questions": QUESTIONS}, "status": "completed", "success": True, "durationMs": 5,
                  "contentItems": [{"type": "inputText", "text": '{"answers":$msg.result.answers}'}]}},
        {"agent_message": ORDINARY},
        {"end_turn": "completed"},
    ]
    return {"name": "secret-question", "rules": [
        {"match": {"method": "turn/start"}, "actions": ask, "times": 1},
        {"match": {"reply_to": 0}, "actions": answered},
    ]}


async def _next(events, kind):
    with trio.fail_after(30):
        async for ev in events:
            if ev.kind == kind:
                return ev
    raise AssertionError(f"stream ended before {kind}")


def answers_of(tr) -> dict[str, Any]:
    [call] = [r for r in tr.records() if r.kind == "dynamicToolCall"]
    assert call.id == CALL and call.tool == "request_user_input"
    return json.loads(call.content[0].text)["answers"]


def texts_of(tr) -> list[str]:
    return [r.text for r in tr.records() if r.kind in ("userMessage", "assistantMessage")]


def write_rollout(home: Path, thread_id: str, turn_id: str, answers: dict[str, Any]) -> Path:
    """A minimal rollout of the same conversation: user text, the request_user_input call and its
    output (the answers, as the app-server keeps them), the assistant's text."""
    day = home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-11-30T10-00-00-{thread_id}.jsonl"
    ts = "2026-11-30T10:00:00.000Z"
    lines = [
        {"type": "session_meta", "payload": {"id": thread_id, "timestamp": ts, "cwd": "/w", "cli_version": "0.169.0"}},
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": turn_id}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "configure it", "images": []}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "request_user_input", "call_id": CALL,
                                              "arguments": json.dumps({"questions": QUESTIONS})}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": CALL,
                                              "output": json.dumps({"answers": answers})}},
        {"type": "event_msg", "payload": {"type": "agent_message", "message": ORDINARY}},
        {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": turn_id}},
    ]
    path.write_text("".join(json.dumps({"timestamp": ts, **line}) + "\n" for line in lines))
    return path


async def test_r_priv_2_secret_answer_masked_in_native_and_legacy_history(peers, privacy_store, tmp_path):
    home = tmp_path / "home"
    cfg = RuntimeConfig(transports=[peers.factory(secret_question_scenario())], codex_home=str(home))
    async with codexrt.open_runtime(cfg) as rt:
        rt.set_privacy_store(privacy_store)
        with rt.subscribe() as events:
            op = rt.send("configure it")
            ev = await _next(events, "interactionRequested")
            await rt.interactions[ev.payload["interactionKey"]].answer_questions({"name": NAME, "token": SECRET})
            result = await op.wait()
        assert result.status == "completed"
        tid, turn_id = result.thread_id, result.turn_id
        # what the app-server keeps holds the secret in clear: the masking is ours to do
        [raw] = [m for m in peers.received() if m.get("id") == 0 and "result" in m]
        assert raw["result"]["answers"]["token"] == {"answers": [SECRET]}

        async with open_history_reader(rt) as reader:  # the runtime's own privacy index
            native = await reader.read_thread(tid)
            page = await reader.read_page(tid, scope="items")
        assert native.source == "native" and MASKING_NOTICE not in native.notices
        assert answers_of(native) == {"name": {"answers": [NAME]}, "token": {"answers": [MASK]}}
        assert ORDINARY in texts_of(native) and "configure it" in texts_of(native)
        assert SECRET not in json.dumps([record_to_json(r) for r in native.records()])
        assert SECRET not in json.dumps(page["records"]) and NAME in json.dumps(page["records"])

    # the same conversation from a rollout file, read by an inactive runtime (R-H-3)
    write_rollout(home, tid, turn_id, raw["result"]["answers"])
    offline = RuntimeConfig(access_mode="inactive", codex_home=str(home))
    async with codexrt.open_runtime(offline) as rt2:
        rt2.set_privacy_store(privacy_store)
        async with open_history_reader(rt2) as reader:
            legacy = await reader.read_thread(tid)
    assert legacy.source == "legacy" and MASKING_NOTICE not in legacy.notices
    assert answers_of(legacy) == {"name": {"answers": [NAME]}, "token": {"answers": [MASK]}}
    assert ORDINARY in texts_of(legacy) and "configure it" in texts_of(legacy)

    # no index available: nothing can be promised, and the transcript says so
    async with open_history_reader(None, codex_home=home) as reader:
        bare = await reader.read_thread(tid)
    assert MASKING_NOTICE in bare.notices and answers_of(bare)["token"] == {"answers": [SECRET]}

    # an explicit index (a loader) works for a provider-less reader too
    async with open_history_reader(None, codex_home=home, privacy=privacy_store.load) as reader:
        loaded = await reader.read_thread(tid)
    assert MASKING_NOTICE not in loaded.notices and answers_of(loaded)["token"] == {"answers": [MASK]}


async def test_r_priv_2_damaged_or_unreadable_index_masks_conservatively(privacy_store, tmp_path):
    home = tmp_path / "home"
    tid, turn_id = "0199a000-0000-7000-8000-0000000000aa", "turn-1"
    write_rollout(home, tid, turn_id, {"name": {"answers": [NAME]}, "token": {"answers": [SECRET]}})
    # a corrupt record file: the lost classification could have been this call's
    Path(privacy_store.directory).mkdir(parents=True)
    (Path(privacy_store.directory) / f"{privacy_store.fingerprint}.record.broken.json").write_text("{not json")
    async with open_history_reader(None, codex_home=home, privacy=privacy_store.load) as reader:
        tr = await reader.read_thread(tid)
    assert PRIVACY_DAMAGED_NOTICE in tr.notices and MASKING_NOTICE not in tr.notices
    # no record for this call: every answer masked (a cold read never unmasks), text untouched
    assert answers_of(tr) == {"name": {"answers": [MASK]}, "token": {"answers": [MASK]}}
    assert ORDINARY in texts_of(tr)

    def unreadable():
        raise PermissionError("denied")

    async with open_history_reader(None, codex_home=home, privacy=unreadable) as reader:
        tr2 = await reader.read_thread(tid)
    assert PRIVACY_DAMAGED_NOTICE in tr2.notices
    assert answers_of(tr2)["token"] == {"answers": [MASK]} and ORDINARY in texts_of(tr2)
