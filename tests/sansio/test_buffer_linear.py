"""The event buffer drops chatter in O(1) amortised per event (issue 35, R-D-2).

Before, dropping the oldest droppable event walked the queue from its head past every kept
event, once per drop: a burst of interleaved kept (``thread/started``) and droppable
(``thread/status/changed``) notifications cost O(n²). The buffer is now a linked list with an
index of its droppable nodes; these properties check it against the old list-scanning
algorithm kept here as the reference model (same events, same order, same ``eventsDropped``
markers — nothing kept is lost) and bound its cost as an operation count (``steps``), never
a time.
"""

from __future__ import annotations

import collections
from typing import Any, Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._runtime._events import CodexEvent, EventStream
from codexrt._sansio._buffer import EventBuffer


class ReferenceBuffer:
    """The pre-issue-35 algorithm (a deque scanned from its head on every drop), reduced to
    what the properties compare: plain values, text runs as ``["T", key, text]`` lists."""

    def __init__(self, coalesce: Callable[[Any, Any], Any], droppable: Callable[[Any], bool], max_droppable: int) -> None:
        self.q: collections.deque[Any] = collections.deque()
        self.coalesce, self.droppable, self.max = coalesce, droppable, max_droppable
        self.n_drop = 0
        self.pending = 0
        self.scanned = 0

    @staticmethod
    def is_text(x: Any) -> bool:
        return isinstance(x, list)

    def put_text(self, key: Any, text: str) -> None:
        if self.q and self.is_text(self.q[-1]) and self.q[-1][1] == key:
            self.q[-1][2] += text
            return
        self.q.append(["T", key, text])

    def put(self, ev: Any) -> None:
        if self.q and not self.is_text(self.q[-1]):
            merged = self.coalesce(self.q[-1], ev)
            if merged is not None:
                self.q[-1] = merged
                return
        if self.droppable(ev):
            self.n_drop += 1
            if self.n_drop > self.max:
                self.drop_oldest()
        self.q.append(ev)

    def drop_oldest(self) -> None:
        q = self.q
        for i, old in enumerate(q):
            self.scanned += 1
            if not self.is_text(old) and self.droppable(old):
                del q[i]
                self.n_drop -= 1
                self.pending += 1
                if 0 < i < len(q):
                    before, after = q[i - 1], q[i]
                    if self.is_text(before) and self.is_text(after) and before[1] == after[1]:
                        before[2] += after[2]
                        del q[i]
                    elif not self.is_text(before) and not self.is_text(after):
                        merged = self.coalesce(before, after)
                        if merged is not None:
                            q[i - 1] = merged
                            del q[i]
                return

    def get(self) -> Any:
        if self.pending:
            n, self.pending = self.pending, 0
            return ("dropped", n)
        if not self.q:
            return None
        ev = self.q.popleft()
        if self.is_text(ev):
            return ("text", ev[1], ev[2])
        if self.droppable(ev):
            self.n_drop -= 1
        return ev


# Events: ("keep", n) kept; ("chat", n) droppable; ("sum", n) kept and coalescing with a
# preceding ("sum", m) (stands in for ready-made text events).
def _coalesce(a: Any, b: Any) -> Any:
    if a[0] == "sum" and b[0] == "sum":
        return ("sum", a[1] + b[1])
    return None


def _droppable(ev: Any) -> bool:
    return ev[0] == "chat"


def _buffer(max_droppable: int) -> EventBuffer[Any]:
    return EventBuffer(coalesce=_coalesce, droppable=_droppable, make_marker=lambda n: ("dropped", n),
                       max_droppable=max_droppable, materialize=lambda key, text, count: ("text", key, text))


_op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(["keep", "chat", "chat", "sum"]), st.integers(0, 9)),
    st.tuples(st.just("text"), st.sampled_from(["a", "b"]), st.text("xyz", min_size=1, max_size=3)),
    st.tuples(st.just("get"), st.just(""), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_op, max_size=200), max_droppable=st.integers(0, 6))
def test_r_d_2_same_output_as_the_scanning_reference(ops: list[tuple[str, str, Any]], max_droppable: int) -> None:
    """Any interleaving of puts, text and takes yields exactly what the old algorithm yielded:
    every kept event, in order; text joined across dropped chatter; the same markers."""
    buf, ref = _buffer(max_droppable), ReferenceBuffer(_coalesce, _droppable, max_droppable)
    got, want = [], []
    for op, a, b in ops:
        if op == "put":
            buf.put((a, b))
            ref.put((a, b))
        elif op == "text":
            buf.put_text(a, b)
            ref.put_text(a, b)
        else:
            got.append(buf.get_nowait())
            want.append(ref.get())
        assert buf.statistics()["droppableQueued"] == ref.n_drop <= max(max_droppable, 1)
    got.extend(buf.drain())
    while (ev := ref.get()) is not None:
        want.append(ev)
    assert got == want
    assert len(buf) == 0


@settings(max_examples=100, deadline=None)
@given(pattern=st.lists(st.sampled_from(["keep", "chat", "text", "get"]), min_size=1, max_size=12),
       reps=st.integers(50, 400), max_droppable=st.integers(1, 50))
def test_r_d_2_cost_is_linear_in_the_number_of_events(pattern: list[str], reps: int, max_droppable: int) -> None:
    """Index skips over the whole run are at most the number of events put: each node is
    skipped at most once (O(1) amortised), whatever the interleaving."""
    buf = _buffer(max_droppable)
    puts = 0
    for _ in range(reps):
        for p in pattern:
            if p == "get":
                buf.get_nowait()
            elif p == "text":
                buf.put_text("a", "x")
            else:
                buf.put((p, 1))
                puts += 1
    buf.drain()
    assert buf.steps <= puts


def test_r_d_2_burst_of_kept_and_chatter_scans_nothing_kept() -> None:
    """The issue's burst: 80,000 notifications alternating ``thread/started`` (kept) and
    ``thread/status/changed`` (droppable) into a stream nobody reads. The old scan visited
    ~1.6 billion entries (each drop walked past every kept event before it); the buffer skips
    none, keeps all 40,000 kept events in order and reports every dropped one."""
    s = EventStream(max_droppable=1000)
    n = 80_000
    for i in range(n):
        if i % 2 == 0:
            s.put(CodexEvent("nativeNotification", {"method": "thread/started", "params": {"i": i}}))
        else:
            s.put(CodexEvent("nativeNotification", {"method": "thread/status/changed", "params": {"i": i}}))
    buf = s._buf
    assert buf.steps == 0 and buf.dropped == n // 2 - 1000
    out = buf.drain()
    started = [ev.payload["params"]["i"] for ev in out if ev.payload.get("method") == "thread/started"]
    assert started == list(range(0, n, 2))
    dropped = sum(ev.payload["count"] for ev in out if ev.kind == "eventsDropped")
    status = [ev for ev in out if ev.payload.get("method") == "thread/status/changed"]
    assert dropped + len(status) == n // 2 and len(status) == 1000


def test_r_d_2_reference_model_is_quadratic_on_that_burst() -> None:
    """The reference really is the slow algorithm (so the equivalence above means something):
    on 4,000 alternating events its scan count grows with the square of the burst."""
    ref = ReferenceBuffer(_coalesce, _droppable, 100)
    for i in range(4000):
        ref.put(("keep", i) if i % 2 == 0 else ("chat", i))
    assert ref.scanned > 1_000_000
