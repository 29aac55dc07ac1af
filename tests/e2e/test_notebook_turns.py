"""Notebook behaviour of the blocking facade (issue 33): cancelling (or interrupting) an awaited
``rt.asend()`` stops the turn, as ``Ctrl+C`` does for ``rt.send()`` (R-OP-5); an approval
callback runs where the turn's caller waits — the thread blocked in ``send()``, or the asyncio
loop awaiting ``asend()`` — so its ``print()`` and ``input()`` reach the cell that runs the turn
(Jupyter routes a thread's output by the thread and its context), with that caller's context
variables set. Against the stdio fake app-server.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading

import codexrt.blocking
from codexrt.blocking import ApprovalRequest
from peer_fixtures.fake_app_server import read_log
from tests._support import fake_server_factory

WAIT = 30.0
CELL = contextvars.ContextVar("cell", default="no cell")


def _connect(scenario, log=None, **kw):
    return codexrt.blocking.connect(transports=[fake_server_factory(scenario, log)], **kw)


def test_cancelling_an_awaited_asend_stops_the_turn(tmp_path):
    """``hang-turn`` never ends by itself: the cancelled ``await rt.asend()`` returns only once
    the turn was interrupted (``turn/interrupt`` sent, the runtime idle again)."""
    log = tmp_path / "peer.log"
    with _connect("hang-turn", log) as rt:
        async def cell() -> dict:
            loop = asyncio.get_running_loop()
            started = asyncio.Event()

            def on_event(ev):  # runs in the worker thread that waits for the turn
                if ev.kind == "turnStarted":
                    loop.call_soon_threadsafe(started.set)

            task = asyncio.ensure_future(rt.asend("never ends", on_event=on_event))
            await asyncio.wait_for(started.wait(), WAIT)
            task.cancel()  # what a timeout around the cell, or interrupting it, does
            try:
                await asyncio.wait_for(asyncio.shield(task), WAIT)
            except asyncio.CancelledError:
                pass
            assert task.cancelled()
            return rt.snapshot()

        snap = asyncio.run(cell())
        assert snap["busy"] is False and snap["activeOperation"] is None
    assert len([m for m in read_log(log) if m.get("method") == "turn/interrupt"]) == 1


def test_an_approval_callback_runs_in_the_thread_that_waits_in_send():
    seen: list[tuple[int, str, str]] = []

    def ask(req: ApprovalRequest) -> str:
        seen.append((threading.get_ident(), CELL.get(), req.kind))
        print(f"approve? {req.describe()}")  # goes where the caller's output goes
        return "accept"

    def run_in_a_thread_like_a_cell() -> None:
        CELL.set("cell 7")
        with _connect("reverse-approval", approvals=ask) as rt:
            result = rt.send("run it", timeout=WAIT)
        assert result.final_text == "The command printed 42."

    t = threading.Thread(target=run_in_a_thread_like_a_cell)
    t.start()
    t.join(WAIT * 2)
    assert not t.is_alive()
    assert seen == [(t.ident, "cell 7", "command")]


def test_an_approval_callback_of_asend_runs_on_the_loop_with_the_cells_context():
    seen: list[tuple[int, str]] = []

    def ask(req: ApprovalRequest) -> str:
        seen.append((threading.get_ident(), CELL.get()))
        return "accept"

    with _connect("reverse-approval", approvals=ask) as rt:  # made in an earlier "cell"
        async def cell() -> str | None:
            CELL.set("cell 9")
            result = await rt.asend("run it", timeout=WAIT)
            return result.final_text

        assert asyncio.run(cell()) == "The command printed 42."
    assert seen == [(threading.get_ident(), "cell 9")]
