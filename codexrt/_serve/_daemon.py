"""The ``codexrt serve`` daemon: NDJSON commands in, replies and events out (R-D-1 … R-D-4).

Why a daemon: IDE plugins and hosts written in other languages spawn ``codexrt serve`` as a
sidecar and talk to it over its stdin/stdout. The wire is documented in
``docs/daemon-protocol.md`` and described by the JSON Schema shipped beside this module
(``codexrt/_serve/daemon-protocol.schema.json``), whose command part is generated from the
command types that decode — and so validate — every command's params
(:mod:`codexrt._serve._commands`): one source of truth for the docs, the parser and the tests.

Theory of operation
-------------------
*Parsing* is pure (:func:`codexrt._serve._codec.parse_command`, no I/O, no trio): a line
becomes a ``Command`` or a ``BadCommand`` that knows its reply. A line that is not JSON, has no
usable id, names an unknown command or carries params that do not decode into the command's
Struct gets an ``ok: false`` reply
(``"id": null`` when no usable id could be read) and the loop goes on (R-D-4); nothing already
queued is touched. A line nested deeper than ``MAX_COMMAND_DEPTH`` gets ``LINE_TOO_DEEP``
(its id is read from the top level of the line when it can be). The Structs bound every number
and enum a handler relies on, so a handler never sees a value it cannot use.

*Fault barrier.* Every command line is answered exactly once, whatever happens inside its
handler: an exception that is not a :class:`~codexrt._sansio._errors.CodexError` becomes an
``INTERNAL_ERROR`` reply (its message names the exception type only; the redacted traceback
goes to the stderr log) and the loop goes on. No handler's failure reaches the daemon's nursery.

*Tasks.* :func:`serve_daemon` owns one nursery. In it:

* the **reader** (the calling task) reads lines in order and handles each command's
  *synchronous part* at once: control commands (``codex.updateSettings``,
  ``codex.respondInteraction[Error]``, ``codex.abortTurn``) are answered right there, so they
  bypass every queue (R-OP-1); long commands (``codex.send``/``compact``/``review``/
  ``preconnect``) are queued on their channel's runtime FIFO right there, so submission order is
  line order;
* one **waiter task per long command** awaits the operation's terminal and writes its reply;
* one **task per read-only / lifecycle command** (``codex.listThreads`` …, ``releaseThread``,
  ``resetRuntime``): they never take the send FIFO and never resume a thread (R-D-1);
* one **channel task per channelId** holds ``open_runtime(...)`` (created on first use) and a
  **forwarder** that turns the runtime's events into event lines (R-D-2);
* an **idle reaper** retires a channel's child when it has no session, no work and no pending
  interaction for ``idle_timeout`` seconds (R-RT-6).

*Writing.* Every line goes through :meth:`Daemon.write`: encoded once with msgspec, then
written with one ``send_all`` under a FIFO lock, so lines never interleave and each is flushed
whole (the stream is unbuffered). stdout carries protocol lines only; logs go to stderr.

*Ordering promises.* A long command's reply is written after its ``operationDone`` event (the
waiter waits for the forwarder to pass that event, bounded by :data:`DONE_EVENT_GRACE`). Its
``operationQueued`` event carries the command's request id as ``payload.requestId``: the op is
created synchronously in the reader and its id is mapped to the request id before the reader
can yield, so the forwarder always finds it.

*Drain.* stdin EOF (:meth:`Daemon.stop_reading`) stops reading and first lets the commands
already accepted finish — every command task is counted by :meth:`Daemon._spawn` until its
reply is written — for at most ``DaemonConfig.drain_timeout`` seconds. :meth:`Daemon.abort`
(SIGTERM/SIGINT in :mod:`codexrt_cli._serve`, or stdout gone) skips or ends that wait. Then
every channel's runtime is closed: queued operations are cancelled, the running one is stopped
within the stop budget (R-OP-5), the child is retired and reaped; the waiters then write their
(``cancelled``/``interrupted``/``failed``) replies, the forwarders flush the last events, and
:func:`serve_daemon` returns.

*Bounds.* A channel's ``ops``/``request_ids``/``done_forwarded`` hold unreplied long commands
only (:meth:`_Channel.forget` after the reply); serve never reads ``op.events()`` and calls
``op.discard_events()`` (it forwards from the runtime subscription); channels are capped by
``DaemonConfig.max_channels`` (an idle, childless one is evicted, else ``TOO_MANY_CHANNELS``).
Every bound: ``docs/runtime.md``.
"""

from __future__ import annotations

import contextlib
import functools
import contextvars
import logging
import os
import traceback
from typing import Any, Awaitable, Callable

import attrs
import trio

from codexrt._io._retry import call_read
from codexrt._io._codex_home import resolve_codex_home
from codexrt._features._edits_live import EDIT_COMMANDS, LiveEdits, run_edit_command
from codexrt._sansio._errors import ClosedError, CodexError, ConfigError, InteractionError
from codexrt._runtime._events import CodexEvent, EventStream
from codexrt._features._history import (HISTORY_COMMANDS, LEGACY_HISTORY_COMMANDS, MessageCounter, run_history_command,
                              run_legacy_history_command)
from codexrt._runtime._interactions import INTERACTION_COMMANDS, PrivacyStore, default_privacy_dir, safe_negative_reply
from codexrt._runtime._runtime import Operation, Runtime, RuntimeConfig, open_runtime
from codexrt._sansio._framing import DEFAULT_MAX_LINE, LineBuffer, OversizedLine
from codexrt._sansio._redact import process_redactor, register_process_secrets
from codexrt._sansio._states import RuntimeState
from codexrt._sansio._settings import Settings
from codexrt._features._catalog import run_catalog_command
from codexrt._features._helpers import (DEFAULT_HELPER_TIMEOUT, TitleManager, enhance_prompt, generate_commit_message,
                              generate_title, helper_config, open_title_manager)
from codexrt._sansio._editor_wire import editor_state_from_wire, is_fragment_map
from codexrt._io._workspace import DiffStatus, read_workspace_diff
from codexrt._serve._codec import (BadCommand, Command, RequestId, encode_line, error_reply, parse_command,
                                   response_error, response_ok)
from codexrt._serve._commands import (CATALOG_COMMANDS, CONTROL_COMMANDS, HELPER_COMMANDS, LAUNCH_COMMANDS,
                                      LIFECYCLE_COMMANDS, LONG_COMMANDS, READ_ONLY_METHODS, WORKSPACE_COMMANDS)

__all__ = [
    "PROTOCOL_VERSION",
    "DaemonConfig",
    "Daemon",
    "serve_daemon",
]

log = logging.getLogger("codexrt.daemon")

PROTOCOL_VERSION = 1

#: How long a long command's waiter waits for the forwarder to pass ``operationDone`` before
#: replying anyway (the event can only be late when stdout itself is stuck).
DONE_EVENT_GRACE = 5.0
#: stdin EOF: the default bound on finishing the work already accepted (``--drain-timeout``).
DEFAULT_DRAIN_TIMEOUT = 300.0
#: Default cap on channels (``--max-channels``); each channel may hold one app-server child.
DEFAULT_MAX_CHANNELS = 32


class _Answer:
    """Whether the command being handled in this task has been answered (the fault barrier
    replies only for a command that was not)."""

    __slots__ = ("rid", "done", "before_reply")

    def __init__(self, rid: RequestId) -> None:
        self.rid = rid
        self.done = False
        # run once just before the reply is written (a read releases its channel's in-flight
        # count first, so a host acting on the reply never finds the channel still busy)
        self.before_reply: Callable[[], None] | None = None


#: The command the current task is handling (set by the fault barrier, read by ``_reply``).
_answering: contextvars.ContextVar[_Answer | None] = contextvars.ContextVar("codexrt_daemon_answer", default=None)


# ------------------------------------------------------------------------------------------
# The loop


@attrs.define
class DaemonConfig:
    """How ``serve`` runs. ``runtime`` is the template of every channel's
    :class:`RuntimeConfig` (``channel_id`` is filled in per channel). ``inactive`` is access
    mode ``inactive`` (R-LC-3): no child is ever spawned; ``codex.listThreads``,
    ``codex.readThread`` and ``codex.countThreadMessages`` answer from the rollout files
    (``codexrt._features._history.run_legacy_history_command``), every other command that needs a child is
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


async def _no_host_policy(inter: Any) -> Any:
    """After stdin EOF: every server request gets its safe negative reply (never an approval)."""
    return safe_negative_reply(inter.method, inter.params)


class _Channel:
    def __init__(self, channel_id: str, rt: Runtime) -> None:
        self.id = channel_id
        self.rt = rt
        self.close_requested = trio.Event()
        self.closed = trio.Event()
        self.ops: dict[str, Operation] = {}
        self.request_ids: dict[str, RequestId] = {}
        self.done_forwarded: dict[str, trio.Event] = {}
        self.last_activity = trio.current_time()
        self.inflight = 0
        self.edits: LiveEdits | None = None  # the edit ledgers, on the first edit command
        self.titles: TitleManager | None = None  # automatic titles (serve --auto-title, R-HLP-3)

    async def cancel_titles(self, thread_id: str | None = None, *, reason: str) -> None:
        """Cancel pending automatic titles (one thread's, or all) and wait until their helper
        children are reaped — release and reset do this before they go on (R-HLP-3)."""
        if self.titles is not None:
            await self.titles.cancel(thread_id, reason=reason)

    def touch(self) -> None:
        self.last_activity = trio.current_time()

    def forget(self, op_id: str) -> None:
        """Drop a replied operation from the channel's tables (they hold only unreplied ones)."""
        self.ops.pop(op_id, None)
        self.request_ids.pop(op_id, None)
        self.done_forwarded.pop(op_id, None)

    def live_ops(self, thread_id: str | None = None) -> list[Operation]:
        return [op for op in self.ops.values()
                if not op.terminal and (thread_id is None or op.thread_id == thread_id)]

    def snapshot(self) -> dict[str, Any]:
        return {**self.rt.runtime_snapshot(), "sessionEpoch": self.rt.session_epoch}

    def evictable(self) -> bool:
        """No child, no work, nothing pending: forgetting this channel loses only its desired
        settings and thread bookkeeping (the threads themselves resume on next use)."""
        rt = self.rt
        return (rt.state in (RuntimeState.STOPPED, RuntimeState.FAILED) and not rt.is_connected() and not rt.busy
                and not self.ops
                and self.inflight == 0 and not rt.pending_interactions()
                and not (self.titles is not None and self.titles.pending())
                and (self.edits is None or self.edits.closed))


class Daemon:
    """The command loop over one pair of byte streams. Use :func:`serve_daemon`."""

    def __init__(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, config: DaemonConfig) -> None:
        self._receive = receive
        self._send = send
        self.config = config
        self._write_lock = trio.Lock()
        self._channels: dict[str, _Channel] = {}
        self._nursery: trio.Nursery | None = None
        self._reader_scope = trio.CancelScope()
        self.draining = False
        self.finished = trio.Event()
        self.stdout_broken = False
        self._history_counter: MessageCounter | None = None
        self.lines_written = 0
        self._drain_scope = trio.CancelScope()
        self.abort_requested = False  # a signal (or a gone host): stop the work, do not finish it
        self._open_commands = 0  # accepted commands whose reply is not written yet
        self._commands_idle = trio.Event()
        self._commands_idle.set()

    # -- output ----------------------------------------------------------------------------

    async def write(self, obj: Any) -> None:
        """Write one protocol line, whole, in FIFO order. A broken stdout (the host went away)
        stops reading — which drains — and later lines are dropped."""
        data = encode_line(obj)
        async with self._write_lock:
            if self.stdout_broken:
                return
            try:
                await self._send.send_all(data)
                self.lines_written += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                log.warning("stdout is gone (%s); draining", exc)
                self.stdout_broken = True
                self.abort()  # nobody can read the results: do not finish the work

    async def _reply(self, rid: RequestId | None, result: Any = None, *, error: CodexError | None = None) -> None:
        answer = _answering.get()
        if answer is not None and type(answer.rid) is type(rid) and answer.rid == rid:
            answer.done = True
            hook, answer.before_reply = answer.before_reply, None
            if hook is not None:
                hook()
        await self.write(error_reply(rid, error) if error is not None else response_ok(rid, result))  # type: ignore[arg-type]

    # -- the fault barrier -----------------------------------------------------------------

    async def _answer_failure(self, cmd: Command, answer: _Answer, exc: Exception) -> None:
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
        if isinstance(exc, CodexError):
            await self.write(error_reply(cmd.id, exc))
        else:
            await self.write(response_error(cmd.id, "INTERNAL_ERROR",
                                            f"internal error in {cmd.name}: {type(exc).__name__}",
                                            {"command": cmd.name}))

    async def _guarded(self, fn: Callable[..., Any], cmd: Command, *args: Any) -> None:
        """Run one command's handler task behind the fault barrier (module doc)."""
        answer = _Answer(cmd.id)
        _answering.set(answer)  # this task's own context: nobody else sees it
        try:
            await fn(cmd, *args)
        except Exception as exc:
            await self._answer_failure(cmd, answer, exc)

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

    def _spawn(self, fn: Callable[..., Any], cmd: Command, *args: Any) -> None:
        """Run one accepted command's handler task behind the fault barrier; counted until it
        finishes (its reply is written), so an EOF drain knows when the accepted work is done."""
        assert self._nursery is not None
        self._open_commands += 1
        if self._commands_idle.is_set():
            self._commands_idle = trio.Event()

        async def run() -> None:
            try:
                await self._guarded(fn, cmd, *args)
            finally:
                self._open_commands -= 1
                if self._open_commands == 0:
                    self._commands_idle.set()

        self._nursery.start_soon(run)

    # -- main ------------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            aux = trio.CancelScope()

            async def aux_tasks() -> None:
                with aux:
                    if self.config.idle_timeout is not None:
                        await self._idle_reaper(self.config.idle_timeout)
                    else:
                        await trio.sleep_forever()

            nursery.start_soon(aux_tasks)
            with self._reader_scope:
                await self._read_loop()
            self.draining = True
            if not self.abort_requested and self.config.drain_timeout > 0:
                # stdin EOF: the host said everything it will say; finish what it asked for
                # (bounded), then stop what is left as a signal would. Nobody is left to answer
                # a server request, so pending and later ones get their safe negative reply at
                # once (never an approval) instead of holding the drain for its whole bound.
                log.info("stdin closed: finishing %d accepted command(s) (at most %gs)",
                         self._open_commands, self.config.drain_timeout)
                with self._drain_scope:  # a signal (abort) ends this at once, declines included
                    with trio.move_on_after(self.config.drain_timeout):
                        await self._answer_for_absent_host()
                        await self._commands_idle.wait()
            log.info("draining %d channel(s)", len(self._channels))
            for ch in list(self._channels.values()):
                ch.close_requested.set()
            aux.cancel()

    async def _answer_for_absent_host(self) -> None:
        declined = 0
        for ch in list(self._channels.values()):
            ch.rt.set_interaction_policy(_no_host_policy)
            for inter in ch.rt.pending_interactions():
                try:
                    await inter.decline()
                    declined += 1
                except CodexError as exc:  # answered meanwhile, expired, or the child is gone
                    log.debug("stdin closed: interaction %s not declined: %s", inter.key, exc.code)
        if declined:
            log.info("stdin closed: %d pending interaction(s) declined (nobody can answer them now)", declined)

    async def _read_loop(self) -> None:
        buf = LineBuffer(self.config.max_line)
        while True:
            try:
                data = await self._receive.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                log.warning("stdin failed (%s); treating it as EOF", exc)
                data = b""
            frames = buf.feed(data) if data else buf.close()
            for frame in frames:
                await self._handle_frame(frame)
            if not data:
                return

    async def _handle_frame(self, frame: bytes | OversizedLine) -> None:
        if isinstance(frame, OversizedLine):
            await self.write(response_error(None, "LINE_TOO_LONG",
                                            f"command line of {frame.size} bytes exceeds the limit of {frame.limit}"))
            return
        if not frame.strip():
            return
        try:
            cmd = parse_command(frame)
        except Exception as exc:  # parse_command never raises; if it ever does, the line still gets a reply
            log.error("parse_command failed: %s", type(exc).__name__)
            cmd = BadCommand(None, "INTERNAL_ERROR", f"internal error while parsing a line: {type(exc).__name__}")
        if isinstance(cmd, BadCommand):
            log.info("bad command line: %s %s", cmd.code, cmd.message)
            await self.write(cmd.reply())
            return
        answer = _Answer(cmd.id)
        token = _answering.set(answer)
        try:
            await self._dispatch(cmd)
        except Exception as exc:
            await self._answer_failure(cmd, answer, exc)
        finally:
            _answering.reset(token)

    async def _dispatch(self, cmd: Command) -> None:
        name, p = cmd.name, cmd.params
        if name == "status":
            await self._reply(cmd.id, self.status(p.get("channelId")))
            return
        if name in CONTROL_COMMANDS:
            await self._control(cmd)
            return
        if name in LAUNCH_COMMANDS:  # before the inactive check: it may leave inactive mode
            await self._configure_launch(cmd)
            return
        if name in WORKSPACE_COMMANDS:
            self._spawn(self._workspace_diff, cmd)
            return
        if self.config.inactive and name in LEGACY_HISTORY_COMMANDS:
            self._spawn(self._legacy_history, cmd)
            return
        if self.config.inactive:
            raise ConfigError("runtime access is inactive: codexrt starts no Codex process in this mode (R-LC-3)",
                              code="ACCESS_INACTIVE", details={"command": name})
        assert self._nursery is not None
        if name in HELPER_COMMANDS:
            self._spawn(self._helper, cmd)
            return
        if name in INTERACTION_COMMANDS:
            await self._interaction_command(cmd)
            return
        if name in LONG_COMMANDS:
            ch = await self._channel(p["channelId"])
            op = self._create_op(ch, cmd)
            # No checkpoint between creating the op and these two lines (see module doc).
            ch.request_ids[op.id] = cmd.id
            done = ch.done_forwarded[op.id] = trio.Event()
            ch.ops[op.id] = op
            op.discard_events()  # the forwarder follows the runtime's subscription: no per-op buffer
            self._spawn(self._await_op, cmd, ch, op, done)
            return
        if name in LIFECYCLE_COMMANDS:
            ch_or_none = self._channels.get(p["channelId"])
            self._spawn(self._lifecycle, cmd, ch_or_none)
            return
        ch = await self._channel(p["channelId"])
        ch.inflight += 1
        ch.touch()
        if name in EDIT_COMMANDS:
            self._spawn(self._edit_command, cmd, ch)
            return
        self._spawn(self._read_only, cmd, ch)

    async def _interaction_command(self, cmd: Command) -> None:
        """``codex.replayInteractions`` is answered at once (R-INT-2: pending interactions in
        delivery order with rotated tokens). ``codex.executePlan`` (R-INT-5) queues its turn
        like ``codex.send`` and replies with the execution's result (keyed by this request id)."""
        p = cmd.params
        if cmd.name == "codex.replayInteractions":
            ch_or_none = self._channels.get(p["channelId"])
            replayed = ch_or_none.rt.replay_interactions() if ch_or_none is not None else []
            await self._reply(cmd.id, {"interactions": [i.to_wire(replayed=True) for i in replayed]})
            return
        assert self._nursery is not None
        ch = await self._channel(p["channelId"])
        ch.touch()
        ex = ch.rt.execute_plan(p["threadId"], p["planItemId"], request_id=cmd.id, model=p.get("model"))
        op, done = ex.operation, None
        if op is not None and op.id not in ch.request_ids and not op.terminal:
            # No checkpoint between creating the op and these lines (see module doc).
            ch.request_ids[op.id] = cmd.id
            done = ch.done_forwarded[op.id] = trio.Event()
            ch.ops[op.id] = op
            op.discard_events()
        self._spawn(self._await_plan, cmd, ch, ex, done)

    async def _await_plan(self, cmd: Command, ch: _Channel, ex: Any, done: trio.Event | None) -> None:
        op = ex.operation
        try:
            result = await ex.wait()
            if done is not None:
                with trio.move_on_after(DONE_EVENT_GRACE):
                    await done.wait()
            ch.touch()
            await self._reply(cmd.id, result)
        finally:
            if done is not None and op is not None:
                ch.forget(op.id)

    # -- channels --------------------------------------------------------------------------

    async def _channel(self, channel_id: str) -> _Channel:
        """The channel's runtime, created on first use (R-D-1). Nothing is spawned yet: the
        runtime starts its child on its first operation or read."""
        ch = self._channels.get(channel_id)
        if ch is not None:
            return ch
        if self.draining:
            raise ClosedError("serve is draining; no new channel")
        if len(self._channels) >= self.config.max_channels:
            await self._evict_channel()
        assert self._nursery is not None
        ch = await self._nursery.start(self._run_channel, channel_id)
        return ch

    async def _evict_channel(self) -> None:
        """Make room for a new channel: forget the least recently used one that has no child
        and nothing pending (its next use starts afresh, with a new ``sessionEpoch``); when
        every channel is in use, refuse with ``TOO_MANY_CHANNELS``."""
        idle = [ch for ch in self._channels.values() if ch.evictable()]
        if not idle:
            raise CodexError(f"too many channels: {len(self._channels)} are open and in use (the limit is "
                             f"{self.config.max_channels}, --max-channels); reset or release one first",
                             code="TOO_MANY_CHANNELS",
                             details={"maxChannels": self.config.max_channels, "channels": len(self._channels)})
        victim = min(idle, key=lambda ch: ch.last_activity)
        log.info("forgetting idle channel %s to make room", victim.id)
        del self._channels[victim.id]
        victim.close_requested.set()
        with trio.move_on_after(DONE_EVENT_GRACE):  # no child and no work: closing it is quick
            await victim.closed.wait()

    async def _run_channel(self, channel_id: str, task_status: trio.TaskStatus[_Channel] = trio.TASK_STATUS_IGNORED) -> None:
        cfg = attrs.evolve(self.config.runtime, channel_id=channel_id)
        ch: _Channel | None = None
        try:
            async with trio.open_nursery() as inner:
                sub = None
                try:
                    async with open_runtime(cfg) as rt, contextlib.AsyncExitStack() as stack:
                        # Subscribed for the runtime's whole life: ``aclose`` closes the stream
                        # after its last events, which ends the forwarder.
                        sub = rt.subscribe()
                        events = sub.__enter__()
                        ch = _Channel(channel_id, rt)
                        if self.config.auto_title:
                            # subscribed before anything can start a thread; leaving the stack
                            # (before the runtime closes) cancels pending titles and reaps them
                            ch.titles = await stack.enter_async_context(open_title_manager(rt))
                        self._channels[channel_id] = ch
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
                if self._channels.get(channel_id) is ch:
                    del self._channels[channel_id]
                ch.closed.set()

    async def _forward(self, ch: _Channel, events: EventStream) -> None:
        async for ev in events:
            await self.write(self._event_line(ch, ev))
            if ev.kind == "operationDone" and ev.client_operation_id:
                done = ch.done_forwarded.pop(ev.client_operation_id, None)
                ch.request_ids.pop(ev.client_operation_id, None)
                if done is not None:
                    done.set()

    def _event_line(self, ch: _Channel, ev: CodexEvent) -> dict[str, Any]:
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
        while True:
            await trio.sleep(max(0.05, min(idle_timeout / 2, 5.0)))
            now = trio.current_time()
            for ch in list(self._channels.values()):
                if (ch.rt.idle_retirable() and ch.inflight == 0
                        and not (ch.titles is not None and ch.titles.pending())
                        and now - ch.last_activity >= idle_timeout):
                    log.info("retiring idle runtime of channel %s", ch.id)
                    try:
                        await ch.rt.reset(reason="idle")
                    except Exception as exc:  # one channel's failed retirement never ends serve
                        log.warning("idle retirement of channel %s failed: %s", ch.id, type(exc).__name__)

    # -- long commands ---------------------------------------------------------------------

    def _create_op(self, ch: _Channel, cmd: Command) -> Operation:
        p = cmd.params
        ch.touch()
        rt = ch.rt
        if cmd.name == "codex.send":
            settings = Settings.from_wire(p["settings"]) if p.get("settings") else None
            if p.get("cwd"):
                settings = (settings or Settings()).merged(Settings(cwd=p["cwd"]))
            # context: ready additionalContext fragments, or the editor state (R-CTX-1); both
            # are frozen by rt.send now, and the probe decides at dispatch how they travel.
            ctx = p.get("context") or None
            editor_state = None
            if ctx is not None and not is_fragment_map(ctx):
                editor_state, ctx = editor_state_from_wire(ctx), None
            return rt.send(p["message"], thread_id=p.get("threadId"), client_message_id=p.get("clientMessageId"),
                           images=p.get("images") or (), additional_context=ctx, editor_state=editor_state,
                           settings=settings, skills=p.get("skills") or ())
        if cmd.name == "codex.compact":
            return rt.compact(p["threadId"])
        if cmd.name == "codex.review":
            return rt.review(p["threadId"], p.get("target"))
        return rt.preconnect(p.get("threadId"))

    async def _await_op(self, cmd: Command, ch: _Channel, op: Operation, done: trio.Event) -> None:
        try:
            result = await op.wait()
            with trio.move_on_after(DONE_EVENT_GRACE):
                await done.wait()
            ch.touch()
            await self._reply(cmd.id, {"kind": op.kind, **result.to_wire(),
                                       "clientMessageId": op.client_message_id})
        finally:
            ch.forget(op.id)  # replied: a terminal operation leaves the daemon's tables

    # -- control commands (answered at once, never queued: R-OP-1) -------------------------

    def _find_interaction_channel(self, p: dict[str, Any]) -> _Channel:
        key = p["interactionKey"]
        if p.get("channelId") is not None:
            ch = self._channels.get(p["channelId"])
            if ch is not None:
                return ch
        else:
            for ch in self._channels.values():
                if key in ch.rt.interactions:
                    return ch
        raise InteractionError(f"unknown interaction {key!r}", code="INTERACTION_UNKNOWN")

    async def _configure_launch(self, cmd: Command) -> None:
        """``codex.configureLaunch`` (R-LC-1..3): a new launch configuration for one channel
        (``channelId``) or, without one, for channels created later and every live one. Every
        target is validated before any changes; each live runtime applies it through
        :meth:`Runtime.update_launch` (rebuild at once when idle, after the active operation
        otherwise; a ``runtimeReset`` event when the child is retired). ``model`` is a per-turn
        setting (desired settings), never part of the fingerprint. The API key and header values
        are registered as secrets before anything else happens."""
        from codexrt._runtime._launch import launch_fingerprint

        p = cmd.params
        provider = p.get("provider")
        register_process_secrets([p.get("apiKey"), *((provider or {}).get("headers") or {}).values()])
        changes: dict[str, Any] = {"access_mode": p["accessMode"], "provider": provider, "api_key": p.get("apiKey")}
        if "codexHome" in p:
            changes["codex_home"] = p["codexHome"]
        if "codexBin" in p:
            changes["codex_bin"] = p["codexBin"]
        model = p.get("model")
        cid = p.get("channelId")
        if cid is not None:
            targets = [await self._channel(cid)]
        else:
            targets = list(self._channels.values())
        # Validate everything first: an invalid configuration changes nothing anywhere.
        template = attrs.evolve(self.config.runtime, **changes)
        if model is not None:
            template.settings = attrs.evolve(template.settings, model=model)
        fingerprint = launch_fingerprint(template.launch_config())
        for ch in targets:
            attrs.evolve(ch.rt.config, **changes).launch_config()
        rebuilds: dict[str, str] = {}
        if cid is None:
            before = launch_fingerprint(self.config.runtime.launch_config())
            self.config.runtime = template
            self.config.inactive = p["accessMode"] == "inactive"
            if before != fingerprint and not targets:
                rebuilds["*"] = "immediate"  # nothing running: channels created later use it
        for ch in targets:
            rebuilds[ch.id] = ch.rt.update_launch(**changes)
            if model is not None:
                ch.rt.update_settings(model=model)
            ch.touch()
            if cid is not None:
                fingerprint = ch.rt.launch_fingerprint()
        kinds = set(rebuilds.values())
        rebuild = "deferred" if "deferred" in kinds else "immediate" if "immediate" in kinds else "unchanged"
        await self._reply(cmd.id, {"fingerprint": fingerprint, "rebuild": rebuild,
                                   "channels": {k: v for k, v in rebuilds.items() if k != "*"}})

    async def _control(self, cmd: Command) -> None:
        p = cmd.params
        if cmd.name == "codex.updateSettings":
            ch = await self._channel(p["channelId"])
            revision = ch.rt.update_settings(Settings.from_wire(p["settings"]))
            await self._reply(cmd.id, {"settingsRevision": revision, "desired": ch.rt.desired.to_wire()})
        elif cmd.name == "codex.abortTurn":
            ch_or_none = self._channels.get(p["channelId"])
            op_id = p.get("clientOperationId")
            if ch_or_none is None:
                await self._reply(cmd.id, {"stopPath": "noOperation", "clientOperationId": op_id})
                return
            rt = ch_or_none.rt
            target = op_id or (rt.active.id if rt.active is not None else None)
            if target is None:
                queued = ch_or_none.live_ops()
                target = queued[0].id if queued else None
            path = rt.abort(target) if target is not None else "noOperation"
            await self._reply(cmd.id, {"stopPath": path, "clientOperationId": target})
        elif cmd.name == "codex.respondInteraction":
            ch = self._find_interaction_channel(p)
            await ch.rt.respond_interaction(p["interactionKey"], p["dialogToken"], p["result"])
            ch.touch()
            await self._reply(cmd.id, {"interactionKey": p["interactionKey"], "answered": True})
        else:  # codex.respondInteractionError
            ch = self._find_interaction_channel(p)
            await ch.rt.respond_interaction_error(p["interactionKey"], p["dialogToken"], p["error"]["code"],
                                                  p["error"]["message"])
            ch.touch()
            await self._reply(cmd.id, {"interactionKey": p["interactionKey"], "answered": True})

    # -- lifecycle -------------------------------------------------------------------------

    async def _stop_ops(self, ch: _Channel, ops: list[Operation], *,
                        then: Callable[[], Awaitable[None]] | None = None) -> list[dict[str, Any]]:
        """Stop ``ops`` (R-OP-5), run ``then`` (if given) once every stop is requested, and
        wait for their terminals; the runtime's stop budget bounds the wait (after it the child
        is killed and the op fails)."""
        stopped = []
        for op in ops:
            stopped.append({"clientOperationId": op.id, "stopPath": ch.rt.abort(op), "status": None})
        if then is not None:
            await then()
        with trio.move_on_after(ch.rt.config.stop_budget + 15):
            for op, entry in zip(ops, stopped):
                entry["status"] = (await op.wait()).status
        return stopped

    async def _lifecycle(self, cmd: Command, ch: _Channel | None) -> None:
        try:
            if cmd.name == "codex.resetRuntime":
                if ch is None:
                    await self._reply(cmd.id, {"stoppedOperations": [], "runtime": None})
                    return
                then = None
                if ch.rt.state in (RuntimeState.STARTING, RuntimeState.INITIALIZING):
                    # The child is still starting: retire it now; an operation waiting for it
                    # (its stop already requested) ends cancelled instead of waiting the budget.
                    then = functools.partial(ch.rt.reset, reason="resetRuntime")
                stopped = await self._stop_ops(ch, ch.live_ops(), then=then)
                await ch.cancel_titles(reason="resetRuntime")  # R-HLP-3: reset waits for helpers
                await ch.rt.reset(reason="resetRuntime")
                await self._reply(cmd.id, {"stoppedOperations": stopped, "runtime": ch.snapshot()})
                return
            # codex.releaseThread
            tid = cmd.params["threadId"]
            result: dict[str, Any] = {"threadId": tid, "stoppedOperations": [], "unsubscribe": None,
                                      "runtimeRetired": False}
            if ch is None:
                await self._reply(cmd.id, result)
                return
            rt = ch.rt
            # R-D-1: the verified relation set first (children deepest first: stopped, waited
            # for until not active, unsubscribed); the lease itself is released at the end.
            for child in rt.relations(tid):
                result["stoppedOperations"] += await self._stop_ops(ch, ch.live_ops(child))
            result["releasedChildren"] = await rt.drain_relations(tid)
            result["stoppedOperations"] += await self._stop_ops(ch, ch.live_ops(tid))
            await ch.cancel_titles(tid, reason="releaseThread")  # R-HLP-3: release waits for helpers
            try:  # the next operation on it resumes it
                result["unsubscribe"] = await rt.unload_thread(tid)
            except CodexError as exc:
                result["unsubscribeError"] = exc.to_dict()
            snap = rt.runtime_snapshot()
            if snap["sessionCount"] == 0 and not snap["busy"] and rt.is_connected():
                await ch.cancel_titles(reason="releaseThread")  # nothing may save on a retired child
                await rt.reset(reason="releaseThread")  # confirms the child's exit (R-RT-5)
                result["runtimeRetired"] = True
            rt.release_relation_lease(tid)  # only now: after the children and the child's exit
            ch.touch()
            await self._reply(cmd.id, result)
        except CodexError as exc:
            await self._reply(cmd.id, error=exc)

    # -- read-only commands ----------------------------------------------------------------

    async def _read_only(self, cmd: Command, ch: _Channel) -> None:
        """Native reads: the runtime's connection, never the FIFO, never ``thread/resume``."""
        release = self._inflight_release(ch)
        p = dict(cmd.params)
        p.pop("channelId", None)
        method = READ_ONLY_METHODS.get(cmd.name, "")
        try:
            if cmd.name in HISTORY_COMMANDS:  # R-H-1..R-H-8: codexrt._features._history
                if self._history_counter is None:
                    assert self._nursery is not None
                    self._history_counter = MessageCounter(self._nursery)  # host-level (R-H-7)
                await self._reply(cmd.id, await run_history_command(ch.rt, cmd.name, cmd.params,
                                                                    counter=self._history_counter,
                                                                    nursery=self._nursery))
                return
            if cmd.name == "codex.readHistoryPage":
                scope = p.pop("scope", "turns")
                method = "thread/items/list" if scope == "items" else "thread/turns/list"
            parent = p.pop("parentThreadId", None) if cmd.name == "codex.readSubagent" else None
            if cmd.name in CATALOG_COMMANDS:
                await self._reply(cmd.id, await run_catalog_command(ch.rt, cmd.name, p))
                return
            conn = await ch.rt.ensure_started()
            result = await call_read(conn, method, p)
            if cmd.name == "codex.readSubagent":
                thread = (result or {}).get("thread") or {}
                actual = thread.get("parentThreadId")
                if parent is not None and actual != parent:
                    raise CodexError(
                        f"thread {cmd.params['threadId']} is not a child of {parent} (its parent is {actual!r})",
                        code="RELATION_UNVERIFIED",
                        details={"threadId": cmd.params["threadId"], "parentThreadId": actual})
                result = {"thread": thread, "parentThreadId": actual,
                          "relationVerified": parent is not None and actual == parent}
            await self._reply(cmd.id, result)
        except CodexError as exc:
            await self._reply(cmd.id, error=exc)
        finally:
            release()

    @staticmethod
    def _inflight_release(ch: _Channel) -> Callable[[], None]:
        """Ends this task's count in ``ch.inflight`` exactly once: just before its reply is
        written, or when the task ends without one."""
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                ch.inflight -= 1
                ch.touch()

        answer = _answering.get()
        if answer is not None:
            answer.before_reply = release
        return release

    async def _legacy_history(self, cmd: Command) -> None:
        """Access mode ``inactive``: thread list, transcript and counts from the rollout files
        under ``CODEX_HOME/sessions``, masked with the privacy index of that home; no channel
        runtime is created and nothing is spawned (R-LC-3, R-H-3, R-H-6)."""
        rc = self.config.runtime
        env = rc.env if rc.env is not None else os.environ
        home = resolve_codex_home(rc.codex_home, env)
        store = PrivacyStore.for_home(default_privacy_dir(env), str(home))
        assert self._nursery is not None
        try:
            result = await run_legacy_history_command(cmd.name, cmd.params, codex_home=home, privacy=store.load,
                                                       nursery=self._nursery)
            await self._reply(cmd.id, result)
        except CodexError as exc:
            await self._reply(cmd.id, error=exc)

    # -- edit ledger commands (R-EDIT-1..3) --------------------------------------------------

    async def _edit_command(self, cmd: Command, ch: _Channel) -> None:
        """``codex.listEdits`` … ``codex.undoFile``: like a read-only command, never the FIFO and
        never a resume; each runs in its own task, so undos of different files run in parallel.
        The channel's :class:`LiveEdits` starts on the first one (history covers what came
        before) and ends with the channel's runtime."""
        release = self._inflight_release(ch)
        try:
            live = ch.edits
            if live is None or live.closed:
                live = ch.edits = LiveEdits(ch.rt)
                assert self._nursery is not None
                await self._nursery.start(live.run)
            await live.subscribed.wait()
            await self._reply(cmd.id, await run_edit_command(live, cmd.name, cmd.params))
        except CodexError as exc:
            await self._reply(cmd.id, error=exc)
        finally:
            release()

    # -- helper requests and workspace diff (R-HLP, R-DIFF) ---------------------------------

    async def _helper(self, cmd: Command) -> None:
        """A helper on its own ephemeral child (R-HLP-1); never the channel's FIFO or writer."""
        p = cmd.params
        cfg = helper_config(attrs.evolve(self.config.runtime, channel_id=p["channelId"]))
        timeout = float(p.get("timeout") or DEFAULT_HELPER_TIMEOUT)
        try:
            if cmd.name == "codex.enhancePrompt":
                result: dict[str, Any] = {"prompt": await enhance_prompt(cfg, p["prompt"], timeout=timeout,
                                                                         cwd=p.get("cwd"))}
            elif cmd.name == "codex.generateCommitMessage":
                diff_text, diff_status = p.get("diff"), None
                if diff_text is None:
                    cwd = p.get("cwd") or cfg.cwd
                    if not cwd:
                        raise ConfigError("codex.generateCommitMessage needs a diff or a cwd")
                    d = await read_workspace_diff(cwd, session_id=p.get("sessionId") or "")
                    diff_status = d.status.value
                    if d.status not in (DiffStatus.OK, DiffStatus.TRUNCATED):
                        raise CodexError(f"cannot read the workspace diff of {cwd}: {d.status.value}",
                                         code="DIFF_UNAVAILABLE", details={"status": d.status.value,
                                                                           "message": d.message})
                    diff_text = d.staged or (d.unstaged + d.untracked)
                message = await generate_commit_message(cfg, diff_text, timeout=timeout, cwd=p.get("cwd"))
                result = {"message": message, "diffStatus": diff_status}
            else:  # codex.generateTitle
                title = await generate_title(cfg, p["message"], timeout=timeout, cwd=p.get("cwd"))
                tid, saved, reason = p.get("threadId"), False, None
                if tid and p.get("save", True):
                    ch = self._channels.get(p["channelId"])
                    # never starts or restarts the writer: only a READY runtime with a live child
                    child = ch.rt.current_child() if ch is not None else None
                    if child is None:
                        reason = "runtime not ready"
                    else:
                        if ch is not None and ch.titles is not None:
                            ch.titles.name_set_manually(tid)  # the host's name wins over an automatic one
                        await child.call("thread/name/set", {"threadId": tid, "name": title})
                        saved = True
                result = {"title": title, "threadId": tid, "saved": saved, "reason": reason}
            await self._reply(cmd.id, result)
        except CodexError as exc:
            await self._reply(cmd.id, error=exc)

    async def _workspace_diff(self, cmd: Command) -> None:
        """Git only, no model turn; a fresh read every time, tied to the session and cwd (R-DIFF-1)."""
        p = cmd.params
        kwargs: dict[str, Any] = {}
        if p.get("maxBytes") is not None:
            kwargs["max_bytes"] = int(p["maxBytes"])
        if p.get("timeout") is not None:
            kwargs["timeout"] = float(p["timeout"])
        try:
            diff = await read_workspace_diff(p["cwd"], session_id=p.get("sessionId") or "", **kwargs)
            await self._reply(cmd.id, diff.to_dict())
        except CodexError as exc:
            await self._reply(cmd.id, error=exc)

    # -- status ----------------------------------------------------------------------------

    def status(self, channel_id: str | None = None) -> dict[str, Any]:
        channels = [ch.snapshot() for cid, ch in sorted(self._channels.items())
                    if channel_id is None or cid == channel_id]
        return {"protocolVersion": PROTOCOL_VERSION, "pid": os.getpid(), "draining": self.draining,
                "maxChannels": self.config.max_channels, "channels": channels}


async def serve_daemon(receive: trio.abc.ReceiveStream, send: trio.abc.SendStream,
                       config: DaemonConfig | None = None,
                       task_status: trio.TaskStatus[Daemon] = trio.TASK_STATUS_IGNORED) -> None:
    """Run the command loop until ``receive`` reaches EOF (or :meth:`Daemon.stop_reading`),
    then drain (module doc) and return. Cancelling it cancels everything at once — the
    runtimes still stop their children, shielded."""
    daemon = Daemon(receive, send, config or DaemonConfig())
    # The children's secret-looking env values are masked from the first reply on (R-WIRE-9).
    register_process_secrets(daemon.config.runtime.secret_values())
    task_status.started(daemon)
    try:
        await daemon.run()
    finally:
        daemon.finished.set()
