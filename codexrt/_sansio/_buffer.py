"""A bounded, lossless-for-text event buffer between the reader and one consumer.

The reader must never wait for a consumer (STYLE rule 3), and a consumer may be slow (a
notebook printing, a human). The overflow policy, explicit and tested:

* **Text deltas** (``itemUpdated`` events carrying ``delta`` text) are never dropped. When the
  newest queued event is a delta of the same item and stream, the new text is *appended* to it
  — the consumer receives fewer, larger deltas, never less text and never reordered text.
  Memory is O(text) for a lagging consumer, which is the text the consumer asked for anyway.
* **Essential events** (item started/completed, interactions, turn start/terminal, errors) are
  never dropped; they are O(items of the turn).
* **Droppable events** (status/usage/rate-limit chatter) are dropped oldest-first once more than
  ``max_droppable`` of them are queued; the count of dropped events is reported in a
  ``eventsDropped`` marker event the consumer receives in their place.

No I/O and no trio: the Trio side wakes the consumer with an event when ``put`` returns True.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Deque, Generic, TypeVar

__all__ = ["EventBuffer"]

T = TypeVar("T")


class EventBuffer(Generic[T]):
    """FIFO of events with delta coalescing and a bound on droppable events.

    ``coalesce(prev, new) -> merged | None`` merges ``new`` into the newest queued event when
    possible; ``droppable(ev) -> bool`` marks chatter; ``make_marker(count) -> T`` builds the
    ``eventsDropped`` marker.
    """

    def __init__(
        self,
        *,
        coalesce: Callable[[T, T], T | None],
        droppable: Callable[[T], bool],
        make_marker: Callable[[int], T],
        max_droppable: int = 1000,
    ) -> None:
        self._q: Deque[T] = collections.deque()
        self._coalesce = coalesce
        self._droppable = droppable
        self._marker = make_marker
        self._max_droppable = max_droppable
        self._n_droppable = 0
        self.dropped = 0
        self._pending_drop_report = 0
        self.coalesced = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._q) + (1 if self._pending_drop_report else 0)

    def put(self, ev: T) -> None:
        """Add an event; never blocks, never fails (after close it is ignored)."""
        if self.closed:
            return
        if self._q:
            merged = self._coalesce(self._q[-1], ev)
            if merged is not None:
                self._q[-1] = merged
                self.coalesced += 1
                return
        if self._droppable(ev):
            self._n_droppable += 1
            if self._n_droppable > self._max_droppable:
                self._drop_oldest_droppable()
        self._q.append(ev)

    def _drop_oldest_droppable(self) -> None:
        for i, old in enumerate(self._q):
            if self._droppable(old):
                del self._q[i]
                self._n_droppable -= 1
                self.dropped += 1
                self._pending_drop_report += 1
                return

    def get_nowait(self) -> T | None:
        if self._pending_drop_report:
            n, self._pending_drop_report = self._pending_drop_report, 0
            return self._marker(n)
        if not self._q:
            return None
        ev = self._q.popleft()
        if self._droppable(ev):
            self._n_droppable -= 1
        return ev

    def drain(self) -> list[T]:
        out = []
        while (ev := self.get_nowait()) is not None:
            out.append(ev)
        return out

    def close(self) -> None:
        """No more events will be added; queued ones stay readable."""
        self.closed = True

    def statistics(self) -> dict[str, Any]:
        return {"queued": len(self._q), "dropped": self.dropped, "coalesced": self.coalesced}
