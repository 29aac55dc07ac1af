"""A bounded, lossless-for-text event buffer between the reader and one consumer.

The reader must never wait for a consumer (STYLE rule 3), and a consumer may be slow (a
notebook printing, a human, a host reading a pipe). The overflow policy, explicit and tested
(``tests/sansio/test_slow_consumer.py``, ``docs/streaming.md``):

* **Text deltas** are never dropped. When the newest queued entry is text of the same *run*
  (same item, stream and identity) the new text is *appended* to it — the consumer receives
  fewer, larger deltas, never less text and never reordered text. Memory is O(text) for a
  lagging consumer, which is the text the consumer asked for anyway.
* **Essential events** (item started/completed, interactions, turn start/terminal, errors) are
  never dropped; they are O(items of the turn).
* **Droppable events** (status/usage/rate-limit chatter) are dropped oldest-first once more than
  ``max_droppable`` of them are queued; the count of dropped events is reported in an
  ``eventsDropped`` marker the consumer receives before the next event. When a dropped event
  sat between two pieces of one text run, the two pieces are joined (the order of text is
  kept), so interleaved chatter cannot make a lagging consumer's queue grow with the number
  of deltas.

Text runs — why: the reader hands over one delta per native notification, at up to a million
per second. Building a merged event per delta (copying the text, evolving a frozen object)
costs more than decoding the line did. A run is a key plus a list of text parts: appending is
O(1), and the event is built once, when the consumer takes it (``materialize(key, text,
count)``). A consumer that keeps up takes a run per reader wake-up, i.e. per pipe read.

No I/O and no trio: the Trio side (``codexrt._runtime._events.EventStream``) wakes the consumer.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Deque, Generic, Hashable, TypeVar

__all__ = ["EventBuffer", "TextRun"]

T = TypeVar("T")


class TextRun:
    """Consecutive text of one run: ``key`` says what it belongs to, ``parts`` is the text in
    arrival order, ``count`` how many native deltas it holds."""

    __slots__ = ("key", "parts", "count")

    def __init__(self, key: Hashable, text: str, count: int = 1) -> None:
        self.key = key
        self.parts = [text]
        self.count = count

    def absorb(self, other: "TextRun") -> None:
        self.parts.extend(other.parts)
        self.count += other.count

    def __repr__(self) -> str:
        return f"<TextRun {self.key!r} {self.count} deltas, {sum(map(len, self.parts))} chars>"


class EventBuffer(Generic[T]):
    """FIFO of events with delta coalescing and a bound on droppable events.

    ``coalesce(prev, new) -> merged | None`` merges a whole ``new`` event into the newest
    queued event when possible (for text that arrives as ready-made events); ``droppable(ev)
    -> bool`` marks chatter; ``make_marker(count) -> T`` builds the ``eventsDropped`` marker;
    ``materialize(key, text, count) -> T`` turns a :class:`TextRun` into the event the consumer
    gets (required when :meth:`put_text` is used).
    """

    def __init__(
        self,
        *,
        coalesce: Callable[[T, T], T | None],
        droppable: Callable[[T], bool],
        make_marker: Callable[[int], T],
        max_droppable: int = 1000,
        materialize: Callable[[Any, str, int], T] | None = None,
    ) -> None:
        self._q: Deque[Any] = collections.deque()  # T or TextRun
        self._coalesce = coalesce
        self._droppable = droppable
        self._marker = make_marker
        self._materialize = materialize
        self._max_droppable = max_droppable
        self._n_droppable = 0
        self.dropped = 0
        self._pending_drop_report = 0
        self.coalesced = 0
        self.closed = False

    def __len__(self) -> int:
        return len(self._q) + (1 if self._pending_drop_report else 0)

    def put_text(self, key: Hashable, text: str, count: int = 1) -> None:
        """Add the text of ``count`` native deltas to run ``key`` — appended to the newest
        entry when that is the same run, else a new run. O(1); never blocks; ignored after
        close."""
        if self.closed:
            return
        q = self._q
        if q:
            tail = q[-1]
            if type(tail) is TextRun and tail.key == key:
                tail.parts.append(text)
                tail.count += count
                self.coalesced += count
                return
        if self._materialize is None:
            raise TypeError("this buffer was built without materialize=; put_text is unavailable")
        q.append(TextRun(key, text, count))
        self.coalesced += count - 1

    def put(self, ev: T) -> None:
        """Add an event; never blocks, never fails (after close it is ignored)."""
        if self.closed:
            return
        if self._q:
            tail = self._q[-1]
            if type(tail) is not TextRun:
                merged = self._coalesce(tail, ev)
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
        q = self._q
        for i, old in enumerate(q):
            if type(old) is not TextRun and self._droppable(old):
                del q[i]
                self._n_droppable -= 1
                self.dropped += 1
                self._pending_drop_report += 1
                # Rejoin text the dropped event separated (order is kept: they were adjacent).
                if 0 < i < len(q):
                    before, after = q[i - 1], q[i]
                    if type(before) is TextRun and type(after) is TextRun and before.key == after.key:
                        before.absorb(after)
                        del q[i]
                        self.coalesced += after.count
                    elif type(before) is not TextRun and type(after) is not TextRun:
                        merged = self._coalesce(before, after)
                        if merged is not None:
                            q[i - 1] = merged
                            del q[i]
                            self.coalesced += 1
                return

    def get_nowait(self) -> T | None:
        if self._pending_drop_report:
            n, self._pending_drop_report = self._pending_drop_report, 0
            return self._marker(n)
        if not self._q:
            return None
        ev = self._q.popleft()
        if type(ev) is TextRun:
            assert self._materialize is not None
            parts = ev.parts
            return self._materialize(ev.key, parts[0] if len(parts) == 1 else "".join(parts), ev.count)
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
        queued_text = sum(sum(map(len, e.parts)) for e in self._q if type(e) is TextRun)
        return {"queued": len(self._q), "queuedTextChars": queued_text, "droppableQueued": self._n_droppable,
                "dropped": self.dropped, "coalesced": self.coalesced}
