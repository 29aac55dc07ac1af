"""History benchmarks.

* ``legacy`` — generate a rollout file of about ``MB`` megabytes (the golden
  ``tests/data/rollouts/legacy.rollout.jsonl`` body repeated, with its ``session_meta`` once),
  then parse it with ``codexrt._io._history_files.iter_rollout`` (the sans-IO ``LegacyParser``) vs a
  raw ``msgspec`` line loop over the same file; each side in its own interpreter, so each peak
  RSS is its own. Both must be bounded: the file is streamed, never held whole.
* ``wrappers`` — a legacy rollout of N code-mode wrappers, each polling a command a direct call
  started (receipts, known processes, poll updates: the R-H-5 replay), read through
  ``load_rollout_transcript`` at N and at 4N in the same run; the row is the time *per wrapper*
  at 4N over that at N (linear replay ≈ 1×; the quadratic replay this replaced was ≈ 4×).
* ``count`` — count the messages of a native thread of N items over ``thread/items/list``
  pagination (the flood peer's synthetic thread) with ``codexrt._features._history.MessageCounter`` vs a
  raw paging loop over a pipe; both sides warm (each keeps its peer for every pair, one untimed
  round first — before, the library started a new runtime and peer for every pair while the raw
  loop kept one).
* ``listing`` — ``threads --offline``'s list over N and 4N rollout files (issue 32): the first 50
  rows (``legacy_thread_list(limit=50)``, fresh index) vs a raw ``os.walk`` + ``lstat`` loop over
  the same files; the row is the library's time *per file* at 4N over that at N (linear ≈ 1×) and
  its ratio to the raw scan at 4N. Answer check: the 50 newest thread ids, in order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench._common import ROOT, emit, env_with_root, flood_cli, now, peak_rss_mb

GOLDEN = ROOT / "tests" / "data" / "rollouts" / "legacy.rollout.jsonl"


def generate(path: Path, mb: int) -> int:
    lines = GOLDEN.read_bytes().splitlines(keepends=True)
    head, body = lines[0], b"".join(lines[1:])
    target = mb * 1024 * 1024
    with open(path, "wb") as f:
        f.write(head)
        size = len(head)
        while size < target:
            f.write(body)
            size += len(body)
    return size


def legacy_lib(path: str) -> dict[str, Any]:
    from codexrt._io._history_files import iter_rollout

    t0 = now()
    n = sum(1 for _ in iter_rollout(path))
    return {"seconds": now() - t0, "records": n, "rss_mb": peak_rss_mb()}


def legacy_raw(path: str) -> dict[str, Any]:
    import msgspec

    decode = msgspec.json.decode
    t0 = now()
    n = 0
    with open(path, "rb") as f:
        for line in f:
            decode(line)
            n += 1
    return {"seconds": now() - t0, "lines": n, "rss_mb": peak_rss_mb()}


def _sub(name: str, arg: str) -> dict[str, Any]:
    import json

    out = subprocess.run([sys.executable, "-m", "bench.history", name, arg], cwd=ROOT, env=env_with_root(),
                         capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


def legacy(mb: int, pairs: int = 1) -> dict[str, Any]:
    """Generate the file once, then ``pairs`` alternated runs of each side (fresh interpreter
    each); medians of the times and of the per-pair ratios."""
    import statistics

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-legacy-"))
    try:
        path = tmp / "rollout-2026-11-30T00-00-00-01a22d24-784b-70a1-b4d2-eee60df61981.jsonl"
        size = generate(path, mb)
        libs, raws = [], []
        for _ in range(pairs):
            raws.append(_sub("legacy_raw", str(path)))
            libs.append(_sub("legacy_lib", str(path)))
        mbs = size / 1024 / 1024
        ratio = statistics.median(r["seconds"] / lb["seconds"] for lb, r in zip(libs, raws))
        lib_s = statistics.median(x["seconds"] for x in libs)
        raw_s = statistics.median(x["seconds"] for x in raws)
        return {"mb": mbs, "records": libs[0]["records"], "codexrt_mb_s": mbs / lib_s,
                "codexrt_rss_mb": max(x["rss_mb"] for x in libs), "baseline_mb_s": mbs / raw_s,
                "baseline_rss_mb": max(x["rss_mb"] for x in raws), "lines": raws[0]["lines"], "ratio": ratio,
                "records_match": all(lb["records"] == r["lines"] for lb, r in zip(libs, raws)), "pairs": pairs}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def count(items: int, pairs: int = 1) -> dict[str, Any]:
    try:
        from codexrt._features._history import MessageCounter
    except ImportError as exc:
        return {"available": False, "reason": f"codexrt._features._history not importable: {exc}"}
    import msgspec
    import trio

    from codexrt import RuntimeConfig, open_runtime
    from codexrt._io._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv

    peer = argv("--history-items", str(items))
    tid = "01a22d24-784b-70a1-b4d2-eee60df61981"
    out: dict[str, Any] = {"available": True, "items": items}

    async def factory() -> Any:
        return await spawn_process_transport(peer, cwd=ROOT, env=env_with_root())

    lib_s: list[float] = []
    raw_s: list[float] = []
    lib_cpu: list[float] = []  # this process's CPU time (the peer's is not in it) per side
    raw_cpu: list[float] = []

    async def lib() -> None:
        """Both sides warm, as a user counting thread after thread would be: one runtime, one
        counter and one peer for every pair (the raw loop keeps its own peer too), one untimed
        round of each side first; the raw loop runs inside this Trio run (it blocks the loop,
        whose tasks are idle meanwhile), alternated with the library."""
        async with open_runtime(RuntimeConfig(transports=[factory])) as rt:
            conn = await rt.ensure_started()

            async def provider() -> Any:
                return conn

            async with MessageCounter.open() as counter:
                for k in range(pairs + 1):  # round 0: warm-up, not recorded
                    pages_n = raw_count()
                    counter.invalidate(tid)  # count afresh, not from the counter's cache
                    t0, c0 = now(), time.process_time()
                    res = await counter.count(tid, provider)
                    if k:
                        lib_s.append(now() - t0)
                        lib_cpu.append(time.process_time() - c0)
                    else:
                        raw_s.pop()
                        raw_cpu.pop()
                    out["count"] = res.count
                    out["pages"], out["baseline_count"] = pages_n
                    if res.count != pages_n[1]:  # any pair, the warm-up included
                        out["mismatches"] = out.get("mismatches", 0) + 1

    # raw paging loop
    proc = subprocess.Popen(peer, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env_with_root())
    assert proc.stdin and proc.stdout
    enc, dec = msgspec.json.encode, msgspec.json.decode
    ids = iter(range(1, 1 << 30))

    def call(method: str, params: Any) -> Any:
        i = next(ids)
        proc.stdin.write(enc({"id": i, "method": method, "params": params}) + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        for line in proc.stdout:  # type: ignore[union-attr]
            msg = dec(line)
            if msg.get("id") == i:
                return msg["result"]
        raise RuntimeError("peer ended")

    def raw_count() -> tuple[int, int]:
        t0, c0 = now(), time.process_time()
        cursor, pages, n = None, 0, 0
        while True:
            res = call("thread/items/list", {"threadId": tid, "limit": 100, **({"cursor": cursor} if cursor else {})})
            pages += 1
            n += sum(1 for e in res["data"] if e["item"]["type"] in ("userMessage", "agentMessage"))
            cursor = res["nextCursor"]
            if cursor is None:
                break
        raw_s.append(now() - t0)
        raw_cpu.append(time.process_time() - c0)
        return pages, n

    call("initialize", {"clientInfo": {"name": "raw", "version": "0"}, "capabilities": {"experimentalApi": True}})
    trio.run(lib)  # alternated: raw, library, raw, library …
    import statistics

    out.update(codexrt_s=statistics.median(lib_s), ratio=statistics.median(a / b for a, b in zip(lib_s, raw_s)))
    out.update(baseline_s=statistics.median(raw_s))
    out.update(codexrt_cpu_s=statistics.median(lib_cpu), baseline_cpu_s=statistics.median(raw_cpu),
               cpu_ratio=statistics.median(a / b for a, b in zip(lib_cpu, raw_cpu)))
    proc.stdin.close()
    proc.wait(10)
    return out


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds another process has run so far, over all its threads, to the nanosecond
    (``/proc/PID/task/*/schedstat``; ``/proc/PID/stat``'s clock ticks, 10 ms, where that is
    missing: a walk through serve costs 7-20 ms)."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    total += int(fh.read().split()[0])
            except FileNotFoundError:
                continue  # a thread that ended meanwhile
        return total / 1e9
    except OSError:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _RawPeer:
    """A raw stdlib JSON-RPC client of one flood peer: ``write`` a request, read lines
    (``bufsize=65536``) until its answer, decode with msgspec. The baseline of the paging rows."""

    def __init__(self, items: int) -> None:
        import msgspec

        from peer_fixtures.flood_peer import argv

        self.proc = subprocess.Popen(argv("--history-items", str(items)), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=ROOT, env=env_with_root(), bufsize=65536)
        self.enc, self.dec = msgspec.json.encode, msgspec.json.decode
        self.ids = iter(range(1, 1 << 30))
        self.call("initialize", {"clientInfo": {"name": "raw", "version": "0"}, "capabilities": {"experimentalApi": True}})

    def call(self, method: str, params: Any) -> Any:
        i = next(self.ids)
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(self.enc({"id": i, "method": method, "params": params}) + b"\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            msg = self.dec(line)
            if msg.get("id") == i:
                return msg["result"]
        raise RuntimeError("peer ended")

    def walk(self, method: str, params: dict[str, Any]) -> tuple[int, int, int]:
        """(pages, entries, messages) of one cursor walk."""
        cursor, pages, entries, messages = None, 0, 0, 0
        while True:
            res = self.call(method, {**params, **({"cursor": cursor} if cursor else {})})
            pages += 1
            for e in res["data"]:
                entries += 1
                if method == "thread/items/list":
                    messages += e["item"]["type"] in ("userMessage", "agentMessage")
                else:
                    messages += sum(i["type"] in ("userMessage", "agentMessage") for i in e["items"])
            cursor = res["nextCursor"]
            if cursor is None:
                return pages, entries, messages

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(10)


TID = "01a22d24-784b-70a1-b4d2-eee60df61981"


def pages(items: int, pairs: int = 1, limit: int = 100) -> dict[str, Any]:
    """``codex.readHistoryPage`` (scope ``items``) walked through ``codexrt serve`` vs the raw
    ``thread/items/list`` loop, both at page size ``limit`` over the flood peer's thread of
    ``items`` items, both warm (one untimed walk each), alternated pair by pair. The host
    decodes every serve line; the per-walk CPU of the serve process is read from ``/proc``.
    ``codexrt_s`` walks pages serve answered before (their records come from its page cache:
    an editor re-opening a thread); ``cold_s`` walks them under a thread id never read, so
    every page is projected, in the same pairs."""
    import statistics

    import msgspec

    enc, dec = msgspec.json.encode, msgspec.json.decode
    tmp = tempfile.mkdtemp(prefix="codexrt-pages-")
    cmd = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", flood_cli(tmp, "--history-items", str(items)),
           "--idle-timeout", "0"]
    serve = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             cwd=ROOT, env=env_with_root(), bufsize=65536)
    raw = _RawPeer(items)
    ids = iter(range(1, 1 << 30))
    assert serve.stdin and serve.stdout

    def command(name: str, params: dict[str, Any]) -> Any:
        rid = f"h{next(ids)}"
        serve.stdin.write(enc({"id": rid, "command": name, "params": params}) + b"\n")  # type: ignore[union-attr]
        serve.stdin.flush()  # type: ignore[union-attr]
        for line in serve.stdout:  # type: ignore[union-attr]
            msg = dec(line)
            if msg.get("type") == "response" and msg.get("id") == rid:
                if not msg["ok"]:
                    raise RuntimeError(f"{name} failed: {msg['error']}")
                return msg["result"]
        raise RuntimeError("serve ended")

    def serve_walk(tid: str = TID) -> tuple[int, int, int, int]:
        cursor, n_pages, entries, messages, records = None, 0, 0, 0, 0
        while True:
            res = command("codex.readHistoryPage", {"channelId": "h", "threadId": tid, "scope": "items",
                                                    "limit": limit, **({"cursor": cursor} if cursor else {})})
            n_pages += 1
            entries += len(res["data"])
            messages += sum(e["item"]["type"] in ("userMessage", "agentMessage") for e in res["data"])
            records += len(res["records"])
            cursor = res["nextCursor"]
            if cursor is None:
                return n_pages, entries, messages, records

    serve_s: list[float] = []
    raw_s: list[float] = []
    serve_cpu: list[float] = []
    cold_s: list[float] = []
    cold_cpu: list[float] = []
    out: dict[str, Any] = {"items": items, "limit": limit, "pairs": pairs}
    try:
        for k in range(pairs + 1):  # round 0: warm-up (serve's first command loads its handlers)
            t0 = now()
            got_raw = raw.walk("thread/items/list", {"threadId": TID, "limit": limit})
            t_raw = now() - t0
            c0 = _proc_cpu_s(serve.pid)
            t0 = now()
            got = serve_walk()  # pages serve answered before: their records come from its cache
            t_serve = now() - t0
            c_serve = _proc_cpu_s(serve.pid) - c0
            c0 = _proc_cpu_s(serve.pid)
            t0 = now()
            # the same pages under a thread id never read: every page projected (the peer's
            # synthetic thread answers any id)
            got_cold = serve_walk(f"{TID[:-12]}{k:012d}")
            t_cold = now() - t0
            c_cold = _proc_cpu_s(serve.pid) - c0
            for g in (got, got_cold):
                if g[:3] != got_raw or g[3] != g[2]:  # pages, entries, messages; one record per message
                    out["mismatches"] = out.get("mismatches", 0) + 1
            out.update(pages=got[0], entries=got[1], messages=got[2], records=got[3])
            if k:
                raw_s.append(t_raw)
                serve_s.append(t_serve)
                serve_cpu.append(c_serve)
                cold_s.append(t_cold)
                cold_cpu.append(c_cold)
    finally:
        raw.close()
        serve.stdin.close()
        serve.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    out.update(codexrt_s=statistics.median(serve_s), baseline_s=statistics.median(raw_s),
               ratio=statistics.median(a / b for a, b in zip(serve_s, raw_s)),
               serve_cpu_s=statistics.median(serve_cpu), cold_cpu_s=statistics.median(cold_cpu),
               cold_s=statistics.median(cold_s),
               cold_ratio=statistics.median(a / b for a, b in zip(cold_s, raw_s)))
    return out


def read_thread(items: int, pairs: int = 1, limit: int = 100) -> dict[str, Any]:
    """The library's ``HistoryReader.read_thread`` (``thread/read``, then the ``thread/turns/list``
    walk ascending without items — ``itemsView: "notLoaded"`` — and the ``thread/items/list``
    walk, projected into one transcript) at page
    size ``limit`` vs a raw loop making the same requests (decode and count only), both warm,
    alternated; the raw loop runs inside this Trio run (it blocks the loop, whose tasks are idle
    meanwhile)."""
    from codexrt import RuntimeConfig
    from codexrt._io._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv

    peer = argv("--history-items", str(items))

    async def factory() -> Any:
        return await spawn_process_transport(peer, cwd=ROOT, env=env_with_root())

    raw = _RawPeer(items)

    def raw_read() -> tuple[int, int]:
        raw.call("thread/read", {"threadId": TID})
        turns = raw.walk("thread/turns/list", {"threadId": TID, "sortDirection": "asc", "limit": limit,
                                                  "itemsView": "notLoaded"})
        entries = raw.walk("thread/items/list", {"threadId": TID, "limit": limit})
        return turns[0] + entries[0], entries[2]

    try:
        out = read_thread_pairs(RuntimeConfig(transports=[factory]), TID, raw_read, pairs, limit)
    finally:
        raw.close()
    return {"items": items, "limit": limit, "pairs": pairs, **out}


def read_thread_pairs(config: Any, tid: str, raw_read: Callable[[], tuple[int, int]], pairs: int,
                      limit: int) -> dict[str, Any]:
    """``pairs`` alternated rounds (one warm-up first, not recorded) of ``raw_read()`` — (pages,
    messages) of the raw loop — and the library's ``read_thread(tid)`` on a runtime of
    ``config``; a round whose records differ from the messages, or whose transcript is not
    complete, counts in ``mismatches``. The raw loop blocks the Trio run (its tasks are idle
    meanwhile)."""
    import statistics

    import trio

    from codexrt import open_history_reader, open_runtime

    out: dict[str, Any] = {}
    lib_s: list[float] = []
    raw_s: list[float] = []

    async def main() -> None:
        async with open_runtime(config) as rt:
            async with open_history_reader(rt, page_limit=limit) as reader:
                for k in range(pairs + 1):
                    t0 = now()
                    pages_n, messages = raw_read()
                    t_raw = now() - t0
                    t0 = now()
                    tr = await reader.read_thread(tid, allow_legacy=False)
                    t_lib = now() - t0
                    recs = sum(len(g.records) for g in tr.turns)
                    if recs != messages or not tr.complete:
                        out["mismatches"] = out.get("mismatches", 0) + 1
                    out.update(pages=pages_n, messages=messages, records=recs, complete=tr.complete)
                    if k:
                        raw_s.append(t_raw)
                        lib_s.append(t_lib)

    trio.run(main)
    out.update(codexrt_s=statistics.median(lib_s), baseline_s=statistics.median(raw_s),
               ratio=statistics.median(a / b for a, b in zip(lib_s, raw_s)))
    return out


def _wrapper_rollout(path: Path, n: int, kept: bool = False) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "projector_cases_rollout", ROOT / "tests" / "data" / "projector_cases" / "rollout.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.Rollout("0190ffff-0000-7000-8000-000000000001").start("t1").user("many cells")
    for k in range(n):
        if kept:  # a loop over a variable: how many calls ran is not in the source, so each cell stays whole
            r.wrapper(f"w{k}", 'const cmds = ["echo a"];\nfor (const c of cmds) { await tools.exec_command({cmd: c}); }\n'
                               'text("ran");')
            r.item_cmd(f"exec-{k}", "echo a", output="a\n", code=0, pid=5000 + k)
            r.wrapper_out(f"w{k}", ["ran"])
            continue
        r.call(f"c{k}", "exec_command", {"cmd": f"job {k}"}).out(f"c{k}", mod.unified("", pid=1000 + k))
        r.wrapper(f"w{k}", 'const r = await Promise.all([tools.exec_command({cmd: "echo a"}), '
                           'tools.write_stdin({session_id: %d, chars: ""})]);\n'
                           "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));" % (1000 + k))
        r.item_cmd(f"exec-{k}", "echo a", output="a\n", code=0, pid=5000 + k)
        r.wrapper_out(f"w{k}", ['Result 0: {"output":"a\\n"}', f'Result 1: {{"output":"polled {k}\\n"}}'])
        r.call(f"p{k}", "write_stdin", {"session_id": 1000 + k, "chars": ""})
        r.out(f"p{k}", mod.unified(f"done {k}\n", code=0))
    path.write_text(r.end().text())


def wrappers(n: int, kept: bool = False) -> dict[str, Any]:
    """N and 4N cells in one turn: each replaced (``kept`` False: the cell polls a direct
    command) or each kept whole (a loop over a variable) beside its command's item."""
    from codexrt._features._history import load_rollout_transcript

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-wrappers-"))
    try:
        out: dict[str, Any] = {"n": n}
        warm = tmp / "warm.jsonl"
        _wrapper_rollout(warm, 20)
        load_rollout_transcript(warm).records()  # imports, regex and attrs caches: not the row's
        for label, size in (("small", n), ("large", 4 * n)):
            path = tmp / f"{label}.jsonl"
            _wrapper_rollout(path, size, kept)
            t0 = now()
            tr = load_rollout_transcript(path)
            recs = tr.records()
            secs = now() - t0
            replaced = sum(a.replace for a in tr.wrappers.values())
            out[label] = {"wrappers": size, "seconds": secs, "per_wrapper_ms": secs * 1000 / size,
                          "replaced": replaced, "records": len(recs)}
        out["ratio"] = out["large"]["per_wrapper_ms"] / out["small"]["per_wrapper_ms"]
        out["all_replaced"] = all(out[k]["replaced"] == out[k]["wrappers"] for k in ("small", "large"))
        out["all_kept"] = all(out[k]["replaced"] == 0 for k in ("small", "large"))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rollout_home(home: Path, n: int) -> None:
    meta = ('{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"%s","cwd":"/w",'
            '"cli_version":"0.171.0","source":"cli","base_instructions":{"text":"%s"}}}\n')
    user = '{"timestamp":"2026-11-30T10:00:01.000Z","type":"event_msg","payload":{"type":"user_message","message":"hi %d"}}\n'
    filler = "You are Codex. " * 300  # real heads carry kilobytes of instructions
    for i in range(n):
        day = home / "sessions" / "2026" / "11" / f"{1 + i % 28:02d}"
        day.mkdir(parents=True, exist_ok=True)
        tid = f"00000000-0000-4000-8000-{i:012d}"
        p = day / f"rollout-2026-11-{1 + i % 28:02d}T10-00-00-{tid}.jsonl"
        p.write_text(meta % (tid, filler) + user % i)
        os.utime(p, (1e9 + i, 1e9 + i))


def _raw_scan(home: Path) -> int:
    n = 0
    for dirpath, _dirs, files in os.walk(home / "sessions"):
        for name in files:
            os.lstat(os.path.join(dirpath, name))
            n += 1
    return n


def listing(n: int) -> dict[str, Any]:
    from codexrt._features._history import legacy_thread_list
    from codexrt._io._session_index import SessionIndex

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-listing-"))
    try:
        out: dict[str, Any] = {"n": n}
        for label, size in (("small", n), ("large", 4 * n)):
            home = tmp / label
            _rollout_home(home, size)
            legacy_thread_list(home, index=SessionIndex(home), limit=50)  # warm: imports, page cache
            t0 = now()
            rows = legacy_thread_list(home, index=SessionIndex(home), limit=50)
            secs = now() - t0
            t0 = now()
            scanned = _raw_scan(home)
            raw = now() - t0
            want = [f"00000000-0000-4000-8000-{i:012d}" for i in range(size - 1, size - 51, -1)]
            out[label] = {"files": size, "seconds": secs, "raw_seconds": raw, "per_file_us": secs * 1e6 / size,
                          "rows_right": [r.thread_id for r in rows] == want and scanned == size}
        out["ratio"] = out["large"]["per_file_us"] / out["small"]["per_file_us"]
        out["raw_ratio"] = out["large"]["seconds"] / out["large"]["raw_seconds"]
        out["rows_right"] = out["small"]["rows_right"] and out["large"]["rows_right"]
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pair_arg(a: str) -> tuple[int, int]:
    """``"SIZE"`` or ``"SIZE:PAIRS"``."""
    size, _, pairs = a.partition(":")
    return int(size), int(pairs or 1)


WORKERS = {"legacy": lambda a: legacy(*_pair_arg(a)), "legacy_lib": legacy_lib, "legacy_raw": legacy_raw,
           "count": lambda a: count(*_pair_arg(a)), "wrappers": lambda a: wrappers(int(a)),
           "kept": lambda a: wrappers(int(a), kept=True),
           "pages": lambda a: pages(*_pair_arg(a)), "read_thread": lambda a: read_thread(*_pair_arg(a)),
           "listing": lambda a: listing(int(a))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    os._exit(0)
