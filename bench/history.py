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


def legacy(mb: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="codexrt-legacy-"))
    try:
        path = tmp / "rollout-2026-11-30T00-00-00-01a22d24-784b-70a1-b4d2-eee60df61981.jsonl"
        size = generate(path, mb)
        lib = _sub("legacy_lib", str(path))
        raw = _sub("legacy_raw", str(path))
        mbs = size / 1024 / 1024
        return {"mb": mbs, "records": lib["records"], "codexrt_mb_s": mbs / lib["seconds"], "codexrt_rss_mb": lib["rss_mb"],
                "baseline_mb_s": mbs / raw["seconds"], "baseline_rss_mb": raw["rss_mb"], "lines": raw["lines"]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def count(items: int) -> dict[str, Any]:
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

    async def lib() -> None:
        async with open_runtime(RuntimeConfig(transports=[factory])) as rt:
            conn = await rt.ensure_started()

            async def provider() -> Any:
                return conn

            async with MessageCounter.open() as counter:
                t0 = now()
                res = await counter.count(tid, provider)
                out["codexrt_s"] = now() - t0
                out["count"] = res.count

    trio.run(lib)
    # raw paging loop
    proc = subprocess.Popen(peer, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, env=env_with_root())
    assert proc.stdin and proc.stdout
    enc, dec = msgspec.json.encode, msgspec.json.decode

    def call(i: int, method: str, params: Any) -> Any:
        proc.stdin.write(enc({"id": i, "method": method, "params": params}) + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        for line in proc.stdout:  # type: ignore[union-attr]
            msg = dec(line)
            if msg.get("id") == i:
                return msg["result"]
        raise RuntimeError("peer ended")

    call(0, "initialize", {"clientInfo": {"name": "raw", "version": "0"}, "capabilities": {"experimentalApi": True}})
    t0 = now()
    cursor, pages, n, i = None, 0, 0, 1
    while True:
        res = call(i, "thread/items/list", {"threadId": tid, "limit": 100, **({"cursor": cursor} if cursor else {})})
        i += 1
        pages += 1
        n += sum(1 for e in res["data"] if e["item"]["type"] in ("userMessage", "agentMessage"))
        cursor = res["nextCursor"]
        if cursor is None:
            break
    out.update(baseline_s=now() - t0, pages=pages, baseline_count=n)
    proc.stdin.close()
    proc.wait(10)
    return out


WORKERS = {"legacy": lambda a: legacy(int(a)), "legacy_lib": legacy_lib, "legacy_raw": legacy_raw,
           "count": lambda a: count(int(a))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    os._exit(0)
