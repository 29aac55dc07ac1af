"""Caps on fan-out: how many helper children and workspace diffs run at once (issue 35).

A helper run (``codex.generateTitle``, ``codex.enhancePrompt``, ``codex.generateCommitMessage``,
automatic titles) starts an app-server child of its own (~140 MB with the real binary); a
workspace diff runs ``git`` several times. A host that asks for 40 of either at once must not
get 40 children. :class:`FanOutLimiter` admits a bounded number **per key** (the channel) and
**overall**; past that a run **waits in a FIFO queue** up to a bound per key and overall, and
past *that* it is **refused at once** with :class:`~codexrt.QueueFull` (``QUEUE_FULL``; its
details name the resource, the scope that is full and the limits). The limits and the policy
are listed in ``docs/runtime.md`` and ``docs/security.md``.

A queued run waits for a slot; the caller bounds that wait (a helper's ``timeout`` and a
diff's ``timeout`` count from the request, queue time included). A cancelled waiter leaves the
queue; a slot granted to a waiter that was cancelled at that moment is passed on.

One limiter is shared by every ``trio.run`` of the process — the blocking facade and
``codexrt.aio`` each run Trio on a thread or loop of their own — so its counters are under a
``threading.Lock`` and a waiter is woken through its own run's token
(``TrioToken.run_sync_soon``), whichever thread grants it the slot.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import AsyncIterator, Deque

import trio

from codexrt._sansio._errors import QueueFull

__all__ = ["FanOutLimiter", "HELPERS", "WORKSPACE_DIFFS"]


class _Waiter:
    __slots__ = ("key", "event", "token", "granted")

    def __init__(self, key: str) -> None:
        self.key = key
        self.event = trio.Event()
        self.token = trio.lowlevel.current_trio_token()
        self.granted = False


class FanOutLimiter:
    """At most ``per_key`` running per key and ``overall`` in all; at most
    ``queue_per_key`` / ``queue_overall`` waiting; beyond, :class:`QueueFull`."""

    def __init__(self, resource: str, *, per_key: int, overall: int, queue_per_key: int, queue_overall: int) -> None:
        if min(per_key, overall) < 1 or min(queue_per_key, queue_overall) < 0:
            raise ValueError("fan-out limits must be >= 1 (running) and >= 0 (queued)")
        self.resource = resource
        self.per_key, self.overall = per_key, overall
        self.queue_per_key, self.queue_overall = queue_per_key, queue_overall
        self._running: dict[str, int] = {}
        self._total = 0
        self._queued: dict[str, int] = {}
        self._queue: Deque[_Waiter] = collections.deque()
        self._lock = threading.Lock()

    def statistics(self) -> dict[str, int]:
        return {"running": self._total, "queued": len(self._queue), "perKey": self.per_key, "overall": self.overall,
                "queuePerKey": self.queue_per_key, "queueOverall": self.queue_overall}

    def _can_run(self, key: str) -> bool:
        return self._total < self.overall and self._running.get(key, 0) < self.per_key

    def _take(self, key: str) -> None:
        self._running[key] = self._running.get(key, 0) + 1
        self._total += 1

    def _dequeue(self, w: _Waiter) -> None:
        n = self._queued[w.key] - 1
        if n:
            self._queued[w.key] = n
        else:
            del self._queued[w.key]

    def _refuse(self, key: str, scope: str) -> QueueFull:
        limit = self.queue_per_key if scope == "channel" else self.queue_overall
        return QueueFull(
            f"too many {self.resource} runs: {self._running.get(key, 0)} running and {self._queued.get(key, 0)} queued "
            f"for this channel, {self._total} running and {len(self._queue)} queued in all (at most {self.per_key} per "
            f"channel and {self.overall} in all run at once; the {scope} queue holds {limit}); retry when some finish",
            details={"resource": self.resource, "scope": scope, "running": self._total, "queued": len(self._queue),
                     "maxRunningPerChannel": self.per_key, "maxRunning": self.overall,
                     "maxQueuedPerChannel": self.queue_per_key, "maxQueued": self.queue_overall})

    async def acquire(self, key: str) -> None:
        """Take one running slot for ``key``: at once, after waiting in the queue, or
        :class:`QueueFull` when the queue is full too (nothing was taken). Pair it with
        :meth:`release`."""
        with self._lock:
            if self._can_run(key):  # no waiter can run now (each release grants one): no queue jumping
                self._take(key)
                w = None
            elif self._queued.get(key, 0) >= self.queue_per_key:
                raise self._refuse(key, "channel")
            elif len(self._queue) >= self.queue_overall:
                raise self._refuse(key, "overall")
            else:
                w = _Waiter(key)
                self._queue.append(w)
                self._queued[key] = self._queued.get(key, 0) + 1
        if w is None:
            return
        try:
            await w.event.wait()
        except BaseException:
            with self._lock:
                granted = w.granted
                if not granted:
                    self._queue.remove(w)
                    self._dequeue(w)
            if granted:
                self.release(key)  # granted as we were cancelled: pass it on
            raise

    def release(self, key: str) -> None:
        """Give back a slot taken by :meth:`acquire`; the oldest waiter that may run gets it."""
        with self._lock:
            n = self._running[key] - 1
            if n:
                self._running[key] = n
            else:
                del self._running[key]
            self._total -= 1
            # The queue is bounded, so is this scan.
            w = next((w for w in self._queue if self._can_run(w.key)), None)
            if w is None:
                return
            self._queue.remove(w)
            self._dequeue(w)
            self._take(w.key)
            w.granted = True
        try:
            w.token.run_sync_soon(w.event.set)
        except trio.RunFinishedError:  # its run is gone (it cannot be waiting any more)
            self.release(w.key)

    @contextlib.asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        """:meth:`acquire` … :meth:`release` around the block."""
        await self.acquire(key)
        try:
            yield
        finally:
            self.release(key)


#: Helper children (``run_helper``): 2 per channel, 4 in all; 8 / 32 queued.
HELPERS = FanOutLimiter("helper", per_key=2, overall=4, queue_per_key=8, queue_overall=32)
#: Workspace diffs (``read_workspace_diff``): 2 per channel, 4 in all; 16 / 64 queued.
WORKSPACE_DIFFS = FanOutLimiter("workspace diff", per_key=2, overall=4, queue_per_key=16, queue_overall=64)
