"""codexrt on asyncio: the Trio API's shapes, with Trio running as a *guest* on the asyncio loop.

``codexrt.open_runtime`` is a Trio API. Under ``asyncio.run`` or Jupyter's running loop, use
this module instead::

    async with codexrt.aio.open_runtime() as rt:
        op = rt.send("Summarise README.md")
        async for ev in op.events():
            if ev.kind == "itemUpdated" and ev.payload.get("stream") == "item/agentMessage/delta":
                print(ev.payload["delta"], end="", flush=True)
        result = await op.wait()

How it works: the first ``open_runtime`` on a loop starts Trio in guest mode
(``trio.lowlevel.start_guest_run``) on that loop, in the same thread; no thread is started per
call or per event, and the loop keeps running other tasks while a turn streams. Runtimes on one
loop share that guest run; it ends when the last runtime is closed. Each call below hops into
Trio with ``TrioToken.run_sync_soon`` and its result comes back as an asyncio future; event
streams are pumped into asyncio in batches, with a bound (the Trio-side stream coalesces text
while the asyncio consumer lags, as it does for a slow Trio consumer — no text is lost).

Cancellation: cancelling ``await op.wait()`` or an ``async for`` over events only stops that
wait (as in Trio). Cancelling the ``async with`` block itself — a timeout around it, or
cancelling the task — stops the active turn within the stop budget and reaps the child, exactly
as leaving the Trio block does; the block's exit waits for that even if cancelled again.

Interaction policies given to :meth:`AioRuntime.set_interaction_policy` are asyncio coroutine
functions: they run as asyncio tasks and their result is the reply (never an approval unless
the policy returns one).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence, TypeVar, Unpack

import trio

from codexrt._sansio._errors import ClosedError, ConfigError
from codexrt._runtime._events import CodexEvent, Event, EventStream
from codexrt._runtime._options import RuntimeOptions
from codexrt._runtime._runtime import Interaction, Operation, OperationResult, Runtime, RuntimeConfig
from codexrt._runtime._runtime import open_runtime as _trio_open_runtime
from codexrt._sansio._settings import Settings

__all__ = ["open_runtime", "AioRuntime", "AioOperation", "AioEventStream"]

T = TypeVar("T")

#: Events handed to asyncio per batch at most, and buffered on the asyncio side before the pump
#: waits: a lagging asyncio consumer leaves the rest in the Trio-side stream, which coalesces.
_BATCH = 512
_HIGH_WATER = 4096


class TrioGuest:
    """One Trio guest run on one asyncio loop, shared by the runtimes opened on it."""

    _by_loop: dict[asyncio.AbstractEventLoop, "TrioGuest"] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.users = 0
        self.stopping = False
        self.token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._ready: asyncio.Future[None] = loop.create_future()
        self._done: asyncio.Future[None] = loop.create_future()

    @classmethod
    async def acquire(cls) -> "TrioGuest":
        loop = asyncio.get_running_loop()
        # One Trio run per thread: let an ending one finish before a new one starts — and look
        # again after every wait, since another caller may have started one meanwhile.
        while (guest := cls._by_loop.get(loop)) is not None and (guest.stopping or guest._done.done()):
            if guest._done.done():
                if cls._by_loop.get(loop) is guest:
                    del cls._by_loop[loop]
                continue
            await _wait_uncancellable(guest._done)
        if guest is None:
            guest = cls(loop)
            guest._start()  # raises if it cannot start: then nothing is recorded for this loop
            cls._by_loop[loop] = guest
        guest.users += 1
        try:
            await asyncio.shield(guest._ready)
        except BaseException:
            guest.release()
            raise
        return guest

    def _start(self) -> None:
        def done(outcome: Any) -> None:
            if self._by_loop.get(self.loop) is self:
                del self._by_loop[self.loop]
            try:
                outcome.unwrap()
            except BaseException as exc:  # the guest's main task failed: report it to waiters
                if not self._ready.done():
                    self._ready.set_exception(exc)
                if not self._done.done():
                    self._done.set_exception(exc)
                return
            if not self._ready.done():
                self._ready.set_exception(ClosedError("the Trio guest run ended"))
            if not self._done.done():
                self._done.set_result(None)

        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=self.loop.call_soon,
            done_callback=done,
            # asyncio's loop may own the signal wakeup fd (asyncio.Runner installs one).
            host_uses_signal_set_wakeup_fd=True,
        )

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if not self._ready.done():
                self._ready.set_result(None)
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.token is not None and self._stop is not None:
            self.stopping = True
            stop = self._stop
            try:
                self.token.run_sync_soon(stop.set)
            except trio.RunFinishedError:
                pass

    async def wait_done(self) -> None:
        """After the last release: wait until the guest run has ended (bounded: its main task
        only cancels an empty nursery), even if the caller is cancelled meanwhile."""
        if self.users == 0:
            await _wait_uncancellable(self._done)

    # -- hopping ------------------------------------------------------------------------

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` inside the Trio run loop soon (FIFO with other hops)."""
        assert self.token is not None
        self.token.run_sync_soon(fn)

    def call_sync(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> "asyncio.Future[T]":
        """``fn(*args)`` run inside Trio; its value or exception comes back as a future."""
        fut: asyncio.Future[T] = self.loop.create_future()

        def hop() -> None:
            if fut.cancelled():
                return
            try:
                value = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the asyncio caller
                fut.set_exception(exc)
            else:
                fut.set_result(value)

        self.call_soon(hop)
        return fut

    def start_job(self, afn: Callable[..., Awaitable[T]], *args: Any) -> tuple["asyncio.Future[T]", Callable[[], None]]:
        """Run ``await afn(*args)`` as a Trio task; returns (its future, a function that
        cancels it)."""
        fut: asyncio.Future[T] = self.loop.create_future()
        scope = trio.CancelScope()

        async def job() -> None:
            with scope:
                try:
                    value = await afn(*args)
                except trio.Cancelled:
                    if not fut.done():
                        fut.cancel()
                    raise
                except BaseException as exc:
                    if not fut.done():
                        fut.set_exception(exc)
                    return
                if not fut.done():
                    fut.set_result(value)
            if not fut.done():  # cancelled by our own scope
                fut.cancel()

        def hop() -> None:
            assert self._nursery is not None
            self._nursery.start_soon(job)

        self.call_soon(hop)

        def cancel() -> None:
            try:
                self.call_soon(scope.cancel)
            except trio.RunFinishedError:
                pass

        return fut, cancel

    async def run(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await a Trio coroutine function from asyncio. Cancelling the caller cancels the
        Trio task and waits for it to finish."""
        fut, cancel = self.start_job(afn, *args)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            if not fut.done():
                cancel()
                with contextlib.suppress(BaseException):
                    await _wait_uncancellable(fut)
            raise


async def _wait_uncancellable(fut: "asyncio.Future[Any]") -> None:
    """Wait for ``fut`` even if the caller is cancelled again meanwhile; re-raise that
    cancellation afterwards."""
    cancelled = False
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            if fut.done():
                break
            cancelled = True
        except BaseException:
            break
    if cancelled:
        raise asyncio.CancelledError


class AioEventStream:
    """``async for ev in stream`` over a Trio :class:`~codexrt.EventStream`, from asyncio.
    One iteration at a time; ends when the underlying stream is closed and drained."""

    def __init__(self, guest: TrioGuest, stream: "asyncio.Future[EventStream]") -> None:
        self._guest = guest
        self._stream_fut = stream
        self._buf: collections.deque[CodexEvent] = collections.deque()
        self._ended = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._room: trio.Event | None = None
        self._started = False
        self._cancel_pump: Callable[[], None] | None = None

    def __aiter__(self) -> "AioEventStream":
        return self

    async def __anext__(self) -> Event:
        if not self._started:
            self._started = True
            stream = await asyncio.shield(self._stream_fut)
            fut, self._cancel_pump = self._guest.start_job(self._pump, stream)
            fut.add_done_callback(self._pump_done)
        while not self._buf:
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._waiter = self._guest.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        ev: Event = self._buf.popleft()  # type: ignore[assignment]  # Event is CodexEvent at run time
        room = self._room
        if room is not None and len(self._buf) <= _HIGH_WATER // 2:
            self._room = None
            self._guest.call_soon(room.set)
        return ev

    async def aclose(self) -> None:
        """Stop pumping (the Trio-side stream is left as it is)."""
        if self._cancel_pump is not None:
            self._cancel_pump()
        self._ended = True

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pump_done(self, fut: "asyncio.Future[None]") -> None:
        self._ended = True
        if not fut.cancelled() and fut.exception() is not None:
            self._error = fut.exception()
        self._wake()

    async def _pump(self, stream: EventStream) -> None:
        # Runs in Trio. Hands events over in batches; waits while asyncio holds too many.
        while True:
            ev = await stream.get()
            if ev is None:
                return
            batch = [ev]
            while len(batch) < _BATCH:
                nxt = stream.get_nowait()
                if nxt is None:
                    break
                batch.append(nxt)
            self._buf.extend(batch)
            self._wake()
            if len(self._buf) > _HIGH_WATER:
                room = trio.Event()
                self._room = room
                await room.wait()


class AioOperation:
    """An operation seen from asyncio: ``async for ev in op.events()``, ``await op.wait()``,
    ``await op.abort()``. Created by :meth:`AioRuntime.send` (and the other long operations)
    at once; the Trio-side operation is queued on the next tick of the loop. An error from
    queueing it (say a :class:`~codexrt.ConfigError` for malformed context) is raised by
    ``wait()`` and ``events()``."""

    def __init__(self, guest: TrioGuest, op: "asyncio.Future[Operation]") -> None:
        self._guest = guest
        self._op = op
        self._events: AioEventStream | None = None

    async def operation(self) -> Operation:
        """The Trio-side :class:`~codexrt.Operation` (read its attributes only from Trio code)."""
        return await asyncio.shield(self._op)

    @property
    def id(self) -> str | None:
        """The operation id, once queued (None before the loop ran the queueing hop)."""
        if self._op.done() and not self._op.cancelled() and self._op.exception() is None:
            return self._op.result().id
        return None

    def events(self) -> AioEventStream:
        """The operation's events, in order, ending with ``operationDone``."""
        if self._events is None:
            loop = self._guest.loop
            stream_fut: asyncio.Future[EventStream] = loop.create_future()

            def chain(f: "asyncio.Future[Operation]") -> None:
                if f.cancelled():
                    stream_fut.cancel()
                elif f.exception() is not None:
                    stream_fut.set_exception(f.exception())  # type: ignore[arg-type]
                else:
                    stream_fut.set_result(f.result().events())

            self._op.add_done_callback(chain)
            self._events = AioEventStream(self._guest, stream_fut)
        return self._events

    async def wait(self) -> OperationResult:
        """The operation's result. Cancelling this wait does not stop the operation (use
        :meth:`abort`, or leave the runtime's block)."""
        op = await self.operation()
        return await self._guest.run(op.wait)

    async def abort(self) -> str:
        """Ask the operation to stop (R-OP-5): a queued one is cancelled, an active one
        interrupted. Returns what was done, as :meth:`codexrt.Runtime.abort` does."""
        op = await self.operation()
        return await self._guest.call_sync(op.runtime.abort, op)


class AioRuntime:
    """A :class:`~codexrt.Runtime` driven from asyncio. Get one from :func:`open_runtime`."""

    def __init__(self, guest: TrioGuest, runtime: Runtime) -> None:
        self._guest = guest
        self._rt = runtime
        self._closed = False

    def _queue(self, method: Callable[..., Operation], *args: Any, **kwargs: Any) -> AioOperation:
        if self._closed:
            raise ClosedError("runtime is closed")
        return AioOperation(self._guest, self._guest.call_sync(method, *args, **kwargs))

    def send(self, text: str, *, thread_id: str | None = None, client_message_id: str | None = None,
             images: Sequence[str] = (), additional_context: dict[str, Any] | None = None,
             settings: Settings | None = None, text_elements: Sequence[dict[str, Any]] = ()) -> AioOperation:
        """Queue a user message (R-OP-1); see :meth:`codexrt.Runtime.send`. Returns at once."""
        if not isinstance(text, str):
            raise ConfigError("text must be a string")
        return self._queue(self._rt.send, text, thread_id=thread_id, client_message_id=client_message_id,
                           images=images, additional_context=additional_context, settings=settings,
                           text_elements=text_elements)

    def compact(self, thread_id: str) -> AioOperation:
        return self._queue(self._rt.compact, thread_id)

    def review(self, thread_id: str, target: dict[str, Any] | None = None) -> AioOperation:
        return self._queue(self._rt.review, thread_id, target)

    def preconnect(self, thread_id: str | None = None) -> AioOperation:
        return self._queue(self._rt.preconnect, thread_id)

    async def ensure_started(self) -> None:
        """Start the app-server now (otherwise the first operation does)."""
        await self._guest.run(self._rt.ensure_started)

    async def update_settings(self, settings: Settings | None = None, **changes: Any) -> int:
        """Update the desired settings (R-SET-1); returns the new revision."""
        return await self._guest.call_sync(self._rt.update_settings, settings, **changes)

    async def snapshot(self) -> dict[str, Any]:
        """The runtime's status snapshot (state, generation, pid, busy, …)."""
        return await self._guest.call_sync(self._rt.runtime_snapshot)

    async def pending_interactions(self) -> list[Interaction]:
        """Server requests waiting for an answer (read their attributes; answer with
        :meth:`respond_interaction`)."""
        return await self._guest.call_sync(self._rt.pending_interactions)

    async def respond_interaction(self, key: str, dialog_token: str, result: Any) -> None:
        """Answer an interaction (an ``interactionRequested`` event's ``interactionKey`` and
        ``dialogToken``) with a typed reply, as :meth:`codexrt.Runtime.respond_interaction`."""
        await self._guest.run(self._rt.respond_interaction, key, dialog_token, result)

    async def respond_interaction_error(self, key: str, dialog_token: str, code: int, message: str) -> None:
        await self._guest.run(self._rt.respond_interaction_error, key, dialog_token, code, message)

    def set_interaction_policy(self, policy: Callable[[Interaction], Awaitable[Any]] | None) -> None:
        """Answer interactions with an asyncio coroutine function ``policy(interaction)``
        whose return value is the reply (``None``: leave it to the host). ``None`` removes it."""
        if policy is None:
            self._guest.call_soon(lambda: self._rt.set_interaction_policy(None))
            return
        guest = self._guest

        async def bridged(inter: Interaction) -> Any:  # runs in Trio
            done = trio.Event()
            task = guest.loop.create_task(policy(inter))
            task.add_done_callback(lambda _t: guest.call_soon(done.set))
            try:
                await done.wait()
            except trio.Cancelled:
                task.cancel()
                raise
            if task.cancelled():  # the policy's task was cancelled: leave the answer to the host
                return None
            return task.result()

        self._guest.call_soon(lambda: self._rt.set_interaction_policy(bridged))

    def subscribe(self) -> contextlib.AbstractAsyncContextManager[AioEventStream]:
        """``async with rt.subscribe() as events: async for ev in events: …`` — every event
        of this runtime (see :meth:`codexrt.Runtime.subscribe`)."""
        return self._subscribe()

    @contextlib.asynccontextmanager
    async def _subscribe(self) -> AsyncIterator[AioEventStream]:
        loop = self._guest.loop
        stream_fut: asyncio.Future[EventStream] = loop.create_future()
        leave = trio.Event()

        async def hold() -> None:
            with self._rt.subscribe() as stream:
                stream_fut.set_result(stream)
                await leave.wait()

        job, cancel = self._guest.start_job(hold)
        try:
            await asyncio.shield(stream_fut)
            yield AioEventStream(self._guest, stream_fut)
        finally:
            self._guest.call_soon(leave.set)
            await _wait_uncancellable(job)

    @property
    def runtime(self) -> Runtime:
        """The Trio-side runtime (use it only from Trio code)."""
        return self._rt


@contextlib.asynccontextmanager
async def open_runtime(config: RuntimeConfig | None = None,
                       **kwargs: Unpack[RuntimeOptions]) -> AsyncIterator[AioRuntime]:
    """``async with codexrt.aio.open_runtime(...) as rt:`` — :func:`codexrt.open_runtime` for
    asyncio, same config. Leaving the block, or cancelling it, stops the active operation
    within the stop budget, cancels queued ones and reaps the child before it returns."""
    if config is None:
        config = RuntimeConfig(**kwargs)
        kwargs = {}
    guest = await TrioGuest.acquire()
    try:
        loop = guest.loop
        ready: asyncio.Future[Runtime] = loop.create_future()
        leave = trio.Event()

        async def hold() -> None:  # runs in Trio for the whole block
            async with _trio_open_runtime(config, **kwargs) as rt:
                ready.set_result(rt)
                await leave.wait()

        job, _cancel = guest.start_job(hold)
        try:
            await asyncio.wait({ready, job}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            guest.call_soon(leave.set)
            await _wait_uncancellable(job)
            raise
        if not ready.done():  # the runtime failed to open
            job.result()
            raise ClosedError("runtime closed before it opened")
        aio_rt = AioRuntime(guest, ready.result())
        try:
            yield aio_rt
        finally:
            aio_rt._closed = True
            guest.call_soon(leave.set)
            await _wait_uncancellable(job)
        job.result()  # the body ended normally: a failure while closing is raised here
    finally:
        guest.release()
        await guest.wait_done()
