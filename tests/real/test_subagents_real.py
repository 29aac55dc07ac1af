"""Sub-agents on the real ``codex app-server``, driven offline by the loopback model.

The real server offers the model a ``multi_agent_v1`` namespace (``spawn_agent``, ``send_input``,
``wait_agent``, ``close_agent``, ``resume_agent``) in every turn's tool list; the loopback model's
``[[mock:spawn:<message>]]`` directive calls ``spawn_agent``. These tests record what the server
then does (docs/real-server-notes.md, "Sub-agents") and check codexrt's relation handling on it
(R-H-8, R-D-1, R-OP-6). Every wait is bounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from peer_fixtures.mock_responses import MockResponsesServer, parse_directives
from peer_fixtures.real_server import RawAppServer
from tests._support import wait_until

TURN_TIMEOUT = 30.0


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "text_elements": []}]


def test_spawn_directive_is_a_multi_agent_call() -> None:
    s = parse_directives("[[mock:spawn:<<mock:text:child here>>]]")
    assert s is not None and s.kind == "call"
    assert (s.call_namespace, s.call_name) == ("multi_agent_v1", "spawn_agent")
    assert s.call_arguments == '{"message": "[[mock:text:child here]]"}'


def test_r_h_8_spawned_child_thread_on_the_real_server(spawn_raw: Callable[..., RawAppServer],
                                                       mock_model: MockResponsesServer, real_cwd: Path) -> None:
    """R-H-8 / R-OP-6 facts codexrt relies on: the tool is offered; the child is announced only
    through the parent's ``collabAgentToolCall`` item (no ``thread/started``); the child's own
    notifications carry the child's ``threadId``; ``thread/read`` of the child names the parent
    in ``parentThreadId``; the parent's turn can complete while the child still works."""
    srv = spawn_raw()
    srv.initialize()
    started = srv.call("thread/start", {"cwd": str(real_cwd)})
    parent = started["thread"]["id"]
    assert started["multiAgentMode"] == "explicitRequestOnly"
    srv.call("turn/start", {"threadId": parent, "input": _text("[[mock:spawn:<<mock:text:child here>>]]")})
    spawned = srv.wait_for(lambda m: m.get("method") == "item/completed"
                           and m["params"]["item"].get("type") == "collabAgentToolCall", TURN_TIMEOUT,
                           what="collabAgentToolCall completed")
    item = spawned["params"]["item"]
    assert item["tool"] == "spawnAgent" and item["senderThreadId"] == parent
    (child,) = item["receiverThreadIds"]
    srv.wait_for(lambda m: m.get("method") == "turn/completed" and m["params"]["threadId"] == child,
                 TURN_TIMEOUT, what="child turn/completed")
    assert not [m for m in srv.seen if m.get("method") == "thread/started"
                and m["params"]["thread"]["id"] == child]
    child_turns = [m["params"]["turn"] for m in srv.seen
                   if m.get("method") == "turn/started" and m["params"]["threadId"] == child]
    parent_turn = next(m["params"]["turn"]["id"] for m in srv.seen
                       if m.get("method") == "turn/started" and m["params"]["threadId"] == parent)
    assert child_turns and child_turns[0]["rootTurnId"] == parent_turn
    read = srv.call("thread/read", {"threadId": child})["thread"]
    assert read["parentThreadId"] == parent and read["threadSource"] == "subagent"
    assert read["source"]["subAgent"]["thread_spawn"]["parent_thread_id"] == parent
    # the first model request offered the multi-agent namespace
    tools = mock_model.model_requests()[0].body["tools"]
    ns = next(t for t in tools if t.get("name") == "multi_agent_v1")
    assert {"spawn_agent", "wait_agent", "close_agent"} <= {t["name"] for t in ns["tools"]}
    # the child ran its own directive: a model request whose user text is the spawn message
    assert mock_model.requests_with_user_text("[[mock:text:child here]]")


async def test_r_h_8_r_d_1_runtime_verifies_and_drains_a_real_subagent(codex_bin, real_env, real_cwd, mock_model):
    """Through codexrt: the child of a real spawn is verified (``threadRelationVerified``), its
    hanging turn is not the parent's (the parent's operation completes while it runs), and
    draining the root's relation set interrupts it and waits until it is no longer active."""
    import trio

    import codexrt
    from codexrt import RuntimeConfig, Settings

    config = RuntimeConfig(codex_bin=str(codex_bin), env=real_env, cwd=str(real_cwd),
                           settings=Settings(cwd=str(real_cwd)))
    async with codexrt.open_runtime(config) as rt:
        with rt.subscribe() as events, trio.fail_after(60):
            op = rt.send("[[mock:spawn:<<mock:hang>>]]")
            result = await op.wait()
            assert result.status == "completed"
            async for ev in events:
                if ev.kind == "threadRelationVerified":
                    break
            root, child = result.thread_id, ev.thread_id
            assert ev.payload == {"rootThreadId": root, "threadId": child, "parentThreadId": root}
            while rt.relations(root)[child]["status"] != "active":  # the child's own turn/started
                async for e in events:
                    if e.thread_id == child:
                        break
            await wait_until(lambda: mock_model.requests_with_user_text("[[mock:hang]]"),
                             "the child's turn to reach the model")
            drained = await rt.drain_relations(root)
            assert drained == [{"threadId": child, "interrupted": True, "status": "idle", "settled": True}], (
                drained, rt.relations(root))
            await rt.release_thread(root)
            assert rt.relations(root) == {} and rt.runtime_snapshot()["sessionCount"] == 0
