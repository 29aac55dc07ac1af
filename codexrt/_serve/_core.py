"""What every ``codexrt serve`` handler uses: the daemon's configuration, its output (one
whole line at a time, in FIFO order), the fault barrier, command tasks and the channels (each
holds a runtime, created on first use, and a forwarder of its events); the idle reaper. The
command loop and dispatch are :mod:`codexrt._serve._daemon`; the handlers are
``codexrt._serve._handlers_*`` (module doc of :mod:`codexrt._serve._daemon`)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import traceback
from typing import TYPE_CHECKING, Any, Callable

import attrs
import msgspec
import trio

from codexrt._features._history_ahead import PageReadAhead
from codexrt._features._history_pages import PageRecordsCache
from codexrt._io._lines import LineWriter, UnencodableLine
from codexrt._io._work import OpenRequests, sweep_idle
from codexrt._runtime._config import RuntimeConfig
from codexrt._sansio._errors import ClosedError, CodexError, TooManyChannels
from codexrt._sansio._framing import DEFAULT_MAX_LINE
from codexrt._sansio._redact import process_redactor
from codexrt._sansio._wire import BoundedText, json_depth_exceeds
from codexrt._serve._channel import Answer, Channel, answering
from codexrt._serve._codec import (MAX_COMMAND_DEPTH, Command, RequestId, encode_line, error_reply, response_error,
                                  response_ok)

if TYPE_CHECKING:
    from codexrt._features._history import MessageCounter
    from codexrt._runtime._events import CodexEvent, EventStream

__all__ = ["PROTOCOL_VERSION", "DONE_EVENT_GRACE", "DEFAULT_DRAIN_TIMEOUT", "DEFAULT_MAX_CHANNELS", "DaemonConfig",
           "DaemonCore", "shallow_line"]

log = logging.getLogger("codexrt.daemon")

PROTOCOL_VERSION = 1

#: How long a long command's waiter waits for the forwarder to pass ``operationDone`` before
#: replying anyway (the event can only be late when stdout itself is stuck).
DONE_EVENT_GRACE = 5.0
#: How long a reply whose writer was cancelled before it went out (``abort`` stopping the
#: reader) may still wait for stdout (:meth:`DaemonCore.write`).
INTERRUPTED_REPLY_BOUND = 1.0
#: The kind of serve's own marker on a channel's subscription (:meth:`DaemonCore.events_written`).
_EVENTS_WRITTEN = "_serve.eventsWritten"
#: stdin EOF: the default bound on finishing the work already accepted (``--drain-timeout``).
DEFAULT_DRAIN_TIMEOUT = 300.0
#: Default cap on channels (``--max-channels``); each channel may hold one app-server child.
DEFAULT_MAX_CHANNELS = 32


@attrs.define
class DaemonConfig:
    """How ``serve`` runs. ``runtime`` is the template of every channel's
    :class:`RuntimeConfig` (``channel_id`` is filled in per channel). ``inactive`` is access
    mode ``inactive`` (R-LC-3): no child is ever spawned; ``codex.listThreads``,
    ``codex.readThread`` and ``codex.countThreadMessages`` answer from the rollout files
    (``codexrt._features._history_commands.run_legacy_history_command``), every other command that needs a child is
    refused with ``ACCESS_INACTIVE``. ``idle_timeout`` (seconds, None = never) retires a
    channel's child with no session, no work and no pending interaction (R-RT-6). ``auto_title``
    (``serve --auto-title``, default off) runs a :class:`~codexrt._features._helpers.TitleManager` per
    channel: every thread the channel creates gets one title attempt on a helper child when its
    first ``threadStarted`` arrives (R-HLP-3); outcomes are ``threadTitle`` events."""

    runtime: RuntimeConfig = attrs.field(factory=RuntimeConfig)
    inactive: bool = False
    auto_title: bool = False
    idle_timeout: float | None = 600.0
    max_line: int = DEFAULT_MAX_LINE
    #: stdin EOF: how long accepted work may take to finish on its own before what is left is
    #: aborted like on SIGTERM (0 = abort at once). See :meth:`Daemon.run`.
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    #: Most channels (each may hold one app-server child). A new channelId past it evicts the
    #: least recently used channel that has no child and nothing pending, else it is refused
    #: with ``TOO_MANY_CHANNELS``.
    max_channels: int = DEFAULT_MAX_CHANNELS


def _encode_shallow(obj: Any) -> bytes:
    """``obj`` as one line, or its :func:`shallow_line` when it nests deeper than serve accepts
    on its own input."""
    data = encode_line(obj)
    return encode_line(shallow_line(obj)) if json_depth_exceeds(data, MAX_COMMAND_DEPTH) else data


class _ShallowEncoder:
    """:func:`_encode_shallow`, with the depth verdict on a reply's ``msgspec.Raw`` result kept
    for that very object (issue 34): a history page read before is answered with the same
    ``Raw`` (:class:`~codexrt._features._history_pages.CachedPage`), whose 60 KB text was walked
    again for every answer (≈ 0.1–0.2 ms). A reply ``{"type", "id", "ok", "result"}`` with a
    scalar id nests exactly one level deeper than its result, so the line is too deep exactly
    when the result text is deeper than ``MAX_COMMAND_DEPTH - 1``; that verdict is computed by
    serve on the ``Raw``'s own bytes (immutable) the first time and reused while the object is
    held here (at most :attr:`MAX_KEPT` objects and :attr:`MAX_KEPT_BYTES` of text, the least
    recently written dropped first, a larger one not kept; held, so no other object takes its
    ``id``). The bounds cover the pages serve's page cache holds (about 50 of 100 items), and a
    page written again is kept longest: with the oldest dropped first and 32 kept, an editor that
    re-read one thread while reading others lost every verdict and had each 50 KB page checked
    again (bench/RESULTS.md, eighth round). A result that is a
    :class:`~codexrt._sansio._wire.BoundedText` (a page whose depth its typed decode proved) is
    written unchecked when that bound is within serve's, else checked as a ``Raw``. Every other
    line is checked whole, as before."""

    MAX_KEPT = 64
    MAX_KEPT_BYTES = 8 << 20

    def __init__(self) -> None:
        self._verdicts: dict[int, tuple[msgspec.Raw, bool]] = {}
        self._held_bytes = 0

    def __call__(self, obj: Any) -> bytes:
        result = obj.get("result") if type(obj) is dict and obj.get("type") == "response" else None
        if type(result) is BoundedText:  # its depth is known: within the bound, nothing to walk
            if result.max_depth < MAX_COMMAND_DEPTH and len(obj) == 4 and isinstance(obj["id"], (str, int)):
                return _with_text(obj, result.chunks)
            obj = {**obj, "result": msgspec.Raw(bytes(result))}  # (checked as any text)
            result = obj["result"]
        if (type(result) is not msgspec.Raw or len(obj) != 4
                or not isinstance(obj.get("id"), (str, int, type(None)))):
            return _encode_shallow(obj)
        kept = self._verdicts.pop(id(result), None)
        if kept is not None:
            self._verdicts[id(result)] = kept  # the most recently written now
        else:
            kept = (result, json_depth_exceeds(bytes(result), MAX_COMMAND_DEPTH - 1))
            size = len(result)
            if size <= self.MAX_KEPT_BYTES:
                while self._verdicts and (len(self._verdicts) >= self.MAX_KEPT
                                          or self._held_bytes + size > self.MAX_KEPT_BYTES):
                    self._held_bytes -= len(self._verdicts.pop(next(iter(self._verdicts)))[0])
                self._verdicts[id(result)] = kept
                self._held_bytes += size
        return encode_line(shallow_line(obj)) if kept[1] else _with_text(obj, (result,))


def _with_text(reply: dict[str, Any], chunks: tuple[Any, ...]) -> bytes:
    """The line of ``reply``, whose last key ``result`` is the JSON text ``chunks`` joined: the
    envelope encoded with a null result, the text put in its place — one copy of a 50 KB page,
    where encoding the reply and appending the newline made two (issue 34)."""
    head = encode_line({**reply, "result": None})
    if not head.endswith(_NULL_RESULT):  # (not one of serve's replies: encoded as it is)
        return encode_line({**reply, "result": msgspec.Raw(b"".join(chunks))})
    return b"".join((memoryview(head)[:-len(_NULL_END)], *chunks, b"}\n"))


_NULL_END = b"null}\n"
_NULL_RESULT = b'"result":' + _NULL_END


def shallow_line(obj: Any) -> dict[str, Any]:
    """What ``serve`` writes instead of a line nested deeper than :data:`MAX_COMMAND_DEPTH`
    (issue 35: the app-server may nest 128 levels; a host must not need to accept more than
    serve accepts from it). A result → a ``PROTOCOL_ERROR`` reply to the same id; an event →
    a ``protocolError`` event of the same channel, thread and turn naming the event it stands
    for; an error reply → the same code and message without its details."""
    reason = f"the app-server's data nests deeper than {MAX_COMMAND_DEPTH} levels; not forwarded"
    if isinstance(obj, dict) and obj.get("type") == "response":
        if obj.get("ok"):
            return response_error(obj.get("id"), "PROTOCOL_ERROR", reason, {"maxDepth": MAX_COMMAND_DEPTH})
        err = obj.get("error") or {}
        return response_error(obj.get("id"), err.get("code", "PROTOCOL_ERROR"), err.get("message", reason),
                              {"maxDepth": MAX_COMMAND_DEPTH, "detailsDropped": True})
    if isinstance(obj, dict) and obj.get("type") == "daemon":
        return {**obj, "kind": "protocolError",
                "payload": {"reason": reason, "kind": obj.get("kind"), "maxDepth": MAX_COMMAND_DEPTH}}
    return obj  # (unreachable: serve writes only responses and events)


class DaemonCore:
    """The daemon's state and services, for the loop (:class:`codexrt._serve._daemon.Daemon`)
    and the handlers. Handlers are ``async def handler(d, cmd, *args)`` run by :meth:`spawn`
    (its own task) or awaited by the reader (answered at once)."""

    def __init__(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, config: DaemonConfig) -> None:
        self._receive = receive
        self._out = LineWriter(send, _ShallowEncoder(), lambda: self.abort())
        self.config = config
        self.channels: dict[str, Channel] = {}
        self.nursery: trio.Nursery | None = None
        self._reader_scope = trio.CancelScope()
        self.draining = False
        self.finished = trio.Event()
        self.history_counter: MessageCounter | None = None
        #: records of history pages already answered, for every channel (issue 34)
        self.history_pages = PageRecordsCache()
        #: the next page of a history walk, asked for before the host does (issue 34)
        self.history_ahead = PageReadAhead()
        self._drain_scope = trio.CancelScope()
        self.abort_requested = False  # a signal (or a gone host): stop the work, do not finish it
        self._open = OpenRequests()  # accepted commands whose reply is not written yet
        # ids of the accepted commands not replied to yet, by JSON type (3 and "3" differ): a
        # command reusing one is refused (DUPLICATE_REQUEST_ID), so an id never has two replies
        self.pending_ids: set[tuple[type, RequestId]] = set()
        self._markers: dict[int, trio.Event] = {}  # events_written: token → its wait
        self._marker_tokens = itertools.count(1)

    # -- output ----------------------------------------------------------------------------

    async def write(self, obj: Any, *, parked: bool = False) -> None:
        """Write one reply line, whole, in FIFO order. A broken stdout (the host went away)
        stops reading — which drains — and later lines are dropped. A line nested deeper than
        serve accepts on its own input (:data:`MAX_COMMAND_DEPTH`) is not forwarded as it is
        (:func:`shallow_line`). A caller cancelled before the line went out (``abort`` stopping
        the reader while it answers a command itself) still writes it — a reply that is due is
        not dropped for that — shielded, for at most :data:`INTERRUPTED_REPLY_BOUND` seconds
        (a line begun by then is finished within ``LineWriter.FINISH_BOUND``); then the
        cancellation goes on."""
        try:
            await self._out.write(obj, parked=parked)  # a broken stdout aborts: nobody can read the results
        except trio.Cancelled:  # raised only when nothing of the line went out (LineWriter.write)
            with trio.CancelScope(shield=True):
                with trio.move_on_after(INTERRUPTED_REPLY_BOUND):
                    await self._out.write(obj)
            raise

    @property
    def stdout_broken(self) -> bool:
        return self._out.broken

    @property
    def lines_written(self) -> int:
        return self._out.lines_written

    def _replying(self, rid: RequestId | None) -> None:
        """The command with ``rid`` gets its one reply now: its id is free again."""
        self.pending_ids.discard((type(rid), rid))

    async def reply(self, rid: RequestId | None, result: Any = None, *, error: CodexError | None = None,
                    parked: bool = False) -> None:
        """Write ``rid``'s one reply. ``parked=True``: the caller has just passed a schedule
        point of its own (``LineWriter.write``)."""
        self._replying(rid)
        answer = answering.get()
        if answer is not None and not (type(answer.rid) is type(rid) and answer.rid == rid):
            answer = None  # this task answers another command: not that one's reply
        if answer is not None:
            answer.done = True
            hook, answer.before_reply = answer.before_reply, None
            if hook is not None:
                hook()
        line = error_reply(rid, error) if error is not None else response_ok(rid, result)  # type: ignore[arg-type]
        try:
            await self.write(line, parked=parked)
        except UnencodableLine:
            if answer is not None:
                answer.done = False  # nothing went out: the fault barrier answers in its place
            raise

    # -- the fault barrier -----------------------------------------------------------------

    async def answer_failure(self, cmd: Command, answer: Answer, exc: Exception) -> None:
        """``exc`` escaped ``cmd``'s handler: reply once (``INTERNAL_ERROR``, or the
        CodexError itself) unless the handler already did; the traceback goes to the log,
        redacted — never to stdout."""
        if isinstance(exc, CodexError):
            log.info("%s (id %r) failed: %s", cmd.name, cmd.id, exc.code)
        else:
            redact = process_redactor()  # the children's secrets are registered at start
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            log.error("internal error in %s (id %r):\n%s", cmd.name, cmd.id, redact(tb))
        if answer.done:
            return
        answer.done = True
        self._replying(cmd.id)
        if isinstance(exc, CodexError):
            await self.write(error_reply(cmd.id, exc))
        else:
            await self.write(response_error(cmd.id, "INTERNAL_ERROR",
                                            f"internal error in {cmd.name}: {type(exc).__name__}",
                                            {"command": cmd.name}))

    async def answer_interrupted(self, cmd: Command, answer: Answer) -> None:
        """The reader was stopped (``abort``: SIGTERM, SIGINT, stdout gone) while it handled
        ``cmd`` itself and before its reply was due (a reply that was due is written by
        :meth:`write`): the command still gets its one reply, ``CLOSED``, written as
        :meth:`write` writes a due reply when cancelled (a host that reads nothing more does
        not hold serve's exit)."""
        if answer.done or answer.handed_off:
            return
        answer.done = True
        self._replying(cmd.id)
        error = ClosedError(f"serve is stopping: {cmd.name} was interrupted; whether it took effect is unknown",
                            details={"command": cmd.name})
        await self.write(error_reply(cmd.id, error))

    async def _guarded(self, fn: Callable[..., Any], cmd: Command, *args: Any) -> None:
        """Run one command's handler task, ``fn(self, cmd, *args)``, behind the fault barrier
        (module doc of :mod:`codexrt._serve._daemon`)."""
        answer = Answer(cmd.id)
        answering.set(answer)  # this task's own context: nobody else sees it
        try:
            await fn(self, cmd, *args)
        except Exception as exc:
            await self.answer_failure(cmd, answer, exc)

    def stop_reading(self) -> None:
        """Stop reading commands and drain (what EOF does: accepted work may finish, bounded
        by ``drain_timeout``). Safe to call from anywhere."""
        self._reader_scope.cancel()

    def abort(self) -> None:
        """Stop reading and drain *now* (SIGINT/SIGTERM, stdout gone): no new work, running
        operations are stopped within the stop budget, queued ones cancelled, every pending
        command replied to, every child reaped. Safe to call from anywhere, also mid-drain."""
        self.abort_requested = True
        self._reader_scope.cancel()
        self._drain_scope.cancel()

    def spawn(self, fn: Callable[..., Any], cmd: Command, *args: Any) -> None:
        """Run one accepted command's handler task (``fn(self, cmd, *args)``) behind the fault
        barrier; counted until it finishes (its reply is written), so an EOF drain knows when the
        accepted work is done."""
        assert self.nursery is not None
        self._open.opened()
        handing = answering.get()
        if handing is not None:
            handing.handed_off = True  # the task replies: not the reader, even when it is stopped

        async def run() -> None:
            try:
                await self._guarded(fn, cmd, *args)
            finally:
                self._open.closed()

        self.nursery.start_soon(run)

    # -- channels --------------------------------------------------------------------------

    async def channel(self, channel_id: str) -> Channel:
        """The channel's runtime, created on first use (R-D-1). Nothing is spawned yet: the
        runtime starts its child on its first operation or read."""
        ch = self.channels.get(channel_id)
        if ch is not None:
            return ch
        if self.draining:
            raise ClosedError("serve is draining; no new channel")
        if len(self.channels) >= self.config.max_channels:
            await self._evict_channel()
        assert self.nursery is not None
        ch = await self.nursery.start(self._run_channel, channel_id)
        return ch

    async def _evict_channel(self) -> None:
        """Make room for a new channel: forget the least recently used one that has no child
        and nothing pending (its next use starts afresh, with a new ``sessionEpoch``); when
        every channel is in use, refuse with ``TOO_MANY_CHANNELS``."""
        idle = [ch for ch in self.channels.values() if ch.evictable()]
        if not idle:
            raise TooManyChannels(f"too many channels: {len(self.channels)} are open and in use (the limit is "
                                  f"{self.config.max_channels}, --max-channels); reset or release one first",
                                  details={"maxChannels": self.config.max_channels, "channels": len(self.channels)})
        victim = min(idle, key=lambda ch: ch.last_activity)
        log.info("forgetting idle channel %s to make room", victim.id)
        del self.channels[victim.id]
        victim.close_requested.set()
        with trio.move_on_after(DONE_EVENT_GRACE):  # no child and no work: closing it is quick
            await victim.closed.wait()

    async def _run_channel(self, channel_id: str, task_status: trio.TaskStatus[Channel] = trio.TASK_STATUS_IGNORED) -> None:
        # The runtime and the helpers load with the first channel, not at start: a host's
        # first ``status`` is answered without them (issue 34, bench/RESULTS.md).
        from codexrt._features._helpers import open_title_manager
        from codexrt._runtime._runtime import open_runtime

        cfg = attrs.evolve(self.config.runtime, channel_id=channel_id)
        ch: Channel | None = None
        try:
            async with trio.open_nursery() as inner:
                sub = None
                try:
                    async with open_runtime(cfg) as rt, contextlib.AsyncExitStack() as stack:
                        # Subscribed for the runtime's whole life: ``aclose`` closes the stream
                        # after its last events, which ends the forwarder.
                        sub = rt.subscribe()
                        events = sub.__enter__()
                        ch = Channel(channel_id, rt)
                        ch.events = events
                        if self.config.auto_title:
                            # subscribed before anything can start a thread; leaving the stack
                            # (before the runtime closes) cancels pending titles and reaps them
                            ch.titles = await stack.enter_async_context(open_title_manager(rt))
                        self.channels[channel_id] = ch
                        inner.start_soon(self._forward, ch, events)
                        task_status.started(ch)
                        await ch.close_requested.wait()
                        log.info("closing channel %s", channel_id)
                finally:
                    if sub is not None:
                        sub.__exit__(None, None, None)
        except Exception:  # a broken runtime must not take the other channels down
            log.exception("channel %s ended with an error", channel_id)
        finally:
            if ch is not None:
                if self.channels.get(channel_id) is ch:
                    del self.channels[channel_id]
                ch.closed.set()

    async def events_written(self, ch: Channel) -> None:
        """Wait until the forwarder has written every event the channel's runtime published
        before this call (a marker put on serve's own subscription; no other subscriber sees
        it), so a reply written next comes after them — ``resetRuntime`` / ``releaseThread``
        reply after their ``runtimeReset`` and ``STOPPED`` events. Bounded like the wait for
        ``operationDone`` (:data:`DONE_EVENT_GRACE`: only a stuck stdout makes it late)."""
        events = ch.events
        if events is None or events.closed:
            return
        from codexrt._runtime._events import CodexEvent  # loaded already: the channel has a runtime

        token = next(self._marker_tokens)
        written = self._markers[token] = trio.Event()
        events.put(CodexEvent(_EVENTS_WRITTEN, {"token": token}))  # a plain payload, like any event's
        try:
            with trio.move_on_after(DONE_EVENT_GRACE):
                await written.wait()
        finally:
            self._markers.pop(token, None)

    def _forward_now(self, ch: Channel, ev: CodexEvent) -> bool:
        """The forwarder's work for one event, done at once on the task that published it
        when the line can be written whole without waiting (``EventStream.take_directly``,
        issue 34: the reader writes the event line itself, so the forwarder is not woken and
        a scheduler pass less stands between the app-server's line and the host's). False:
        the forwarder writes it. An ``operationQueued`` is published while its command's op
        is being created, before :meth:`Channel.track` maps its request id: it always goes
        to the forwarder, which runs after the reader has mapped it (module doc of
        :mod:`codexrt._serve._daemon`)."""
        if self._marker_passed(ev):  # every event before it is written: nothing was queued
            return True
        if ev.kind == "operationQueued" or not self._out.ready_now:
            return False
        if ev.kind == "itemUpdated" and len(ev.payload.get("delta", "")) >= LineWriter.MOST_NOW:
            return False  # (a flood's merged text: a line too long to write at once, not built twice)
        try:
            if not self._out.write_now(self._event_line(ch, ev)):
                return False
        except UnencodableLine:
            return False  # the forwarder writes a stand-in for it
        self._event_written(ch, ev)
        return True

    def _marker_passed(self, ev: CodexEvent) -> bool:
        """Whether ``ev`` is serve's own marker (:meth:`events_written`), never a line; its
        wait is over."""
        if ev.kind != _EVENTS_WRITTEN:
            return False
        token = ev.payload.get("token")
        marker = self._markers.get(token) if isinstance(token, int) else None
        if marker is not None:
            marker.set()
        return True

    def _event_written(self, ch: Channel, ev: CodexEvent) -> None:
        if ev.kind == "operationDone" and ev.client_operation_id:
            op_id = ev.client_operation_id
            done = ch.done_forwarded.pop(op_id, None)
            ch.request_ids.pop(op_id, None)
            if done is not None:
                done.set()
            answer = ch.awaiting.pop(op_id, None)
            if answer is not None:
                try:
                    self._reply_now(ch, answer, ev.payload)
                except Exception:  # the event line is out: this must not fail it; the waiter replies
                    log.exception("writing a reply after its operationDone line failed")

    def _reply_now(self, ch: Channel, answer: Answer, result: dict[str, Any]) -> None:
        """A long command's reply, written by the task that has just written its
        ``operationDone`` line — whose payload is the reply's result (``Operation._settle``) —
        when the line goes out whole at once (``LineWriter.write_now``): the host gets the
        reply in the same step as the app-server's last line, without a wake-up of the
        command's waiter (issue 34). Otherwise nothing is written here and the waiter replies.
        Exactly once: ``answer.done`` tells the waiter and the fault barrier it was answered."""
        if answer.done or answer.before_reply is not None or ch.answers_open or not self._out.ready_now:
            return  # (an answer's reply pending: it goes first, Channel.answering_host)
        text = result.get("finalText")
        if isinstance(text, str) and len(text) >= LineWriter.MOST_NOW:
            return  # a line too long to write at once: not built for nothing
        try:
            written = self._out.write_now(response_ok(answer.rid, result))
        except UnencodableLine:
            return  # the waiter's reply meets it too: the fault barrier answers
        if written:
            answer.done = True  # first: whatever happens next, nobody replies again
            self._replying(answer.rid)
            ch.touch()

    async def _forward(self, ch: Channel, events: EventStream) -> None:
        events.take_directly(functools.partial(self._forward_now, ch))
        while True:
            # An event that had to be waited for was this step's schedule point: its line is
            # written without another when it can be (``LineWriter.write(parked=True)``, issue
            # 34); one taken from the buffer goes through ``send_all``'s checkpoint, so a
            # backlog still yields once per line.
            ev = events.get_nowait()
            parked = ev is None
            if ev is None:
                ev = await events.get()
                if ev is None:
                    return
            if self._marker_passed(ev):
                continue
            try:
                await self._out.write(self._event_line(ch, ev), parked=parked)
            except UnencodableLine as exc:
                # Events come from JSON, so this is a bug upstream; the host gets a
                # protocolError in the event's place and the channel goes on (no data logged).
                log.error("a %s event of channel %s could not be encoded (%s); a protocolError was written "
                          "in its place", ev.kind, ch.id, type(exc.__cause__).__name__)
                await self._out.write(self._event_line(ch, attrs.evolve(
                    ev, kind="protocolError",
                    payload={"reason": f"serve could not encode an event of kind {ev.kind}; it was dropped"})))
            self._event_written(ch, ev)

    def _event_line(self, ch: Channel, ev: CodexEvent) -> dict[str, Any]:
        wire = ev.to_wire()
        line: dict[str, Any] = {}
        for key, value in wire.items():
            line[key] = value
            if key == "channelId":
                line["sessionEpoch"] = ch.rt.session_epoch
        if ev.kind == "operationQueued":
            line["payload"] = {**ev.payload, "requestId": ch.request_ids.get(ev.client_operation_id or "")}
        return line

    async def _idle_reaper(self, idle_timeout: float) -> None:
        """R-RT-6: never retire while a session is loaded, work is queued or running, an
        interaction waits, or a read is in flight; otherwise retire after ``idle_timeout``."""
        def retirable(ch: Channel) -> bool:
            return ch.rt.idle_retirable() and ch.inflight == 0 and not (ch.titles is not None and ch.titles.pending())

        async def retire(ch: Channel) -> None:
            await ch.rt.reset(reason="idle")

        await sweep_idle(idle_timeout, self.channels.values, retirable=retirable, last_activity=lambda ch: ch.last_activity,
                         retire=retire, log=log, what=lambda ch: f"channel {ch.id}")

    # -- status ----------------------------------------------------------------------------

    def status(self, channel_id: str | None = None) -> dict[str, Any]:
        channels = [ch.snapshot() for cid, ch in sorted(self.channels.items())
                    if channel_id is None or cid == channel_id]
        return {"protocolVersion": PROTOCOL_VERSION, "pid": os.getpid(), "draining": self.draining,
                "maxChannels": self.config.max_channels, "channels": channels}
