"""Split from ``tests/trio/test_retry.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import pytest

from codexrt._sansio._errors import RpcError, ServerOverloaded
from codexrt._io._retry import NEVER_RETRIED, OVERLOAD_MESSAGE, READ_ONLY_RETRY_TABLE, Backoff, is_overloaded


def test_backoff_is_exponential_capped_and_jittered_within_bounds():
    b = Backoff(initial=0.5, factor=2, maximum=3, attempts=6, jitter=0.5)
    assert [b.ceiling(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert list(b.delays(rng=lambda: 0.0)) == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert list(b.delays(rng=lambda: 1.0)) == [0.25, 0.5, 1.0, 1.5, 1.5]
    assert b.max_total() == 9.5
    assert len(list(Backoff(attempts=1).delays())) == 0  # one try, no delay
    import random

    rng = random.Random(7)
    for n, d in enumerate(b.delays(rng=rng.random)):
        assert b.ceiling(n) / 2 <= d <= b.ceiling(n)


def test_backoff_rejects_unbounded_or_nonsense_settings():
    with pytest.raises(ValueError):
        Backoff(attempts=0)
    with pytest.raises(ValueError):
        Backoff(jitter=1.5)
    with pytest.raises(ValueError):
        Backoff(initial=0)


def test_overload_recognised_by_code_and_by_the_real_wording():
    assert is_overloaded(ServerOverloaded("x", rpc_code=-32001))
    assert is_overloaded(RpcError("anything", rpc_code=-32001))
    assert is_overloaded(RpcError(OVERLOAD_MESSAGE, rpc_code=-32000))  # re-coded by a proxy
    assert is_overloaded(RpcError("server overloaded, please RETRY LATER", rpc_code=-32603))
    assert not is_overloaded(RpcError("thread not found", rpc_code=-32600))
    assert not is_overloaded(ValueError(OVERLOAD_MESSAGE))


def test_table_never_lists_a_state_changing_method():
    assert not set(READ_ONLY_RETRY_TABLE) & set(NEVER_RETRIED)
    for method in ("turn/start", "turn/interrupt", "turn/steer", "thread/start", "thread/resume"):
        assert method not in READ_ONLY_RETRY_TABLE


def test_documented_table_matches_the_code():
    """docs/transports.md lists exactly the retried methods, and every never-retried one."""
    import re

    from tests._support import ROOT

    text = (ROOT / "docs" / "transports.md").read_text(encoding="utf-8")
    retried = text.split("### Retried on overload", 1)[1].split("### Never retried", 1)[0]
    never = text.split("### Never retried", 1)[1].split("### Where reads", 1)[0]
    assert set(re.findall(r"`([a-zA-Z]+/[a-zA-Z/]+)`", retried)) == set(READ_ONLY_RETRY_TABLE)
    assert set(NEVER_RETRIED) <= set(re.findall(r"`([a-zA-Z]+/[a-zA-Z/]+)`", never))
