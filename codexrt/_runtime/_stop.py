"""Stop paths (R-OP-5): ``abort`` answers at once with the path taken; an interrupt is sent
when the turn is known; a watchdog kills the child when the stop budget runs out."""

from __future__ import annotations


import trio

from codexrt._sansio._errors import ChildExited, CodexError, OperationCancelled
from codexrt._sansio._states import STOP_TABLE, StopPath
from codexrt._runtime._operations import STATUS_CANCELLED, STATUS_FAILED, Operation


class RuntimeStops:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

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
        path = STOP_TABLE[op.phase]  # the path, by phase (codexrt._sansio._states)
        if path is StopPath.ALREADY_TERMINAL:
            return path.value
        first = not op.cancel_requested
        op.cancel_requested = True
        if first:
            op.cancel_requested_at = trio.current_time()
        if path is StopPath.CANCELLED_QUEUED:
            if op in self._queue:
                self._queue.remove(op)
            op._settle(STATUS_CANCELLED, OperationCancelled("cancelled before it started"))
            return path.value
        if first:
            self._nursery.start_soon(self._stop_watchdog, op)
        if path is StopPath.CANCEL_INTENT:
            if op._probe_scope is not None:
                op._probe_scope.cancel()  # R-CTX-6: leave the capability probe now
        elif path is StopPath.INTERRUPT_SENT:
            self._nursery.start_soon(self._send_interrupt, op)
        return path.value  # INTERRUPT_PENDING: the turn's id sends it when it arrives

    async def _send_interrupt(self, op: Operation) -> None:
        conn = self.conn
        if conn is None or op.terminal or op.turn_id is None or op.thread_id is None:
            return
        # Reported when it is sent, so every interrupt shows up, before the operation's terminal:
        # the real server usually completes the turn before it answers turn/interrupt.
        self._deliver(self._event("turnAborted", {"requested": True}, op=op), op)
        try:
            await conn.call("turn/interrupt", {"threadId": op.thread_id, "turnId": op.turn_id})
        except CodexError as exc:
            if not op.terminal:  # a turn that ended meanwhile raced the interrupt: nothing to report
                self._deliver(self._event("error", {"message": f"turn/interrupt failed: {exc.message}",
                                                    "code": exc.code, "method": "turn/interrupt"}, op=op), op)

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
