"""``codexrt acp`` rows (issue 30), each against the library's own number in the same run, on the
pinned real ``codex app-server`` and the loopback mock model (run in a loopback-only network
namespace, like the other real rows):

* ``cancel`` — ``session/cancel`` → ``session/prompt`` answered ``cancelled``, 20 rounds on one
  warm session, each cancelled once the first ``agent_message_chunk`` of a paced stream
  (``[[mock:deltas:400:20]]``) arrived; beside it the library's ``rt.abort(op)`` → ``op.wait()``
  on the same kind of turn, 20 rounds, in alternating blocks of 5. p50 and max, and the chunks
  written after the cancel (must be 0). Target p50 ≤ 50 ms. Then 5 rounds of a cancel while a
  command waits on ``session/request_permission``: the time to the agent's ``$/cancel_request``
  (research target ≤ 50 ms) and to ``cancelled``; none of the commands may run.
* ``first_chunk`` — warm turn: writing ``session/prompt`` → the first ``agent_message_chunk`` read,
  vs ``rt.send`` → the first ``itemUpdated`` text delta; 9 alternated pairs, the median of the
  per-pair differences. Target: ACP ≤ the library + 10 ms.
* ``paused`` — 20,000 unpaced deltas while the client reads nothing for 8 s: when the model's
  stream finished (the mock's request outcome, seen without reading the agent's stdout), then
  the text (byte-exact or ``MISMATCH``) and how many ``agent_message_chunk`` notifications carried
  it. Target ≤ 1,000 notifications, the model done during the pause.

The ACP client here is a plain blocking line reader (``subprocess`` + ``msgspec``): nothing of
the tests' harness, so the numbers are what an editor would see. A worker prints one JSON line.
"""

from __future__ import annotations

import itertools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench._common import ROOT, emit, env_with_root, now

ROUNDS = 20
BLOCK = 5
PAUSE_S = 8.0
FLOOD_DELTAS = 20_000
PERMISSION_ROUNDS = 5


class AcpClient:
    """``codexrt acp`` as a child, spoken to one line at a time (blocking)."""

    def __init__(self, binary: Path, home: Path, env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", "codexrt_cli", "acp", "--codex-bin", str(binary), "--codex-home", str(home)]
        self.proc = subprocess.Popen(argv, cwd=ROOT, env={**env_with_root(), **env}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)

    def send(self, method: str, params: Any, *, notify: bool = False) -> int | None:
        assert self.proc.stdin is not None
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        rid = None if notify else next(self._ids)
        if rid is not None:
            msg["id"] = rid
        self.proc.stdin.write(msgspec.json.encode(msg) + b"\n")
        self.proc.stdin.flush()
        return rid

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("codexrt acp closed stdout")
        return msgspec.json.decode(line)

    def until_response(self, rid: int, on_line: Any = None) -> dict[str, Any]:
        while True:
            msg = self.read()
            if "method" not in msg and msg.get("id") == rid:
                return msg
            if on_line is not None:
                on_line(msg)

    def call(self, method: str, params: Any) -> Any:
        resp = self.until_response(self.send(method, params))  # type: ignore[arg-type]
        if "error" in resp:
            raise RuntimeError(f"{method}: {resp['error']}")
        return resp["result"]

    def session(self, cwd: Path) -> str:
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return self.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]

    def prompt(self, sid: str, text: str) -> int:
        rid = self.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        assert rid is not None
        return rid

    def peak_rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def is_chunk(msg: dict[str, Any], kind: str = "agent_message_chunk") -> bool:
    return msg.get("method") == "session/update" and msg["params"]["update"].get("sessionUpdate") == kind


def _real() -> tuple[Path, Any, dict[str, str], Path, Path]:
    from bench.startup import _real_setup

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-acp-bench-"))
    binary, mock, env = _real_setup(tmp)
    env = {**env, "CODEXRT_STATE_DIR": str(tmp / "state"), "XDG_STATE_HOME": str(tmp / "xdg")}
    ws = tmp / "ws"
    ws.mkdir()
    return binary, mock, env, tmp / "home", ws


def _lib_rounds(binary: Path, env: dict[str, str], ws: Path, texts: list[str], mode: str) -> list[float]:
    """The library on the same kind of turn (the agent's default settings), warm thread:
    ``abort`` → result (``cancel``) or ``send`` → first text delta (``first``), seconds per text."""
    import trio

    from codexrt import RuntimeConfig, Settings, open_runtime

    out: list[float] = []
    # the settings `codexrt acp` runs a session with by default (docs/acp.md: approval "ask" =
    # untrusted, sandbox workspace-write), so both sides ask codex for the same kind of turn
    settings = Settings(cwd=str(ws), approval_policy="untrusted", sandbox="workspace-write")

    async def main() -> None:
        async with open_runtime(RuntimeConfig(codex_bin=str(binary), env=env, cwd=str(ws), settings=settings)) as rt:
            op = rt.send("warm up")
            async for _ev in op.events():
                pass
            tid = (await op.wait()).thread_id
            for text in texts:
                t0 = now()
                t1: float | None = None
                op = rt.send(text, thread_id=tid)
                async for ev in op.events():
                    if t1 is None and ev.kind == "itemUpdated" and ev.payload.get("delta"):
                        t1 = now()
                        if mode == "first":
                            out.append(t1 - t0)
                        else:
                            rt.abort(op)
                res = await op.wait()
                if mode == "cancel":
                    assert t1 is not None and res.status == "interrupted", res
                    out.append(now() - t1)

    trio.run(main)
    return out


def cancel() -> dict[str, Any]:
    binary, mock, env, home, ws = _real()
    acp_s: list[float] = []
    lib_s: list[float] = []
    late_chunks = 0
    stops: set[str] = set()
    try:
        agent = AcpClient(binary, home, env)
        try:
            sid = agent.session(ws)
            agent.until_response(agent.prompt(sid, "warm up"))
            for block in range(ROUNDS // BLOCK):
                for i in range(BLOCK):
                    rid = agent.prompt(sid, f"[[mock:deltas:400:20]] round {block}.{i}")
                    while not is_chunk(agent.read()):
                        pass
                    t0 = now()
                    agent.send("session/cancel", {"sessionId": sid}, notify=True)
                    after: list[dict[str, Any]] = []
                    resp = agent.until_response(rid, after.append)
                    acp_s.append(now() - t0)
                    late_chunks += sum(1 for m in after if is_chunk(m))
                    stops.add(resp.get("result", {}).get("stopReason", f"error {resp.get('error')}"))
                lib_s += _lib_rounds(binary, env, ws, [f"[[mock:deltas:400:20]] lib {block}.{i}" for i in range(BLOCK)],
                                     "cancel")
            withdraw_s, answer_s, ran = _cancel_with_permission_open(agent, sid, ws)
        finally:
            agent.close()
    finally:
        mock.__exit__(None, None, None)
        shutil.rmtree(home.parent, ignore_errors=True)
    return {"rounds": len(acp_s), "acp_p50_ms": statistics.median(acp_s) * 1000, "acp_max_ms": max(acp_s) * 1000,
            "lib_p50_ms": statistics.median(lib_s) * 1000, "lib_max_ms": max(lib_s) * 1000,
            "late_chunks": late_chunks, "stop_reasons": sorted(stops),
            "perm_rounds": len(withdraw_s), "withdraw_p50_ms": statistics.median(withdraw_s) * 1000,
            "withdraw_max_ms": max(withdraw_s) * 1000, "perm_answer_p50_ms": statistics.median(answer_s) * 1000,
            "commands_run": ran, "ok": stops == {"cancelled"} and not late_chunks and not ran}


def _cancel_with_permission_open(agent: AcpClient, sid: str, ws: Path) -> tuple[list[float], list[float], int]:
    """``PERMISSION_ROUNDS`` times: a command waits on ``session/request_permission``; then
    ``session/cancel`` → the agent's ``$/cancel_request`` for it (seconds) and → the prompt's
    ``cancelled`` (seconds, the client answering its request ``cancelled`` at once, as ACP asks);
    and how many of the commands ran (must be 0)."""
    withdraw_s: list[float] = []
    answer_s: list[float] = []
    ran = 0
    for i in range(PERMISSION_ROUNDS):
        marker = ws / f"never-{i}"
        rid = agent.prompt(sid, f"please [[mock:exec:touch {marker}]]")
        while True:
            ask = agent.read()
            if ask.get("method") == "session/request_permission":
                break
        t0 = now()
        agent.send("session/cancel", {"sessionId": sid}, notify=True)
        while True:
            msg = agent.read()
            if msg.get("method") == "$/cancel_request" and msg["params"]["requestId"] == ask["id"]:
                withdraw_s.append(now() - t0)
                break
        assert agent.proc.stdin is not None
        agent.proc.stdin.write(msgspec.json.encode({"jsonrpc": "2.0", "id": ask["id"],
                                                    "result": {"outcome": {"outcome": "cancelled"}}}) + b"\n")
        agent.proc.stdin.flush()
        resp = agent.until_response(rid)
        answer_s.append(now() - t0)
        if resp.get("result", {}).get("stopReason") != "cancelled":
            raise RuntimeError(f"cancel with a permission open: {resp}")
        ran += marker.exists()
    return withdraw_s, answer_s, ran


def first_chunk(pairs: int = 9) -> dict[str, Any]:
    binary, mock, env, home, ws = _real()
    acp_s: list[float] = []
    lib_s: list[float] = []
    try:
        agent = AcpClient(binary, home, env)
        try:
            sid = agent.session(ws)
            agent.until_response(agent.prompt(sid, "warm up"))
            for i in range(pairs):
                t0 = now()
                rid = agent.prompt(sid, f"[[mock:deltas:200]] acp {i}")
                first = None
                while True:
                    msg = agent.read()
                    if first is None and is_chunk(msg):
                        first = now() - t0
                    if "method" not in msg and msg.get("id") == rid:
                        break
                acp_s.append(first if first is not None else float("nan"))
                lib_s += _lib_rounds(binary, env, ws, [f"[[mock:deltas:200]] lib {i}"], "first")
        finally:
            agent.close()
    finally:
        mock.__exit__(None, None, None)
        shutil.rmtree(home.parent, ignore_errors=True)
    return {"pairs": pairs, "acp_ms": statistics.median(acp_s) * 1000, "lib_ms": statistics.median(lib_s) * 1000,
            "diff_ms": statistics.median(a - b for a, b in zip(acp_s, lib_s)) * 1000,
            "acp_each_ms": [round(a * 1000, 1) for a in acp_s], "lib_each_ms": [round(b * 1000, 1) for b in lib_s]}


def paused() -> dict[str, Any]:
    from peer_fixtures.mock_responses import Script

    binary, mock, env, home, ws = _real()
    unit = "0123456789abcdefghijklmnopqrstuvwxyzäöü€😀 "
    text = (unit * (FLOOD_DELTAS * 6 // len(unit) + 1))[: FLOOD_DELTAS * 6]
    try:
        agent = AcpClient(binary, home, env)
        try:
            sid = agent.session(ws)
            mock.enqueue(Script.reply(text, deltas=FLOOD_DELTAS))
            rid = agent.prompt(sid, "flood me")
            t0 = now()
            model_done = None
            while now() - t0 < PAUSE_S:  # the client reads nothing; watch the model from outside
                if model_done is None and any(r.outcome is not None for r in mock.model_requests()):
                    model_done = now() - t0
                time.sleep(0.01)
            chunks: list[str] = []
            resp = agent.until_response(rid, lambda m: chunks.append(m["params"]["update"]["content"]["text"])
                                        if is_chunk(m) else None)
            rss = agent.peak_rss_mb()
            # what comes after the answer is text an editor that ends the turn there never shows
            assert agent.proc.stdin is not None and agent.proc.stdout is not None
            agent.proc.stdin.close()
            late = [msgspec.json.decode(line) for line in agent.proc.stdout]
            late_text = "".join(m["params"]["update"]["content"]["text"] for m in late if is_chunk(m))
        finally:
            agent.close()
    finally:
        mock.__exit__(None, None, None)
        shutil.rmtree(home.parent, ignore_errors=True)
    got = "".join(chunks)
    return {"deltas": FLOOD_DELTAS, "notifications": len(chunks), "ok": got == text,
            "chars_after_answer": len(late_text), "whole_text_ok": got + late_text == text,
            "stop_reason": resp.get("result", {}).get("stopReason"), "model_done_s": model_done,
            "pause_s": PAUSE_S, "agent_rss_mb": rss}


WORKERS = {"cancel": cancel, "first_chunk": first_chunk, "paused": paused}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]]())
