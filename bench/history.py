"""History benchmarks.

* ``legacy`` — generate a rollout file of about ``MB`` megabytes (the golden
  ``tests/data/rollouts/legacy.rollout.jsonl`` body repeated, with its ``session_meta`` once),
  then parse it with ``codexrt._history_files.iter_rollout`` (the sans-IO ``LegacyParser``) vs a
  raw ``msgspec`` line loop over the same file; each side in its own interpreter, so each peak
  RSS is its own. Both must be bounded: the file is streamed, never held whole.
* ``count`` — count the messages of a native thread of N items over ``thread/items/list``
  pagination (the flood peer's synthetic thread) with ``codexrt._history.MessageCounter`` vs a
  raw paging loop over a pipe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._common import ROOT, emit, env_with_root, now, peak_rss_mb

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
    from codexrt._history_files import iter_rollout

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
                "records_match": libs[0]["records"] == raws[0]["lines"], "pairs": pairs}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def count(items: int, pairs: int = 1) -> dict[str, Any]:
    try:
        from codexrt._history import MessageCounter
    except ImportError as exc:
        return {"available": False, "reason": f"codexrt._history not importable: {exc}"}
    import msgspec
    import trio

    from codexrt import RuntimeConfig, open_runtime
    from codexrt._transport import spawn_process_transport
    from peer_fixtures.flood_peer import argv

    peer = argv("--history-items", str(items))
    tid = "01a22d24-784b-70a1-b4d2-eee60df61981"
    out: dict[str, Any] = {"available": True, "items": items}

    async def factory() -> Any:
        return await spawn_process_transport(peer, cwd=ROOT, env=env_with_root())

    lib_s: list[float] = []
    raw_s: list[float] = []

    async def lib() -> None:
        async with open_runtime(RuntimeConfig(transports=[factory])) as rt:
            conn = await rt.ensure_started()

            async def provider() -> Any:
                return conn

            async with MessageCounter.open() as counter:
                t0 = now()
                res = await counter.count(tid, provider)
                lib_s.append(now() - t0)
                out["count"] = res.count

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
        t0 = now()
        cursor, pages, n = None, 0, 0
        while True:
            res = call("thread/items/list", {"threadId": tid, "limit": 100, **({"cursor": cursor} if cursor else {})})
            pages += 1
            n += sum(1 for e in res["data"] if e["item"]["type"] in ("userMessage", "agentMessage"))
            cursor = res["nextCursor"]
            if cursor is None:
                break
        raw_s.append(now() - t0)
        return pages, n

    call("initialize", {"clientInfo": {"name": "raw", "version": "0"}, "capabilities": {"experimentalApi": True}})
    for _ in range(pairs):  # alternated: raw, library, raw, library …
        pages, n = raw_count()
        trio.run(lib)
    import statistics

    out.update(codexrt_s=statistics.median(lib_s), ratio=statistics.median(a / b for a, b in zip(lib_s, raw_s)))
    out.update(baseline_s=statistics.median(raw_s), pages=pages, baseline_count=n)
    proc.stdin.close()
    proc.wait(10)
    return out


def _pair_arg(a: str) -> tuple[int, int]:
    """``"SIZE"`` or ``"SIZE:PAIRS"``."""
    size, _, pairs = a.partition(":")
    return int(size), int(pairs or 1)


WORKERS = {"legacy": lambda a: legacy(*_pair_arg(a)), "legacy_lib": legacy_lib, "legacy_raw": legacy_raw,
           "count": lambda a: count(*_pair_arg(a))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    os._exit(0)
