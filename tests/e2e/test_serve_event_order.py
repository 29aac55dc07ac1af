"""``codexrt serve``'s event lines through a real stdout pipe (issue 34, R-D-2): the reader
writes an event line itself while nothing is queued and the pipe takes it whole
(``EventStream.take_directly``), the forwarder writes the rest. Whichever writes them, a host
that reads at once and a host that stops reading until serve's stdout pipe is full get the same
promises: every line whole, each turn's events in order from its ``operationQueued`` (carrying
the command's id) to its ``operationDone``, the reply after that — once, whichever task writes
it — and the streamed text exact."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from peer_fixtures.flood_peer import argv, expected_text
from tests._support import ROOT


def _serve(tmp_path: Path) -> subprocess.Popen[bytes]:
    peer = tmp_path / "flood-codex"
    peer.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\nexec {shlex.join(argv())} \"$@\"\n")
    peer.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", str(peer)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT,
                            env=env)


def _turn(proc: subprocess.Popen[bytes], rid: str, n: int, stall: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Send one ``codex.send`` of ``n`` deltas, wait ``stall`` seconds without reading, then
    read until its reply: (the channel's event lines, the reply)."""
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps({"id": rid, "command": "codex.send",
                                 "params": {"channelId": "c", "message": f"[[flood:{n}]]"}}).encode() + b"\n")
    proc.stdin.flush()
    time.sleep(stall)
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        msg = json.loads(line)  # every line whole
        if msg.get("type") == "response":
            assert msg.get("id") == rid, msg  # one reply per command: never an earlier one's again
            return events, msg
        if msg.get("type") == "daemon":
            events.append(msg)
        assert time.monotonic() < deadline
    raise AssertionError("serve ended")


def _check(events: list[dict[str, Any]], reply: dict[str, Any], rid: str, n: int) -> None:
    assert reply["ok"] and reply["result"]["status"] == "completed", reply
    op_id = reply["result"]["clientOperationId"]
    mine = [ev for ev in events if ev.get("clientOperationId") == op_id]
    kinds = [ev["kind"] for ev in mine]
    assert kinds[0] == "operationQueued" and mine[0]["payload"]["requestId"] == rid
    assert kinds[-1] == "operationDone" and kinds.count("operationDone") == 1  # the reply came after it
    # operationAcked is informational (docs/daemon-protocol.md): the FIFO worker writes it once
    # turn/start is answered, and the reader may write deltas read with that answer first
    assert kinds.count("operationAcked") <= 1
    text = "".join(ev["payload"]["delta"] for ev in mine if ev["kind"] == "itemUpdated")
    assert text == expected_text(n) == reply["result"]["finalText"]


def test_r_d_2_event_lines_keep_their_order_whoever_writes_them(tmp_path: Path) -> None:
    proc = _serve(tmp_path)
    try:
        # read at once (most lines written by the reader), then a host that stops reading
        # until the pipe is full (the forwarder takes over, then the reader again), then at once
        for k, (n, stall) in enumerate([(300, 0.0), (60_000, 1.5), (300, 0.0), (5_000, 0.3)]):
            rid = f"r{k}"
            events, reply = _turn(proc, rid, n, stall)
            _check(events, reply, rid, n)
        assert proc.stdin and proc.stdout
        proc.stdin.write(b'{"id": "s", "command": "status"}\n')
        proc.stdin.flush()
        first_reply = next(m for m in map(json.loads, proc.stdout) if m.get("type") == "response")
        assert first_reply["id"] == "s"  # no second reply to a codex.send came before it
    finally:
        assert proc.stdin
        proc.stdin.close()
        proc.wait(30)
    assert proc.returncode == 0
