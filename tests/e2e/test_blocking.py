"""The blocking facade (``codexrt.blocking``) against the scripted fake app-server, spawned as
a real child process (R-OP-1, R-OP-5, R-INT-1, R-INT-3, R-RT-7).

Testing charter: these tests are plain (sync) functions — the facade's whole point is to be
used without a Trio loop in the caller. Each one proves a use from the issue's "Done when":
inside a running asyncio loop (a notebook cell), from plain threads, with approvals answered by
policy, callback or by hand, and that a KeyboardInterrupt, a timeout, close, garbage collection
and interpreter exit each stop the turn and reap the child. Every wait is bounded (the facade's
own ``timeout=`` or a thread join with a bound); no sleep orders anything.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import codexrt
import codexrt.blocking
from codexrt import RuntimeConfig
from codexrt.blocking import ApprovalRequest
from peer_fixtures.fake_app_server import read_log
from tests._support import ROOT, fake_server_factory, process_exists, wait_until_blocking

WAIT = 20.0  # upper bound of any single wait here (a loaded 2-core machine)


def _connect(scenario: str = "handshake-ok", log: Path | None = None, **kw):
    return codexrt.blocking.connect(transports=[fake_server_factory(scenario, log)], **kw)


def test_send_in_a_plain_script_and_close_reaps_the_child():
    with _connect() as rt:
        result = rt.send("hello", timeout=WAIT)
        pid = rt.snapshot()["pid"]
        assert isinstance(pid, int) and process_exists(pid)
    assert result.status == "completed" and result.final_text == "Hello from the fake peer."
    assert rt.closed and not process_exists(pid)


def test_facade_inside_a_running_asyncio_loop_like_a_notebook_cell():
    """A notebook cell runs inside an asyncio loop: blocking calls work there, and so do the
    awaitable wrappers, without touching (or nesting) that loop."""

    async def cell():
        loop = asyncio.get_running_loop()
        ticks = 0

        async def ticker():  # the caller's loop keeps running while we await the wrappers
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        with _connect() as rt:
            first = rt.send("blocking call inside the loop", timeout=WAIT)
            second = await rt.asend("awaited", thread_id=first.thread_id, timeout=WAIT)
            kinds = [ev.kind async for ev in rt.astream("streamed", thread_id=first.thread_id)]
            models = await rt.acall("model/list", {})
        t.cancel()
        assert asyncio.get_running_loop() is loop
        return first, second, kinds, models, ticks

    first, second, kinds, models, ticks = asyncio.run(cell())
    assert first.status == second.status == "completed"
    assert second.thread_id == first.thread_id
    assert kinds[0] == "operationQueued" and kinds[-1] == "operationDone"
    assert isinstance(models.get("data"), list)
    assert ticks > 0


def test_one_runtime_shared_by_plain_threads_runs_their_sends_in_fifo():
    results: dict[int, codexrt.OperationResult] = {}
    errors: list[BaseException] = []
    with _connect() as rt:
        def worker(i: int) -> None:
            try:
                results[i] = rt.send(f"message {i}", timeout=WAIT)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert not any(t.is_alive() for t in threads)
    assert not errors
    assert sorted(results) == [0, 1, 2, 3]
    assert all(r.status == "completed" for r in results.values())


def test_stream_yields_events_as_they_come_and_text_is_lossless():
    with _connect() as rt:
        op = rt.stream("hello")
        texts = list(op.text())
        result = op.wait(WAIT)
    assert "".join(texts) == result.final_text
    assert op.done and op.result == result and op.thread_id == result.thread_id


@pytest.mark.parametrize(
    ("policy", "final"),
    [("decline", "The command was not run."), ("accept", "The command printed 42.")],
)
def test_r_int_3_named_approval_policies(policy, final):
    kw = {} if policy == "decline" else {"approvals": policy}  # decline is the default
    with _connect("reverse-approval", **kw) as rt:
        result = rt.send("run it", timeout=WAIT)
    assert result.status == "completed" and result.final_text == final


def test_no_approval_is_granted_by_default(tmp_path):
    log = tmp_path / "peer.log"
    with _connect("reverse-approval", log) as rt:
        rt.send("run it", timeout=WAIT)
    replies = [m for m in read_log(log) if "result" in m and "method" not in m]
    assert [r["result"] for r in replies if r["id"] == 0] == [{"decision": "decline"}]


def test_r_int_3_approvals_run_as_the_runtime_interaction_policy():
    """The facade has no approval engine of its own: its policy is the runtime's
    (``Runtime.set_interaction_policy``), so the runtime validates and sends the reply and
    says ``by: "policy"`` (``"manual"``, which leaves it to the host, is the next test's)."""
    with _connect("reverse-approval", approvals="accept") as rt:
        first = rt.stream("run it")
        answered = [ev.payload for ev in first if ev.kind == "interactionAnswered"]
        assert answered and answered[0]["by"] == "policy"
        assert first.result is not None and first.result.final_text == "The command printed 42."


def test_approval_callback_runs_in_its_own_thread_and_may_block():
    seen: list[tuple[ApprovalRequest, str]] = []
    release = threading.Event()

    def ask(req: ApprovalRequest) -> str:
        seen.append((req, threading.current_thread().name))
        release.wait(WAIT)  # a human thinking: the runtime keeps reading meanwhile
        return "accept"

    with _connect("reverse-approval", approvals=ask) as rt:
        op = rt.submit("run it")
        wait_until_blocking(lambda: seen, "the callback")
        assert rt.snapshot()["pendingInteractions"] == 1  # the reader is not blocked by the callback
        release.set()
        result = op.wait(WAIT)
    [(req, thread_name)] = seen
    assert thread_name != threading.current_thread().name and thread_name != "codexrt-blocking"
    assert req.kind == "command" and "print(6*7)" in (req.command or "")
    assert "run command" in req.describe()
    assert result.final_text == "The command printed 42."


def test_per_send_policy_overrides_and_a_failing_callback_declines():
    def broken(req):
        raise RuntimeError("boom")

    with _connect("reverse-approval", approvals="accept") as rt:
        result = rt.send("run it", approvals=broken, timeout=WAIT)
    assert result.final_text == "The command was not run."


def test_manual_policy_answer_while_iterating_the_stream():
    with _connect("reverse-approval", approvals="manual") as rt:
        op = rt.stream("run it")
        for ev in op:
            if ev.kind == "interactionRequested":
                assert [r.key for r in rt.pending_interactions()] == [ev.payload["interactionKey"]]
                rt.respond(ev, "accept")
                with pytest.raises(codexrt.InteractionError):  # R-INT-1: a duplicate answer is refused
                    rt.respond(ev, "decline")
        assert op.result.final_text == "The command printed 42."


def test_r_op_5_keyboard_interrupt_during_send_stops_the_turn_and_reraises(tmp_path):
    log = tmp_path / "peer.log"
    main = threading.get_ident()
    with _connect("hang-turn", log) as rt:
        op = rt.submit("never ends")

        def interrupt_when_started():
            wait_until_blocking(lambda: op.turn_id is not None, "the turn to start")
            signal.pthread_kill(main, signal.SIGINT)

        t = threading.Thread(target=interrupt_when_started)
        t.start()
        with pytest.raises(KeyboardInterrupt):
            op.wait()
        t.join(WAIT)
        assert op.result is not None and op.result.status == "interrupted"
        snap = rt.snapshot()
        assert snap["busy"] is False and snap["state"] == "READY"  # stopped the turn, not the runtime
    assert [m["method"] for m in read_log(log) if m.get("method") == "turn/interrupt"]


def _main_waits_in(thread_id: int, caller: str) -> bool:
    """The thread is blocked in a future wait called (indirectly) from ``caller``: a signal
    sent now interrupts exactly that wait."""
    frame = sys._current_frames().get(thread_id)
    names = []
    while frame is not None:
        names.append((frame.f_code.co_name, frame.f_code.co_filename))
        frame = frame.f_back
    in_wait = any(n == "wait" and (f.endswith(os.path.join("concurrent", "futures", "_base.py"))
                                   or f.endswith("threading.py"))  # a CallerHost's wait (approval callbacks)
                  for n, f in names)
    return in_wait and any(n == caller for n, _ in names)


def test_r_op_5_second_keyboard_interrupt_kills_the_child_instead_of_waiting(tmp_path):
    """The first Ctrl+C sends ``turn/interrupt``; this peer never answers it, so the facade
    waits for the terminal — a second Ctrl+C kills the app-server now (not after the stop
    budget, set huge here: the result shows a SIGKILLed child, not an exhausted budget)."""
    scenario = tmp_path / "deaf.json"
    scenario.write_text(json.dumps({
        "name": "hang-turn-deaf", "defaults": True,
        "description": "a turn that hangs; turn/interrupt is never answered",
        "rules": [{"match": {"method": "turn/start"}, "actions": [{"hang_turn": True}]},
                  {"match": {"method": "turn/interrupt"}, "actions": []}]}))
    log = tmp_path / "peer.log"
    main = threading.get_ident()
    with _connect(str(scenario), log, stop_budget=600.0) as rt:
        op = rt.submit("never ends")
        wait_until_blocking(lambda: op.turn_id is not None, "the turn to start")
        pid = rt.snapshot()["pid"]

        def interrupt_twice():
            wait_until_blocking(lambda: _main_waits_in(main, "_guarded"), "op.wait() to block")
            signal.pthread_kill(main, signal.SIGINT)
            wait_until_blocking(lambda: any(m.get("method") == "turn/interrupt" for m in read_log(log)),
                        "the interrupt to reach the peer")
            wait_until_blocking(lambda: _main_waits_in(main, "_stop_and_settle"), "the stop to wait")
            signal.pthread_kill(main, signal.SIGINT)

        t = threading.Thread(target=interrupt_twice)
        t.start()
        with pytest.raises(KeyboardInterrupt):
            op.wait()
        t.join(WAIT)
        assert not t.is_alive()
        assert op.result is not None and op.result.status == "failed"
        assert op.result.error.code == "CHILD_EXITED"
        assert op.result.error.signal == signal.SIGKILL
        assert not op.result.error.details.get("stopBudgetExhausted")
        wait_until_blocking(lambda: not process_exists(pid), "the killed child to be reaped")
        assert "data" in rt.list_models()  # the runtime goes on, on a new child
        assert rt.snapshot()["pid"] not in (None, pid)


def test_timeout_stops_the_turn_and_raises_turn_timeout():
    with _connect("hang-turn") as rt:
        with pytest.raises(codexrt.RpcTimeout) as info:
            rt.send("never ends", timeout=1.0)
        assert info.value.code == "TURN_TIMEOUT"
        assert info.value.details["result"]["status"] == "interrupted"


def test_close_during_a_turn_interrupts_it_and_reaps_the_child(tmp_path):
    log = tmp_path / "peer.log"
    rt = _connect("hang-turn", log)
    op = rt.submit("never ends")
    wait_until_blocking(lambda: op.turn_id is not None, "the turn to start")
    pid = rt.snapshot()["pid"]
    rt.close()
    assert op.result.status == "interrupted"
    assert not process_exists(pid)
    assert any(m.get("method") == "turn/interrupt" for m in read_log(log))
    with pytest.raises(codexrt.ClosedError):
        rt.send("after close")


def test_garbage_collection_closes_the_runtime(tmp_path):
    rt = _connect()
    rt.send("hello", timeout=WAIT)
    pid = rt.snapshot()["pid"]
    thread = rt._portal._thread
    del rt
    gc.collect()
    thread.join(WAIT)
    assert not thread.is_alive() and not process_exists(pid)


def test_interpreter_exit_stops_the_turn_and_reaps_the_child(tmp_path):
    """A script that never closes its runtime: at exit the finalizer interrupts the running
    turn (the fake peer logs ``turn/interrupt``) and reaps the child."""
    log = tmp_path / "peer.log"
    script = f"""
import json, sys, time
sys.path.insert(0, {str(ROOT)!r})
import codexrt.blocking
from tests._support import fake_server_factory, wait_until_blocking
rt = codexrt.blocking.connect(transports=[fake_server_factory("hang-turn", {str(log)!r})])
op = rt.submit("never ends")
wait_until_blocking(lambda: op.turn_id is not None, "the turn to start", timeout=20)
print(json.dumps({{"pid": rt.snapshot()["pid"], "turn": op.turn_id}}), flush=True)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["turn"] and not process_exists(info["pid"])
    assert any(m.get("method") == "turn/interrupt" for m in read_log(log))


def test_native_reads_and_escape_hatch():
    with _connect() as rt:
        first = rt.send("hello", timeout=WAIT)
        assert "data" in rt.list_models()
        assert "data" in rt.list_threads(limit=5)
        assert rt.read_thread(first.thread_id)["thread"]["id"] == first.thread_id
        assert rt.run_async(lambda runtime: _state(runtime)) == "READY"
        with pytest.raises(codexrt.BusyResourceError):
            rt.run_async(lambda runtime: _reenter(rt))


async def _state(runtime):
    return runtime.state.value


async def _reenter(rt):
    return rt.snapshot()  # from the runtime's own thread: refused, never a deadlock


def test_config_object_and_kwargs_combine():
    cfg = RuntimeConfig(transports=[fake_server_factory("handshake-ok")])
    with codexrt.blocking.connect(cfg, rpc_timeout=5.0) as rt:
        assert rt.config.rpc_timeout == 5.0
        assert rt.ensure_started()["state"] == "READY"


def _flood_factory(*args: str):
    from codexrt._io._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv

    async def factory():
        return await spawn_process_transport(argv(*args), cwd=str(ROOT))

    return factory


def test_r_d_2_iterating_a_flood_from_a_lagging_thread_is_bounded_and_lossless():
    """R-D-2: the facade's event pump pauses once its bound of events waits on the caller's
    side (the Trio-side stream coalesces meanwhile), and a caller that comes back late still
    rebuilds the exact text."""
    from codexrt._portal import _BATCH, _HIGH_WATER
    from peer_fixtures.flood_peer import expected_text

    n = 20_000
    with codexrt.blocking.connect(transports=[_flood_factory()]) as rt:
        op = rt.stream(f"[[flood:{n}:1]]")  # a status notification after every delta
        first = op.next_event()
        assert first is not None
        pump = op._pump
        wait_until_blocking(lambda: pump._room is not None or op.done, "the pump to pause at its bound")
        assert pump._room is not None, "the flood ended before the pump reached its bound"
        assert len(pump._q) <= _HIGH_WATER + _BATCH
        parts = [first.payload["delta"]] if first.kind == "itemUpdated" else []
        for ev in op:
            if ev.kind == "itemUpdated":
                parts.append(ev.payload["delta"])
        assert op.wait().status == "completed"
        assert "".join(parts) == expected_text(n) == op.result.final_text


def test_r_op_5_keyboard_interrupt_while_iterating_stops_the_turn_and_reraises(tmp_path):
    log = tmp_path / "peer.log"
    main = threading.get_ident()
    with _connect("hang-turn", log) as rt:
        op = rt.stream("never ends")

        def blocked_in_next_event() -> bool:
            frame = sys._current_frames().get(main)
            names = []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            return "wait" in names and "next_event" in names

        def interrupt_when_started():
            wait_until_blocking(lambda: op.turn_id is not None and blocked_in_next_event(), "the turn to start")
            signal.pthread_kill(main, signal.SIGINT)

        t = threading.Thread(target=interrupt_when_started)
        t.start()
        with pytest.raises(KeyboardInterrupt):
            for _ev in op:
                pass
        t.join(WAIT)
        assert op.result is not None and op.result.status == "interrupted"
        assert [ev.kind for ev in op][-1] == "operationDone"  # the rest of the stream is still readable
    assert [m["method"] for m in read_log(log) if m.get("method") == "turn/interrupt"]
