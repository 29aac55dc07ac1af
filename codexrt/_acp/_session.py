"""One ACP session of ``codexrt acp``: its codex thread, its settings and — while it is active —
its own runtime (one ``codex app-server`` child, started on first use, retired when idle) with
a forwarder that turns the runtime's events into ``session/update`` notifications.

A runtime per session, like ``serve``'s channels: codexrt's FIFO is per runtime, so sessions
sharing one would serialise their turns. The runtime task (:meth:`Session.run_runtime`) owns the
runtime and the forwarder; :meth:`Session.close_runtime` ends both and waits until the child is
reaped. The next use opens a new one, which resumes the thread (nothing is re-sent).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from codexrt._acp._mapping import ConfigState, UpdateMapper
from codexrt._runtime._events import CodexEvent, EventStream
from codexrt._runtime._runtime import Interaction, Operation, Runtime, RuntimeConfig, open_runtime

__all__ = ["Session", "Prompt", "read_text_file", "MAX_DIFF_FILE_BYTES"]

log = logging.getLogger("codexrt.acp")

#: Largest file read to show the whole old/new text of an edit (bigger: the hunks only).
MAX_DIFF_FILE_BYTES = 2 * 1024 * 1024


def read_text_file(path: str) -> str | None:
    """A file's text for an edit's diff, or None (missing, not a regular file, too big, not
    UTF-8). Read-only; never follows into a device or FIFO."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_DIFF_FILE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_DIFF_FILE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_DIFF_FILE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@attrs.define(eq=False)
class Prompt:
    """The running ``session/prompt`` of a session."""

    op: Operation
    cancel_requested: bool = False
    #: set when the forwarder has passed the operation's ``operationDone``: every update of
    #: the turn is written before the prompt's answer
    forwarded: trio.Event = attrs.field(factory=trio.Event)


class Session:
    """One ACP session (module doc)."""

    def __init__(self, session_id: str, cwd: str, thread_id: str | None, *,
                 on_thread: Callable[[Session], Any]) -> None:
        self.id = session_id
        self.cwd = cwd
        self.thread_id = thread_id
        self.config = ConfigState()
        self.mapper = UpdateMapper(cwd=cwd, read=read_text_file)
        self.prompt: Prompt | None = None
        self.asks: dict[str, trio.CancelScope] = {}  # interaction key → its ask task's scope
        self.inflight = 0  # requests using the runtime now (load, resume, list)
        self.last_activity = trio.current_time()
        self.rt: Runtime | None = None
        self._close = trio.Event()
        self._closed = trio.Event()
        self._closed.set()
        self._lock = trio.Lock()
        self._on_thread = on_thread

    def touch(self) -> None:
        self.last_activity = trio.current_time()

    @property
    def busy(self) -> bool:
        return self.prompt is not None or bool(self.asks) or self.inflight > 0

    # -- the runtime -----------------------------------------------------------------------

    async def runtime(self, nursery: trio.Nursery, config: RuntimeConfig,
                      forward: Callable[[Session, Runtime, EventStream], Awaitable[None]]) -> Runtime:
        """This session's runtime, opened (in ``nursery``) when there is none. A runtime
        that is closing is waited for first: two children never hold one thread."""
        async with self._lock:
            if self.rt is not None and not self._close.is_set():
                return self.rt
            await self._closed.wait()
            self._close = trio.Event()
            self._closed = trio.Event()
            cfg = attrs.evolve(config, channel_id=f"acp-{self.id}", cwd=self.cwd or config.cwd)
            rt: Runtime = await nursery.start(self._run_runtime, cfg, forward, self._close, self._closed)
            rt.update_settings(**self.config.settings_changes())
            return rt

    async def _run_runtime(self, cfg: RuntimeConfig,
                           forward: Callable[[Session, Runtime, EventStream], Awaitable[None]],
                           close: trio.Event, closed: trio.Event,
                           task_status: trio.TaskStatus[Runtime] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        try:
            async with trio.open_nursery() as inner:
                sub: Any = None
                try:
                    async with open_runtime(cfg) as rt:
                        # subscribed for the runtime's whole life: its close ends the stream after
                        # the last events, which ends the forwarder
                        sub = rt.subscribe()
                        events = sub.__enter__()
                        self.rt = rt
                        inner.start_soon(forward, self, rt, events)
                        task_status.started(rt)
                        started = True
                        await close.wait()
                        log.info("closing the runtime of session %s", self.id)
                finally:
                    if sub is not None:
                        sub.__exit__(None, None, None)
        except Exception:  # one session's broken runtime never ends the agent
            log.exception("the runtime of session %s ended with an error", self.id)
            if not started:
                raise
        finally:
            self.rt = None
            closed.set()

    async def close_runtime(self) -> None:
        """Retire this session's runtime (if any) and wait until its child is reaped."""
        self._close.set()
        await self._closed.wait()

    def request_close(self) -> None:
        self._close.set()

    # -- events ----------------------------------------------------------------------------

    def note_thread(self, ev: CodexEvent) -> None:
        """Learn the thread the first prompt created (recorded in the session index at once)."""
        if self.thread_id is not None or self.prompt is None:
            return
        tid = self.prompt.op.thread_id
        if isinstance(tid, str) and tid:
            self.thread_id = tid
            self._on_thread(self)

    def find_interaction(self, key: str) -> Interaction | None:
        rt = self.rt
        if rt is None:
            return None
        for inter in rt.pending_interactions():
            if inter.key == key:
                return inter
        return None

    def own_event(self, ev: CodexEvent) -> bool:
        """An event of this session's thread (sub-agents' threads and other threads are not
        shown: ACP has no form for them)."""
        return ev.thread_id is None or self.thread_id is None or ev.thread_id == self.thread_id


@contextlib.contextmanager
def counted(s: Session) -> Any:
    """Count a request that uses ``s``'s runtime, so the idle reaper leaves it alone."""
    s.inflight += 1
    s.touch()
    try:
        yield
    finally:
        s.inflight -= 1
        s.touch()
