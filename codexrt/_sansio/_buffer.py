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
from typing import Any, Callable, Deque, Generic, Hashable, Iterator, TypeVar

__all__ = ["EventBuffer", "TextRun"]

T = TypeVar("T")


class TextRun:
    """Consecutive text of one run: ``key`` says what it belongs to, ``parts`` is the text in
    arrival order, ``count`` how many native deltas it holds. It is also a node of the
    buffer's queue (``prev``/``next``)."""

    __slots__ = ("key", "parts", "count", "prev", "next")

    def __init__(self, key: Hashable, text: str, count: int = 1) -> None:
        self.key = key
        self.parts = [text]
        self.count = count
        self.prev: Any = None
        self.next: Any = None

    def absorb(self, other: "TextRun") -> None:
        self.parts.extend(other.parts)
        self.count += other.count

    def __repr__(self) -> str:
        return f"<TextRun {self.key!r} {self.count} deltas, {sum(map(len, self.parts))} chars>"


class _Node:
    """One queued event. ``drop`` marks chatter; ``alive`` is cleared when the node leaves the
    queue (taken or dropped), so the droppable index can skip it lazily."""

    __slots__ = ("ev", "drop", "alive", "prev", "next")

    def __init__(self, ev: Any, drop: bool) -> None:
        self.ev = ev
        self.drop = drop
        self.alive = True
        self.prev: Any = None
        self.next: Any = None


class EventBuffer(Generic[T]):
    """FIFO of events with delta coalescing and a bound on droppable events.

    ``coalesce(prev, new) -> merged | None`` merges a whole ``new`` event into the newest
    queued event when possible (for text that arrives as ready-made events); ``droppable(ev)
    -> bool`` marks chatter; ``make_marker(count) -> T`` builds the ``eventsDropped`` marker;
    ``materialize(key, text, count) -> T`` turns a :class:`TextRun` into the event the consumer
    gets (required when :meth:`put_text` is used).

    Cost (issue 35): the queue is a doubly linked list and the droppable events are also
    indexed, oldest first, in a deque of their nodes. Dropping the oldest droppable event
    unlinks it in O(1) and rejoins its two neighbours in O(1) — it never walks past kept
    events. Nodes that left the queue stay in the index until they reach its head and are
    skipped there, each once: O(1) amortised per event. ``steps`` counts those skips (a
    cost meter the property tests bound; no clock involved).
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
        self._head: Any = None  # _Node | TextRun | None
        self._tail: Any = None
        self._len = 0
        self._drops: Deque[_Node] = collections.deque()  # droppable nodes, oldest first (some may be dead)
        self._coalesce = coalesce
        self._droppable = droppable
        self._marker = make_marker
        self._materialize = materialize
        self._max_droppable = max_droppable
        self._n_droppable = 0
        self.dropped = 0
        self._pending_drop_report = 0
        self.coalesced = 0
        self.steps = 0
        self.closed = False

    def __len__(self) -> int:
        return self._len + (1 if self._pending_drop_report else 0)

    # -- the linked list -----------------------------------------------------------------

    def _append(self, node: Any) -> None:
        tail = self._tail
        node.prev = tail
        node.next = None
        if tail is None:
            self._head = node
        else:
            tail.next = node
        self._tail = node
        self._len += 1

    def _unlink(self, node: Any) -> None:
        prev, nxt = node.prev, node.next
        if prev is None:
            self._head = nxt
        else:
            prev.next = nxt
        if nxt is None:
            self._tail = prev
        else:
            nxt.prev = prev
        node.prev = node.next = None
        self._len -= 1

    # -- producer ------------------------------------------------------------------------

    def put_text(self, key: Hashable, text: str, count: int = 1) -> None:
        """Add the text of ``count`` native deltas to run ``key`` — appended to the newest
        entry when that is the same run, else a new run. O(1); never blocks; ignored after
        close."""
        if self.closed:
            return
        tail = self._tail
        if type(tail) is TextRun and tail.key == key:
            tail.parts.append(text)
            tail.count += count
            self.coalesced += count
            return
        if self._materialize is None:
            raise TypeError("this buffer was built without materialize=; put_text is unavailable")
        self._append(TextRun(key, text, count))
        self.coalesced += count - 1

    def put(self, ev: T) -> None:
        """Add an event; never blocks, never fails (after close it is ignored). O(1)
        amortised."""
        if self.closed:
            return
        tail = self._tail
        if tail is not None and type(tail) is not TextRun:
            merged = self._coalesce(tail.ev, ev)
            if merged is not None:
                tail.ev = merged
                self.coalesced += 1
                return
        drop = self._droppable(ev)
        node = _Node(ev, drop)
        if drop:
            self._n_droppable += 1
            if self._n_droppable > self._max_droppable:
                self._drop_oldest_droppable()
            self._drops.append(node)
        self._append(node)

    def _drop_oldest_droppable(self) -> None:
        drops = self._drops
        while drops:
            node = drops.popleft()
            if not node.alive:
                self.steps += 1
                continue
            before, after = node.prev, node.next
            self._unlink(node)
            node.alive = False
            self._n_droppable -= 1
            self.dropped += 1
            self._pending_drop_report += 1
            # Rejoin text the dropped event separated (order is kept: they were adjacent).
            if before is not None and after is not None:
                if type(before) is TextRun and type(after) is TextRun:
                    if before.key == after.key:
                        before.absorb(after)
                        self._unlink(after)
                        self.coalesced += after.count
                elif type(before) is not TextRun and type(after) is not TextRun:
                    merged = self._coalesce(before.ev, after.ev)
                    if merged is not None:
                        before.ev = merged
                        self._unlink(after)
                        after.alive = False
                        if after.drop:
                            self._n_droppable -= 1
                        self.coalesced += 1
            return

    # -- consumer ------------------------------------------------------------------------

    def get_nowait(self) -> T | None:
        if self._pending_drop_report:
            n, self._pending_drop_report = self._pending_drop_report, 0
            return self._marker(n)
        node = self._head
        if node is None:
            return None
        self._unlink(node)
        if type(node) is TextRun:
            assert self._materialize is not None
            parts = node.parts
            return self._materialize(node.key, parts[0] if len(parts) == 1 else "".join(parts), node.count)
        node.alive = False
        if node.drop:
            self._n_droppable -= 1
            # It was the oldest live droppable event: every index entry up to it is dead now.
            drops = self._drops
            while drops and not drops[0].alive:
                drops.popleft()
                self.steps += 1
        ev: T = node.ev
        return ev

    def drain(self) -> list[T]:
        out = []
        while (ev := self.get_nowait()) is not None:
            out.append(ev)
        return out

    def close(self) -> None:
        """No more events will be added; queued ones stay readable."""
        self.closed = True

    def _nodes(self) -> Iterator[Any]:
        node = self._head
        while node is not None:
            yield node
            node = node.next

    def statistics(self) -> dict[str, Any]:
        queued_text = sum(sum(map(len, e.parts)) for e in self._nodes() if type(e) is TextRun)
        return {"queued": self._len, "queuedTextChars": queued_text, "droppableQueued": self._n_droppable,
                "dropped": self.dropped, "coalesced": self.coalesced}
