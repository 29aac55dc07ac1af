"""Overload retry (issue 13, R-WIRE-10 companion): ``-32001`` is retried with bounded
exponential backoff + jitter for read-only methods only; ``turn/start`` and every other
state-changing request surface a typed ``SERVER_OVERLOADED`` at once.

The peer is the scripted fake app-server in memory (a dict scenario answering ``-32001`` N
times), so the request log proves how many times each request was written; the backoff is
proven on ``autojump_clock`` by reading ``trio.current_time()``.
"""

from __future__ import annotations

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig
from codexrt._sansio._errors import LocalProtocolError, RpcError, ServerOverloaded
from codexrt._io._retry import OVERLOAD_MESSAGE, Backoff, call_read_only

OVERLOAD = {"error": {"code": -32001, "message": OVERLOAD_MESSAGE}}


def overloaded(method: str, times: int, *, error: dict | None = None) -> dict:
    """A scenario whose first ``times`` requests of ``method`` are refused as overloaded."""
    return {
        "name": f"overload-{method}-{times}",
        "rules": [{"match": {"method": method}, "actions": [error or OVERLOAD], "times": times}],
    }


def _rt(peers, scenario):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(scenario)]))


def _count(peers, method):
    return len(peers.received(-1, method))


# -- sans-IO: the policy and the recogniser -------------------------------------------------


# -- against the fake peer --------------------------------------------------------------------


async def test_retried_read_succeeds_after_n_overloads_with_backoff_on_the_clock(peers, autojump_clock):
    b = Backoff(initial=0.5, factor=2.0, maximum=10.0, attempts=5, jitter=0.0)
    seen: list[tuple[int, float]] = []
    async with _rt(peers, overloaded("model/list", 3)) as rt:
        conn = await rt.ensure_started()
        t0 = trio.current_time()
        result = await call_read_only(conn, "model/list", {}, backoff=b,
                                      on_retry=lambda n, d, e: seen.append((n, d)))
        elapsed = trio.current_time() - t0
    assert "data" in result  # the real answer after three refusals
    assert _count(peers, "model/list") == 4
    assert seen == [(1, 0.5), (2, 1.0), (3, 2.0)]
    assert elapsed == pytest.approx(3.5)  # 0.5 + 1 + 2: exponential, nothing else waited


async def test_jitter_shortens_each_delay_by_at_most_its_fraction(peers, autojump_clock):
    b = Backoff(initial=1.0, factor=2.0, maximum=10.0, attempts=4, jitter=0.5)
    draws = iter([0.0, 0.5, 1.0])
    async with _rt(peers, overloaded("thread/list", 3)) as rt:
        conn = await rt.ensure_started()
        t0 = trio.current_time()
        await call_read_only(conn, "thread/list", {}, backoff=b, rng=lambda: next(draws))
        assert trio.current_time() - t0 == pytest.approx(1.0 + 1.5 + 2.0)


async def test_read_gives_up_after_the_bound_with_typed_error(peers, autojump_clock):
    b = Backoff(initial=0.25, factor=2.0, maximum=1.0, attempts=4, jitter=0.0)
    async with _rt(peers, overloaded("thread/read", 100)) as rt:
        conn = await rt.ensure_started()
        t0 = trio.current_time()
        with pytest.raises(ServerOverloaded) as info:
            await call_read_only(conn, "thread/read", {"threadId": "t"}, backoff=b)
        assert trio.current_time() - t0 == pytest.approx(0.25 + 0.5 + 1.0)
    err = info.value
    assert err.code == "SERVER_OVERLOADED" and err.rpc_code == -32001
    assert err.details["attempts"] == 4 and err.details["method"] == "thread/read"
    assert _count(peers, "thread/read") == 4


async def test_overload_recognised_by_message_is_retried_too(peers, autojump_clock):
    recoded = {"error": {"code": -32000, "message": OVERLOAD_MESSAGE}}
    async with _rt(peers, overloaded("model/list", 1, error=recoded)) as rt:
        conn = await rt.ensure_started()
        await call_read_only(conn, "model/list", {}, backoff=Backoff(jitter=0))
    assert _count(peers, "model/list") == 2


async def test_other_errors_are_not_retried(peers, autojump_clock):
    notfound = {"error": {"code": -32600, "message": "thread not found: t"}}
    async with _rt(peers, overloaded("thread/read", 5, error=notfound)) as rt:
        conn = await rt.ensure_started()
        with pytest.raises(RpcError) as info:
            await call_read_only(conn, "thread/read", {"threadId": "t"})
        assert not isinstance(info.value, ServerOverloaded)
    assert _count(peers, "thread/read") == 1


async def test_state_changing_method_is_refused_before_writing(peers, autojump_clock):
    async with _rt(peers, "handshake-ok") as rt:
        conn = await rt.ensure_started()
        for method in ("turn/start", "turn/interrupt", "thread/start", "config/mcpServer/reload"):
            with pytest.raises(LocalProtocolError):
                await call_read_only(conn, method, {})
    assert not any(_count(peers, m) for m in ("turn/start", "turn/interrupt", "thread/start"))


async def test_turn_start_overloaded_is_not_retried_and_fails_typed(peers, autojump_clock):
    async with _rt(peers, overloaded("turn/start", 1)) as rt:
        op = rt.send("hello")
        with trio.fail_after(60):
            result = await op.wait()
        assert result.status == "failed"
        assert isinstance(result.error, ServerOverloaded)
        assert result.error.code == "SERVER_OVERLOADED"
        assert _count(peers, "turn/start") == 1  # written once, never re-sent
        # the runtime stays usable: the next send starts a turn normally
        again = rt.send("again", thread_id=result.thread_id)
        with trio.fail_after(60):
            assert (await again.wait()).status == "completed"
    assert _count(peers, "turn/start") == 2


async def test_cancel_during_backoff_leaves_nothing_running(peers, autojump_clock):
    async with _rt(peers, overloaded("model/list", 100)) as rt:
        conn = await rt.ensure_started()
        with trio.move_on_after(0.3) as cs:
            await call_read_only(conn, "model/list", {}, backoff=Backoff(initial=1, jitter=0))
        assert cs.cancelled_caught
        assert conn.statistics()["pendingCalls"] == 0
    assert _count(peers, "model/list") == 1


async def test_library_read_paths_retry_overload_but_writes_do_not(peers, autojump_clock):
    """The catalog and history read paths go through ``call_read``: an overloaded
    ``model/list`` is retried; ``thread/unsubscribe`` (not in the table) is tried once."""
    from codexrt._features._catalog import list_models
    from codexrt._io._retry import call_read

    scenario = {"name": "overload-mixed", "rules": [
        {"match": {"method": "model/list"}, "actions": [OVERLOAD], "times": 2},
        {"match": {"method": "thread/unsubscribe"}, "actions": [OVERLOAD], "times": 1}]}
    async with _rt(peers, scenario) as rt:
        catalog = await list_models(rt)
        assert catalog is not None
        assert _count(peers, "model/list") == 3
        conn = await rt.ensure_started()
        with pytest.raises(ServerOverloaded):
            await call_read(conn, "thread/unsubscribe", {"threadId": "00000000-0000-0000-0000-000000000000"})
        assert _count(peers, "thread/unsubscribe") == 1


async def test_a_request_sent_ahead_counts_as_the_first_try(peers, autojump_clock):
    """``call_read_only(sent=…)``: the answer to a request already sent
    (``Connection.send_request``) is the first try; an overload answer to it is retried
    through ``conn.call`` with the same back-off, and the tries in all stay ``attempts``."""
    b = Backoff(initial=0.5, factor=2.0, maximum=10.0, attempts=3, jitter=0.0)
    seen: list[tuple[int, float]] = []
    async with _rt(peers, overloaded("model/list", 2)) as rt:
        conn = await rt.ensure_started()
        with conn.send_request("model/list", {}) as sent:
            result = await call_read_only(conn, "model/list", {}, backoff=b, sent=sent,
                                          on_retry=lambda n, d, e: seen.append((n, d)))
        assert "data" in result
        assert _count(peers, "model/list") == 3 and seen == [(1, 0.5), (2, 1.0)]
    async with _rt(peers, overloaded("model/list", 3)) as rt:
        conn = await rt.ensure_started()
        with conn.send_request("model/list", {}) as sent, pytest.raises(ServerOverloaded) as info:
            await call_read_only(conn, "model/list", {}, backoff=b, sent=sent)
        assert info.value.details["attempts"] == 3
