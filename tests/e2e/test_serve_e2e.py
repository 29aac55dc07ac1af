"""``codexrt serve`` end to end: the daemon runs as a real subprocess
(``python -m codexrt_cli serve``) against the scripted fake app-server (R-D-1 … R-D-4, R-OP-1,
R-OP-5, R-RT-6, R-LC-3).

Testing charter:

* **Every line** ``serve`` writes is decoded and validated against the shipped JSON Schema
  (``#/$defs/outputLine``; each reply's ``result`` against ``#/$defs/commandResult/<command>``;
  each event ``kind`` must be a documented one) by :class:`ServeProcess` — so a stray byte on
  stdout, or a line the docs do not describe, fails the test that produced it.
* Every wait is bounded (``trio.fail_after``); no sleep orders anything: tests wait for the
  line that proves a state (an event, a reply).
* Each test ends with stdin EOF and checks the drain: exit status 0, and the app-server child
  (pid from ``status``) is gone.
* ``CODEXRT_SERVE_TRANSCRIPTS=DIR`` writes each test's full conversation (``>`` = stdin,
  ``<`` = stdout) to ``DIR/<test>.ndjson``; ``docs/daemon-protocol.md`` quotes those.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
import trio

from codexrt._serve._schema import load_schema
from tests._support import schema_problem
from tests._support import process_exists

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = load_schema()
KNOWN_KINDS = set(SCHEMA["$defs"]["eventKind"]["enum"])
PAYLOAD_KINDS = set(SCHEMA["$defs"]["eventPayloads"]["properties"])
WAIT = 20.0  # upper bound of any single wait in these tests (a loaded 2-core machine)


class ServeProcess:
    """A running ``codexrt serve`` with a schema-checking line reader."""

    def __init__(self, proc: trio.Process, name: str, stderr_path: Path) -> None:
        self.proc = proc
        self.name = name
        self.stderr_path = stderr_path
        self.lines: list[dict[str, Any]] = []  # every stdout line, in order
        self.transcript: list[tuple[str, Any]] = []
        self._unconsumed: list[dict[str, Any]] = []
        self._buf = b""
        self._eof = False
        self._commands: dict[Any, str] = {}
        self._ids = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                   name: str = "serve") -> AsyncIterator["ServeProcess"]:
        stderr_path = tmp_path / f"{name}.stderr"
        argv = [sys.executable, "-m", "codexrt_cli", "--log-level", "info", "serve", *args]
        with open(stderr_path, "wb") as err:
            proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                    stderr=err, cwd=str(ROOT), env=env)
        sp = cls(proc, name, stderr_path)
        try:
            yield sp
        finally:
            with trio.CancelScope(shield=True):
                if proc.returncode is None:
                    with trio.move_on_after(WAIT):
                        await sp.close_stdin()
                        await proc.wait()
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
                sp._write_transcript()

    def _write_transcript(self) -> None:
        target = os.environ.get("CODEXRT_SERVE_TRANSCRIPTS")
        if not target:
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", self.name).split(" ")[0].split("::")[-1]
        Path(target).mkdir(parents=True, exist_ok=True)
        with open(Path(target) / f"{test}.ndjson", "w", encoding="utf-8") as fh:
            for direction, line in self.transcript:
                fh.write(f"{direction} {line if isinstance(line, str) else json.dumps(line)}\n")

    # -- stdin -----------------------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data)
        self.transcript.append((">", data.decode("utf-8", "replace").rstrip("\n")))

    async def send(self, command: str, params: dict[str, Any] | None = None, *, id: Any = None) -> Any:
        if id is None:
            self._ids += 1
            id = f"r{self._ids}"
        self._commands[id] = command
        msg: dict[str, Any] = {"id": id, "command": command}
        if params is not None:
            msg["params"] = params
        await self.send_raw(json.dumps(msg).encode() + b"\n")
        return id

    async def request(self, command: str, params: dict[str, Any] | None = None, *, id: Any = None) -> dict[str, Any]:
        rid = await self.send(command, params, id=id)
        return await self.response(rid)

    async def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await self.proc.stdin.aclose()

    # -- stdout ----------------------------------------------------------------------------

    def _check(self, line: dict[str, Any]) -> None:
        problem = schema_problem(line, "outputLine")
        assert problem is None, f"line does not fit the schema: {problem}\n{line}"
        if line["type"] == "daemon":
            assert line["kind"] in KNOWN_KINDS, f"undocumented event kind {line['kind']!r}"
            if line["kind"] in PAYLOAD_KINDS:  # a kind whose payload shape the schema fixes
                problem = schema_problem(line["payload"], f"eventPayloads/properties/{line['kind']}")
                assert problem is None, f"{line['kind']} payload does not fit the schema: {problem}\n{line}"
        elif line["ok"] and line["id"] in self._commands:
            command = self._commands[line["id"]]
            problem = schema_problem(line["result"], f"commandResult/{command}")
            assert problem is None, f"{command} result does not fit the schema: {problem}\n{line}"

    async def _read_line(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        while b"\n" not in self._buf:
            if self._eof:
                assert not self._buf, f"unterminated stdout tail: {self._buf!r}"
                return None
            chunk = await self.proc.stdout.receive_some(65536)
            if not chunk:
                self._eof = True
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\n", 1)
        line = json.loads(raw)  # stdout carries protocol lines only: anything else fails here
        assert isinstance(line, dict)
        self._check(line)
        self.lines.append(line)
        self.transcript.append(("<", raw.decode()))
        return line

    async def next(self, pred: Callable[[dict[str, Any]], bool], *, timeout: float = WAIT) -> dict[str, Any]:
        """The first not yet consumed line matching ``pred`` (earlier lines stay available)."""
        for i, line in enumerate(self._unconsumed):
            if pred(line):
                return self._unconsumed.pop(i)
        with trio.fail_after(timeout):
            while True:
                line = await self._read_line()
                if line is None:
                    raise AssertionError(f"stdout ended while waiting; stderr:\n{self.stderr()[-3000:]}")
                if pred(line):
                    return line
                self._unconsumed.append(line)

    async def response(self, rid: Any, *, timeout: float = WAIT) -> dict[str, Any]:
        return await self.next(lambda l: l["type"] == "response" and l["id"] == rid and type(l["id"]) is type(rid),
                               timeout=timeout)

    async def event(self, kind: str, pred: Callable[[dict[str, Any]], bool] | None = None, *,
                    timeout: float = WAIT) -> dict[str, Any]:
        return await self.next(lambda l: l["type"] == "daemon" and l["kind"] == kind and (pred is None or pred(l)),
                               timeout=timeout)

    def has_response(self, rid: Any) -> bool:
        return any(l["type"] == "response" and l["id"] == rid for l in self.lines)

    async def finish(self, *, timeout: float = WAIT) -> int:
        """stdin EOF → read (and validate) every remaining line → exit status."""
        await self.close_stdin()
        with trio.fail_after(timeout):
            while await self._read_line() is not None:
                pass
            return await self.proc.wait()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def fake_cli(tmp_path: Path, scenario: str, log: Path | None = None) -> str:
    """An executable that runs the stdio fake app-server (ignores the `app-server` argument)."""
    script = tmp_path / f"fake-codex-{Path(scenario).stem}"
    cmd = [sys.executable, "-m", "peer_fixtures.fake_app_server", scenario]
    if log is not None:
        cmd += ["--log", str(log)]
    script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\nexec {shlex.join(cmd)}\n")
    script.chmod(0o755)
    return str(script)


pid_alive = process_exists  # the name other test modules import from here


async def child_pid(sp: ServeProcess, channel: str = "c") -> int:
    status = await sp.request("status", {"channelId": channel})
    [snap] = status["result"]["channels"]
    assert isinstance(snap["pid"], int)
    return snap["pid"]


def for_op(op_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda l: l["clientOperationId"] == op_id


# -- send ------------------------------------------------------------------------------------


async def test_r_d_1_send_streams_events_then_replies_with_final_text(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "threadId": None, "clientMessageId": "m-1",
                                           "message": "hello"})
        queued = await sp.event("operationQueued")
        assert queued["payload"]["requestId"] == rid  # ties events to the command before the reply
        assert queued["payload"]["clientMessageId"] == "m-1" and queued["channelId"] == "c"
        op_id = queued["clientOperationId"]
        reply = await sp.response(rid)
        assert reply["ok"] is True
        result = reply["result"]
        assert result["status"] == "completed" and result["clientOperationId"] == op_id
        assert result["finalText"] == "Hello from the fake peer." and result["clientMessageId"] == "m-1"
        thread_id = result["threadId"]
        op_events = [l for l in sp.lines if l["type"] == "daemon" and l["clientOperationId"] == op_id]
        kinds = [l["kind"] for l in op_events]
        assert kinds[0] == "operationQueued" and kinds.count("operationDone") == 1
        done_event = next(l for l in op_events if l["kind"] == "operationDone")
        assert sp.lines.index(done_event) < sp.lines.index(reply)  # operationDone before the reply
        assert done_event["payload"]["status"] == "completed"
        assert "turnStarted" in kinds and "itemUpdated" in kinds
        # hosts rebuild streamed text by concatenating payload.delta per item: lossless
        deltas = "".join(l["payload"]["delta"] for l in op_events if l["kind"] == "itemUpdated")
        assert deltas == result["finalText"]
        assert {l["threadId"] for l in op_events if l["kind"] == "turnStarted"} == {thread_id}
        epochs = {l["sessionEpoch"] for l in sp.lines if l["type"] == "daemon"}
        assert len(epochs) == 1

        # a second send on the same thread: same child, no resume, its own request id
        rid2 = await sp.send("codex.send", {"channelId": "c", "threadId": thread_id, "message": "again"}, id=42)
        reply2 = await sp.response(rid2)
        assert reply2["id"] == 42 and reply2["result"]["threadId"] == thread_id
        assert reply2["result"]["status"] == "completed"
        assert not any(l["type"] == "daemon" and l["kind"] == "threadResumed" for l in sp.lines)

        pid = await child_pid(sp)
        assert await sp.finish() == 0
    assert not pid_alive(pid)  # R-OP-5 drain: the child was retired and reaped


async def test_r_d_1_one_runtime_per_channel(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        a = await sp.send("codex.send", {"channelId": "left", "message": "one"})
        b = await sp.send("codex.send", {"channelId": "right", "message": "two"})
        ra, rb = await sp.response(a), await sp.response(b)
        assert ra["result"]["status"] == rb["result"]["status"] == "completed"
        status = (await sp.request("status"))["result"]
        assert status["protocolVersion"] == 1 and status["draining"] is False
        snaps = {s["channelId"]: s for s in status["channels"]}
        assert set(snaps) == {"left", "right"}
        assert snaps["left"]["pid"] != snaps["right"]["pid"]
        assert snaps["left"]["sessionEpoch"] != snaps["right"]["sessionEpoch"]
        assert all(s["state"] == "READY" and s["busy"] is False for s in snaps.values())
        assert await sp.finish() == 0
    assert not pid_alive(snaps["left"]["pid"]) and not pid_alive(snaps["right"]["pid"])



@pytest.mark.skipif(sys.platform != "linux", reason="Unix stream sockets are written like pipes on Linux only")
def test_r_d_2_serve_on_unix_socket_stdio_answers_every_command_once(tmp_path: Path) -> None:
    """As Node's ``child_process`` (VS Code's extension host, most editors' plugins) starts
    serve: stdin and stdout are Unix socket pairs. serve writes to such a stdout directly, as to
    a pipe (issue 34); pipelined sends on two channels each get exactly one reply, after their
    ``operationDone``, every line valid, and stdin EOF ends serve with 0."""
    import socket

    in_ours, in_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_ours, out_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    argv = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", fake_cli(tmp_path, "handshake-ok")]
    with open(tmp_path / "serve.stderr", "wb") as err:
        proc = subprocess.Popen(argv, stdin=in_theirs.fileno(), stdout=out_theirs.fileno(), stderr=err, cwd=str(ROOT))
    in_theirs.close()
    out_theirs.close()
    try:
        cmds = [{"id": f"s{i}", "command": "codex.send", "params": {"channelId": f"c{i % 2}", "message": f"m{i}"}}
                for i in range(30)]
        in_ours.sendall(b"".join(json.dumps(c).encode() + b"\n" for c in cmds))
        in_ours.shutdown(socket.SHUT_WR)  # EOF: serve finishes what it accepted, then exits
        out_ours.settimeout(WAIT * 3)
        data = b""
        while chunk := out_ours.recv(65536):
            data += chunk
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        in_ours.close()
        out_ours.close()
    lines = [json.loads(x) for x in data.splitlines()]
    done_ops: set[str] = set()
    replies: dict[str, int] = {}
    for line in lines:
        assert schema_problem(line, "outputLine") is None, line
        if line["type"] == "daemon" and line["kind"] == "operationDone":
            done_ops.add(line["clientOperationId"])
        elif line["type"] == "response":
            replies[line["id"]] = replies.get(line["id"], 0) + 1
            assert line["ok"] is True and line["result"]["status"] == "completed", line
            assert line["result"]["clientOperationId"] in done_ops  # after its operationDone
    assert replies == {f"s{i}": 1 for i in range(30)}


# -- control commands bypass the FIFO (R-OP-1) -----------------------------------------------


async def test_r_op_1_approval_answered_while_send_pending(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "reverse-approval", log)) as sp:
        send = await sp.send("codex.send", {"channelId": "c", "message": "run it",
                                            "settings": {"approvalPolicy": "untrusted"}})
        asked = await sp.event("interactionRequested")
        payload = asked["payload"]
        assert payload["method"] == "item/commandExecution/requestApproval"
        assert not sp.has_response(send)  # the send is still pending
        # wrong token, unknown key: refused, nothing sent to the peer
        bad = await sp.request("codex.respondInteraction", {"interactionKey": payload["interactionKey"],
                                                            "dialogToken": "stale", "result": {"decision": "accept"}})
        assert bad["ok"] is False and bad["error"]["code"] == "INTERACTION_STALE_TOKEN"
        unknown = await sp.request("codex.respondInteraction", {"interactionKey": "ik-nope", "dialogToken": "x",
                                                                "result": {"decision": "accept"}})
        assert unknown["ok"] is False and unknown["error"]["code"] == "INTERACTION_UNKNOWN"
        invalid = await sp.request("codex.respondInteraction", {
            "interactionKey": payload["interactionKey"], "dialogToken": payload["dialogToken"],
            "result": {"decision": "maybe"}})
        assert invalid["ok"] is False and invalid["error"]["code"] == "INTERACTION_INVALID_REPLY"
        ok = await sp.request("codex.respondInteraction", {
            "interactionKey": payload["interactionKey"], "dialogToken": payload["dialogToken"],
            "result": {"decision": "accept"}})
        assert ok["ok"] is True and ok["result"] == {"interactionKey": payload["interactionKey"], "answered": True}
        assert not sp.has_response(send)  # answered at once, before the send it unblocks
        again = await sp.request("codex.respondInteraction", {
            "interactionKey": payload["interactionKey"], "dialogToken": payload["dialogToken"],
            "result": {"decision": "accept"}})
        assert again["ok"] is False and again["error"]["code"] in ("INTERACTION_DUPLICATE", "INTERACTION_EXPIRED")
        done = await sp.response(send)
        assert done["result"]["status"] == "completed" and done["result"]["finalText"] == "The command printed 42."
        assert sp.lines.index(ok) < sp.lines.index(done)
        assert await sp.finish() == 0
    from peer_fixtures.fake_app_server import read_log
    replies = [m for m in read_log(log) if "result" in m and "method" not in m]
    assert replies == [{"id": 0, "result": {"decision": "accept"}}]  # exactly one answer reached the peer


async def test_r_op_1_update_settings_answers_at_once_and_applies_to_next_send(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn", log)) as sp:
        first = await sp.send("codex.send", {"channelId": "c", "message": "hang"})
        await sp.event("turnStarted")
        upd = await sp.request("codex.updateSettings", {"channelId": "c", "settings": {"model": "mock-model-b"}})
        assert upd["result"] == {"settingsRevision": 1, "desired": {"model": "mock-model-b"}}
        await sp.event("settingsUpdated", lambda l: l["payload"]["revision"] == 1)
        assert not sp.has_response(first)
        bad = await sp.request("codex.updateSettings", {"channelId": "c", "settings": {"sandbox": "none"}})
        assert bad["ok"] is False and bad["error"]["code"] == "INVALID_PARAMS"
        abort = await sp.request("codex.abortTurn", {"channelId": "c"})
        assert abort["result"]["stopPath"] == "interruptSent"
        assert (await sp.response(first))["result"]["status"] == "interrupted"
        assert await sp.finish() == 0
    from peer_fixtures.fake_app_server import read_log
    starts = [m for m in read_log(log) if m.get("method") == "turn/start"]
    assert len(starts) == 1 and "model" not in starts[0]["params"]  # frozen at dispatch (R-SET-2)


# -- stop paths (R-OP-5) ---------------------------------------------------------------------


async def test_r_op_5_abort_mid_turn_ends_interrupted_and_queued_cancels_locally(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn", log)) as sp:
        a = await sp.send("codex.send", {"channelId": "c", "message": "first"})
        b = await sp.send("codex.send", {"channelId": "c", "message": "second"})
        qa = await sp.event("operationQueued", lambda l: l["payload"]["requestId"] == a)
        qb = await sp.event("operationQueued", lambda l: l["payload"]["requestId"] == b)
        assert qb["payload"]["position"] == 2
        await sp.event("turnStarted", for_op(qa["clientOperationId"]))
        cancel_b = await sp.request("codex.abortTurn", {"channelId": "c", "clientOperationId": qb["clientOperationId"]})
        assert cancel_b["result"] == {"stopPath": "cancelledQueued", "clientOperationId": qb["clientOperationId"]}
        rb = await sp.response(b)
        assert rb["result"]["status"] == "cancelled" and rb["result"]["error"]["code"] == "CANCELLED"
        stop_a = await sp.request("codex.abortTurn", {"channelId": "c"})
        assert stop_a["result"] == {"stopPath": "interruptSent", "clientOperationId": qa["clientOperationId"]}
        ra = await sp.response(a)
        assert ra["result"]["status"] == "interrupted"
        assert sp.lines.index(stop_a) < sp.lines.index(ra)  # the abort is answered at once
        nothing = await sp.request("codex.abortTurn", {"channelId": "c"})
        assert nothing["result"]["stopPath"] == "noOperation"
        unknown_channel = await sp.request("codex.abortTurn", {"channelId": "never-used"})
        assert unknown_channel["result"]["stopPath"] == "noOperation"
        assert await sp.finish() == 0
    from peer_fixtures.fake_app_server import read_log
    assert [m["params"]["input"][0]["text"] for m in read_log(log) if m.get("method") == "turn/start"] == ["first"]


async def test_r_op_5_eof_drains_a_running_turn_and_reaps_the_child(tmp_path):
    """``--drain-timeout 0``: EOF aborts at once (the running turn interrupted, the queued one
    cancelled), every command replied, the child reaped."""
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn"),
                                 "--drain-timeout", "0") as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hang"})
        await sp.event("turnStarted")
        pid = await child_pid(sp)
        queued = await sp.send("codex.send", {"channelId": "c", "message": "never runs"})
        await sp.event("operationQueued", lambda l: l["payload"]["requestId"] == queued)
        assert await sp.finish() == 0
        by_id = {l["id"]: l for l in sp.lines if l["type"] == "response"}
        assert by_id[rid]["result"]["status"] == "interrupted"
        assert by_id[queued]["result"]["status"] == "cancelled"
        last_states = [l["payload"]["to"] for l in sp.lines if l["type"] == "daemon" and l["kind"] == "runtimeStateChanged"]
        assert last_states[-1] == "STOPPED"
    assert not pid_alive(pid)


async def test_sigterm_drains_like_eof(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn")) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hang"})
        await sp.event("turnStarted")
        pid = await child_pid(sp)
        sp.proc.send_signal(signal.SIGTERM)
        reply = await sp.response(rid)
        assert reply["result"]["status"] == "interrupted"
        with trio.fail_after(WAIT):
            assert await sp.proc.wait() == 0
    assert not pid_alive(pid)


async def test_r_d_1_quickstart_pipe_eof_finishes_the_accepted_send(tmp_path):
    """docs/quickstart.md's ``printf … | codexrt serve``: stdin reaches EOF before the turn has
    even started; serve finishes it (the reply is ``completed`` with the final text), reaps the
    child and exits 0 — a real shell pipeline, like a user types it."""
    line = json.dumps({"id": 1, "command": "codex.send", "params": {"channelId": "c", "message": "hello"}})
    cmd = (f"printf '%s\\n' {shlex.quote(line)} | {shlex.quote(sys.executable)} -m codexrt_cli serve "
           f"--codex-bin {shlex.quote(fake_cli(tmp_path, 'handshake-ok'))}")
    with trio.fail_after(WAIT * 2):
        proc = await trio.run_process(["sh", "-c", cmd], cwd=str(ROOT), capture_stdout=True,
                                      capture_stderr=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lines = [json.loads(raw) for raw in proc.stdout.splitlines()]
    for l in lines:
        assert schema_problem(l, "outputLine") is None, l
    [reply] = [l for l in lines if l["type"] == "response"]
    assert reply["id"] == 1 and reply["ok"] is True
    assert reply["result"]["status"] == "completed" and reply["result"]["finalText"] == "Hello from the fake peer."
    kinds = [l["kind"] for l in lines if l["type"] == "daemon"]
    assert "turnStarted" in kinds and kinds.count("operationDone") == 1
    pids = {l["payload"].get("pid") for l in lines if l["type"] == "daemon" and l["kind"] == "runtimeStateChanged"
            and l["payload"].get("to") == "READY"}
    assert len(pids) == 1 and all(isinstance(p, int) and not pid_alive(p) for p in pids)


async def test_r_int_3_eof_declines_a_pending_approval_instead_of_waiting_out_the_drain(tmp_path):
    """After stdin EOF nobody can answer a server request: a pending approval gets its safe
    negative reply (decline, never an accept) at once and the send completes, rather than the
    drain holding it for the whole ``--drain-timeout`` (300 s by default)."""
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "reverse-approval", log)) as sp:
        send = await sp.send("codex.send", {"channelId": "c", "message": "run it"})
        await sp.event("interactionRequested")
        await sp.close_stdin()
        with trio.fail_after(WAIT):  # far below the 300 s drain bound
            reply = await sp.response(send)
            assert await sp.finish() == 0
        assert reply["result"]["status"] == "completed"
        assert reply["result"]["finalText"] == "The command was not run."
        answered = await sp.event("interactionAnswered")
        assert answered["payload"]["by"] == "policy"  # serve answered, not the host (issue 31)
    from peer_fixtures.fake_app_server import read_log

    replies = [m for m in read_log(log) if "result" in m and "method" not in m]
    assert [r["result"] for r in replies] == [{"decision": "decline"}]


async def test_r_op_5_sigint_replies_to_every_pending_command_and_reaps(tmp_path):
    """SIGINT with a running turn, a queued one and an EOF drain under way (default
    ``--drain-timeout`` of 300 s): serve stops at once — the running turn ``interrupted``, the
    queued one ``cancelled``, exactly one reply per command — reaps the child and exits 0."""
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn")) as sp:
        running = await sp.send("codex.send", {"channelId": "c", "message": "hang"})
        await sp.event("turnStarted")
        queued = await sp.send("codex.send", {"channelId": "c", "message": "queued"})
        await sp.event("operationQueued", lambda l: l["payload"]["requestId"] == queued)
        pid = await child_pid(sp)
        await sp.close_stdin()  # EOF: serve would wait up to 300 s for the hanging turn...
        sp.proc.send_signal(signal.SIGINT)  # ...but a signal aborts now
        with trio.fail_after(WAIT):
            while await sp._read_line() is not None:
                pass
            assert await sp.proc.wait() == 0
        replies = [l for l in sp.lines if l["type"] == "response"]
        by_id = {l["id"]: l for l in replies}
        assert len(replies) == len(by_id) == 3  # status + the two sends, one reply each
        assert by_id[running]["result"]["status"] == "interrupted"
        assert by_id[queued]["result"]["status"] == "cancelled"
        assert "Traceback" not in sp.stderr()
    assert not pid_alive(pid)


# -- read-only commands never take the FIFO (R-D-1) ------------------------------------------


async def test_r_d_1_read_only_commands_answer_while_a_send_is_running(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn", log)) as sp:
        send = await sp.send("codex.send", {"channelId": "c", "message": "hang"})
        started = await sp.event("turnStarted")
        tid = started["threadId"]
        models = await sp.request("codex.listModels", {"channelId": "c"})
        assert [m["id"] for m in models["result"]["data"]] == ["mock-model", "mock-model-b"]
        skills = await sp.request("codex.listSkills", {"channelId": "c"})
        assert skills["result"]["data"][0]["skills"] == []
        mcp = await sp.request("codex.getMcpStatus", {"channelId": "c"})
        assert mcp["result"] == {"data": [], "nextCursor": None}
        threads = await sp.request("codex.listThreads", {"channelId": "c", "limit": 5})
        assert [t["id"] for t in threads["result"]["data"]] == [tid]
        read = await sp.request("codex.readThread", {"channelId": "c", "threadId": tid})
        assert read["result"]["thread"]["id"] == tid
        turns = await sp.request("codex.readHistoryPage", {"channelId": "c", "threadId": tid})
        assert turns["result"]["data"] == []  # the running turn is not finished yet
        items = await sp.request("codex.readHistoryPage", {"channelId": "c", "threadId": tid, "scope": "items",
                                                           "limit": 10})
        assert [e["item"]["type"] for e in items["result"]["data"]] == ["userMessage"]
        sub = await sp.request("codex.readSubagent", {"channelId": "c", "threadId": tid})
        assert sub["result"]["relationVerified"] is False and sub["result"]["parentThreadId"] is None
        wrong = await sp.request("codex.readSubagent", {"channelId": "c", "threadId": tid,
                                                        "parentThreadId": "00000000-0000-4000-8000-000000000000"})
        assert wrong["ok"] is False and wrong["error"]["code"] == "RELATION_UNVERIFIED"
        reload = await sp.request("codex.reloadMcp", {"channelId": "c"})
        assert reload["ok"] is False and reload["error"]["code"] == "RPC_ERROR"  # the fake lacks the method
        count = await sp.request("codex.countThreadMessages", {"channelId": "c", "threadId": tid})
        assert count["ok"] is True and count["result"]["messageCount"] == 1  # R-H-7: the userMessage so far
        assert count["result"]["known"] is True and count["result"]["cached"] is False
        missing = await sp.request("codex.readThread", {"channelId": "c", "threadId": "not-a-uuid"})
        assert missing["ok"] is False and missing["error"]["code"] == "RPC_ERROR"  # native errors are returned
        assert "invalid thread id" in missing["error"]["message"]
        assert not sp.has_response(send)  # every read answered while the send still runs
        status = (await sp.request("status", {"channelId": "c"}))["result"]["channels"][0]
        assert status["busy"] is True and status["activeOperation"] is not None
        await sp.request("codex.abortTurn", {"channelId": "c"})
        assert (await sp.response(send))["result"]["status"] == "interrupted"
        assert await sp.finish() == 0
    from peer_fixtures.fake_app_server import read_log
    methods = [m.get("method") for m in read_log(log) if "method" in m]
    assert "thread/resume" not in methods and methods.count("turn/start") == 1


# -- lifecycle -------------------------------------------------------------------------------


async def test_r_d_1_release_thread_and_reset_runtime(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        done = await sp.request("codex.send", {"channelId": "c", "message": "hi"})
        tid = done["result"]["threadId"]
        pid = await child_pid(sp)
        rel = await sp.request("codex.releaseThread", {"channelId": "c", "threadId": tid})
        r = rel["result"]
        assert r["threadId"] == tid and r["stoppedOperations"] == [] and r["runtimeRetired"] is True
        assert r["unsubscribe"] is None and r["unsubscribeError"]["code"] == "RPC_ERROR"  # fake lacks it
        assert not pid_alive(pid)  # releasing the last session confirms the child's exit
        await sp.event("runtimeReset", lambda l: l["payload"]["reason"] == "releaseThread")
        # the channel lives on: a read starts a new generation
        await sp.request("codex.listModels", {"channelId": "c"})
        pid2 = await child_pid(sp)
        assert pid2 != pid
        reset = await sp.request("codex.resetRuntime", {"channelId": "c"})
        assert reset["result"]["runtime"]["state"] == "STOPPED" and reset["result"]["runtime"]["pid"] is None
        assert not pid_alive(pid2)
        nothing = await sp.request("codex.resetRuntime", {"channelId": "unknown"})
        assert nothing["result"] == {"stoppedOperations": [], "runtime": None}
        assert await sp.finish() == 0


async def test_r_rt_6_idle_reaper_retires_a_runtime_without_sessions(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok"),
                                 "--idle-timeout", "0.3") as sp:
        await sp.request("codex.listModels", {"channelId": "c"})
        pid = await child_pid(sp)
        await sp.event("runtimeReset", lambda l: l["payload"]["reason"] == "idle")
        assert not pid_alive(pid)
        # a channel with a loaded session is never reaped: its send ends, the thread stays loaded
        done = await sp.request("codex.send", {"channelId": "s", "message": "hi"})
        assert done["result"]["status"] == "completed"
        status = (await sp.request("status", {"channelId": "s"}))["result"]["channels"][0]
        assert status["sessionCount"] == 1 and status["state"] == "READY"
        assert await sp.finish() == 0
    assert not any(l["type"] == "daemon" and l["kind"] == "runtimeReset" and l["channelId"] == "s"
                   and l["payload"]["reason"] == "idle" for l in sp.lines)


async def test_r_lc_3_inactive_spawns_nothing(tmp_path):
    marker = tmp_path / "spawned"
    cli = tmp_path / "would-spawn"
    cli.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
    cli.chmod(0o755)
    async with ServeProcess.open(tmp_path, "--codex-bin", str(cli), "--access-mode", "inactive") as sp:
        for command, params in [("codex.send", {"channelId": "c", "message": "hi"}),
                                ("codex.listModels", {"channelId": "c"}),
                                ("codex.preconnect", {"channelId": "c"})]:
            reply = await sp.request(command, params)
            assert reply["ok"] is False and reply["error"]["code"] == "ACCESS_INACTIVE"
        assert (await sp.request("status"))["result"]["channels"] == []
        assert await sp.finish() == 0
    assert not marker.exists()


# -- bad input (R-D-4) -----------------------------------------------------------------------


async def test_r_d_4_bad_lines_get_error_replies_and_nothing_queued_is_lost(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn"),
                                 "--max-line-bytes", "4096") as sp:
        running = await sp.send("codex.send", {"channelId": "c", "message": "running"})
        queued = await sp.send("codex.send", {"channelId": "c", "message": "queued"})
        await sp.event("turnStarted")
        await sp.event("operationQueued", lambda l: l["payload"]["requestId"] == queued)
        bad_lines = [
            (b"this is not json\n", None, "INVALID_JSON"),
            (b"[1, 2]\n", None, "INVALID_REQUEST"),
            (b'{"command": "status"}\n', None, "INVALID_REQUEST"),
            (b'{"id": false, "command": "status"}\n', None, "INVALID_REQUEST"),
            (b'{"id": "u1", "command": "codex.teleport"}\n', "u1", "UNKNOWN_COMMAND"),
            (b'{"id": 7, "command": "codex.send", "params": {"channelId": "c"}}\n', 7, "INVALID_PARAMS"),
            (b'{"id": 8, "command": "codex.send", "params": {"channelId": "c", "message": 1}}\n', 8, "INVALID_PARAMS"),
            (b'{"id": 9, "command": "codex.send", "params": []}\n', 9, "INVALID_PARAMS"),
            (b'{"id": 10, "command": "status", "extra": 1}\n', 10, "INVALID_REQUEST"),
            (b'{"id": "x", "command": "status"' + b" " * 5000 + b"}\n", "x", "LINE_TOO_LONG"),  # its id: from its head
        ]
        for raw, rid, code in bad_lines:
            await sp.send_raw(raw)
            reply = await sp.next(lambda l: l["type"] == "response" and l["ok"] is False)
            assert reply["id"] == rid and reply["error"]["code"] == code, (raw[:60], reply)
        await sp.send_raw(b"\n   \n")  # blank lines are ignored, not errors
        status = await sp.request("status", {"channelId": "c"})
        snap = status["result"]["channels"][0]
        assert snap["busy"] is True and snap["queuedOperations"] == 1  # nothing queued was lost
        await sp.request("codex.abortTurn", {"channelId": "c"})
        assert (await sp.response(running))["result"]["status"] == "interrupted"
        await sp.event("turnStarted", lambda l: l["clientOperationId"] != snap["activeOperation"])
        await sp.request("codex.abortTurn", {"channelId": "c"})
        assert (await sp.response(queued))["result"]["status"] == "interrupted"  # it ran, then was stopped
        assert await sp.finish() == 0
    errors = [l for l in sp.lines if l["type"] == "response" and l["ok"] is False]
    assert len(errors) == len(bad_lines)


async def test_r_d_4_unterminated_last_line_is_still_a_command(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        await sp.send_raw(b'{"id": "tail", "command": "status"}')  # no newline before EOF
        assert await sp.finish() == 0
    assert [l["id"] for l in sp.lines if l["type"] == "response"] == ["tail"]


async def test_r_d_1_start_failure_is_a_failed_reply_not_a_crash(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "crash-before-ready")) as sp:
        reply = await sp.request("codex.send", {"channelId": "c", "message": "hi"})
        assert reply["ok"] is True and reply["result"]["status"] == "failed"
        # R-CLI-6: one candidate too — its attempt, a hint, the diagnostic; the exit is the cause.
        # The CLI was chosen explicitly (--codex-bin): CliOverrideInvalid, a CliUnavailable (issue 33).
        error = reply["result"]["error"]
        assert error["code"] == "CODEX_CLI_OVERRIDE_INVALID" and error["details"]["cause"]["code"] == "CHILD_EXITED"
        assert error["message"].startswith("codex app-server exited") and "Hint:" in error["message"]
        assert len(error["details"]["codexCliUnavailable"]["candidates"]) == 1
        read = await sp.request("codex.listModels", {"channelId": "c"})
        assert read["ok"] is False and read["error"]["code"] == "CODEX_CLI_OVERRIDE_INVALID"
        assert await sp.finish() == 0


async def test_r_cli_3_stale_codex_bin_is_a_typed_failure(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", str(tmp_path / "missing-codex")) as sp:
        reply = await sp.request("codex.send", {"channelId": "c", "message": "hi"})
        assert reply["ok"] is True and reply["result"]["status"] == "failed"
        assert reply["result"]["error"]["code"] == "CODEX_CLI_OVERRIDE_INVALID"
        assert await sp.finish() == 0


# -- more commands and event kinds (also the docs' examples) -----------------------------------


@pytest.mark.parametrize("scenario,kind,status", [
    ("unknown-server-request", "unsupportedServerRequest", "completed"),
    ("broken-framing", "protocolError", "completed"),
    ("duplicate-terminal", "orphanTurnTerminal", "completed"),
    ("turn-start-error", None, "failed"),
    ("disconnect-mid-turn", "itemUpdated", "failed"),
])
async def test_r_d_2_event_kinds_and_terminals_from_fake_scenarios(tmp_path, scenario, kind, status):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, scenario)) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hi"})
        reply = await sp.response(rid)
        assert reply["result"]["status"] == status
        if kind is not None:
            await sp.event(kind)  # may follow the reply (the duplicate terminal comes after the first)
        if scenario == "disconnect-mid-turn":
            assert reply["result"]["error"]["code"] == "CHILD_EXITED"
            text = "".join(l["payload"]["delta"] for l in sp.lines if l["type"] == "daemon" and l["kind"] == "itemUpdated")
            assert text  # what streamed before the crash was delivered
        assert await sp.finish() == 0


async def test_r_d_1_preconnect_compact_review(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "settings-gate")) as sp:
        pre = await sp.request("codex.preconnect", {"channelId": "c", "threadId": None})
        assert pre["result"]["status"] == "completed" and pre["result"]["threadId"] is None
        assert (await sp.request("status"))["result"]["channels"][0]["state"] == "READY"
        tid = (await sp.request("codex.send", {"channelId": "c", "message": "hi"}))["result"]["threadId"]
        await sp.request("codex.releaseThread", {"channelId": "c", "threadId": tid})
        resumed = await sp.request("codex.preconnect", {"channelId": "c", "threadId": tid})
        assert resumed["result"]["status"] == "completed" and resumed["result"]["turnId"] is None
        await sp.event("threadResumed", lambda l: l["threadId"] == tid)
        await sp.request("codex.updateSettings", {"channelId": "c", "settings": {"model": "mock-model-b"}})
        # compact pushes the frozen settings first and waits for thread/settings/updated (R-SET-2);
        # the fake then has no thread/compact/start: the failure is returned, never "started" (R-CAT-2)
        compact = await sp.request("codex.compact", {"channelId": "c", "threadId": tid})
        await sp.event("thread/settings/updated", lambda l: l["threadId"] == tid)
        assert compact["result"]["status"] == "failed" and compact["result"]["error"]["code"] == "RPC_ERROR"
        review = await sp.request("codex.review", {"channelId": "c", "threadId": tid,
                                                   "target": {"type": "uncommittedChanges"}})
        assert review["result"]["status"] == "failed" and review["result"]["kind"] == "review"
        assert await sp.finish() == 0


async def test_r_op_1_respond_interaction_error(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "reverse-approval")) as sp:
        send = await sp.send("codex.send", {"channelId": "c", "message": "run it"})
        p = (await sp.event("interactionRequested"))["payload"]
        ok = await sp.request("codex.respondInteractionError", {
            "interactionKey": p["interactionKey"], "dialogToken": p["dialogToken"],
            "error": {"code": -32000, "message": "host cannot show approvals"}})
        assert ok["result"] == {"interactionKey": p["interactionKey"], "answered": True}
        done = await sp.response(send)
        assert done["result"]["finalText"] == "The command was not run."
        assert await sp.finish() == 0


async def test_r_d_1_release_root_drains_verified_subagent_then_retires(tmp_path):
    """A sub-agent spawned in the root's turn (shapes recorded from the real server) is verified
    (``threadRelationVerified``), then ``releaseThread`` of the root stops and unsubscribes the
    child before the root, and the child process exits before the reply (R-D-1, R-H-8)."""
    from tests.trio.test_runtime_correlation import (
        CHILD_ID, PARENT_FINISHES_CHILD_RUNS, ROOT_ID, _spawn_scenario)
    from peer_fixtures.fake_app_server import read_log
    scenario = tmp_path / "spawn.json"
    scenario.write_text(json.dumps(_spawn_scenario(PARENT_FINISHES_CHILD_RUNS)))
    log = tmp_path / "peer.jsonl"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, str(scenario), log)) as sp:
        done = await sp.request("codex.send", {"channelId": "c", "message": "spawn", "threadId": ROOT_ID})
        assert done["result"]["status"] == "completed"
        rel = await sp.event("threadRelationVerified")
        assert rel["payload"] == {"rootThreadId": ROOT_ID, "threadId": CHILD_ID, "parentThreadId": ROOT_ID}
        assert rel["rootThreadId"] == ROOT_ID and rel["threadId"] == CHILD_ID
        pid = await child_pid(sp)
        r = (await sp.request("codex.releaseThread", {"channelId": "c", "threadId": ROOT_ID}))["result"]
        assert r["releasedChildren"] == [{"threadId": CHILD_ID, "interrupted": True, "status": "idle", "settled": True}]
        assert r["unsubscribe"] == "unsubscribed" and r["runtimeRetired"] is True
        assert not pid_alive(pid)
    calls = [(m["method"], m["params"].get("threadId")) for m in read_log(log)
             if m.get("method") in ("turn/interrupt", "thread/unsubscribe")]
    assert calls == [("turn/interrupt", CHILD_ID), ("thread/unsubscribe", CHILD_ID), ("thread/unsubscribe", ROOT_ID)]
