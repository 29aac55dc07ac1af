"""Bounds benchmarks (issue 35): costs that must stay linear under a chatty or hostile peer.

* ``burst N`` — N notifications alternating ``thread/started`` (kept) and
  ``thread/status/changed`` (droppable chatter) put into one ``EventStream`` nobody reads (a
  consumer that lags the whole burst), then drained. Before issue 35 every drop walked the
  queue past every kept event (quadratic: 3.5 / 13 / 49 s for 20k / 40k / 80k through the
  runtime). The row runs N/4 and N in the same interpreter, alternating, and reports the time
  ratio (linear is 4×; target ≤ 6×). It measures the buffer the reader feeds, in process: no
  pipe, no decoding — those are linear and measured by the stream rows.

* ``redact PAIRS`` — an error reply of ``codexrt serve`` (``ConfigError`` made, then
  ``_codec.error_reply``: every string redacted on its way out) after 1 and after 300
  registered API keys (random, no shared prefix; each held by its own owner, as 300 channels
  with their own ``configureLaunch`` would). Before issue 35 every key and its variants were
  one alternative of one regex (work per character grew with the key count: 0.7 → 21 ms in
  the daemon). Target ≤ 5×. The one-off rebuild of the matcher after the set changed is
  reported beside it.

* ``fuzz_rss N`` — one ``codexrt serve --access-mode inactive`` child takes N hostile lines
  (deterministic: a new managed ``configureLaunch`` with a fresh 40-character key and header
  value every 3rd line — the registry that only grew before issue 35 — plus malformed JSON,
  invalid UTF-8, lines nested 100 deep, ids of 2 KB–64 KB, unknown interactions, ``status``);
  the host reads every reply. Serve's RSS (``VmRSS``) after the first 5,000 lines and at the
  end; target: within 20 MiB.

Prints one JSON object (see ``bench/_common.py``).
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
from typing import Any

from bench._common import emit, now, proc_status_mb


def _burst_once(n: int) -> tuple[float, int]:
    from codexrt._runtime._events import CodexEvent, EventStream

    started = [CodexEvent("nativeNotification", {"method": "thread/started", "params": {"thread": {"id": f"t{i}"}}})
               for i in range(0, n, 2)]
    status = [CodexEvent("nativeNotification", {"method": "thread/status/changed", "params": {"threadId": f"t{i}"}})
              for i in range(1, n, 2)]
    s = EventStream(max_droppable=1000)
    # The input is built before the clock starts; frozen, the collector does not rescan it on
    # every collection (that is the interpreter's cost of holding 80,000 objects, not the buffer's).
    gc.collect()
    gc.freeze()
    t0 = now()
    for a, b in zip(started, status):
        s.put(a)
        s.put(b)
    out = 0
    while s.get_nowait() is not None:
        out += 1
    secs = now() - t0
    gc.unfreeze()
    return secs, out


def burst(n: int, pairs: int = 5) -> dict[str, Any]:
    small, large = n // 4, n
    _burst_once(2000)  # warm: imports, attrs caches
    ts, tl = [], []
    kept_ok = True
    for _ in range(pairs):
        s, out_s = _burst_once(small)
        big, out_l = _burst_once(large)
        ts.append(s)
        tl.append(big)
        # every thread/started, 1,000 kept chatter, one or more eventsDropped markers
        kept_ok &= out_s >= small // 2 + 1000 and out_l >= large // 2 + 1000
    ms, ml = statistics.median(ts), statistics.median(tl)
    return {"small": small, "large": large, "small_s": ms, "large_s": ml, "ratio": ml / ms, "kept_ok": kept_ok,
            "pairs": pairs}


def _reply_cost(n_keys: int, rounds: int) -> tuple[float, float]:
    import secrets as _secrets

    from codexrt._sansio._errors import ConfigError
    from codexrt._sansio._redact import hold_process_secrets, process_redactor, release_process_secrets
    from codexrt._serve._codec import error_reply

    owners = [f"bench.owner.{i}" for i in range(n_keys)]
    for o in owners:
        hold_process_secrets(o, [_secrets.token_urlsafe(36)])
    message = ("provider rejected the request: KeyError: 'path' while reading config.toml at "
               "/home/user/.codex/config.toml line 12 (model_provider = \"corp\"); see the logs")
    details = {"provider": "corp", "envKey": "CORP_API_KEY", "baseUrl": "https://llm.example.com/v1",
               "stderrTail": ["warning: retrying request 1 of 3", "error: 401 Unauthorized"] * 4}
    t0 = now()
    process_redactor()("warm")  # builds the matcher for this key set
    rebuild = now() - t0
    t0 = now()
    for i in range(rounds):
        error_reply(i, ConfigError(message, details=details))
    per = (now() - t0) / rounds
    for o in owners:
        release_process_secrets(o)
    return per, rebuild


def redact(pairs: int) -> dict[str, Any]:
    _reply_cost(1, 200)  # warm
    one, many, rebuilds = [], [], []
    for _ in range(pairs):
        one.append(_reply_cost(1, 2000)[0])
        per, rebuild = _reply_cost(300, 2000)
        many.append(per)
        rebuilds.append(rebuild)
    m1, m300 = statistics.median(one), statistics.median(many)
    return {"one_ms": m1 * 1000, "many_ms": m300 * 1000, "ratio": m300 / m1,
            "rebuild_ms": statistics.median(rebuilds) * 1000, "pairs": pairs}


def _fuzz_line(i: int) -> bytes:
    import json
    import random

    rnd = random.Random(i)
    kind = i % 9
    if kind in (0, 3, 6):
        key = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40))
        return json.dumps({"id": i, "command": "codex.configureLaunch", "params": {
            "accessMode": "managed", "apiKey": key, "provider": {
                "id": "p", "baseUrl": "http://127.0.0.1:9", "envKey": "BENCH_KEY",
                "headers": {"X-Bench": "hv-" + key[::-1]}}}}).encode()
    if kind == 1:
        return b'{"id": %d, "command": "status", "params": {}}' % i
    if kind == 2:
        return b'{"id": %d, "command": "codex.compact", "params": {"channelId": "c", "threadId": "%s"}}' % (
            i, b"t" * rnd.randrange(2048, 65536))
    if kind == 4:
        return b'{"id": %d, "command": "codex.respondInteraction", "params": {"interactionKey": "k%d", ' \
               b'"dialogToken": "d", "result": {"a": "\xff\xfe"}}}' % (i, i)
    if kind == 5:
        return b'{"id": %d, "command": "status", "params": {"x": ' % i + b"[" * 100 + b"]" * 100 + b"}}"
    if kind == 7:
        return b'{"id": %d, "command": "codex.respondInteraction", "params": {"interactionKey": "key-%d", ' \
               b'"dialogToken": "tok", "result": {}}}' % (i, i)
    return b"not json at all %d {{{" % i


def fuzz_rss(n: int) -> dict[str, Any]:
    import subprocess
    import threading

    from bench._common import ROOT, env_with_root

    proc = subprocess.Popen([sys.executable, "-m", "codexrt", "serve", "--access-mode", "inactive"], cwd=ROOT,
                            env=env_with_root(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    replies = {"n": 0}
    marks: dict[int, threading.Event] = {}
    warm = min(5000, n // 2)
    marks[warm] = threading.Event()
    marks[n] = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for _line in proc.stdout:
            replies["n"] += 1
            ev = marks.get(replies["n"])
            if ev is not None:
                ev.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t0 = now()
    rss: dict[str, float | None] = {}
    for i in range(1, n + 1):
        proc.stdin.write(_fuzz_line(i) + b"\n")
        if i == warm:
            proc.stdin.flush()
            marks[warm].wait(600)
            rss["start"] = proc_status_mb(proc.pid, "VmRSS")
    proc.stdin.flush()
    complete = marks[n].wait(1200)
    rss["end"] = proc_status_mb(proc.pid, "VmRSS")
    secs = now() - t0
    proc.stdin.close()
    code = proc.wait(60)
    start, end = rss.get("start"), rss.get("end")
    return {"lines": n, "replies": replies["n"], "complete": complete, "rss_start_mb": start, "rss_end_mb": end,
            "growth_mb": (end - start) if start is not None and end is not None else None, "seconds": secs,
            "exit": code}


WORKERS = {"burst": lambda a: burst(*(int(x) for x in a.split(":"))), "redact": lambda a: redact(int(a)),
           "fuzz_rss": lambda a: fuzz_rss(int(a))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    os._exit(0)
