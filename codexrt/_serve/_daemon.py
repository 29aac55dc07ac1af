"""The ``codexrt serve`` daemon: NDJSON commands in, replies and events out (R-D-1 … R-D-4).

Why a daemon: IDE plugins and hosts written in other languages spawn ``codexrt serve`` as a
sidecar and talk to it over its stdin/stdout. The wire is documented in
``docs/daemon-protocol.md`` and described by the JSON Schema shipped beside this module
(``codexrt/_serve/daemon-protocol.schema.json``), whose command part is generated from the
command types that decode — and so validate — every command's params
(:mod:`codexrt._serve._commands`): one source of truth for the docs, the parser and the tests.

Layout
------
:mod:`~codexrt._serve._commands` (the params Structs and the ``COMMANDS`` table: name → params
type, lane) → :mod:`~codexrt._serve._codec` (lines in and out, pure) →
:mod:`~codexrt._serve._channel` (a channel's runtime and bookkeeping) →
:mod:`~codexrt._serve._core` (config, output, fault barrier, command tasks, channels, forwarder,
idle reaper) → ``_handlers_control`` (control, launch, lifecycle), ``_handlers_ops`` (long
commands, plans), ``_handlers_reads`` (reads, history, catalogs, edits, helpers, workspace diff)
→ this module (the reader loop, dispatch by lane, drain). :mod:`~codexrt._serve._schema`
generates the schema's command part.

Theory of operation
-------------------
*Parsing* is pure (:func:`codexrt._serve._codec.parse_command`, no I/O, no trio): a line
becomes a ``Command`` or a ``BadCommand`` that knows its reply. A line that is not JSON, has no
usable id, names an unknown command or carries params that do not decode into the command's
Struct gets an ``ok: false`` reply
carrying the line's id whenever one can be read (``"id": null`` only when none can,
:mod:`codexrt._serve._codec`) and the loop goes on (R-D-4); nothing already queued is touched.
A command whose id is still in use (its command has no reply yet, ``DaemonCore.pending_ids``)
is refused with ``DUPLICATE_REQUEST_ID`` and not run. A line nested deeper than
``MAX_COMMAND_DEPTH`` gets ``LINE_TOO_DEEP``
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
* one **waiter task per long command** awaits the operation's terminal and writes its reply
  (unless the task that wrote its ``operationDone`` line wrote the reply behind it);
* one **task per read-only / lifecycle command** (``codex.listThreads`` …, ``releaseThread``,
  ``resetRuntime``): they never take the send FIFO and never resume a thread (R-D-1);
* one **channel task per channelId** holds ``open_runtime(...)`` (created on first use) and a
  **forwarder** that turns the runtime's events into event lines (R-D-2);
* an **idle reaper** retires a channel's child when it has no session, no work and no pending
  interaction for ``idle_timeout`` seconds (R-RT-6).

*Writing.* Every line goes through one :class:`~codexrt._io._lines.LineWriter`: encoded once
with msgspec, then written with one ``send_all`` under a FIFO lock, so lines never interleave
and each is flushed whole (the stream is unbuffered). stdout carries protocol lines only; logs
go to stderr. An event line is written by the task that published the event — most often the
connection's reader — when nothing is queued for the forwarder, nobody holds the lock and the
pipe takes the line whole at once (``EventStream.take_directly``, ``LineWriter.write_now``;
issue 34: no forwarder wake-up per event); otherwise the forwarder writes it, in order. An
event that cannot be encoded (a bug upstream) is written as a ``protocolError`` in its place,
and the channel goes on.

*Ordering promises.* A long command's reply is written after its ``operationDone`` event. The
task that writes that event's line — the forwarder, or the task that published the event when
it wrote the line directly (most often the connection's reader) — writes the reply right behind
it when stdout is a pipe (or a Linux Unix socket, as Node gives its children), nobody holds the
writer's lock and the reply goes out whole at once (``DaemonCore._reply_now``, issue 34).
Otherwise the command's waiter writes it, after waiting until the event's line is written; that
wait is bounded by :data:`~codexrt._serve._core.DONE_EVENT_GRACE`, so only a stdout stuck longer
than that lets a reply go before its event. The reply to a ``codex.respondInteraction[Error]``
goes before the reply to the command whose turn it unblocked, though the app-server may end that
turn as soon as it reads the answer: while such a reply is pending on a channel
(``Channel.answering_host``), a long command's reply there is left to its waiter, which waits
for it within the same grace. Its ``operationQueued`` event carries the command's request id as
``payload.requestId``: the op is created synchronously in the reader and its id is mapped to
the request id before the reader can yield, so the forwarder (which always writes that event)
finds it.

*Drain.* stdin EOF (:meth:`Daemon.stop_reading`) stops reading and first lets the commands
already accepted finish — every command task is counted by :meth:`DaemonCore.spawn` until its
reply is written — for at most ``DaemonConfig.drain_timeout`` seconds. :meth:`Daemon.abort`
(SIGTERM/SIGINT in :mod:`codexrt_cli._serve`, or stdout gone) skips or ends that wait. Then
every channel's runtime is closed: queued operations are cancelled, the running one is stopped
within the stop budget (R-OP-5), the child is retired and reaped; the waiters then write their
(``cancelled``/``interrupted``/``failed``) replies, the forwarders flush the last events, and
:func:`serve_daemon` returns. From the end of reading on, a stdout that takes no byte for
:data:`STDOUT_GIVE_UP_GRACE` while lines wait (a host that stopped reading but keeps the pipe
open) is given up (``LineWriter.give_up_when_stuck``): its lines are dropped and the drain
ends as on a signal, so such a host does not hold serve or its children. The watch also starts
when stdin (a pipe or a socket) was closed while a write waits for room — a reader waiting on
stdout itself would never see the EOF (``LineWriter.stuck_watch``). A thread-backed stdout is
never given up.

*Bounds.* A channel's ``ops``/``request_ids``/``done_forwarded``/``awaiting`` hold unreplied
long commands only (:meth:`Channel.forget` when the waiter ends, one scheduler pass after a
reply written behind ``operationDone`` at most); serve never reads ``op.events()`` and calls
``op.discard_events()`` (it forwards from the runtime subscription); channels are capped by
``DaemonConfig.max_channels`` (an idle, childless one is evicted, else ``TOO_MANY_CHANNELS``).
Every bound: ``docs/runtime.md``.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from codexrt._io._lines import read_frames
from codexrt._sansio._errors import AccessInactive, CodexError, DuplicateRequestId, QueueFull
from codexrt._sansio._framing import OversizedLine
from codexrt._sansio._redact import register_process_secrets
from codexrt._serve._channel import Answer, answering
from codexrt._serve._codec import BadCommand, Command, error_reply, line_head_id, parse_command, response_error
from codexrt._serve._commands import COMMANDS, Lane
from codexrt._serve._core import (DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CHANNELS, PROTOCOL_VERSION, DaemonConfig,
                                  DaemonCore)

__all__ = [
    "PROTOCOL_VERSION",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_MAX_CHANNELS",
    "DaemonConfig",
    "Daemon",
    "serve_daemon",
]

log = logging.getLogger("codexrt.daemon")


async def _no_host_policy(inter: Any) -> Any:
    """After stdin EOF: every server request gets its safe negative reply (never an approval)."""
    from codexrt._sansio._methods import safe_negative_reply

    return safe_negative_reply(inter.method, inter.params)


#: After stdin EOF or a signal: a stdout that takes nothing for this long while lines wait is
#: given up (its lines dropped, the drain ended as by a signal) — the host stopped reading.
STDOUT_GIVE_UP_GRACE = 5.0

#: Commands accepted and not yet replied to (each a task or a waiter). One more — other than
#: ``status`` and the control commands — gets ``QUEUE_FULL`` at once. Far above an IDE's need.
MAX_OPEN_COMMANDS = 1024


class Daemon(DaemonCore):
    """The command loop over one pair of byte streams. Use :func:`serve_daemon`."""

    async def run(self) -> None:
        stuck = self._out.stuck_watch(STDOUT_GIVE_UP_GRACE, self._receive)
        async with stuck as watch_stdout, trio.open_nursery() as nursery:
            self.nursery = nursery
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
            # From here on nobody may read serve's stdout again: a host that stopped reading but
            # keeps the pipe open must not hold the drain, the children or serve's exit forever.
            watch_stdout()
            if not self.abort_requested and self.config.drain_timeout > 0:
                # stdin EOF: the host said everything it will say; finish what it asked for
                # (bounded), then stop what is left as a signal would. Nobody is left to answer
                # a server request, so pending and later ones get their safe negative reply at
                # once (never an approval) instead of holding the drain for its whole bound.
                log.info("stdin closed: finishing %d accepted command(s) (at most %gs)",
                         self._open.count, self.config.drain_timeout)
                with self._drain_scope:  # a signal (abort) ends this at once, declines included
                    with trio.move_on_after(self.config.drain_timeout):
                        await self._answer_for_absent_host()
                        await self._open.wait_none()
            log.info("draining %d channel(s)", len(self.channels))
            for ch in list(self.channels.values()):
                ch.close_requested.set()
            aux.cancel()

    async def _answer_for_absent_host(self) -> None:
        declined = 0
        for ch in list(self.channels.values()):
            ch.rt.set_interaction_policy(_no_host_policy)
            for inter in ch.rt.pending_interactions():
                try:
                    await inter.decline(by="policy")  # serve's, in the absent host's stead
                    declined += 1
                except CodexError as exc:  # answered meanwhile, expired, or the child is gone
                    log.debug("stdin closed: interaction %s not declined: %s", inter.key, exc.code)
        if declined:
            log.info("stdin closed: %d pending interaction(s) declined (nobody can answer them now)", declined)

    async def _read_loop(self) -> None:
        async for frame in read_frames(self._receive, self.config.max_line):
            await self._handle_frame(frame)

    async def _handle_frame(self, frame: bytes | OversizedLine) -> None:
        if isinstance(frame, OversizedLine):
            # its id, when the line's first bytes hold it at the top level (R-D-4, issue 31)
            await self.write(response_error(line_head_id(frame.head), "LINE_TOO_LONG",
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
        if (self._open.count >= MAX_OPEN_COMMANDS
                and COMMANDS[cmd.name].lane not in (Lane.STATUS, Lane.CONTROL)):
            # refused here, by the reader, which then waits on stdout like the host: a host that
            # sends without reading its replies cannot make serve grow without bound. Control
            # commands still pass (R-OP-1: an approval's answer never waits behind work).
            await self.write(error_reply(cmd.id, QueueFull(
                f"{self._open.count} commands are in flight (the limit); read their replies first; "
                f"this {cmd.name} was not run", details={"command": cmd.name, "limit": MAX_OPEN_COMMANDS})))
            return
        key = (type(cmd.id), cmd.id)
        if key in self.pending_ids:  # the pending command keeps its one reply; this one is refused
            await self.write(error_reply(cmd.id, DuplicateRequestId(
                f"this id is in use: a command with it has no reply yet; this {cmd.name} was not run",
                details={"command": cmd.name})))
            return
        self.pending_ids.add(key)
        answer = Answer(cmd.id)
        token = answering.set(answer)
        try:
            try:
                await self._dispatch(cmd)
            except Exception as exc:
                await self.answer_failure(cmd, answer, exc)
        except trio.Cancelled:  # abort() stopped the reader mid-command: it still gets its reply
            await self.answer_interrupted(cmd, answer)
            raise
        finally:
            answering.reset(token)

    async def _dispatch(self, cmd: Command) -> None:
        """Run ``cmd`` on its lane (:data:`codexrt._serve._commands.COMMANDS`): answered here,
        queued here, or in a task of its own."""
        lane, p = COMMANDS[cmd.name].lane, cmd.params
        if lane is Lane.STATUS:
            await self.reply(cmd.id, self.status(p.get("channelId")))
            return
        # The handlers, and with them the runtime, the connection and every feature, load with
        # the first command that needs them: a host's first ``status`` is answered without
        # (issue 34, bench/RESULTS.md). Later this import is a dictionary look-up.
        from codexrt._serve import _handlers_control, _handlers_ops, _handlers_reads

        if lane is Lane.CONTROL:
            await _handlers_control.control(self, cmd)
        elif lane is Lane.LAUNCH:  # before the inactive check: it may leave inactive mode
            await _handlers_control.configure_launch(self, cmd)
        elif lane is Lane.WORKSPACE:
            self.spawn(_handlers_reads.workspace_diff, cmd)
        elif self.config.inactive:
            from codexrt._features._history_commands import LEGACY_HISTORY_COMMANDS

            if cmd.name not in LEGACY_HISTORY_COMMANDS:
                raise AccessInactive("runtime access is inactive: codexrt starts no Codex process in this mode (R-LC-3)",
                                     details={"command": cmd.name})
            self.spawn(_handlers_reads.legacy_history, cmd)
        elif lane is Lane.HELPER:
            self.spawn(_handlers_reads.helper, cmd)
        elif lane is Lane.INTERACTION:
            await _handlers_ops.interaction_command(self, cmd)
        elif lane is Lane.LONG:
            await _handlers_ops.accept_long(self, cmd)
        elif lane is Lane.LIFECYCLE:
            self.spawn(_handlers_control.lifecycle, cmd, self.channels.get(p["channelId"]))
        else:  # Lane.READ, Lane.EDIT: counted in flight from now until just before the reply
            ch = await self.channel(p["channelId"])
            ch.inflight += 1
            ch.touch()
            self.spawn(_handlers_reads.edit_command if lane is Lane.EDIT else _handlers_reads.read_only, cmd, ch)


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
