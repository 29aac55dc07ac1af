"""Split from ``tests/trio/test_hostile_peer.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import os

import trio

import codexrt
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._states import RuntimeState


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
