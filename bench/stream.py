"""Stream throughput: one big turn of ``item/agentMessage/delta`` from the flood peer.

Every worker does the same thing before the clock starts: spawn ``peer_fixtures.flood_peer``,
handshake, ``thread/start``, run a small warm-up turn, and then times the **second turn** of
the thread (``[[flood:N]]``) from writing ``turn/start`` until ``turn/completed`` is handled.
Every worker rebuilds the whole text and checks it against
``peer_fixtures.flood_peer.expected_text(N)`` — a benchmark that loses a character fails.

* ``raw_msgspec`` — the baseline: a plain loop over the child's stdout lines
  (``for line in proc.stdout``) decoding each with ``msgspec.json.decode``.
* ``raw_json`` — the same loop with the stdlib ``json`` (for reference).
* ``lib`` — codexrt's public API: ``open_runtime`` + ``rt.send`` + ``async for ev in
  op.events()``.
* ``serve`` — ``codexrt serve`` as a child, the host writes ``codex.send`` and decodes every
  stdout line with msgspec (what a host in any language pays).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from time import monotonic_ns

from bench._common import ROOT, emit, env_with_root, flood_cli, now, peak_rss_mb

WARM = "[[flood:200]]"


def _check(text: str, n: int) -> bool:
    from peer_fixtures.flood_peer import expected_text

    return text == expected_text(n)


def _probe_latencies(text: str, at_ns: int, out: list[float]) -> None:
    from peer_fixtures.flood_peer import PROBE_RE

    for m in PROBE_RE.finditer(text):
        out.append((at_ns - int(m.group(1))) / 1e3)  # microseconds


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def raw(n: int, decoder: str = "msgspec", peer_args: tuple[str, ...] = (), probes: bool = False) -> dict[str, Any]:
    import json

    import msgspec

    from peer_fixtures.flood_peer import argv

    decode = msgspec.json.decode if decoder == "msgspec" else json.loads
    enc = msgspec.json.encode
    proc = subprocess.Popen(argv(*peer_args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
                            env=env_with_root())
    assert proc.stdin is not None and proc.stdout is not None

    def send(obj: Any) -> None:
        proc.stdin.write(enc(obj) + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def until(pred: Any) -> Any:
        for line in proc.stdout:  # type: ignore[union-attr]
            msg = decode(line)
            if pred(msg):
                return msg
        raise RuntimeError("peer ended")

    send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "raw", "version": "0"},
                                                      "capabilities": {"experimentalApi": True}}})
    until(lambda m: m.get("id") == 1)
    send({"method": "initialized"})
    send({"id": 2, "method": "thread/start", "params": {}})
    tid = until(lambda m: m.get("id") == 2)["result"]["thread"]["id"]
    send({"id": 3, "method": "turn/start", "params": {"threadId": tid, "input": [{"type": "text", "text": WARM}]}})
    until(lambda m: m.get("method") == "turn/completed")

    parts: list[str] = []
    lat: list[float] = []
    count = 0
    t0 = now()
    send({"id": 4, "method": "turn/start", "params": {"threadId": tid, "input": [{"type": "text", "text": f"[[flood:{n}]]"}]}})
    final = None
    for line in proc.stdout:
        msg = decode(line)
        method = msg.get("method")
        if method == "item/agentMessage/delta":
            d = msg["params"]["delta"]
            parts.append(d)
            count += 1
            if probes and d.startswith("\u27e8"):
                _probe_latencies(d, monotonic_ns(), lat)
        elif method == "item/completed" and msg["params"]["item"]["type"] == "agentMessage":
            final = msg["params"]["item"]["text"]
        elif method == "turn/completed":
            break
    elapsed = now() - t0
    text = "".join(parts)
    proc.stdin.close()
    proc.wait(10)
    out = {"n": n, "seconds": elapsed, "rate": count / elapsed, "events": count,
           "ok": (text == final) if probes else _check(text, n), "rss_mb": peak_rss_mb()}
    if probes:
        out.update(probes=len(lat), p50_us=_pct(lat, 0.5), p99_us=_pct(lat, 0.99))
    return out


def lib(n: int, peer_args: tuple[str, ...] = (), probes: bool = False, slow: float = 0.0,
        interrupt: bool = False) -> dict[str, Any]:
    """``slow``: the consumer sleeps this long after every event. ``interrupt``: abort the
    turn once the first text arrived and time the stop until ``turnAborted`` / the terminal."""
    import trio

    from codexrt import RuntimeConfig, open_runtime
    from codexrt._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv

    async def factory() -> Any:
        return await spawn_process_transport(argv(*peer_args), cwd=ROOT, env=env_with_root())

    out: dict[str, Any] = {}

    async def main() -> None:
        async with open_runtime(RuntimeConfig(transports=[factory])) as rt:
            op = rt.send(WARM)
            async for _ev in op.events():
                pass
            res = await op.wait()
            assert res.status == "completed", res
            parts: list[str] = []
            lat: list[float] = []
            events = 0
            max_queued = 0
            dropped = 0
            abort_at: float | None = None
            acked_after: float | None = None
            t0 = now()
            op = rt.send(f"[[flood:{n}]]", thread_id=res.thread_id)
            async for ev in op.events():
                events += 1
                if ev.kind == "itemUpdated":
                    d = ev.payload["delta"]
                    parts.append(d)
                    if probes:
                        _probe_latencies(d, monotonic_ns(), lat)
                    if interrupt and abort_at is None:
                        abort_at = now()
                        op.runtime.abort(op)
                elif ev.kind == "eventsDropped":
                    dropped += ev.payload["count"]
                elif ev.kind in ("turnAborted", "operationDone") and abort_at is not None and acked_after is None:
                    acked_after = now() - abort_at
                if slow:
                    max_queued = max(max_queued, op.stream.statistics()["queued"])
                    await trio.sleep(slow)
            elapsed = now() - t0
            res = await op.wait()
            text = "".join(parts)
            if interrupt or probes:
                ok = res.final_text == text
            else:
                ok = res.status == "completed" and _check(text, n) and res.final_text == text
            out.update(n=n, seconds=elapsed, rate=n / elapsed, events=events, status=res.status, ok=ok,
                       chars=len(text), max_queued=max_queued, dropped_chatter=dropped)
            if probes:
                out.update(probes=len(lat), p50_us=_pct(lat, 0.5), p99_us=_pct(lat, 0.99))
            if interrupt:
                out.update(interrupt_ack_ms=None if acked_after is None else acked_after * 1000)

    trio.run(main)
    out["rss_mb"] = peak_rss_mb()
    return out


def serve(n: int) -> dict[str, Any]:
    """The host side of ``codexrt serve``: commands in, every stdout line decoded."""
    import msgspec

    decode = msgspec.json.decode
    enc = msgspec.json.encode
    tmp = tempfile.mkdtemp(prefix="codexrt-bench-")
    cmd = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", flood_cli(tmp)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env_with_root())
    assert proc.stdin is not None and proc.stdout is not None

    def send(obj: Any) -> None:
        proc.stdin.write(enc(obj) + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def until_reply(rid: str) -> Any:
        for line in proc.stdout:  # type: ignore[union-attr]
            msg = decode(line)
            if msg.get("type") == "response" and msg.get("id") == rid:
                return msg
        raise RuntimeError("serve ended")

    send({"id": "w", "command": "codex.send", "params": {"channelId": "b", "message": WARM}})
    warm = until_reply("w")
    assert warm["ok"], warm
    tid = warm["result"]["threadId"]
    parts: list[str] = []
    lines = 0
    updates = 0
    t0 = now()
    send({"id": "t", "command": "codex.send", "params": {"channelId": "b", "message": f"[[flood:{n}]]",
                                                        "threadId": tid}})
    reply = None
    for line in proc.stdout:
        msg = decode(line)
        lines += 1
        if msg.get("kind") == "itemUpdated":
            parts.append(msg["payload"]["delta"])
            updates += 1
        elif msg.get("type") == "response" and msg.get("id") == "t":
            reply = msg
            break
    elapsed = now() - t0
    serve_rss = _vm_hwm_mb(proc.pid)
    proc.stdin.close()
    proc.wait(20)
    shutil.rmtree(tmp, ignore_errors=True)
    text = "".join(parts)
    ok = bool(reply and reply["ok"] and reply["result"]["status"] == "completed" and _check(text, n)
              and reply["result"]["finalText"] == text)
    return {"n": n, "seconds": elapsed, "rate": n / elapsed, "lines": lines, "itemUpdated": updates, "ok": ok,
            "rss_mb": serve_rss, "host_rss_mb": peak_rss_mb()}


def _vm_hwm_mb(pid: int) -> float | None:
    """Peak RSS of another process (Linux ``VmHWM``), MiB."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


FLOOD_PROBES = ("--probe-every", "500")
IDLE_PROBES = ("--idle-probes", "300", "--idle-gap-ms", "3")
CHATTER = ("--chatter-every", "50")

WORKERS = {
    "raw_msgspec": lambda n: raw(n, "msgspec"),
    "raw_json": lambda n: raw(n, "json"),
    "lib": lib,
    "serve": serve,
    "raw_latency_flood": lambda n: raw(n, peer_args=FLOOD_PROBES, probes=True),
    "lib_latency_flood": lambda n: lib(n, peer_args=FLOOD_PROBES, probes=True),
    "raw_latency_idle": lambda n: raw(n, peer_args=IDLE_PROBES, probes=True),
    "lib_latency_idle": lambda n: lib(n, peer_args=IDLE_PROBES, probes=True),
    "lib_chatter": lambda n: lib(n, peer_args=CHATTER),
    "lib_slow": lambda n: lib(n, peer_args=CHATTER, slow=0.002),
    "lib_slow_interrupt": lambda n: lib(n, slow=0.002, interrupt=True),
}

if __name__ == "__main__":
    name, n = sys.argv[1], int(sys.argv[2])
    emit(WORKERS[name](n))
    os._exit(0)
