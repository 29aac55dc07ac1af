"""The typed payloads of ``codexrt.payload`` match the events a turn really produces (issue 22):
for every event of a typed kind seen while turns run against the scripted fake app-server
(streaming, an approval, a protocol error, a failed start), each required key is present, no
key is unknown, and the simple fields have their declared types."""

from __future__ import annotations

import typing
from typing import Any, NotRequired, get_args, get_origin, get_type_hints

import pytest

import codexrt
from codexrt import RuntimeConfig, _payloads
from tests._support import MemoryPeers

TYPED = {
    "itemUpdated": _payloads.ItemUpdated, "itemStarted": _payloads.ItemEvent, "itemCompleted": _payloads.ItemEvent,
    "turnStarted": _payloads.TurnStarted, "threadStarted": _payloads.ThreadStarted,
    "operationQueued": _payloads.OperationQueued, "operationDone": _payloads.OperationDone,
    "interactionRequested": _payloads.InteractionRequested, "runtimeStateChanged": _payloads.RuntimeStateChanged,
    "protocolError": _payloads.ProtocolError, "nativeNotification": _payloads.NativeNotification,
}


def _ok(value: Any, tp: Any) -> bool:
    """A shallow isinstance check for the annotation ``tp``."""
    if tp is Any:
        return True
    origin = get_origin(tp)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return any(_ok(value, a) for a in get_args(tp))
    if origin is typing.Literal:
        return value in get_args(tp)
    if origin in (dict, list):
        return isinstance(value, origin)
    if tp is type(None):
        return value is None
    if isinstance(tp, type) and typing.is_typeddict(tp):
        return isinstance(value, dict)
    return isinstance(value, tp) if isinstance(tp, type) else True


def _check(ev: codexrt.CodexEvent) -> list[str]:
    td = TYPED[ev.kind]
    hints = get_type_hints(td, include_extras=True)
    problems = []
    for key in td.__required_keys__:
        if key not in ev.payload:
            problems.append(f"{ev.kind}: missing {key!r}")
    for key, value in ev.payload.items():
        if key not in hints:
            if ev.kind == "runtimeStateChanged":
                continue  # runtimeStateChanged carries free-form detail (reason, exit status) beside from/to
            problems.append(f"{ev.kind}: unknown key {key!r}")
            continue
        tp = hints[key]
        if get_origin(tp) is NotRequired:
            tp = get_args(tp)[0]
        if not _ok(value, tp):
            problems.append(f"{ev.kind}.{key}: {value!r} is not {tp}")
    return problems


async def _events(peers: MemoryPeers, scenario: str, *, answer: bool = False) -> list[codexrt.CodexEvent]:
    seen: list[codexrt.CodexEvent] = []
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(scenario)])) as rt:
        with rt.subscribe() as events:
            op = rt.send("hello")
            async for ev in op.events():
                seen.append(ev)
                if answer and ev.kind == "interactionRequested":
                    await rt.respond_interaction(ev.payload["interactionKey"], ev.payload["dialogToken"],
                                                 {"decision": "decline"})
            while (ev := events.get_nowait()) is not None:
                seen.append(ev)
    return seen


@pytest.mark.parametrize(("scenario", "answer"), [
    ("handshake-ok", False), ("reverse-approval", True), ("broken-framing", False), ("turn-start-error", False),
])
async def test_typed_payloads_match_what_turns_produce(peers, scenario, answer):
    seen = await _events(peers, scenario, answer=answer)
    typed = [ev for ev in seen if ev.kind in TYPED]
    assert typed, [ev.kind for ev in seen]
    problems = [p for ev in typed for p in _check(ev)]
    assert not problems, problems
    # payload() narrows by kind and nothing else
    for ev in seen:
        assert (codexrt.payload(ev, "itemUpdated") is not None) == (ev.kind == "itemUpdated")


async def test_every_typed_kind_is_seen_somewhere(peers):
    kinds = set()
    for scenario, answer in (("handshake-ok", False), ("reverse-approval", True), ("broken-framing", False)):
        kinds |= {ev.kind for ev in await _events(peers, scenario, answer=answer)}
    assert set(TYPED) - kinds == set(), "a typed kind no scenario produced: its type is untested"
