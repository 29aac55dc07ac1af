"""One ``codexrt serve`` channel (its runtime and serve's bookkeeping of it) and the record of
whether the command a task handles has been answered (the fault barrier's, see
:mod:`codexrt._serve._daemon`)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable

import trio

from codexrt._sansio._states import RuntimeState
from codexrt._serve._codec import RequestId

if TYPE_CHECKING:  # the runtime loads with the first channel (issue 34: a quick first ``status``)
    from codexrt._features._edits_live import LiveEdits
    from codexrt._features._helpers import TitleManager
    from codexrt._runtime._events import EventStream
    from codexrt._runtime._runtime import Operation, Runtime

__all__ = ["Answer", "answering", "Channel", "inflight_release"]


class Answer:
    """Whether the command being handled in this task has been answered (the fault barrier
    replies only for a command that was not)."""

    __slots__ = ("rid", "done", "before_reply", "handed_off")

    def __init__(self, rid: RequestId) -> None:
        self.rid = rid
        self.done = False
        # the reader handed the command to a task of its own, which replies (DaemonCore.spawn)
        self.handed_off = False
        # run once just before the reply is written (a read releases its channel's in-flight
        # count first, so a host acting on the reply never finds the channel still busy)
        self.before_reply: Callable[[], None] | None = None


#: The command the current task is handling (set by the fault barrier, read by ``_reply``).
answering: contextvars.ContextVar[Answer | None] = contextvars.ContextVar("codexrt_daemon_answer", default=None)


class Channel:
    """One channelId: its runtime (R-D-1) and serve's bookkeeping of it (the unreplied long
    commands, in-flight reads, the edit ledgers, automatic titles)."""


    def __init__(self, channel_id: str, rt: Runtime) -> None:
        self.id = channel_id
        self.rt = rt
        self.close_requested = trio.Event()
        self.closed = trio.Event()
        self.ops: dict[str, Operation] = {}
        self.request_ids: dict[str, RequestId] = {}
        self.done_forwarded: dict[str, trio.Event] = {}
        # op id -> the parked waiter's Answer: its reply may be written by the task that writes
        # its operationDone line (``DaemonCore._reply_now``)
        self.awaiting: dict[str, Answer] = {}
        # host answers to interactions whose reply is not written yet (``answering_host``)
        self.answers_open = 0
        self._answers_idle: trio.Event | None = None
        self.last_activity = trio.current_time()
        self.inflight = 0
        self.edits: LiveEdits | None = None  # the edit ledgers, on the first edit command
        self.titles: TitleManager | None = None  # automatic titles (serve --auto-title, R-HLP-3)
        self.events: EventStream | None = None  # serve's subscription to the runtime (the forwarder's)

    async def cancel_titles(self, thread_id: str | None = None, *, reason: str) -> None:
        """Cancel pending automatic titles (one thread's, or all) and wait until their helper
        children are reaped — release and reset do this before they go on (R-HLP-3)."""
        if self.titles is not None:
            await self.titles.cancel(thread_id, reason=reason)

    def touch(self) -> None:
        self.last_activity = trio.current_time()

    @contextlib.contextmanager
    def answering_host(self) -> Iterator[None]:
        """Around a ``codex.respondInteraction[Error]`` from the answer's write to the app-server
        to its reply: a long command's reply waits (:meth:`answers_replied`), so the reply to an
        answer always comes before the reply to the turn it unblocked (R-OP-1: answered while
        the send is still pending) — the app-server may end that turn at once."""
        self.answers_open += 1
        try:
            yield
        finally:
            self.answers_open -= 1
            if not self.answers_open and self._answers_idle is not None:
                self._answers_idle.set()
                self._answers_idle = None

    async def answers_replied(self) -> None:
        """Wait until no host answer's reply is pending on this channel (:meth:`answering_host`;
        bounded by it: the answer's write and its reply)."""
        if self.answers_open:
            if self._answers_idle is None:
                self._answers_idle = trio.Event()
            await self._answers_idle.wait()

    def forget(self, op_id: str) -> None:
        """Drop a replied operation from the channel's tables (they hold only unreplied ones)."""
        self.ops.pop(op_id, None)
        self.request_ids.pop(op_id, None)
        self.done_forwarded.pop(op_id, None)
        self.awaiting.pop(op_id, None)

    def track(self, op: Operation, request_id: RequestId) -> trio.Event:
        """Hold a just-queued long operation until its reply: its request id (for its
        ``operationQueued`` event), the event set when its ``operationDone`` line is written
        (by the forwarder, or by the publishing task: ``DaemonCore._forward_now``). Called
        with no checkpoint since the op was created, so the forwarder always finds it. serve
        forwards from the runtime subscription: no per-op buffer."""
        self.request_ids[op.id] = request_id
        done = self.done_forwarded[op.id] = trio.Event()
        self.ops[op.id] = op
        op.discard_events()
        return done

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


def inflight_release(ch: Channel) -> Callable[[], None]:
    """Ends this task's count in ``ch.inflight`` exactly once: just before its reply is
    written, or when the task ends without one."""
    done = False

    def release() -> None:
        nonlocal done
        if not done:
            done = True
            ch.inflight -= 1
            ch.touch()

    answer = answering.get()
    if answer is not None:
        answer.before_reply = release
    return release
