"""MCP elicitation against the fake peer, with shapes recorded from the real server (R-INT-4, R-PRIV-1..3).

``peer_fixtures/scenarios/mcp-elicitation.json`` was rebuilt from
``tests/data/real-mcp-session-0.169.0.jsonl`` (``python -m peer_fixtures.real_server --mcp
--record …``: the real 0.169.0 app-server with the ``mcp`` SDK test server). The first test
keeps the two in step; the others run the library against the scenario: the tool-call approval
is an approval, the form answer is typed per schema, its privacy record is written before the
answer is forwarded, and the turn's MCP result is masked when the thread is read back.
"""

from __future__ import annotations

from pathlib import Path

import trio

import codexrt
from codexrt._features._history import open_history_reader
from codexrt._runtime._interactions import PrivacyStore
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._privacy import MASK
from tests._support import MemoryPeers


class _OrderedStore(PrivacyStore):
    """Notes how many replies the peer had received when each record was written."""

    def __init__(self, directory: str, peers: MemoryPeers) -> None:
        super().__init__(directory, "fp0123456789abcd")
        self.peers = peers
        self.replies_seen_at_write: list[int] = []

    def write(self, record):
        self.replies_seen_at_write.append(len(_replies(self.peers)))
        return super().write(record)


def _replies(peers: MemoryPeers) -> list[dict]:
    return [m for m in peers.received(-1) if "method" not in m and ("result" in m or "error" in m)]


async def _next(events, kind):
    with trio.fail_after(10):
        async for ev in events:
            if ev.kind == kind:
                return ev
    raise AssertionError(f"stream ended before {kind}")


async def test_r_int_4_r_priv_1_recorded_mcp_approval_form_record_and_masked_readback(peers, tmp_path: Path):
    store = _OrderedStore(str(tmp_path / "privacy"), peers)
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory("mcp-elicitation")])) as rt:
        rt.set_privacy_store(store)
        with rt.subscribe() as events:
            op = rt.send("fill the form")
            approval = (await _next(events, "interactionRequested")).payload
            assert approval["kind"] == "mcpToolApproval"
            assert approval["elicitation"]["toolApproval"]["persistChoices"] == ["session", "always"]
            await rt.interactions[approval["interactionKey"]].accept()
            form = (await _next(events, "interactionRequested")).payload
            assert form["kind"] == "elicitation" and form["elicitation"]["mode"] == "form"
            await rt.interactions[form["interactionKey"]].submit_elicitation(
                {"name": "Ann", "age": "42", "ratio": "0.5", "subscribe": "no", "colors": ["red"]})
            result = await op.wait()
        async with open_history_reader(rt) as reader:
            tr = await reader.read_thread(result.thread_id)
    replies = _replies(peers)
    assert replies[0]["result"] == {"action": "accept", "content": {}}
    assert replies[1]["result"] == {"action": "accept", "content": {"name": "Ann", "age": 42, "ratio": 0.5,
                                                                    "subscribe": False, "colors": ["red"]}}
    # one record, for the form only, written while the form's answer was not yet forwarded
    assert store.replies_seen_at_write == [1]
    (record,) = store.load().records
    assert record.kind == "elicitation" and record.turn_id == result.turn_id and record.call_id is None
    assert {q.id: q.is_secret for q in record.questions} == {"age": True, "colors": False, "name": True,
                                                          "nickname": True, "ratio": True, "subscribe": False}
    # the turn's MCP result (which echoes the answers) is masked; the assistant text is not
    (call,) = [r for r in tr.records() if r.kind == "mcpToolCall"]
    assert [b.text for b in call.content] == [MASK]
    assert [r.text for r in tr.records() if r.kind == "assistantMessage"] == ["Form handled."]


async def test_r_int_4_recorded_mcp_approval_declined_fails_the_call(peers, tmp_path: Path):
    """Never granted by default: ``decline()`` refuses the call; no form is asked, no record written."""
    store = PrivacyStore(str(tmp_path / "privacy"), "fp0123456789abcd")
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory("mcp-elicitation")])) as rt:
        rt.set_privacy_store(store)
        with rt.subscribe() as events:
            op = rt.send("fill the form")
            approval = (await _next(events, "interactionRequested")).payload
            await rt.interactions[approval["interactionKey"]].decline()
            done = await op.wait()
        async with open_history_reader(rt) as reader:
            tr = await reader.read_thread(done.thread_id)
    assert _replies(peers) == [{"id": 0, "result": {"action": "decline", "content": None}}]
    assert done.status == "completed"
    (call,) = [r for r in tr.records() if r.kind == "mcpToolCall"]
    assert call.status == "failed" and call.error == "user rejected MCP tool call"
    assert store.load().records == []
