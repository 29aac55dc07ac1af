"""``codexrt acp`` in process (``run_acp_agent`` over memory streams, memory peers from
``peer_fixtures``): the fault barrier, one answer per request, a client that stops reading,
session lifetime and the index, cancel, approvals, EOF (issue 30). Waits are on lines and
conditions; timeouts run on ``autojump_clock``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from codexrt import RuntimeConfig
from codexrt._acp._agent import AcpAgent, AcpConfig, run_acp_agent
from codexrt._acp._index import SessionIndex
from tests._support import MemoryPeers


class _GatedSend(trio.abc.SendStream):
    """The agent's stdout; while ``open`` is clear it accepts nothing (a client that stopped
    reading: the pipe is full)."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self.inner = inner
        self.open = trio.Event()
        self.open.set()

    async def send_all(self, data: Any) -> None:
        await self.open.wait()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.open.wait()

    async def aclose(self) -> None:
        await self.inner.aclose()


class Client:
    def __init__(self, config: AcpConfig) -> None:
        self.to_send, self.to_recv = trio.testing.memory_stream_one_way_pair()
        out_send, self.from_recv = trio.testing.memory_stream_one_way_pair()
        self.stdout = _GatedSend(out_send)
        self.config = config
        self.buf = b""
        self.lines: list[dict[str, Any]] = []
        self.seen = 0
        self.n = 100

    async def start(self, nursery: trio.Nursery) -> "Client":
        self.agent: AcpAgent = await nursery.start(run_acp_agent, self.to_recv, self.stdout, self.config)
        return self

    async def send_raw(self, data: bytes) -> None:
        await self.to_send.send_all(data)

    async def send(self, obj: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(obj).encode() + b"\n")

    async def request(self, method: str, params: Any) -> int:
        self.n += 1
        await self.send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        return self.n

    async def _read(self) -> bool:
        chunk = await self.from_recv.receive_some()
        if not chunk:
            return False
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        self.lines += [json.loads(raw) for raw in done]
        return True

    async def next(self, pred: Any) -> dict[str, Any]:
        with trio.fail_after(60):
            while True:
                while self.seen < len(self.lines):
                    line = self.lines[self.seen]
                    self.seen += 1
                    if pred(line):
                        return line
                assert await self._read(), "stdout ended"

    async def answer_of(self, rid: Any) -> dict[str, Any]:
        found = [ln for ln in self.lines if ln.get("id") == rid and "method" not in ln]
        if found:
            return found[0]
        return await self.next(lambda m: m.get("id") == rid and "method" not in m)

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        return await self.answer_of(await self.request(method, params))

    async def read_to_end(self) -> None:
        """stdin EOF was sent: wait for the agent to finish, then read what it wrote."""
        with trio.fail_after(60):
            await self.agent.finished.wait()
            await self.stdout.aclose()
            while await self._read():
                pass

    async def new_session(self) -> str:
        await self.call("initialize", {"protocolVersion": 1})
        res = await self.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        return res["result"]["sessionId"]

    def chunks(self, sid: str) -> list[str]:
        return [ln["params"]["update"]["content"]["text"] for ln in self.lines
                if ln.get("method") == "session/update" and ln["params"]["sessionId"] == sid
                and ln["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]


def _config(tmp_path: Path | None, peers: MemoryPeers, *scenarios: Any, **kw: Any) -> AcpConfig:
    """``tmp_path`` None: the session index in memory (tests on ``autojump_clock``, where a
    worker thread's file I/O would let virtual time run out)."""
    factory = peers.sequence(*scenarios) if len(scenarios) > 1 else peers.factory(scenarios[0])
    index = "" if tmp_path is None else str(tmp_path / "sessions.json")
    return AcpConfig(runtime=RuntimeConfig(transports=[factory]), index_path=index, **kw)


async def test_every_request_is_answered_once_even_when_a_handler_breaks(nursery, tmp_path, monkeypatch):
    """The fault barrier: an internal error is -32603 naming the method (no traceback on the
    wire) and the agent goes on; a bad line beside it is answered too."""
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "handshake-ok")).start(nursery)

    async def broken(self: Any, p: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(AcpAgent, "_list", broken)
    await c.call("initialize", {"protocolVersion": 1})
    bad = await c.call("session/list", {})
    assert bad["error"] == {"code": -32603, "message": "internal error in session/list: RuntimeError",
                            "data": {"method": "session/list"}}
    await c.send_raw(b'{"jsonrpc":"2.0","id":"p","method":"session/new","params":\n')
    assert (await c.answer_of("p"))["error"]["code"] == -32700
    res = await c.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    assert "sessionId" in res["result"]
    await c.to_send.aclose()
    await c.read_to_end()
    ids = [ln["id"] for ln in c.lines if "method" not in ln]
    assert len(ids) == len(set(map(repr, ids)))  # one answer per request


async def test_a_turn_streams_and_ends_end_turn_and_the_thread_is_recorded(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "handshake-ok")).start(nursery)
    sid = await c.new_session()
    res = await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert res["result"] == {"stopReason": "end_turn"}
    assert "".join(c.chunks(sid)) == "Hello from the fake peer."
    # every update came before the answer
    assert all(c.lines.index(ln) < c.lines.index(res) for ln in c.lines if ln.get("method") == "session/update")
    starts = peers.received(0, "turn/start")
    assert len(starts) == 1 and starts[0]["params"]["approvalPolicy"] == "untrusted"  # "ask" by default
    await c.to_send.aclose()
    await c.read_to_end()
    entry = SessionIndex(str(tmp_path / "sessions.json")).get(sid)
    assert entry is not None and entry["threadId"] == starts[0]["params"]["threadId"]


async def test_a_client_that_stops_reading_gets_the_text_merged_and_exact(nursery, tmp_path, autojump_clock):
    """2,000 deltas while stdout accepts nothing: codex finishes the turn meanwhile; once the
    client reads again, far fewer chunks than deltas carry exactly the text."""
    peers = MemoryPeers(nursery)
    text = "".join(f"<{i}>" for i in range(2000))
    scenario = {"name": "flood", "defaults": True, "settings": {"text": text, "deltas": 2000}}
    c = await Client(_config(None, peers, scenario)).start(nursery)
    sid = await c.new_session()
    c.stdout.open = trio.Event()  # the client stops reading
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    rt = None
    with trio.fail_after(60):
        while rt is None or rt.busy:
            await trio.sleep(0.5)
            rt = c.agent.sessions[sid].rt
    assert peers.peers[0].received_of("turn/start")  # the model's turn finished while nothing was read
    c.stdout.open.set()
    res = await c.answer_of(rid)
    assert res["result"]["stopReason"] == "end_turn"
    chunks = c.chunks(sid)
    assert "".join(chunks) == text
    assert len(chunks) < 200


async def test_cancel_answers_cancelled_and_the_next_prompt_works(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "hang-turn")).start(nursery)
    sid = await c.new_session()
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hang"}]})
    await peers.wait_received(0, "turn/start")
    await c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    assert (await c.answer_of(rid))["result"] == {"stopReason": "cancelled"}
    assert peers.received(0, "turn/interrupt")


async def test_cancel_request_of_a_prompt_is_request_cancelled(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "hang-turn")).start(nursery)
    sid = await c.new_session()
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hang"}]})
    await peers.wait_received(0, "turn/start")
    await c.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}})
    assert (await c.answer_of(rid))["error"]["code"] == -32800
    await peers.wait_received(0, "turn/interrupt")


@pytest.mark.parametrize("option,decision,stop", [("allow", "accept", "end_turn"), ("reject", "decline", "end_turn"),
                                                  ("stop", "cancel", "cancelled")])
async def test_permission_options_map_to_decisions(nursery, tmp_path, option, decision, stop):
    """Reject once declines that call and the turn goes on; the stop option cancels the turn."""
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "reverse-approval")).start(nursery)
    sid = await c.new_session()
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]})
    ask = await c.next(lambda m: m.get("method") == "session/request_permission")
    assert [o["kind"] for o in ask["params"]["options"]] == ["allow_once", "allow_always", "reject_once", "reject_once"]
    outcome = {"outcome": "selected", "optionId": option}
    await c.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": outcome}})
    assert (await c.answer_of(rid))["result"]["stopReason"] == stop
    replies = [m for m in peers.received(0) if m.get("id") == 0 and "method" not in m]
    assert [m["result"]["decision"] for m in replies] == [decision]


async def test_cancel_with_a_permission_open_withdraws_it_and_declines(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "reverse-approval")).start(nursery)
    sid = await c.new_session()
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]})
    ask = await c.next(lambda m: m.get("method") == "session/request_permission")
    await c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    withdrawn = await c.next(lambda m: m.get("method") == "$/cancel_request")
    assert withdrawn["params"] == {"requestId": ask["id"]}
    assert (await c.answer_of(rid))["result"]["stopReason"] == "cancelled"
    replies = [m for m in peers.received(0) if m.get("id") == 0 and "method" not in m]
    assert all(m.get("result", {}).get("decision") != "accept" for m in replies)


async def test_an_unanswered_permission_holds_and_nothing_runs(nursery, tmp_path, autojump_clock):
    peers = MemoryPeers(nursery)
    c = await Client(_config(None, peers, "reverse-approval")).start(nursery)
    sid = await c.new_session()
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "run"}]})
    await c.next(lambda m: m.get("method") == "session/request_permission")
    await trio.sleep(3600)
    assert not [m for m in peers.received(0) if m.get("id") == 0 and "method" not in m]
    assert not [ln for ln in c.lines if ln.get("id") == rid]
    await c.to_send.aclose()  # EOF: the question is declined, the turn cancelled
    await c.read_to_end()
    assert [ln for ln in c.lines if ln.get("id") == rid][0]["result"]["stopReason"] == "cancelled"
    replies = [m for m in peers.received(0) if m.get("id") == 0 and "method" not in m]
    assert replies and all(m["result"]["decision"] != "accept" for m in replies)


async def test_a_crashed_app_server_fails_the_prompt_once_and_the_next_resumes(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "disconnect-mid-turn", "handshake-ok")).start(nursery)
    sid = await c.new_session()
    first = await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]})
    assert first["error"]["code"] == -32603 and first["error"]["data"]["code"] == "CHILD_EXITED"
    thread = peers.received(0, "thread/start")
    second = await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]})
    assert second["result"]["stopReason"] == "end_turn"
    resumed = peers.received(1, "thread/resume")
    assert resumed and resumed[0]["params"]["threadId"] == c.agent.sessions[sid].thread_id
    assert thread and len(peers.received(1, "turn/start")) == 1  # nothing re-sent


async def test_unknown_sessions_and_busy_sessions_are_refused(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "hang-turn")).start(nursery)
    sid = await c.new_session()
    gone = await c.call("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]})
    assert gone["error"]["code"] == -32002
    await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hang"}]})
    await peers.wait_received(0, "turn/start")
    busy = await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]})
    assert busy["error"]["code"] == -32600
    relative = await c.call("session/new", {"cwd": "rel", "mcpServers": []})
    assert relative["error"]["code"] == -32602 and "cwd" in relative["error"]["message"]
    bad_opt = await c.call("session/set_config_option", {"sessionId": sid, "configId": "approval", "value": "yolo"})
    assert bad_opt["error"]["code"] == -32602
    ok = await c.call("session/set_config_option", {"sessionId": sid, "configId": "approval", "value": "on-request"})
    assert {o["id"]: o["currentValue"] for o in ok["result"]["configOptions"]}["approval"] == "on-request"


async def test_close_retires_the_sessions_child(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "handshake-ok")).start(nursery)
    sid = await c.new_session()
    await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert (await c.call("session/close", {"sessionId": sid}))["result"] == {}
    assert sid not in c.agent.sessions
    await peers.peers[0].finished.wait()
    assert (await c.call("session/close", {"sessionId": sid}))["error"]["code"] == -32002


async def test_idle_sessions_give_back_their_child(nursery, tmp_path, autojump_clock):
    peers = MemoryPeers(nursery)
    c = await Client(_config(None, peers, "handshake-ok", idle_timeout=60.0)).start(nursery)
    sid = await c.new_session()
    await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    await peers.peers[0].finished.wait()  # retired after 60 s idle (virtual time)
    again = await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert again["result"]["stopReason"] == "end_turn"
    assert peers.received(1, "thread/resume")


def _questions_scenario() -> dict[str, Any]:
    ask = {"request": "item/tool/requestUserInput", "params": {
        "threadId": "$thread_id", "turnId": "$turn_id", "itemId": "ask_1",
        "questions": [{"id": "color", "header": "Color", "question": "Which one?", "isOther": False,
                       "isSecret": False, "options": [{"label": "red", "description": ""},
                                                      {"label": "blue", "description": ""}]}]}}
    return {"name": "questions", "defaults": True, "rules": [
        {"match": {"method": "turn/start"}, "actions": [{"turn_response": True}, {"turn_started": True}, ask]},
        {"match": {"reply_to": 0}, "actions": [{"end_turn": "completed"}]}]}


@pytest.mark.parametrize("elicitation,answer,expected", [
    ({"form": {}}, {"action": "accept", "content": {"color": "blue"}}, {"answers": {"color": {"answers": ["blue"]}}}),
    ({"form": {}}, {"action": "decline"}, None),
    (None, None, None),  # no elicitation capability: the safe negative answer, never an accept
])
async def test_questions_go_to_elicitation_when_the_client_offers_it(nursery, tmp_path, elicitation, answer, expected):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, _questions_scenario())).start(nursery)
    caps = {"elicitation": elicitation} if elicitation else {}
    await c.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    sid = (await c.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "ask me"}]})
    if elicitation:
        req = await c.next(lambda m: m.get("method") == "elicitation/create")
        props = req["params"]["requestedSchema"]["properties"]
        assert req["params"]["mode"] == "form" and props["color"]["enum"] == ["red", "blue"]
        await c.send({"jsonrpc": "2.0", "id": req["id"], "result": answer})
    assert (await c.answer_of(rid))["result"]["stopReason"] == "end_turn"
    [reply] = [m for m in peers.received(0) if m.get("id") == 0 and "method" not in m]
    if expected is not None:
        assert reply["result"] == expected
    else:  # declined: no answers given
        assert "error" in reply or reply.get("result") in ({"answers": {}},)
    assert not [m for m in c.lines if m.get("method") == "elicitation/create"] or elicitation


async def test_the_model_option_is_filled_from_the_servers_model_list(nursery, tmp_path):
    """After the first turn (a child is up) one ``model/list`` fills the model option of every
    session (``config_option_update``); sessions made later offer them at once."""
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "handshake-ok")).start(nursery)
    sid = await c.new_session()
    await c.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    upd = await c.next(lambda m: m.get("method") == "session/update"
                       and m["params"]["update"]["sessionUpdate"] == "config_option_update")
    [model] = [o for o in upd["params"]["update"]["configOptions"] if o["id"] == "model"]
    offered = [o["value"] for o in model["options"]]
    assert offered[0] == "default" and len(offered) > 1
    assert len(peers.received(0, "model/list")) == 1
    later = await c.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    [model] = [o for o in later["result"]["configOptions"] if o["id"] == "model"]
    assert [o["value"] for o in model["options"]] == offered


async def test_session_cancel_sent_as_a_request_cancels_and_is_answered(nursery, tmp_path):
    peers = MemoryPeers(nursery)
    c = await Client(_config(tmp_path, peers, "hang-turn")).start(nursery)
    sid = await c.new_session()
    rid = await c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hang"}]})
    await peers.wait_received(0, "turn/start")
    assert (await c.call("session/cancel", {"sessionId": sid}))["result"] is None
    assert (await c.answer_of(rid))["result"] == {"stopReason": "cancelled"}
