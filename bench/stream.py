"""Stream throughput: one big turn of ``item/agentMessage/delta`` from the flood peer.

Every worker does the same thing before the clock starts: spawn ``peer_fixtures.flood_peer``,
handshake, ``thread/start``, run a small warm-up turn, and then times the **second turn** of
the thread (``[[flood:N]]``) from writing ``turn/start`` until ``turn/completed`` is handled.
Every worker rebuilds the whole text and checks it against
``peer_fixtures.flood_peer.expected_text(N)`` — a benchmark that loses a character fails.

The throughput rows run the peer with ``--burst``: the whole turn is written in one go, without
looking at stdin between writes, so the peer is never what a client waits on.

* ``ceiling`` — the peer's own ceiling: ``os.read`` of the pipe plus ``bytes.count(b"\n")``,
  nothing decoded while the clock runs (the text is checked after it stopped).
* ``raw_msgspec`` — the unbuffered-default naive loop: a plain loop over the child's stdout
  lines (``for line in proc.stdout``, Popen's default 8 KiB buffer) decoding each with
  ``msgspec.json.decode``.
* ``raw_msgspec_buf`` — the baseline ("buffered naive loop"): the same loop with
  ``Popen(..., bufsize=65536)``, so it reads the pipe 64 KiB at a time as codexrt does. This is
  what the targets are measured against (issue 34: the 8 KiB loop flattered codexrt).
* ``raw_json`` — the same loop with the stdlib ``json`` (for reference).
* ``lib`` — codexrt's public API: ``open_runtime`` + ``rt.send`` + ``async for ev in
  op.events()``.
* ``blocking`` — the blocking facade: ``codexrt.blocking.connect`` + ``for ev in
  rt.stream(...)`` (the runtime on its own thread, the consumer on the main thread).
* ``aio`` — ``codexrt.aio.open_runtime`` + ``async for ev in op.events()`` under
  ``asyncio.run`` (Trio as a guest on the asyncio loop).
* ``serve8`` — 8 channels streaming at once through one ``codexrt serve`` (each channel its
  own flood peer): aggregate rate, serve's peak RSS, each channel's rate.
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

from time import monotonic_ns, process_time

from bench._common import ROOT, emit, env_with_root, flood_cli, now, peak_rss_mb

WARM = "[[flood:200]]"
#: Peer arguments of the throughput rows: the whole turn written in one go.
BURST = ("--burst",)


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


def raw(n: int, decoder: str = "msgspec", peer_args: tuple[str, ...] = (), probes: bool = False,
        ceiling: bool = False, bufsize: int = -1) -> dict[str, Any]:
    import json

    import msgspec

    from peer_fixtures.flood_peer import argv

    decode = msgspec.json.decode if decoder == "msgspec" else json.loads
    enc = msgspec.json.encode
    proc = subprocess.Popen(argv(*peer_args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
                            env=env_with_root(), bufsize=bufsize)
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
    c0 = process_time()
    send({"id": 4, "method": "turn/start", "params": {"threadId": tid, "input": [{"type": "text", "text": f"[[flood:{n}]]"}]}})
    final = None
    if ceiling:
        return _ceiling(proc, decode, n, t0)
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
    cpu = process_time() - c0
    text = "".join(parts)
    proc.stdin.close()
    proc.wait(10)
    out = {"n": n, "seconds": elapsed, "rate": count / elapsed, "events": count, "cpu_s": cpu,
           "ok": (text == final) if probes else _check(text, n), "rss_mb": peak_rss_mb()}
    if probes:
        out.update(probes=len(lat), p50_us=_pct(lat, 0.5), p99_us=_pct(lat, 0.99))
    return out


def _ceiling(proc: Any, decode: Any, n: int, t0: float) -> dict[str, Any]:
    """The peer's ceiling: read the pipe and count newlines until ``turn/completed``; decode
    and check the text only after the clock stopped."""
    fd = proc.stdout.fileno()  # the buffered reader holds nothing: the peer was quiet
    chunks: list[bytes] = []
    lines = 0
    end = b'"turn/completed"'
    seen = False
    tail = b""
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            raise RuntimeError("peer ended")
        lines += data.count(b"\n")
        chunks.append(data)
        seen = seen or end in tail + data[:64] or end in data
        if seen and data.endswith(b"\n"):
            break
        tail = data[-64:]
    elapsed = now() - t0
    parts = []
    final = None
    for line in b"".join(chunks).splitlines():
        msg = decode(line)
        method = msg.get("method")
        if method == "item/agentMessage/delta":
            parts.append(msg["params"]["delta"])
        elif method == "item/completed" and msg["params"]["item"]["type"] == "agentMessage":
            final = msg["params"]["item"]["text"]
    text = "".join(parts)
    proc.stdin.close()
    proc.wait(10)
    return {"n": n, "seconds": elapsed, "rate": n / elapsed, "lines": lines,
            "ok": _check(text, n) and final == text, "rss_mb": peak_rss_mb()}


def lib(n: int, peer_args: tuple[str, ...] = (), probes: bool = False, slow: float = 0.0,
        interrupt: bool = False) -> dict[str, Any]:
    """``slow``: the consumer sleeps this long after every event. ``interrupt``: abort the
    turn once the first text arrived and time the stop until ``turnAborted`` / the terminal."""
    import trio

    from codexrt import RuntimeConfig, open_runtime
    from codexrt._io._transport import spawn_process_transport
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
            c0 = process_time()
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
            out["cpu_s"] = process_time() - c0
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


def _config(peer_args: tuple[str, ...]) -> Any:
    from codexrt import RuntimeConfig
    from codexrt._io._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv

    async def factory() -> Any:
        return await spawn_process_transport(argv(*peer_args), cwd=ROOT, env=env_with_root())

    return RuntimeConfig(transports=[factory])


def blocking(n: int, peer_args: tuple[str, ...] = BURST) -> dict[str, Any]:
    """The blocking facade: ``for ev in rt.stream(text)`` on the caller's thread."""
    import codexrt.blocking

    with codexrt.blocking.connect(_config(peer_args)) as rt:
        res = rt.send(WARM)
        assert res.status == "completed", res
        parts: list[str] = []
        events = 0
        t0 = now()
        c0 = process_time()
        op = rt.stream(f"[[flood:{n}]]", thread_id=res.thread_id)
        for ev in op:
            events += 1
            if ev.kind == "itemUpdated":
                parts.append(ev.payload["delta"])
        elapsed = now() - t0
        cpu = process_time() - c0
        res = op.wait()
    text = "".join(parts)
    ok = res.status == "completed" and _check(text, n) and res.final_text == text
    return {"n": n, "seconds": elapsed, "rate": n / elapsed, "events": events, "ok": ok, "cpu_s": cpu,
            "rss_mb": peak_rss_mb()}


def aio(n: int, peer_args: tuple[str, ...] = BURST) -> dict[str, Any]:
    """``codexrt.aio`` under ``asyncio.run``: ``async for ev in op.events()``."""
    import asyncio

    import codexrt.aio

    out: dict[str, Any] = {}

    async def main() -> None:
        async with codexrt.aio.open_runtime(_config(peer_args)) as rt:
            op = rt.send(WARM)
            async for _ev in op.events():
                pass
            res = await op.wait()
            assert res.status == "completed", res
            parts: list[str] = []
            events = 0
            t0 = now()
            c0 = process_time()
            op = rt.send(f"[[flood:{n}]]", thread_id=res.thread_id)
            async for ev in op.events():
                events += 1
                if ev.kind == "itemUpdated":
                    parts.append(ev.payload["delta"])
            elapsed = now() - t0
            out["cpu_s"] = process_time() - c0
            res = await op.wait()
            text = "".join(parts)
            ok = res.status == "completed" and _check(text, n) and res.final_text == text
            out.update(n=n, seconds=elapsed, rate=n / elapsed, events=events, ok=ok)

    asyncio.run(main())
    out["rss_mb"] = peak_rss_mb()
    return out


def _serve_host() -> tuple[str, "subprocess.Popen[bytes]", Any]:
    """A ``codexrt serve`` on burst flood peers, as a host runs it: (temp dir, process,
    ``send(obj)`` writing one command line)."""
    import msgspec

    enc = msgspec.json.encode
    tmp = tempfile.mkdtemp(prefix="codexrt-bench-")
    cmd = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", flood_cli(tmp, *BURST)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env_with_root(),
                            bufsize=65536)  # the host reads as the buffered naive loop does
    assert proc.stdin is not None and proc.stdout is not None

    def send(obj: Any) -> None:
        proc.stdin.write(enc(obj) + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    return tmp, proc, send


def serve8(n: int, channels: int = 8) -> dict[str, Any]:
    """``channels`` channels of one ``codexrt serve`` streaming at once (each its own flood
    peer): every stdout line decoded, text checked per channel, each channel's rate."""
    import msgspec

    decode = msgspec.json.decode
    tmp, proc, send = _serve_host()

    names = [f"c{i}" for i in range(channels)]
    for c in names:
        send({"id": f"w-{c}", "command": "codex.send", "params": {"channelId": c, "message": WARM}})
    tids: dict[str, str] = {}
    for line in proc.stdout:
        msg = decode(line)
        if msg.get("type") == "response" and str(msg.get("id", "")).startswith("w-"):
            assert msg["ok"], msg
            tids[msg["id"][2:]] = msg["result"]["threadId"]
            if len(tids) == channels:
                break
    parts: dict[str, list[str]] = {c: [] for c in names}
    done: dict[str, float] = {}
    replies: dict[str, Any] = {}
    t0 = now()
    for c in names:
        send({"id": f"t-{c}", "command": "codex.send", "params": {"channelId": c, "message": f"[[flood:{n}]]",
                                                                 "threadId": tids[c]}})
    lines = 0
    for line in proc.stdout:
        msg = decode(line)
        lines += 1
        if msg.get("kind") == "itemUpdated":
            parts[msg["channelId"]].append(msg["payload"]["delta"])
        elif msg.get("type") == "response" and str(msg.get("id", "")).startswith("t-"):
            c = msg["id"][2:]
            done[c] = now() - t0
            replies[c] = msg
            if len(done) == channels:
                break
    elapsed = now() - t0
    serve_rss = _vm_hwm_mb(proc.pid)
    proc.stdin.close()
    proc.wait(30)
    shutil.rmtree(tmp, ignore_errors=True)
    ok = True
    for c in names:
        text = "".join(parts[c])
        r = replies[c]
        ok = ok and bool(r["ok"] and r["result"]["status"] == "completed" and _check(text, n)
                         and r["result"]["finalText"] == text)
    rates = sorted(n / done[c] for c in names)
    return {"n": n, "channels": channels, "seconds": elapsed, "rate": channels * n / elapsed, "lines": lines,
            "ok": ok, "rss_mb": serve_rss, "min_rate": rates[0], "max_rate": rates[-1],
            "fairness": rates[-1] / rates[0], "host_rss_mb": peak_rss_mb()}


def serve(n: int) -> dict[str, Any]:
    """The host side of ``codexrt serve``: commands in, every stdout line decoded."""
    import msgspec

    decode = msgspec.json.decode
    tmp, proc, send = _serve_host()

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
    serve_cpu0 = _proc_cpu_s(proc.pid)
    t0 = now()
    c0 = process_time()
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
    host_cpu = process_time() - c0
    serve_cpu = _proc_cpu_s(proc.pid) - serve_cpu0
    serve_rss = _vm_hwm_mb(proc.pid)
    proc.stdin.close()
    proc.wait(20)
    shutil.rmtree(tmp, ignore_errors=True)
    text = "".join(parts)
    ok = bool(reply and reply["ok"] and reply["result"]["status"] == "completed" and _check(text, n)
              and reply["result"]["finalText"] == text)
    return {"n": n, "seconds": elapsed, "rate": n / elapsed, "lines": lines, "itemUpdated": updates, "ok": ok,
            "rss_mb": serve_rss, "host_rss_mb": peak_rss_mb(), "serve_cpu_s": serve_cpu, "host_cpu_s": host_cpu}


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of another process so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _vm_hwm_mb(pid: int) -> float | None:
    """Peak RSS of another process (Linux ``VmHWM``), MiB."""
    from bench._common import proc_status_mb

    return proc_status_mb(pid, "VmHWM")


FLOOD_PROBES = ("--probe-every", "500")
IDLE_PROBES = ("--idle-probes", "300", "--idle-gap-ms", "3")
CHATTER = ("--chatter-every", "50")

WORKERS = {
    "ceiling": lambda n: raw(n, "msgspec", peer_args=BURST, ceiling=True),
    "raw_msgspec": lambda n: raw(n, "msgspec", peer_args=BURST),
    "raw_msgspec_buf": lambda n: raw(n, "msgspec", peer_args=BURST, bufsize=65536),
    "raw_json": lambda n: raw(n, "json", peer_args=BURST),
    "lib": lambda n: lib(n, peer_args=BURST),
    "blocking": blocking,
    "aio": aio,
    "serve8": serve8,
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
