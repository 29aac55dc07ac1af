"""``codexrt serve`` never dies of its input (issue 18; R-D-4).

Parse level (no I/O): a line nested past :data:`MAX_COMMAND_DEPTH` gets ``LINE_TOO_DEEP`` with
its id when the top level shows one; schema-valid but out-of-range numbers are
``INVALID_PARAMS`` naming where. Loop level (``serve_daemon`` in process over memory streams): a
handler that raises something unexpected is answered once with ``INTERNAL_ERROR`` — its
traceback only in the log, redacted — and the loop goes on.
"""

from __future__ import annotations

import json
import logging

import pytest
import trio
import trio.testing

from codexrt._serve._codec import MAX_COMMAND_DEPTH, BadCommand, Command, parse_command
from codexrt._serve._daemon import DaemonConfig, serve_daemon
from codexrt._runtime._runtime import RuntimeConfig


def _nested(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize("line,rid", [
    ('{"id":"a","command":"status","params":{"x":' + _nested(5000) + '}}', "a"),
    ('{"command":"status","params":{"x":' + _nested(5000) + '},"id":7}', 7),
    ('{"command":"status","params":{"x":' + _nested(MAX_COMMAND_DEPTH) + '},"id":7.5}', 7.5),
    ('{"params":{"id":"inner","x":' + _nested(5000) + '}}', None),  # only a top-level id counts
    ('{"id":true,"x":' + _nested(5000) + '}', None),  # not a usable id
    ('[{"id":1},' + _nested(5000) + ']', None),
    ('{"id":"' + "x" * 2000 + '","x":' + _nested(3000) + '}', None),  # too long an id
    ('{"x":"\\"{[","id":"s\\"q","y":' + _nested(2000) + '}', 's"q'),  # brackets and quotes in strings
])
def test_r_d_4_too_deep_line_gets_line_too_deep_with_its_id(line, rid):
    bad = parse_command(line.encode())
    assert isinstance(bad, BadCommand) and bad.code == "LINE_TOO_DEEP", bad
    assert bad.id == rid and type(bad.id) is type(rid)


def test_r_d_4_depth_limit_is_exact():
    ok = parse_command(json.dumps({"id": 1, "command": "status", "params": {}}).encode())
    assert isinstance(ok, Command)
    # the line itself is depth 1, params 2: MAX_COMMAND_DEPTH - 2 more levels fit
    fits = '{"id":1,"command":"codex.respondInteraction","params":{"interactionKey":"k","dialogToken":"t",' \
           '"result":' + _nested(MAX_COMMAND_DEPTH - 2) + '}}'
    assert isinstance(parse_command(fits), Command)
    deeper = fits.replace(_nested(MAX_COMMAND_DEPTH - 2), _nested(MAX_COMMAND_DEPTH - 1))
    assert parse_command(deeper).code == "LINE_TOO_DEEP"


@pytest.mark.parametrize("command,params,path", [
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "timeout": 0}, "$.params.timeout"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "timeout": -5}, "$.params.timeout"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "timeout": 1e300}, "$.params.timeout"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "maxBytes": 0}, "$.params.maxBytes"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "maxBytes": 10 ** 30}, "$.params.maxBytes"),
    ("codex.generateTitle", {"channelId": "c", "message": "m", "timeout": 0}, "$.params.timeout"),
    ("codex.enhancePrompt", {"channelId": "c", "prompt": "p", "timeout": -1}, "$.params.timeout"),
    ("codex.generateCommitMessage", {"channelId": "c", "diff": "d", "timeout": 99999}, "$.params.timeout"),
    ("codex.respondInteractionError", {"interactionKey": "k", "dialogToken": "t",
                                       "error": {"code": 2 ** 70, "message": "m"}}, "$.params.error.code"),
    ("codex.listThreads", {"channelId": "c", "limit": 0}, "$.params.limit"),
    ("codex.readHistoryPage", {"channelId": "c", "threadId": "t", "limit": 10 ** 9}, "$.params.limit"),
    ("codex.listModels", {"channelId": "c", "maxPages": 0}, "$.params.maxPages"),
    ("codex.listModels", {"channelId": "c", "maxPages": "x"}, "$.params.maxPages"),
    ("codex.listSkills", {"channelId": "c", "cwds": "abc"}, "$.params.cwds"),
    ("codex.getMcpStatus", {"channelId": "c", "limit": -1}, "$.params.limit"),
    ("codex.readThread", {"channelId": "c", "threadId": "t", "display": "yes"}, "$.params.display"),
])
def test_r_d_4_out_of_range_numbers_are_invalid_params(command, params, path):
    bad = parse_command(json.dumps({"id": "r", "command": command, "params": params}).encode())
    assert isinstance(bad, BadCommand) and bad.code == "INVALID_PARAMS", bad
    assert bad.id == "r" and bad.details["path"] == path and path in bad.message


def test_r_d_4_in_range_numbers_pass():
    cmd = parse_command(json.dumps({"id": "r", "command": "codex.readWorkspaceDiff",
                                    "params": {"cwd": "/tmp", "timeout": 0.5, "maxBytes": 1}}).encode())
    assert isinstance(cmd, Command)


class _Wire:
    def __init__(self) -> None:
        self.to_send, self.to_recv = trio.testing.memory_stream_one_way_pair()
        self.from_send, self.from_recv = trio.testing.memory_stream_one_way_pair()
        self.buf = b""
        self.lines: list[dict] = []

    async def line(self, pred, timeout: float = 10) -> dict:
        with trio.fail_after(timeout):
            while True:
                for obj in self.lines:
                    if pred(obj):
                        return obj
                self.buf += await self.from_recv.receive_some()
                *done, self.buf = self.buf.split(b"\n")
                self.lines.extend(json.loads(raw) for raw in done)


async def test_r_d_4_unexpected_exception_in_a_handler_is_internal_error_and_serve_goes_on(
        nursery, monkeypatch, caplog):
    """R-D-4: a handler raising a non-CodexError (simulated: git diff raising ValueError with a
    secret-looking text) → exactly one INTERNAL_ERROR reply naming only the exception type; the
    traceback is in the log, redacted; later commands are still answered."""
    import codexrt._serve._handlers_reads as reads_mod

    async def broken(*args, **kwargs):
        raise ValueError("boom api_key=sk-supersecretvalue123")

    monkeypatch.setattr(reads_mod, "read_workspace_diff", broken)
    wire = _Wire()
    await nursery.start(serve_daemon, wire.to_recv, wire.from_send,
                        DaemonConfig(runtime=RuntimeConfig(), idle_timeout=None))
    caplog.set_level(logging.INFO, logger="codexrt.daemon")
    await wire.to_send.send_all(b'{"id":1,"command":"codex.readWorkspaceDiff","params":{"cwd":"/tmp"}}\n'
                                b'{"id":2,"command":"status"}\n')
    r1 = await wire.line(lambda l: l.get("id") == 1)
    assert r1["ok"] is False and r1["error"]["code"] == "INTERNAL_ERROR"
    assert r1["error"]["message"] == "internal error in codex.readWorkspaceDiff: ValueError"
    r2 = await wire.line(lambda l: l.get("id") == 2)
    assert r2["ok"] is True
    await wire.to_send.send_all(b'{"id":3,"command":"status"}\n')
    assert (await wire.line(lambda l: l.get("id") == 3))["ok"] is True
    assert sum(1 for l in wire.lines if l.get("id") == 1) == 1
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Traceback" in logged and "ValueError" in logged
    assert "sk-supersecretvalue123" not in logged
    await wire.to_send.aclose()


async def test_r_d_4_exception_after_the_reply_is_not_answered_twice(nursery, monkeypatch):
    """The barrier replies only for a command its handler did not answer."""
    import codexrt._serve._handlers_reads as reads_mod

    original = reads_mod.workspace_diff

    async def reply_then_raise(d, cmd):
        await d.reply(cmd.id, {"fake": True})
        raise RuntimeError("after the reply")

    monkeypatch.setattr(reads_mod, "workspace_diff", reply_then_raise)
    wire = _Wire()
    await nursery.start(serve_daemon, wire.to_recv, wire.from_send,
                        DaemonConfig(runtime=RuntimeConfig(), idle_timeout=None))
    await wire.to_send.send_all(b'{"id":"x","command":"codex.readWorkspaceDiff","params":{"cwd":"/tmp"}}\n'
                                b'{"id":"y","command":"status"}\n')
    await wire.line(lambda l: l.get("id") == "x")
    await trio.testing.wait_all_tasks_blocked()  # the handler has raised and the barrier ran
    await wire.to_send.send_all(b'{"id":"z","command":"status"}\n')
    await wire.line(lambda l: l.get("id") == "z")  # written after anything the barrier wrote
    assert [l["ok"] for l in wire.lines if l.get("id") == "x"] == [True]
    assert original is not reply_then_raise
    await wire.to_send.aclose()


def _vm_hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def test_r_d_4_serve_survives_a_hostile_app_server_with_bounded_memory(tmp_path):
    """R-D-4, R-WIRE-5: a real ``codexrt serve`` whose app-server is the ``hostile`` fake
    (garbage, a 100,000-deep line, a 100 MB line, 10,000 approval requests at once): the send
    completes, the approvals past the cap are reported (interactionOverflow), serve's peak RSS
    stays far below what keeping the input would take, and serve drains to exit 0."""
    from tests.e2e.test_serve_e2e import ServeProcess, fake_cli

    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hostile")) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hi"})
        reply = await sp.response(rid, timeout=120)
        assert reply["ok"] and reply["result"]["status"] == "completed", reply
        overflow = [l for l in sp.lines if l.get("kind") == "interactionOverflow"]
        assert 1 <= len(overflow) <= 16  # coalesced: the first refusal, then powers of two
        assert all(l["payload"]["reply"] == {"decision": "decline"} for l in overflow)
        requested = [l for l in sp.lines if l.get("kind") == "interactionRequested"]
        assert len(requested) <= 256
        peak = _vm_hwm_mib(sp.proc.pid)
        assert peak < 300, f"serve peaked at {peak:.0f} MiB"
        status = await sp.request("status", {"channelId": "c"})
        assert status["result"]["channels"][0]["state"] == "READY"
        assert await sp.finish() == 0
