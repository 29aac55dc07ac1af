"""The scripted fake ``codex app-server`` over Trio in-memory streams, for fast tests.

Same interpreter as the stdio runner (``scenario.ScenarioPeer``), same timeline semantics
(``scenario.ActionQueue``: a ``Sleep`` delays the rest of its action list without stopping
input), but driven by Trio: sleeps are ``trio.sleep``-style deadlines on Trio's clock, so tests
under ``autojump_clock`` run a 40 s ``late-response`` instantly and can assert
``trio.current_time()``.

Tasks: ``MemoryPeer.run`` owns a nursery with two tasks, a *reader* (client bytes → lines →
``on_line`` → queue) and a *writer* (waits for the next due batch or new work, then writes).
The writer is the only task touching ``to_client``/``stderr``.  ``run`` returns the exit code:
``0`` on EOF from the client (like the real server), the scenario's code on ``Exit``.  On the
way out it closes ``to_client`` and ``stderr`` so the client sees EOF, as after a process exit.
``CloseStdout`` closes ``to_client`` only; later writes are dropped and reading continues.

``open_memory_peer(nursery, scenario)`` wires one-way memory streams for stdin, stdout and
stderr, starts ``run`` in the caller's nursery and returns the client's ends.  Memory streams
are unbounded, so a client that never drains stderr does not block the peer; pass
``lockstep=True`` for zero-buffer streams (a write waits for the reader, like a full pipe) to
prove that a client drains stdout and stderr concurrently.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import trio
import trio.testing

from peer_fixtures.scenario import (
    ActionQueue,
    CloseStdout,
    Exit,
    Scenario,
    ScenarioPeer,
    Stderr,
    Write,
)

__all__ = ["MemoryPeer", "MemoryPeerStreams", "open_memory_peer", "open_memory_peer_streams"]


class MemoryPeer:
    """A scenario peer that talks over Trio streams.

    ``received`` is the interpreter's list of decoded client messages; ``exit_code`` is None
    until ``run`` returns; ``finished`` is set when it does. ``await wait_received(method)``
    waits for messages without polling: the reader wakes waiters after each chunk it decodes.
    """

    def __init__(self, scenario: "Scenario | str | os.PathLike[str] | Mapping[str, Any]") -> None:
        self.interpreter = ScenarioPeer(scenario)
        self.exit_code: int | None = None
        self.finished = trio.Event()
        self._queue = ActionQueue()
        self._wake = trio.Event()
        self._arrived = trio.Event()  # set (and replaced) whenever ``received`` grew or input ended
        self._stdout_open = True
        self._stderr_open = True
        self._eof = False

    @property
    def received(self) -> list[Any]:
        return self.interpreter.received

    @property
    def scenario(self) -> Scenario:
        return self.interpreter.scenario

    def received_of(self, method: str | None = None) -> list[Any]:
        """The messages received so far whose ``method`` is ``method`` (all of them for None)."""
        return [m for m in self.received if method is None or (isinstance(m, dict) and m.get("method") == method)]

    def ended(self) -> bool:
        """Whether the peer can receive nothing more (client EOF, or ``run`` returned)."""
        return self._eof or self.finished.is_set()

    async def wait_received(self, method: str | None = None, count: int = 1) -> list[Any]:
        """Wait until at least ``count`` messages of ``method`` (any message for None) have
        arrived and return all of them. Woken by the reader as lines arrive - no polling. Fails
        (AssertionError, naming what did arrive) as soon as the peer can receive nothing more.
        Unbounded by itself: callers put it under a deadline (``tests._support`` does)."""
        while True:
            arrived = self._arrived
            got = self.received_of(method)
            if len(got) >= count:
                return got
            if self.ended():
                raise AssertionError(f"peer {self.scenario.name!r} ended after {len(got)} of {count} "
                                     f"{method or 'message'}(s); it received {self.received_methods()}")
            await arrived.wait()

    def _notify_arrived(self) -> None:
        self._arrived.set()
        self._arrived = trio.Event()

    def received_methods(self) -> list[str]:
        """Methods of the requests and notifications received so far, in order."""
        return [m["method"] for m in self.received if isinstance(m, dict) and isinstance(m.get("method"), str)]

    async def run(
        self,
        from_client: trio.abc.ReceiveStream,
        to_client: trio.abc.SendStream,
        stderr: trio.abc.SendStream | None = None,
    ) -> int:
        """Serve until client EOF (→ 0) or a scenario ``Exit`` (→ its code).

        Cancelling ``run`` stops the peer at once (like SIGKILL: ``exit_code`` becomes ``-9``)
        but still closes its streams.
        """
        code = 0
        ended = False
        try:
            async with trio.open_nursery() as nursery:
                self._schedule(self.interpreter.start())

                async def reader() -> None:
                    buf = b""
                    while True:
                        try:
                            chunk = await from_client.receive_some(65536)
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            chunk = b""
                        if not chunk:
                            # Like the stdio runner: what is already due is still written, the
                            # delayed rest is dropped, then the peer ends with 0.
                            self._eof = True
                            self._wake.set()
                            self._notify_arrived()
                            return
                        buf += chunk
                        *lines, buf = buf.split(b"\n")
                        for line in lines:
                            if line.strip():
                                self._schedule(self.interpreter.on_line(line))
                        if lines:
                            self._notify_arrived()

                async def writer() -> None:
                    nonlocal code, ended
                    while True:
                        due = self._queue.next_due()
                        with trio.move_on_at(math.inf if due is None else due):
                            await self._wake.wait()
                        self._wake = trio.Event()
                        for action in self._queue.pop_due(trio.current_time()):
                            if isinstance(action, Write):
                                if self._stdout_open:
                                    try:
                                        await to_client.send_all(action.data)
                                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                                        self._stdout_open = False
                            elif isinstance(action, Stderr):
                                if stderr is not None and self._stderr_open:
                                    try:
                                        await stderr.send_all(action.data)
                                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                                        self._stderr_open = False
                            elif isinstance(action, Exit):
                                code, ended = action.code, True
                                nursery.cancel_scope.cancel()
                                return
                            elif isinstance(action, CloseStdout):
                                self._stdout_open = False
                                await to_client.aclose()
                        if self._eof:
                            code, ended = 0, True
                            nursery.cancel_scope.cancel()
                            return

                nursery.start_soon(reader)
                nursery.start_soon(writer)
        finally:
            # Cancelled from outside: report it like a process killed by SIGKILL.
            self.exit_code = code if ended else -9
            with trio.CancelScope(shield=True):
                await to_client.aclose()
                if stderr is not None:
                    await stderr.aclose()
            self.finished.set()
            self._notify_arrived()
        return code

    def _schedule(self, actions: list[Any]) -> None:
        if actions and not self._eof:
            self._queue.add(trio.current_time(), actions)
            self._wake.set()


@dataclass
class MemoryPeerStreams:
    """The client's ends of a memory peer: write its stdin, read its stdout and stderr."""

    send: trio.abc.SendStream
    receive: trio.abc.ReceiveStream
    stderr: trio.abc.ReceiveStream
    peer: MemoryPeer

    def __iter__(self) -> Iterator[Any]:  # allows ``send, receive, stderr, peer = open_memory_peer(...)``
        return iter((self.send, self.receive, self.stderr, self.peer))


def open_memory_peer(
    nursery: trio.Nursery,
    scenario: "Scenario | str | os.PathLike[str] | Mapping[str, Any]",
    *,
    lockstep: bool = False,
) -> MemoryPeerStreams:
    """Start a ``MemoryPeer`` for ``scenario`` in ``nursery`` and return the client's ends.

    ``lockstep=True`` uses zero-buffer streams for stdout and stderr (a write waits until the
    client reads), the in-memory equivalent of a pipe that is full.
    """
    pair = trio.testing.lockstep_stream_one_way_pair if lockstep else trio.testing.memory_stream_one_way_pair
    stdin_send, stdin_receive = trio.testing.memory_stream_one_way_pair()
    stdout_send, stdout_receive = pair()
    stderr_send, stderr_receive = pair()
    peer = MemoryPeer(scenario)
    nursery.start_soon(peer.run, stdin_receive, stdout_send, stderr_send, name=f"fake-app-server:{peer.scenario.name}")
    return MemoryPeerStreams(stdin_send, stdout_receive, stderr_receive, peer)


open_memory_peer_streams = open_memory_peer
