"""Real durations against the real ``codex app-server`` (pinned) and the slow loopback model
(issue 17; R-RT-4, R-RT-7, R-OP-1, R-OP-4, R-INT-2, R-D-1).

Until issue 17 every app-server child died about 10 s after it was spawned, and nothing noticed:
no test ran longer than a few seconds. These tests run at a user's time-scale:

* **turn** — a turn that streams for :data:`TURN_S` seconds (one delta a second) completes with
  all its text, exactly, on the runtime generation (and child pid) it started on;
* **idle** — a runtime left idle for :data:`IDLE_S` seconds then runs a turn on the same
  generation and pid: no ``FAILED`` state, no cold resume (``threadResumed``);
* **approval** — a command approval left pending for :data:`PENDING_S` seconds is then
  accepted, the command runs (the file it creates exists) and the turn completes;

each through the library (``codexrt.open_runtime``) and through ``codexrt serve`` (a subprocess
speaking NDJSON), plus a :data:`BLOCKING_TURN_S` s turn through ``codexrt.blocking`` (whose worker
threads forked the child that died) and ``codexrt run --loopback`` with a
:data:`CLI_TURN_S` s turn (the before-stop smoke check).

CI time: every scenario has its own mock model, ``CODEX_HOME``, workspace and runtime (or serve
process), and they all run **concurrently** in one Trio run (:func:`long_runs`, module scope),
so the set costs about ``TURN_S`` plus start-up, not the sum. Each test then reports its own
scenario's outcome, with its own assertion messages. Selecting a subset (``-k``) runs only the
selected scenarios. The ``trio.sleep`` calls below are the idle / pending periods under test,
not a way to order events: every ordering waits on a condition (an event, a reply).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
import trio

import codexrt
import codexrt.blocking
from codexrt import RuntimeConfig, Settings
from peer_fixtures.codex_home import codex_env, config_toml, make_codex_home
from peer_fixtures.mock_responses import MockResponsesServer
from peer_fixtures.real_server import spawn_app_server
from tests._support import ROOT
from tests.e2e.test_serve_e2e import ServeProcess, pid_alive

TURN_S = 90  #: the long turn streams one delta a second for this long
IDLE_S = 40  #: idle period before the next turn
PENDING_S = 60  #: how long the approval stays unanswered
BLOCKING_TURN_S = 20  #: the blocking facade's turn
CLI_TURN_S = 15  #: ``codexrt run --loopback`` (the smoke check)
SLACK = 60  #: start-up and teardown allowance on a loaded 2-core machine, per bounded wait
WAIT = 60  #: any single short wait (an event, a reply)


def _deltas_text(n: int) -> str:
    """The exact text the mock streams for ``[[mock:deltas:n:…]]``."""
    return "".join(f"d{i} " for i in range(n))


# -- the concurrent run ----------------------------------------------------------------------------


class _Ctx:
    def __init__(self, root: Path, codex_bin: Path) -> None:
        self.root = root
        self.codex_bin = codex_bin

    def workdir(self, name: str) -> Path:
        d = self.root / name
        (d / "workspace").mkdir(parents=True)
        return d


Scenario = Callable[[_Ctx], Awaitable[Any]]
_SCENARIOS: dict[str, Scenario] = {}
_TESTS: dict[str, str] = {}  # test function name -> scenario name


def _scenario(name: str) -> Callable[[Scenario], Scenario]:
    def deco(fn: Scenario) -> Scenario:
        _SCENARIOS[name] = fn
        return fn

    return deco


@pytest.fixture(scope="module")
def long_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, codex_bin: Path):
    """Run every selected scenario at once; return ``{scenario: None | exception}``."""
    wanted = sorted({_TESTS[item.originalname] for item in request.session.items
                     if item.module is request.module and item.originalname in _TESTS})
    ctx = _Ctx(tmp_path_factory.mktemp("long"), codex_bin)
    outcomes: dict[str, BaseException | None] = {}

    async def one(name: str) -> None:
        try:
            await _SCENARIOS[name](ctx)
            outcomes[name] = None
        except Exception as exc:  # noqa: BLE001 - reported by that scenario's own test
            outcomes[name] = exc

    async def run_all() -> None:
        with trio.fail_after(TURN_S + 4 * SLACK):  # a hard bound on the whole set
            async with trio.open_nursery() as nursery:
                for name in wanted:
                    nursery.start_soon(one, name)

    started = time.monotonic()
    trio.run(run_all)
    print(f"\nlong scenarios {wanted} ran concurrently in {time.monotonic() - started:.1f} s")
    return outcomes


def _report(long_runs: dict[str, BaseException | None], name: str) -> None:
    exc = long_runs[name]
    if exc is not None:
        raise exc


# -- the library ------------------------------------------------------------------------------------


class _Watched:
    """A library runtime with every one of its events recorded from before the child starts."""

    def __init__(self, rt: codexrt.Runtime, mock: MockResponsesServer, cwd: Path) -> None:
        self.rt = rt
        self.mock = mock
        self.cwd = cwd
        self.events: list[codexrt.CodexEvent] = []

    async def record(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with self.rt.subscribe() as events:
            task_status.started()
            async for ev in events:
                self.events.append(ev)

    def child(self) -> tuple[int, int]:
        """(generation, pid) of the running child."""
        snap = self.rt.runtime_snapshot()
        assert snap["state"] == "READY" and isinstance(snap["pid"], int), f"no running child: {snap}"
        return snap["runtimeGeneration"], snap["pid"]

    def assert_same_child(self, gen: int, pid: int, what: str) -> None:
        """No FAILED state, no drain, no cold resume, no event of another generation, and the
        same generation and pid as at the start."""
        bad = [(e.kind, e.payload) for e in self.events
               if (e.kind == "runtimeStateChanged" and e.payload.get("to") in ("FAILED", "DRAINING", "STOPPED"))
               or e.kind in ("threadResumed", "runtimeReset")]
        assert not bad, f"{what}: the runtime lost its child: {bad}"
        gens = {e.runtime_generation for e in self.events if e.runtime_generation}
        assert gens == {gen}, f"{what}: events of generations {sorted(gens)}, expected only {gen}"
        assert self.child() == (gen, pid), f"{what}: generation/pid changed from {(gen, pid)} to {self.child()}"
        assert pid_alive(pid)


@contextlib.asynccontextmanager
async def _library(ctx: _Ctx, name: str, **settings: Any) -> AsyncIterator[_Watched]:
    work = ctx.workdir(name)
    cwd = work / "workspace"
    with MockResponsesServer(log_path=work / "mock-requests.jsonl") as mock:
        home = make_codex_home(work / "codex-home", mock.base_url)
        config = RuntimeConfig(codex_bin=str(ctx.codex_bin), env=codex_env(home), cwd=str(cwd),
                               channel_id=name, settings=Settings(cwd=str(cwd), **settings))
        async with codexrt.open_runtime(config) as rt:
            w = _Watched(rt, mock, cwd)
            async with trio.open_nursery() as nursery:
                await nursery.start(w.record)
                with trio.fail_after(WAIT):
                    await rt.ensure_started()
                yield w
                nursery.cancel_scope.cancel()


async def _until_done(op: codexrt.Operation, timeout: float,
                      on_event: Callable[[codexrt.CodexEvent], Any] | None = None) -> list[codexrt.CodexEvent]:
    seen = []
    with trio.fail_after(timeout):
        async for ev in op.events():
            seen.append(ev)
            if on_event is not None and on_event(ev):
                return seen
            if ev.kind == "operationDone":
                return seen
    raise AssertionError(f"the event stream of {op} ended without operationDone")


def _agent_text(events: list[Any], get: Callable[[Any], tuple[str, dict]]) -> str:
    out = []
    for e in events:
        kind, payload = get(e)
        if kind == "itemUpdated" and payload.get("stream") == "item/agentMessage/delta":
            out.append(payload["delta"])
    return "".join(out)


@_scenario("library-turn")
async def _library_turn(ctx: _Ctx) -> None:
    async with _library(ctx, "library-turn") as w:
        gen, pid = w.child()
        t0 = trio.current_time()
        op = w.rt.send(f"long-turn-lib [[mock:deltas:{TURN_S}:1000]]")
        events = await _until_done(op, TURN_S + SLACK)
        result = await op.wait()
        elapsed = trio.current_time() - t0
        assert result.status == "completed", f"the {TURN_S} s turn ended {result.status}: {result.error}"
        assert elapsed >= TURN_S - 1, f"the turn took {elapsed:.1f} s: it did not stream at a real pace"
        assert result.final_text == _deltas_text(TURN_S), f"final text differs: {result.final_text!r}"
        assert _agent_text(events, lambda e: (e.kind, e.payload)) == _deltas_text(TURN_S), "streamed text differs"
        w.assert_same_child(gen, pid, f"after a {TURN_S} s turn")
        assert len(w.mock.requests_with_user_text("long-turn-lib")) == 1  # sent to the model once


@_scenario("library-idle")
async def _library_idle(ctx: _Ctx) -> None:
    async with _library(ctx, "library-idle") as w:
        gen, pid = w.child()
        with trio.fail_after(WAIT):
            first = await w.rt.send("warm-up [[mock:text:ready]]").wait()
        assert first.status == "completed" and first.final_text == "ready", first
        await trio.sleep(IDLE_S)  # the idle period under test
        w.assert_same_child(gen, pid, f"after {IDLE_S} s idle")
        with trio.fail_after(WAIT):
            after = await w.rt.send("after-idle [[mock:text:still here]]", thread_id=first.thread_id).wait()
        assert after.status == "completed", f"the turn after {IDLE_S} s idle ended {after.status}: {after.error}"
        assert after.final_text == "still here" and after.thread_id == first.thread_id
        w.assert_same_child(gen, pid, f"a turn after {IDLE_S} s idle")


@_scenario("library-approval")
async def _library_approval(ctx: _Ctx) -> None:
    async with _library(ctx, "library-approval", approval_policy="untrusted", sandbox="workspace-write") as w:
        gen, pid = w.child()
        marker = w.cwd / "approved-after-a-minute"
        op = w.rt.send(f"pending-approval-lib [[mock:exec:touch {marker}]]")
        asked = await _until_done(op, WAIT, lambda ev: ev.kind == "interactionRequested")
        request = asked[-1].payload
        assert asked[-1].kind == "interactionRequested" and "touch" in request["params"]["command"], asked[-1]
        await trio.sleep(PENDING_S)  # the approval stays unanswered for this long
        assert not op.terminal, f"the turn ended while its approval was pending: {op.result}"
        assert [i.key for i in w.rt.pending_interactions()] == [request["interactionKey"]]
        assert not marker.exists(), "the command ran before it was approved"
        w.assert_same_child(gen, pid, f"an approval pending {PENDING_S} s")
        with trio.fail_after(WAIT):
            await w.rt.respond_interaction(request["interactionKey"], request["dialogToken"], {"decision": "accept"})
        events = await _until_done(op, WAIT)
        result = await op.wait()
        assert result.status == "completed", f"the approved turn ended {result.status}: {result.error}"
        commands = [e.payload["item"] for e in events
                    if e.kind == "itemCompleted" and e.payload["item"].get("type") == "commandExecution"]
        assert [(c["status"], c["exitCode"]) for c in commands] == [("completed", 0)], commands
        assert marker.exists(), "the approved command did not run"
        assert (result.final_text or "").startswith("mock saw tool output"), result.final_text
        w.assert_same_child(gen, pid, f"an approval accepted after {PENDING_S} s")


# -- the blocking facade and ``codexrt run`` ---------------------------------------------------------


def _blocking_turn_sync(work: Path, codex_bin: Path) -> None:
    cwd = work / "workspace"
    with MockResponsesServer() as mock:
        home = make_codex_home(work / "codex-home", mock.base_url)
        config = RuntimeConfig(codex_bin=str(codex_bin), env=codex_env(home), cwd=str(cwd),
                               settings=Settings(cwd=str(cwd)))
        with codexrt.blocking.connect(config) as brt:
            before = brt.ensure_started(timeout=WAIT)
            deltas: list[str] = []

            def on_event(ev: codexrt.CodexEvent) -> None:
                if ev.kind == "itemUpdated" and ev.payload.get("stream") == "item/agentMessage/delta":
                    deltas.append(ev.payload["delta"])

            t0 = time.monotonic()
            result = brt.send(f"blocking-turn [[mock:deltas:{BLOCKING_TURN_S}:1000]]",
                              timeout=BLOCKING_TURN_S + SLACK, on_event=on_event)
            elapsed = time.monotonic() - t0
            after = brt.snapshot()
    assert result.status == "completed", f"the blocking {BLOCKING_TURN_S} s turn ended {result.status}: {result.error}"
    assert elapsed >= BLOCKING_TURN_S - 1, f"the turn took {elapsed:.1f} s"
    assert result.final_text == _deltas_text(BLOCKING_TURN_S) == "".join(deltas)
    key = ("state", "runtimeGeneration", "pid")
    assert [after[k] for k in key] == [before[k] for k in key], (before, after)
    assert not pid_alive(before["pid"]), "close() left the child running"


@_scenario("blocking-turn")
async def _blocking_turn(ctx: _Ctx) -> None:
    # bounded inside: ensure_started and send take timeouts; close is bounded by the facade
    await trio.to_thread.run_sync(_blocking_turn_sync, ctx.workdir("blocking-turn"), ctx.codex_bin)


@_scenario("cli-run")
async def _cli_run(ctx: _Ctx) -> None:
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--loopback", "--codex-bin", str(ctx.codex_bin),
            "--cwd", str(ctx.workdir("cli-run") / "workspace"), f"[[mock:deltas:{CLI_TURN_S}:1000]]"]
    with trio.fail_after(CLI_TURN_S + SLACK):
        proc = await trio.run_process(argv, cwd=str(ROOT), stdin=subprocess.DEVNULL, capture_stdout=True,
                                      capture_stderr=True, check=False)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, f"codexrt run --loopback exited {proc.returncode}:\n{err}"
    assert proc.stdout.decode().strip() == _deltas_text(CLI_TURN_S).strip(), (proc.stdout, err)
    assert "continue with" not in err, "no --thread hint for a throw-away loopback CODEX_HOME"


# -- codexrt serve --------------------------------------------------------------------------------


async def _request(sp: ServeProcess, command: str, params: dict[str, Any]) -> dict[str, Any]:
    return await sp.response(await sp.send(command, params), timeout=WAIT)


class _Served:
    def __init__(self, sp: ServeProcess, mock: MockResponsesServer, cwd: Path) -> None:
        self.sp = sp
        self.mock = mock
        self.cwd = cwd

    async def child(self) -> tuple[int, int]:
        status = await _request(self.sp, "status", {"channelId": "c"})
        [snap] = status["result"]["channels"]
        assert snap["state"] == "READY" and isinstance(snap["pid"], int), f"no running child: {snap}"
        return snap["runtimeGeneration"], snap["pid"]

    async def assert_same_child(self, gen: int, pid: int, what: str) -> None:
        now = await self.child()  # also reads every line written before the status reply
        lines = [l for l in self.sp.lines if l["type"] == "daemon" and l["channelId"] == "c"]
        bad = [(l["kind"], l["payload"]) for l in lines
               if (l["kind"] == "runtimeStateChanged" and l["payload"].get("to") in ("FAILED", "DRAINING", "STOPPED"))
               or l["kind"] in ("threadResumed", "runtimeReset")]
        assert not bad, f"{what}: the channel lost its child: {bad}"
        gens = {l["runtimeGeneration"] for l in lines if l["runtimeGeneration"]}
        assert gens == {gen}, f"{what}: events of generations {sorted(gens)}, expected only {gen}"
        assert now == (gen, pid), f"{what}: generation/pid changed from {(gen, pid)} to {now}"
        assert pid_alive(pid)


@contextlib.asynccontextmanager
async def _serve(ctx: _Ctx, name: str) -> AsyncIterator[_Served]:
    work = ctx.workdir(name)
    cwd = work / "workspace"
    with MockResponsesServer(log_path=work / "mock-requests.jsonl") as mock:
        home = make_codex_home(work / "codex-home", mock.base_url)
        args = ("--codex-bin", str(ctx.codex_bin), "--codex-home", str(home), "--cwd", str(cwd))
        async with ServeProcess.open(work, *args, env=codex_env(home), name=name) as sp:
            yield _Served(sp, mock, cwd)
            assert await sp.finish(timeout=WAIT) == 0, sp.stderr()[-3000:]


async def _serve_started(s: _Served, message: str, **params: Any) -> tuple[str, int, int]:
    """Send ``message`` on channel ``c``; once its turn started, return (request id, gen, pid)."""
    rid = await s.sp.send("codex.send", {"channelId": "c", "message": message, **params})
    queued = await s.sp.event("operationQueued", lambda l: l["payload"]["requestId"] == rid, timeout=WAIT)
    await s.sp.event("turnStarted", lambda l: l["clientOperationId"] == queued["clientOperationId"], timeout=WAIT)
    gen, pid = await s.child()
    return rid, gen, pid


@_scenario("serve-turn")
async def _serve_turn(ctx: _Ctx) -> None:
    async with _serve(ctx, "serve-turn") as s:
        t0 = trio.current_time()
        rid, gen, pid = await _serve_started(s, f"long-turn-serve [[mock:deltas:{TURN_S}:1000]]")
        reply = await s.sp.response(rid, timeout=TURN_S + SLACK)
        elapsed = trio.current_time() - t0
        result = reply["result"]
        assert result["status"] == "completed", f"the {TURN_S} s turn ended {result['status']}: {result.get('error')}"
        assert elapsed >= TURN_S - 1, f"the turn took {elapsed:.1f} s: it did not stream at a real pace"
        assert result["finalText"] == _deltas_text(TURN_S), f"final text differs: {result['finalText']!r}"
        op_lines = [l for l in s.sp.lines if l["type"] == "daemon"
                    and l["clientOperationId"] == result["clientOperationId"]]
        assert _agent_text(op_lines, lambda l: (l["kind"], l["payload"])) == _deltas_text(TURN_S)
        await s.assert_same_child(gen, pid, f"after a {TURN_S} s turn")
        assert len(s.mock.requests_with_user_text("long-turn-serve")) == 1  # sent to the model once


@_scenario("serve-idle")
async def _serve_idle(ctx: _Ctx) -> None:
    async with _serve(ctx, "serve-idle") as s:
        first = await _request(s.sp, "codex.send", {"channelId": "c", "message": "warm-up [[mock:text:ready]]"})
        assert first["result"]["status"] == "completed" and first["result"]["finalText"] == "ready", first
        gen, pid = await s.child()
        await trio.sleep(IDLE_S)  # the idle period under test (serve's own idle timeout is 600 s)
        await s.assert_same_child(gen, pid, f"after {IDLE_S} s idle")
        tid = first["result"]["threadId"]
        after = await _request(s.sp, "codex.send", {"channelId": "c", "threadId": tid,
                                                  "message": "after-idle [[mock:text:still here]]"})
        result = after["result"]
        assert result["status"] == "completed", f"the turn after {IDLE_S} s idle ended {result['status']}: {result}"
        assert result["finalText"] == "still here" and result["threadId"] == tid
        await s.assert_same_child(gen, pid, f"a turn after {IDLE_S} s idle")


@_scenario("serve-approval")
async def _serve_approval(ctx: _Ctx) -> None:
    async with _serve(ctx, "serve-approval") as s:
        marker = s.cwd / "approved-after-a-minute"
        rid, gen, pid = await _serve_started(
            s, f"pending-approval-serve [[mock:exec:touch {marker}]]",
            settings={"approvalPolicy": "untrusted", "sandbox": "workspace-write"})
        asked = (await s.sp.event("interactionRequested", timeout=WAIT))["payload"]
        assert "touch" in asked["params"]["command"], asked
        await trio.sleep(PENDING_S)  # the approval stays unanswered for this long
        await s.assert_same_child(gen, pid, f"an approval pending {PENDING_S} s")  # reads every line so far
        assert not s.sp.has_response(rid), "the send was answered while its approval was pending"
        status = await _request(s.sp, "status", {"channelId": "c"})
        assert status["result"]["channels"][0]["pendingInteractions"] == 1, status
        assert not marker.exists(), "the command ran before it was approved"
        ok = await _request(s.sp, "codex.respondInteraction", {
            "channelId": "c", "interactionKey": asked["interactionKey"], "dialogToken": asked["dialogToken"],
            "result": {"decision": "accept"}})
        assert ok["ok"] is True, ok
        reply = await s.sp.response(rid, timeout=WAIT)
        result = reply["result"]
        assert result["status"] == "completed", f"the approved turn ended {result['status']}: {result}"
        commands = [l["payload"]["item"] for l in s.sp.lines if l["type"] == "daemon" and l["kind"] == "itemCompleted"
                    and l["payload"]["item"].get("type") == "commandExecution"]
        assert [(c["status"], c["exitCode"]) for c in commands] == [("completed", 0)], commands
        assert marker.exists(), "the approved command did not run"
        assert (result["finalText"] or "").startswith("mock saw tool output"), result["finalText"]
        await s.assert_same_child(gen, pid, f"an approval accepted after {PENDING_S} s")


# -- the tests (one per scenario; all scenarios run at once in ``long_runs``) ---------------------


def _test(scenario: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        _TESTS[fn.__name__] = scenario
        return fn

    return deco


@_test("library-turn")
def test_r_rt_7_library_turn_of_90_s_completes_on_the_same_child(long_runs):
    _report(long_runs, "library-turn")


@_test("library-idle")
def test_r_rt_7_library_runtime_idle_40_s_then_runs_a_turn_on_the_same_child(long_runs):
    _report(long_runs, "library-idle")


@_test("library-approval")
def test_r_int_2_library_approval_pending_60_s_then_accepted_runs_its_command(long_runs):
    _report(long_runs, "library-approval")


@_test("serve-turn")
def test_r_d_1_serve_turn_of_90_s_completes_on_the_same_child(long_runs):
    _report(long_runs, "serve-turn")


@_test("serve-idle")
def test_r_d_1_serve_channel_idle_40_s_then_runs_a_turn_on_the_same_child(long_runs):
    _report(long_runs, "serve-idle")


@_test("serve-approval")
def test_r_int_2_serve_approval_pending_60_s_then_accepted_runs_its_command(long_runs):
    _report(long_runs, "serve-approval")


@_test("blocking-turn")
def test_r_rt_7_blocking_facade_turn_of_20_s_completes_on_the_same_child(long_runs):
    _report(long_runs, "blocking-turn")


@_test("cli-run")
def test_r_op_4_codexrt_run_loopback_turn_of_15_s_exits_0(long_runs):
    _report(long_runs, "cli-run")


# -- what keeps codex's model stream alive -----------------------------------------------------------


def test_stream_idle_timeout_counts_sse_events_not_comments(tmp_path, codex_bin):
    """codex's ``stream_idle_timeout_ms`` (default 300 s) is reset by SSE *events* only: a
    stream of keep-alive comments (what ``[[mock:hang]]`` sends every 0.5 s) fails the turn with
    ``idle timeout waiting for SSE`` once the timeout passes, while deltas closer together than
    the timeout keep it alive (docs/real-server-notes.md)."""
    cwd = tmp_path / "workspace"
    cwd.mkdir()
    with MockResponsesServer(hang_cap=30) as mock:
        home = tmp_path / "codex-home"
        home.mkdir()
        toml = config_toml(mock.base_url)
        assert "stream_idle_timeout_ms = 300000" in toml
        (home / "config.toml").write_text(toml.replace("stream_idle_timeout_ms = 300000",
                                                       "stream_idle_timeout_ms = 3000"))
        with spawn_app_server(codex_bin, codex_env(home), cwd=cwd) as srv:
            srv.initialize()
            tid = srv.call("thread/start", {"cwd": str(cwd)})["thread"]["id"]

            def turn(text: str) -> tuple[dict[str, Any], float]:
                t0 = time.monotonic()
                tu = srv.call("turn/start", {"threadId": tid, "input": [
                    {"type": "text", "text": text, "text_elements": []}]})["turn"]["id"]
                done = srv.wait_for(lambda m: m.get("method") == "turn/completed"
                                    and m["params"]["turn"]["id"] == tu, timeout=WAIT, what="turn/completed")
                return done["params"]["turn"], time.monotonic() - t0

            hung, took = turn("keep-alive comments only [[mock:hang]]")
            assert hung["status"] == "failed" and "idle timeout waiting for SSE" in hung["error"]["message"], hung
            assert 3.0 <= took < 25, f"failed after {took:.1f} s, expected about 3 s"
            paced, took = turn("[[mock:deltas:5:1000]]")  # 1 s apart: a 3x margin on a loaded machine
            assert paced["status"] == "completed" and took >= 4, (paced, took)
    assert [r.outcome for r in mock.model_requests()] == ["client_disconnected", "completed"]
