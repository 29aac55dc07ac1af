"""A portal into a Trio thread: one dedicated thread runs ``trio.run`` and owns one async
resource; other threads call in and wait, Ctrl+C-aware. Generic: it knows nothing of codexrt's
runtime (``codexrt.blocking`` builds its facade on it).

Guarantees
----------
* The resource is opened, used and closed only in the portal's thread. Callers hand work to
  that thread (:meth:`Portal.run_sync` for a non-blocking function, :meth:`Portal.call` /
  :meth:`Portal.start` for a coroutine) and never touch Trio-owned state themselves;
  :meth:`Portal.read` is the one way to look at it (through the thread while it runs; directly
  once it has ended, when nothing can change it any more).
* Every wait of a caller is sliced (:data:`WAIT_SLICE` seconds), so ``KeyboardInterrupt`` (a
  notebook's *interrupt kernel*) is delivered promptly on every platform, and it notices a
  portal thread that died.
* Every started coroutine runs in its own cancel scope inside the portal's nursery; a caller
  that times out or is interrupted cancels it. A task still running when the portal closes
  ends with :class:`~codexrt.ClosedError` for its caller.
* :meth:`Portal.close` is idempotent and bounded: it asks the thread to stop (``close_resource``
  first, then the nursery is cancelled, then the resource's context exits) and joins it for at
  most ``close_timeout`` seconds. The thread holds no reference to whoever owns the portal, so
  a facade that owns one can be garbage-collected (its finalizer calls :meth:`close`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import threading
import time
from typing import Any, AsyncContextManager, Awaitable, Callable, Generic, Iterator, TypeVar

import trio

from codexrt._sansio._errors import BusyResourceError, ClosedError, RpcTimeout

__all__ = ["CallerHost", "Portal", "StreamPump", "WAIT_SLICE"]

log = logging.getLogger("codexrt.blocking")

#: Seconds of one slice of a caller's wait (how soon Ctrl+C is seen).
WAIT_SLICE = 0.25
#: Items a :class:`StreamPump` moves per batch at most, and how many may wait on the caller's
#: side before it pauses (it resumes below the low mark).
_BATCH = 256
_HIGH_WATER = 1024
_LOW_WATER = 256

R = TypeVar("R")


def _now() -> float:
    return time.monotonic()


class Portal(Generic[R]):
    """Owns the Trio thread and the resource inside it.

    ``open_resource()`` is entered in the thread; ``setup(resource, nursery)`` runs there once
    before callers are let in (e.g. to install callbacks); ``close_resource(resource)`` is
    awaited first on close (so waiters see a real ending), then the portal's tasks are
    cancelled."""

    def __init__(self, open_resource: Callable[[], AsyncContextManager[R]], *,
                 setup: Callable[[R, trio.Nursery], None] | None = None,
                 close_resource: Callable[[R], Awaitable[Any]] | None = None,
                 start_timeout: float, close_timeout: float, name: str = "codexrt-portal") -> None:
        self._open_resource = open_resource
        self._setup = setup
        self._close_resource = close_resource
        self.close_timeout = close_timeout
        self.resource: R | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._close_lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._thread_main, name=name, daemon=True)
        self._thread.start()
        if not self._ready.wait(start_timeout):
            self.close()
            raise ClosedError(f"the codexrt thread did not start within {start_timeout:g}s")
        if self._error is not None:
            raise self._error

    # -- runs in the portal's thread

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller or logged, never lost
            if not self._ready.is_set():
                self._error = exc
            else:
                log.error("codexrt portal thread ended with an error", exc_info=exc)
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with self._open_resource() as resource:
            self.resource = resource
            async with trio.open_nursery() as nursery:
                if self._setup is not None:
                    self._setup(resource, nursery)
                self._nursery = nursery
                self._ready.set()
                await self._stop.wait()
                if self._close_resource is not None:
                    await self._close_resource(resource)
                nursery.cancel_scope.cancel()

    # -- runs in caller threads

    @property
    def alive(self) -> bool:
        """The portal's thread is running."""
        return self._thread.is_alive()

    def _check_thread(self) -> None:
        if threading.current_thread() is self._thread:
            raise BusyResourceError("blocking codexrt calls cannot be made from the runtime's own Trio thread")

    def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a sync function in the portal's thread (it must not block) and return its value."""
        self._check_thread()
        if self._closing or self._token is None:
            raise ClosedError("the blocking runtime is closed")
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise ClosedError("the blocking runtime is closed") from None

    def read(self, fn: Callable[[], Any]) -> Any:
        """Look at Trio-owned state: ``fn()`` in the portal's thread while it runs; once the
        thread has ended nothing can change that state, so ``fn()`` runs here."""
        if self._thread.is_alive():
            try:
                return self.run_sync(fn)
            except ClosedError:
                self._thread.join(self.close_timeout)
                if self._thread.is_alive():
                    raise
        return fn()

    def start(self, afn: Callable[..., Awaitable[Any]], *args: Any) -> tuple[concurrent.futures.Future, list]:
        """Start ``afn(*args)`` as a task of the portal's nursery; return its future and a box
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
                if not fut.done():  # the portal is closing (outer cancellation)
                    fut.set_exception(ClosedError("the blocking runtime was closed"))

        def submit() -> None:
            if self._nursery is None:
                raise ClosedError("the blocking runtime is closed")
            self._nursery.start_soon(runner)

        self.run_sync(submit)
        return fut, scopes

    def run_soon(self, fn: Callable[[], Any]) -> None:
        """Have the portal's thread call ``fn`` soon; does not wait."""
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

    def wait(self, fut: concurrent.futures.Future, timeout: float | None, host: "CallerHost | None" = None) -> Any:
        """Wait for ``fut`` in :data:`WAIT_SLICE` slices (so KeyboardInterrupt is delivered
        promptly). Raises :class:`TimeoutError` (builtin) when ``timeout`` runs out. With
        ``host``, the jobs posted to it meanwhile run here, in the waiting thread."""
        if host is None:
            return self._wait(fut, timeout, None)
        fut.add_done_callback(lambda _f: host.wake())
        with host.waiting():
            return self._wait(fut, timeout, host)

    def _wait(self, fut: concurrent.futures.Future, timeout: float | None, host: "CallerHost | None") -> Any:
        deadline = None if timeout is None else _now() + timeout
        while True:
            slice_ = WAIT_SLICE if deadline is None else max(0.0, min(WAIT_SLICE, deadline - _now()))
            if host is None:
                concurrent.futures.wait([fut], timeout=slice_)
            else:
                host.wait_and_run(slice_)
            if fut.done():
                return fut.result()
            if deadline is not None and _now() >= deadline:
                raise TimeoutError
            if not self._thread.is_alive() and not fut.done():
                raise ClosedError("the codexrt thread has ended")

    def call(self, afn: Callable[..., Awaitable[Any]], *args: Any, timeout: float | None = None,
             what: str = "call") -> Any:
        """Run ``afn(*args)`` in the portal's thread and wait for it. On timeout or
        KeyboardInterrupt the task is cancelled (cancelling it does what the called coroutine
        documents) and :class:`~codexrt.RpcTimeout` / the interrupt is raised here."""
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
        """Stop the resource, join the thread (bounded by ``close_timeout``). Idempotent."""
        with self._close_lock:
            if self._closing:
                return
            self._closing = True
        if threading.current_thread() is self._thread:
            # Only reachable from a finalizer run by GC inside the portal's thread: ask, don't join.
            if self._stop is not None:
                self._stop.set()
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(self.close_timeout)
        if self._thread.is_alive():
            log.warning("the codexrt thread did not stop within %ss; the app-server child ends when this "
                        "process ends (stdin EOF, and codexrt's reaper on POSIX; R-RT-7)", self.close_timeout)


class StreamPump:
    """Moves the items of a Trio-side stream (``await get()``, ``get_nowait()``, ``None`` at
    its end — e.g. an operation's events) to the caller thread iterating it.

    A task in the Trio thread waits on the stream and appends what it holds (up to
    :data:`_BATCH` per step) to a deque under a :class:`threading.Condition`; the caller's
    thread waits on that condition. So a batch costs one cross-thread wake-up, and asking for
    the next event costs none. Bounded: with more than :data:`_HIGH_WATER` events waiting on
    the caller's side the task pauses (the stream keeps coalescing text meanwhile) until the
    caller has taken them down to :data:`_LOW_WATER`. The lock is only held for deque
    operations, never while waiting, so the Trio thread never waits on the caller. A caller
    that stops iterating early leaves the task paused (holding at most that bound) until the
    runtime closes."""

    def __init__(self, stream: Callable[[], Any], portal: Portal[Any]) -> None:
        self._get_stream = stream  # called in the portal's thread
        self._portal = portal
        self._cond = threading.Condition(threading.Lock())
        self._q: collections.deque[Any] = collections.deque()
        self._ended = False
        self._error: BaseException | None = None
        self._room: trio.Event | None = None

    async def run(self) -> None:
        """Runs in the Trio thread until the stream is closed and drained."""
        stream = self._get_stream()
        finished = False
        try:
            while True:
                ev = await stream.get()
                batch: list[Any] = []
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

    def get(self, deadline: float | None, host: "CallerHost | None" = None) -> Any:
        """The next event, None at the end; waits in :data:`WAIT_SLICE` slices (so
        KeyboardInterrupt is delivered promptly). Raises :class:`TimeoutError` (builtin) at
        ``deadline``, :class:`ClosedError` when the Trio thread is gone. With ``host``, the jobs
        posted to it meanwhile run here, in the waiting thread (outside the lock)."""
        if host is None:
            return self._get(deadline)
        notify = self._notify
        with host.waiting(notify):
            while True:
                host.run_pending()
                try:
                    return self._get(min(deadline, _now() + WAIT_SLICE) if deadline is not None else
                                     _now() + WAIT_SLICE, wake=host)
                except TimeoutError:
                    if deadline is not None and _now() >= deadline:
                        raise

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify()

    def _get(self, deadline: float | None, wake: "CallerHost | None" = None) -> Any:
        with self._cond:
            while not self._q:
                if wake is not None and wake.pending():
                    raise TimeoutError  # not the end: the caller runs its host's jobs, then asks again
                if self._ended:
                    if self._error is not None:
                        raise self._error
                    return None
                slice_ = WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - _now())
                if slice_ <= 0:
                    raise TimeoutError
                self._cond.wait(slice_)
                if not self._q and not self._ended and not self._portal.alive:
                    raise ClosedError("the codexrt thread has ended")
            ev = self._q.popleft()
            if self._room is not None and len(self._q) <= _LOW_WATER:
                room, self._room = self._room, None
                try:
                    self._portal.run_soon(room.set)
                except ClosedError:
                    pass
            return ev


class CallerHost:
    """Runs jobs from the Trio thread *in a caller's thread* while that caller waits in
    :meth:`Portal.wait` or :meth:`StreamPump.get` — so what a job does happens where the caller
    is: an approval callback's ``print()`` reaches the notebook cell that runs the turn, its
    ``input()`` is asked there, and context variables of the caller are set. :meth:`post`
    returns False when nobody waits (the job is then the poster's to run elsewhere)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._event = threading.Event()
        self._waiters = 0
        self._notifiers: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def waiting(self, notify: Callable[[], None] | None = None) -> Iterator[None]:
        with self._lock:
            self._waiters += 1
            if notify is not None:
                self._notifiers.append(notify)
        try:
            yield
        finally:
            with self._lock:
                self._waiters -= 1
                if notify is not None:
                    self._notifiers.remove(notify)

    def post(self, job: Callable[[], None]) -> bool:
        """Queue ``job`` for the waiting caller (any thread); False when nobody waits."""
        with self._lock:
            if not self._waiters:
                return False
            self._jobs.append(job)
            notifiers = list(self._notifiers)
        self.wake()
        for notify in notifiers:
            notify()
        return True

    def pending(self) -> bool:
        with self._lock:
            return bool(self._jobs)

    def wake(self) -> None:
        self._event.set()

    def wait_and_run(self, timeout: float) -> None:
        """Wait up to ``timeout`` for a job or a :meth:`wake`, then run the queued jobs."""
        self._event.wait(timeout)
        self._event.clear()
        self.run_pending()

    def run_pending(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    return
                job = self._jobs.popleft()
            job()
