"""The stdio line plumbing both editor front ends use (``codexrt serve``, ``codexrt acp``): a
reader of framed lines from a byte stream and a writer of whole lines in FIFO order.

*Reading* (:func:`read_frames`): bounded frames from :class:`~codexrt._sansio._framing.LineBuffer`
(a line over the limit is one :class:`~codexrt._sansio._framing.OversizedLine`); a failing
stream is treated as EOF; the last unterminated line is delivered at EOF.

*Writing* (:class:`LineWriter`): each line is encoded once and written with one ``send_all``
under a FIFO lock, so lines never interleave and each leaves whole. When the stream breaks (the
host went away) ``on_broken`` runs once and later lines are dropped. A caller that has just
passed a schedule point of its own (``write(obj, parked=True)``: serve's event forwarder after
it waited for the event) writes a line of at most ``PIPE_BUF`` bytes to a pipe (or, on Linux, a
Unix stream socket, which takes such a write whole too: ``_whole_or_nothing``) with one
whole-or-nothing ``os.write`` and no further scheduler pass when nobody holds the lock (issue 34:
an event line cost the forwarder's wake-up and ``send_all``'s checkpoint, two passes).
:meth:`LineWriter.write_now` is that write for a caller that must not wait at all (the reader
handing serve an event): the line is written whole at once, or not at all and False.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import os
import select
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from codexrt._io._chunks import ChunkReader
from codexrt._sansio._framing import Frame, LineBuffer

__all__ = ["LineWriter", "UnencodableLine", "read_frames"]

log = logging.getLogger("codexrt.lines")

_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)

#: A pipe takes a write of at most this many bytes whole or not at all (POSIX), also non-blocking.
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)
#: A stream socket's peer shut down writing (Linux; elsewhere only a full hang-up is seen).
_POLLRDHUP = getattr(select, "POLLRDHUP", 0)


async def read_frames(receive: trio.abc.ReceiveStream, max_line: int) -> AsyncIterator[Frame]:
    """Every line of ``receive`` until EOF (a read error counts as EOF)."""
    buf = LineBuffer(max_line)
    read = ChunkReader(receive).receive  # one scheduler pass per chunk of a pipe (issue 34)
    while True:
        try:
            data = await read()
        except _GONE as exc:
            log.warning("stdin failed (%s); treating it as EOF", exc)
            data = b""
        for frame in (buf.feed(bytes(data)) if data else buf.close()):
            yield frame
        if not data:
            return


def _whole_or_nothing(stream: trio.abc.SendStream) -> bool:
    """Whether ``stream`` is a trio ``FdStream`` (non-blocking) that takes a write of at most
    ``PIPE_BUF`` bytes whole or not at all: a pipe (POSIX), or on Linux a Unix stream socket
    whose send buffer holds such a write in one piece — what Node's ``child_process`` (VS Code,
    most editors' extension hosts) gives its children as stdio. Linux queues a Unix stream
    write in pieces of at most half the send buffer less 64 bytes, each allocated whole or
    not at all, so a write within one piece is never split. Not a file, a terminal, another
    socket or an in-memory stream: those are written with ``send_all`` only."""
    if not isinstance(stream, trio.lowlevel.FdStream):
        return False
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode):
            return True
        if not (stat.S_ISSOCK(mode) and sys.platform == "linux"):
            return False
        sock = socket.socket(fileno=os.dup(fd))
        try:
            return (sock.family == socket.AF_UNIX and sock.type == socket.SOCK_STREAM
                    and (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >> 1) - 64 >= _PIPE_BUF)
        finally:
            sock.close()
    except (OSError, ValueError):
        return False


def _poll_now(stream: trio.lowlevel.FdStream, events: int) -> int | None:
    """The poll events of ``stream``'s fd right now (asking for ``events``), or None when it is
    closed or cannot be polled."""
    fd = stream.fileno()
    if fd < 0:
        return None
    poller = select.poll()
    poller.register(fd, events)
    try:
        return functools.reduce(operator.or_, (ev for _, ev in poller.poll(0)), 0)
    except OSError:
        return None


def _has_room(stream: trio.lowlevel.FdStream) -> bool:
    """Whether a write to ``stream`` would take bytes now (a writer may just not have run yet)."""
    return bool((_poll_now(stream, select.POLLOUT) or 0) & select.POLLOUT)


def _hung_up(stream: trio.lowlevel.FdStream) -> bool:
    """Whether the other end of ``stream`` (a pipe's or a socket's reading end) was closed for
    writing — it may still hold unread data — or ``stream`` itself was closed."""
    ev = _poll_now(stream, select.POLLIN | _POLLRDHUP)
    return ev is None or bool(ev & (select.POLLHUP | _POLLRDHUP | select.POLLNVAL))


def _period(grace: float) -> float:
    """How often a watch of ``grace`` seconds looks: ten times a second, more often for a short
    grace, never more than a hundred times."""
    return min(0.1, max(grace, 0.01))


class UnencodableLine(Exception):
    """:meth:`LineWriter.write` could not encode the object it was given (a bug upstream):
    nothing was written, so the caller can still write another line in its place."""


class LineWriter:
    """Whole lines to ``send`` in FIFO order (module doc)."""

    #: The longest line :meth:`write_now` (and a parked :meth:`write`) writes at once.
    MOST_NOW = _PIPE_BUF
    #: How long the rest of a line already begun is still written after its caller was
    #: cancelled (a host that stopped reading while serve stops): then the stream is broken.
    FINISH_BOUND = 5.0

    def __init__(self, send: trio.abc.SendStream, encode: Callable[[Any], bytes],
                 on_broken: Callable[[], None]) -> None:
        self._send = send
        self._encode = encode
        self._on_broken = on_broken
        self._lock = trio.Lock()
        self._pipe = _whole_or_nothing(send)  # a pipe, or a Unix socket written like one
        self.broken = False
        self.lines_written = 0
        self._progress = 0  # writes that took bytes (give_up_when_stuck's measure)
        self._sending: trio.CancelScope | None = None  # a send_all to a stream that is not an FdStream
        self._full: trio.Event | None = None  # set when a write waits for room (stuck_watch)

    async def write(self, obj: Any, *, parked: bool = False) -> None:
        """Write ``obj``'s line. ``parked=True``: the caller has just passed a schedule point of
        its own (module doc) — a short line to a pipe then goes out at once, without one more.
        Raises :class:`UnencodableLine`, having written nothing, when ``obj`` cannot be encoded,
        and ``Cancelled`` only when nothing of the line was written (a line begun is finished
        first: :meth:`_send_line`)."""
        data = self._encoded(obj)
        cut = False
        try:
            self._lock.acquire_nowait()  # free: no scheduler pass for it (``send_all`` has one)
        except trio.WouldBlock:
            await self._lock.acquire()  # FIFO behind the lines already waiting
        else:
            if parked and not self.broken:
                n = self._write_now(data)
                if n == len(data):
                    self.lines_written += 1
                    self._lock.release()
                    return
                data, cut = data[n:], n > 0
        try:
            if self.broken:
                return
            try:
                await self._send_line(data, begun=cut)
                if not self.broken:  # (a line left cut breaks the stream: not counted)
                    self.lines_written += 1
            except _GONE as exc:
                log.warning("stdout is gone (%s); stopping", exc)
                self._broke()
        finally:
            self._lock.release()

    def _broke(self) -> None:
        if not self.broken:
            self.broken = True
            self._on_broken()

    async def _send_line(self, data: bytes, *, begun: bool) -> None:
        """``data`` written whole (``begun``: the line's first bytes are out already). A line is
        never left cut: a caller cancelled once part of it is out still writes the rest, for at
        most :attr:`FINISH_BOUND` seconds more (shielded), and returns — the line is out, and the
        caller meets its cancellation at its next schedule point; a stream that does not take the
        rest by then is broken — nothing could follow a cut line. Cancelled before any byte
        went out, it raises ``Cancelled``: then nothing was written.
        On a trio ``FdStream`` the writes are ``send_all``'s own (non-blocking ``os.write``,
        waiting for room), so how much went out is known; another stream is written with
        ``send_all``, shielded in the same bound when ``begun`` — one whose ``send_all`` is
        cancellable only before it writes (serve's thread-backed stream for files and
        terminals, which waits for its writing thread; trio's memory streams)."""
        send = self._send
        if not isinstance(send, trio.lowlevel.FdStream):
            with trio.CancelScope(shield=begun) as scope:
                if begun:
                    scope.deadline = trio.current_time() + self.FINISH_BOUND
                self._sending = scope  # give_up_when_stuck's way to end it
                try:
                    await send.send_all(data)
                finally:
                    self._sending = None
                self._progress += 1
            if scope.cancelled_caught and not self.broken:  # (broken: given up, give_up_when_stuck)
                log.warning("stdout took no more of a line for %gs; stopping", self.FINISH_BOUND)
                self._broke()
            return
        view = memoryview(data)
        sent = 0

        async def rest() -> None:
            nonlocal sent
            while sent < len(view):
                fd = send.fileno()  # each time: the stream may be closed meanwhile (give_up_when_stuck)
                if fd < 0:
                    raise trio.ClosedResourceError("stdout was closed")
                try:
                    sent += os.write(fd, view[sent:])
                    self._progress += 1
                except BlockingIOError:
                    if self._full is not None:
                        self._full.set()  # (stuck_watch's look at stdin)
                    await trio.lowlevel.wait_writable(fd)

        if not begun:
            await trio.lowlevel.checkpoint()  # send_all's schedule point: nothing is out yet
        try:
            await rest()
        except trio.Cancelled:
            if not (sent or begun):
                raise  # nothing is out
            with trio.CancelScope(shield=True):
                with trio.move_on_after(self.FINISH_BOUND):
                    await rest()
            if sent < len(view):
                log.warning("stdout took no more of a line for %gs; stopping", self.FINISH_BOUND)
                self._broke()

    async def give_up_when_stuck(self, grace: float) -> None:
        """Run until cancelled — unless the stream takes nothing for ``grace`` seconds while a
        line waits to be written (a host that stopped reading but keeps the pipe open): then the
        writer is broken (``on_broken`` runs once, the waiting and later lines are dropped) and
        the write blocked on the stream is ended, and this returns. For a shutdown that must not
        wait on such a host forever (``codexrt serve`` and ``codexrt acp`` after SIGTERM or
        stdin EOF). Time this process itself did not run (stopped, swapped) does not count: each
        look adds at most two periods.

        A trio ``FdStream`` (a pipe, a socket) is watched byte by byte: a host still reading,
        however slowly, is kept, and so is a stream with room now; given up, it is closed,
        which ends the blocked write. Another stream's progress shows only per whole line (a
        line that takes longer than ``grace`` to be read counts as stuck), and given up, its
        blocked ``send_all`` is cancelled (a trio ``SocketStream``, a memory stream). A stream
        whose ``writes_in_thread`` attribute is true is not watched: its blocked write cannot be
        ended, and its progress is not seen within a line (``codexrt_cli``'s stream for a file,
        a terminal or a pipe shared with stderr — a slow terminal writing a long line is not a
        host that stopped reading)."""
        send = self._send
        if getattr(send, "writes_in_thread", False):
            await trio.sleep_forever()
        period = _period(grace)
        last, quiet, before = self._progress, 0.0, trio.current_time()
        while True:
            await trio.sleep(period)
            now = trio.current_time()
            quiet += min(now - before, 2 * period)
            before = now
            if (self._progress != last or not self._lock.locked()
                    or (isinstance(send, trio.lowlevel.FdStream) and _has_room(send))):
                last, quiet = self._progress, 0.0
            elif quiet >= grace:
                log.warning("stdout took nothing for %g s while lines waited: the host stopped reading; "
                            "dropping what is left to write", grace)
                self._broke()
                if isinstance(send, trio.lowlevel.FdStream):
                    with trio.CancelScope(shield=True):
                        await send.aclose()
                elif self._sending is not None:
                    self._sending.cancel()
                return

    @contextlib.asynccontextmanager
    async def stuck_watch(self, grace: float, stdin: trio.abc.ReceiveStream | None = None
                          ) -> AsyncIterator[Callable[[], None]]:
        """A block for a stdio service's whole run that yields ``start``: called once reading
        has ended (nobody may read the service's stdout again: stdin EOF, a signal), it runs
        :meth:`give_up_when_stuck` until the block exits — every task done, the last answer
        written — so a host that stopped reading but keeps the pipe open holds neither the
        shutdown nor the exit (``codexrt serve``, ``codexrt acp``).

        ``stdin`` (the service's, a trio ``FdStream``): the same watch also starts when stdin
        was closed by the host while stdout is full — before the reader reaches the EOF, which
        it may never do when it is itself waiting on stdout (an inline reply to a host that
        closed stdin and then waits for the service to exit, never reading: ``proc.stdin.close();
        proc.wait()``). Given up then, the lines stdin still holds are never read. stdin is
        looked at (every 0.1 s) only from a write that had to wait for room until the lock is
        free again, so an idle service is never woken."""
        async with trio.open_nursery() as nursery:
            early = trio.CancelScope()
            if isinstance(stdin, trio.lowlevel.FdStream) and isinstance(self._send, trio.lowlevel.FdStream):
                nursery.start_soon(self._watch_when_hung_up, grace, stdin, early)

            def start() -> None:
                early.cancel()
                nursery.start_soon(self.give_up_when_stuck, grace)

            try:
                yield start
            finally:
                nursery.cancel_scope.cancel()  # every task is done: nothing waits on stdout any more

    async def _watch_when_hung_up(self, grace: float, stdin: trio.lowlevel.FdStream,
                                  scope: trio.CancelScope) -> None:
        with scope:
            while not self.broken:
                self._full = full = trio.Event()
                await full.wait()
                self._full = None
                while self._lock.locked() and not self.broken:  # a write still waits for room
                    if _hung_up(stdin):
                        log.info("stdin was closed while stdout was full: stdout is given up if it takes "
                                 "nothing more for %g s", grace)
                        await self.give_up_when_stuck(grace)
                        return
                    await trio.sleep(_period(grace))

    def _encoded(self, obj: Any) -> bytes:
        try:
            return self._encode(obj)
        except Exception as exc:
            raise UnencodableLine(f"{type(exc).__name__}: {exc}"[:300]) from exc

    @property
    def ready_now(self) -> bool:
        """Whether :meth:`write_now` may write at all now (a pipe or a Unix socket written like
        one, not broken, the lock free): a caller can skip building a line that would not be
        written."""
        return self._pipe and not self.broken and not self._lock.locked()

    def write_now(self, obj: Any) -> bool:
        """Write ``obj``'s line at once, without a schedule point, when that can be done whole
        here: nobody holds the lock and the line goes to a pipe (or a Unix socket written like
        one) with one whole-or-nothing ``os.write`` (at most ``PIPE_BUF`` bytes). False: nothing
        was written. Raises :class:`UnencodableLine`, having written nothing, when ``obj``
        cannot be encoded."""
        if not self.ready_now:
            return False
        data = self._encoded(obj)
        if len(data) > _PIPE_BUF or self._write_now(data) != len(data):
            return False
        self.lines_written += 1
        return True

    def _write_now(self, data: bytes) -> int:
        """Bytes of ``data`` written by one ``os.write`` (the lock free or held by the caller,
        nothing queued ahead); 0 when nothing was tried or written: not a pipe, closed, longer
        than ``PIPE_BUF``, a full pipe, a failed write (``send_all`` then meets it and reports
        it), or a caller already cancelled (it writes nothing, as through ``send_all``). A
        non-blocking pipe takes a write of at most ``PIPE_BUF`` bytes whole or not at all
        (POSIX), so the answer is all or 0; :meth:`write` would finish any other part."""
        if not self._pipe or len(data) > _PIPE_BUF or trio.current_effective_deadline() <= trio.current_time():
            return 0
        send = self._send
        assert isinstance(send, trio.lowlevel.FdStream)
        fd = send.fileno()
        if fd < 0:  # closed
            return 0
        try:
            n = os.write(fd, data)
        except OSError:
            return 0
        self._progress += 1
        return n
