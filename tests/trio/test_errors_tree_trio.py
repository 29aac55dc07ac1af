"""The error tree seen from Trio and from the modules that classify server errors (issue #20)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import codexrt
from codexrt._features._edits_live import _thread_read_error, _unsupported
from codexrt._features._history import is_pagination_unsupported
from codexrt._io import _transport_ws
from codexrt._io._retry import is_overloaded
from codexrt._sansio import _errors as E
from codexrt._runtime._events import EventStream
from tests.sansio.test_errors_tree import RPC_CASES, TREE, _rpc


def test_resource_errors_are_trios_too():
    """``except trio.ClosedResourceError`` / ``BrokenResourceError`` / ``BusyResourceError``
    catch codexrt's ClosedError / ChildExited / BusyResourceError."""
    with pytest.raises(trio.ClosedResourceError):
        raise E.ClosedError("closed")
    with pytest.raises(trio.BrokenResourceError) as info:
        raise E.ChildExited(1, None)
    assert str(info.value) == "codex app-server exited (code=1, signal=null)"
    with pytest.raises(trio.BusyResourceError):
        raise E.BusyResourceError("busy")
    assert codexrt.BusyResourceError is not trio.BusyResourceError
    assert not issubclass(trio.BusyResourceError, codexrt.BusyResourceError)


async def test_busy_event_stream_is_caught_as_trios_busy_resource_error():
    """A real misuse (two tasks iterating one stream) is catchable with trio's class."""
    stream = EventStream()
    caught: list[BaseException] = []

    async def iterate() -> None:
        try:
            async for _ in stream:
                pass
        except trio.BusyResourceError as exc:
            caught.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(iterate)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(iterate)
        await trio.testing.wait_all_tasks_blocked()
        stream.close()
    assert len(caught) == 1 and isinstance(caught[0], codexrt.BusyResourceError)


def test_every_class_is_public():
    """Hosts catch the classes by name: each one is exported from ``codexrt``."""
    for name, cls in TREE.items():
        assert getattr(codexrt, name) is cls
        assert name in codexrt.__all__
    assert _transport_ws.EndpointUnavailable is codexrt.EndpointUnavailable
    assert _transport_ws.EndpointRejected is codexrt.EndpointRejected


@pytest.mark.parametrize(("rpc_code", "message", "kind", "cls"), RPC_CASES)
def test_the_table_drives_every_classifier(rpc_code, message, kind, cls):
    """The retry loop, the history fallback and the thread reader answer from the same table
    (R-H-1): no second list of wordings to drift apart."""
    exc = _rpc(rpc_code, message)
    assert is_overloaded(exc) is (kind == "overloaded")
    assert is_pagination_unsupported(exc) is (kind == "unsupported")
    assert _unsupported(exc) is (kind == "unsupported")
    read_error = _thread_read_error("0199", exc)
    assert type(read_error) is (E.ThreadNotFound if cls is E.ThreadNotFound else E.HistoryReadFailed)
