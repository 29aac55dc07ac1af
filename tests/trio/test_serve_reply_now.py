"""serve's reply behind ``operationDone`` (issue 34, R-D-2) with everything real but the
app-server: serve in process, its stdout a real pipe (so the direct writes and
``DaemonCore._reply_now`` run), memory peers. Whoever writes a reply — the task that wrote the
``operationDone`` line, or the command's waiter — every command gets exactly one, after its
``operationDone``, with ``operationQueued`` first; the waiters' tables end empty. Also under
pipelined sends with a ``resetRuntime`` among them, aborted queued operations, a stdout stuck
past ``DONE_EVENT_GRACE`` (the waiter replies; the late event brings no second reply) and an
EOF drain while operations are parked. (Adapted from helper-37's review of the change.)"""

from __future__ import annotations

import collections
import json
import os
import socket
import sys
from collections.abc import Iterable
from typing import Any

import pytest
import trio
import trio.testing

from codexrt import RuntimeConfig
from codexrt._serve._core import DaemonCore
from codexrt._serve._daemon import DaemonConfig, serve_daemon
from tests._support import MemoryPeers

Cmd = tuple[Any, str, dict[str, Any]]


@pytest.fixture(autouse=True)
def _state(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def replied_now(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """How many replies ``DaemonCore._reply_now`` wrote."""
    counts: collections.Counter[str] = collections.Counter()
    orig = DaemonCore._reply_now

    def counted(self: DaemonCore, ch: Any, answer: Any, result: Any) -> None:
        before = answer.done
        orig(self, ch, answer, result)
        counts["wrote"] += answer.done and not before

    monkeypatch.setattr(DaemonCore, "_reply_now", counted)
    return counts


class PipeWire:
    """serve's stdin (in memory) and stdout (a real pipe — or a Unix socket pair, as Node's
    ``child_process`` gives one — read into ``lines``)."""

    def __init__(self, stdout: str = "pipe") -> None:
        self.to_send, self.to_recv = trio.testing.memory_stream_one_way_pair()
        if stdout == "pipe":
            r, w = os.pipe()
        else:
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            r, w = b.detach(), a.detach()
        self.r, self.w = trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)
        self.lines: list[dict[str, Any]] = []
        self.daemon: Any = None

    async def reader(self) -> None:
        buf = b""
        while chunk := await self.r.receive_some(65536):
            buf += chunk
            *whole, buf = buf.split(b"\n")
            self.lines.extend(json.loads(x) for x in whole)

    async def send_lines(self, cmds: list[Cmd]) -> None:
        await self.to_send.send_all(b"".join(json.dumps({"id": i, "command": c, "params": p}).encode() + b"\n"
                                             for i, c, p in cmds))

    def replied(self) -> set[Any]:
        return {line.get("id") for line in self.lines if line.get("type") == "response"}

    async def wait_replies(self, ids: Iterable[Any]) -> None:
        want = set(ids)
        with trio.fail_after(60):
            while not want <= self.replied():
                await trio.sleep(0.01)


def _sends(ids: Iterable[int], channel: str = "c") -> list[Cmd]:
    return [(i, "codex.send", {"channelId": channel, "message": f"t{i}"}) for i in ids]


def check(lines: list[dict[str, Any]], ids: Iterable[Any]) -> None:
    """One reply per id; an operation's reply after its events, which run from
    ``operationQueued`` to one ``operationDone``."""
    replies = collections.Counter(line["id"] for line in lines if line.get("type") == "response")
    for i in ids:
        assert replies[i] == 1, (i, replies[i])
    per_op: dict[str, list[str]] = collections.defaultdict(list)
    for line in lines:
        op = line.get("clientOperationId")
        if line.get("type") == "daemon" and op:
            per_op[op].append(line["kind"])
        result = line.get("result")
        if line.get("type") == "response" and line.get("ok") and isinstance(result, dict) and "kind" in result:
            kinds = per_op[result["clientOperationId"]]
            assert kinds and kinds[-1] == "operationDone", (line["id"], kinds)
            per_op[result["clientOperationId"]] = ["replied"]  # nothing of it may follow the reply
    for op, kinds in per_op.items():
        assert kinds == ["replied"] or kinds[0] == "operationQueued", (op, kinds)
        assert kinds.count("operationDone") <= 1


async def _start(nursery: trio.Nursery, scenario: Any = "handshake-ok", stdout: str = "pipe", **kw: Any) -> PipeWire:
    wire = PipeWire(stdout)
    cfg = DaemonConfig(runtime=RuntimeConfig(transports=[MemoryPeers(nursery).factory(scenario)]),
                       idle_timeout=None, **kw)
    wire.daemon = await nursery.start(serve_daemon, wire.to_recv, wire.w, cfg)
    nursery.start_soon(wire.reader)
    return wire


async def _warm(nursery: trio.Nursery, **kw: Any) -> PipeWire:
    """A serve whose channel ``c`` has run one send (id 0)."""
    wire = await _start(nursery, **kw)
    await wire.send_lines(_sends([0]))
    await wire.wait_replies([0])
    return wire


def _tables_empty(wire: PipeWire) -> None:
    ch = wire.daemon.channels["c"]
    assert ch.awaiting == {} and ch.ops == {} and ch.request_ids == {} and ch.done_forwarded == {}


@pytest.mark.parametrize("stdout", ["pipe", pytest.param("unix-socket", marks=pytest.mark.skipif(
    sys.platform != "linux", reason="Unix stream sockets are written like pipes on Linux only"))])
async def test_issue_34_sequential_sends_are_replied_behind_their_operation_done(
        nursery: trio.Nursery, replied_now: collections.Counter[str], stdout: str) -> None:
    wire = await _start(nursery, stdout=stdout)
    for i in range(1, 41):
        await wire.send_lines(_sends([i]))
        await wire.wait_replies([i])
    await trio.testing.wait_all_tasks_blocked()
    check(wire.lines, range(1, 41))
    _tables_empty(wire)
    assert wire.daemon._open.count == 0
    assert replied_now["wrote"] > 0  # the direct path ran (a waiter's reply would pass too)
    await wire.to_send.aclose()


async def test_issue_34_pipelined_sends_and_a_reset_get_one_reply_each(
        nursery: trio.Nursery, replied_now: collections.Counter[str]) -> None:
    wire = await _warm(nursery)
    cmds = _sends(range(1, 21)) + [(100, "codex.resetRuntime", {"channelId": "c"})] + _sends(range(21, 31))
    cmds.append((101, "status", {}))
    await wire.send_lines(cmds)
    ids = [c[0] for c in cmds]
    await wire.wait_replies(ids)
    await trio.testing.wait_all_tasks_blocked()
    check(wire.lines, [0, *ids])
    _tables_empty(wire)
    assert wire.daemon._open.count == 0
    await wire.to_send.aclose()


async def test_issue_34_aborted_queued_operations_get_one_reply_each(
        nursery: trio.Nursery, replied_now: collections.Counter[str]) -> None:
    wire = await _warm(nursery)
    await wire.send_lines(_sends(range(1, 6)))
    with trio.fail_after(10):
        while len(ops := [ln["clientOperationId"] for ln in wire.lines if ln.get("kind") == "operationQueued"]) < 6:
            await trio.sleep(0.001)
    aborts: list[Cmd] = [(200 + k, "codex.abortTurn", {"channelId": "c", "clientOperationId": op})
                         for k, op in enumerate(ops[1:])]
    await wire.send_lines(aborts)
    ids = [*range(6), *(a[0] for a in aborts)]
    await wire.wait_replies(ids)
    await trio.testing.wait_all_tasks_blocked()
    check(wire.lines, ids)
    _tables_empty(wire)
    await wire.to_send.aclose()


async def test_issue_34_a_stdout_stuck_past_the_grace_brings_no_second_reply(
        nursery: trio.Nursery, replied_now: collections.Counter[str], autojump_clock: Any) -> None:
    """The waiter gives up waiting for ``operationDone`` (``DONE_EVENT_GRACE``) and replies; the
    forwarder writes ``operationDone`` later: no second reply."""
    wire = await _warm(nursery)
    core = wire.daemon
    released, held = trio.Event(), trio.Event()

    async def stuck_stdout() -> None:
        async with core._out._lock:
            held.set()
            await released.wait()

    nursery.start_soon(stuck_stdout)
    await held.wait()
    await wire.send_lines(_sends([1]))
    ch = core.channels["c"]
    with trio.fail_after(30):
        while not any(op.terminal for op in ch.ops.values()):
            await trio.sleep(0.1)
    await trio.sleep(7)  # past DONE_EVENT_GRACE: the waiter replies (it waits for the lock)
    assert ch.awaiting == {}
    released.set()
    await wire.wait_replies([1])
    await trio.testing.wait_all_tasks_blocked()  # the late operationDone, and anything behind it, is out
    assert collections.Counter(ln["id"] for ln in wire.lines if ln.get("type") == "response") == {0: 1, 1: 1}
    await wire.to_send.aclose()


async def test_issue_34_an_eof_drain_while_operations_are_parked_replies_once_each(
        nursery: trio.Nursery, replied_now: collections.Counter[str]) -> None:
    wire = await _warm(nursery, drain_timeout=0)
    await wire.send_lines(_sends(range(1, 16)) + _sends(range(16, 24), channel="d"))
    await wire.to_send.aclose()
    with trio.fail_after(60):
        await wire.daemon.finished.wait()
    await trio.testing.wait_all_tasks_blocked()  # the pipe's reader has every line serve wrote
    check(wire.lines, range(24))


@pytest.mark.parametrize("command", ["codex.respondInteraction", "codex.respondInteractionError"])
async def test_r_op_1_an_answer_is_replied_before_the_send_it_unblocks(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """The app-server may end the turn as soon as it reads the answer; the answer's reply is
    held here until the send's ``operationDone`` line is out. Neither the task that wrote that
    line nor the send's waiter may reply first (docs/daemon-protocol.md: answered while the send
    is still pending)."""
    wire = await _start(nursery, "reverse-approval")
    orig = DaemonCore.reply

    async def late_answer_reply(self: DaemonCore, rid: Any, *args: Any, **kw: Any) -> None:
        if rid == "ans":
            with trio.fail_after(30):
                while not any(ln.get("kind") == "operationDone" for ln in wire.lines):
                    await trio.sleep(0.01)
        await orig(self, rid, *args, **kw)

    monkeypatch.setattr(DaemonCore, "reply", late_answer_reply)
    await wire.send_lines([(1, "codex.send", {"channelId": "c", "message": "run it",
                                              "settings": {"approvalPolicy": "untrusted"}})])
    with trio.fail_after(30):
        while not (asked := [ln for ln in wire.lines if ln.get("kind") == "interactionRequested"]):
            await trio.sleep(0.01)
    key, token = asked[0]["payload"]["interactionKey"], asked[0]["payload"]["dialogToken"]
    answer = {"result": {"decision": "accept"}} if command == "codex.respondInteraction" else {
        "error": {"code": -32000, "message": "no approvals here"}}
    await wire.send_lines([("ans", command, {"interactionKey": key, "dialogToken": token, **answer})])
    await wire.wait_replies(["ans", 1])
    replies = [ln["id"] for ln in wire.lines if ln.get("type") == "response"]
    assert replies == ["ans", 1]
    assert wire.lines[[ln.get("id") for ln in wire.lines].index("ans")]["ok"] is True
    check(wire.lines, [1])
    assert wire.daemon.channels["c"].answers_open == 0
    await wire.to_send.aclose()


async def test_r_d_3_a_command_the_reader_handles_when_serve_stops_still_gets_its_one_reply(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM (``abort``) stops the reader while it is handling a command itself — here an
    approval's answer whose write to the app-server does not return: that command still gets
    one reply (``CLOSED``: whether it took effect is unknown), and so does the send it was
    answering; serve finishes."""
    wire = await _start(nursery, "reverse-approval")
    await wire.send_lines([(1, "codex.send", {"channelId": "c", "message": "run it",
                                              "settings": {"approvalPolicy": "untrusted"}})])
    with trio.fail_after(30):
        while not (asked := [ln for ln in wire.lines if ln.get("kind") == "interactionRequested"]):
            await trio.sleep(0.01)
    rt = wire.daemon.channels["c"].rt
    entered = trio.Event()

    async def stuck(*_args: Any, **_kw: Any) -> None:
        entered.set()
        await trio.sleep_forever()

    monkeypatch.setattr(rt, "respond_interaction", stuck)
    payload = asked[0]["payload"]
    await wire.send_lines([("ans", "codex.respondInteraction", {"interactionKey": payload["interactionKey"],
                                                                 "dialogToken": payload["dialogToken"],
                                                                 "result": {"decision": "accept"}})])
    with trio.fail_after(30):
        await entered.wait()
        wire.daemon.abort()
        await wire.daemon.finished.wait()
    await trio.testing.wait_all_tasks_blocked()
    replies = [ln for ln in wire.lines if ln.get("type") == "response"]
    assert collections.Counter(ln["id"] for ln in replies) == {"ans": 1, 1: 1}
    [ans] = [ln for ln in replies if ln["id"] == "ans"]
    assert ans["ok"] is False and ans["error"]["code"] == "CLOSED"
    assert wire.daemon.channels == {} or wire.daemon.channels["c"].answers_open == 0


@pytest.mark.parametrize("cmd, code", [
    (("st", "status", {}), None),
    (("x", "codex.respondInteraction", {"interactionKey": "ik-nope", "dialogToken": "t",
                                        "result": {"decision": "accept"}}), "INTERACTION_UNKNOWN"),
    (("x", "codex.respondInteraction", {"channelId": "c", "interactionKey": "ik-nope", "dialogToken": "t",
                                        "result": {"decision": "accept"}}), "INTERACTION_UNKNOWN"),
    (("b", "codex.noSuchCommand", {}), "UNKNOWN_COMMAND"),
    (("y", "codex.send", {"channelId": "c", "message": "hi"}), "ACCESS_INACTIVE"),
])
async def test_r_d_3_a_reply_due_when_serve_stops_still_goes_out(
        nursery: trio.Nursery, cmd: Cmd, code: str | None) -> None:
    """SIGTERM (``abort``) while the reader waits for stdout to write a reply it owes — a
    status, a refusal, the reader's own error for a bad line, an inactive-mode refusal: the
    reply is still written (bounded), with what it says, once; serve finishes."""
    inactive = cmd[1] == "codex.send"
    wire = await _start(nursery, inactive=inactive)
    if not inactive:
        await wire.send_lines([(0, "codex.updateSettings", {"channelId": "c", "settings": {"model": "m"}})])
        await wire.wait_replies([0])
    lock = wire.daemon._out._lock
    await lock.acquire()  # stdout busy (another line on its way to a slow host)
    try:
        await wire.send_lines([cmd])
        await trio.testing.wait_all_tasks_blocked()  # the reader waits for stdout with the reply
        wire.daemon.abort()
        await trio.testing.wait_all_tasks_blocked()  # and still waits, shielded, after the stop
    finally:
        lock.release()
    with trio.fail_after(30):
        await wire.daemon.finished.wait()
    await trio.testing.wait_all_tasks_blocked()
    [reply] = [ln for ln in wire.lines if ln.get("type") == "response" and ln.get("id") == cmd[0]]
    assert (reply["ok"], reply.get("error", {}).get("code")) == ((True, None) if code is None else (False, code))


@pytest.mark.parametrize("stop", ["eof", "signal"])
async def test_r_d_3_a_host_that_stopped_reading_does_not_hold_serves_exit(
        nursery: trio.Nursery, stop: str) -> None:
    """A host that stops reading serve's stdout but keeps the pipe open, then closes stdin (or
    signals): once stdout has taken nothing for ``STDOUT_GIVE_UP_GRACE`` while lines wait, serve
    gives it up — its lines are dropped, the drain ends as on a signal — and finishes."""
    from codexrt._io._lines import _has_room
    from codexrt._serve import _daemon

    wire = PipeWire()
    cfg = DaemonConfig(runtime=RuntimeConfig(transports=[MemoryPeers(nursery).factory("handshake-ok")]),
                       idle_timeout=None)
    daemon = await nursery.start(serve_daemon, wire.to_recv, wire.w, cfg)  # nobody reads wire.r
    await wire.send_lines([(i, "codex.send", {"channelId": f"c{i % 3}", "message": "x" * 3000})
                           for i in range(60)])
    with trio.fail_after(30):
        # stdout is full: a writer waits (the lock alone can be held with room, across the
        # write's checkpoint; a stop that early can let the rest fit in the pipe: nothing stuck)
        while not (daemon._out._lock.locked() and not _has_room(wire.w)):
            await trio.sleep(0.05)
    if stop == "eof":
        await wire.to_send.aclose()
    else:
        daemon.abort()
    with trio.fail_after(_daemon.STDOUT_GIVE_UP_GRACE + 30):
        await daemon.finished.wait()
    assert daemon._out.broken and daemon.channels == {}
    await wire.r.aclose()


async def test_r_op_1_an_answer_is_replied_before_the_execute_plan_it_unblocks(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """As for a send, for ``codex.executePlan`` (R-INT-5), whose reply its own waiter writes
    (``await_plan``): the turn it starts asks an approval; the answer's reply is held until the
    turn's ``operationDone`` is out, and still goes before the execution's reply."""
    import json as _json
    from pathlib import Path

    from tests.trio.test_plans import PLAN_TURN

    approval = _json.loads((Path(__file__).parents[2] / "peer_fixtures" / "scenarios" /
                            "reverse-approval.json").read_text())
    scenario = {"name": "plan-then-approval", "defaults": True, "rules": PLAN_TURN["rules"] + approval["rules"]}
    wire = await _start(nursery, scenario)
    await wire.send_lines([(1, "codex.send", {"channelId": "c", "message": "plan it", "settings": {"model": "m1"}})])
    await wire.wait_replies([1])
    [plan] = [ln for ln in wire.lines if ln.get("type") == "response" and ln["id"] == 1]
    with trio.fail_after(30):
        while not any(ln.get("kind") == "planCompleted" for ln in wire.lines):
            await trio.sleep(0.01)
    orig = DaemonCore.reply

    async def late_answer_reply(self: DaemonCore, rid: Any, *args: Any, **kw: Any) -> None:
        if rid == "ans":
            with trio.fail_after(30):
                while sum(ln.get("kind") == "operationDone" for ln in wire.lines) < 2:
                    await trio.sleep(0.01)
        await orig(self, rid, *args, **kw)

    monkeypatch.setattr(DaemonCore, "reply", late_answer_reply)
    await wire.send_lines([("exec", "codex.executePlan", {"channelId": "c", "threadId": plan["result"]["threadId"],
                                                          "planItemId": "plan_1", "model": "m1"})])
    with trio.fail_after(30):
        while not (asked := [ln for ln in wire.lines if ln.get("kind") == "interactionRequested"]):
            await trio.sleep(0.01)
    payload = asked[0]["payload"]
    await wire.send_lines([("ans", "codex.respondInteraction", {"interactionKey": payload["interactionKey"],
                                                                 "dialogToken": payload["dialogToken"],
                                                                 "result": {"decision": "accept"}})])
    await wire.wait_replies(["ans", "exec"])
    replies = [ln for ln in wire.lines if ln.get("type") == "response" and ln["id"] in ("ans", "exec")]
    assert [ln["id"] for ln in replies] == ["ans", "exec"]
    assert replies[0]["ok"] is True and replies[1]["result"]["ok"] is True, replies
    await wire.to_send.aclose()


async def test_r_d_3_a_host_that_closed_stdin_unread_does_not_hold_serve_whose_reader_waits(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """The naive host's ``proc.stdin.close(); proc.wait()`` after commands whose replies it
    never read: serve's reader itself waits on the full stdout (``status`` is replied inline),
    so it never reaches stdin's EOF. Seeing stdin closed while a write waits for room, serve
    still gives the stuck stdout up after the grace and finishes (stdin a real pipe here: its
    hang-up is what is seen)."""
    from codexrt._io._lines import _has_room
    from codexrt._serve import _daemon

    monkeypatch.setattr(_daemon, "STDOUT_GIVE_UP_GRACE", 0.5)
    wire = PipeWire()
    in_r, in_w = os.pipe()
    cfg = DaemonConfig(runtime=RuntimeConfig(transports=[MemoryPeers(nursery).factory("handshake-ok")]),
                       idle_timeout=None)
    stdin = trio.lowlevel.FdStream(in_r)
    daemon = await nursery.start(serve_daemon, stdin, wire.w, cfg)  # nobody reads wire.r
    lines = b"".join(json.dumps({"id": i, "command": "status"}).encode() + b"\n" for i in range(1500))
    assert len(lines) < 60_000  # all of it fits in stdin's pipe: this write never waits
    os.write(in_w, lines)
    with trio.fail_after(30):
        while not (daemon._out._lock.locked() and not _has_room(wire.w)):  # stdout is full: the reader waits
            await trio.sleep(0.05)
    os.close(in_w)  # stdin closed, its last lines unread; stdout still open, never read
    with trio.fail_after(_daemon.STDOUT_GIVE_UP_GRACE + 30):
        await daemon.finished.wait()
    assert daemon._out.broken
    await wire.r.aclose()
    await stdin.aclose()
