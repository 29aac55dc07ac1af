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

*Where it lives*: :class:`Runtime` holds the state (``__init__``) and is assembled from parts,
one module each — ``_lifecycle`` (start, generations, reset, fault, rebuild, idle, close, the
public port), ``_routing`` (reader events to streams), ``_interaction_glue`` (server requests,
answers, plans), ``_operations`` (:class:`Operation`, creating and finding operations),
``_dispatch`` (the FIFO worker, thread bootstrap, turn start, settings gate), ``_stop`` (abort,
interrupt, stop watchdog) and ``_relations`` (sub-agents, release). ``_config`` has
:class:`RuntimeConfig`.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import secrets
from typing import Any, AsyncIterator, Awaitable, Callable, Unpack

import attrs
import trio

from codexrt._connection import Connection
from codexrt._sansio._errors import CodexError
from codexrt._runtime._events import EventStream
from codexrt._io._context_probe import ContextCapabilityProbe
from codexrt._sansio._redact import Redactor
from codexrt._sansio._states import RUNTIME_TABLE, Machine, RuntimeEvent, RuntimeState
from codexrt._runtime._options import RuntimeOptions
from codexrt._io._util import unwrap_single_group
from codexrt._runtime._interactions import (
    SUPPORTED_SERVER_REQUESTS,
    Interaction,
    InteractionPolicy,
    InteractionRegistry,
    PlanExecution,
    PrivacyStore,
)
from codexrt._sansio._plans import PlanTracker
# ChildHandle, OperationResult, resolved_cli (and the names of __all__) are also imported from here.
from codexrt._runtime._operations import ChildHandle, Operation, OperationResult, _ThreadInfo
from codexrt._runtime._config import RuntimeConfig, resolved_cli
from codexrt._runtime._lifecycle import RuntimeLifecycle
from codexrt._runtime._routing import RuntimeRouting
from codexrt._runtime._interaction_glue import RuntimeInteractions
from codexrt._runtime._dispatch import RuntimeDispatch
from codexrt._runtime._stop import RuntimeStops
from codexrt._runtime._relations import RuntimeRelations
from codexrt._runtime._operations import RuntimeOperations

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


class Runtime(RuntimeLifecycle, RuntimeRouting, RuntimeInteractions, RuntimeOperations, RuntimeDispatch,
              RuntimeStops, RuntimeRelations):
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
        self._starts_cancelled = 0  # bumped when reset() finds no child: pending starts fail
        self._started_in: trio.CancelScope | None = None  # the scope of the start that made the current child
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
