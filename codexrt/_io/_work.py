"""What ``codexrt serve`` and ``codexrt acp`` both keep about their accepted work: how many
requests are open (accepted, not yet answered) with a wait for none, and the idle sweep that
retires a unit's app-server child after a quiet spell (R-RT-6). One copy, so the two front
ends cannot drift apart (STYLE point 10).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import trio

__all__ = ["OpenRequests", "sweep_idle"]

U = TypeVar("U")


class OpenRequests:
    """The number of accepted requests whose answer is not written yet (``count``; past its
    limit a front end refuses a new request from its reader). :meth:`wait_none` returns once
    none is open (an EOF drain waits on it)."""

    def __init__(self) -> None:
        self.count = 0
        self._none = trio.Event()
        self._none.set()

    def opened(self) -> None:
        self.count += 1
        if self._none.is_set():
            self._none = trio.Event()

    def closed(self) -> None:
        self.count -= 1
        if self.count == 0:
            self._none.set()

    async def wait_none(self) -> None:
        await self._none.wait()


async def sweep_idle(idle_timeout: float, units: Callable[[], Iterable[U]], *, retirable: Callable[[U], bool],
                     last_activity: Callable[[U], float], retire: Callable[[U], Awaitable[None]],
                     log: logging.Logger, what: Callable[[U], str]) -> None:
    """Forever: every ``min(idle_timeout / 2, 5)`` seconds (at least 0.05), retire each unit
    that is ``retirable`` and has been quiet for ``idle_timeout`` seconds. A retirement that
    fails is logged by its exception's type (never its text) and never ends the sweep."""
    while True:
        await trio.sleep(max(0.05, min(idle_timeout / 2, 5.0)))
        now = trio.current_time()
        for unit in list(units()):
            if retirable(unit) and now - last_activity(unit) >= idle_timeout:
                log.info("retiring the idle runtime of %s", what(unit))
                try:
                    await retire(unit)
                except Exception as exc:  # one unit's failed retirement never ends its front end
                    log.warning("idle retirement of %s failed: %s", what(unit), type(exc).__name__)
