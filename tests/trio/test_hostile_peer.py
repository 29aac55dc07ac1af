"""A hostile or broken app-server never wedges a runtime (issue 18; R-WIRE-5, R-RT-1, R-RT-4).

Memory-peer tests: a line nested far too deep is a ``protocolError`` and reading goes on; a
reader that fails anyway takes the runtime to FAILED with ``runtimeUnhealthy`` and the next
operation restarts it cleanly; READY never outlives its connection.
"""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest
import trio

import codexrt
from codexrt._sansio._errors import CodexError
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._states import RuntimeState
from codexrt._sansio._wire import MAX_JSON_DEPTH, Violation, decode_envelope, json_depth_exceeds


def _nested(n: int) -> str:
    return "[" * n + "]" * n


def _rt(peers, *scenarios, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(*scenarios)], **kw))


async def _drain(events) -> list:
    """Every event published so far (the peer and reader are idle when this runs)."""
    await trio.testing.wait_all_tasks_blocked()
    out = []
    while True:
        with trio.move_on_after(0):
            out.append(await events.__anext__())
            continue
        return out


def test_depth_check_matches_a_reference_walk_r_wire_5():
    """R-WIRE-5: json_depth_exceeds agrees with a recursive walk, strings with brackets included."""
    def depth(v):
        if isinstance(v, dict):
            v = list(v.values())
        return 1 + max(map(depth, v), default=0) if isinstance(v, list) else 0

    import random
    r = random.Random(18)

    def gen(d):
        if d == 0 or r.random() < 0.25:
            return r.choice([1, None, "x[", "]}\\\"[", ""])
        if r.random() < 0.5:
            return [gen(d - 1) for _ in range(r.choice([0, 1, 1, 2]))]
        return {f"k{i}[": gen(d - 1) for i in range(r.choice([0, 1, 1, 2]))}

    deepest = 0
    for _ in range(1000):
        v = gen(r.randint(0, 40))
        data = json.dumps(v).encode()
        d = depth(v)
        deepest = max(deepest, d)
        for limit in range(0, d + 2):
            assert json_depth_exceeds(data, limit) is (d > limit), (data, limit)
    assert deepest > 20  # past the 16 peeling passes: the run walk was exercised too


def test_too_deep_envelope_is_a_violation_r_wire_5():
    ok = decode_envelope(f'{{"id":1,"method":"x","params":{_nested(MAX_JSON_DEPTH - 1)}}}'.encode())
    assert not isinstance(ok, Violation)
    for n in (MAX_JSON_DEPTH, 900, 100_000):  # 900: decodes in msgspec on a shallow stack
        env = decode_envelope(f'{{"id":1,"method":"x","params":{_nested(n)}}}'.encode())
        assert isinstance(env, Violation) and "nested deeper" in env.reason


async def test_deep_line_is_a_protocol_error_and_reading_goes_on_r_wire_5(peers):
    """R-WIRE-5: a 5,000-deep line from the app-server before a response: protocolError, the
    response still arrives, the runtime stays READY with its connection."""
    deep = '{"method":"x","params":' + _nested(5000) + '}\n'
    scenario = {"name": "deep", "rules": [{"match": {"method": "thread/list"},
                                           "actions": [{"raw": deep}, {"raw": "garbage\n"}, {"default": True}]}]}
    async with _rt(peers, scenario) as rt:
        with rt.subscribe() as events:
            conn = await rt.ensure_started()
            result = await conn.call("thread/list", {})
            assert result["data"] == []
            kinds = [(e.kind, e.payload.get("reason", "")) for e in await _drain(events)]
            errors = [r for k, r in kinds if k == "protocolError"]
            assert len(errors) == 2 and "nested deeper" in errors[0]
            assert rt.state is RuntimeState.READY and rt.conn is conn and not conn.closed.is_set()


async def test_reader_failure_fails_the_runtime_and_it_restarts_r_rt_4(peers, monkeypatch):
    """R-RT-4: if the reader itself raises (simulated: the framer breaks on a marker line), the
    runtime goes FAILED with runtimeUnhealthy, the pending call fails with a CodexError, and
    the next operation starts a new generation that works."""
    import codexrt._connection as connection

    real_merge = connection.merge_delta_read

    def exploding_merge(framer, data):
        if b"EXPLODE" in data:
            raise RuntimeError("simulated reader bug")
        return real_merge(framer, data)

    monkeypatch.setattr(connection, "merge_delta_read", exploding_merge)
    bad = {"name": "explode", "rules": [{"match": {"method": "thread/list"},
                                         "actions": [{"raw": '{"method":"EXPLODE"}\n'}]}]}
    async with _rt(peers, bad, "handshake-ok") as rt:
        with rt.subscribe() as events:
            conn = await rt.ensure_started()
            with pytest.raises(CodexError) as info:
                with trio.fail_after(30):
                    await conn.call("thread/list", {})
            assert info.value.code in ("PROTOCOL_ERROR", "CHILD_EXITED")
            await rt.wait_state(RuntimeState.FAILED)
            evs = await _drain(events)
            unhealthy = [e for e in evs if e.kind == "runtimeUnhealthy"]
            assert len(unhealthy) == 1 and "reader failed" in unhealthy[0].payload["reason"]
            assert rt.runtime_snapshot()["state"] == "FAILED" and rt.conn is None
            assert peers.peers[0].finished.is_set()  # the child was stopped, not left running
            conn2 = await rt.ensure_started()
            assert conn2 is not conn and rt.generation == 2 and rt.state is RuntimeState.READY
            assert (await conn2.call("thread/list", {}))["data"] == []


MALFORMED = {"name": "malformed-pages", "rules": [
    {"match": {"method": "thread/items/list"}, "actions": [{"respond": {"data": ["oops"], "nextCursor": None}}]},
    {"match": {"method": "thread/turns/list"},
     "actions": [{"respond": {"data": [1, "x", {"id": 5, "items": "no"}, {"items": [7, {"type": []}]}],
                              "nextCursor": None}}]},
    {"match": {"method": "model/list"}, "actions": [{"respond": {"data": ["oops", {"id": []}], "nextCursor": None}}]},
    {"match": {"method": "skills/list"}, "actions": [{"respond": {"data": "nope"}}]},
]}


async def test_malformed_history_and_catalog_pages_are_typed_errors_r_h_7(peers, nursery):
    """R-H-7, R-CAT-1: wrong-typed pages never raise outside the CodexError tree: the counter
    reports a failed count, readers and catalogs raise CodexError (or skip the bad entry)."""
    from codexrt._features._catalog import list_models, list_skills
    from codexrt._features._history import MessageCounter, open_history_reader

    async with _rt(peers, MALFORMED) as rt:
        thread = (await (await rt.ensure_started()).call("thread/start", {}))["thread"]["id"]
        counter = MessageCounter(nursery)
        res = await counter.count(thread, rt.ensure_started)
        assert res.count is None and res.error["code"] in ("PROTOCOL_ERROR", "RPC_ERROR")
        async with open_history_reader(rt) as reader:
            for call in (lambda: reader.read_page(thread, scope="items"),
                         lambda: reader.read_page(thread, scope="turns"),
                         lambda: reader.count_messages(thread)):
                try:
                    out = await call()
                except CodexError as exc:
                    assert exc.code
                else:  # a documented skip/failed count, never a crash
                    assert out is not None
        for call in (lambda: list_models(rt), lambda: list_skills(rt)):
            try:
                await call()
            except CodexError as exc:
                assert exc.code
        assert rt.state is RuntimeState.READY


async def test_malformed_pages_through_serve_are_answered_r_d_4(peers, nursery):
    """Through serve: every history/catalog command on malformed pages gets one reply (a
    result or an UPPER_SNAKE error) and serve goes on."""
    from codexrt._serve._daemon import DaemonConfig, serve_daemon

    to_send, to_recv = trio.testing.memory_stream_one_way_pair()
    from_send, from_recv = trio.testing.memory_stream_one_way_pair()
    cfg = DaemonConfig(runtime=RuntimeConfig(transports=[peers.sequence(MALFORMED)]), idle_timeout=None)
    await nursery.start(serve_daemon, to_recv, from_send, cfg)
    cmds = [("codex.countThreadMessages", {"threadId": "00000000-0000-4000-8000-000000000001"}),
            ("codex.readHistoryPage", {"threadId": "00000000-0000-4000-8000-000000000001", "scope": "items"}),
            ("codex.readHistoryPage", {"threadId": "00000000-0000-4000-8000-000000000001"}),
            ("codex.readThread", {"threadId": "00000000-0000-4000-8000-000000000001", "display": True}),
            ("codex.listModels", {}), ("codex.listSkills", {}), ("codex.listModels", {"maxPages": "x"}),
            ("status", {})]
    data = b"".join(json.dumps({"id": i, "command": c, "params": {"channelId": "c", **p}}).encode() + b"\n"
                    for i, (c, p) in enumerate(cmds))
    await to_send.send_all(data)
    replies: dict[int, list] = {}
    buf = b""
    with trio.fail_after(30):
        while len(replies) < len(cmds):
            buf += await from_recv.receive_some()
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                obj = json.loads(raw)
                if obj["type"] == "response":
                    replies.setdefault(obj["id"], []).append(obj)
    for i, got in replies.items():
        assert len(got) == 1, got
        r = got[0]
        assert r["ok"] or (r["error"]["code"].isupper() and r["error"]["code"] != "INTERNAL_ERROR"), (cmds[i], r)
    assert replies[6][0]["error"]["code"] == "INVALID_PARAMS"
    await to_send.aclose()


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


async def test_hostile_app_server_turn_completes_with_bounded_memory_r_wire_5(tmp_path):
    """R-WIRE-5, R-INT-3: the stdio ``hostile`` fake (garbage between frames, a line nested
    100,000 deep, a 100 MB line, 10,000 approval requests at once): the turn completes, each
    bad line is a protocolError, at most MAX_PENDING interactions are ever pending and every
    refused request got a decline (never an accept), tables stay bounded, and RSS stays far
    below what the input would take if it were kept."""
    from codexrt._runtime._interactions import InteractionRegistry
    from peer_fixtures.fake_app_server import read_log
    from tests._support import fake_server_factory

    log = tmp_path / "peer.log"
    before = _rss_mib()
    peak = before
    cfg = RuntimeConfig(transports=[fake_server_factory("hostile", log)])
    async with codexrt.open_runtime(cfg) as rt:
        with rt.subscribe() as events:
            op = rt.send("hi")
            kinds: dict[str, int] = {}
            most_pending = 0
            with trio.fail_after(120):
                async for ev in events:
                    kinds[ev.kind] = kinds.get(ev.kind, 0) + 1
                    most_pending = max(most_pending, rt._registry.pending_count())
                    peak = max(peak, _rss_mib())
                    if ev.kind == "operationDone":
                        break
            result = await op.wait()
            assert result.status == "completed", result
            assert kinds.get("protocolError", 0) >= 5  # 2 garbage, deep, 100 MB, array, string
            assert most_pending <= InteractionRegistry.MAX_PENDING
            assert 1 <= kinds.get("interactionOverflow", 0) <= 16  # coalesced: powers of two
            assert kinds.get("interactionRequested", 0) == InteractionRegistry.MAX_PENDING
            assert len(rt._registry.by_key) <= InteractionRegistry.MAX_PENDING + InteractionRegistry.MAX_SETTLED
            assert rt.state is RuntimeState.READY
            conn = rt.conn
            assert conn is not None and len(conn.core.inbound) <= InteractionRegistry.MAX_PENDING
            # the writer sends replies before requests: once this is answered, every refusal
            # queued before it reached the server (which logs lines in order)
            await conn.call("thread/list", {})
    assert peak - before < 300, f"RSS grew by {peak - before:.0f} MiB"
    replies = [m for m in read_log(log) if "method" not in m and ("result" in m or "error" in m)]
    refused = [m for m in replies if isinstance(m.get("id"), int) and m["id"] >= InteractionRegistry.MAX_PENDING]
    assert len(refused) == 10_000 - InteractionRegistry.MAX_PENDING
    assert all(m.get("result") == {"decision": "decline"} for m in refused)
    assert not any(isinstance(m.get("result"), dict) and m["result"].get("decision") == "accept" for m in replies)


@pytest.mark.parametrize("answer", [{"thread": "x"}, [1, 2], "just text", {"thread": {"id": ["no"]}}])
async def test_malformed_thread_start_answer_fails_the_op_not_the_runtime_r_op_4(peers, answer):
    """R-OP-4: a ``thread/start`` answer of the wrong shape fails that operation with a
    CodexError; the runtime lives on and the next send (answered normally) completes."""
    scenario = {"name": "bad-thread-start", "rules": [
        {"match": {"method": "thread/start"}, "times": 1, "actions": [{"respond": answer}]}]}
    async with _rt(peers, scenario) as rt:
        first = await rt.send("hi").wait()
        assert first.status == "failed" and first.error is not None
        assert first.error.code in ("PROTOCOL_ERROR", "OPERATION_FAILED")
        second = await rt.send("again").wait()
        assert second.status == "completed", second
        assert rt.state is RuntimeState.READY


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(min_value=1, max_value=3000), where=st.sampled_from(["params", "result", "error.data"]),
       kind=st.sampled_from(["[", "{\"k\":"]), mid=st.sampled_from(["", "1", "\"x]}\"", "null"]))
def test_r_wire_5_fuzz_deep_lines_never_crash_the_core(depth, where, kind, mid):
    """R-WIRE-5: a request, notification or response with a value nested ``depth`` deep in any
    payload never raises out of RpcCore: past MAX_JSON_DEPTH it is a ProtocolViolation (and a
    pending call stays pending), within it it is handled normally."""
    from codexrt._sansio._rpc import CallFailed, CallSucceeded, ProtocolViolation, RpcCore

    core = RpcCore()
    call = core.start_request("x", {})
    close = "]" if kind == "[" else "}"
    nested = kind * depth + mid + close * depth
    if kind != "[" and not mid:
        nested = kind * depth + "1" + close * depth
    line = {"params": f'{{"method":"m","params":{{"v":{nested}}}}}',
            "result": f'{{"id":{call.id},"result":{{"v":{nested}}}}}',
            "error.data": f'{{"id":{call.id},"error":{{"code":1,"message":"m","data":{nested}}}}}'}[where]
    events = core.receive_line(line.encode())
    total = depth + 2  # the line object and the one holding the nested value
    if total > MAX_JSON_DEPTH:
        assert [type(e) for e in events] == [ProtocolViolation]
        assert call.id in core.outbound  # still waiting: a bad line answers nobody
    elif where != "params":
        assert type(events[0]) in (CallSucceeded, CallFailed)
