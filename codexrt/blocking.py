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
:func:`connect` starts **one dedicated thread** that runs ``trio.run``; inside it
``open_runtime`` owns the app-server child exactly as in async code, plus a small nursery of
the facade's own. Every blocking method submits one task to that nursery (through
``trio.from_thread.run_sync`` with the loop's token) and waits for its
:class:`concurrent.futures.Future`. The caller's thread — and any asyncio loop running on it —
is never touched, so the facade works the same in a notebook cell, a script, a worker thread or
(through the ``a*`` wrappers, which hop to a worker thread with ``asyncio.to_thread``) in
asyncio code, without ``nest_asyncio``.

Waits and interrupts
--------------------
* Waiting on a future happens in slices of :data:`_WAIT_SLICE` seconds, so ``Ctrl+C`` (a
  notebook's *interrupt kernel*) is delivered promptly on every platform.
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
overridable per send: ``"decline"`` (the default — approvals are never granted by default),
``"cancel"``, ``"accept"`` / ``"acceptForSession"`` (explicit opt-ins), ``"manual"`` (leave the
request pending: answer it yourself with :meth:`BlockingRuntime.respond`, e.g. while iterating a
stream), or a **callable** ``(ApprovalRequest) -> decision`` that runs in its own worker thread,
so it may block on ``input()`` without stalling the runtime; a request resolved meanwhile (turn
interrupted, answered elsewhere) abandons it. A callback that raises declines.

Closing
-------
``close()`` (or leaving the ``with`` block, or garbage collection, or interpreter exit via
:func:`weakref.finalize`) stops the active turn within the stop budget, cancels queued ones,
retires and reaps the app-server child, and joins the thread (bounded). The thread holds no
reference to the facade object, so dropping the last reference is enough.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import threading
import weakref
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Mapping, TypedDict, Union, Unpack

import attrs
import trio

from codexrt._sansio._errors import (
    BusyResourceError,
    ClosedError,
    CodexError,
    ConfigError,
    InteractionError,
    RpcTimeout,
    TurnTimeout,
)
from codexrt._runtime._events import CodexEvent
from codexrt._runtime._runtime import Interaction, Operation, OperationResult, Runtime, RuntimeConfig, open_runtime
from codexrt._sansio._elicitation import is_tool_approval, parse_elicitation, tool_approval_reply
from codexrt._runtime._options import RuntimeOptions
from codexrt._sansio._methods import SERVER_REQUESTS, interaction_kind
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

#: Decisions an approval policy or callback may return (R-INT-3).
DECISIONS = ("accept", "acceptForSession", "decline", "cancel")
#: Named policies; ``"manual"`` leaves requests pending for :meth:`BlockingRuntime.respond`.
POLICIES = (*DECISIONS, "manual")
#: Bound of starting the facade's thread and of closing it beyond the stop budget.
DEFAULT_START_TIMEOUT = 30.0
_CLOSE_MARGIN = 30.0
_WAIT_SLICE = 0.25
#: Events the pump moves from the Trio-side stream per batch at most, and how many may wait on
#: the caller's side before it pauses (it resumes below the low mark).
_BATCH = 256
_HIGH_WATER = 1024
_LOW_WATER = 256
#: JSON-RPC error code codexrt uses to refuse a server request that has no "decline" result.
DECLINED_RPC_CODE = -32000

ApprovalPolicy = Union[str, Callable[["ApprovalRequest"], Any]]


class SendOptions(TypedDict, total=False):
    """The keywords of :meth:`BlockingRuntime.submit` that ``send``/``stream``/``asend``/
    ``astream`` pass on (typed, so a checker catches an unknown keyword)."""

    thread_id: str | None
    approvals: ApprovalPolicy | None
    settings: Settings | None
    client_message_id: str | None
    images: tuple[str, ...] | list[str]
    additional_context: dict[str, Any] | None

_APPROVAL_METHODS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")


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
        elicitation), ``toolCall`` or the raw method for anything else."""
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
        """One human line: what is being asked."""
        if self.kind == "command":
            where = f" (in {self.cwd})" if self.cwd else ""
            return f"run command: {self.command}{where}"
        if self.kind == "fileChange":
            return "apply file changes" + (f": {self.reason}" if self.reason else "")
        if self.kind == "permissions":
            return "grant extra permissions" + (f": {self.reason}" if self.reason else "")
        if self.kind == "userInput":
            return "answer questions from the agent"
        if self.kind == "mcpToolApproval":
            tool = parse_elicitation(self.params).tool_name or "?"
            return f"run tool {tool} of MCP server {self.params.get('serverName', '?')}"
        if self.kind == "elicitation":
            return f"answer a form from MCP server {self.params.get('serverName', '?')}"
        return f"answer {self.method}"


def approval_reply(method: str, decision: Any, params: Mapping[str, Any] | None = None) -> tuple[str, Any]:
    """Map a policy decision to what goes on the wire (R-INT-3, R-INT-4).

    Returns ``("result", result)`` or ``("error", (code, message))``. ``None`` means
    ``"decline"``. A dict is sent as the result unchanged (the runtime validates it). Requests
    without a declining result (user input, permissions, dynamic tool calls) are refused with a
    JSON-RPC error; MCP elicitations are declined/cancelled with ``content: null``. ``accept``
    for a request that needs content (user input, a form) is a :class:`ConfigError`: nothing is
    ever accepted on the host's behalf without the data the request asks for. ``params`` (the
    request's) tells an MCP tool-call approval apart from a form: ``accept`` /
    ``acceptForSession`` approve that call (``{action: "accept", content: {}}``, the latter
    remembered for the session when the server offers it)."""
    if decision is None:
        decision = "decline"
    if isinstance(decision, dict):
        return "result", decision
    if decision not in DECISIONS:
        raise ConfigError(f"decision must be one of {list(DECISIONS)} or a result dict, not {decision!r}")
    if method in _APPROVAL_METHODS:
        return "result", {"decision": decision}
    if method == "mcpServer/elicitation/request" and is_tool_approval(params):
        try:
            el = parse_elicitation(params or {})
            if decision in ("accept", "acceptForSession"):
                return "result", tool_approval_reply(
                    el, approve=True, persist="session" if decision == "acceptForSession" else None)
        except InteractionError as exc:
            raise ConfigError(exc.message) from None
    if method == "mcpServer/elicitation/request":
        if decision in ("decline", "cancel"):
            return "result", {"action": decision, "content": None}
    elif decision in ("decline", "cancel"):
        return "error", (DECLINED_RPC_CODE, f"{method} declined by the host")
    raise ConfigError(f"{method} cannot be answered with {decision!r}: pass a full result dict")


def _check_policy(policy: ApprovalPolicy) -> ApprovalPolicy:
    if callable(policy) or policy in POLICIES:
        return policy
    raise ConfigError(f"approvals must be one of {list(POLICIES)} or a callable, not {policy!r}")


# -- the Trio thread ---------------------------------------------------------------------------


class _Portal:
    """Owns the Trio thread and the runtime inside it. Holds no reference to the facade, so
    the facade can be garbage-collected (its finalizer calls :meth:`close`)."""

    def __init__(self, config: RuntimeConfig, approvals: ApprovalPolicy, start_timeout: float) -> None:
        self.config = config
        self.default_policy = approvals
        self.policies: dict[str, ApprovalPolicy] = {}
        self.runtime: Runtime | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._close_lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._thread_main, name="codexrt-blocking", daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout):
            self.close()
            raise ClosedError(f"the codexrt thread did not start within {start_timeout:g}s")
        if self._error is not None:
            raise self._error

    # runs in the Trio thread

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller or logged, never lost
            if not self._ready.is_set():
                self._error = exc
            else:
                log.error("codexrt blocking runtime thread ended with an error", exc_info=exc)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with open_runtime(self.config) as rt:
            self.runtime = rt
            async with trio.open_nursery() as nursery:
                await nursery.start(self._answer_interactions, rt, nursery)
                self._nursery = nursery
                self._ready.set()
                await self._stop.wait()
                # Stop turns first, so pending waiters see the real (interrupted) terminal,
                # then cancel what is still waiting.
                await rt.aclose()
                nursery.cancel_scope.cancel()

    async def _answer_interactions(self, rt: Runtime, nursery: trio.Nursery,
                                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with rt.subscribe() as events:
            task_status.started()
            async for ev in events:
                if ev.kind == "operationDone" and ev.client_operation_id:
                    self.policies.pop(ev.client_operation_id, None)
                if ev.kind != "interactionRequested":
                    continue
                inter = rt.interactions.get(ev.payload.get("interactionKey", ""))
                if inter is None or inter.state != "pending":
                    continue
                policy = self.policies.get(ev.client_operation_id or "", self.default_policy)
                if policy != "manual":
                    nursery.start_soon(self._answer, rt, inter, policy)

    async def _answer(self, rt: Runtime, inter: Interaction, policy: ApprovalPolicy) -> None:
        decision: Any = policy
        if callable(policy):
            request = ApprovalRequest.from_interaction(inter)
            box: list[Any] = []
            async with trio.open_nursery() as n:
                async def ask() -> None:
                    try:
                        box.append(await trio.to_thread.run_sync(
                            functools.partial(policy, request), abandon_on_cancel=True))
                    except Exception:  # noqa: BLE001 - a broken callback declines, never grants
                        log.exception("approval callback failed; declining %s", inter.method)
                        box.append("decline")
                    n.cancel_scope.cancel()

                async def watch() -> None:
                    await inter.resolved.wait()  # interrupted / expired / answered elsewhere
                    n.cancel_scope.cancel()

                n.start_soon(ask)
                n.start_soon(watch)
            if not box:
                return
            decision = box[0]
        try:
            how, value = approval_reply(inter.method, decision, inter.params)
        except ConfigError as exc:
            log.warning("%s; declining", exc.message)
            how, value = approval_reply(inter.method, "decline", inter.params)
        try:
            if how == "result":
                await rt.respond_interaction(inter.key, inter.dialog_token, value)
            else:
                await rt.respond_interaction_error(inter.key, inter.dialog_token, *value)
        except InteractionError as exc:  # answered, resolved or expired meanwhile
            log.debug("interaction %s not answered: %s", inter.key, exc.message)
        except CodexError as exc:
            log.warning("could not answer %s: %s", inter.method, exc.message)

    # runs in caller threads

    def _check_thread(self) -> None:
        if threading.current_thread() is self._thread:
            raise BusyResourceError("blocking codexrt calls cannot be made from the runtime's own Trio thread")

    def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a sync function in the Trio thread (it must not block) and return its value."""
        self._check_thread()
        if self._closing or self._token is None:
            raise ClosedError("the blocking runtime is closed")
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise ClosedError("the blocking runtime is closed") from None

    def start(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> tuple[concurrent.futures.Future, list]:
        """Start ``afn(*args)`` as a task of the facade's nursery; return its future and a box
        that will hold the task's cancel scope."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        scopes: list[trio.CancelScope] = []

        async def runner() -> None:
            try:
                with trio.CancelScope() as scope:
                    scopes.append(scope)
                    value = await afn(*args)
                    fut.set_result(value)
                    return
                fut.set_exception(ClosedError("the call was cancelled"))
            except Exception as exc:  # noqa: BLE001 - goes to the waiting caller
                if not fut.done():
                    fut.set_exception(exc)
            finally:
                if not fut.done():  # the facade is closing (outer cancellation)
                    fut.set_exception(ClosedError("the blocking runtime was closed"))

        def submit() -> None:
            if self._nursery is None:
                raise ClosedError("the blocking runtime is closed")
            self._nursery.start_soon(runner)

        self.run_sync(submit)
        return fut, scopes

    def run_soon(self, fn: Callable[[], Any]) -> None:
        """Have the Trio thread call ``fn`` soon; does not wait."""
        token = self._token
        if token is None:
            raise ClosedError("the blocking runtime is closed")
        try:
            token.run_sync_soon(fn)
        except trio.RunFinishedError:
            raise ClosedError("the blocking runtime is closed") from None

    def cancel(self, scopes: list) -> None:
        for scope in scopes:
            try:
                self.run_sync(scope.cancel)
            except ClosedError:
                pass

    def wait(self, fut: concurrent.futures.Future, timeout: float | None) -> Any:
        """Wait for ``fut`` in short slices (so KeyboardInterrupt is delivered promptly).
        Raises :class:`TimeoutError` (builtin) when ``timeout`` runs out."""
        deadline = None if timeout is None else _now() + timeout
        while True:
            slice_ = _WAIT_SLICE if deadline is None else max(0.0, min(_WAIT_SLICE, deadline - _now()))
            concurrent.futures.wait([fut], timeout=slice_)
            if fut.done():
                return fut.result()
            if deadline is not None and _now() >= deadline:
                raise TimeoutError
            if not self._thread.is_alive() and not fut.done():
                raise ClosedError("the codexrt thread has ended")

    def call(self, afn: Callable[..., Awaitable[Any]], *args: Any, timeout: float | None = None,
             what: str = "call") -> Any:
        """Run ``afn(*args)`` in the Trio thread and wait for it. On timeout or
        KeyboardInterrupt the task is cancelled (cancelling it does what the called coroutine
        documents) and the exception is raised here."""
        fut, scopes = self.start(afn, *args)
        try:
            return self.wait(fut, timeout)
        except TimeoutError:
            self.cancel(scopes)
            raise RpcTimeout(f"{what} timed out after {timeout:g}s") from None
        except KeyboardInterrupt:
            self.cancel(scopes)
            raise

    @property
    def closed(self) -> bool:
        return self._closing or not self._thread.is_alive()

    def close(self) -> None:
        """Stop the runtime (R-OP-5 stop budget), reap the child, join the thread (bounded)."""
        with self._close_lock:
            if self._closing:
                return
            self._closing = True
        if threading.current_thread() is self._thread:
            # Only reachable from a finalizer run by GC inside the Trio thread: ask, don't join.
            if self._stop is not None:
                self._stop.set()
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(self.config.stop_budget + _CLOSE_MARGIN)
        if self._thread.is_alive():
            log.warning("the codexrt thread did not stop within %ss; the app-server child ends when this "
                        "process ends (stdin EOF, and codexrt's reaper on POSIX; R-RT-7)",
                        self.config.stop_budget + _CLOSE_MARGIN)


def _now() -> float:
    import time

    return time.monotonic()


# -- public facade -----------------------------------------------------------------------------


class _EventPump:
    """Moves one operation's events from its Trio-side stream to the thread iterating it.

    A task in the Trio thread waits on the stream and appends what it holds (up to
    :data:`_BATCH` per step) to a deque under a :class:`threading.Condition`; the caller's
    thread waits on that condition. So a batch costs one cross-thread wake-up, and asking for
    the next event costs none. Bounded: with more than :data:`_HIGH_WATER` events waiting on
    the caller's side the task pauses (the stream keeps coalescing text meanwhile) until the
    caller has taken them down to :data:`_LOW_WATER`. The lock is only held for deque
    operations, never while waiting, so the Trio thread never waits on the caller. A caller
    that stops iterating early leaves the task paused (holding at most that bound) until the
    runtime closes."""

    def __init__(self, stream: Any, portal: _Portal) -> None:
        self._stream = stream
        self._portal = portal
        self._cond = threading.Condition(threading.Lock())
        self._q: collections.deque[CodexEvent] = collections.deque()
        self._ended = False
        self._error: BaseException | None = None
        self._room: trio.Event | None = None

    async def run(self) -> None:
        """Runs in the Trio thread until the stream is closed and drained."""
        stream = self._stream
        finished = False
        try:
            while True:
                ev = await stream.get()
                batch: list[CodexEvent] = []
                while ev is not None:
                    batch.append(ev)
                    if len(batch) >= _BATCH:
                        break
                    ev = stream.get_nowait()
                room = None
                with self._cond:
                    if batch:
                        self._q.extend(batch)
                        if len(self._q) > _HIGH_WATER:
                            room = self._room = trio.Event()
                    else:
                        self._ended = True
                    self._cond.notify()
                if not batch:
                    finished = True
                    return
                if room is not None:
                    await room.wait()
        finally:
            if not finished:  # cancelled: the facade is closing
                with self._cond:
                    self._ended = True
                    self._error = ClosedError("the blocking runtime was closed")
                    self._cond.notify()

    def get(self, deadline: float | None) -> CodexEvent | None:
        """The next event, None at the end; waits in :data:`_WAIT_SLICE` slices (so
        KeyboardInterrupt is delivered promptly). Raises :class:`TimeoutError` (builtin) at
        ``deadline``, :class:`ClosedError` when the Trio thread is gone."""
        with self._cond:
            while not self._q:
                if self._ended:
                    if self._error is not None:
                        raise self._error
                    return None
                slice_ = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - _now())
                if slice_ <= 0:
                    raise TimeoutError
                self._cond.wait(slice_)
                if not self._q and not self._ended and not self._portal._thread.is_alive():
                    raise ClosedError("the codexrt thread has ended")
            ev = self._q.popleft()
            if self._room is not None and len(self._q) <= _LOW_WATER:
                room, self._room = self._room, None
                try:
                    self._portal.run_soon(room.set)
                except ClosedError:
                    pass
            return ev


class BlockingOperation:
    """A running send (or compact/review) seen from a blocking caller.

    Iterate it for its events as they stream (``for ev in op``), or read just the assistant
    text (``for text in op.text()``); :meth:`wait` returns the :class:`OperationResult`. One
    thread may iterate at a time. Used as a context manager, leaving the block stops the
    operation if it has not ended."""

    def __init__(self, owner: "BlockingRuntime", op: Operation) -> None:
        self._owner = owner
        self._portal = owner._portal
        self._op = op
        self._iter_lock = threading.Lock()
        self._pump: _EventPump | None = None  # started by the first next_event

    def __repr__(self) -> str:
        return f"<BlockingOperation {self._op!r}>"

    @property
    def id(self) -> str:
        return self._op.id

    @property
    def kind(self) -> str:
        return self._op.kind

    @property
    def client_message_id(self) -> str | None:
        return self._op.client_message_id

    @property
    def thread_id(self) -> str | None:
        """The thread (known once bootstrap confirmed it). A snapshot read."""
        return self._op.thread_id

    @property
    def turn_id(self) -> str | None:
        return self._op.turn_id

    @property
    def done(self) -> bool:
        return self._op.terminal

    @property
    def result(self) -> OperationResult | None:
        """The terminal result, or None while running."""
        return self._op.result

    def next_event(self, timeout: float | None = None) -> CodexEvent | None:
        """The next event, or None once the operation ended and every event was read.
        ``timeout`` bounds this one wait (:class:`RpcTimeout`); no bound by default (see the
        module doc). KeyboardInterrupt stops the operation and re-raises."""
        if not self._iter_lock.acquire(blocking=False):
            raise BusyResourceError("another thread is already iterating this operation")
        try:
            if self._pump is None:
                self._pump = _EventPump(self._op.stream, self._portal)
                self._portal.start(self._pump.run)
            try:
                return self._pump.get(None if timeout is None else _now() + timeout)
            except TimeoutError:
                raise RpcTimeout(f"waiting for the next event: nothing after {timeout:g}s") from None
            except KeyboardInterrupt:
                self._stop_and_settle()
                raise
        finally:
            self._iter_lock.release()

    def __iter__(self) -> Iterator[CodexEvent]:
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
        return self._portal.run_sync(self._op.runtime.abort, self._op)

    def _guarded(self, afn: Callable[[], Awaitable[Any]], timeout: float | None, what: str,
                 stop_on_timeout: bool = False) -> Any:
        fut, scopes = self._portal.start(afn)
        try:
            return self._portal.wait(fut, timeout)
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
        return self._op.result.to_wire() if self._op.result is not None else None

    def _stop_and_settle(self) -> None:
        """Abort and wait for the terminal within the stop budget (+ the kill margin). A
        second KeyboardInterrupt during that wait kills the app-server's process group at once
        (the turn then fails with ``CHILD_EXITED``; the next send starts a new child), waits
        for the settle (bounded) and re-raises."""
        if self._op.terminal:
            return
        try:
            self.abort()
            fut, _ = self._portal.start(self._op.wait)
            try:
                self._portal.wait(fut, self._portal.config.stop_budget + 15)
            except KeyboardInterrupt:
                self._portal.run_sync(_kill_child, self._op.runtime)
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


def _kill_child(runtime: Runtime) -> None:
    runtime.kill_child()


class BlockingRuntime:
    """A supervised app-server driven from blocking code. Create with :func:`connect`.

    All methods may be called from any thread except the runtime's own; they never touch the
    caller's event loop. ``a*`` methods are awaitable wrappers for asyncio code."""

    def __init__(self, config: RuntimeConfig, *, approvals: ApprovalPolicy = "decline",
                 start_timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self._portal = _Portal(config, _check_policy(approvals), start_timeout)
        self._finalizer = weakref.finalize(self, self._portal.close)

    def __repr__(self) -> str:
        return f"<BlockingRuntime {self._portal.runtime!r}{' closed' if self.closed else ''}>"

    @property
    def config(self) -> RuntimeConfig:
        return self._portal.config

    @property
    def runtime(self) -> Runtime:
        """The underlying Trio :class:`Runtime`. Touch it only inside :meth:`run_async`."""
        assert self._portal.runtime is not None
        return self._portal.runtime

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
        thread; ``approvals`` overrides the connection's policy for this operation."""
        policy = _check_policy(approvals) if approvals is not None else None
        rt = self.runtime

        def queue() -> Operation:
            op = rt.send(text, thread_id=thread_id, client_message_id=client_message_id, images=images,
                         additional_context=additional_context, settings=settings)
            if policy is not None:
                self._portal.policies[op.id] = policy
            return op

        return BlockingOperation(self, self._portal.run_sync(queue))

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
        op = self.submit(text, **kwargs)
        if on_event is not None:
            deadline = None if timeout is None else _now() + timeout
            with op:
                for ev in _bounded_iter(op, deadline):
                    on_event(ev)
                return op.wait(None if deadline is None else max(0.0, deadline - _now()))
        return op.wait(timeout)

    def compact(self, thread_id: str) -> BlockingOperation:
        return BlockingOperation(self, self._portal.run_sync(self.runtime.compact, thread_id))

    def review(self, thread_id: str, target: dict[str, Any] | None = None) -> BlockingOperation:
        return BlockingOperation(self, self._portal.run_sync(self.runtime.review, thread_id, target))

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

    def respond(self, request: ApprovalRequest | CodexEvent, decision: Any) -> None:
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
        """``await rt.asend("…")`` from asyncio code: :meth:`send` in a worker thread.
        Cancelling the awaiting task does not stop the turn; call :meth:`abort` for that."""
        return await asyncio.to_thread(functools.partial(self.send, text, timeout=timeout, on_event=on_event,
                                                         **kwargs))

    async def acall(self, method: str, params: Any = None, **kwargs: Any) -> Any:
        return await asyncio.to_thread(functools.partial(self.call, method, params, **kwargs))

    async def astream(self, text: str, **kwargs: Unpack[SendOptions]) -> AsyncIterator[CodexEvent]:
        """``async for ev in rt.astream("…")`` from asyncio code."""
        op = await asyncio.to_thread(functools.partial(self.submit, text, **kwargs))
        while True:
            ev = await asyncio.to_thread(op.next_event)
            if ev is None:
                return
            yield ev

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def _bounded_iter(op: BlockingOperation, deadline: float | None) -> Iterator[CodexEvent]:
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
