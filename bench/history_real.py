"""History paging on the real binary (issue 34, third round).

``python -m bench.history_real pages ITEMS:PAIRS`` — the pinned ``codex app-server`` with the
loopback mock model (run it in a loopback-only network namespace: ``unshare -rn sh -c 'ip link
set lo up && exec "$0" "$@"' .venv/bin/python -m bench.history_real pages 2000:9``):

1. **Record** a thread of ``ITEMS`` items once per run, in a throw-away ``CODEX_HOME`` (a temp
   dir, removed at the end; nothing is kept in the repo): ``ITEMS / 2`` short turns through a
   raw stdlib client (each turn is a ``userMessage`` and the mock's ``agentMessage``: the
   cheapest honest way to a long native thread — one model request per two items, ≈ 50 ms a
   turn on a quiet machine).
2. **``codex.readHistoryPage`` walk** (scope ``items``, page size 100) through ``codexrt
   serve`` vs a raw ``thread/items/list`` loop (``write``, read lines through a 64 KiB buffer,
   msgspec decode), each with its own app-server child of the same binary on the same home and
   thread, alternated pair by pair: raw walk, serve walk of pages *never read* by that serve
   (a serve started for the pair — warmed with ``status`` and a ``codex.countThreadMessages``
   walk, which spawns its child, loads the handlers and has the app-server read the thread, and
   does not touch the page-records cache), then the same walk again (*pages read before*:
   their records come from serve's cache, the pages are still read from the app-server).
3. **``read_thread``** — the library's ``HistoryReader.read_thread`` (``thread/read``, the
   ``thread/turns/list`` walk ascending without items — ``itemsView: "notLoaded"`` — the
   ``thread/items/list`` walk, one projected transcript) vs a raw loop making the same
   requests, both warm, alternated.

Every pair checks pages, entries and messages equal and one record per message (the
transcript: records == messages, complete); a difference is counted in ``mismatches``, which
fails the run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from typing import Any

from bench._common import ROOT, emit, env_with_root, now
from bench.history import _proc_cpu_s, _RawPeer, read_thread_pairs

_MESSAGES = ("userMessage", "agentMessage")


def _record(s: Any, items: int) -> tuple[str, float]:
    """A thread of ``items`` items (``items / 2`` turns) recorded in ``s``'s home; (id, seconds)."""
    from bench.turns import RawClient

    t0 = now()
    rec = RawClient(s)
    try:
        rec.thread_id = rec.request("thread/start", {"cwd": None})["thread"]["id"]
        for i in range((items + 1) // 2):
            rec.turn(f"question {i}: what is in the workspace?", False)
        assert rec.thread_id is not None
        return rec.thread_id, now() - t0
    finally:
        rec.close()


class _RawServer:
    """The baseline: the real ``codex app-server`` driven by ``write`` + lines read through a
    64 KiB buffer + msgspec decode (server requests, which these reads never cause, are
    answered -32601; notifications skipped)."""

    def __init__(self, s: Any) -> None:
        import msgspec

        self.proc = subprocess.Popen([s.binary, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=s.env, cwd=s.cwd, bufsize=65536)
        self.enc, self.dec = msgspec.json.encode, msgspec.json.decode
        self.next_id = 0
        self.call("initialize", {"clientInfo": {"name": "raw", "version": "0"},
                                 "capabilities": {"experimentalApi": True}})
        self._write({"method": "initialized"})

    def _write(self, obj: Any) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(self.enc(obj) + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: Any) -> Any:
        self.next_id += 1
        rid = self.next_id
        self._write({"id": rid, "method": method, "params": params})
        assert self.proc.stdout
        for line in self.proc.stdout:
            msg = self.dec(line)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            if "id" in msg and "method" in msg:
                self._write({"id": msg["id"], "error": {"code": -32601, "message": "not supported"}})
        raise RuntimeError("codex app-server exited")

    walk = _RawPeer.walk  # the same cursor walk and counts over this class's ``call``

    def close(self) -> None:
        from bench.turns import _end

        _end(self.proc, 10)


class _Serve:
    """``codexrt serve`` on the real binary, as a host runs it (``json``-free: msgspec decodes
    every line)."""

    def __init__(self, s: Any) -> None:
        import msgspec

        cmd = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", s.binary, "--idle-timeout", "0",
               "--cwd", str(s.cwd)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=ROOT, env={**env_with_root(), **s.env}, bufsize=65536)
        self.enc, self.dec = msgspec.json.encode, msgspec.json.decode
        self.next_id = 0

    def command(self, name: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        rid = f"h{self.next_id}"
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(self.enc({"id": rid, "command": name, "params": params}) + b"\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            msg = self.dec(line)
            if msg.get("type") == "response" and msg.get("id") == rid:
                if not msg["ok"]:
                    raise RuntimeError(f"{name} failed: {msg['error']}")
                return msg["result"]
        raise RuntimeError("codexrt serve exited")

    def walk(self, tid: str, limit: int) -> tuple[int, int, int, int]:
        """(pages, entries, messages, records) of one ``codex.readHistoryPage`` walk."""
        cursor, pages, entries, messages, records = None, 0, 0, 0, 0
        while True:
            res = self.command("codex.readHistoryPage", {"channelId": "h", "threadId": tid, "scope": "items",
                                                         "limit": limit, **({"cursor": cursor} if cursor else {})})
            pages += 1
            entries += len(res["data"])
            messages += sum(e["item"]["type"] in _MESSAGES for e in res["data"])
            records += len(res["records"])
            cursor = res.get("nextCursor")
            if cursor is None:
                return pages, entries, messages, records

    def close(self) -> None:
        from bench.turns import _end

        _end(self.proc, 60)


def pages(items: int, pairs: int = 1, limit: int = 100) -> dict[str, Any]:
    """Both rows of the module doc on one recorded thread (one recording per run)."""
    from bench.turns import Setup

    s = Setup()
    out: dict[str, Any] = {"items": items, "limit": limit, "pairs": pairs}
    try:
        tid, out["record_s"] = _record(s, items)
        raw = _RawServer(s)
        try:
            out["pages"] = _pages_rows(s, raw, tid, pairs, limit)
            out["read_thread"] = _read_thread_rows(s, raw, tid, pairs, limit)
        finally:
            raw.close()
    finally:
        s.close()
    out["mismatches"] = out["pages"].get("mismatches", 0) + out["read_thread"].get("mismatches", 0)
    return out


def _pages_rows(s: Any, raw: _RawServer, tid: str, pairs: int, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    raw_s: list[float] = []
    cold_s: list[float] = []
    warm_s: list[float] = []
    serve_cpu: list[float] = []
    raw.walk("thread/items/list", {"threadId": tid, "limit": limit})  # warm: the server has read the thread
    for k in range(pairs):
        serve = _Serve(s)
        try:
            serve.command("status", {})
            count = serve.command("codex.countThreadMessages", {"channelId": "h", "threadId": tid})
            # one page at another size (its own cache key): the projection's first-use costs
            # (imports, regexes, per-type getters) are paid here, not by the timed walk
            serve.command("codex.readHistoryPage", {"channelId": "h", "threadId": tid, "scope": "items", "limit": 7})
            t0 = now()
            got_raw = raw.walk("thread/items/list", {"threadId": tid, "limit": limit})
            raw_s.append(now() - t0)
            c0 = _proc_cpu_s(serve.proc.pid)
            t0 = now()
            cold = serve.walk(tid, limit)  # pages this serve never read: every page projected
            cold_s.append(now() - t0)
            serve_cpu.append(_proc_cpu_s(serve.proc.pid) - c0)
            t0 = now()
            warm = serve.walk(tid, limit)  # the same pages again: records from serve's cache
            warm_s.append(now() - t0)
        finally:
            serve.close()
        for g in (cold, warm):
            if g[:3] != got_raw or g[3] != g[2] or count.get("messageCount") != got_raw[2]:
                out["mismatches"] = out.get("mismatches", 0) + 1
        out.update(pages=got_raw[0], entries=got_raw[1], messages=got_raw[2], records=cold[3])
    out.update(cold_s=statistics.median(cold_s), baseline_s=statistics.median(raw_s),
               cold_ratio=statistics.median(a / b for a, b in zip(cold_s, raw_s)),
               codexrt_s=statistics.median(warm_s), ratio=statistics.median(a / b for a, b in zip(warm_s, raw_s)),
               serve_cpu_s=statistics.median(serve_cpu), raw_walks_ms=[round(x * 1000, 1) for x in raw_s],
               cold_walks_ms=[round(x * 1000, 1) for x in cold_s], warm_walks_ms=[round(x * 1000, 1) for x in warm_s])
    return out


def _read_thread_rows(s: Any, raw: _RawServer, tid: str, pairs: int, limit: int) -> dict[str, Any]:
    from codexrt import RuntimeConfig

    def raw_read() -> tuple[int, int]:
        raw.call("thread/read", {"threadId": tid})
        turns = raw.walk("thread/turns/list", {"threadId": tid, "sortDirection": "asc", "limit": limit,
                                                  "itemsView": "notLoaded"})
        entries = raw.walk("thread/items/list", {"threadId": tid, "limit": limit})
        return turns[0] + entries[0], entries[2]

    return read_thread_pairs(RuntimeConfig(codex_bin=s.binary, env=s.env, cwd=str(s.cwd)), tid, raw_read, pairs, limit)


def _pair_arg(a: str) -> tuple[int, int]:
    size, _, n = a.partition(":")
    return int(size), int(n or 1)


WORKERS = {"pages": lambda a: pages(*_pair_arg(a))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    sys.stdout.flush()
    os._exit(0)
