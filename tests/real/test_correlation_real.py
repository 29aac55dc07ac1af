"""Exact correlation on the real ``codex app-server`` (issue 24): compact gated on the settings
revision it froze (R-SET-2), and a ``turn/start`` answered after its RPC budget, tied to its
operation by ``clientOperationId`` (R-WIRE-4). Loopback model only; every wait is bounded."""

from __future__ import annotations

import trio

import codexrt
from codexrt import RuntimeConfig, Settings
from tests._support import wait_until

WAIT = 60


def _config(codex_bin, env, cwd, **kw):
    return RuntimeConfig(codex_bin=str(codex_bin), env=env, cwd=str(cwd), settings=Settings(cwd=str(cwd)), **kw)


async def test_r_set_2_compact_runs_under_the_confirmed_revision(codex_bin, real_env, real_cwd, mock_model):
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        with trio.fail_after(WAIT):
            first = await rt.send("hello").wait()
            assert first.status == "completed"
            rev = rt.update_settings(model="mock-model-b", effort="high")
            op = rt.compact(first.thread_id)
            result = await op.wait()
        assert result.status == "completed", result
        assert op.payload["settingsRevision"] == rev
        eff = rt.threads[first.thread_id].effective
        assert eff["model"] == "mock-model-b" and eff["effort"] == "high"
    # the compaction's model request ran under the confirmed revision
    assert mock_model.model_requests()[-1].model == "mock-model-b"


async def test_r_wire_4_late_turn_start_correlated_by_client_operation_id(codex_bin, real_env, real_cwd, mock_model):
    """A ``turn/start`` whose 2 ms wait runs out after it was written: the ``error`` event and the
    ``lateResponse`` both name the operation (``clientOperationId``, same request id), and the
    late result binds the turn, which is then interrupted — never re-sent. The real server may
    answer within the 2 ms (a race the test cannot steer): then that attempt is stopped and the
    scenario tried again, a few times at most."""
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        with rt.subscribe() as events, trio.fail_after(WAIT * 3):
            first = await rt.send("hello").wait()
            conn = rt.conn
            budget = conn.rpc_timeout
            for attempt in range(5):
                text = f"[[mock:hang]] attempt {attempt}"
                conn.rpc_timeout = 0.002  # the next request's wait runs out once it is written
                op = rt.send(text, thread_id=first.thread_id)
                late = timeout_err = None
                seen = []
                async for ev in events:
                    seen.append((ev.kind, ev.client_operation_id == op.id, ev.payload.get("phase")))
                    mine = ev.client_operation_id == op.id
                    if ev.kind == "error" and mine:
                        timeout_err = ev
                        conn.rpc_timeout = budget  # everything after (interrupt, unsubscribe) as usual
                    if ev.kind == "lateResponse":
                        late = ev
                    if timeout_err and late:
                        break
                    if ev.kind == "operationAcked" and mine and timeout_err is None:
                        break  # answered within the 2 ms: no late response this time
                    if ev.kind == "operationDone" and mine:
                        break
                conn.rpc_timeout = budget
                if late is not None:
                    break
                rt.abort(op)  # this attempt's turn (hanging) is stopped; try again
                assert (await op.wait()).status in ("interrupted", "cancelled", "failed"), seen
            assert late is not None, seen
            assert timeout_err is not None and timeout_err.payload["phase"] == "writtenUnconfirmed"
            assert late.client_operation_id == op.id
            assert late.payload["method"] == "turn/start" and late.payload["ok"] is True
            assert late.payload["requestId"] == timeout_err.payload["requestId"]
            # Bound by turn/started or by the late result, whichever first — which may already
            # have happened while the loop above ran (then no further event would come).
            if op.turn_id is None:
                async for ev in events:
                    if op.turn_id is not None:
                        break
            await wait_until(lambda: mock_model.requests_with_user_text(text), "the turn to reach the model")
            rt.abort(op)
            result = await op.wait()
        assert result.status == "interrupted" and result.turn_id == op.turn_id
    assert len(mock_model.requests_with_user_text(text)) == 1  # never re-sent


async def test_r_op_8_consecutive_failures_each_get_one_terminal_on_the_real_server(codex_bin, real_env, real_cwd,
                                                                                    mock_model):
    """R-OP-8 on the real server: a model failure is a turn/started + error + turn/completed(failed)
    sequence of *its* turn; two in a row give two terminals, each for the submission that sent it,
    and the trailing error of the first never reaches the second. Nothing is re-sent."""
    async with codexrt.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
        with rt.subscribe() as events, trio.fail_after(WAIT):
            a = rt.send("first [[mock:http500]]", client_message_id="cm-a")
            ra = await a.wait()
            b = rt.send("second [[mock:http500]]", client_message_id="cm-b", thread_id=ra.thread_id)
            rb = await b.wait()
            done = []
            while (ev := events.get_nowait()) is not None:
                if ev.kind == "operationDone":
                    done.append((ev.client_operation_id, ev.payload["status"]))
    assert (ra.status, rb.status) == ("failed", "failed") and ra.turn_id != rb.turn_id
    assert done == [(a.id, "failed"), (b.id, "failed")]
    assert all(e.get("message") for e in a.errors) and all(e.get("message") for e in b.errors)
    assert len(mock_model.requests_with_user_text("first")) == 1
    assert len(mock_model.requests_with_user_text("second")) == 1
