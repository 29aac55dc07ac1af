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

Prints one JSON object (see ``bench/_common.py``).
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Any

from bench._common import emit, now


def _burst_once(n: int) -> tuple[float, int]:
    from codexrt._runtime._events import CodexEvent, EventStream

    started = [CodexEvent("nativeNotification", {"method": "thread/started", "params": {"thread": {"id": f"t{i}"}}})
               for i in range(0, n, 2)]
    status = [CodexEvent("nativeNotification", {"method": "thread/status/changed", "params": {"threadId": f"t{i}"}})
              for i in range(1, n, 2)]
    s = EventStream(max_droppable=1000)
    t0 = now()
    for a, b in zip(started, status):
        s.put(a)
        s.put(b)
    out = 0
    while s.get_nowait() is not None:
        out += 1
    secs = now() - t0
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


WORKERS = {"burst": lambda a: burst(*(int(x) for x in a.split(":"))), "redact": lambda a: redact(int(a))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    os._exit(0)
