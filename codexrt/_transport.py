"""Transports: how bytes reach an app-server (R-WIRE-10).

The connection layer (``codexrt._connection``) only sees the :class:`Transport` protocol — a
send stream, a receive stream, an optional stderr stream, ``wait_exit()`` and ``aclose()`` — so
it never assumes a process. :class:`ProcessTransport` is the default (``codex app-server`` over
stdio); :class:`StreamTransport` wraps already-connected streams (in-memory peers in tests, and
sockets later).

Shutdown of a child is shielded and escalates: close stdin (the real server exits on stdin
EOF within ~65 ms) → wait → SIGTERM → wait → SIGKILL, and always reaps (trio's own pattern in
``_subprocess.py``). On Linux the child also gets a parent-death signal (R-RT-7), so even a
SIGKILLed host leaves no app-server behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Awaitable, Callable, Mapping, Protocol, Sequence

import attrs
import trio

__all__ = ["ExitStatus", "Transport", "ProcessTransport", "StreamTransport", "spawn_process_transport"]


@attrs.frozen
class ExitStatus:
    """How the peer ended: ``returncode`` (None when unknown) and ``signal`` (a POSIX signal
    number when it was killed by one)."""

    returncode: int | None
    signal: int | None = None

    @classmethod
    def from_returncode(cls, rc: int | None) -> "ExitStatus":
        if rc is not None and rc < 0:
            return cls(None, -rc)
        return cls(rc, None)


class Transport(Protocol):
    send_stream: trio.abc.SendStream
    receive_stream: trio.abc.ReceiveStream
    stderr_stream: trio.abc.ReceiveStream | None
    pid: int | None
    description: str

    async def wait_exit(self) -> ExitStatus:
        """Wait until the peer is gone and say how. Unbounded by itself: callers bound it."""
        ...

    async def aclose(self) -> ExitStatus:
        """Close gracefully, escalating; idempotent; returns the exit status."""
        ...


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # pragma: no cover - best effort
        pass


@attrs.define(eq=False)
class ProcessTransport:
    """A child process spoken to over its stdin/stdout, with stderr drained separately."""

    process: trio.Process
    description: str
    close_grace: float = 2.0
    terminate_grace: float = 3.0
    _status: ExitStatus | None = None

    @property
    def send_stream(self) -> trio.abc.SendStream:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def receive_stream(self) -> trio.abc.ReceiveStream:
        assert self.process.stdout is not None
        return self.process.stdout

    @property
    def stderr_stream(self) -> trio.abc.ReceiveStream | None:
        return self.process.stderr

    @property
    def pid(self) -> int | None:
        return self.process.pid

    async def wait_exit(self) -> ExitStatus:
        rc = await self.process.wait()
        self._status = ExitStatus.from_returncode(rc)
        return self._status

    async def aclose(self) -> ExitStatus:
        """Close stdin, wait ``close_grace`` s, SIGTERM, wait ``terminate_grace`` s, SIGKILL,
        then reap. Shielded: cancelling the caller cannot leave a zombie or an orphan."""
        with trio.CancelScope(shield=True):
            if self.process.returncode is None:
                stdin = self.process.stdin
                if stdin is not None:
                    try:
                        await stdin.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass
                with trio.move_on_after(self.close_grace):
                    await self.process.wait()
                if self.process.returncode is None:
                    try:
                        self.process.terminate()
                    except ProcessLookupError:  # pragma: no cover - raced with exit
                        pass
                    with trio.move_on_after(self.terminate_grace):
                        await self.process.wait()
                if self.process.returncode is None:
                    try:
                        self.process.kill()
                    except ProcessLookupError:  # pragma: no cover
                        pass
                    await self.process.wait()  # SIGKILL cannot be ignored: bounded in practice
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                if stream is not None:
                    try:
                        await stream.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass
            self._status = ExitStatus.from_returncode(self.process.returncode)
            return self._status

    def kill(self) -> None:
        if self.process.returncode is None:
            try:
                self.process.kill()
            except ProcessLookupError:  # pragma: no cover
                pass


async def spawn_process_transport(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    parent_death_signal: bool = True,
) -> ProcessTransport:
    """Start ``argv`` with piped stdin/stdout/stderr. Raises ``OSError`` (e.g. ENOENT) when
    the program cannot be started; the caller turns that into a startup failure."""
    options: dict[str, object] = {}
    if parent_death_signal and sys.platform.startswith("linux"):
        options["preexec_fn"] = _set_pdeathsig
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        **options,
    )
    return ProcessTransport(process, description=" ".join(argv))


@attrs.define(eq=False)
class StreamTransport:
    """Already-connected streams (in-memory peers, sockets). ``exit_status`` is awaited to say
    how the peer ended; by default a closed stream counts as ``ExitStatus(0)``."""

    send_stream: trio.abc.SendStream
    receive_stream: trio.abc.ReceiveStream
    stderr_stream: trio.abc.ReceiveStream | None = None
    description: str = "stream"
    pid: int | None = None
    exit_status: Callable[[], Awaitable[ExitStatus]] | None = None
    on_close: Callable[[], Awaitable[None]] | None = None
    _closed: bool = False
    _status: ExitStatus | None = None

    async def wait_exit(self) -> ExitStatus:
        if self._status is None:
            self._status = await self.exit_status() if self.exit_status else ExitStatus(0)
        return self._status

    async def aclose(self) -> ExitStatus:
        with trio.CancelScope(shield=True):
            if not self._closed:
                self._closed = True
                for stream in (self.send_stream, self.receive_stream, self.stderr_stream):
                    if stream is not None:
                        try:
                            await stream.aclose()
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            pass
                if self.on_close is not None:
                    await self.on_close()
            with trio.move_on_after(5):
                return await self.wait_exit()
            return ExitStatus(None)
