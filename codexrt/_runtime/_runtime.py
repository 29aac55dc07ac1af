"""The runtime: one supervised app-server per channel, its operations and interactions.

Theory of operation
-------------------
``async with open_runtime(config) as rt:`` owns a nursery holding the FIFO worker, the current
generation's connection task, stop watchdogs and interrupt senders — nothing runs outside it.

*Lifecycle* (R-RT-1): the table in ``_sansio/_states.py``. The first operation (or
``ensure_started()``) launches a child: candidates are tried in order, and one that dies
before READY is closed and the next is tried with no RPC dispatched (R-CLI-5,
``runtimeFallback``). Each child is a new ``generation``; the connection's sink is bound to its
generation, so an older child's events, late responses and exit never act on a newer one
(R-RT-2).

*Operations* (R-OP-1): ``send``/``compact``/``review``/``preconnect`` are queued and run one at
a time in submission order by the FIFO worker; control calls (``update_settings``,
``respond_interaction``, ``abort``) act at once. Phases ``queued → notWritten →
writtenUnconfirmed → nativeTurnKnown → terminal`` (R-OP-2), registered before the request is
written. ``turn/started`` or the ``turn/start`` response binds the native turn, whichever
comes first, once (R-OP-3). Only ``turn/completed`` or a confirmed exit is terminal (R-OP-4);
an ``error`` notification is surfaced and waiting goes on. A child thread's terminal never
settles its parent (R-OP-6): routing is by thread id.

*Crash* (R-RT-4): the connection's end event runs one settle — every unsettled operation
fails with ``CHILD_EXITED``, the queue is cleared, threads become unloaded keeping their ids.
The next operation starts a new generation and resumes its thread; ``turn/start`` is never
re-sent by codexrt.

*Stop* (R-OP-5): see :meth:`Runtime.abort`; a 10 s budget from the first cancel request ends
with killing the child, confirming its exit and failing everything once
(``runtimeUnhealthy``).

*The reader never waits*: the connection sink only files events into per-consumer
:class:`~codexrt._runtime._events.EventStream` buffers and sets trio events. Interactions wait for the
host's answer in the host's own task.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import json
import logging
import os
import secrets
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence, Unpack

import attrs
import trio

from codexrt._connection import (
    ClientInfo,
    Connection,
    ConnectionClosed,
    ConnectionEvent,
    DEFAULT_RPC_TIMEOUT,
    open_connection,
)
from codexrt._sansio._errors import (
    ChildExited,
    CliUnavailable,
    ClosedError,
    CodexError,
    ConfigError,
    InteractionError,
    LocalProtocolError,
    OperationCancelled,
    OperationFailed,
    RemoteProtocolError,
    RpcError,
    RpcTimeout,
    ThreadResumeError,
    child_exited_message,
)
from codexrt._runtime._events import DELTA_METHODS, CodexEvent, EventStream
from codexrt._io._context_probe import ContextCapabilityProbe
from codexrt._io._codex_home import resolve_codex_home
from codexrt._sansio._context import (ContextDelivery, ContextFragment, ContextFragments, EditorState, build_context,
                                      prepare_input)
from codexrt._sansio._redact import Redactor, looks_secret_name, secret_env_values
from codexrt._sansio._rpc import LateResponse, ProtocolViolation, UnsupportedServerRequest
from codexrt._sansio._states import (
    OP_TABLE,
    RUNTIME_TABLE,
    Machine,
    OpEvent,
    OpPhase,
    RuntimeEvent,
    RuntimeState,
)
from codexrt._sansio._wire import Notification, ServerRequest, decode_json
from codexrt._runtime._options import RuntimeOptions
from codexrt._io._retry import call_read
from codexrt._sansio._settings import Settings
from codexrt._io._transport import Transport, spawn_process_transport
from codexrt._io._util import unwrap_single_group
from codexrt._runtime._interactions import (
    PRIVACY_ERROR_CODE,
    SUPPORTED_SERVER_REQUESTS,
    Interaction,
    InteractionPolicy,
    InteractionRegistry,
    PlanExecution,
    PrivacyStore,
    default_privacy_dir,
    privacy_record_for,
    safe_negative_reply,
    validate_reply,
)
from codexrt._sansio._plans import EXECUTE_PLAN_MESSAGE, PlanTracker, default_collaboration_mode
from codexrt._sansio._privacy import PrivacyIndex

__all__ = [
    "RuntimeConfig",
    "Runtime",
    "ChildHandle",
    "Operation",
    "OperationResult",
    "Interaction",
    "open_runtime",
    "SUPPORTED_SERVER_REQUESTS",
]

log = logging.getLogger("codexrt.runtime")

TransportFactory = Callable[[], Awaitable[Transport]]


#: Notifications the plan tracker reads (R-INT-5); a set check keeps the hook cheap on deltas.
_PLAN_METHODS = frozenset({"item/started", "item/completed", "item/plan/delta", "turn/plan/updated",
                           "turn/completed"})

_DELTA_IDS = frozenset({"threadId", "turnId", "itemId", "delta"})

STATUS_COMPLETED = "completed"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"
STATUS_CANCELLED = "cancelled"
_NATIVE_TERMINALS = {STATUS_COMPLETED, STATUS_FAILED, STATUS_INTERRUPTED}


def _settings_match(sent: Any, effective: Any) -> bool:
    """True when ``effective`` carries every value of ``sent`` (R-SET-2): objects by the keys
    sent (the server adds fields such as ``sandboxPolicy.writableRoots``); a None sent is
    "the server's choice" and matches anything."""
    if sent is None:
        return True
    if isinstance(sent, dict):
        return isinstance(effective, dict) and all(_settings_match(v, effective.get(k)) for k, v in sent.items())
    return bool(sent == effective)


def _effective_from_thread_result(result: Any) -> dict[str, Any]:
    """The effective settings a ``thread/start`` / ``thread/resume`` result reports, in the
    ``thread/settings/updated`` shape (``sandbox`` → ``sandboxPolicy``, ``reasoningEffort`` →
    ``effort``); only fields the result has."""
    if not isinstance(result, dict):
        return {}
    out: dict[str, Any] = {}
    for src, dst in (("model", "model"), ("approvalPolicy", "approvalPolicy"), ("sandbox", "sandboxPolicy"),
                     ("reasoningEffort", "effort"), ("cwd", "cwd")):
        if src in result and result[src] is not None:
            out[dst] = result[src]
    return out


_STATUS_METHODS = frozenset({"thread/status/changed", "turn/started", "turn/completed"})


@attrs.define
class RuntimeConfig:
    """How to launch and talk to the app-server.

    ``codex_bin`` is an explicit CLI path (else ``CODEX_BIN`` / ``CODEX_PATH`` /
    ``CODEX_CLI_PATH``, then ``PATH`` and the usual install places — see
    ``docs/discovery.md``); every candidate found is a startup fallback (R-CLI-5).
    ``transports`` overrides launching entirely (in-memory peers, sockets): each factory is
    one startup candidate, tried in order. ``access_mode="inactive"`` never spawns (R-LC-3).
    """

    codex_bin: str | None = None
    access_mode: str = attrs.field(default="cli_login", validator=attrs.validators.in_(
        ("cli_login", "managed", "inactive")))
    app_server_args: Sequence[str] = ("app-server",)
    codex_home: str | None = None
    env: dict[str, str] | None = attrs.field(default=None, repr=False)
    cwd: str | None = None
    channel_id: str = "default"
    client_info: ClientInfo = attrs.field(factory=ClientInfo)
    opt_out_notification_methods: Sequence[str] = ()
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT
    handshake_timeout: float = DEFAULT_RPC_TIMEOUT
    stop_budget: float = 10.0
    settings_confirm_timeout: float = DEFAULT_RPC_TIMEOUT
    idle_timeout: float | None = None
    settings: Settings = attrs.field(factory=Settings)
    transports: Sequence[TransportFactory] | None = attrs.field(default=None, repr=False)
    secrets: Sequence[str] = attrs.field(default=(), repr=False)
    # Attach to a running app-server instead of spawning one (R-WIRE-10, docs/transports.md):
    # ``connect`` is ``ws://IP:PORT`` or ``unix:///path``; the bearer token comes from
    # ``token_file`` or the environment variable named ``token_env`` (never from the URL); a
    # non-loopback ``ws://`` host needs ``allow_remote=True`` and a token. Reconnects after a
    # connection loss use ``reconnect_backoff`` (bounded exponential backoff + jitter).
    connect: str | None = None
    token_file: str | None = None
    token_env: str | None = None
    allow_remote: bool = False
    connect_timeout: float = 10.0
    reconnect_backoff: Any = attrs.field(default=None, repr=False)  # codexrt._io._retry.Backoff | None
    # access_mode="managed" (R-LC-3, docs/runtime.md): the provider
    # ``{id, name?, baseUrl, envKey, wireApi?, headers?, queryParams?}`` and its API key. The key
    # reaches the child only as the variable named by envKey; the provider as ``-c`` overrides.
    provider: dict[str, Any] | None = attrs.field(default=None, repr=False)
    api_key: str | None = attrs.field(default=None, repr=False)

    def secret_values(self) -> list[str]:
        """What this runtime masks wherever it occurs (R-WIRE-9, ``docs/security.md``):
        ``secrets``, a managed provider's API key and header values, plus the values of the
        child's environment variables whose names look secret (``*_KEY``, ``*TOKEN*``,
        ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*_PAT``, an ``AUTH`` word). An
        attached runtime's token is added when it is read."""
        env = self.env if self.env is not None else os.environ
        managed = [self.api_key] if self.api_key else []
        if isinstance(self.provider, dict) and isinstance(self.provider.get("headers"), dict):
            managed += [v for v in self.provider["headers"].values() if isinstance(v, str) and v]
        return [*self.secrets, *managed, *secret_env_values(env)]

    def launch_config(self, *, discovery: Any = None) -> Any:
        """The one :class:`~codexrt._runtime._launch.LaunchConfig` this runtime launches with (R-LC-1,
        R-LC-3): access mode, the managed provider and key, ``CODEX_HOME``, the CLI discovery
        would start first (resolved path and version stamp, filesystem only — nothing runs),
        the ``connect`` endpoint and token source, and the inherited credential variables.
        Raises :class:`ConfigError` for an invalid managed provider."""
        from codexrt._runtime._launch import LaunchConfig, cli_version_stamp

        env = dict(self.env if self.env is not None else os.environ)
        kw: dict[str, Any] = {"access": self.access_mode, "codex_home": self.codex_home or env.get("CODEX_HOME")}
        if self.access_mode == "managed":
            p = self.provider if isinstance(self.provider, dict) else {}
            if not p:
                raise ConfigError("managed access needs a provider {id, baseUrl, envKey, ...}",
                                  code="BAD_PROVIDER", details={"field": "provider"})
            unknown = set(p) - {"id", "name", "baseUrl", "envKey", "wireApi", "headers", "queryParams"}
            if unknown:
                raise ConfigError(f"unknown provider fields: {', '.join(sorted(unknown))}", code="BAD_PROVIDER",
                                  details={"fields": sorted(unknown)})
            kw.update(provider=p.get("id"), provider_name=p.get("name"), endpoint=p.get("baseUrl"),
                      headers=p.get("headers") or {}, query_params=p.get("queryParams") or {},
                      credential=self.api_key)
            if p.get("envKey") is not None:
                kw["env_key"] = p["envKey"]
            if p.get("wireApi") is not None:
                kw["wire_api"] = p["wireApi"]
        args = list(self.app_server_args)
        kw["extra_args"] = tuple(args[1:] if args[:1] == ["app-server"] else args)
        if self.connect is not None:
            kw["connect"] = self.connect
            kw["token_source"] = (f"file:{self.token_file}" if self.token_file is not None
                                  else f"env:{self.token_env}" if self.token_env is not None else None)
            token: str | None = None
            if self.token_file is not None:
                try:
                    with open(self.token_file, encoding="utf-8") as fh:
                        token = fh.read().strip()
                except OSError:
                    token = None
            elif self.token_env is not None:
                token = env.get(self.token_env)
            kw["token"] = token
        elif self.transports is not None:
            kw["cli_source"] = "transports:" + ",".join(str(id(t)) for t in self.transports)
        else:
            from codexrt._io._discovery import discover_cli

            kw["cli_path"] = self.codex_bin
            try:
                result = discovery if discovery is not None else discover_cli(explicit=self.codex_bin, env=env)
            except CodexError:
                result = None
            first = result.first if result is not None else None
            if first is not None:
                kw["cli_source"] = str(first.real_path)
                kw["cli_version"] = cli_version_stamp(first.real_path)
        kw["env_credentials"] = {k: v for k, v in env.items() if isinstance(v, str) and looks_secret_name(k)}
        return LaunchConfig(**kw)

    def candidate_factories(self) -> list[tuple[str, TransportFactory]]:
        """Startup candidates in order (R-CLI-1, R-CLI-5): the given transports, else every
        CLI that discovery finds on the filesystem (no process is spawned to find them).
        Raises :class:`CliUnavailable` when there is none or an explicit override is stale,
        and :class:`ConfigError` (``ACCESS_INACTIVE``) in inactive mode, which never spawns."""
        return self._startup_candidates()[0]

    def _startup_candidates(self, *, login_shell_path: Callable[[], str | None] | None = None,
                            ) -> tuple[list[tuple[str, TransportFactory]], Any]:
        """:meth:`candidate_factories` and the discovery result behind them (None for given
        transports or ``connect``), for the startup diagnostic (R-CLI-6). ``login_shell_path``
        is discovery's last step (R-CLI-1), used only when nothing else is found."""
        if self.access_mode == "inactive":
            raise ConfigError("access mode is inactive: codexrt starts no app-server",
                              code="ACCESS_INACTIVE")
        if self.connect is not None:
            if self.transports is not None:
                raise ConfigError("give either transports or connect, not both", code="BAD_ENDPOINT")
            return [self._attached_candidate()], None
        if self.transports is not None:
            return [(f"transport#{i}", f) for i, f in enumerate(self.transports)], None
        from codexrt._io._discovery import discover_cli, spawn_command, unavailable_error
        from codexrt._runtime._launch import prepare_launch_env, provider_overrides

        base_env = dict(self.env if self.env is not None else os.environ)
        result = discover_cli(explicit=self.codex_bin, env=base_env, login_shell_path=login_shell_path)
        if not result.candidates:
            raise unavailable_error(result)
        launch = self.launch_config(discovery=result)
        # The managed provider as -c overrides right after the subcommand (no secret in them).
        args = list(self.app_server_args)
        args[1:1] = provider_overrides(launch)
        env_once: list[dict[str, str]] = []

        async def child_env() -> dict[str, str]:
            # One environment per start, prepared before the first child is created: managed
            # puts the key under envKey; cli_login adds the env_key variables found in the
            # effective CODEX_HOME/config.toml that are not inherited, from the login shell.
            if not env_once:
                env_once.append(await prepare_launch_env(launch, base_env))
            return env_once[0]

        def make(command: list[str] | str) -> TransportFactory:
            async def factory() -> Transport:
                env = await child_env()
                # R-RT-2: a preparation that finished after a reset/release cancelled this start
                # (a lookup that ignored the cancellation) never starts a child.
                await trio.lowlevel.checkpoint_if_cancelled()
                return await spawn_process_transport(command, env=env, cwd=self.cwd)

            return factory

        out = []
        for cand in result.candidates:
            # Windows .cmd/.bat shims: one command line quoted for cmd.exe (R-CLI-8).
            out.append((str(cand.path), make(spawn_command(cand, args))))
        return out, result

    def _attached_candidate(self) -> tuple[str, TransportFactory]:
        """The single candidate of an attached runtime. The endpoint, the token source and the
        remote policy are checked here, before anything connects (``ConfigError``); the token is
        re-read at each (re)connect and never appears in the label, events or errors."""
        from codexrt._io._transport_ws import (
            DEFAULT_RECONNECT_BACKOFF, Endpoint, check_endpoint_policy, endpoint_factory, read_token)

        assert self.connect is not None
        endpoint = Endpoint.parse(self.connect)
        env = dict(self.env if self.env is not None else os.environ)

        def token_source() -> Any:
            return read_token(token_file=self.token_file, token_env=self.token_env, env=env)

        check_endpoint_policy(endpoint, has_token=token_source() is not None, allow_remote=self.allow_remote)
        return endpoint.url, endpoint_factory(endpoint, token_source=token_source,
                                              backoff=self.reconnect_backoff or DEFAULT_RECONNECT_BACKOFF,
                                              timeout=self.connect_timeout)


@attrs.frozen
class OperationResult:
    """The terminal of an operation."""

    status: str  # completed | failed | interrupted | cancelled
    client_operation_id: str
    thread_id: str | None
    turn_id: str | None
    final_text: str | None = None
    error: CodexError | None = None

    @property
    def reason(self) -> str | None:
        """Why the operation did not complete — the error's message, hint included — or None."""
        return self.error.message if self.error is not None else None

    def __str__(self) -> str:
        """One line for people: the status, then the answer or why there is none
        (``print(result)`` never shows a bare ``failed``)."""
        if self.error is not None:
            return f"{self.status}: {self.error.message}"
        if self.final_text:
            return f"{self.status}: {self.final_text}"
        return self.status

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "clientOperationId": self.client_operation_id,
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "finalText": self.final_text,
        }
        if self.error is not None:
            out["error"] = self.error.to_dict()
        return out


class Operation:
    """A long operation (send/compact/review/preconnect). Iterate its events with
    ``async for ev in op.events()``; ``await op.wait()`` returns its :class:`OperationResult`.

    Event buffering (explicit policy): the operation's own stream keeps every event of the
    operation from ``operationQueued`` to ``operationDone`` until it is read — reading late
    (e.g. after ``wait()``) still yields all of them, text coalesced but never lost
    (``codexrt._runtime._events``). The buffer lives as long as the operation object; the runtime keeps
    a terminal operation only in its bounded recent table (:attr:`Runtime.MAX_RECENT_OPS`), so
    an operation nobody holds is freed with its buffer. A caller that will never read the
    stream (e.g. it follows ``rt.subscribe()`` instead, as ``codexrt serve`` does) calls
    :meth:`discard_events` right away: nothing is buffered for it from then on."""

    def __init__(self, runtime: "Runtime", kind: str, op_id: str, *, thread_id: str | None,
                 client_message_id: str | None, payload: dict[str, Any]) -> None:
        self.runtime = runtime
        self.kind = kind
        self.id = op_id
        self.thread_id = thread_id
        self.client_message_id = client_message_id
        self.payload = payload
        self.machine: Machine[OpPhase, OpEvent] = Machine("operation", OP_TABLE, OpPhase.QUEUED)
        self.turn_id: str | None = None
        self.generation: int | None = None
        self.settings: Settings | None = None
        self.cancel_requested = False
        self.cancel_requested_at: float | None = None
        self.result: OperationResult | None = None
        self.stream = EventStream()
        self._events_discarded = False
        self._done = trio.Event()
        self._final_text_parts: dict[str, str] = {}
        self._final_text: str | None = None
        self.errors: list[dict[str, Any]] = []
        self._turn_requested = False
        self._probe_scope: trio.CancelScope | None = None

    def __repr__(self) -> str:
        return f"<Operation {self.id} {self.kind} {self.phase.value} thread={self.thread_id} turn={self.turn_id}>"

    @property
    def phase(self) -> OpPhase:
        return self.machine.state

    @property
    def terminal(self) -> bool:
        return self.machine.state is OpPhase.TERMINAL

    def events(self) -> EventStream:
        """The operation's event stream (see the class doc for its buffering). Raises
        :class:`ClosedError` after :meth:`discard_events`."""
        if self._events_discarded:
            raise ClosedError("this operation's events were discarded (discard_events()); "
                              "follow rt.subscribe() instead")
        return self.stream

    def discard_events(self) -> None:
        """Stop buffering this operation's events: what is buffered is dropped and later
        events are not kept (they still reach ``rt.subscribe()`` subscribers). For callers
        that never read :meth:`events`; ``wait()`` and the result are unaffected. A task
        already iterating the stream gets what was buffered, then its iteration ends."""
        self._events_discarded = True
        old, self.stream = self.stream, _DiscardStream()
        old.close()  # a reader already iterating ends after what was buffered, instead of hanging

    async def wait(self) -> OperationResult:
        """Wait for the terminal. No bound of its own: a turn may run for hours; ``abort``
        bounds it (R-OP-5) and a child exit settles it (R-RT-4)."""
        await self._done.wait()
        assert self.result is not None
        return self.result

    async def abort(self) -> str:
        return self.runtime.abort(self)

    # -- used by the runtime (sync: may run on the reader) -------------------------------

    def _fire(self, event: OpEvent) -> None:
        if self.machine.can(event):
            self.machine.fire(event)

    def _bind_turn(self, turn_id: str) -> bool:
        """Bind the native turn once (R-OP-3). False if another turn is already bound."""
        if self.turn_id is None:
            self.turn_id = turn_id
            self._fire(OpEvent.TURN_BOUND)
            return True
        return self.turn_id == turn_id

    def _note_item(self, item: dict[str, Any]) -> None:
        if item.get("type") == "agentMessage" and isinstance(item.get("text"), str):
            self._final_text = item["text"]

    def _settle(self, status: str, error: CodexError | None = None) -> bool:
        """Terminal, exactly once (R-OP-4). Returns False for a duplicate."""
        if self.terminal:
            return False
        self.machine.fire(OpEvent.SETTLE)
        self.result = OperationResult(status, self.id, self.thread_id, self.turn_id, self._final_text, error)
        payload: dict[str, Any] = {"kind": self.kind, **self.result.to_wire()}
        ev = self.runtime._event("operationDone", payload, op=self)
        self.stream.put(ev)
        self.stream.close()
        self.runtime._publish(ev)
        self.runtime._forget_settled(self)
        self._done.set()
        return True


class _DiscardStream(EventStream):
    """The stream of an operation whose events were discarded: keeps nothing, always closed."""

    def __init__(self) -> None:
        super().__init__(max_droppable=0)
        super().close()

    def put(self, ev: CodexEvent) -> None:
        pass

    def put_text(self, key: tuple[Any, ...], text: str, count: int = 1) -> None:
        pass



@attrs.define
class _ThreadInfo:
    thread_id: str
    loaded_generation: int | None = None
    root: bool = True
    effective: dict[str, Any] = attrs.field(factory=dict)
    settings_event: trio.Event = attrs.field(factory=trio.Event)
    settings_seq: int = 0  # thread/settings/updated notifications seen (R-SET-2 gate)
    effective_generation: int | None = None  # the child generation that confirmed ``effective``
    # what the last thread/start or thread/resume result reported as in effect (gate only)
    started_effective: dict[str, Any] = attrs.field(factory=dict)
    # Sub-agent relations (R-H-8): set once the parentThreadId ancestry was verified.
    parent_id: str | None = None
    root_id: str | None = None
    relation_pending: bool = False
    # a root's relation set: verified descendants -> depth (1 = direct child)
    children: dict[str, int] = attrs.field(factory=dict)
    # native status (``thread/status/changed`` type) and running turn; None = unknown
    status: str | None = None
    active_turn: str | None = None
    status_event: trio.Event = attrs.field(factory=trio.Event)


@attrs.frozen(eq=False)
class ChildHandle:
    """One child (one generation) of a :class:`Runtime`, as its public port hands it out
    (:meth:`Runtime.start_child`, :meth:`Runtime.current_child`): layers above the runtime call
    the child through this and never hold ``Runtime.conn``. A handle never starts, restarts
    or resumes anything; calls on a retired child fail like calls on its closed connection."""

    connection: Connection
    generation: int
    _runtime: "Runtime"

    def is_current(self) -> bool:
        """True while the runtime still holds this child: same generation, same connection
        (R-RT-2). Its connection may already be ending; a call then fails with ``ClosedError``."""
        return self._runtime.generation == self.generation and self._runtime.conn is self.connection

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """One request on this child, never retried (for requests that change state)."""
        return await self.connection.call(method, params, timeout=timeout)

    async def call_read(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """A read on this child: retried on overload only for the methods of
        :data:`~codexrt._io._retry.READ_ONLY_RETRY_TABLE` (:func:`~codexrt._io._retry.call_read`)."""
        return await call_read(self.connection, method, params, timeout=timeout)


class Runtime:
    """Create with :func:`open_runtime`."""

    def __init__(self, config: RuntimeConfig, nursery: trio.Nursery) -> None:
        self.config = config
        self._nursery = nursery
        self.machine: Machine[RuntimeState, RuntimeEvent] = Machine("runtime", RUNTIME_TABLE, RuntimeState.STOPPED)
        self.generation = 0
        self.session_epoch = secrets.token_hex(4)
        self.conn: Connection | None = None
        self._conn_scope: trio.CancelScope | None = None
        self._start_lock = trio.Lock()
        # While a child is being started: the scope of that start (reset()/aclose() cancel it)
        # and its connection once spawned (a stop watchdog kills it, R-OP-5).
        self._start_scope: trio.CancelScope | None = None
        self._starting_conn: Connection | None = None
        self._starts_cancelled = 0  # bumped when reset() cancels a start: its waiters fail too
        self._queue: list[Operation] = []
        self._queue_event = trio.Event()
        self.active: Operation | None = None
        # Operations by id: every unsettled one (bounded by what the caller queues), plus the
        # most recent settled ones (MAX_RECENT_OPS) so a late abort/lookup by id still finds them.
        self._ops: dict[str, Operation] = {}
        self._recent_ops: collections.OrderedDict[str, Operation] = collections.OrderedDict()
        self._op_counter = itertools.count(1)
        self.threads: dict[str, _ThreadInfo] = {}
        self._registry = InteractionRegistry()
        self.interactions: dict[str, Interaction] = self._registry.by_key  # key → interaction (R-INT-1)
        self._interaction_policy: InteractionPolicy | None = None
        self._privacy_store: PrivacyStore | None = None
        self.plans = PlanTracker()  # R-INT-5
        self.plan_executions: dict[str, PlanExecution] = {}
        self._plan_inflight: PlanExecution | None = None
        self._subscribers: list[EventStream] = []
        self.desired = config.settings
        self.settings_revision = 0
        self._closing = False
        self._state_event = trio.Event()
        self._redactor = Redactor(config.secret_values())
        self._overflow_refused = 0  # server requests refused in the current overflow episode
        self.cli_path: str | None = None
        self.last_error: CodexError | None = None
        self._idle_since: float = trio.current_time()
        # Turns already settled: a late or duplicate event for one never binds a newer op (R-OP-8).
        self._finished_turns: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._pending_rebuild: Callable[[], Awaitable[None]] | None = None
        self._last_root_thread: str | None = None  # the root thread of the last operation (R-LC-2)
        # R-WIRE-4: requests of an operation whose wait ran out, by (generation, request id), so a
        # late response names its operation (bounded: oldest forgotten past MAX_LATE_OWNERS). Ids,
        # not objects: the table never keeps a settled operation alive.
        self._late_owners: collections.OrderedDict[tuple[int, Any], str] = collections.OrderedDict()
        self.probe: Any = ContextCapabilityProbe()  # R-CTX-2: one cached answer per CLI and child generation

    def __repr__(self) -> str:
        return f"<Runtime {self.config.channel_id} {self.state.value} gen={self.generation} queued={len(self._queue)}>"

    # -- state ---------------------------------------------------------------------------

    @property
    def state(self) -> RuntimeState:
        return self.machine.state

    @property
    def busy(self) -> bool:
        return (self.active is not None and not self.active.terminal) or bool(self._queue)

    def _transition(self, event: RuntimeEvent, **info: Any) -> None:
        before = self.machine.state
        after = self.machine.fire(event)
        if before is not after or event is RuntimeEvent.START:
            self._publish(self._event("runtimeStateChanged", {"from": before.value, "to": after.value, **info}))
        self._state_event.set()
        self._state_event = trio.Event()

    async def wait_state(self, *states: RuntimeState) -> RuntimeState:
        """Wait until the runtime is in one of ``states``. Unbounded: callers bound it."""
        while self.state not in states:
            await self._state_event.wait()
        return self.state

    def runtime_snapshot(self) -> dict[str, Any]:
        """State for heartbeat/status (R-RT-6)."""
        return {
            "channelId": self.config.channel_id,
            "state": self.state.value,
            "runtimeGeneration": self.generation,
            "pid": self.conn.pid if self.conn is not None and not self.conn.closed.is_set() else None,
            "busy": self.busy,
            "sessionCount": sum(1 for t in self.threads.values() if t.loaded_generation == self.generation),
            "queuedOperations": len(self._queue),
            "activeOperation": self.active.id if self.active else None,
            "pendingInteractions": sum(1 for i in self.interactions.values() if i.state == "pending"),
            "cliPath": self.cli_path,
            "settingsRevision": self.settings_revision,
        }

    # -- the public port (what the features, serve, the facades and the CLI use) ----------

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

    def publish(self, kind: str, payload: dict[str, Any] | None = None, *, thread_id: str | None = None,
                turn_id: str | None = None, item_id: str | None = None) -> None:
        """Publish one event to every subscriber, stamped like the runtime's own (generation,
        channel, root thread; R-D-2). Never blocks: each subscriber buffers its own copy."""
        self._publish(self._event(kind, payload, thread_id=thread_id, turn_id=turn_id, item_id=item_id))

    def idle_retirable(self) -> bool:
        """READY, nothing queued or running, no session loaded in this generation and no
        interaction pending: the idle reaper may retire the child (R-RT-6). The caller adds
        its own idle time (the runtime's reaper, or serve's per-channel one)."""
        return (self.state is RuntimeState.READY and not self.busy
                and self.runtime_snapshot()["sessionCount"] == 0 and not self.pending_interactions())

    async def unload_thread(self, thread_id: str) -> str | None:
        """Mark ``thread_id`` unloaded (its id is kept: the next operation on it resumes it) and,
        when it is loaded on the current child, tell the server (``thread/unsubscribe``).
        Returns the server's ``status`` (None when nothing was sent); a failed unsubscribe
        raises its :class:`CodexError` after the thread is marked unloaded. Does not stop
        its operations or sub-agents (:meth:`release_thread` does)."""
        info = self.threads.get(thread_id)
        if info is None:
            return None
        loaded = info.loaded_generation == self.generation
        info.loaded_generation = None
        conn = self.conn
        if not loaded or conn is None:
            return None
        res = await conn.call("thread/unsubscribe", {"threadId": thread_id})
        return (res or {}).get("status")

    # -- events --------------------------------------------------------------------------

    def _event(self, kind: str, payload: dict[str, Any] | None = None, *, op: Operation | None = None,
               thread_id: str | None = None, turn_id: str | None = None, item_id: str | None = None) -> CodexEvent:
        tid = thread_id if thread_id is not None else (op.thread_id if op else None)
        root = tid
        info = self.threads.get(tid) if tid else None
        if info is not None and not info.root:
            root = info.root_id  # a child: its verified root, None until verified (R-H-8)
        return CodexEvent(
            kind,
            payload or {},
            runtime_generation=self.generation,
            channel_id=self.config.channel_id,
            client_operation_id=op.id if op else None,
            root_thread_id=root,
            thread_id=tid,
            turn_id=turn_id if turn_id is not None else (op.turn_id if op else None),
            item_id=item_id,
        )

    def _publish(self, ev: CodexEvent) -> None:
        for sub in self._subscribers:
            sub.put(ev)

    @contextlib.contextmanager
    def subscribe(self, *, max_droppable: int = 1000) -> Any:
        """``with rt.subscribe() as events: async for ev in events: …`` — every event of this
        runtime, buffered per subscriber (lossless for text, see ``codexrt._runtime._events``)."""
        stream = EventStream(max_droppable=max_droppable)
        self._subscribers.append(stream)
        try:
            yield stream
        finally:
            stream.close()
            self._subscribers.remove(stream)

    # -- lifecycle -----------------------------------------------------------------------

    async def ensure_started(self) -> Connection:
        """Start the app-server if needed and wait for READY (R-RT-3). Concurrent callers
        share one start. Raises the startup error when every candidate failed (R-CLI-5)."""
        if self._closing:
            raise ClosedError("runtime is closed")
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
                    return await self._start()
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
        attempts: list[dict[str, Any]] = []
        self._transition(RuntimeEvent.START, attempt=1)
        last_exc: CodexError | None = None
        for index, (label, factory) in enumerate(candidates):
            if index > 0:
                self._transition(RuntimeEvent.START, attempt=index + 1)
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
            try:
                await conn.initialize()
            except CodexError as exc:
                last_exc = exc
                attempts.append({"candidate": self._redactor(label), "outcome": self._redactor(exc.message),
                                 "code": exc.code, "exitCode": getattr(exc, "returncode", None),
                                 "signal": getattr(exc, "signal", None)})
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
            tried = [Attempt(cand, a["outcome"], a.get("exitCode"), a.get("signal"), a.get("code"))
                     for cand, a in zip(discovery.candidates, attempts)]
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

    def _start_cancelled(self) -> None:
        """A start left half-way (cancelled, or a bug): back to STOPPED, nothing running."""
        if self.machine.can(RuntimeEvent.DRAIN):
            self._transition(RuntimeEvent.DRAIN, reason="startup cancelled")
        if self.machine.state is RuntimeState.DRAINING:
            self._transition(RuntimeEvent.STOPPED)

    async def _connection_task(self, transport: Transport, gen: int,
                               task_status: trio.TaskStatus[Connection] = trio.TASK_STATUS_IGNORED) -> None:
        caps: dict[str, Any] = {}
        if self.config.opt_out_notification_methods:
            caps["optOutNotificationMethods"] = list(self.config.opt_out_notification_methods)
        async with open_connection(
            transport,
            sink=lambda ev: self._on_conn_event(gen, ev),
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
        retirement; a reset never closes a newer runtime than the one it saw."""
        conn = self.conn
        starting = self._start_scope
        if conn is None and starting is not None:
            starting.cancel()  # STARTING/INITIALIZING: the child being started is retired too
            self._starts_cancelled += 1
        async with self._start_lock:
            if starting is not None and conn is None:
                if self.conn is None and self.state is not RuntimeState.STOPPED:
                    await self._retire(reason)
                return
            if conn is not self.conn:
                return  # someone else already retired it (and maybe started a newer one)
            await self._retire(reason)

    async def _retire(self, reason: str) -> None:
        conn = self.conn
        if self.machine.can(RuntimeEvent.DRAIN):
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
        if self.machine.state is RuntimeState.DRAINING:
            self._transition(RuntimeEvent.STOPPED)

    # -- connection events (run on the reader: sync, never block) ------------------------

    def _on_conn_event(self, gen: int, ev: ConnectionEvent) -> None:
        if gen != self.generation:
            return  # an older generation never acts on a newer one (R-RT-2)
        if isinstance(ev, Notification):
            self._on_notification(ev)
        elif isinstance(ev, ServerRequest):
            self._on_server_request(ev, gen)
        elif isinstance(ev, LateResponse):
            self._on_late_response(gen, ev)
        elif isinstance(ev, ProtocolViolation):
            self._publish(self._event("protocolError", {"reason": self._redactor(ev.reason)}))
        elif isinstance(ev, UnsupportedServerRequest):
            self._publish(self._event("unsupportedServerRequest", {"method": ev.method, "requestId": ev.id}))
        elif isinstance(ev, ConnectionClosed):
            if ev.error is not None and self.conn is not None and self.state is not RuntimeState.DRAINING:
                if not isinstance(ev.error, ChildExited):
                    # not an exit: the connection gave up on a live child (its reader failed)
                    self._publish(self._event("runtimeUnhealthy", {"reason": ev.error.message,
                                                                   "code": ev.error.code}))
                self._fault(ev.error)

    MAX_LATE_OWNERS = 256

    def _note_late_owner(self, op: Operation, exc: RpcTimeout) -> None:
        """Remember which operation a timed-out, written request belongs to (R-WIRE-4)."""
        rid = (exc.details or {}).get("requestId")
        if rid is None or op.generation is None:
            return
        self._late_owners[(op.generation, rid)] = op.id
        while len(self._late_owners) > self.MAX_LATE_OWNERS:
            self._late_owners.popitem(last=False)

    def _on_late_response(self, gen: int, ev: LateResponse) -> None:
        """R-WIRE-4: a response after its budget, named by its operation (``clientOperationId``),
        method, request id and the phase at timeout. A late ``turn/start`` result binds its turn
        to the operation when nothing else did (``turn/started`` did not come); never a second turn."""
        op_id = self._late_owners.pop((gen, ev.id), None)
        op = self.operation(op_id) if op_id is not None else None
        payload: dict[str, Any] = {"method": ev.method, "requestId": ev.id, "phase": ev.phase.value,
                                   "ok": ev.error is None}
        late = self._event("lateResponse", payload, op=op)
        if op is None and op_id is not None:  # settled and forgotten: still name it
            late = attrs.evolve(late, client_operation_id=op_id)
        self._publish(late)
        if op is None or ev.error is not None or ev.method != "turn/start" or op.terminal:
            return
        try:
            result = decode_json(ev.result_raw) if ev.result_raw is not None else None
        except Exception:  # a malformed late result binds nothing
            return
        turn = (result or {}).get("turn") if isinstance(result, dict) else None
        tid = turn.get("id") if isinstance(turn, dict) else None
        if isinstance(tid, str) and op.turn_id is None and tid not in self._finished_turns and op._bind_turn(tid):
            self._deliver(self._event("operationAcked", {"turn": turn, "late": True}, op=op), op)
            if op.cancel_requested:
                self._nursery.start_soon(self._send_interrupt, op)

    def _fault(self, error: CodexError) -> None:
        """One settle for an unexpected exit (R-RT-4)."""
        self.last_error = error
        if self.machine.can(RuntimeEvent.FAULT):
            self._transition(RuntimeEvent.FAULT, reason=error.message)
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

    MAX_THREADS = 1024

    def _thread_info(self, thread_id: str) -> _ThreadInfo:
        """The bookkeeping of ``thread_id``, created on first sight. The table is bounded: past
        ``MAX_THREADS`` the oldest entries not used by a queued or active operation are
        forgotten (unloaded ones first). Forgetting is safe: a later send to such a thread
        simply resumes it, which the server accepts for a loaded thread too."""
        info = self.threads.get(thread_id)
        if info is not None:
            return info
        info = self.threads[thread_id] = _ThreadInfo(thread_id)
        if len(self.threads) > self.MAX_THREADS:
            busy = {op.thread_id for op in [self.active, *self._queue] if op is not None}
            busy.add(thread_id)
            candidates = [t for t in self.threads.values() if t.thread_id not in busy]
            candidates.sort(key=lambda t: t.loaded_generation == self.generation)  # unloaded first, stable
            for victim in candidates[: len(self.threads) - self.MAX_THREADS]:
                del self.threads[victim.thread_id]
        return info

    def _op_for(self, thread_id: str | None, turn_id: str | None) -> Operation | None:
        """The operation a thread/turn event belongs to, if any. Routing is by thread id, so a
        child thread never reaches its parent's operation (R-OP-6); an operation whose turn is
        not yet known only takes events after its ``turn/start`` was queued, and never events
        of a turn that already ended (R-OP-3, R-OP-8)."""
        op = self.active
        if op is None or op.terminal or thread_id is None or op.thread_id != thread_id:
            return None
        if turn_id is not None:
            if op.turn_id is not None:
                return op if op.turn_id == turn_id else None
            if not op._turn_requested or turn_id in self._finished_turns:
                return None
        return op

    def _remember_finished(self, turn_id: str) -> None:
        self._finished_turns[turn_id] = None
        while len(self._finished_turns) > 1024:
            self._finished_turns.popitem(last=False)

    def _on_notification(self, n: Notification) -> None:
        self._track_plans(n)  # R-INT-5: plan items / TODOs (a set check; never blocks)
        if n.method in DELTA_METHODS:
            self._on_delta(n)  # the hot path of a flood; no other branch takes these methods
            return
        params = n.params if isinstance(n.params, dict) else {}
        method = n.method
        thread_id = params.get("threadId")
        turn = params.get("turn") if isinstance(params.get("turn"), dict) else None
        turn_id = params.get("turnId") or (turn or {}).get("id")
        item = params.get("item") if isinstance(params.get("item"), dict) else None
        item_id = params.get("itemId") or (item or {}).get("id")

        if thread_id and method in _STATUS_METHODS:
            self._track_status(method, thread_id, params, turn_id)
        if method == "item/completed" and item is not None and item.get("type") == "collabAgentToolCall":
            for child in item.get("receiverThreadIds") or ():
                if isinstance(child, str) and child:
                    self._want_relation(child)  # a spawned sub-agent (R-H-8)

        if method == "thread/started":
            thread = params.get("thread") or {}
            tid = thread.get("id")
            if tid:
                info = self._thread_info(tid)
                info.root = not thread.get("parentThreadId")
                info.loaded_generation = self.generation
            self._publish(self._event("threadStarted", {"thread": thread}, thread_id=tid))
            return
        if method == "thread/settings/updated" and thread_id:
            info = self._thread_info(thread_id)
            info.effective = params.get("threadSettings") or {}
            info.effective_generation = self.generation
            info.settings_seq += 1
            info.settings_event.set()
            info.settings_event = trio.Event()
            self._publish(self._event("thread/settings/updated", params, thread_id=thread_id))
            return
        if method == "serverRequest/resolved":
            self._on_server_request_resolved(params)
            return

        op = self._op_for(thread_id, turn_id)
        if method == "turn/started" and turn_id:
            if op is not None and op._bind_turn(turn_id):
                self._deliver(self._event("turnStarted", {"turn": turn}, op=op), op)
                if op.cancel_requested:
                    self._nursery.start_soon(self._send_interrupt, op)
            else:
                self._publish(self._event("turnStarted", {"turn": turn}, thread_id=thread_id, turn_id=turn_id))
            return
        if method == "turn/completed" and turn_id:
            status = (turn or {}).get("status")
            self._remember_finished(turn_id)
            if op is not None and op._bind_turn(turn_id) and status in _NATIVE_TERMINALS:
                error = None
                if status == STATUS_FAILED:
                    terr = (turn or {}).get("error") or {}
                    error = OperationFailed(terr.get("message") or "turn failed", details={"turnError": terr})
                op._settle(status, error)
            else:
                # No operation owns it: a sub-agent, another client, or a duplicate terminal.
                self._publish(self._event("orphanTurnTerminal", {"status": status, "turn": turn},
                                          thread_id=thread_id, turn_id=turn_id))
            return
        if method in ("item/started", "item/completed") and item is not None:
            kind = "itemStarted" if method == "item/started" else "itemCompleted"
            if op is not None and method == "item/completed":
                op._note_item(item)
            self._deliver(self._event(kind, {"item": item}, op=op, thread_id=thread_id, turn_id=turn_id,
                                      item_id=item_id), op)
            return
        if method == "error":
            if op is not None:
                op.errors.append(params.get("error") or {})
            self._deliver(self._event("error", params, op=op, thread_id=thread_id, turn_id=turn_id), op)
            return
        self._deliver(self._event("nativeNotification", {"method": method, "params": params}, op=op,
                                  thread_id=thread_id, turn_id=turn_id, item_id=item_id), op)

    def _on_delta(self, n: Notification) -> None:
        """Streaming text (``itemUpdated``): the same identities :meth:`_event` would give, but
        filed as a text run in each consumer's buffer — no event object per native delta; the
        consumer gets one merged ``itemUpdated`` per run it takes (``codexrt._runtime._events``)."""
        d = n.delta
        extra: tuple[tuple[str, Any], ...] | None = None
        if d is not None:  # the exact shape, typed (``_wire.DeltaParams``)
            thread_id: Any = d.threadId
            turn_id: Any = d.turnId or None
            item_id: Any = d.itemId or None
            delta: Any = d.delta
        else:
            params = n.params
            if not isinstance(params, dict):
                params = {}
            get = params.get
            thread_id = get("threadId")
            turn_id = get("turnId")
            item_id = get("itemId")
            if not turn_id:
                turn = get("turn")
                turn_id = turn.get("id") if isinstance(turn, dict) else None
            if not item_id:
                item = get("item")
                item_id = item.get("id") if isinstance(item, dict) else None
            extra = tuple((k, v) for k, v in params.items() if k not in _DELTA_IDS) or None
            delta = get("delta", "")
            if type(delta) is not str:
                delta = str(delta)
        op = self.active
        if op is None or turn_id is None or op.turn_id != turn_id or op.thread_id != thread_id or op.terminal:
            op = self._op_for(thread_id, turn_id)  # the fast test above is _op_for's common hit
        root = thread_id
        if thread_id:
            info = self.threads.get(thread_id)
            if info is not None and not info.root:
                root = None
        if turn_id is None and op is not None:
            turn_id = op.turn_id
        # delta_key(), inlined: this runs once per native delta
        key = (self.generation, self.config.channel_id, op.id if op is not None else None, root,
               thread_id, turn_id, item_id, n.method, extra)
        count = n.delta_count  # > 1: the reader merged back-to-back lines (one read)
        if op is not None:
            op.stream.put_text(key, delta, count)
        for sub in self._subscribers:
            sub.put_text(key, delta, count)

    def _deliver(self, ev: CodexEvent, op: Operation | None) -> None:
        if op is not None:
            op.stream.put(ev)
        self._publish(ev)

    # -- interactions (R-INT-1 … R-INT-4, R-PRIV-1; the registry is codexrt._runtime._interactions) --

    def _on_server_request(self, req: ServerRequest, gen: int) -> None:
        """On the reader: register, publish, and start the deadline watcher and the policy (if
        any) as tasks of the runtime nursery — nothing here waits. Past the pending cap
        (``InteractionRegistry.MAX_PENDING``) the request is refused at once instead."""
        if self._registry.pending_count() >= self._registry.MAX_PENDING:
            self._refuse_overflow(req)
            return
        self._overflow_refused = 0
        try:
            inter = Interaction(self, req, gen, self._registry.next_sequence(),
                                self._registry.deadline_for(req.method, req.params))
        except Exception as exc:  # params no interaction can be made of: refuse, never leave it hanging
            log.warning("server request %s could not become an interaction: %s", req.method, type(exc).__name__)
            self._answer_nowait(req, None, error=(-32603, "codexrt could not handle this request"))
            return
        self._registry.add(inter)
        op = self._op_for(inter.thread_id, inter.turn_id)
        ev = self._event("interactionRequested", inter.to_wire(), op=op, thread_id=inter.thread_id,
                         turn_id=inter.turn_id, item_id=inter.item_id)
        self._deliver(ev, op)
        if inter.deadline_at is not None:
            self._nursery.start_soon(self._interaction_deadline, inter)
        if self._interaction_policy is not None:
            self._nursery.start_soon(self._run_interaction_policy, inter, self._interaction_policy)

    def _answer_nowait(self, req: ServerRequest, result: Any, *, error: tuple[int, str] | None = None) -> None:
        conn = self.conn
        if conn is None:
            return
        try:
            conn.reply_nowait(req.id, result, error=error)
        except CodexError as exc:  # not pending any more (the server resolved it): nothing to answer
            log.debug("could not answer server request %r: %s", req.id, exc.message)

    def _refuse_overflow(self, req: ServerRequest) -> None:
        """A server request past the pending cap: its safe negative reply at once (never an
        approval), no interaction. ``interactionOverflow`` is published for the first refusal
        of an overflow episode and then at each power of two, so a flood costs a few events
        (``payload.refused`` counts the episode's refusals)."""
        try:
            reply: Any = safe_negative_reply(req.method, req.params if isinstance(req.params, dict) else {})
            error = None
        except Exception:  # no safe reply known for it: an error reply grants nothing either
            reply, error = None, (-32603, "too many pending requests")
        self._answer_nowait(req, reply, error=error)
        self._overflow_refused += 1
        n = self._overflow_refused
        if n & (n - 1) == 0:
            self._publish(self._event("interactionOverflow", {
                "method": req.method, "requestId": req.id, "limit": self._registry.MAX_PENDING,
                "refused": n, "reply": reply if error is None else None}))

    def _interaction_event(self, kind: str, inter: Interaction, payload: dict[str, Any]) -> None:
        ev = self._event(kind, {"interactionKey": inter.key, **payload}, thread_id=inter.thread_id,
                         turn_id=inter.turn_id, item_id=inter.item_id)
        self._deliver(ev, self._op_for(inter.thread_id, inter.turn_id))

    def _on_server_request_resolved(self, params: dict[str, Any]) -> None:
        """``serverRequest/resolved`` closes exactly the matching interaction of this
        generation (also sent when the server clears requests on turn end/interrupt)."""
        inter = self._registry.resolve(params.get("requestId"), self.generation)
        if inter is not None:
            self._interaction_event("interactionResolved", inter, {"dialogToken": inter.dialog_token})

    async def _interaction_deadline(self, inter: Interaction) -> None:
        """At the kind's deadline, answer the server with the safe negative reply (never an
        accept) and tell the host (``interactionExpired``)."""
        assert inter.deadline_at is not None
        with trio.move_on_at(inter.deadline_at):
            await inter.settled.wait()
            return
        if inter.state != "pending":
            return
        reply = safe_negative_reply(inter.method, inter.params)
        try:
            await self._send_answer(inter, reply, by="deadline", final="expire")
        except CodexError as exc:
            self._interaction_event("interactionExpired", inter, {"reason": "deadline", "reply": None,
                                                                  "error": exc.to_dict()})
            return
        self._interaction_event("interactionExpired", inter, {"reason": "deadline", "reply": reply,
                                                              "deadlineSeconds": inter.deadline_seconds})

    async def _run_interaction_policy(self, inter: Interaction, policy: InteractionPolicy) -> None:
        """The library policy, in its own task. Its errors become ``interactionPolicyError``
        events and leave the interaction pending for the host."""
        try:
            reply = await policy(inter)
        except Exception as exc:  # a broken policy must not take the runtime down
            self._interaction_event("interactionPolicyError", inter, {
                "error": self._redactor(f"{type(exc).__name__}: {exc}")})
            return
        if reply is None or inter.state != "pending":
            return
        try:
            validate_reply(inter.method, reply, inter.params)
            await self._send_answer(inter, reply, by="policy")
        except InteractionError as exc:
            if inter.state == "pending":
                self._interaction_event("interactionPolicyError", inter, {"error": exc.message, "code": exc.code})

    def set_interaction_policy(self, policy: InteractionPolicy | None) -> None:
        """Install (or remove, with None) the policy run for every *new* interaction, e.g.
        ``codexrt._runtime._interactions.decline_all_in_read_only``. It runs in its own task; returning
        None leaves the interaction to the host."""
        self._interaction_policy = policy

    def set_interaction_deadlines(self, **seconds: float | None) -> None:
        """Change deadlines per kind for new interactions, e.g.
        ``set_interaction_deadlines(commandApproval=600, dynamicToolCall=None)``."""
        self._registry.set_deadlines(seconds)

    def set_privacy_store(self, store: PrivacyStore) -> None:
        """Where the privacy index lives (R-PRIV-1); default: :func:`default_privacy_dir`
        scoped by the fingerprint of CODEX_HOME."""
        self._privacy_store = store

    def privacy_store(self) -> PrivacyStore:
        if self._privacy_store is None:
            env = self.config.env if self.config.env is not None else os.environ
            home = resolve_codex_home(self.config.codex_home, env)
            self._privacy_store = PrivacyStore.for_home(default_privacy_dir(env), str(home))
        return self._privacy_store

    def privacy_index(self) -> PrivacyIndex:
        """Load the privacy index (blocking file reads) for masking history (R-PRIV-2)."""
        return self.privacy_store().load()

    def _expire_interactions(self, reason: str) -> None:
        """The child is gone: its requests can never be answered. Also withdraws every
        execute-plan offer (R-INT-5: runtime reset/failure)."""
        for inter in self._registry.expire_all():
            self._interaction_event("interactionExpired", inter, {"reason": reason})
        for change in self.plans.withdraw_all(reason):
            self._publish(self._event(change.kind, change.payload, thread_id=change.thread_id))

    def pending_interactions(self) -> list[Interaction]:
        """Pending interactions in delivery order (R-INT-2)."""
        return self._registry.pending()

    def replay_interactions(self) -> list[Interaction]:
        """For a rebuilt host UI (R-INT-2): every pending interaction, in ``deliverySequence``
        order, with a rotated ``dialogToken`` (the old one is refused from now on), deadline and
        params snapshot kept. Each is also re-published as ``interactionRequested`` with
        ``replayed: true``."""
        out = self._registry.replay()
        for inter in out:
            self._interaction_event("interactionRequested", inter, inter.to_wire(replayed=True))
        return out

    replay_pending = replay_interactions

    async def _send_answer(self, inter: Interaction, result: Any, *, by: str, final: str = "sent",
                           error: tuple[int, str] | None = None) -> None:
        """Send a validated answer: claim (``answering``) before the first await, write the
        privacy record when the kind needs one (R-PRIV-1), then the reply with the raw id —
        or, with ``error=(code, message)``, a JSON-RPC error reply instead of ``result``."""
        conn = self.conn
        if conn is None:
            raise InteractionError("runtime is not connected", code="INTERACTION_EXPIRED")
        inter._fire("answer")
        inter.answered_by = by
        try:
            store = self.privacy_store() if error is None and inter.kind in ("userInput", "elicitation") else None
            record = privacy_record_for(inter, result, store) if store is not None else None
            if record is not None:
                assert store is not None
                try:
                    await trio.to_thread.run_sync(store.write, record)
                except OSError as exc:
                    if inter.state == "answering":
                        inter._fire("failed")
                    with contextlib.suppress(CodexError):
                        await conn.reply_error(inter._request_id, PRIVACY_ERROR_CODE,
                                               "the client could not record its privacy index; "
                                               "the answer was not forwarded")
                    why = exc.strerror or type(exc).__name__
                    self._interaction_event("privacyIndexWriteFailed", inter, {"error": why,
                                                                               "forwarded": False})
                    raise InteractionError(f"privacy index write failed ({why}); the answer was not forwarded",
                                           code="PRIVACY_INDEX_WRITE_FAILED",
                                           details={"interactionKey": inter.key}) from None
            if error is not None:
                await conn.reply_error(inter._request_id, *error)
            else:
                await conn.reply(inter._request_id, result)
        except LocalProtocolError as exc:
            if inter.state == "answering":
                inter._fire("resolve")
            raise InteractionError(str(exc), code="INTERACTION_EXPIRED") from None
        except BaseException:
            # Unknown whether it reached the server: never answered twice (R-OP-7 spirit).
            if inter.state == "answering":
                inter._fire("failed")
            raise
        if inter.state == "answering":
            inter._fire(final)
        if final == "sent":
            self._interaction_event("interactionAnswered", inter,
                                    {"by": by, "error": True} if error is not None else {"by": by})

    #: Settled operations kept findable by id (``operation()``, ``abort(id)``); older ones are
    #: forgotten (their events go with them unless the caller still holds the operation).
    MAX_RECENT_OPS = 256

    def operation(self, op_id: str) -> Operation | None:
        """The operation with client operation id ``op_id``: any unsettled one, or one of the
        last :attr:`MAX_RECENT_OPS` settled ones; else None."""
        return self._ops.get(op_id) or self._recent_ops.get(op_id)

    def _forget_settled(self, op: Operation) -> None:
        if self._ops.pop(op.id, None) is None:
            return
        self._recent_ops[op.id] = op
        while len(self._recent_ops) > self.MAX_RECENT_OPS:
            self._recent_ops.popitem(last=False)

    # -- control calls (bypass the FIFO, R-OP-1) ----------------------------------------

    async def respond_interaction(self, key: str, dialog_token: str, result: Any) -> None:
        """Answer an interaction with a typed result (R-INT-1, R-INT-3). Refuses unknown,
        duplicate, expired, stale-token and wrong-generation answers and invalid replies with
        :class:`InteractionError` (``INTERACTION_*``), and a ``requestUserInput``/elicitation
        answer whose privacy record could not be written (``PRIVACY_INDEX_WRITE_FAILED``; the
        server then got an error reply instead). Cancelling it after the reply was claimed
        leaves the interaction answered (it is never sent twice)."""
        inter = self._registry.lookup(key, dialog_token, self.generation)
        validate_reply(inter.method, result, inter.params)
        await self._send_answer(inter, result, by="host")

    async def respond_interaction_error(self, key: str, dialog_token: str, code: int, message: str) -> None:
        """Answer with a JSON-RPC error instead of a result (same refusals as above)."""
        inter = self._registry.lookup(key, dialog_token, self.generation)
        await self._send_answer(inter, None, by="host", error=(code, message))

    # -- plans (R-INT-5) -------------------------------------------------------------------

    def _track_plans(self, n: Notification) -> None:
        if n.method not in _PLAN_METHODS:
            return
        for change in self.plans.feed(n.method, n.params if isinstance(n.params, dict) else {}):
            self._publish(self._event(change.kind, change.payload, thread_id=change.thread_id,
                                      turn_id=change.payload.get("turnId")))

    def execute_plan(self, thread_id: str, plan_item_id: str, *, request_id: str | None = None,
                     message: str = EXECUTE_PLAN_MESSAGE, model: str | None = None) -> PlanExecution:
        """Execute the authoritative plan on offer for ``thread_id`` (R-INT-5): single-flight,
        checks the thread/plan identity, then queues one new turn in the *default*
        collaboration mode — approval policy and sandbox are not touched. Returns at once; the
        :class:`PlanExecution` (keyed by ``request_id``) always ends with a result echoing
        requestType/threadId/requestId, also for an early refusal. The same ``request_id``
        again returns the same execution."""
        rid = request_id or f"plan-{secrets.token_hex(6)}"
        existing = self.plan_executions.get(rid)
        if existing is not None:
            return existing
        ex = PlanExecution(rid, thread_id, plan_item_id)
        self.plan_executions[rid] = ex
        if len(self.plan_executions) > 256:
            for key in [k for k, e in self.plan_executions.items() if e.done][:128]:
                del self.plan_executions[key]

        def refuse(code: str, msg: str) -> PlanExecution:
            ex._finish(ok=False, status="refused", error={"code": code, "message": msg})
            self._publish(self._event("planExecutionDone", ex.result or {}, thread_id=thread_id))
            return ex

        if self._plan_inflight is not None and not self._plan_inflight.done:
            return refuse("PLAN_EXECUTION_IN_FLIGHT",
                          f"plan execution {self._plan_inflight.request_id} is still running")
        if not self.plans.is_current(thread_id, plan_item_id):
            return refuse("PLAN_NOT_CURRENT", "that plan is not the completed plan on offer for this thread "
                                              "(withdrawn, superseded, or still a preview)")
        info = self.threads.get(thread_id)
        eff = info.effective if info is not None else {}
        collab = eff.get("collaborationMode") if isinstance(eff.get("collaborationMode"), dict) else {}
        collab_settings = collab.get("settings") if isinstance(collab.get("settings"), dict) else {}
        chosen = model or collab_settings.get("model") or eff.get("model") or self.desired.model
        if not isinstance(chosen, str) or not chosen:
            return refuse("PLAN_NO_MODEL", "no model is known for the default collaboration mode; pass model=")
        effort = self.desired.effort or collab_settings.get("reasoning_effort")
        try:
            op = self.send(message, thread_id=thread_id,
                           settings=Settings(collaboration_mode=default_collaboration_mode(chosen, effort)))
        except CodexError as exc:
            return refuse(exc.code, exc.message)
        ex.operation = op
        self._plan_inflight = ex
        self._nursery.start_soon(self._await_plan_execution, ex, op)
        return ex

    async def _await_plan_execution(self, ex: PlanExecution, op: Operation) -> None:
        try:
            result = await op.wait()
        except BaseException:
            ex._finish(ok=False, status="cancelled", error={"code": "CANCELLED", "message": "runtime closed"})
            raise
        finally:
            if self._plan_inflight is ex:
                self._plan_inflight = None
        ex._finish(ok=result.status == STATUS_COMPLETED, status=result.status,
                   error=result.error.to_dict() if result.error is not None else None, turn_id=result.turn_id)
        self._publish(self._event("planExecutionDone", ex.result or {}, op=op))

    def update_settings(self, settings: Settings | None = None, **changes: Any) -> int:
        """Change the *desired* settings (R-SET-1); returns the new revision. The next
        dispatched operation freezes it; effective settings come from the server."""
        new = self.desired.merged(settings) if settings is not None else self.desired
        if changes:
            new = new.merged(Settings(**changes))
        self.desired = new
        self.settings_revision += 1
        payload: dict[str, Any] = {"revision": self.settings_revision, "desired": new.to_wire()}
        chosen = changes.get("sandbox") or (settings.sandbox if settings is not None else None)
        if chosen is not None:
            # R-SET-4: a sandbox chosen here is the user's selection (plan/approval never set it)
            payload["sandboxSelection"] = {"mode": chosen, "source": "user"}
        self._publish(self._event("settingsUpdated", payload))
        return self.settings_revision

    def abort(self, op: Operation | str | None = None) -> str:
        """Stop an operation (R-OP-5); answers at once with the path taken:

        ``cancelledQueued`` (zero RPCs), ``cancelIntent`` (not written yet; no ``turn/start``
        will be written once bootstrap is confirmed), ``interruptPending`` (written, turn id
        unknown: interrupt as soon as it arrives), ``interruptSent`` (``turn/interrupt`` now),
        ``alreadyTerminal`` or ``noOperation``. A watchdog gives the stop ``stop_budget``
        seconds from the first request; then the child is killed and everything fails once
        (``runtimeUnhealthy``).
        """
        if op is None:
            op = self.active or (self._queue[0] if self._queue else None)
            if op is None:
                return "noOperation"
        elif isinstance(op, str):
            found = self.operation(op)
            if found is None:
                return "noOperation"
            op = found
        if op.terminal:
            return "alreadyTerminal"
        first = not op.cancel_requested
        op.cancel_requested = True
        if first:
            op.cancel_requested_at = trio.current_time()
        if op.phase is OpPhase.QUEUED:
            if op in self._queue:
                self._queue.remove(op)
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before it started"))
            return "cancelledQueued"
        if first:
            self._nursery.start_soon(self._stop_watchdog, op)
        if op.phase is OpPhase.NOT_WRITTEN:
            if op._probe_scope is not None:
                op._probe_scope.cancel()  # R-CTX-6: leave the capability probe now
            return "cancelIntent"
        if op.turn_id is None:
            return "interruptPending"
        self._nursery.start_soon(self._send_interrupt, op)
        return "interruptSent"

    async def _send_interrupt(self, op: Operation) -> None:
        conn = self.conn
        if conn is None or op.terminal or op.turn_id is None or op.thread_id is None:
            return
        try:
            await conn.call("turn/interrupt", {"threadId": op.thread_id, "turnId": op.turn_id})
            ev = self._event("turnAborted", {"requested": True}, op=op)
        except CodexError as exc:
            ev = self._event("error", {"message": f"turn/interrupt failed: {exc.message}",
                                       "code": exc.code}, op=op)
        if not op.terminal:  # a turn that ended meanwhile raced the interrupt: nothing to report
            self._deliver(ev, op)

    async def _stop_watchdog(self, op: Operation) -> None:
        with trio.move_on_after(self.config.stop_budget):
            await op._done.wait()
            return
        if op.terminal:
            return
        # Budget exhausted: close the child, confirm its exit, fail everything once.
        self._publish(self._event("runtimeUnhealthy", {"reason": "stop budget exhausted",
                                                       "budgetSeconds": self.config.stop_budget}, op=op))
        conn = self.conn or self._starting_conn  # a child still starting is closed too
        if conn is not None:
            conn.kill()
            with trio.move_on_after(10):
                await conn.closed.wait()
        if not op.terminal:
            op._settle(STATUS_FAILED, ChildExited(None, None, phase=op.phase.value,
                                                  details={"stopBudgetExhausted": True}))

    # -- long operations -----------------------------------------------------------------

    #: Most operations waiting in the FIFO; one more is refused with ``QUEUE_FULL`` (nothing
    #: is queued or written for it).
    MAX_QUEUED_OPS = 1024

    def _new_op(self, kind: str, *, thread_id: str | None, client_message_id: str | None,
                payload: dict[str, Any]) -> Operation:
        if self._closing:
            raise ClosedError("runtime is closed")
        if len(self._queue) >= self.MAX_QUEUED_OPS:
            raise CodexError(f"{len(self._queue)} operations are already queued on this runtime (the limit is "
                             f"{self.MAX_QUEUED_OPS}); wait for some to finish", code="QUEUE_FULL",
                             details={"queued": len(self._queue), "maxQueued": self.MAX_QUEUED_OPS})
        op = Operation(self, kind, f"op-{self.generation}-{next(self._op_counter)}-{secrets.token_hex(3)}",
                       thread_id=thread_id, client_message_id=client_message_id, payload=payload)
        self._ops[op.id] = op
        self._queue.append(op)
        self._queue_event.set()
        ev = self._event("operationQueued", {"kind": kind, "clientMessageId": client_message_id,
                                             "position": len(self._queue)}, op=op)
        op.stream.put(ev)
        self._publish(ev)
        return op

    def send(self, text: str, *, thread_id: str | None = None, client_message_id: str | None = None,
             images: Sequence[str] = (), additional_context: dict[str, Any] | None = None,
             settings: Settings | None = None, editor_state: EditorState | None = None,
             context: ContextFragments | None = None,
             text_elements: Sequence[dict[str, Any]] = (), skills: Sequence[Any] = ()) -> Operation:
        """Queue a user message (R-OP-1). ``thread_id=None`` starts a new thread. Returns at
        once; the operation runs when the FIFO reaches it. ``client_message_id`` identifies
        this submission (R-OP-7); a fresh one is chosen when omitted.

        ``text`` is the user's input only (R-CTX-1). IDE context comes as ``editor_state``
        (built into fragments *now*: later editor changes never reach this send) or as
        ready ``context`` fragments, and/or ``additional_context`` (a ready
        ``{key: {kind, value, name?}}`` map, copied now). At dispatch the capability probe
        decides how it travels: ``turn/start.additionalContext`` beside the raw text, or the
        ``# Context from my IDE setup:`` text convention with ``text_elements`` byte ranges
        shifted (R-CTX-2 … R-CTX-4). ``skills`` (``{name, path}`` mappings or objects with
        ``name``/``path``, e.g. :class:`~codexrt._features._catalog.SkillRef`) are sent as native ``skill``
        input items after the text (R-CAT-1). Raises ``ConfigError`` for malformed context."""
        if not isinstance(text, str):
            raise ConfigError("text must be a string")
        if editor_state is not None and context is not None:
            raise ConfigError("give editor_state or context, not both")
        frozen = context if context is not None else (build_context(editor_state) if editor_state is not None
                                                      else ContextFragments())
        ready: dict[str, dict[str, Any]] = {}
        for key, entry in (additional_context or {}).items():
            if not (isinstance(key, str) and key and isinstance(entry, dict) and isinstance(entry.get("value"), str)
                    and entry.get("kind") in ("application", "untrusted")):
                raise ConfigError(f"additional_context[{key!r}] must be {{kind: application|untrusted, value: str, "
                                  "name?}", details={"key": str(key)})
            if key in frozen.keys():
                raise ConfigError(f"context key {key!r} is given twice", details={"key": key})
            ready[key] = dict(entry)
        skill_items: list[dict[str, Any]] = []
        for sk in skills:
            name = sk.get("name") if isinstance(sk, dict) else getattr(sk, "name", None)
            path = sk.get("path") if isinstance(sk, dict) else getattr(sk, "path", None)
            if not (isinstance(name, str) and name and isinstance(path, str) and path):
                raise ConfigError("a skill needs a non-empty name and path", code="INVALID_PARAMS")
            skill_items.append({"type": "skill", "name": name, "path": path})
        cmid = client_message_id or f"cm-{secrets.token_hex(8)}"
        return self._new_op("send", thread_id=thread_id, client_message_id=cmid, payload={
            "text": text, "images": list(images), "additionalContext": ready or None, "context": frozen,
            "textElements": [dict(e) for e in text_elements], "settings": settings, "skills": skill_items})

    def compact(self, thread_id: str) -> Operation:
        return self._new_op("compact", thread_id=thread_id, client_message_id=None, payload={})

    def review(self, thread_id: str, target: dict[str, Any] | None = None) -> Operation:
        return self._new_op("review", thread_id=thread_id, client_message_id=None,
                            payload={"target": target or {"type": "uncommittedChanges"}})

    def preconnect(self, thread_id: str | None = None) -> Operation:
        """Start or reuse the runtime and resume ``thread_id``; never starts a turn (R-D-1)."""
        return self._new_op("preconnect", thread_id=thread_id, client_message_id=None, payload={})

    async def _fifo_worker(self) -> None:
        while True:
            while not self._queue and self._pending_rebuild is None:
                self._queue_event = trio.Event()
                await self._queue_event.wait()
            if self._pending_rebuild is not None:
                # R-LC-2: a launch change is applied between operations, before the next one.
                rebuild, self._pending_rebuild = self._pending_rebuild, None
                await rebuild()
                continue
            op = self._queue.pop(0)
            if op.terminal:
                continue
            self.active = op
            try:
                await self._dispatch(op)
            finally:
                if not op.terminal:  # pragma: no cover - _dispatch always settles
                    op._settle(STATUS_FAILED, LocalProtocolError("operation ended without a terminal"))
                self.active = None
                self._idle_since = trio.current_time()

    async def _dispatch(self, op: Operation) -> None:
        op._fire(OpEvent.DISPATCH)
        op.settings = self.desired.merged(op.payload.get("settings") or Settings())
        op.payload["settingsRevision"] = self.settings_revision
        try:
            conn = await self.ensure_started()
            if op.terminal:
                return  # settled while the runtime started (stop budget ran out): nothing is written for it
            op.generation = self.generation
            if op.cancel_requested and op.phase is OpPhase.NOT_WRITTEN:
                # cancelled while the runtime started: no thread/start or resume is in flight yet
                op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before the thread was started"))
                return
            if op.kind == "send" and not await self._decide_context(op):
                return
            await self._bootstrap_thread(op, conn)
            if op.thread_id is not None:
                self._last_root_thread = op.thread_id
            if op.cancel_requested:  # the gate honours the intent once bootstrap is confirmed
                op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before the turn was started"))
                return
            if op.kind == "preconnect":
                op._settle(STATUS_COMPLETED)
                return
            if op.kind == "send":
                await self._start_turn(op, conn)
            else:
                await self._start_compact_or_review(op, conn)
        except CodexError as exc:
            if not op.terminal:
                if op.cancel_requested and op.turn_id is None and (
                        isinstance(exc, (RpcError, RpcTimeout)) or exc.details.get("startupCancelled")):
                    op._settle(STATUS_CANCELLED, OperationCancelled(f"cancelled: {exc.message}"))
                else:
                    op._settle(STATUS_FAILED, exc)
            return
        except Exception as exc:  # fault barrier: answers of an unexpected shape fail the op, not the runtime
            log.warning("%s %s failed on unexpected data: %s", op.kind, op.id, type(exc).__name__, exc_info=True)
            if not op.terminal:
                op._settle(STATUS_FAILED, RemoteProtocolError(
                    f"{op.kind} failed on an answer of unexpected shape ({type(exc).__name__})",
                    phase=op.phase.value, details={"error": type(exc).__name__}))
            return
        await op._done.wait()

    async def _bootstrap_thread(self, op: Operation, conn: Connection) -> None:
        settings = op.settings or Settings()
        if op.thread_id is None:
            if op.kind not in ("send", "preconnect"):
                raise ConfigError(f"{op.kind} needs a thread id")
            if op.kind == "preconnect":
                return
            result = await conn.call("thread/start", settings.thread_start_params())
            thread = (result or {}).get("thread") or {}
            tid = thread.get("id")
            if not isinstance(tid, str):
                raise OperationFailed("thread/start returned no thread id", details={"result": result})
            op.thread_id = tid
            info = self._thread_info(tid)
            info.loaded_generation = self.generation
            info.started_effective = _effective_from_thread_result(result)
            return
        info = self._thread_info(op.thread_id)
        if info.loaded_generation == self.generation:
            return
        params: dict[str, Any] = {"threadId": op.thread_id, **settings.thread_start_params()}
        try:
            result = await conn.call("thread/resume", params)
        except RpcError as exc:
            text = exc.message.lower()
            code = "RESUME_FAILED"
            if "no rollout found" in text or "not found" in text:
                code = "THREAD_NOT_FOUND"
            elif "active writer" in text:
                code = "WRITER_CONFLICT"
            hint = {
                "THREAD_NOT_FOUND": "a thread that never ran a turn has no rollout and cannot be resumed; start a new thread",
                "WRITER_CONFLICT": "another app-server (often an orphan of an earlier crash) holds this thread; "
                                   "stop that process or wait for it to exit",
            }.get(code)
            raise ThreadResumeError(f"thread/resume failed: {exc.message}", code=code,
                                    details={"threadId": op.thread_id, "rpcCode": exc.rpc_code,
                                             **({"hint": hint} if hint else {})}) from None
        info.loaded_generation = self.generation
        info.started_effective = _effective_from_thread_result(result)  # what this resume made effective
        ev = self._event("threadResumed", {"cold": True, "thread": (result or {}).get("thread", {}).get("id")}, op=op)
        self._deliver(ev, op)
        # R-SET-3: a cold resume clears session-scoped grants (acceptForSession) on the host.
        self._publish(self._event("sessionGrantsReset", {"reason": "cold resume"}, op=op))

    @staticmethod
    def _context_fragments(op: Operation) -> tuple[ContextFragments, dict[str, dict[str, Any]]]:
        frozen: ContextFragments = op.payload.get("context") or ContextFragments()
        ready: dict[str, dict[str, Any]] = op.payload.get("additionalContext") or {}
        fragments = ContextFragments(frozen.fragments + tuple(
            ContextFragment(k, v["value"]) for k, v in ready.items() if v.get("kind") == "application"), frozen.dropped)
        return fragments, ready

    async def _decide_context(self, op: Operation) -> bool:
        """IDE context (R-CTX-1..4, R-CTX-6): fragments were frozen at submit; how they travel
        is decided here, by the probe, for this CLI and child generation — before the thread
        is started or resumed, so cancelling during the probe creates no thread and no turn.
        Returns False when the operation was cancelled (and settled)."""
        fragments, ready = self._context_fragments(op)
        if not (fragments or ready):
            return True
        if op.cancel_requested:  # a cancelled operation leaves before the probe
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before the context probe"))
            return False

        cli, env = resolved_cli(self.config, self.cli_path)
        delivery = ContextDelivery.TEXT_CONVENTION
        with trio.CancelScope() as op._probe_scope:  # abort() cancels the probe at once
            try:
                delivery = await self.probe.decide(fragments or ContextFragments((ContextFragment("_", "_"),)),
                                                   cli=cli or (), env=env, generation=self.generation)
            except ValueError:  # no CLI to ask (started from transports): the text convention
                delivery = ContextDelivery.TEXT_CONVENTION
        op._probe_scope = None
        if op.cancel_requested:  # cancelled during the probe: no thread, no turn
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled during the context probe"))
            return False
        op.payload["contextDelivery"] = delivery.value
        return True

    async def _start_turn(self, op: Operation, conn: Connection) -> None:
        settings = op.settings or Settings()
        images: list[dict[str, Any]] = []
        for image in op.payload.get("images") or []:
            if image.startswith(("http://", "https://", "data:")):
                images.append({"type": "image", "url": image})
            else:
                images.append({"type": "localImage", "path": image})
        fragments, ready = self._context_fragments(op)
        delivery = ContextDelivery(op.payload.get("contextDelivery", ContextDelivery.NONE.value))
        untrusted = {k: v for k, v in ready.items() if v.get("kind") != "application"}
        if untrusted and delivery is not ContextDelivery.ADDITIONAL_CONTEXT:
            raise ConfigError("untrusted context cannot travel in the text convention (this CLI has no "
                              "additionalContext); nothing was started", code="CONTEXT_NOT_DELIVERABLE",
                              details={"keys": sorted(untrusted)})
        try:
            prepared = prepare_input(op.payload["text"], fragments if delivery is not ContextDelivery.NONE
                                     else ContextFragments(), delivery, images=images,
                                     text_elements=op.payload.get("textElements") or ())
        except LocalProtocolError as exc:
            raise ConfigError(exc.message, code="INVALID_TEXT_ELEMENTS", details=exc.details) from None
        params: dict[str, Any] = {"threadId": op.thread_id,
                                  "input": [*prepared.input_items(), *(op.payload.get("skills") or ())],
                                  "clientUserMessageId": op.client_message_id, **settings.turn_params()}
        if prepared.additional_context is not None:
            # ready entries travel verbatim (kind/name kept), built ones as application entries
            params["additionalContext"] = {**prepared.additional_context, **ready}

        def written() -> None:
            op._fire(OpEvent.WRITTEN)

        op._turn_requested = True
        try:
            result = await conn.call("turn/start", params, on_written=written)
        except RpcTimeout as exc:
            if exc.phase == "writtenUnconfirmed":
                # The turn may be running: never re-send (R-OP-7). Wait for its native events,
                # a late response (bound to this operation), a stop, or the child's exit.
                self._note_late_owner(op, exc)
                self._deliver(self._event("error", {"message": exc.message, "code": exc.code,
                                                    "phase": exc.phase, "method": "turn/start",
                                                    "requestId": (exc.details or {}).get("requestId")},
                                          op=op), op)
                return
            raise
        turn = (result or {}).get("turn") or {}
        tid = turn.get("id")
        if op.terminal:
            return  # the reader already settled it (a fast turn): no ack after the terminal
        if isinstance(tid, str) and op._bind_turn(tid):
            if op.cancel_requested:
                self._nursery.start_soon(self._send_interrupt, op)
        ack: dict[str, Any] = {"turn": turn}
        if "contextDelivery" in op.payload:
            ack["contextDelivery"] = op.payload["contextDelivery"]
        self._deliver(self._event("operationAcked", ack, op=op), op)

    async def _start_compact_or_review(self, op: Operation, conn: Connection) -> None:
        await self._settings_gate(op, conn)
        if op.cancel_requested:
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before it started"))
            return
        if op.kind == "compact":
            method, params = "thread/compact/start", {"threadId": op.thread_id}
        else:
            method, params = "review/start", {"threadId": op.thread_id, "target": op.payload["target"]}
        op._fire(OpEvent.WRITTEN)
        op._turn_requested = True
        try:
            result = await conn.call(method, params)
        except RpcTimeout as exc:
            self._note_late_owner(op, exc)  # its late answer still names this operation (R-WIRE-4)
            raise
        if op.terminal:
            return
        turn = (result or {}).get("turn") if isinstance(result, dict) else None
        if isinstance(turn, dict) and isinstance(turn.get("id"), str):
            op._bind_turn(turn["id"])
        self._deliver(self._event("operationAcked", {"result": result}, op=op), op)

    async def _settings_gate(self, op: Operation, conn: Connection) -> None:
        """R-SET-2: compact/review carry no settings, so the revision frozen at dispatch is pushed
        with ``thread/settings/update`` first, and the gate opens only on a
        ``thread/settings/updated`` whose effective settings match it (every field sent; objects
        by the fields sent, e.g. ``sandboxPolicy.type``). A confirmation that does not match
        fails the operation (``SETTINGS_MISMATCH``), none within ``settings_confirm_timeout``
        too (``SETTINGS_UNCONFIRMED``); nothing is started either way. When the thread's known
        effective settings already match, nothing is sent: the real server (0.171.0) sends no
        notification for an update that changes nothing."""
        params = (op.settings or Settings()).turn_params()
        if not params:
            return
        info = self._thread_info(op.thread_id or "")
        revision = op.payload.get("settingsRevision")
        # what this child confirmed last; else what its thread/start or thread/resume reported
        known = info.effective if info.effective_generation == self.generation else info.started_effective
        if known and _settings_match(params, known):
            return
        seen = info.settings_seq
        await conn.call("thread/settings/update", {"threadId": op.thread_id, **params})
        with trio.move_on_after(self.config.settings_confirm_timeout):
            while True:
                if info.settings_seq != seen:
                    if _settings_match(params, info.effective):
                        return
                    raise OperationFailed(
                        "thread/settings/updated does not match the settings revision frozen for this "
                        "operation; not starting", code="SETTINGS_MISMATCH",
                        details={"revision": revision, "expected": params,
                                 "effective": {k: info.effective.get(k) for k in params}})
                waiter = info.settings_event
                await waiter.wait()
        raise OperationFailed("settings were not confirmed by thread/settings/updated; not starting",
                              code="SETTINGS_UNCONFIRMED", details={"revision": revision})

    # -- launch-config rebuild (R-LC-2) --------------------------------------------------

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

    # -- sub-agent relations (R-H-8, R-D-1, R-OP-6) ----------------------------------------

    MAX_ANCESTRY = 16

    def _track_status(self, method: str, thread_id: str, params: dict[str, Any], turn_id: str | None) -> None:
        """Native status of every thread, from its own notifications only: a parent's terminal
        never changes a child's (R-H-8). A turn on a thread never seen before may be a sub-agent's."""
        info = self.threads.get(thread_id)
        if info is None:
            if method != "turn/started":
                return
            info = self._thread_info(thread_id)
            self._want_relation(thread_id)
        if method == "thread/status/changed":
            st = params.get("status")
            info.status = st.get("type") if isinstance(st, dict) and isinstance(st.get("type"), str) else None
        elif method == "turn/started":
            info.active_turn = turn_id
            info.status = "active"
        elif turn_id is not None and info.active_turn == turn_id:  # turn/completed of its own turn
            info.active_turn = None
        info.status_event.set()
        info.status_event = trio.Event()

    def _want_relation(self, thread_id: str) -> None:
        info = self._thread_info(thread_id)
        if info.root_id is not None or info.relation_pending or self.conn is None:
            return
        info.relation_pending = True
        self._nursery.start_soon(self._verify_relation, thread_id, self.generation, self.conn)

    async def _verify_relation(self, thread_id: str, gen: int, conn: Connection) -> None:
        """Walk ``parentThreadId`` up to a root with ``thread/read`` (read-only: no resume, no
        writer). Only then is the thread recorded in its root's relation set and
        ``threadRelationVerified`` published; a walk of an older generation publishes nothing."""
        chain: list[tuple[str, str]] = []
        cur, status = thread_id, None
        try:
            for _ in range(self.MAX_ANCESTRY):
                res = await call_read(conn, "thread/read", {"threadId": cur})
                thread = (res or {}).get("thread") if isinstance(res, dict) else None
                thread = thread if isinstance(thread, dict) else {}
                if cur == thread_id and isinstance(thread.get("status"), dict):
                    status = thread["status"].get("type")
                parent = thread.get("parentThreadId")
                if not isinstance(parent, str) or not parent or parent == cur:
                    break
                chain.append((cur, parent))
                cur = parent
            else:
                chain = []  # deeper than MAX_ANCESTRY: not verified
        except CodexError as exc:
            log.info("relation of %s not verified: %s", thread_id, exc.message)
            chain = []
        if gen != self.generation:
            return  # an old generation's answer never publishes into a newer one (R-RT-2)
        info = self._thread_info(thread_id)
        info.relation_pending = False
        if not chain:
            return  # a root, or not verified (a later hint tries again)
        root = cur
        root_info = self._thread_info(root)
        for depth, (tid, parent) in enumerate(reversed(chain), 1):
            ti = self._thread_info(tid)
            newly = ti.root_id is None
            ti.root, ti.parent_id, ti.root_id = False, parent, root
            if ti.loaded_generation is None:
                ti.loaded_generation = gen  # loaded on the server (thread/loaded/list lists it)
            root_info.children[tid] = depth
            if newly:
                self._publish(self._event("threadRelationVerified", {
                    "rootThreadId": root, "threadId": tid, "parentThreadId": parent}, thread_id=tid))
        if info.status is None and isinstance(status, str):
            info.status = status

    def relations(self, root_thread_id: str) -> dict[str, dict[str, Any]]:
        """The verified relation set of ``root_thread_id``: child id → ``parentThreadId``,
        ``depth`` and native ``status`` (None when unknown — never guessed)."""
        info = self.threads.get(root_thread_id)
        out: dict[str, dict[str, Any]] = {}
        for child, depth in (info.children.items() if info is not None else ()):
            ci = self.threads.get(child)
            out[child] = {"parentThreadId": ci.parent_id if ci else None, "depth": depth,
                          "status": ci.status if ci else None}
        return out

    async def drain_relations(self, root_thread_id: str) -> list[dict[str, Any]]:
        """``releaseThread`` of a root (R-D-1): its verified children, deepest first, each
        stopped (our operations on it aborted, its running turn interrupted), waited for until its
        native status is no longer active — an unknown status is queried again, never guessed
        (R-H-8) — and unsubscribed. Bounded by the stop budget per child. The relation set itself
        (the lease) stays until :meth:`release_relation_lease`."""
        info = self.threads.get(root_thread_id)
        if info is None:
            return []
        out = []
        for child in sorted(info.children, key=lambda c: -info.children[c]):
            out.append({"threadId": child, **await self._release_child(child)})
        return out

    async def _release_child(self, child: str) -> dict[str, Any]:
        for op in [self.active, *self._queue]:
            if op is not None and op.thread_id == child and not op.terminal:
                self.abort(op)
                with trio.move_on_after(self.config.stop_budget + 11):
                    await op._done.wait()
        ci = self._thread_info(child)
        interrupted = False
        settled = False
        with trio.move_on_after(self.config.stop_budget):
            while True:
                conn = self.conn
                if conn is None:
                    settled = True  # the app-server is gone: so is the child's work
                    break
                if ci.status is None:  # unknown: ask, never guess
                    try:
                        res = await call_read(conn, "thread/read", {"threadId": child})
                        st = ((res or {}).get("thread") or {}).get("status") or {}
                        if ci.status is None and isinstance(st.get("type"), str):
                            ci.status = st["type"]
                    except CodexError as exc:
                        log.info("status of %s unknown: %s", child, exc.message)
                    if ci.status is None:
                        await trio.sleep(0.5)
                        continue
                if ci.status != "active":
                    settled = True
                    break
                if ci.active_turn is not None and not interrupted:
                    interrupted = True
                    try:
                        await conn.call("turn/interrupt", {"threadId": child, "turnId": ci.active_turn})
                    except CodexError as exc:
                        log.info("turn/interrupt of sub-agent %s failed: %s", child, exc.message)
                with trio.move_on_after(1.0):  # wake on its next status change, else look again
                    await ci.status_event.wait()
        if ci.loaded_generation == self.generation and self.conn is not None:
            try:
                await self.conn.call("thread/unsubscribe", {"threadId": child})
            except CodexError as exc:
                log.info("thread/unsubscribe of %s failed: %s", child, exc.message)
        ci.loaded_generation = None
        return {"interrupted": interrupted, "status": ci.status, "settled": settled}

    def release_relation_lease(self, root_thread_id: str) -> list[str]:
        """Forget the root's relation set (after its release finished, and after the child
        process's exit when the release retired it). Returns the children it held."""
        info = self.threads.get(root_thread_id)
        if info is None:
            return []
        children, info.children = list(info.children), {}
        return children

    async def release_thread(self, thread_id: str) -> None:
        """Stop tracking ``thread_id`` as a loaded session: abort its operations, tell the
        server (``thread/unsubscribe``) and mark it unloaded (its id is kept). A runtime with
        no loaded session may then be retired by the idle reaper (R-RT-6). Its verified
        sub-agents are released first (:meth:`drain_relations`, R-D-1)."""
        await self.drain_relations(thread_id)
        for op in [self.active, *self._queue]:
            if op is not None and op.thread_id == thread_id and not op.terminal:
                self.abort(op)
                with trio.move_on_after(self.config.stop_budget + 11):
                    await op._done.wait()
        try:
            await self.unload_thread(thread_id)
        except CodexError as exc:
            log.info("thread/unsubscribe failed: %s", exc.message)
        self.release_relation_lease(thread_id)

    # -- close ---------------------------------------------------------------------------

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


@contextlib.asynccontextmanager
async def open_runtime(config: RuntimeConfig | None = None,
                       **kwargs: Unpack[RuntimeOptions]) -> AsyncIterator[Runtime]:
    """``async with open_runtime(RuntimeConfig(...)) as rt:`` — a supervised app-server for
    one channel. Nothing is spawned until the first operation (or ``rt.ensure_started()``).
    Leaving the block stops the active operation (within the stop budget), cancels queued
    ones, and reaps the child. Cancelling the block does the same, shielded.

    This is a Trio API: under asyncio (``asyncio.run``, Jupyter) use :mod:`codexrt.aio`, from
    plain synchronous code :mod:`codexrt.blocking`."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError("codexrt.open_runtime() runs under Trio; from asyncio use "
                           "codexrt.aio.open_runtime(), from synchronous code codexrt.blocking.connect()") from None
    if config is None:
        config = RuntimeConfig(**kwargs)
    elif kwargs:
        config = attrs.evolve(config, **kwargs)
    async with unwrap_single_group():
        async with trio.open_nursery() as nursery:
            rt = Runtime(config, nursery)
            nursery.start_soon(rt._fifo_worker)
            if config.idle_timeout is not None:
                nursery.start_soon(rt._idle_reaper)
            try:
                yield rt
            finally:
                await rt.aclose()
                nursery.cancel_scope.cancel()


def resolved_cli(config: RuntimeConfig, cli_path: str | None) -> tuple[list[str] | None, dict[str, str]]:
    """The argv prefix that runs the CLI the runtime launched (``cli_path`` is its startup
    label) and the environment its child got. ``(None, env)`` when the runtime was started
    from ``transports`` (no CLI to ask) or the CLI is no longer where it was."""
    env = dict(config.env if config.env is not None else os.environ)
    if config.codex_home:
        env["CODEX_HOME"] = config.codex_home
    if config.transports is not None or cli_path is None:
        return None, env
    from codexrt._io._discovery import discover_cli, launch_argv

    try:
        result = discover_cli(explicit=config.codex_bin, env=env)
    except CodexError:
        return None, env
    for cand in result.candidates:
        if str(cand.path) == cli_path:
            return launch_argv(cand, []), env
    return None, env
