"""``EventStream.take_directly`` (issue 34, R-D-2): a consumer that can take an event without
waiting gets it on the producer's task while nothing is queued; everything else is queued as
before. What a consumer sees — the events it took plus the ones it iterated, in the order it
got them — is every event put, in the order put, with the text of every run exact; an event
refused or raised on is queued, and so is every event behind it until the queue is empty.

No trio loop is needed: ``put`` and ``get_nowait`` are synchronous (the wake-up is a
``trio.Event`` that is only set here)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._runtime._events import CodexEvent, EventStream, delta_key

KEY_A = delta_key(1, "c", "op-1", "t", "t", "u", "item-a", "item/agentMessage/delta")
KEY_B = delta_key(1, "c", "op-1", "t", "t", "u", "item-b", "item/agentMessage/delta")


def essential(i: int) -> CodexEvent:
    return CodexEvent("itemCompleted", {"item": {"id": f"x{i}"}})


class Taker:
    """A direct consumer whose verdicts the test sets; it records what it took."""

    def __init__(self) -> None:
        self.accept = True
        self.raise_next = False
        self.calls = 0
        self.got: list[CodexEvent] = []

    def __call__(self, ev: CodexEvent) -> bool:
        self.calls += 1
        if self.raise_next:
            self.raise_next = False
            raise RuntimeError("planted")
        if self.accept:
            self.got.append(ev)
        return self.accept


def test_r_d_2_an_event_put_while_nothing_is_queued_goes_to_the_direct_consumer() -> None:
    s, take = EventStream(), Taker()
    s.take_directly(take)
    s.put(essential(1))
    s.put_text(KEY_A, "hel", 2)
    assert s.get_nowait() is None and len(s._buf) == 0
    assert [ev.kind for ev in take.got] == ["itemCompleted", "itemUpdated"]
    text = take.got[1]
    assert text.payload == {"delta": "hel", "stream": "item/agentMessage/delta", "deltaCount": 2}
    assert (text.item_id, text.turn_id, text.client_operation_id) == ("item-a", "u", "op-1")


def test_r_d_2_a_refused_event_queues_everything_behind_it_until_the_queue_is_empty() -> None:
    s, take = EventStream(), Taker()
    s.take_directly(take)
    take.accept = False
    s.put(essential(1))
    take.accept = True
    s.put(essential(2))  # behind a queued event: queued too, the consumer is not asked
    s.put_text(KEY_A, "a")
    assert take.calls == 1 and take.got == []
    assert [ev.kind for ev in iter(s.get_nowait, None)] == ["itemCompleted", "itemCompleted", "itemUpdated"]
    s.put(essential(3))  # the queue is empty again: handed over
    assert [ev.payload["item"]["id"] for ev in take.got] == ["x3"]


def test_r_d_2_a_direct_consumer_that_raises_is_dropped_and_nothing_is_lost(caplog: Any) -> None:
    s, take = EventStream(), Taker()
    s.take_directly(take)
    take.raise_next = True
    with caplog.at_level(logging.ERROR, logger="codexrt.runtime"):
        s.put(essential(1))
    assert "direct consumer raised" in caplog.text
    s.get_nowait()  # (queued: the iterator gets it)
    s.put(essential(2))
    assert take.calls == 1  # never asked again
    assert s.get_nowait() is not None


def test_r_d_2_a_closed_stream_hands_nothing_over_and_none_turns_it_off() -> None:
    s, take = EventStream(), Taker()
    s.take_directly(take)
    s.take_directly(None)
    s.put(essential(1))
    assert take.calls == 0 and s.get_nowait() is not None
    s.take_directly(take)
    s.close()
    s.put(essential(2))
    assert take.calls == 0


_steps = st.lists(st.one_of(
    st.tuples(st.just("event"), st.booleans()),
    st.tuples(st.just("text"), st.sampled_from(["a", "b"]), st.text(max_size=4), st.booleans()),
    st.tuples(st.just("drain"), st.integers(0, 4)),
    st.tuples(st.just("raise"), st.just(0)),
    st.tuples(st.just("chatter"), st.booleans()),
), max_size=60)


@settings(max_examples=400, deadline=None)
@given(_steps)
def test_r_d_2_what_a_direct_consumer_and_the_iterator_get_is_what_was_put_in_order(steps: list[Any]) -> None:
    """Any mix of puts (each accepted or refused by the direct consumer, or raised on), text
    of two runs and partial drains by the iterator: the events the consumer got, both ways,
    in the order it got them, are every essential event in put order with each run's text
    exact and in order between them; status chatter past the bound is dropped only from the
    queue, counted in an ``eventsDropped`` marker that comes before the next event (a
    pending marker is something queued: nothing is handed over ahead of it)."""
    s, take = EventStream(max_droppable=2), Taker()
    s.take_directly(take)
    seen: list[CodexEvent] = []
    put: list[tuple[str, str]] = []  # ("x", id) or (item, text), in put order
    n = 0

    def collect() -> None:
        seen.extend(take.got)
        take.got.clear()

    for step in steps:
        if step[0] == "event":
            take.accept = step[1]
            n += 1
            put.append(("x", f"x{n}"))
            s.put(essential(n))
        elif step[0] == "text":
            _, which, text, accept = step
            take.accept = accept
            put.append((f"item-{which}", text))
            s.put_text(KEY_A if which == "a" else KEY_B, text)
        elif step[0] == "drain":
            collect()
            for _ in range(step[1]):
                ev = s.get_nowait()
                if ev is None:
                    break
                seen.append(ev)
        elif step[0] == "chatter":
            take.accept = step[1]
            n += 1
            put.append(("chatter", f"c{n}"))
            s.put(CodexEvent("nativeNotification", {"method": "thread/tokenUsage/updated", "params": {"n": n}}))
        else:
            take.raise_next = True
        collect()
    s.close()
    collect()
    seen.extend(iter(s.get_nowait, None))

    def pieces(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Adjacent text of one run joined (the buffer merges them), empty text dropped."""
        out: list[tuple[str, str]] = []
        for kind, value in items:
            if kind != "x" and out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + value)
            else:
                out.append((kind, value))
        return [(k, v) for k, v in out if k == "x" or v]

    def label(ev: CodexEvent) -> tuple[str, str]:
        if ev.kind == "itemCompleted":
            return ("x", ev.payload["item"]["id"])
        if ev.kind == "nativeNotification":
            return ("chatter", f"c{ev.payload['params']['n']}")
        if ev.kind == "eventsDropped":
            return ("dropped", str(ev.payload["count"]))
        return (ev.item_id or "", ev.payload["delta"])

    got = [label(ev) for ev in seen]
    dropped = sum(int(v) for k, v in got if k == "dropped")
    chatter_got = [v for k, v in got if k == "chatter"]
    chatter_put = [v for k, v in put if k == "chatter"]
    assert len(chatter_got) + dropped == len(chatter_put)
    assert chatter_got == [v for v in chatter_put if v in chatter_got]  # in order, none twice
    if got and got[-1][0] == "dropped":
        raise AssertionError("a marker is always followed by the event it was reported before")
    kept = [(k, v) for k, v in got if k not in ("chatter", "dropped")]
    assert pieces(kept) == pieces([(k, v) for k, v in put if k != "chatter"])  # type: ignore[arg-type]


@pytest.mark.parametrize("first", ["event", "text"])
def test_r_d_2_a_consumer_that_takes_everything_sees_nothing_in_the_iterator(first: str) -> None:
    s, take = EventStream(), Taker()
    s.take_directly(take)
    for i in range(100):
        if (first == "event") == (i % 2 == 0):
            s.put(essential(i))
        else:
            s.put_text(KEY_A, str(i))
    assert len(take.got) == 100 and s.get_nowait() is None
    assert s.statistics() is not None
