"""Random interleavings of submit / abort / crash / notification order / late responses
(issue 3's stateful property), checked against the runtime's invariants.

Hypothesis draws a *program*: per turn the fake peer's behaviour (complete, notifications
before the response, hang until interrupted, an error answer, a duplicate terminal, a late
response, a crash mid-turn) and the host's actions (send on a new or existing thread, abort a
random operation after a random virtual delay). Each example runs in its own ``trio.run`` on
an autojump clock. Invariants:

* every operation reaches exactly one terminal (one ``operationDone``);
* no ``turn/start`` is written twice for one operation (by ``clientUserMessageId``);
* no operation binds two turns;
* the FIFO never runs two long operations at once;
* nothing of an older generation settles an operation of a newer one;
* no compact starts under an unconfirmed settings revision: the host also compacts after a new
  revision, and some ``thread/settings/update`` are confirmed with other values (R-SET-2);
* a sub-agent's turn (``spawn``: the parent's turn spawns a child that finishes; ``spawn_hang``:
  the parent hangs while its child finishes; ``spawn_early``: the child's turn arrives before the
  parent's is bound) never settles or binds an operation: none of the
  child's events carries an operation id and no operation's turn is the child's (R-OP-6).
"""

from __future__ import annotations

import collections

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import codexrt
from codexrt import RuntimeConfig
from tests._support import MemoryPeers

BEHAVIOURS = ["complete", "early", "hang", "error", "duplicate", "late", "crash", "spawn", "spawn_hang", "spawn_early"]


def _child_ids(nth: int) -> tuple[str, str]:
    return f"{nth:08d}-c0de-4000-8000-00000000c01d", f"{nth:08d}-c0de-4000-8000-0000000007e1"


def _child_turn(nth: int) -> list[dict]:
    """A sub-agent of the current turn, shaped like the real server's (docs/real-server-notes.md):
    announced by a collabAgentToolCall item, then its own turn runs to completion."""
    child, turn = _child_ids(nth)
    return [
        {"item": {"type": "collabAgentToolCall", "id": f"call_spawn_{nth}", "tool": "spawnAgent",
                  "status": "completed", "senderThreadId": "$thread_id", "receiverThreadIds": [child]}},
        {"notify": "turn/started", "params": {"threadId": child, "turn": {"id": turn, "status": "inProgress"}}},
        {"notify": "turn/completed", "params": {"threadId": child, "turn": {"id": turn, "status": "completed"}}},
    ]


def _turn_rule(nth: int, behaviour: str) -> dict:
    actions = {
        "complete": [{"default": True}],
        "early": [{"turn_started": True}, {"user_message": True}, {"turn_response": True},
                  {"agent_message": True}, {"end_turn": "completed"}],
        "hang": [{"hang_turn": True}],
        "error": [{"error": {"code": -32600, "message": "Invalid request: refused"}}],
        "duplicate": [{"default": True}, {"notify": "turn/completed",
                                          "params": {"threadId": "$thread_id", "turn": "$turn"}}],
        "late": [{"sleep": 45}, {"default": True}],
        "crash": [{"turn_response": True}, {"turn_started": True}, {"sleep": 0.5}, {"exit": 1}],
        "spawn": [{"turn_response": True}, {"turn_started": True}, *_child_turn(nth),
                  {"agent_message": True}, {"end_turn": "completed"}],
        "spawn_hang": [{"hang_turn": True}, *_child_turn(nth)],
        # hostile order: the child's turn is seen before the parent's turn is bound
        "spawn_early": [*_child_turn(nth), {"turn_response": True}, {"turn_started": True},
                        {"agent_message": True}, {"end_turn": "completed"}],
    }[behaviour]
    return {"match": {"method": "turn/start", "nth": nth}, "actions": actions}


def _mismatch_rule(nth: int) -> dict:
    """The ``nth`` thread/settings/update of a child is confirmed with other values (R-SET-2)."""
    return {"match": {"method": "thread/settings/update", "nth": nth}, "actions": [
        {"respond": {}}, {"notify": "thread/settings/updated", "params": {
            "threadId": "$thread_id", "threadSettings": {"model": "server-chose-another"}}}]}


def _scenarios(behaviours: list[str], mismatches: frozenset[int] = frozenset()) -> list[dict]:
    """Split the behaviour list into one scenario per child: a crash ends a child."""
    out, rules = [], []
    for b in behaviours:
        rules.append(_turn_rule(len(rules) + 1, b))
        if b == "crash":
            out.append(rules)
            rules = []
    out.append(rules)
    extra = [_mismatch_rule(n) for n in sorted(mismatches)]
    return [{"name": f"prop-{i}", "defaults": True, "settings": {"resume_any_uuid": True}, "rules": [*extra, *r]}
            for i, r in enumerate(out)]


actions_st = st.lists(
    st.tuples(st.sampled_from(["new", "same", "compact"]), st.one_of(st.none(), st.floats(0, 40)),
              st.floats(0, 5)),
    min_size=1, max_size=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(behaviours=st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=6), actions=actions_st,
       mismatches=st.frozensets(st.integers(1, 3), max_size=2))
def test_r_op_invariants_under_random_interleavings(behaviours, actions, mismatches):
    clock = trio.testing.MockClock(autojump_threshold=0)
    trio.run(_program, behaviours, actions, mismatches, clock=clock)


async def _program(behaviours, actions, mismatches=frozenset()):
    children = {_child_ids(i + 1)[0] for i in range(len(behaviours))}
    child_turns = {_child_ids(i + 1)[1] for i in range(len(behaviours))}
    async with trio.open_nursery() as nursery:
        peers = MemoryPeers(nursery)
        config = RuntimeConfig(transports=[peers.sequence(*_scenarios(behaviours, mismatches))], stop_budget=10)
        async with codexrt.open_runtime(config) as rt:
            with rt.subscribe(max_droppable=10_000) as events:
                ops: list[codexrt.Operation] = []

                async def abort_later(op, delay):
                    await trio.sleep(delay)
                    rt.abort(op)

                async with trio.open_nursery() as hosts:
                    for which, abort_after, pause in actions:
                        thread = None
                        if which in ("same", "compact") and ops:
                            thread = ops[-1].thread_id  # may still be None: then a new thread
                        if which == "compact" and thread is not None:
                            rt.update_settings(model=f"m-{len(ops)}")  # a new revision to confirm
                            op = rt.compact(thread)
                        else:
                            op = rt.send(f"msg {len(ops)}", thread_id=thread,
                                         client_message_id=f"cm-{len(ops)}")
                        ops.append(op)
                        if abort_after is not None:
                            hosts.start_soon(abort_later, op, abort_after)
                        await trio.sleep(pause)
                    # Let everything finish: abort whatever still runs (hung turns).
                    with trio.fail_after(3600):
                        for op in ops:
                            while not op.terminal:
                                rt.abort(op)
                                with trio.move_on_after(30):
                                    await op.wait()
                    hosts.cancel_scope.cancel()
                seen = []
                while (ev := events.get_nowait()) is not None:
                    seen.append(ev)
        nursery.cancel_scope.cancel()

    # -- invariants ------------------------------------------------------------------------
    # R-SET-2: no compact starts under an unconfirmed revision. In each child's log, the
    # thread/compact/start follows the thread/settings/update it was gated on (confirmed with
    # matching values: not a mismatching one), or, when the gate sent none, the thread/resume or
    # thread/start whose result reported the settings.
    for p in peers.peers:
        updates = 0
        last: dict[str, tuple[str, int]] = {}
        for m in p.received:
            method, params = m.get("method"), m.get("params") or {}
            if method == "thread/settings/update":
                updates += 1
                last[params.get("threadId")] = ("update", updates)
            elif method in ("thread/resume", "thread/start"):
                last.setdefault(params.get("threadId"), ("resume", 0))
            elif method == "thread/compact/start":
                kind, nth = last.get(params.get("threadId"), ("none", 0))
                assert kind != "none", "compact started with no settings confirmed on this child"
                assert kind == "resume" or nth not in mismatches, f"compact started after mismatching update {nth}"
    # R-OP-6: a child's turn is never an operation's, and its terminal settles nothing
    for e in seen:
        if e.thread_id in children or e.turn_id in child_turns:
            assert e.client_operation_id is None, (e.kind, e.thread_id, e.client_operation_id)
    for op in ops:
        assert op.turn_id not in child_turns and op.result.turn_id not in child_turns, op
    done = collections.Counter(e.client_operation_id for e in seen if e.kind == "operationDone")
    for op in ops:
        assert done[op.id] == 1, (op, done[op.id])
        assert op.result is not None
    turn_starts = collections.Counter(
        m["params"].get("clientUserMessageId") for p in peers.peers for m in p.received
        if m.get("method") == "turn/start")
    for cmid, n in turn_starts.items():
        assert n == 1, f"turn/start written {n} times for {cmid}"
    by_op_turns = collections.defaultdict(set)
    for e in seen:
        if e.client_operation_id and e.turn_id:
            by_op_turns[e.client_operation_id].add(e.turn_id)
    for op_id, turns in by_op_turns.items():
        assert len(turns) <= 1, f"{op_id} bound {turns}"
    # FIFO: between an op's first dispatch-side event and its operationDone, no other op's
    # dispatch-side events appear.
    # (An operation cancelled while still queued settles without ever running: skip it.)
    ran = {e.client_operation_id for e in seen if e.kind not in ("operationQueued", "operationDone")} - {None}
    running = None
    for e in seen:
        if e.client_operation_id not in ran or e.kind == "operationQueued":
            continue
        if running is None:
            running = e.client_operation_id
        assert e.client_operation_id == running, f"{e.kind} of {e.client_operation_id} while {running} runs"
        if e.kind == "operationDone":
            running = None
    # Generations: an operation's events all come from the generation it was dispatched in.
    for op in ops:
        if op.generation is None:
            continue
        gens = {e.runtime_generation for e in seen
                if e.client_operation_id == op.id and e.kind not in ("operationQueued", "operationDone")}
        assert gens <= {op.generation}, (op, gens)
