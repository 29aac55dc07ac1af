"""``codexrt acp`` in process, from the review of issue 30 with an editor author's eyes: what a
client driving it by the docs found unbounded. (Harness: ``tests/trio/test_acp_agent.py``.)"""

from __future__ import annotations

import collections

import trio
import trio.testing

from codexrt._acp._agent import MAX_OPEN_REQUESTS
from tests._support import MemoryPeers
from tests.trio.test_acp_agent import Client, _config


async def test_a_client_that_sends_requests_but_never_reads_keeps_the_agent_bounded(nursery):
    """An editor whose reader stalls while it keeps sending requests (a poll, a retry loop):
    every request used to become a task of its own, blocked on the full stdout, so the agent
    grew without bound (100,000 ``initialize`` lines: 37 MB → 687 MB). Now at most
    ``MAX_OPEN_REQUESTS`` run at once; a request over it is refused inline (``-32600`` naming
    the limit), which holds the reader on stdout like any inline answer — and once the client
    reads again, every request has exactly one answer."""
    peers = MemoryPeers(nursery)
    c = await Client(_config(None, peers, "handshake-ok")).start(nursery)
    await c.call("initialize", {"protocolVersion": 1})
    c.stdout.open = trio.Event()  # the client stops reading: nothing the agent writes gets out
    total = MAX_OPEN_REQUESTS * 3
    for i in range(total):
        await c.send({"jsonrpc": "2.0", "id": f"r{i}", "method": "initialize", "params": {"protocolVersion": 1}})
    await trio.testing.wait_all_tasks_blocked()
    assert c.agent._open.count <= MAX_OPEN_REQUESTS
    c.stdout.open.set()
    await c.to_send.aclose()  # stdin EOF: the agent drains and ends
    await c.read_to_end()
    answers = collections.Counter(ln["id"] for ln in c.lines if "method" not in ln and str(ln.get("id")).startswith("r"))
    assert set(answers) == {f"r{i}" for i in range(total)} and set(answers.values()) == {1}
    refused = [ln for ln in c.lines if "error" in ln and str(ln.get("id")).startswith("r")]
    assert refused and all(ln["error"]["code"] == -32600 and "in flight" in ln["error"]["message"] for ln in refused)
