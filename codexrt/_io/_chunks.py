"""Reading a pipe with one scheduler pass per chunk (issue 34).

``trio``'s ``FdStream.receive_some`` starts every call with a checkpoint (a full pass of the
scheduler, with an ``epoll`` poll) and only then tries ``os.read``; when nothing is there yet,
it parks in ``wait_readable`` and reads again. A reader that handles one line and calls
``receive_some`` again therefore pays, per line, two task steps (the checkpoint, then the park)
and two reads (one of them ``EAGAIN``). An app-server turn is ~16 stdout lines and ~6 stderr
lines that each arrive on their own, so that doubled every wake-up of the connection's reader
and stderr drain — CPU the app-server, on the same cores, then waited for.

:class:`ChunkReader` has exactly one schedule point per call: after a read that left the pipe
empty (it returned less than asked) the next call waits for the pipe first, then reads once;
after a full read it checkpoints and reads, so a reader that always finds data (a delta flood)
still yields once per chunk, as before, and a cancelled reader still stops at its next call.
Streams that are not a trio ``FdStream`` (in-memory peers, sockets) are read with their own
``receive_some``.

A closed stream raises ``ClosedResourceError`` (``aclose`` wakes a parked reader through
``notify_closing``), a failed read ``BrokenResourceError`` — the errors ``receive_some`` raises.
"""

from __future__ import annotations

import errno
import os

import trio

__all__ = ["ChunkReader", "widen_pipe"]


def widen_pipe(stream: trio.abc.ReceiveStream, size: int) -> int | None:
    """Ask the kernel for a pipe buffer of ``size`` bytes behind ``stream`` (Linux
    ``F_SETPIPE_SZ``; capped by ``/proc/sys/fs/pipe-max-size``, 1 MiB by default; the whole
    capacity counts against the user's ``pipe-user-pages-soft`` at once). Returns the size now in effect, or None where
    that cannot be asked (not a pipe, another OS, refused): best effort, never raises."""
    if not isinstance(stream, trio.lowlevel.FdStream):
        return None
    try:
        import fcntl

        set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
        fd = stream.fileno()
        if set_size is None or fd < 0:
            return None
        return int(fcntl.fcntl(fd, set_size, size))
    except OSError:
        return None


class ChunkReader:
    """``await reader.receive()`` → the next chunk of ``stream`` (at most ``max_bytes``, or
    ``burst_bytes`` while the pipe keeps filling reads), ``b""`` at EOF. One task reads at a
    time (the owner's reader task).

    ``burst_bytes`` (default ``max_bytes``): after a read that returned at least
    ``max_bytes`` (the peer writes faster than it is read: a delta flood) the next read asks
    for up to ``burst_bytes``, until a read returns less than ``max_bytes`` again. Use it on a
    pipe widened past ``max_bytes`` (:func:`widen_pipe`). A flood then costs one scheduler
    pass and one ``os.read`` per ``burst_bytes`` instead of per ``max_bytes``, while the
    lines of a quiet turn are still read with the small request: ``os.read`` allocates what
    it is asked for and then shrinks it, and a request past glibc's mmap threshold (128 KiB by
    default) is a fresh ``mmap``: asking for 256 KiB cost ≈ 18 µs more per read of a short line
    (issue 34, bench/RESULTS.md, sixteenth round)."""

    __slots__ = ("_stream", "_fd_stream", "_max", "_burst", "_ask", "_drained")

    def __init__(self, stream: trio.abc.ReceiveStream, max_bytes: int = 65536, burst_bytes: int | None = None) -> None:
        self._stream = stream
        self._fd_stream = stream if isinstance(stream, trio.lowlevel.FdStream) else None
        self._max = max_bytes
        self._burst = max(max_bytes, burst_bytes or max_bytes)
        self._ask = max_bytes  # what the next read asks for
        self._drained = False  # the last read left the pipe empty (it returned less than asked)

    async def receive(self) -> bytes:
        fd_stream = self._fd_stream
        if fd_stream is None:
            return await self._stream.receive_some(self._max)
        if self._drained:
            # The pipe was empty a moment ago: wait for it first (the wait is this call's
            # schedule point) instead of a read that would most likely fail with EAGAIN.
            await trio.lowlevel.wait_readable(self._fd(fd_stream))
        else:
            await trio.lowlevel.checkpoint()  # data may be waiting (a flood): still yield once per chunk
        while True:
            fd = self._fd(fd_stream)
            data = self._read(fd)
            if data is not None:
                return data
            await trio.lowlevel.wait_readable(fd)

    def receive_nowait(self) -> bytes | None:
        """One read without a schedule point, for a caller that has just passed one (a pause
        of its own): the next chunk, ``b""`` at EOF, or None when the pipe is empty (then
        :meth:`receive` waits for it). Saves the pass :meth:`receive` would spend waiting
        for a pipe that already holds data (issue 34). A stream that is not a trio
        ``FdStream`` is never read here: None, and :meth:`receive` reads it."""
        fd_stream = self._fd_stream
        if fd_stream is None:
            return None
        return self._read(self._fd(fd_stream))

    def _read(self, fd: int) -> bytes | None:
        """One ``os.read``: the chunk (``b""`` at EOF), or None when the pipe is empty; the
        errors ``receive_some`` raises."""
        ask = self._ask
        try:
            data = os.read(fd, ask)
        except BlockingIOError:
            self._drained = True
            self._ask = self._max
            return None
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("file was already closed") from None
            raise trio.BrokenResourceError from exc
        self._drained = len(data) < ask
        self._ask = self._burst if len(data) >= self._max else self._max
        return data

    @staticmethod
    def _fd(fd_stream: trio.lowlevel.FdStream) -> int:
        fd = fd_stream.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("file was already closed")
        return fd
