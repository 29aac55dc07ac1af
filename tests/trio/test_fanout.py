"""Caps on fan-out (issue 35): helper children and workspace diffs run a bounded number at once,
per channel and overall; the rest wait in a bounded FIFO queue, past which they are refused
with ``QUEUE_FULL`` (``codexrt/_io/_fanout.py``, docs/runtime.md's caps table).

The limiter's rules on its own (counts, never times), then ``run_helper`` against in-memory
fake app-servers: 40 titles asked at once start 2 children, not 40.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from codexrt import OperationFailed, QueueFull, RuntimeConfig
from codexrt._features._helpers import generate_title
from codexrt._io import _fanout
from codexrt._io._fanout import FanOutLimiter


def _limiter() -> FanOutLimiter:
    return FanOutLimiter("thing", per_key=2, overall=3, queue_per_key=2, queue_overall=3)


async def test_issue_35_per_channel_and_overall_caps_then_queue_then_refusal() -> None:
    lim = _limiter()
    release = trio.Event()
    running: list[str] = []
    peak = {"n": 0}
    outcomes: list[tuple[str, str]] = []

    async def job(key: str) -> None:
        try:
            async with lim.slot(key):
                running.append(key)
                peak["n"] = max(peak["n"], len(running))
                await release.wait()
                running.remove(key)
                outcomes.append((key, "ran"))
        except QueueFull as exc:
            outcomes.append((key, f"refused:{exc.details['scope']}"))

    async with trio.open_nursery() as n:
        for key in ["a"] * 5:  # 2 run, 2 queue, the 5th is refused (channel queue full)
            n.start_soon(job, key)
            await trio.testing.wait_all_tasks_blocked()
        assert lim.statistics()["running"] == 2 and lim.statistics()["queued"] == 2
        assert outcomes == [("a", "refused:channel")]
        for key in ["b", "c", "c"]:  # b runs (3rd overall); c queues once (overall queue 3), then refused
            n.start_soon(job, key)
            await trio.testing.wait_all_tasks_blocked()
        assert lim.statistics()["running"] == 3
        assert lim.statistics()["queued"] == 3 and outcomes[-1] == ("c", "refused:overall")
        release.set()
    assert peak["n"] == 3  # never more than the overall cap at once
    assert sorted(k for k, o in outcomes if o == "ran") == ["a", "a", "a", "a", "b", "c"]
    assert lim.statistics()["running"] == 0 and lim.statistics()["queued"] == 0


async def test_issue_35_queue_is_fifo_and_a_cancelled_waiter_leaves_it() -> None:
    lim = FanOutLimiter("thing", per_key=1, overall=1, queue_per_key=5, queue_overall=5)
    order: list[int] = []
    gate = trio.Event()

    async def job(i: int) -> None:
        async with lim.slot("k"):
            order.append(i)
            if i == 0:
                await gate.wait()

    async with trio.open_nursery() as n:
        n.start_soon(job, 0)
        await trio.testing.wait_all_tasks_blocked()
        scopes = {}
        for i in (1, 2, 3):
            async def wrapped(i: int = i) -> None:
                with trio.CancelScope() as s:
                    scopes[i] = s
                    await job(i)
            n.start_soon(wrapped)
            await trio.testing.wait_all_tasks_blocked()
        assert lim.statistics()["queued"] == 3
        scopes[2].cancel()  # leaves the queue without running
        await trio.testing.wait_all_tasks_blocked()
        assert lim.statistics()["queued"] == 2
        gate.set()
    assert order == [0, 1, 3] and lim.statistics()["running"] == 0


async def test_issue_35_forty_titles_at_once_start_two_children(peers, autojump_clock) -> None:
    """40 ``generate_title`` on one channel while the model hangs: 2 children start (the
    per-channel cap), 8 wait in the queue (and time out there, their wait counts in their
    timeout), 30 are refused at once with QUEUE_FULL — and every started child is reaped."""
    cfg = RuntimeConfig(channel_id="ch-1", transports=[peers.factory("hang-turn")])
    codes: list[str] = []

    async def title() -> None:
        try:
            await generate_title(cfg, "name this", timeout=30.0)
        except QueueFull as exc:
            codes.append(exc.code)
        except OperationFailed as exc:
            codes.append(exc.code + (":queued" if exc.details.get("queued") else ""))

    async with trio.open_nursery() as n:
        for _ in range(40):
            n.start_soon(title)
        await trio.testing.wait_all_tasks_blocked()
        assert len(peers.peers) == 2 and _fanout.HELPERS.statistics()["queued"] == 8
    assert codes.count("QUEUE_FULL") == 30
    assert codes.count("HELPER_TIMEOUT") == 2 and codes.count("HELPER_TIMEOUT:queued") == 8
    assert len(peers.peers) == 2 and all(p.finished.is_set() for p in peers.peers)
    assert _fanout.HELPERS.statistics()["running"] == 0 and _fanout.HELPERS.statistics()["queued"] == 0


async def test_issue_35_other_channels_share_the_overall_cap(peers, autojump_clock) -> None:
    cfgs = [RuntimeConfig(channel_id=f"ch-{i}", transports=[peers.factory("hang-turn")]) for i in range(6)]
    outcomes: list[str] = []

    async def title(cfg: RuntimeConfig) -> None:
        try:
            await generate_title(cfg, "x", timeout=30.0)
        except OperationFailed as exc:
            outcomes.append(exc.code)

    async with trio.open_nursery() as n:
        for cfg in cfgs:
            n.start_soon(title, cfg)
        await trio.testing.wait_all_tasks_blocked()
        assert len(peers.peers) == _fanout.HELPERS.overall == 4
    assert len(outcomes) == 6 and len(peers.peers) == 4


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        FanOutLimiter("x", per_key=0, overall=1, queue_per_key=0, queue_overall=0)


async def test_issue_35_serve_answers_forty_titles_with_two_children(nursery, autojump_clock) -> None:
    """The same through ``codexrt serve`` (in process): 40 ``codex.generateTitle`` at once on one
    channel — each answered exactly once: 30 ``QUEUE_FULL`` at once, 10 ``HELPER_TIMEOUT`` (2 ran,
    8 waited); 2 helper children were started, both reaped."""
    from codexrt._serve._daemon import DaemonConfig
    from tests._support import MemoryPeers
    from tests.trio.test_serve_bounds import Wire

    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("hang-turn")]),
                                   idle_timeout=None)).start(nursery)
    ids = [await wire.send("codex.generateTitle", {"channelId": "c", "message": "name this", "timeout": 30})
           for _ in range(40)]
    replies: dict[int, dict] = {}

    def collect(line: dict) -> bool:
        if line.get("type") == "response":
            assert line["id"] not in replies  # exactly once
            replies[line["id"]] = line
        return len(replies) == len(ids)

    await wire.wait_for(collect, timeout=120)
    assert sorted(replies) == sorted(ids) and not any(r["ok"] for r in replies.values())
    codes = [r["error"]["code"] for r in replies.values()]
    assert codes.count("QUEUE_FULL") == 30 and codes.count("HELPER_TIMEOUT") == 10
    assert len(peers.peers) == 2 and all(p.finished.is_set() for p in peers.peers)
    await wire.to_send.aclose()
    await wire.read_to_end()


def test_issue_35_one_limiter_serves_trio_runs_on_different_threads() -> None:
    """The blocking facade runs Trio on a thread of its own: a slot freed in one run wakes a
    waiter of another run on another thread (through that run's token)."""
    import threading

    lim = FanOutLimiter("thing", per_key=1, overall=1, queue_per_key=1, queue_overall=1)
    holding, release_a, order = threading.Event(), threading.Event(), []

    async def a() -> None:
        async with lim.slot("k"):
            order.append("a")
            holding.set()
            await trio.to_thread.run_sync(release_a.wait)

    async def b() -> None:
        await trio.to_thread.run_sync(holding.wait)
        async with trio.open_nursery() as n:
            async def take() -> None:
                async with lim.slot("k"):
                    order.append("b")
            n.start_soon(take)
            await trio.testing.wait_all_tasks_blocked()
            assert lim.statistics()["queued"] == 1
            release_a.set()

    ta = threading.Thread(target=trio.run, args=(a,))
    ta.start()
    trio.run(b)
    ta.join(30)
    assert order == ["a", "b"] and lim.statistics()["running"] == 0 and lim.statistics()["queued"] == 0
