"""Per-turn latency on the real binary (issue 34): the library and ``codexrt serve`` vs a raw
minimal stdlib JSON-RPC client, each with its own pinned ``codex app-server`` child, one
loopback mock model process shared by all.

``python -m bench.turns one N`` — one channel: N timed turns per side, alternated turn by turn
(raw, library, serve, raw, …). ``python -m bench.turns eight N`` — 8 channels at once per
side: blocks of 8 × ``BLOCK`` concurrent turns, alternated block by block (raw, library,
serve), until each side has N turns per channel. Run it inside a loopback-only network
namespace (``unshare -rn sh -c 'ip link set lo up && exec "$0" "$@"' .venv/bin/python -m
bench.turns one 200``), as CI runs the real binary.

What is timed, on every side, is one turn on an existing thread: from writing ``turn/start``
(raw) / ``rt.send`` (library: ``async for ev in op.events()`` then ``await op.wait()``) /
writing ``codex.send`` (serve, the host decoding every line) until ``turn/completed`` / the
operation's result / the command's reply. Every side starts a new thread every
``THREAD_EVERY`` turns; the first turn of a thread (which carries the thread's start on the
library and serve sides) is run but not counted, on every side. Each turn's final text is
checked against the mock's reply (a turn that lost its text fails the row).

The raw client is stdlib only (``subprocess`` + ``json``): write a request line, read lines
until its answer (``bufsize=65536``). The serve host uses the same ``json`` module.

The one-channel row also reports each side's client CPU per counted turn (issue 34): process
time around the raw client's and the library's turns (both run in this process, one after the
other), and ``codexrt serve``'s own CPU (``/proc/PID/stat``, summed over the turns). On two
shared cores that CPU competes with the app-server and the mock model for the turn, so it is
the part of the overhead that a busy machine turns into wall time.

It also reports, per side, what that side's app-server child itself spent per counted turn
(``/proc/PID/task/*/schedstat``, summed over its threads): its CPU and the time its threads
waited for a core (summed over its threads: not wall time). Each side has its own child, so the
three should spend about the same CPU (a client that made the server work more would show
here); the wait says how contended the run was — on this project's two-vCPU VM the pinned
server alone uses about one core for the whole of a turn (bench/RESULTS.md, eleventh round).
Both ``/proc`` reads of a turn are outside its timed window and its client-CPU window.
"""

from __future__ import annotations

import collections
import json
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from time import process_time

from bench._common import ROOT, emit, env_with_root, now

THREAD_EVERY = 10
BLOCK = 2  # turns per channel per side in one 8-channel block (small: load spikes hit every side)
CHANNELS = 8


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def _overhead_ci(side: list[float], raw: list[float], rounds: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% bootstrap interval of ``median(side) - median(raw)`` (ms): turns resampled with
    replacement — jointly by index when both lists are alternated turn by turn (equal length),
    each on its own otherwise. A turn's time varies by tens of ms with the app-server, so the
    difference of two medians of a few hundred turns moves by ±1–2 ms from run to run; the
    interval says how far this run's figure can be trusted (issue 34)."""
    import random

    rnd = random.Random(seed)
    n, m = len(side), len(raw)
    med = statistics.median
    diffs = []
    for _ in range(rounds):
        if n == m:
            idx = [rnd.randrange(n) for _ in range(n)]
            diffs.append(med([side[i] for i in idx]) - med([raw[i] for i in idx]))
        else:
            diffs.append(med(rnd.choices(side, k=n)) - med(rnd.choices(raw, k=m)))
    diffs.sort()
    return diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1]


def _stats(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50_ms": statistics.median(ms), "p95_ms": _pct(ms, 0.95), "p99_ms": _pct(ms, 0.99),
            "mean_ms": statistics.fmean(ms)}


class Setup:
    """The pinned binary, a loopback mock model in its own process, a throw-away CODEX_HOME."""

    def __init__(self) -> None:
        from peer_fixtures.codex_bin import native_binary
        from peer_fixtures.codex_home import codex_env, make_codex_home

        binary = native_binary()
        if binary is None:
            raise RuntimeError("the pinned real codex binary is not installed (run .ci/setup)")
        self.binary = str(binary)
        self.tmp = Path(tempfile.mkdtemp(prefix="codexrt-turns-"))
        self.mock = subprocess.Popen([sys.executable, "-m", "codexrt.loopback"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env_with_root())
        assert self.mock.stdout
        base_url = self.mock.stdout.readline().decode().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the loopback model did not start ({base_url!r})")
        self.env = codex_env(make_codex_home(self.tmp / "home", base_url))
        self.cwd = self.tmp / "ws"
        self.cwd.mkdir()

    def close(self) -> None:
        _end(self.mock, 10)  # the mock stops on stdin EOF
        shutil.rmtree(self.tmp, ignore_errors=True)


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of another process so far (``/proc/PID/stat``; clock ticks, so
    only a sum over many turns means something)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sched_ms(pid: int | None) -> tuple[float, float] | None:
    """(CPU ms, ms waited on a run queue) of process ``pid`` so far, summed over its threads
    (``/proc/PID/task/*/schedstat``: nanoseconds); None when it cannot be read (no pid, the
    process gone, or a kernel without schedstats: no file, or zeros)."""
    if pid is None:
        return None
    run = wait = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as fh:
                fields = fh.read().split()
            run += int(fields[0])
            wait += int(fields[1])
        except (OSError, ValueError, IndexError):  # a thread that just ended, or no schedstats
            continue
    if run == 0:
        return None
    return run / 1e6, wait / 1e6


def _end(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Close ``proc``'s stdin (every child here exits on EOF) and reap it; kill it past ``timeout``."""
    assert proc.stdin
    proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class RawClient:
    """The baseline: ``codex app-server`` driven with ``subprocess``, ``os.read`` (64 KiB) and
    ``json`` only. :meth:`turn` is the blocking form (one channel); :func:`_raw_block` drives 8
    of them from one thread with ``selectors`` (no GIL hand-over between client threads)."""

    def __init__(self, s: Setup) -> None:
        self.proc = subprocess.Popen([s.binary, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=s.env, cwd=s.cwd, bufsize=0)
        assert self.proc.stdout
        self.fd = self.proc.stdout.fileno()
        self.tail = b""
        self.queue: collections.deque[bytes] = collections.deque()
        self.next_id = 0
        self.request("initialize", {"clientInfo": {"name": "raw", "version": "0"},
                                    "capabilities": {"experimentalApi": True}})
        self.write({"method": "initialized"})
        self.thread_id: str | None = None
        # the 8-channel state machine's: the turn being waited for
        self.turn_no = 0
        self.waiting: tuple[str, int] | None = None  # ("thread" | "turn", request id)
        self.t0 = 0.0
        self.final = ""

    def write(self, obj: Any) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")

    def read(self) -> None:
        """One ``os.read``: its complete lines join the queue."""
        data = os.read(self.fd, 65536)
        if not data:
            raise RuntimeError("codex app-server exited")
        *whole, self.tail = (self.tail + data).split(b"\n")
        self.queue.extend(whole)

    def next_message(self) -> Any | None:
        """The next queued message that is not a server request (answered -32601), or None."""
        while self.queue:
            msg = json.loads(self.queue.popleft())
            if "id" in msg and "method" in msg:  # a server request: this bench's turns make none
                self.write({"id": msg["id"], "error": {"code": -32601, "message": "not supported"}})
                continue
            return msg
        return None

    def lines(self) -> Any:
        while True:
            msg = self.next_message()
            if msg is None:
                self.read()
            else:
                yield msg

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        rid = self.next_id
        self.write({"id": rid, "method": method, "params": params})
        for msg in self.lines():
            if msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def turn(self, text: str, new_thread: bool) -> tuple[float, str]:
        if new_thread or self.thread_id is None:
            self.thread_id = self.request("thread/start", {"cwd": None})["thread"]["id"]
        self.next_id += 1
        t0 = now()
        self.write({"id": self.next_id, "method": "turn/start",
                    "params": {"threadId": self.thread_id, "input": [{"type": "text", "text": text}]}})
        final = ""
        for msg in self.lines():
            method = msg.get("method")
            if method == "item/completed" and msg["params"]["item"].get("type") == "agentMessage":
                final = msg["params"]["item"].get("text", "")
            elif method == "turn/completed" and msg["params"].get("threadId") == self.thread_id:
                return now() - t0, final
        raise AssertionError("unreachable")

    def close(self) -> None:
        _end(self.proc, 10)


class ServeHost:
    """``codexrt serve`` (``--idle-timeout 0``) as a host runs it; one channel per name."""

    def __init__(self, s: Setup) -> None:
        cmd = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", s.binary, "--idle-timeout", "0",
               "--cwd", str(s.cwd)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=ROOT, env={**env_with_root(), **s.env}, bufsize=65536)
        self.next_id = 0
        self.threads: dict[str, str] = {}
        self.sent: dict[str, tuple[str, float]] = {}  # request id -> (channel, time written)

    def send(self, channel: str, text: str, new_thread: bool) -> None:
        assert self.proc.stdin
        self.next_id += 1
        rid = f"r{self.next_id}"
        params: dict[str, Any] = {"channelId": channel, "message": text}
        if not new_thread and channel in self.threads:
            params["threadId"] = self.threads[channel]
        self.sent[rid] = (channel, now())
        self.proc.stdin.write(json.dumps({"id": rid, "command": "codex.send", "params": params}).encode() + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> tuple[str, float, str]:
        """The next ``codex.send`` reply: (channel, seconds since it was sent, final text)."""
        assert self.proc.stdout
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("type") == "response" and msg.get("id") in self.sent:
                channel, t0 = self.sent.pop(msg["id"])
                elapsed = now() - t0
                if not msg["ok"]:
                    raise RuntimeError(f"codex.send failed: {msg['error']}")
                self.threads[channel] = msg["result"]["threadId"]
                return channel, elapsed, msg["result"].get("finalText") or ""
        raise RuntimeError("codexrt serve exited")

    def child_pid(self, channel: str) -> int | None:
        """The app-server pid of ``channel``, from serve's ``status`` command; None when serve
        reports none. Call it between turns, with no ``codex.send`` reply pending."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"id": "pid", "command": "status",
                                          "params": {"channelId": channel}}).encode() + b"\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("type") == "response" and msg.get("id") == "pid":
                channels = (msg.get("result") or {}).get("channels") or []
                return next((c.get("pid") for c in channels if c.get("channelId") == channel), None)
        raise RuntimeError("codexrt serve exited")

    def close(self) -> None:
        _end(self.proc, 60)


class Tally:
    """Per side: the counted turn times (ms) and whether every final text was the mock's."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {"raw": [], "lib": [], "serve": []}
        self.bad: dict[str, int] = {"raw": 0, "lib": 0, "serve": 0}
        self.cpu: dict[str, float] = {"raw": 0.0, "lib": 0.0, "serve": 0.0}  # client CPU s, counted turns
        # per side, over the counted turns whose two /proc reads both succeeded: the app-server
        # child's CPU ms, its threads' run-queue wait ms, and how many turns that is
        self.child_cpu: dict[str, float] = {"raw": 0.0, "lib": 0.0, "serve": 0.0}
        self.child_wait: dict[str, float] = {"raw": 0.0, "lib": 0.0, "serve": 0.0}
        self.child_turns: dict[str, int] = {"raw": 0, "lib": 0, "serve": 0}

    def add(self, side: str, seconds: float, text: str, counted: bool, cpu: float | None = None,
            child: tuple[tuple[float, float] | None, tuple[float, float] | None] | None = None) -> None:
        from codexrt.loopback._model import DEFAULT_TEXT

        if text != DEFAULT_TEXT:
            self.bad[side] += 1
        if counted:
            self.ms[side].append(seconds * 1000)
            if cpu is not None:
                self.cpu[side] += cpu
            if child is not None and child[0] is not None and child[1] is not None:
                self.child_cpu[side] += child[1][0] - child[0][0]
                self.child_wait[side] += child[1][1] - child[0][1]
                self.child_turns[side] += 1

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {side: _stats(v) for side, v in self.ms.items()}
        raw = out["raw"]
        for side in ("lib", "serve"):
            out[side]["overhead_p50_ms"] = out[side]["p50_ms"] - raw["p50_ms"]
            out[side]["overhead_p50_ci95_ms"] = _overhead_ci(self.ms[side], self.ms["raw"])
            out[side]["ratio_p50"] = out[side]["p50_ms"] / raw["p50_ms"]
            out[side]["ratio_p95"] = out[side]["p95_ms"] / raw["p95_ms"]
            out[side]["ratio_p99"] = out[side]["p99_ms"] / raw["p99_ms"]
        if any(self.cpu.values()):
            for side, v in self.ms.items():
                out[side]["cpu_ms_per_turn"] = self.cpu[side] * 1000 / max(1, len(v))
        for side, n in self.child_turns.items():
            if n:
                out[side]["server_cpu_ms_per_turn"] = self.child_cpu[side] / n
                out[side]["server_wait_ms_per_turn"] = self.child_wait[side] / n
                out[side]["server_turns"] = n
        out["text_ok"] = not any(self.bad.values())
        out["bad_texts"] = self.bad
        return out


def one(turns: int) -> dict[str, Any]:
    """One channel per side, alternated turn by turn."""
    import trio

    from codexrt import RuntimeConfig, open_runtime

    s = Setup()
    tally = Tally()
    raw = RawClient(s)
    serve = ServeHost(s)
    try:
        async def main() -> None:
            async with open_runtime(RuntimeConfig(codex_bin=s.binary, env=s.env, cwd=str(s.cwd))) as rt:
                tid: str | None = None
                total = turns + -(-turns // (THREAD_EVERY - 1))  # plus the uncounted first turns
                pids: dict[str, int | None] = {"raw": raw.proc.pid}
                for i in range(total):
                    new = i % THREAD_EVERY == 0
                    text = f"turn {i}"
                    # each /proc read before the client-CPU window opens and after it closes
                    k0 = _sched_ms(pids["raw"])
                    c0 = process_time()
                    secs, final = raw.turn(text, new)
                    tally.add("raw", secs, final, not new, process_time() - c0, (k0, _sched_ms(pids["raw"])))
                    k0 = _sched_ms(pids.get("lib"))
                    c0 = process_time()
                    t0 = now()
                    op = rt.send(text, thread_id=None if new else tid)
                    async for _ev in op.events():
                        pass
                    res = await op.wait()
                    tally.add("lib", now() - t0, res.final_text or "", not new and res.status == "completed",
                              process_time() - c0, (k0, _sched_ms(pids.get("lib"))))
                    tid = res.thread_id
                    k0 = _sched_ms(pids.get("serve"))
                    c0 = _proc_cpu_s(serve.proc.pid)
                    serve.send("c", text, new)
                    _c, secs, final = serve.reply()
                    tally.add("serve", secs, final, not new, _proc_cpu_s(serve.proc.pid) - c0,
                              (k0, _sched_ms(pids.get("serve"))))
                    if i == 0:  # both children run now (the first turn is never counted)
                        pids["lib"] = rt.runtime_snapshot()["pid"]
                        pids["serve"] = serve.child_pid("c")

        trio.run(main)
    finally:
        raw.close()
        serve.close()
        s.close()
    return {"channels": 1, "turns": turns, **tally.result()}


def _raw_block(raws: list[RawClient], first: int, n: int, tally: Tally) -> None:
    """Turns ``first`` … ``first + n - 1`` on every raw client at once, from this thread: a
    ``selectors`` loop over their stdout, each client a small state machine (``thread/start``
    when a new thread is due, then ``turn/start`` … ``turn/completed``)."""

    def begin(c: RawClient) -> None:
        c.next_id += 1
        if c.turn_no % THREAD_EVERY == 0 or c.thread_id is None:
            c.waiting = ("thread", c.next_id)
            c.write({"id": c.next_id, "method": "thread/start", "params": {"cwd": None}})
        else:
            start_turn(c)

    def start_turn(c: RawClient) -> None:
        c.waiting, c.final, c.t0 = ("turn", c.next_id), "", now()
        c.write({"id": c.next_id, "method": "turn/start",
                 "params": {"threadId": c.thread_id, "input": [{"type": "text", "text": f"turn {c.turn_no}"}]}})

    sel = selectors.DefaultSelector()
    left = {id(c): n for c in raws}
    for c in raws:
        c.turn_no = first
        sel.register(c.fd, selectors.EVENT_READ, c)
        begin(c)
    running = len(raws)
    try:
        while running:
            for key, _ in sel.select():
                c = key.data
                c.read()
                while (msg := c.next_message()) is not None:
                    kind, rid = c.waiting or ("", -1)
                    if kind == "thread" and msg.get("id") == rid:
                        c.thread_id = msg["result"]["thread"]["id"]
                        c.next_id += 1
                        start_turn(c)
                    elif kind == "turn" and msg.get("method") == "item/completed":
                        if msg["params"]["item"].get("type") == "agentMessage":
                            c.final = msg["params"]["item"].get("text", "")
                    elif (kind == "turn" and msg.get("method") == "turn/completed"
                          and msg["params"].get("threadId") == c.thread_id):
                        tally.add("raw", now() - c.t0, c.final, c.turn_no % THREAD_EVERY != 0)
                        c.waiting = None
                        c.turn_no += 1
                        left[id(c)] -= 1
                        if left[id(c)]:
                            begin(c)
                        else:
                            running -= 1
    finally:
        sel.close()


def eight(turns: int, channels: int = CHANNELS) -> dict[str, Any]:
    """``channels`` channels per side at once, alternated block by block."""
    import trio

    from codexrt import RuntimeConfig, open_runtime

    s = Setup()
    tally = Tally()
    names = [f"c{k}" for k in range(channels)]
    raws = [RawClient(s) for _ in names]
    serve = ServeHost(s)
    done = {"raw": 0, "lib": 0, "serve": 0}  # turns run per channel, per side

    def raw_block(n: int) -> None:
        _raw_block(raws, done["raw"], n, tally)
        done["raw"] += n

    def serve_block(n: int) -> None:
        left = {c: n for c in names}

        def turn_of(c: str) -> None:
            i = done["serve"] + n - left[c]
            serve.send(c, f"turn {i}", i % THREAD_EVERY == 0)

        for c in names:
            turn_of(c)
        running = len(names)
        while running:
            c, secs, final = serve.reply()
            i = done["serve"] + n - left[c]
            tally.add("serve", secs, final, i % THREAD_EVERY != 0)
            left[c] -= 1
            if left[c]:
                turn_of(c)
            else:
                running -= 1
        done["serve"] += n

    try:
        async def main() -> None:
            cfg = RuntimeConfig(codex_bin=s.binary, env=s.env, cwd=str(s.cwd))
            async with trio.open_nursery() as keep:
                rts: list[Any] = []
                ready = trio.Event()
                close = trio.Event()

                async def hold() -> None:
                    async with open_runtime(cfg) as rt:
                        rts.append(rt)
                        if len(rts) == channels:
                            ready.set()
                        await close.wait()

                for _ in names:
                    keep.start_soon(hold)
                await ready.wait()
                tids: list[str | None] = [None] * channels

                async def lib_channel(k: int, n: int) -> None:
                    for j in range(n):
                        i = done["lib"] + j
                        new = i % THREAD_EVERY == 0
                        t0 = now()
                        op = rts[k].send(f"turn {i}", thread_id=None if new else tids[k])
                        async for _ev in op.events():
                            pass
                        res = await op.wait()
                        tally.add("lib", now() - t0, res.final_text or "", not new and res.status == "completed")
                        tids[k] = res.thread_id

                while done["raw"] < turns:
                    n = min(BLOCK, turns - done["raw"])
                    raw_block(n)
                    async with trio.open_nursery() as block:
                        for k in range(channels):
                            block.start_soon(lib_channel, k, n)
                    done["lib"] += n
                    serve_block(n)
                close.set()

        trio.run(main)
    finally:
        for c in raws:
            c.close()
        serve.close()
        s.close()
    return {"channels": channels, "turns_per_channel": turns, **tally.result()}


WORKERS: dict[str, Callable[[int], dict[str, Any]]] = {"one": one, "eight": eight}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](int(sys.argv[2])))
    os._exit(0)
