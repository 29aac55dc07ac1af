"""Split from ``tests/sansio/test_serve_hostile.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

import json
import logging

import trio
import trio.testing

from codexrt._serve._daemon import DaemonConfig, serve_daemon
from codexrt._runtime._runtime import RuntimeConfig


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
