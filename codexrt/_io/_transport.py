"""Transports: how bytes reach an app-server (R-WIRE-10).

The connection layer (``codexrt._connection``) only sees the :class:`Transport` protocol — a
send stream, a receive stream, an optional stderr stream, ``wait_exit()`` and ``aclose()`` — so
it never assumes a process. :class:`ProcessTransport` is the default (``codex app-server`` over
stdio); :class:`StreamTransport` wraps already-connected streams (in-memory peers in tests, and
sockets later).

Child lifetime (R-RT-7, docs/runtime.md). On POSIX each child starts in its own session
(``start_new_session=True``), so its process-group id is its pid and a terminal's Ctrl+C reaches
the host only. Shutdown is shielded and escalates: close stdin (the real server exits on stdin
EOF within ~65 ms) → wait → SIGTERM to the child's *group* → wait → SIGKILL to the group, and
always reaps (trio's own pattern in ``_subprocess.py``). Group signals are sent while the leader
is unreaped, so the group id cannot have been reused; once the leader has exited, what is left
of its group is SIGKILLed before the leader is reaped (Linux, via a pidfd; elsewhere just after).
A SIGKILLed host is covered by :mod:`codexrt._io._reaper`, one small process per host that kills the
registered groups when the host's pipe to it reaches EOF. No ``preexec_fn`` is used: it is unsafe
in threaded parents, and ``PR_SET_PDEATHSIG`` fired when the *thread* that forked exited.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Awaitable, Callable, Mapping, Protocol, Sequence

import attrs
import trio

from codexrt._io._reaper import register_group, unregister_group

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


_POSIX = os.name == "posix"


@attrs.define(eq=False)
class ProcessTransport:
    """A child process spoken to over its stdin/stdout, with stderr drained separately.

    ``pgid`` is the child's own process group (POSIX, spawned by :func:`spawn_process_transport`)
    or ``None``, in which case signals go to the child alone."""

    process: trio.Process
    description: str
    close_grace: float = 2.0
    terminate_grace: float = 3.0
    pgid: int | None = None
    _status: ExitStatus | None = None
    _pidfd: int | None = None
    _reap_lock: trio.Lock = attrs.field(factory=trio.Lock)
    _reaped: bool = False

    def __attrs_post_init__(self) -> None:
        if self.pgid is not None and hasattr(os, "pidfd_open"):
            try:  # lets us see the exit without reaping, so the group id stays reserved
                self._pidfd = os.pidfd_open(self.process.pid)
            except OSError:  # pragma: no cover - kernel < 5.3
                self._pidfd = None

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

    def _signal(self, sig: int) -> None:
        """Signal the child's group (or the child alone). Only called while the leader is
        unreaped (``_reaped`` is False and no checkpoint since), so the id is still ours."""
        if self._reaped:
            return
        try:
            if self.pgid is not None:
                os.killpg(self.pgid, sig)
            else:
                self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):  # pragma: no cover - raced with exit
            pass

    async def _reap(self) -> int:
        """Wait for the leader to exit, sweep what is left of its group, then reap it.
        Cancellable (the caller bounds it); idempotent."""
        async with self._reap_lock:
            if not self._reaped:
                if self._pidfd is not None:
                    await trio.lowlevel.wait_readable(self._pidfd)
                    self._signal(signal.SIGKILL)  # leader is a zombie: sweep its group
                    await self.process.wait()
                    self._reaped = True
                else:
                    await self.process.wait()
                    self._reaped = True
                    if self.pgid is not None:  # no pidfd: sweep just after the reap
                        try:
                            os.killpg(self.pgid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
                self._forget()
            rc = self.process.returncode
            assert rc is not None
            return rc

    def _forget(self) -> None:
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self.pgid is not None:
            unregister_group(self.pgid)

    async def wait_exit(self) -> ExitStatus:
        rc = await self._reap()
        self._status = ExitStatus.from_returncode(rc)
        return self._status

    async def aclose(self) -> ExitStatus:
        """Close stdin, wait ``close_grace`` s, SIGTERM the group, wait ``terminate_grace`` s,
        SIGKILL the group, then reap. Shielded: cancelling the caller cannot leave a zombie or
        an orphan."""
        with trio.CancelScope(shield=True):
            if not self._reaped:
                stdin = self.process.stdin
                if stdin is not None:
                    try:
                        await stdin.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass
                with trio.move_on_after(self.close_grace):
                    await self._reap()
                if not self._reaped:
                    self._signal(signal.SIGTERM)
                    with trio.move_on_after(self.terminate_grace):
                        await self._reap()
                if not self._reaped:
                    self._signal(signal.SIGKILL)
                    await self._reap()  # SIGKILL cannot be ignored: bounded in practice
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                if stream is not None:
                    try:
                        await stream.aclose()
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        pass
            self._status = ExitStatus.from_returncode(self.process.returncode)
            return self._status

    def kill(self) -> None:
        """SIGKILL the child's group now (last resort of a stop); reaping is left to
        :meth:`wait_exit` / :meth:`aclose`."""
        self._signal(signal.SIGKILL)


async def spawn_process_transport(
    argv: Sequence[str] | str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    parent_death_signal: bool = True,
) -> ProcessTransport:
    """Start ``argv`` with piped stdin/stdout/stderr, in its own session on POSIX. With
    ``parent_death_signal`` (the default) its group is registered with this process's reaper
    (:mod:`codexrt._io._reaper`), which kills it if this process dies without reaping it. Raises
    ``OSError`` (e.g. ENOENT) when the program cannot be started; the caller turns that into a
    startup failure. A ``str`` is a complete Windows command line (a ``.cmd`` shim's, see
    :func:`codexrt._io._discovery.spawn_command`), handed to ``CreateProcess`` unchanged."""
    options: dict[str, object] = {}
    if _POSIX:
        options["start_new_session"] = True
    process = await trio.lowlevel.open_process(
        argv if isinstance(argv, str) else list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        **options,
    )
    pgid = process.pid if _POSIX else None
    if pgid is not None and parent_death_signal:
        register_group(pgid)  # a short locked pipe write; the reaper starts once per process
    return ProcessTransport(process, description=argv if isinstance(argv, str) else " ".join(argv), pgid=pgid)


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
