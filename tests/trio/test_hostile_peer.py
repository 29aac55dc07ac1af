"""A hostile or broken app-server never wedges a runtime (issue 18; R-WIRE-5, R-RT-1, R-RT-4).

Memory-peer tests: a line nested far too deep is a ``protocolError`` and reading goes on; a
reader that fails anyway takes the runtime to FAILED with ``runtimeUnhealthy`` and the next
operation restarts it cleanly; READY never outlives its connection.
"""

from __future__ import annotations

import json

import pytest
import trio

import codexrt
from codexrt._sansio._errors import CodexError
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._states import RuntimeState


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
