"""Lifecycle of the runtime's child: start (candidates, fallback, generations), reset and
retirement, the fault settle, the launch-config rebuild, the idle reaper and close
(R-RT-1 … R-RT-6, R-CLI-5, R-LC-2), and the public port the layers above use instead of the
runtime's connection (``is_connected``, ``start_child``, ``current_child``, ``kill_child``,
``idle_retirable``)."""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import attrs
import trio

from codexrt._connection import Connection, open_connection
from codexrt._sansio._errors import (
    ChildExited,
    CliOverrideInvalid,
    CliUnavailable,
    ClosedError,
    CodexError,
    LocalProtocolError,
    NotLoggedIn,
    RpcError,
    RpcTimeout,
    child_exited_message,
)
from codexrt._sansio._states import RuntimeEvent, RuntimeState
from codexrt._io._cli_report import stderr_reason
from codexrt._io._transport import Transport
from codexrt._runtime._interactions import SUPPORTED_SERVER_REQUESTS
from codexrt._runtime._operations import STATUS_FAILED, ChildHandle
from codexrt._runtime._config import TransportFactory

log = logging.getLogger("codexrt.runtime")

#: Variables that give the CLI an API key without a stored login (``codexrt doctor`` counts them too).
_API_KEY_VARS = ("CODEX_API_KEY", "OPENAI_API_KEY")
#: How long the start waits for ``account/read`` (the answer is local: no network is involved).
_ACCOUNT_READ_TIMEOUT = 10.0


class RuntimeLifecycle:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

    def is_connected(self) -> bool:
        """True while the runtime holds a child's connection: from READY until that child is
        retired or its exit settled (R-RT-1, R-RT-4). The connection may already be ending."""
        return self.conn is not None

    async def start_child(self) -> ChildHandle:
        """:meth:`ensure_started`, as a :class:`ChildHandle` bound to the generation it
        returned (R-RT-2, R-RT-3)."""
        conn = await self.ensure_started()
        return ChildHandle(conn, self.generation, self)

    def current_child(self) -> ChildHandle | None:
        """The READY child with an open connection, else None. Never starts, restarts or
        resumes a child (for writers that must not: titles, R-HLP-3)."""
        conn = self.conn
        if self.state is not RuntimeState.READY or conn is None or conn.closed.is_set():
            return None
        return ChildHandle(conn, self.generation, self)

    def kill_child(self) -> bool:
        """SIGKILL the current child's process group, at once (a second Ctrl+C). The reader
        then sees its exit and settles what was bound to it (R-RT-4). False when no child."""
        conn = self.conn
        if conn is None:
            return False
        conn.kill()
        return True

    def idle_retirable(self) -> bool:
        """READY, nothing queued or running, no session loaded in this generation and no
        interaction pending: the idle reaper may retire the child (R-RT-6). The caller adds
        its own idle time (the runtime's reaper, or serve's per-channel one)."""
        return (self.state is RuntimeState.READY and not self.busy
                and self.runtime_snapshot()["sessionCount"] == 0 and not self.pending_interactions())


    async def ensure_started(self) -> Connection:
        """Start the app-server if needed and wait for READY (R-RT-3). Concurrent callers
        share one start. Raises the startup error when every candidate failed (R-CLI-5)."""
        if self._closing:
            raise ClosedError("runtime is closed")
        conn = self.conn
        if (not self._start_lock.locked() and self.state is RuntimeState.READY and conn is not None
                and not conn.closed.is_set()):
            # what taking the free lock would answer, without its scheduler pass (issue 34:
            # every history page asks; a start or reset in progress holds the lock)
            return conn
        cancelled_before = self._starts_cancelled
        async with self._start_lock:
            if self.state is RuntimeState.READY and self.conn is not None and not self.conn.closed.is_set():
                return self.conn
            if self._starts_cancelled != cancelled_before:
                # we waited for a start that reset() cancelled: that retired child was ours too
                raise ClosedError("the runtime was reset while starting; the child being started was retired",
                                  details={"startupCancelled": True})
            if self.state is RuntimeState.READY:
                # READY without a live connection must never last: settle it as a fault (which
                # fails what was bound to it) so this start is a clean restart.
                self._fault(LocalProtocolError("the app-server connection ended without being settled"))
            if self._closing:
                raise ClosedError("runtime is closed")
            with trio.CancelScope() as scope:
                self._start_scope = scope
                try:
                    conn = await self._start()
                    self._started_in = scope  # which start made this child (reset() asks)
                    return conn
                finally:
                    self._start_scope = None
            # reset() or aclose() cancelled this start; _start closed and reaped its child
            raise ClosedError("the runtime was reset while starting; the child being started was retired",
                              details={"startupCancelled": True})

    async def _start(self) -> Connection:
        try:
            try:
                candidates, discovery = self.config._startup_candidates()
            except CliUnavailable as exc:
                if (exc.details.get("codexCliUnavailable") or {}).get("mode") != "notInstalled":
                    raise
                # R-CLI-1's last step: the login shell's PATH (GUI-started hosts often lack the
                # user's PATH). One bounded lookup, only when nothing else was found.
                from codexrt._io._discovery import read_login_shell_path

                env = self.config.env if self.config.env is not None else os.environ
                shell_path = await read_login_shell_path(env=env)
                if not shell_path:
                    raise
                candidates, discovery = self.config._startup_candidates(login_shell_path=lambda: shell_path)
        except CodexError as exc:
            self.last_error = exc
            raise
        # This child runs with this configuration: a replaced one's secrets are let go (issue 35).
        self._redactor.set_secrets(self.config.secret_values())
        attempts: list[dict[str, Any]] = []
        self._transition(RuntimeEvent.START, attempt=1)
        last_exc: CodexError | None = None
        for index, (label, factory) in enumerate(candidates):
            if index > 0:
                self._transition(RuntimeEvent.START, attempt=index + 1)
                # Always visible (issue 33): a warning in the library's log as well as the event.
                log.warning("the Codex CLI %s did not start (%s); trying the next one: %s (%d of %d)",
                            attempts[-1]["candidate"], attempts[-1]["outcome"], self._redactor(label),
                            index + 1, len(candidates))
                self._publish(self._event("runtimeFallback", {
                    "failed": attempts[-1], "next": self._redactor(label), "attempt": index + 1,
                    "startupAttempts": len(candidates)}))
            self.generation += 1
            gen = self.generation
            verb = "connect" if self.config.connect else "spawn"
            try:
                transport = await factory()
            except (OSError, CodexError) as exc:
                # ENOENT, a refused endpoint, a bad token…: this candidate failed before READY.
                text = self._redactor(f"{type(exc).__name__}: {exc}")
                last_exc = ChildExited(None, None, details={"startupFailure": f"{verb} failed",
                                                            "command": self._redactor(label), "error": text})
                attempts.append({"candidate": self._redactor(label), "outcome": f"{verb} failed: {text}",
                                 "code": getattr(exc, "code", None) or type(exc).__name__})
                continue
            except BaseException:
                # Anything else is a bug or a cancellation: leave a consistent state behind.
                self._start_cancelled()
                raise
            self._transition(RuntimeEvent.SPAWNED)
            try:
                conn = await self._nursery.start(self._connection_task, transport, gen)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await transport.aclose()
                self._start_cancelled()
                raise
            self._starting_conn = conn
            login_error: NotLoggedIn | None = None
            try:
                await conn.initialize()
                login_error = await self._login_problem(conn)
            except CodexError as exc:
                last_exc = exc
                # What the CLI said on stderr as it stopped (already redacted by the connection).
                reason = stderr_reason(exc.details.get("stderrTail") or conn.stderr_tail())
                outcome = self._redactor(exc.message) + (f"; it said: {reason}" if reason else "")
                attempts.append({"candidate": self._redactor(label), "outcome": outcome,
                                 "code": exc.code, "exitCode": getattr(exc, "returncode", None),
                                 "signal": getattr(exc, "signal", None), "reason": reason})
                await conn.aclose()
                continue
            except BaseException:
                # Cancelled (the caller, reset() or aclose()): the child must not outlive the
                # start, and the runtime must not stay INITIALIZING.
                await conn.aclose()  # shielded; escalates to a kill and reaps
                self._start_cancelled()
                raise
            finally:
                self._starting_conn = None
            if login_error is not None:
                # Not the CLI's fault: no other candidate would do better. Nothing was sent but the
                # account question; the child goes, and the first operation fails now.
                await conn.aclose()
                self._transition(RuntimeEvent.FAULT, reason="not logged in")
                self.last_error = login_error
                raise login_error
            self.conn = conn
            self.cli_path = label
            self._transition(RuntimeEvent.INITIALIZED, pid=conn.pid)
            return conn
        self._transition(RuntimeEvent.FAULT, reason="startup failed")
        assert last_exc is not None
        if self.config.connect is not None:
            # An attached runtime has one endpoint, not CLI candidates: its own error says why.
            last_exc.details.setdefault("attempts", attempts)
            self.last_error = last_exc
            raise last_exc
        err = self._startup_error(candidates, discovery, attempts, last_exc)
        self.last_error = err
        raise err

    def _startup_error(self, candidates: list[tuple[str, TransportFactory]], discovery: Any,
                       attempts: list[dict[str, Any]], last_exc: CodexError) -> CliUnavailable:
        """R-CLI-6, one candidate or many: each candidate's attempt and result, one actionable
        hint and the ``codexCliUnavailable`` diagnostic; the canonical ``codex app-server exited``
        prefix only when a child really exited. ``details["cause"]`` is the last failure."""
        from codexrt._io._discovery import Attempt, format_unavailable, update_hint

        if discovery is not None:
            tried = [Attempt(cand, a["outcome"], a.get("exitCode"), a.get("signal"), a.get("code"), a.get("reason"))
                     for cand, a in zip(discovery.candidates, attempts)]
            if self.config.codex_bin and tried:
                return self._override_error(discovery, tried, attempts, last_exc)
            message, diag = format_unavailable(discovery, tried)
        else:
            exited = [a for a in attempts if a.get("exitCode") is not None or a.get("signal") is not None]
            head = (child_exited_message(exited[-1].get("exitCode"), exited[-1].get("signal")) if exited
                    else "codex app-server could not be started")
            hint = update_hint()
            lines = [f"{head}: no usable Codex CLI ({len(attempts)} of {len(candidates)} candidates tried)"]
            lines += [f"  - {a['candidate']}: {a['outcome']}" for a in attempts]
            lines.append(f"Hint: {hint}")
            message = "\n".join(lines)
            diag = {"codexCliUnavailable": {"mode": "allCandidatesFailed", "candidates": [], "hint": hint}}
        diag["codexCliUnavailable"]["attempts"] = attempts
        diag["cause"] = last_exc.to_dict()
        return CliUnavailable(self._redactor(message), details=diag)

    async def _login_problem(self, conn: Connection) -> NotLoggedIn | None:
        """Ask the app-server for its account state before the first turn (``account/read``):
        a :class:`NotLoggedIn` when it needs an OpenAI login and has none, so the first operation
        fails within seconds instead of waiting out the server's network retries. Only for
        ``cli_login`` access with a spawned child (managed access brings its own provider, an
        attached server its own auth), and never when the child's environment carries an API key
        variable. An old server without the method, a slow answer or an odd shape: no verdict
        (None) — the turn then reports what it meets."""
        cfg = self.config
        if cfg.access_mode != "cli_login" or cfg.connect is not None or cfg.transports is not None:
            return None
        env = cfg.env if cfg.env is not None else os.environ
        if any(env.get(name) for name in _API_KEY_VARS):
            return None
        try:
            answer = await conn.call("account/read", {}, timeout=min(cfg.rpc_timeout, _ACCOUNT_READ_TIMEOUT))
        except (RpcError, RpcTimeout) as exc:
            log.debug("account/read gave no login verdict: %s", exc.message)
            return None
        if not isinstance(answer, dict) or answer.get("account") is not None or answer.get("requiresOpenaiAuth") is not True:
            return None
        home = env.get("CODEX_HOME") if cfg.codex_home is None else cfg.codex_home
        where = f"CODEX_HOME {home}" if home else "CODEX_HOME (~/.codex)"
        return NotLoggedIn(
            f"the Codex CLI is not logged in ({where} has no login) and its model provider needs one. "
            "Log in with `codex login` (ChatGPT) or `codex login --with-api-key` (an API key on stdin), "
            "or choose managed access (RuntimeConfig(access_mode=\"managed\", ...)) or the bundled loopback "
            "model (codexrt.loopback.open_loopback(), `codexrt run --loopback`)",
            details={"account": None, "requiresOpenaiAuth": True, "codexHome": home},
        )

    def _override_error(self, discovery: Any, tried: list[Any], attempts: list[dict[str, Any]],
                        last_exc: CodexError) -> CliOverrideInvalid:
        """The explicitly chosen CLI (``codex_bin=``, ``--codex-bin``) did not start: the R-CLI-6
        report (canonical prefix, its line with what it did and said) as a
        :class:`CliOverrideInvalid`, with a hint fitting the cause. No other CLI was tried."""
        from codexrt._io._discovery import cause_hint, format_unavailable

        last = tried[-1]
        path = self.config.codex_bin
        said = f" It said why: {last.reason!r}." if last.reason else " It exited without saying why."
        hint = cause_hint(last) if last.reason and "Update the Codex CLI" in (cause_hint(last) or "") else (
            f"The CLI chosen explicitly ({path!r}) did not start as `codex app-server`.{said} Fix it, or choose "
            "another (codex_bin= / --codex-bin), or leave it out to let codexrt search (`codexrt doctor` lists "
            "what it would find): when a CLI is chosen, no other is tried.")
        message, diag = format_unavailable(discovery, tried, hint=hint)
        first, sep, rest = message.partition("\n")
        head = first.split(": no usable Codex CLI", 1)[0]  # the canonical prefix (R-CLI-6) stays
        message = f"{head}: the explicitly chosen CLI {path!r} cannot be used (no other is tried){sep}{rest}"
        diag["codexCliUnavailable"].update(mode="overrideInvalid", source="explicit", path=path, reason=last.outcome,
                                           attempts=attempts)
        diag["cause"] = last_exc.to_dict()
        return CliOverrideInvalid(self._redactor(message), details=diag)

    def _start_cancelled(self) -> None:
        """A start left half-way (cancelled, or a bug): back to STOPPED, nothing running."""
        self._transition(RuntimeEvent.DRAIN, reason="startup cancelled")  # from STARTING or INITIALIZING
        self._transition(RuntimeEvent.STOPPED)

    async def _connection_task(self, transport: Transport, gen: int,
                               task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED) -> None:
        caps: dict[str, Any] = {}
        if self.config.opt_out_notification_methods:
            caps["optOutNotificationMethods"] = list(self.config.opt_out_notification_methods)
        async with open_connection(
            transport,
            sink=functools.partial(self._on_conn_event, gen),  # no Python frame of its own (issue 34)
            supported_server_requests=SUPPORTED_SERVER_REQUESTS,
            client_info=self.config.client_info,
            capabilities=caps,
            rpc_timeout=self.config.rpc_timeout,
            handshake_timeout=self.config.handshake_timeout,
            redactor=self._redactor,
        ) as conn:
            task_status.started(conn)
            await conn.closed.wait()

    async def reset(self, *, reason: str = "reset") -> None:
        """Retire the current child and confirm its exit (R-RT-5). Concurrent resets share one
        retirement; a reset never closes a newer runtime than the one it saw. A start in
        progress is cancelled, and its child retired even when that start completed anyway
        (cancelled past its last checkpoint); a start asked for before the reset that has not
        begun yet — waiting for the start lock, or holding it in the instant before it
        registered — never begins (``CLOSED``, ``startupCancelled``)."""
        conn = self.conn
        starting = self._start_scope
        if conn is None:
            if starting is not None:
                starting.cancel()  # STARTING/INITIALIZING: the child being started is retired too
            # Every start asked for before this reset and not begun yet fails instead of
            # starting a child behind the reset's back (ensure_started checks this count).
            self._starts_cancelled += 1
        async with self._start_lock:
            if starting is not None and conn is None:
                if self.conn is None:
                    if self.state is not RuntimeState.STOPPED:
                        await self._retire(reason)
                elif self._started_in is starting:
                    await self._retire(reason)  # the start we cancelled completed: its child goes too
                return
            if conn is not self.conn:
                return  # someone else already retired it (and maybe started a newer one)
            await self._retire(reason)

    async def _retire(self, reason: str) -> None:
        conn = self.conn
        self._transition(RuntimeEvent.DRAIN, reason=reason)
        if conn is not None:
            status = await conn.aclose()
            self._publish(self._event("runtimeReset", {
                "reason": reason, "exit": attrs.asdict(status) if status else None}))
        self.conn = None
        active = self.active
        if active is not None and not active.terminal and active.generation == self.generation:
            # Its child is gone: the turn can never report a terminal on this connection.
            status = conn.exit_status if conn is not None else None
            active._settle(STATUS_FAILED, ChildExited(
                status.returncode if status else None, status.signal if status else None,
                phase=active.phase.value, details={"reason": reason}))
        for info in self.threads.values():
            info.loaded_generation = None
        self._expire_interactions("runtime reset")
        # Still DRAINING: the caller holds the start lock, and the child's exit while draining
        # is a no-op FAULT (RUNTIME_TABLE).
        self._transition(RuntimeEvent.STOPPED)

    def _fault(self, error: CodexError) -> None:
        """One settle for an unexpected exit (R-RT-4)."""
        self.last_error = error
        self._transition(RuntimeEvent.FAULT, reason=error.message)  # only ever with a child: never STOPPED
        queued, self._queue = self._queue, []
        ops = ([self.active] if self.active is not None else []) + queued
        for op in ops:
            if not op.terminal:
                err = ChildExited(getattr(error, "returncode", None), getattr(error, "signal", None),
                                  phase=op.phase.value, details=error.details)
                op._settle(STATUS_FAILED, err)
        for info in self.threads.values():
            info.loaded_generation = None
        self._expire_interactions("app-server exited")
        self.conn = None


    def launch_fingerprint(self) -> str:
        """R-LC-1: :func:`codexrt._runtime._launch.launch_fingerprint` of :meth:`RuntimeConfig.launch_config`
        — access mode, credential and header hashes, endpoint, provider, ``CODEX_HOME``, the CLI's
        resolved path and version stamp, the ``connect`` endpoint and token source (token hashed),
        inherited credential variables (hashed). Model, effort, sandbox and other per-turn
        settings are not part of it: they travel by RPC."""
        from codexrt._runtime._launch import launch_fingerprint

        return launch_fingerprint(self.config.launch_config())

    def update_launch(self, **changes: Any) -> str:
        """Change launch settings (``access_mode``, ``provider``, ``api_key``, ``codex_bin``,
        ``codex_home``, ``env``, ``app_server_args``, ``connect``, ``token_file``, ``token_env``,
        ``transports``). When the fingerprint changes the child is rebuilt (R-LC-2): at once
        when idle; during an operation right after its terminal, before the next queued
        operation starts. The rebuild resets the child and cold-resumes the root thread of
        this runtime's last operation (``threadResumed {cold: true}``, ``sessionGrantsReset``).
        Returns ``"unchanged"``, ``"immediate"`` or ``"deferred"``. Raises :class:`ConfigError`
        (nothing changed) for an invalid configuration, e.g. a managed provider without id."""
        from codexrt._runtime._launch import launch_fingerprint

        before = self.launch_fingerprint()
        config = attrs.evolve(self.config, **changes)
        after = launch_fingerprint(config.launch_config())  # validates before anything changes
        for value in config.secret_values():
            self._redactor.add_secret(value)
        self.config = config
        if after == before:
            return "unchanged"
        if self.conn is None and self._start_scope is None and not self.busy:
            return "immediate"  # nothing running: the next start uses the new configuration
        return self.request_rebuild(root_thread_id=self._last_root_thread, reason="launch config changed")

    def request_rebuild(self, *, root_thread_id: str | None = None, reason: str = "launch config changed") -> str:
        """Rebuild the child (new launch configuration): at once when idle, else right after
        the active operation's terminal and before the next queued operation. Then a cold
        ``thread/resume`` of ``root_thread_id`` (ahead of anything queued). The FIFO worker
        runs it, so no operation can slip onto the old child in between. Returns
        ``"immediate"`` or ``"deferred"``."""
        async def rebuild() -> None:
            await self.reset(reason=reason)
            if root_thread_id is not None and not self._closing:
                # Cold resume of the root thread, ahead of anything queued meanwhile.
                try:
                    op = self.preconnect(root_thread_id)
                except CodexError as exc:  # QUEUE_FULL: the next send on it resumes it anyway
                    log.info("no cold resume after the rebuild: %s", exc.message)
                    return
                op.discard_events()
                self._queue.remove(op)
                self._queue.insert(0, op)

        deferred = self.active is not None and not self.active.terminal
        self._pending_rebuild = rebuild
        self._queue_event.set()
        return "deferred" if deferred else "immediate"

    async def _idle_reaper(self) -> None:
        """R-RT-6: retire an idle child after ``idle_timeout`` — never while a session is loaded
        (``sessionCount > 0``, see :meth:`release_thread`), busy, or an interaction waits."""
        assert self.config.idle_timeout is not None
        while True:
            await trio.sleep(min(self.config.idle_timeout, 1.0))
            if self.idle_retirable() and trio.current_time() - self._idle_since >= self.config.idle_timeout:
                await self.reset(reason="idle")


    async def aclose(self) -> None:
        """Cancel queued operations, stop the active one within the stop budget, retire the
        child and reap it. Idempotent; shielded."""
        with trio.CancelScope(shield=True):
            self._closing = True
            if self._start_scope is not None and self.conn is None:
                self._start_scope.cancel()  # a start in progress ends now; its child is reaped
            for op in list(self._queue):
                self.abort(op)
            if self.active is not None and not self.active.terminal:
                self.abort(self.active)
                with trio.move_on_after(self.config.stop_budget + 11):
                    await self.active._done.wait()
            async with self._start_lock:
                if self.conn is not None or self.state is not RuntimeState.STOPPED:
                    await self._retire("closed")
            for sub in self._subscribers:
                sub.close()
            # The child is reaped: this runtime's secrets leave the process registry unless
            # another holder still holds them (issue 35).
            self._redactor.release()
