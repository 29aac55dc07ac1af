# size: the public blocking facade (one module users import) with its approval bridge: the policies, the callback host that runs a callback where the caller waits, and the facade classes share the portal and ApprovalRequest; a split would move public names.
"""A blocking facade over the Trio runtime, for scripts, notebooks and asyncio code.

Why it exists
-------------
codexrt is a Trio library: ``async with codexrt.open_runtime() as rt`` needs a Trio loop.
A Jupyter cell already runs inside an asyncio loop, a script has no loop at all, and asyncio
programs must not start a second loop on their own thread. This module gives all of them the
same capabilities through plain blocking calls::

    import codexrt.blocking

    with codexrt.blocking.connect(cwd=".") as rt:
        result = rt.send("Summarise this repository in one sentence.")
        print(result.final_text)

How it works
------------
:func:`connect` starts a **portal** (``codexrt._portal``): one dedicated thread that runs
``trio.run``; inside it ``open_runtime`` owns the app-server child exactly as in async code,
plus a small nursery of the portal's own. Every blocking method submits one task to that
nursery (through ``trio.from_thread.run_sync`` with the loop's token) and waits for its
:class:`concurrent.futures.Future`; even reading an operation's state goes through the portal.
The caller's thread — and any asyncio loop running on it — is never touched, so the facade works the same in a notebook cell, a script, a worker thread or
(through the ``a*`` wrappers, which hop to a worker thread with ``asyncio.to_thread``) in
asyncio code, without ``nest_asyncio``.

Waits and interrupts
--------------------
* Waiting on a future happens in slices of :data:`codexrt._portal.WAIT_SLICE` seconds, so ``Ctrl+C`` (a
  notebook's *interrupt kernel*) is delivered promptly on every platform.
* Cancelling an awaited ``asend()`` (a timeout around it, a cancelled task, a notebook's
  *interrupt*) stops the turn the same way before the cancellation goes on.
* A ``KeyboardInterrupt`` while waiting for a turn (``send``, iterating ``stream``, ``wait``)
  stops that turn (R-OP-5: ``turn/interrupt``, or a local cancel when it never started), waits
  for its terminal within the runtime's stop budget, and re-raises. A second one during that
  wait kills the app-server (its process group) instead of waiting, then re-raises; the turn
  ends ``failed`` and the next send starts a new child. Nothing is left running.
* Short calls (``call``, catalogs, history, ``respond`` …) are bounded by the runtime's RPC
  budget (``rpc_timeout``, R-WIRE-4). Waiting for a turn is unbounded unless you pass
  ``timeout=``: a turn may legitimately run for hours, ``abort`` and ``Ctrl+C`` end it, and a
  child exit settles it (R-RT-4). A ``timeout`` that runs out stops the turn and raises
  :class:`~codexrt.RpcTimeout` (code ``TURN_TIMEOUT``).

Approvals
---------
Native approval requests (R-INT-3) are answered by a *policy*, chosen per connection and
overridable per send, and run as the runtime's own interaction policy
(``Runtime.set_interaction_policy``; replies are validated and sent by the runtime): ``"decline"`` (the default — approvals are never granted by default),
``"cancel"``, ``"accept"`` / ``"acceptForSession"`` (explicit opt-ins), ``"manual"`` (leave the
request pending: answer it yourself with :meth:`BlockingRuntime.respond`, e.g. while iterating a
stream), or a **callable** ``(ApprovalRequest) -> decision``. The callable runs where the turn's
caller is: in the thread blocked in ``send()``/``wait()``/iterating the operation, or on the
asyncio loop awaiting ``asend()`` (with that task's context) — so in a notebook its ``print()``
and ``input()`` belong to the cell that runs the turn, even for a runtime made in an earlier
cell — and in a worker thread when nobody waits. It may block on ``input()`` without stalling
the runtime (the reader never waits for it); a request resolved meanwhile (turn interrupted,
answered elsewhere) abandons it. A callback that raises declines. The decisions
are the runtime's own vocabulary (``Interaction.answer``, typed as ``codexrt.Decision``).

Closing
-------
``close()`` (or leaving the ``with`` block, or garbage collection, or interpreter exit via
:func:`weakref.finalize`) stops the active turn within the stop budget, cancels queued ones,
retires and reaps the app-server child, and joins the thread (bounded). The thread holds no
reference to the facade object, so dropping the last reference is enough.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import logging
import threading
import weakref
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Literal, Mapping, TypedDict, Union, Unpack

import attrs
import trio

from codexrt._portal import CallerHost, Portal, StreamPump, _now
from codexrt._sansio._errors import (
    BusyResourceError,
    ClosedError,
    CodexError,
    ConfigError,
    InteractionError,
    RpcTimeout,
    TurnTimeout,
)
from codexrt._runtime._event_types import Decision
from codexrt._runtime._events import CodexEvent, Event
from codexrt._runtime._runtime import Interaction, Operation, OperationResult, Runtime, RuntimeConfig, open_runtime
from codexrt._runtime._options import RuntimeOptions
from codexrt._sansio._methods import (
    DECISIONS,
    REFUSAL_CODE,
    SERVER_REQUESTS,
    decision_reply,
    describe_request,
    interaction_kind,
)
from codexrt._sansio._settings import Settings

__all__ = [
    "connect",
    "BlockingRuntime",
    "BlockingOperation",
    "ApprovalRequest",
    "ApprovalPolicy",
    "approval_reply",
    "DECISIONS",
    "POLICIES",
    "DEFAULT_START_TIMEOUT",
]

log = logging.getLogger("codexrt.blocking")

#: Decisions an approval policy or callback may return (R-INT-3): ``codexrt.Decision``'s values.
#: Named policies; ``"manual"`` leaves requests pending for :meth:`BlockingRuntime.respond`.
POLICIES = (*DECISIONS, "manual")
#: Bound of starting the facade's thread and of closing it beyond the stop budget.
DEFAULT_START_TIMEOUT = 30.0
_CLOSE_MARGIN = 30.0
#: JSON-RPC error code codexrt uses to refuse a server request that has no "decline" result.
DECLINED_RPC_CODE = REFUSAL_CODE

#: A named policy, or a callback returning the decision (a full result dict, or None: decline).
ApprovalPolicy = Union[Decision, Literal["manual"],
                       Callable[["ApprovalRequest"], Union[Decision, dict[str, Any], None]]]


class SendOptions(TypedDict, total=False):
    """The keywords of :meth:`BlockingRuntime.submit` that ``send``/``stream``/``asend``/
    ``astream`` pass on (typed, so a checker catches an unknown keyword)."""

    thread_id: str | None
    approvals: ApprovalPolicy | None
    settings: Settings | None
    client_message_id: str | None
    images: tuple[str, ...] | list[str]
    additional_context: dict[str, Any] | None



@attrs.frozen
class ApprovalRequest:
    """A native server → client request as an approval callback sees it (R-INT-1, R-INT-3).

    ``key``/``dialog_token`` are the opaque identities the answer goes back with; ``params`` is
    the native request's params, unchanged."""

    key: str
    dialog_token: str
    method: str
    params: dict[str, Any]
    thread_id: str | None = None
    turn_id: str | None = None
    item_id: str | None = None

    @classmethod
    def from_event(cls, ev: CodexEvent) -> "ApprovalRequest":
        """From an ``interactionRequested`` event."""
        if ev.kind != "interactionRequested":
            raise ConfigError(f"not an interactionRequested event: {ev.kind!r}")
        p = ev.payload
        return cls(p["interactionKey"], p["dialogToken"], p["method"], dict(p.get("params") or {}),
                   ev.thread_id, ev.turn_id, ev.item_id)

    @classmethod
    def from_interaction(cls, inter: Interaction) -> "ApprovalRequest":
        return cls(inter.key, inter.dialog_token, inter.method, dict(inter.params),
                   inter.thread_id, inter.turn_id, inter.item_id)

    @property
    def kind(self) -> str:
        """``command``, ``fileChange``, ``permissions``, ``userInput``, ``elicitation``,
        ``mcpToolApproval`` (the real server's approval of an MCP tool call, sent as an
        elicitation), ``toolCall`` or the raw method for anything else (the method table's
        ``label``)."""
        if interaction_kind(self.method, self.params) == "mcpToolApproval":
            return "mcpToolApproval"
        row = SERVER_REQUESTS.get(self.method)
        return row.label if row is not None else self.method

    @property
    def command(self) -> str | None:
        cmd = self.params.get("command")
        if isinstance(cmd, list):
            return " ".join(str(c) for c in cmd)
        return cmd if isinstance(cmd, str) else None

    @property
    def cwd(self) -> str | None:
        cwd = self.params.get("cwd")
        return cwd if isinstance(cwd, str) else None

    @property
    def reason(self) -> str | None:
        reason = self.params.get("reason")
        return reason if isinstance(reason, str) else None

    def describe(self) -> str:
        """One human line: what is being asked (``Interaction.describe``)."""
        return describe_request(self.method, self.params)


def approval_reply(method: str, decision: Any, params: Mapping[str, Any] | None = None) -> tuple[str, Any]:
    """Map a policy decision to what goes on the wire (R-INT-3, R-INT-4): the runtime's own
    vocabulary (``Interaction.reply_for``), with :class:`ConfigError` for a decision the request
    cannot take.

    Returns ``("result", result)`` or ``("error", (code, message))``. ``None`` means
    ``"decline"``. A dict is sent as the result unchanged (the runtime validates it). Requests
    without a declining result (user input, permissions, dynamic tool calls) are refused with a
    JSON-RPC error; MCP elicitations are declined/cancelled with ``content: null``. ``accept``
    for a request that needs content (user input, a form) is refused: nothing is ever accepted
    on the host's behalf without the data the request asks for. ``params`` (the request's)
    tells an MCP tool-call approval apart from a form: ``accept`` / ``acceptForSession``
    approve that call (``{action: "accept", content: {}}``, the latter remembered for the
    session when the server offers it)."""
    try:
        return decision_reply(method, decision, params)
    except InteractionError as exc:
        raise ConfigError(exc.message) from None


def _check_policy(policy: ApprovalPolicy) -> ApprovalPolicy:
    if callable(policy) or policy in POLICIES:
        return policy
    raise ConfigError(f"approvals must be one of {list(POLICIES)} or a callable, not {policy!r}")


# -- approvals: the runtime's own interaction policy --------------------------------------------


class _Approvals:
    """The facade's approval policies as one ``Runtime.set_interaction_policy`` callable.
    Lives in the Trio thread (its table is only touched there) and holds no reference to the
    facade."""

    def __init__(self, default: ApprovalPolicy) -> None:
        self.default = default
        self._per_op: dict[str, tuple[Operation, ApprovalPolicy | None, CallerHost | None]] = {}

    def set_for(self, op: Operation, policy: ApprovalPolicy | None, host: CallerHost | None = None) -> None:
        """Use ``policy`` (None: the default) for the interactions of ``op``, and run a
        callback on ``host`` (the thread or loop that waits for ``op``) when it can; forgotten
        once ``op`` has ended."""
        for op_id in [k for k, (o, _p, _h) in self._per_op.items() if o.terminal]:
            del self._per_op[op_id]
        self._per_op[op.id] = (op, policy, host)

    async def __call__(self, inter: Interaction) -> Any:
        entry = self._per_op.get(inter.operation_id or "")
        policy = entry[1] if entry is not None and entry[1] is not None else self.default
        host = entry[2] if entry is not None else None
        if policy == "manual":
            return None  # left pending for BlockingRuntime.respond
        decision: Any = policy
        if callable(policy):
            box = await _ask(policy, inter, host)
            if not box:
                return None  # resolved, expired or answered meanwhile
            decision = box[0]
        try:
            how, value = inter.reply_for(decision)
        except InteractionError as exc:
            log.warning("%s; declining", exc.message)
            how, value = inter.reply_for("decline")
        if how == "result":
            return value  # validated and sent by the runtime (by: "policy")
        try:
            await inter.respond_error(*value)
        except InteractionError as exc:  # answered, resolved or expired meanwhile
            log.debug("interaction %s not answered: %s", inter.key, exc.message)
        except CodexError as exc:
            log.warning("could not answer %s: %s", inter.method, exc.message)
        return None


async def _ask(policy: Callable[[ApprovalRequest], Any], inter: Interaction,
               host: CallerHost | None = None) -> list[Any]:
    """The callback's decision (it may block on ``input()``): run by ``host`` — the thread or
    asyncio loop waiting for the operation, so its ``print()`` and ``input()`` happen where the
    caller is (a notebook cell) — or, when nothing waits there, in a worker thread. Abandoned
    (empty list) when the interaction settles first. A callback that raises declines."""
    request = ApprovalRequest.from_interaction(inter)
    box: list[Any] = []
    async with trio.open_nursery() as n:
        async def ask() -> None:
            try:
                got = await _on_host(host, functools.partial(policy, request))
                if got is None:
                    got = [await trio.to_thread.run_sync(functools.partial(policy, request), abandon_on_cancel=True)]
                box.extend(got)
            except Exception:  # noqa: BLE001 - a broken callback declines, never grants
                log.exception("approval callback failed; declining %s", inter.method)
                box.append("decline")
            n.cancel_scope.cancel()

        async def watch() -> None:
            await inter.settled.wait()  # interrupted / expired / answered elsewhere
            n.cancel_scope.cancel()

        n.start_soon(ask)
        n.start_soon(watch)
    return box


async def _on_host(host: CallerHost | None, fn: Callable[[], Any]) -> list[Any] | None:
    """``[fn()]`` run by ``host`` (raising what it raised), or None when ``host`` has nobody
    waiting to run it. Cancelling abandons it: a job not started yet is skipped."""
    if host is None:
        return None
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    out: list[tuple[bool, Any]] = []
    abandoned: list[bool] = []

    def job() -> None:
        if abandoned:
            return
        try:
            out.append((True, fn()))
        except Exception as exc:  # noqa: BLE001 - handed back to the Trio side
            out.append((False, exc))
        finally:  # a KeyboardInterrupt goes on to the waiting caller, which stops the turn
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

    if not host.post(job):
        return None
    try:
        await done.wait()
    except trio.Cancelled:
        abandoned.append(True)
        raise
    if not out:
        return []  # interrupted in the caller's thread: no decision
    ok, value = out[0]
    if not ok:
        raise value
    return [value]


class _LoopHost(CallerHost):
    """Runs jobs on an asyncio loop's thread (``asend``: the loop awaits a worker thread, so
    the loop itself is where the caller is)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.context = contextvars.copy_context()  # the awaiting task's (a cell's) context

    def post(self, job: Callable[[], None]) -> bool:
        try:
            self.loop.call_soon_threadsafe(job, context=self.context.copy())
        except RuntimeError:  # the loop is closed
            return False
        return True


# -- public facade -----------------------------------------------------------------------------


class BlockingOperation:
    """A running send (or compact/review) seen from a blocking caller.

    Iterate it for its events as they stream (``for ev in op``), or read just the assistant
    text (``for text in op.text()``); :meth:`wait` returns the :class:`OperationResult`. One
    thread may iterate at a time. Used as a context manager, leaving the block stops the
    operation if it has not ended."""

    def __init__(self, owner: "BlockingRuntime", op: Operation, ident: tuple[str, str, str | None],
                 host: CallerHost | None = None) -> None:
        self._owner = owner
        # Where approval callbacks of this operation run while a caller waits for it.
        self._host = host if host is not None and not isinstance(host, _LoopHost) else None
        self._portal = owner._portal
        self._rt = owner.runtime
        self._op = op  # Trio-owned: read only through the portal
        self._id, self._kind, self._client_message_id = ident
        self._iter_lock = threading.Lock()
        self._pump: StreamPump | None = None  # started by the first next_event

    def __repr__(self) -> str:
        return f"<BlockingOperation {self._op!r}>"

    @property
    def id(self) -> str:
        return self._id

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def client_message_id(self) -> str | None:
        return self._client_message_id

    @property
    def thread_id(self) -> str | None:
        """The thread (known once bootstrap confirmed it). A snapshot read (through the portal)."""
        return self._portal.read(lambda: self._op.thread_id)

    @property
    def turn_id(self) -> str | None:
        return self._portal.read(lambda: self._op.turn_id)

    @property
    def done(self) -> bool:
        return self._portal.read(lambda: self._op.terminal)

    @property
    def result(self) -> OperationResult | None:
        """The terminal result, or None while running."""
        return self._portal.read(lambda: self._op.result)

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event, or None once the operation ended and every event was read.
        ``timeout`` bounds this one wait (:class:`RpcTimeout`); no bound by default (see the
        module doc). KeyboardInterrupt stops the operation and re-raises."""
        if not self._iter_lock.acquire(blocking=False):
            raise BusyResourceError("another thread is already iterating this operation")
        try:
            if self._pump is None:
                self._pump = StreamPump(lambda: self._op.stream, self._portal)
                self._portal.start(self._pump.run)
            try:
                return self._pump.get(None if timeout is None else _now() + timeout, self._host)
            except TimeoutError:
                raise RpcTimeout(f"waiting for the next event: nothing after {timeout:g}s") from None
            except KeyboardInterrupt:
                self._stop_and_settle()
                raise
        finally:
            self._iter_lock.release()

    def __iter__(self) -> Iterator[Event]:
        while True:
            ev = self.next_event()
            if ev is None:
                return
            yield ev

    def text(self) -> Iterator[str]:
        """Only the assistant's text deltas, as they stream."""
        for ev in self:
            if ev.is_delta and ev.payload.get("stream") == "item/agentMessage/delta":
                yield ev.payload["delta"]

    def wait(self, timeout: float | None = None) -> OperationResult:
        """Wait for the terminal (R-OP-4). With ``timeout``, a turn still running then is
        stopped and :class:`RpcTimeout` (code ``TURN_TIMEOUT``) is raised; without, the wait
        is unbounded (a turn may run for hours; abort/Ctrl+C/a child exit end it).
        KeyboardInterrupt stops the turn (R-OP-5), waits for its terminal, and re-raises."""
        return self._guarded(self._op.wait, timeout, "turn", stop_on_timeout=True)

    def abort(self) -> str:
        """Stop this operation (R-OP-5); returns the stop path (see ``Runtime.abort``)."""
        return self._portal.run_sync(self._rt.abort, self._op)

    def _guarded(self, afn: Callable[[], Awaitable[Any]], timeout: float | None, what: str,
                 stop_on_timeout: bool = False) -> Any:
        fut, scopes = self._portal.start(afn)
        try:
            return self._portal.wait(fut, timeout, self._host)
        except TimeoutError:
            self._portal.cancel(scopes)
            if stop_on_timeout:
                self._stop_and_settle()
                raise TurnTimeout(f"{what} still running after {timeout:g}s; it was stopped",
                                  details={"result": self._result_wire()}) from None
            raise RpcTimeout(f"{what}: nothing after {timeout:g}s") from None
        except KeyboardInterrupt:
            self._portal.cancel(scopes)
            self._stop_and_settle()
            raise

    def _result_wire(self) -> dict[str, Any] | None:
        return self._portal.read(lambda: self._op.result.to_wire() if self._op.result is not None else None)

    def _stop_and_settle(self) -> None:
        """Abort and wait for the terminal within the stop budget (+ the kill margin). A
        second KeyboardInterrupt during that wait kills the app-server's process group at once
        (the turn then fails with ``CHILD_EXITED``; the next send starts a new child), waits
        for the settle (bounded) and re-raises."""
        try:
            if self.done:
                return
        except ClosedError:
            return
        try:
            self.abort()
            fut, _ = self._portal.start(self._op.wait)
            try:
                self._portal.wait(fut, self._owner.config.stop_budget + 15)
            except KeyboardInterrupt:
                self._portal.run_sync(self._rt.kill_child)
                try:
                    self._portal.wait(fut, _KILL_SETTLE)
                except (KeyboardInterrupt, TimeoutError):
                    pass
                raise
        except (ClosedError, TimeoutError):
            pass

    def __enter__(self) -> "BlockingOperation":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_and_settle()


_KILL_SETTLE = 10.0  # seconds to wait for a killed child's turn to settle (SIGKILL is prompt)


class BlockingRuntime:
    """A supervised app-server driven from blocking code. Create with :func:`connect`.

    All methods may be called from any thread except the runtime's own; they never touch the
    caller's event loop. ``a*`` methods are awaitable wrappers for asyncio code."""

    def __init__(self, config: RuntimeConfig, *, approvals: ApprovalPolicy = "decline",
                 start_timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self._config = config
        self._approvals = policy = _Approvals(_check_policy(approvals))
        # The portal's thread holds the policy, never this facade (so it can be collected).
        self._portal: Portal[Runtime] = Portal(
            lambda: open_runtime(config), setup=lambda rt, _nursery: rt.set_interaction_policy(policy),
            close_resource=lambda rt: rt.aclose(), start_timeout=start_timeout,
            close_timeout=config.stop_budget + _CLOSE_MARGIN, name="codexrt-blocking")
        self._finalizer = weakref.finalize(self, self._portal.close)
        # At interpreter exit, close before the handlers registered earlier (atexit is LIFO).
        # weakref.finalize's own exit hook is registered once per process, by the first finalizer
        # ever made — since the redactor's secret holders, one made at import — and then ran too
        # late: the running turn was no longer interrupted at exit (test_blocking's
        # test_interpreter_exit_stops_the_turn_and_reaps_the_child). close() unregisters.
        atexit.register(self._finalizer)

    def __repr__(self) -> str:
        rt = self._portal.resource
        return f"<BlockingRuntime {self._portal.read(lambda: repr(rt))}{' closed' if self.closed else ''}>"

    @property
    def config(self) -> RuntimeConfig:
        return self._config

    @property
    def runtime(self) -> Runtime:
        """The underlying Trio :class:`Runtime`. Touch it only inside :meth:`run_async`."""
        assert self._portal.resource is not None
        return self._portal.resource

    @property
    def closed(self) -> bool:
        return self._portal.closed

    # -- lifecycle

    def ensure_started(self, timeout: float | None = None) -> dict[str, Any]:
        """Start the app-server now (else the first operation does) and return
        :meth:`snapshot`. Bounded by ``timeout`` (default: handshake budget + RPC budget)."""
        bound = timeout if timeout is not None else self.config.handshake_timeout + self.config.rpc_timeout

        async def start() -> None:
            await self.runtime.ensure_started()

        self._portal.call(start, timeout=bound, what="starting the app-server")
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        """State, generation, pid, busy, … (R-RT-6)."""
        return self._portal.run_sync(self.runtime.runtime_snapshot)

    def close(self) -> None:
        """Stop the active turn (within the stop budget), cancel queued ones, reap the child,
        join the thread. Idempotent."""
        atexit.unregister(self._finalizer)
        self._finalizer()

    def __enter__(self) -> "BlockingRuntime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations

    def submit(self, text: str, *, thread_id: str | None = None, approvals: ApprovalPolicy | None = None,
               settings: Settings | None = None, client_message_id: str | None = None,
               images: tuple[str, ...] | list[str] = (), additional_context: dict[str, Any] | None = None,
               ) -> BlockingOperation:
        """Queue a user message (R-OP-1) and return at once. ``thread_id=None`` starts a new
        thread; ``approvals`` overrides the connection's policy for this operation. An approval
        callback runs in the thread that waits for the operation (``wait``, iterating it,
        ``send``) — where its ``print()`` and ``input()`` belong, e.g. the notebook cell that
        runs the turn — and in a worker thread when none waits."""
        return self._submit(text, CallerHost(), thread_id=thread_id, approvals=approvals, settings=settings,
                            client_message_id=client_message_id, images=images,
                            additional_context=additional_context)

    def _submit(self, text: str, host: CallerHost, *, thread_id: str | None = None,
                approvals: ApprovalPolicy | None = None, settings: Settings | None = None,
                client_message_id: str | None = None, images: tuple[str, ...] | list[str] = (),
                additional_context: dict[str, Any] | None = None) -> BlockingOperation:
        policy = _check_policy(approvals) if approvals is not None else None
        rt = self.runtime

        approvals = self._approvals

        def queue() -> Operation:
            op = rt.send(text, thread_id=thread_id, client_message_id=client_message_id, images=images,
                         additional_context=additional_context, settings=settings)
            approvals.set_for(op, policy, host)
            return op

        return self._operation(queue, host)

    def _operation(self, start: Callable[[], Operation], host: CallerHost | None = None) -> BlockingOperation:
        """Start an operation in the Trio thread; its identities come back with it."""
        def run() -> tuple[Operation, tuple[str, str, str | None]]:
            op = start()
            return op, (op.id, op.kind, op.client_message_id)

        return BlockingOperation(self, *self._portal.run_sync(run), host=host)

    def stream(self, text: str, **kwargs: Unpack[SendOptions]) -> BlockingOperation:
        """Like :meth:`submit`; named for ``for ev in rt.stream("…"):``."""
        return self.submit(text, **kwargs)

    def send(self, text: str, *, timeout: float | None = None,
             on_event: Callable[[CodexEvent], Any] | None = None,
             **kwargs: Unpack[SendOptions]) -> OperationResult:
        """Send a message and wait for the turn's terminal; returns its
        :class:`OperationResult` (``status`` is ``completed``, ``failed``, ``interrupted`` or
        ``cancelled``; ``final_text`` the last assistant message). ``on_event`` sees every
        event as it streams (in this thread). Waiting: see :meth:`BlockingOperation.wait`."""
        return self._finish(self.submit(text, **kwargs), timeout, on_event)

    def _finish(self, op: BlockingOperation, timeout: float | None,
                on_event: Callable[[CodexEvent], Any] | None) -> OperationResult:
        if on_event is not None:
            deadline = None if timeout is None else _now() + timeout
            with op:
                for ev in _bounded_iter(op, deadline):
                    on_event(ev)
                return op.wait(None if deadline is None else max(0.0, deadline - _now()))
        return op.wait(timeout)

    def compact(self, thread_id: str) -> BlockingOperation:
        return self._operation(functools.partial(self.runtime.compact, thread_id))

    def review(self, thread_id: str, target: dict[str, Any] | None = None) -> BlockingOperation:
        return self._operation(functools.partial(self.runtime.review, thread_id, target))

    def abort(self, op: BlockingOperation | str | None = None) -> str:
        """Stop an operation (default: the active one); returns the stop path (R-OP-5)."""
        target: Operation | str | None = op._op if isinstance(op, BlockingOperation) else op
        return self._portal.run_sync(self.runtime.abort, target)

    def update_settings(self, settings: Settings | None = None, **changes: Any) -> int:
        """Change the desired settings (R-SET-1); returns the new revision."""
        return self._portal.run_sync(functools.partial(self.runtime.update_settings, settings, **changes))

    # -- interactions

    def pending_interactions(self) -> list[ApprovalRequest]:
        """Requests waiting for an answer, in delivery order (R-INT-2)."""
        return self._portal.run_sync(
            lambda: [ApprovalRequest.from_interaction(i) for i in self.runtime.pending_interactions()])

    def respond(self, request: ApprovalRequest | CodexEvent, decision: Decision | dict[str, Any] | None) -> None:
        """Answer an approval yourself (``"accept"``, ``"acceptForSession"``, ``"decline"``,
        ``"cancel"`` or a full result dict). Refused answers raise :class:`InteractionError`
        (R-INT-1). Bounded by the RPC budget."""
        if isinstance(request, CodexEvent):
            request = ApprovalRequest.from_event(request)
        how, value = approval_reply(request.method, decision, request.params)
        rt = self.runtime
        if how == "result":
            self._portal.call(rt.respond_interaction, request.key, request.dialog_token, value,
                              timeout=self.config.rpc_timeout + 5, what="respond")
        else:
            self._portal.call(rt.respond_interaction_error, request.key, request.dialog_token, *value,
                              timeout=self.config.rpc_timeout + 5, what="respond")

    # -- native reads (history, catalogs): the runtime's connection, never the send FIFO

    def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """One native JSON-RPC request on the runtime's connection (starting it if needed) and
        its ``result``. Bounded by ``timeout`` (default: the runtime's RPC budget, plus the
        handshake budget when the app-server must start first)."""
        rt = self.runtime
        rpc_timeout = timeout if timeout is not None else self.config.rpc_timeout

        async def do() -> Any:
            conn = await rt.ensure_started()
            return await conn.call(method, params, timeout=rpc_timeout)

        return self._portal.call(do, timeout=rpc_timeout + self.config.handshake_timeout + 5, what=method)

    def list_threads(self, **params: Any) -> dict[str, Any]:
        """``thread/list`` (one page; pass ``cursor=`` for the next, R-H-6)."""
        return self.call("thread/list", params)

    def read_thread(self, thread_id: str, *, include_turns: bool = False) -> dict[str, Any]:
        """``thread/read`` (metadata; never resumes the thread, R-H-1)."""
        return self.call("thread/read", {"threadId": thread_id, "includeTurns": include_turns})

    def list_turns(self, thread_id: str, **params: Any) -> dict[str, Any]:
        """``thread/turns/list`` — one history page (``cursor=``, ``limit=``), R-H-1."""
        return self.call("thread/turns/list", {"threadId": thread_id, **params})

    def list_models(self, **params: Any) -> dict[str, Any]:
        """``model/list`` (R-CAT-1)."""
        return self.call("model/list", params)

    def list_skills(self, cwds: list[str] | None = None, **params: Any) -> dict[str, Any]:
        """``skills/list`` (R-CAT-1)."""
        if cwds is not None:
            params["cwds"] = list(cwds)
        return self.call("skills/list", params)

    def mcp_status(self, **params: Any) -> dict[str, Any]:
        """``mcpServerStatus/list`` (R-CAT-1)."""
        return self.call("mcpServerStatus/list", params)

    # -- escape hatch

    def run_async(self, afn: Callable[[Runtime], Awaitable[Any]], *, timeout: float | None = None) -> Any:
        """Run ``await afn(runtime)`` in the runtime's Trio thread and return its value — for
        anything the facade does not wrap. ``timeout`` cancels it (:class:`RpcTimeout`)."""
        return self._portal.call(afn, self.runtime, timeout=timeout, what="run_async")

    # -- asyncio wrappers (never touch the caller's loop beyond awaiting a worker thread)

    async def asend(self, text: str, *, timeout: float | None = None,
                    on_event: Callable[[CodexEvent], Any] | None = None,
                    **kwargs: Unpack[SendOptions]) -> OperationResult:
        """``await rt.asend("…")`` from asyncio code: :meth:`send`, waited for in a worker thread.
        Cancelling the awaiting task (a timeout around it, a notebook's *interrupt*) stops the
        turn (R-OP-5), as ``Ctrl+C`` does for :meth:`send`, waits for it to settle (within the
        stop budget) and re-raises. Approval callbacks run on the loop's thread, where the
        awaiting code is (their ``print()`` reaches the cell that runs the turn)."""
        host = _LoopHost(asyncio.get_running_loop())
        op = await asyncio.to_thread(functools.partial(self._submit, text, host, **kwargs))
        try:
            return await asyncio.to_thread(self._finish, op, timeout, on_event)
        except BaseException:  # cancelled or interrupted: the turn must not go on without us
            await _settle_from_asyncio(op)
            raise

    async def acall(self, method: str, params: Any = None, **kwargs: Any) -> Any:
        return await asyncio.to_thread(functools.partial(self.call, method, params, **kwargs))

    async def astream(self, text: str, **kwargs: Unpack[SendOptions]) -> AsyncIterator[Event]:
        """``async for ev in rt.astream("…")`` from asyncio code."""
        op = await asyncio.to_thread(functools.partial(self.submit, text, **kwargs))
        while True:
            ev = await asyncio.to_thread(op.next_event)
            if ev is None:
                return
            yield ev

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


async def _settle_from_asyncio(op: BlockingOperation) -> None:
    """Stop ``op`` and wait for its terminal (bounded by the stop budget) in a worker thread,
    even if the awaiting task is cancelled again meanwhile."""
    stop = asyncio.ensure_future(asyncio.to_thread(op._stop_and_settle))
    while not stop.done():
        try:
            await asyncio.shield(stop)
        except asyncio.CancelledError:
            continue
        except BaseException:  # noqa: BLE001 - the caller re-raises its own error
            break


def _bounded_iter(op: BlockingOperation, deadline: float | None) -> Iterator[Event]:
    while True:
        remaining = None if deadline is None else max(0.0, deadline - _now())
        try:
            ev = op.next_event(remaining)
        except RpcTimeout:
            op._stop_and_settle()
            raise TurnTimeout("turn still running at its timeout; it was stopped",
                              details={"result": op._result_wire()}) from None
        if ev is None:
            return
        yield ev


def connect(config: RuntimeConfig | None = None, *, approvals: ApprovalPolicy = "decline",
            start: bool = False, start_timeout: float = DEFAULT_START_TIMEOUT,
            **config_kwargs: Unpack[RuntimeOptions]) -> BlockingRuntime:
    """Start a blocking runtime: ``with codexrt.blocking.connect(cwd=".") as rt: ...``.

    ``config``/``config_kwargs`` are :class:`RuntimeConfig` fields (``codex_bin``,
    ``codex_home``, ``cwd``, ``env``, ``settings`` …). ``approvals`` is the default approval
    policy (module doc; default ``"decline"``). Nothing is spawned until the first operation
    unless ``start=True``, which starts the app-server now so launch errors surface here."""
    if config is None:
        config = RuntimeConfig(**config_kwargs)
    elif config_kwargs:
        config = attrs.evolve(config, **config_kwargs)
    rt = BlockingRuntime(config, approvals=approvals, start_timeout=start_timeout)
    if start:
        try:
            rt.ensure_started()
        except BaseException:
            rt.close()
            raise
    return rt
