# size: class Connection (~570 lines) is one driver: its reader, writer and call paths share one RpcCore, one queue and one close path, and a split would add a task hop to the hot path (bench/stream.py).
"""The Trio driver of one JSON-RPC connection to an app-server.

Who owns what
-------------
``open_connection(transport, sink=…)`` is an ``async with`` that owns a nursery with three
tasks, and nothing outside it:

* the **reader** — reads the transport, frames lines, feeds :class:`~codexrt._sansio._rpc.RpcCore`,
  wakes the caller waiting for each response, and hands every other event to ``sink``;
* the **writer** — the only task that awaits a write; it takes whole lines from a queue, so a
  line is never interleaved or cut by a cancelled caller (cancelling a ``call`` withdraws its
  line if it was not yet being written, else the request counts as ``writtenUnconfirmed``).
  When the writer is idle, nothing is queued and the transport is a pipe, a short line is
  instead written at once by the task that made it, in one non-blocking ``os.write`` (no await,
  so nothing can cancel it halfway; a pipe writes up to ``PIPE_BUF`` bytes whole or not at all):
  a request then costs no hop through the writer task. A full pipe or any error leaves the
  line to the writer as before, and so does a caller that is already cancelled or out of time
  (its line is withdrawn at its first checkpoint, ``notWritten``);
* the **stderr drain** — keeps a bounded, redacted tail of the child's stderr (R-WIRE-9) and
  never lets a chatty stderr fill its pipe and stall the child.

``sink`` is called on the reader and must neither block nor raise: it files events into
buffers (the runtime's router does exactly that). User code — approval handlers, consumers —
never runs on the reader, so the reader never waits for a human or a slow consumer.
Streaming text: back-to-back exact delta lines of one item *in one read* reach the sink as one
:class:`Notification` (text joined in order, ``delta_count`` = how many lines); pass
``coalesce_deltas=False`` for one notification per line.

Waits: every ``call`` has a deadline (default 30 s, R-WIRE-4); ``reply`` waits only for its
line to be written (bounded too). End of stream settles every pending call exactly once with
``CHILD_EXITED`` carrying the real exit status, and later calls fail at once (R-WIRE-6).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import select
from typing import Any, AsyncIterator, Callable, Container, Deque, Union

import attrs
import msgspec
import trio

from codexrt._sansio._errors import DEFAULT_RPC_TIMEOUT
from codexrt._sansio._wire import ClientInfo
from codexrt._sansio._errors import (
    ChildExited,
    ClosedError,
    CodexError,
    HandshakeError,
    LocalProtocolError,
    RemoteProtocolError,
    RpcError,
    RpcTimeout,
    ServerOverloaded,
)
from codexrt._sansio._framing import DEFAULT_MAX_LINE, LineBuffer, OversizedLine
from codexrt._sansio._redact import LineRedactor, Redactor
from codexrt._sansio._rpc import (
    SERVER_OVERLOADED,
    CallBroken,
    CallFailed,
    CallSucceeded,
    LateResponse,
    OutboundCall,
    Phase,
    ProtocolViolation,
    RpcCore,
    UnsupportedServerRequest,
)
from codexrt._sansio._wire import (
    Notification,
    RequestId,
    ServerRequest,
    decode_envelope,
    decode_json,
    merge_delta_read,
)
from codexrt._sansio._models import decode_typed_result
from codexrt._io._chunks import ChunkReader, widen_pipe
from codexrt._io._transport import ExitStatus, Transport
from codexrt._io._util import unwrap_single_group

__all__ = [
    "ClientInfo",
    "Connection",
    "ConnectionClosed",
    "ConnectionEvent",
    "open_connection",
    "PendingCall",
    "DEFAULT_RPC_TIMEOUT",
]

log = logging.getLogger("codexrt.connection")

#: POSIX guarantees that a pipe write of at most PIPE_BUF bytes (512 at least, 4096 on Linux)
#: is never split; the direct write of a line (``Connection._write_now``) stays within it.
_PIPE_BUF: int = getattr(select, "PIPE_BUF", 512)
STARTUP_FAILURE_MARKER = "codex app-server failed to start"


@attrs.frozen
class ConnectionClosed:
    """Last event of a connection: ``error`` is the settle error (``ChildExited``), or None
    when we closed it ourselves."""

    error: CodexError | None
    status: ExitStatus | None


ConnectionEvent = Union[
    Notification, ServerRequest, LateResponse, ProtocolViolation, UnsupportedServerRequest, ConnectionClosed
]


@attrs.define(eq=False)
class _Frame:
    data: bytes
    call: OutboundCall | None = None
    on_written: Callable[[], None] | None = None
    state: str = "queued"  # queued | writing | written | withdrawn | failed
    done: trio.Event = attrs.field(factory=trio.Event)


@attrs.define(eq=False)
class _Waiter:
    event: trio.Event = attrs.field(factory=trio.Event)
    outcome: CallSucceeded | CallFailed | CodexError | None = None


class PendingCall:
    """A request :meth:`Connection.send_request` sent without waiting for its answer.

    ``await pending.result()`` waits for the answer within the request's timeout and returns
    or raises exactly what :meth:`Connection.call` would. Use it as a context manager: leaving
    the block without the result (an error, a cancel) withdraws the request — a queued line is
    never written, a written one is abandoned and its late answer becomes a
    :class:`LateResponse` event. ``result()`` may be awaited once."""

    __slots__ = ("_conn", "method", "_call", "_waiter", "_frame", "_timeout", "_deadline", "_typed", "_raw", "_open")

    def __init__(self, conn: Connection, method: str, call: OutboundCall | None, waiter: _Waiter, frame: _Frame,
                 timeout: float, *, typed: bool, raw: bool) -> None:
        self._conn = conn
        self.method = method
        self._call = call
        self._waiter = waiter
        self._frame = frame
        self._timeout = timeout
        self._deadline = trio.current_time() + timeout if math.isfinite(timeout) else math.inf
        self._typed = typed
        self._raw = raw
        self._open = True

    def __repr__(self) -> str:
        ident = "unsent" if self._call is None else f"id={self._call.id}"
        return f"<PendingCall {self.method} {ident} {self._frame.state}>"

    @property
    def phase(self) -> Phase:
        """Whether the request was written yet (R-WIRE-4)."""
        return Phase.WRITTEN_UNCONFIRMED if self._frame.state in ("writing", "written") else Phase.NOT_WRITTEN

    async def written(self) -> None:
        """Return once the request is out (or will never be: withdrawn, connection ended, out
        of time); at once, without yielding, when it already is — the usual case, a short
        line on an idle pipe being written by :meth:`Connection.send_request` itself."""
        frame = self._frame
        if frame.state in ("queued", "writing"):
            with trio.move_on_at(self._deadline):
                await frame.done.wait()

    def __enter__(self) -> PendingCall:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._withdraw()

    def _withdraw(self) -> None:
        if not self._open:
            return
        self._open = False
        if self._call is None or self._waiter.event.is_set():
            return  # never sent, or answered (or settled) but not read: nothing is waiting any more
        self._conn._waiters.pop(self._call.id, None)
        if self._frame.state == "queued":
            self._frame.state = "withdrawn"
        self._conn.core.abandon(self._call)

    async def result(self) -> Any:
        """The answer, as :meth:`Connection.call` returns it; :class:`RpcTimeout` once the
        request's timeout (counted from sending) ran out."""
        if not self._open:
            raise LocalProtocolError(f"the answer to {self.method} was already awaited, or it was withdrawn",
                                     details={"method": self.method})
        if self._call is None:  # the caller was cancelled before anything was sent
            self._open = False
            await trio.lowlevel.checkpoint()
            raise RpcTimeout(f"{self.method} was not sent: its caller was out of time ({Phase.NOT_WRITTEN.value})",
                             phase=Phase.NOT_WRITTEN.value, details={"method": self.method})
        waiter = self._waiter
        finished = False
        try:
            with trio.move_on_at(self._deadline):
                await waiter.event.wait()
            finished = waiter.event.is_set()
        finally:
            if not finished:
                self._withdraw()
        self._open = False
        if not finished:
            phase = self.phase
            raise RpcTimeout(
                f"{self.method} timed out after {self._timeout:g}s ({phase.value})",
                phase=phase.value,
                details={"method": self.method, "requestId": self._call.id},
            )
        return self._conn._settle_call(self)


_STDERR_CHUNK = 65536


#: What :meth:`Connection.activity` reads: bumped whenever any connection of this process starts
#: a request (but one of :data:`HISTORY_PAGE_READS`), hears a line other than a reply, or answers a
#: server request.
_activity = 0
#: Requests that start no change and leave :meth:`Connection.activity` as it is: the history page
#: reads (read-only in the app-server), so two walks read ahead at once do not spoil each other's
#: pages (issue 34). Nothing else is listed: a request unknown to be read-only counts as a change.
HISTORY_PAGE_READS = frozenset({"thread/items/list", "thread/turns/list"})


class Connection:
    """One JSON-RPC connection. Create it with :func:`open_connection`."""

    def __init__(
        self,
        transport: Transport,
        *,
        sink: Callable[[ConnectionEvent], None],
        supported_server_requests: Container[str] | Callable[[str], bool] = frozenset(),
        client_info: ClientInfo | None = None,
        capabilities: dict[str, Any] | None = None,
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
        handshake_timeout: float = DEFAULT_RPC_TIMEOUT,
        max_line: int = DEFAULT_MAX_LINE,
        stderr_tail_lines: int = 200,
        redactor: Redactor | None = None,
        exit_wait: float = 5.0,
        coalesce_deltas: bool = True,
    ) -> None:
        self.transport = transport
        self._coalesce_deltas = coalesce_deltas
        self._sink = sink
        self.core = RpcCore(supported_server_requests)
        self.client_info = client_info or ClientInfo()
        caps = {"experimentalApi": True}
        caps.update(capabilities or {})
        self.capabilities = caps
        self.rpc_timeout = rpc_timeout
        self.handshake_timeout = handshake_timeout
        self._framer = LineBuffer(max_line)
        self._redact = redactor or Redactor()
        self._redact_stderr = LineRedactor(self._redact)
        self._stderr_tail: Deque[str] = collections.deque(maxlen=stderr_tail_lines)
        self._stderr_done = trio.Event()
        self._stderr_pause: trio.CancelScope | None = None  # the drain's batching pause, while it waits
        self._stderr_hurry = False  # the connection is ending: the drain reads to EOF without pausing
        self._exit_wait = exit_wait
        self._queue: Deque[_Frame] = collections.deque()
        self._replies: Deque[_Frame] = collections.deque()  # reader-made replies go first, in order
        self._queue_nonempty = trio.Event()
        self._writer_idle = False  # set while the writer waits for a line (see _write_now)
        send = transport.send_stream
        self._pipe_fd: Callable[[], int] | None = (
            send.fileno if isinstance(send, getattr(trio.lowlevel, "FdStream", ())) else None)
        self._waiters: dict[int, _Waiter] = {}
        self._handshake_started = False
        self._handshake_done = trio.Event()
        self._handshake_error: CodexError | None = None
        self.initialize_result: dict[str, Any] | None = None
        self._final: CodexError | None = None
        self.exit_status: ExitStatus | None = None
        self.closed = trio.Event()
        self._closing = False
        self._nursery: trio.Nursery | None = None

    def __repr__(self) -> str:
        state = "closed" if self.closed.is_set() else ("ready" if self.ready else "open")
        return f"<Connection {state} pid={self.transport.pid} {self.core!r}>"

    # -- state ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._handshake_done.is_set() and self._handshake_error is None

    @property
    def pid(self) -> int | None:
        return self.transport.pid

    def stderr_tail(self) -> list[str]:
        """The last lines of the child's stderr, already redacted (R-WIRE-9)."""
        return list(self._stderr_tail)

    def activity(self) -> int:
        """A process-wide mark: it changes whenever any connection of this process starts a
        request (but a history page read, :data:`HISTORY_PAGE_READS`), hears a line other than a
        reply (a notification, a server request, an unreadable line) or answers a server
        request. Two equal marks: in between, every connection only received answers and read
        pages — nothing anywhere could have changed a thread (serve's history read-ahead,
        issue 34: a change made through one channel's child is not heard on another's
        connection)."""
        return _activity

    def statistics(self) -> dict[str, int]:
        return {
            "pendingCalls": len(self.core.outbound),
            "pendingServerRequests": len(self.core.inbound),
            "queuedWrites": len(self._queue),
        }

    # -- tasks ---------------------------------------------------------------------------

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._writer)
            if self.transport.stderr_stream is not None:
                nursery.start_soon(self._stderr_drain)
            else:
                self._stderr_done.set()
            task_status.started()
            try:
                await self._reader()
            finally:
                if not self.closed.is_set():
                    self._settle_cancelled()
            nursery.cancel_scope.cancel()

    def _settle_cancelled(self) -> None:
        """The reader was cancelled from outside (its owner's scope ended): settle what is
        pending with ``ClosedError`` so nobody waits for an answer that cannot come."""
        self._closing = True
        self._finish(ClosedError("connection closed by its owner"), None, None)

    def _finish(self, error: CodexError, event_error: CodexError | None, status: ExitStatus | None) -> None:
        """Settle everything pending exactly once with ``error`` (R-WIRE-6) and announce the end."""
        self._final = error
        calls, _requests = self.core.close()
        for call in calls:
            waiter = self._waiters.pop(call.id, None)
            if waiter is not None:
                waiter.outcome = error
                waiter.event.set()
        self._fail_queued()
        if not self._handshake_done.is_set():
            self._handshake_error = error
            self._handshake_done.set()
        self._emit(ConnectionClosed(event_error, status))
        self.closed.set()

    async def _reader(self) -> None:
        stream = self.transport.receive_stream
        widen_pipe(stream, self.STDOUT_PIPE_BYTES)
        receive = ChunkReader(stream, burst_bytes=self.STDOUT_BURST_BYTES).receive
        try:
            while True:
                data = await receive()
                if not data:
                    break
                if self._coalesce_deltas:
                    # Fast path of a delta flood: back-to-back exact delta lines of one item
                    # become one notification (a read of only delta lines is decoded in one
                    # call, ``merge_delta_read``); they are notifications, so they skip the
                    # RPC core (no RPC state) and go straight to the sink. Every line it
                    # leaves as bytes is known not to be an exact delta line.
                    frames = merge_delta_read(self._framer, data)
                    try_delta = False
                else:
                    frames = self._framer.feed(data)
                    try_delta = True
                for frame in frames:
                    if type(frame) is Notification:
                        self._notify(frame)
                    else:
                        self._on_frame(frame, try_delta)
            for frame in self._framer.close():
                self._on_frame(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception as exc:  # fault barrier: a reader that cannot go on ends the connection
            await self._reader_failed(exc)
            return
        await self._settle_end()

    async def _reader_failed(self, exc: Exception) -> None:
        """The reader itself failed (a bug, or input no guard foresaw). Nobody reads the
        child's stdout any more, so the child is stopped and reaped, and everything pending is
        settled once with a ``PROTOCOL_ERROR`` that says so — the owner sees a failed
        connection (the runtime goes to FAILED, ``runtimeUnhealthy``), never a live-looking
        one that cannot answer."""
        what = self._redact(f"{type(exc).__name__}: {exc}")[:500]
        log.error("connection reader failed (%s); stopping the app-server", what)
        log.debug("reader failure", exc_info=(type(exc), exc, None))
        with trio.CancelScope(shield=True):
            status = await self.transport.aclose()
            self._hurry_stderr()
            with trio.move_on_after(1.0):
                await self._stderr_done.wait()
        self.exit_status = status
        if self._closing:
            self._finish(ClosedError("connection closed by its owner"), None, status)
            return
        error = RemoteProtocolError(
            f"the connection's reader failed ({type(exc).__name__}); the app-server was stopped",
            details={"reason": "readerFailed", "error": what, "stderrTail": self.stderr_tail()[-50:],
                     "exit": {"returncode": status.returncode, "signal": status.signal} if status else None})
        self._finish(error, error, status)

    def _on_frame(self, frame: bytes | OversizedLine, try_delta: bool = True) -> None:
        """One line through the RPC core. Whatever goes wrong with *this* line is a
        ``protocolError`` for it and reading goes on (R-WIRE-5). ``try_delta=False``: the line
        is known not to be an exact streaming-delta line (``merge_delta_read`` tried it).

        Most lines of a turn (item/started, status, usage …) are plain notifications, each
        handled right after the reader woke, where every Python frame costs several times its
        warm price (issue 34): such a line is decoded here and handed to the sink directly —
        what :meth:`RpcCore.receive_line` would return for it, without its list or the frames
        in between. Every other line (a reply, a server request, a blank or oversized line,
        ``serverRequest/resolved``) takes the core's general path."""
        try:
            if type(frame) is bytes and frame.startswith(b"{"):  # so neither empty nor blank
                env = decode_envelope(frame, try_delta)
                if type(env) is Notification and env.method != "serverRequest/resolved":
                    self._notify(env)
                    return
                events = self.core.receive_envelope(env, frame)
            else:
                events = self.core.receive_line(frame, try_delta=try_delta)
            self._handle_events(events)
        except Exception as exc:
            reason = f"line could not be processed: {type(exc).__name__}"
            log.warning("protocol violation from app-server: %s", reason)
            excerpt = bytes(frame[:200]) if isinstance(frame, (bytes, bytearray)) else b""
            self._emit(ProtocolViolation(reason, excerpt))

    def _handle_events(self, events: list[Any]) -> None:
        """The events :class:`RpcCore` made of one line, each to its owner."""
        core = self.core
        if core.has_data_to_send:
            for data in core.data_to_send():
                self._enqueue(_Frame(data), reply=True)
        for ev in events:
            if type(ev) is Notification and ev.method != "serverRequest/resolved":
                self._notify(ev)
                continue
            if isinstance(ev, (CallSucceeded, CallFailed)):
                waiter = self._waiters.pop(ev.call.id, None)
                if waiter is not None:
                    waiter.outcome = ev
                    waiter.event.set()
                continue
            if isinstance(ev, CallBroken):  # unreadable reply: fail the call now (issue 35)
                waiter = self._waiters.pop(ev.call.id, None)
                if waiter is not None:
                    waiter.outcome = RemoteProtocolError(
                        f"{ev.call.method}: the app-server's reply could not be read: {ev.reason}",
                        phase=Phase.ANSWERED.value, details={"method": ev.call.method, "reason": ev.reason})
                    waiter.event.set()
                continue
            if isinstance(ev, Notification) and ev.method == "serverRequest/resolved":
                rid = ev.params.get("requestId") if isinstance(ev.params, dict) else None
                if isinstance(rid, (int, str)) and not isinstance(rid, bool):
                    self.core.forget_inbound(rid)
            if isinstance(ev, ProtocolViolation):
                log.warning("protocol violation from app-server: %s", self._redact(ev.reason))
            elif isinstance(ev, UnsupportedServerRequest):
                log.info("answered unsupported server request %s with -32601", ev.method)
            self._emit(ev)

    def _notify(self, ev: Notification) -> None:
        """A notification to the sink. Its params are decoded there, lazily: params that cannot
        be decoded are a ``protocolError`` for the line; any other failure of the sink is
        logged (the sink must not raise, and it never kills the reader)."""
        global _activity
        _activity += 1
        try:
            self._sink(ev)
        except msgspec.DecodeError as exc:
            self._unreadable_params(ev, exc)
        except Exception:
            log.exception("connection sink raised on a notification")

    def _unreadable_params(self, ev: Notification, exc: Exception) -> None:
        """A notification whose params cannot be decoded (not UTF-8, bad JSON inside): a
        ``protocolError`` for that line, reading goes on (R-WIRE-5, issue 35) — not a
        traceback."""
        reason = f"notification {ev.method} has unreadable params: {exc}"
        log.warning("protocol violation from app-server: %s", self._redact(reason))
        self._emit(ProtocolViolation(reason, bytes(ev.params_raw)[:200]))

    def _emit(self, ev: ConnectionEvent) -> None:
        global _activity
        _activity += 1
        try:
            self._sink(ev)
        except Exception:  # the sink must not raise; never let it kill the reader
            log.exception("connection sink raised on %r", type(ev).__name__)

    async def _writer(self) -> None:
        stream = self.transport.send_stream
        while True:
            while not self._queue and not self._replies:
                self._queue_nonempty = trio.Event()
                self._writer_idle = True
                try:
                    await self._queue_nonempty.wait()
                finally:
                    self._writer_idle = False
            frame = self._replies.popleft() if self._replies else self._queue.popleft()
            if frame.state != "queued":
                continue
            frame.state = "writing"
            if frame.call is not None:
                self.core.mark_written(frame.call)
            try:
                await stream.send_all(frame.data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                # The peer is gone; the reader's EOF settles everyone. Fail what is queued.
                log.debug("write failed: %r", exc)
                frame.state = "failed"
                frame.done.set()
                self._fail_queued()
                await trio.sleep_forever()
            frame.state = "written"
            frame.done.set()
            if frame.on_written is not None:
                try:
                    frame.on_written()
                except Exception:  # a hook must not kill the writer
                    log.exception("on_written hook raised")

    #: After a read that emptied the stderr pipe, the drain waits this long before the next
    #: one (issue 34): the real app-server writes ~6 warning lines per turn, one by one, and
    #: each used to wake this process mid-turn (a scheduler pass, the redaction, every cache
    #: cold) while the app-server on the same cores worked on the turn. Batched, they cost one
    #: or two wake-ups. Nothing is lost: the pipe is widened to :data:`STDERR_PIPE_BYTES`
    #: where the OS allows it (Linux; 64 KiB otherwise), so a child would have to write that
    #: much within one pause to wait on it; a read that fills the buffer is followed by the
    #: next at once; and the end of the connection (stdout EOF, a failed reader, ``aclose``)
    #: ends the pause at once, so the stderr tail of an exit is complete without waiting.
    #: Until the handshake is done there is no pause (a startup failure or a handshake timeout
    #: reports the tail as it is). 256 KiB, not the 1 MiB Linux allows: the kernel charges a
    #: pipe's whole capacity to its user at once (``/proc/sys/fs/pipe-user-pages-soft``, 64 MiB
    #: by default), and past that limit every new pipe of the user — the next child's stdout
    #: among them — gets one page; 32 channels' stderr then hold 8 MiB of it, not 32.
    STDERR_BATCH_SECONDS = 0.1
    STDERR_PIPE_BYTES = 1 << 18
    #: The child's stdout pipe is widened to this (Linux; best effort), and while the child
    #: writes faster than it is read (a delta flood) the reader asks for
    #: :data:`STDOUT_BURST_BYTES` at a time instead of 64 KiB
    #: (:class:`~codexrt._io._chunks.ChunkReader`'s ``burst_bytes``): half the reads and
    #: scheduler passes of a flood, and the child blocks on a full pipe less often (issue 34,
    #: bench/RESULTS.md, sixteenth round: ≈ 10–25 % more deltas a second through ``codexrt
    #: serve``). 128 KiB, not more: when the reader is the slower side, every byte the pipe
    #: holds is latency — with 256 KiB a flood's text reached the consumer ≈ 2.2× later than
    #: with 64 KiB, with 128 KiB ≈ 1.4× (an idle stream's latency does not change). With the
    #: stderr pipe, 384 KiB of ``pipe-user-pages-soft`` per child.
    STDOUT_PIPE_BYTES = 1 << 17
    #: Just under glibc's default mmap threshold (128 KiB): ``os.read`` allocates what it asks
    #: for, and a larger request is a fresh ``mmap`` whose pages fault in on every read (a
    #: short line's read asking for 256 KiB cost ≈ 18 µs more) — 256 KiB reads were no faster
    #: than 64 KiB ones, 124 KiB reads were.
    STDOUT_BURST_BYTES = (1 << 17) - 4096

    async def _stderr_drain(self) -> None:
        stream = self.transport.stderr_stream
        assert stream is not None
        buf = LineBuffer(max_line=64 * 1024)
        widen_pipe(stream, self.STDERR_PIPE_BYTES)
        reader = ChunkReader(stream, _STDERR_CHUNK)
        data: bytes | None = None
        try:
            while True:
                if data is None:
                    data = await reader.receive()
                if not data:
                    break
                for line in buf.feed(data):
                    self._on_stderr_line_guarded(line)
                short = len(data) < _STDERR_CHUNK
                data = None
                if short and not self._stderr_hurry and self.ready:
                    with trio.CancelScope() as self._stderr_pause:
                        await trio.sleep(self.STDERR_BATCH_SECONDS)
                    self._stderr_pause = None
                    # The pause was this round's schedule point: read what it gathered at once
                    # rather than parking on a pipe that most likely holds data (issue 34).
                    data = reader.receive_nowait()
            for line in buf.close():
                self._on_stderr_line_guarded(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()

    def _hurry_stderr(self) -> None:
        """The connection is ending: the drain stops batching (see ``STDERR_BATCH_SECONDS``)."""
        self._stderr_hurry = True
        if self._stderr_pause is not None:
            self._stderr_pause.cancel()

    def _on_stderr_line_guarded(self, line: bytes | OversizedLine) -> None:
        try:
            self._on_stderr_line(line)
        except Exception as exc:  # one odd stderr line never stops the drain (a stopped drain can stall the child)
            log.warning("stderr line dropped: %s", type(exc).__name__)

    def _on_stderr_line(self, line: bytes | OversizedLine) -> None:
        if isinstance(line, OversizedLine):
            text = f"[stderr line of {line.size} bytes omitted]"
        else:
            # Redact the whole line first: cutting first could leave a key's prefix (R-WIRE-9).
            text = self._redact_stderr(line.decode("utf-8", "replace").rstrip("\r"))[:2000]
        self._stderr_tail.append(text)
        log.debug("app-server stderr: %s", text)

    def _fail_queued(self) -> None:
        for q in (self._replies, self._queue):
            for f in q:
                f.state = "failed"
                f.done.set()
            q.clear()

    def _enqueue(self, frame: _Frame, *, reply: bool = False, timeout: float = math.inf) -> _Frame:
        if self._final is not None or self._closing:
            frame.state = "failed"
            frame.done.set()
            return frame
        if (self._writer_idle and not self._queue and not self._replies and self._may_write_now(timeout)
                and self._write_now(frame)):
            return frame
        if reply:
            self._replies.append(frame)
        else:
            self._queue.append(frame)
        self._queue_nonempty.set()
        return frame

    @staticmethod
    def _may_write_now(timeout: float) -> bool:
        """A caller that is already cancelled, or has no time left, never writes directly: its
        line is queued, so its first checkpoint withdraws it (``notWritten``) as it always did.
        ``current_effective_deadline()`` is ``-inf`` once an enclosing scope was cancelled."""
        return timeout > 0 and trio.current_effective_deadline() > trio.current_time()

    def _write_now(self, frame: _Frame) -> bool:
        """Write ``frame`` at once when that is one whole-or-nothing pipe write (module doc):
        the writer is idle and nothing is queued (the caller checked), the transport is a
        non-blocking pipe (trio's ``FdStream``) and the line fits ``PIPE_BUF``. False (nothing
        written) otherwise, or when the pipe is full or the write fails: then the writer takes
        the line and meets the same condition itself."""
        fileno = self._pipe_fd
        data = frame.data
        if fileno is None or len(data) > _PIPE_BUF:
            return False
        fd = fileno()
        if fd < 0:  # closed
            return False
        try:
            n = os.write(fd, data)
        except OSError:  # full (BlockingIOError), closed or broken: the writer's business
            return False
        if frame.call is not None:
            self.core.mark_written(frame.call)
        if n != len(data):
            # Cannot happen for a pipe at <= PIPE_BUF; if it did, the rest goes first through
            # the writer as a frame nobody can withdraw, so the line is never left cut.
            frame.state = "writing"
            self._replies.appendleft(_Frame(data[n:], on_written=lambda: self._written(frame)))
            self._queue_nonempty.set()
            return True
        self._written(frame)
        return True

    @staticmethod
    def _written(frame: _Frame) -> None:
        frame.state = "written"
        frame.done.set()
        if frame.on_written is not None:
            try:
                frame.on_written()
            except Exception:  # a hook must not break the write path
                log.exception("on_written hook raised")

    async def _settle_end(self) -> None:
        """End of stream: learn the exit status (bounded), then fail everything once."""
        with trio.CancelScope(shield=True):
            status: ExitStatus | None
            with trio.move_on_after(self._exit_wait) as cs:
                status = await self.transport.wait_exit()
            if cs.cancelled_caught:
                status = await self.transport.aclose()
            self._hurry_stderr()
            with trio.move_on_after(1.0):
                await self._stderr_done.wait()
        self.exit_status = status
        if self._closing:
            error: CodexError = ClosedError("connection closed by its owner")
            event_error: CodexError | None = None
        else:
            details: dict[str, Any] = {
                "stderrTail": self.stderr_tail()[-50:],
                "command": self._redact(self.transport.description),
            }
            if not self.ready:
                details["startupFailure"] = STARTUP_FAILURE_MARKER
            error = ChildExited(status.returncode if status else None, status.signal if status else None, details=details)
            event_error = error
        self._finish(error, event_error, status)

    # -- calls ---------------------------------------------------------------------------

    def _fresh_final(self) -> CodexError:
        """A new exception object with the final error's data (never re-raise one instance
        from many tasks: tracebacks would pile up)."""
        e = self._final
        assert e is not None
        if isinstance(e, ChildExited):
            return ChildExited(e.returncode, e.signal, phase=Phase.NOT_WRITTEN.value, details=e.details)
        return type(e)(e.message, details=e.details, phase=Phase.NOT_WRITTEN.value)

    async def initialize(self) -> dict[str, Any]:
        """Run the handshake once (R-WIRE-3): ``initialize`` → response → ``initialized``.
        Concurrent callers share the one handshake; each waits at most the handshake timeout.
        Cancelling a caller does not cancel the shared handshake."""
        if not self._handshake_started:
            self._handshake_started = True
            assert self._nursery is not None, "use open_connection()"
            self._nursery.start_soon(self._do_handshake)
        with trio.move_on_after(self.handshake_timeout + 1.0):
            await self._handshake_done.wait()
        if not self._handshake_done.is_set():  # pragma: no cover - the task bounds itself
            raise HandshakeError("handshake did not finish", details={"reason": "timeout"})
        if self._handshake_error is not None:
            raise self._copy(self._handshake_error)
        assert self.initialize_result is not None
        return self.initialize_result

    @staticmethod
    def _copy(e: CodexError) -> CodexError:
        if isinstance(e, ChildExited):
            return ChildExited(e.returncode, e.signal, phase=e.phase, details=e.details)
        return type(e)(e.message, phase=e.phase, details=e.details)

    async def _do_handshake(self) -> None:
        params = {"clientInfo": self.client_info.to_wire(), "capabilities": self.capabilities}
        try:
            result = await self._call("initialize", params, timeout=self.handshake_timeout)
            await self._write_and_wait(self.core.encode_notification("initialized"), self.handshake_timeout)
            self.initialize_result = result if isinstance(result, dict) else {}
        except ChildExited as exc:
            self._handshake_error = exc
        except RpcTimeout as exc:
            self._handshake_error = HandshakeError(
                f"initialize was not answered within {self.handshake_timeout:g}s",
                phase=exc.phase,
                details={"reason": "timeout", "stderrTail": self.stderr_tail()[-20:]},
            )
        except RpcError as exc:
            self._handshake_error = HandshakeError(
                f"initialize was refused: {exc.message}",
                details={"reason": "refused", "rpcCode": exc.rpc_code},
            )
        except CodexError as exc:
            self._handshake_error = exc
        finally:
            self._handshake_done.set()

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        on_written: Callable[[], None] | None = None,
        typed: bool = False,
        raw: bool = False,
    ) -> Any:
        """Send a request and return its decoded ``result`` — plain Python, or with ``typed`` the
        method's wire model (:func:`codexrt._sansio._models.decode_typed_result`: a
        ``RemoteProtocolError`` naming where the answer does not fit), or with ``raw`` its JSON
        text undecoded (a :class:`msgspec.Raw`, already within the R-WIRE-5 depth bound), for a
        caller that decodes it into a shape of its own.

        Raises :class:`RpcError` (server error), :class:`RpcTimeout` (our wait ran out; the
        request's ``phase`` says whether it was written), :class:`ChildExited` (the peer is
        gone), or the handshake's error when it failed — in which case nothing was written
        (R-WIRE-3). Cancelling the caller withdraws an unwritten request; a written one may
        still be answered later, which surfaces as a :class:`LateResponse` event. (A short
        request on an idle pipe is written before ``call`` first yields — unless the caller was
        already cancelled or out of time — so a later cancel finds it ``writtenUnconfirmed``.)
        """
        if method == "initialize":
            raise LocalProtocolError("use Connection.initialize() for the handshake")
        timeout = self.rpc_timeout if timeout is None else timeout
        deadline = trio.current_time() + timeout
        if self._final is not None:
            raise self._fresh_final()
        if not self.ready:
            with trio.move_on_at(deadline):
                await self.initialize()
            if not self.ready:
                if self._handshake_error is not None:
                    raise self._copy(self._handshake_error)
                raise RpcTimeout(
                    f"{method} timed out after {timeout:g}s waiting for the handshake",
                    phase=Phase.NOT_WRITTEN.value,
                    details={"method": method},
                )
        return await self._call(
            method, params, timeout=max(0.0, deadline - trio.current_time()), on_written=on_written, typed=typed,
            raw=raw,
        )

    def send_request(self, method: str, params: Any = None, *, timeout: float | None = None,
                     typed: bool = False, raw: bool = False) -> PendingCall:
        """The first half of :meth:`call`: send the request now and return a :class:`PendingCall`
        without waiting for the answer, for a caller with other work to do meanwhile (the
        message count handles one history page while the server builds the next). Use it as a
        context manager and ``await pending.result()`` inside the block; leaving the block
        without the result withdraws the request as cancelling ``call`` does (unwritten: never
        sent; written: a late answer becomes a :class:`LateResponse` event).

        A short line on an idle pipe is written before this returns; otherwise it is queued
        for the writer (:meth:`PendingCall.written` waits for it); a caller already cancelled
        sends nothing, and ``result()`` then raises the cancellation (awaited outside the
        cancelled scope: :class:`RpcTimeout`, ``notWritten``). ``timeout`` (default: the
        connection's) runs from now to the answer.
        Needs a connection whose handshake is done (``call`` waits for it; this cannot): a
        :class:`LocalProtocolError` otherwise, with nothing written."""
        if method == "initialize":
            raise LocalProtocolError("use Connection.initialize() for the handshake")
        if self._final is not None:
            raise self._fresh_final()
        if not self.ready:
            raise LocalProtocolError(f"send_request({method}) needs a connection whose handshake is done; "
                                     "await call() instead", details={"method": method})
        timeout = self.rpc_timeout if timeout is None else timeout
        if timeout <= 0:
            raise RpcTimeout(f"{method} timed out after {timeout:g}s ({Phase.NOT_WRITTEN.value})",
                             phase=Phase.NOT_WRITTEN.value, details={"method": method})
        if trio.current_effective_deadline() <= trio.current_time():
            # Already cancelled: nothing is sent (as in ``call``); ``result()`` raises the cancel.
            return PendingCall(self, method, None, _Waiter(), _Frame(b"", state="withdrawn"), timeout,
                               typed=typed, raw=raw)
        return self._send(method, params, timeout, None, typed, raw)

    def _send(self, method: str, params: Any, timeout: float, on_written: Callable[[], None] | None,
              typed: bool, raw: bool) -> PendingCall:
        global _activity
        if method not in HISTORY_PAGE_READS:
            _activity += 1
        call = self.core.start_request(method, params)
        waiter = _Waiter()
        self._waiters[call.id] = waiter
        frame = self._enqueue(_Frame(call.data, call, on_written), timeout=timeout)
        return PendingCall(self, method, call, waiter, frame, timeout, typed=typed, raw=raw)

    async def _call(
        self, method: str, params: Any, *, timeout: float, on_written: Callable[[], None] | None = None,
        typed: bool = False, raw: bool = False,
    ) -> Any:
        if self._final is not None:
            raise self._fresh_final()
        if timeout <= 0 or trio.current_effective_deadline() <= trio.current_time():
            # Out of time, or already cancelled: nothing is written (notWritten, R-WIRE-4). The
            # checkpoint delivers a pending cancel before any line exists.
            await trio.lowlevel.checkpoint()
            if timeout <= 0:
                raise RpcTimeout(f"{method} timed out after {timeout:g}s ({Phase.NOT_WRITTEN.value})",
                                 phase=Phase.NOT_WRITTEN.value, details={"method": method})
        with self._send(method, params, timeout, on_written, typed, raw) as pending:
            return await pending.result()

    def _settle_call(self, pending: PendingCall) -> Any:
        """What ``call`` returns or raises for ``pending``, whose answer (or end) has come."""
        outcome, method = pending._waiter.outcome, pending.method
        if isinstance(outcome, CallSucceeded):
            if pending._typed:
                return decode_typed_result(method, outcome.result_raw)
            if pending._raw:
                return outcome.result_raw
            return decode_json(outcome.result_raw)
        if isinstance(outcome, CallFailed):
            err = outcome.error
            cls = ServerOverloaded if err.code == SERVER_OVERLOADED else RpcError
            raise cls(self._redact(err.message), rpc_code=err.code, method=method,
                      data=self._redact.redact_obj(err.data),
                      phase=Phase.WRITTEN_UNCONFIRMED.value)
        assert isinstance(outcome, CodexError)
        phase = pending.phase
        raise (ChildExited(outcome.returncode, outcome.signal, phase=phase.value, details=outcome.details)
               if isinstance(outcome, ChildExited) else self._copy(outcome))

    async def _write_and_wait(self, data: bytes, timeout: float) -> None:
        frame = self._enqueue(_Frame(data), timeout=timeout)
        with trio.move_on_after(timeout):
            await frame.done.wait()
        if frame.state == "queued":
            frame.state = "withdrawn"
        if frame.state != "written":
            if self._final is not None:
                raise self._fresh_final()
            raise RpcTimeout(f"write not done within {timeout:g}s", phase=Phase.NOT_WRITTEN.value)

    async def notify(self, method: str, params: Any = None, *, timeout: float | None = None) -> None:
        """Send a notification (waits only until it is written)."""
        await self._write_and_wait(self.core.encode_notification(method, params),
                                   self.rpc_timeout if timeout is None else timeout)

    async def reply(self, request_id: RequestId, result: Any, *, timeout: float | None = None,
                    accepted: Callable[[], None] | None = None) -> None:
        """Answer server request ``request_id`` with ``result`` (R-WIRE-8). Raises
        :class:`LocalProtocolError` when it is not pending (duplicate answer, or the server
        already resolved it). ``accepted`` runs once the answer is taken (no longer pending),
        before anything awaits: what it publishes comes before whatever the server does next."""
        if self._final is not None:
            raise self._fresh_final()
        global _activity
        _activity += 1
        data = self.core.reply(request_id, result)
        if accepted is not None:
            accepted()
        await self._write_and_wait(data, self.rpc_timeout if timeout is None else timeout)

    def reply_nowait(self, request_id: RequestId, result: Any = None, *,
                     error: tuple[int, str] | None = None) -> bool:
        """Queue the answer to server request ``request_id`` (``result``, or a JSON-RPC
        ``error=(code, message)``) without waiting: for answers decided on the reader itself
        (a refusal past the pending cap), which must not block. It goes out with the reader's
        other replies, in order. False when the connection is already closed; raises
        :class:`LocalProtocolError` when the request is not pending."""
        if self._final is not None or self._closing:
            return False
        global _activity
        _activity += 1
        data = (self.core.reply_error(request_id, *error) if error is not None
                else self.core.reply(request_id, result))
        self._enqueue(_Frame(data), reply=True)
        return True

    async def reply_error(self, request_id: RequestId, code: int, message: str, data: Any = None,
                          *, timeout: float | None = None, accepted: Callable[[], None] | None = None) -> None:
        """A JSON-RPC error answer to server request ``request_id``; ``accepted`` as for
        :meth:`reply`."""
        if self._final is not None:
            raise self._fresh_final()
        global _activity
        _activity += 1
        frame = self.core.reply_error(request_id, code, message, data)
        if accepted is not None:
            accepted()
        await self._write_and_wait(frame, self.rpc_timeout if timeout is None else timeout)

    async def aclose(self) -> ExitStatus | None:
        """Close the transport (escalating for a child) and wait until everything is settled.
        Idempotent; shielded from cancellation."""
        with trio.CancelScope(shield=True):
            if not self.closed.is_set() and self._final is None:
                self._closing = True
            self._hurry_stderr()
            status = await self.transport.aclose()
            with trio.move_on_after(self._exit_wait + 2):
                await self.closed.wait()
            return self.exit_status or status

    def kill(self) -> None:
        """Kill the child at once (last resort of a stop, R-OP-5). The reader then settles."""
        kill = getattr(self.transport, "kill", None)
        if kill is not None:
            kill()
        elif self._nursery is not None and not self.closed.is_set():
            # No process to signal (a stream transport): dropping the streams is the kill.
            self._nursery.start_soon(self.transport.aclose)


@contextlib.asynccontextmanager
async def open_connection(transport: Transport, **kwargs: Any) -> AsyncIterator[Connection]:
    """``async with open_connection(transport, sink=…) as conn:`` — owns the connection's
    tasks; leaving the block closes the transport (reaping a child) and cancels them. An
    exception from the body propagates as itself, not wrapped in an exception group."""
    conn = Connection(transport, **kwargs)
    async with unwrap_single_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(conn._run)
            try:
                yield conn
            finally:
                await conn.aclose()
                nursery.cancel_scope.cancel()
