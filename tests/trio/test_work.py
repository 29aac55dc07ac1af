"""The accepted-work count and the idle sweep ``serve`` and ``acp`` share (R-RT-6)."""

from __future__ import annotations

import logging

import trio

from codexrt._io._work import OpenRequests, sweep_idle


async def test_wait_none_returns_only_when_every_opened_request_closed(autojump_clock):
    work = OpenRequests()
    with trio.fail_after(1):
        await work.wait_none()  # nothing open yet
    work.opened()
    work.opened()
    done = []

    async def waiter() -> None:
        await work.wait_none()
        done.append(trio.current_time())

    async with trio.open_nursery() as n:
        n.start_soon(waiter)
        await trio.sleep(1)
        work.closed()
        await trio.sleep(1)
        assert not done and work.count == 1
        work.closed()
    assert done == [2.0] and work.count == 0


async def test_r_rt_6_sweep_retires_quiet_units_and_survives_a_failed_retirement(autojump_clock, caplog):
    last = {"busy": 0.0, "quiet": 0.0, "broken": 0.0}
    retired: list[str] = []

    async def retire(name: str) -> None:
        retired.append(name)
        if name == "broken":
            raise RuntimeError("secret detail that must not be logged")
        last[name] = trio.current_time()  # a retired unit starts a new quiet spell

    with caplog.at_level(logging.INFO), trio.move_on_after(27):
        await sweep_idle(10.0, lambda: list(last), retirable=lambda n: n != "busy",
                         last_activity=lambda n: last[n], retire=retire, log=logging.getLogger("t"),
                         what=lambda n: f"unit {n}")
    # swept every 5 s: quiet and broken retired at 10 s, quiet again at 20 s; broken at every sweep
    assert retired.count("busy") == 0
    assert retired.count("quiet") == 2
    assert retired.count("broken") == 4  # 10, 15, 20, 25 s: a failure never ends the sweep
    assert "RuntimeError" in caplog.text and "secret detail" not in caplog.text
