"""Bounds benchmarks (issue 35): costs that must stay linear under a chatty or hostile peer.

* ``burst N`` — N notifications alternating ``thread/started`` (kept) and
  ``thread/status/changed`` (droppable chatter) put into one ``EventStream`` nobody reads (a
  consumer that lags the whole burst), then drained. Before issue 35 every drop walked the
  queue past every kept event (quadratic: 3.5 / 13 / 49 s for 20k / 40k / 80k through the
  runtime). The row runs N/4 and N in the same interpreter, alternating, and reports the time
  ratio (linear is 4×; target ≤ 6×). It measures the buffer the reader feeds, in process: no
  pipe, no decoding — those are linear and measured by the stream rows.

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


WORKERS = {"burst": lambda a: burst(*(int(x) for x in a.split(":")))}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]](sys.argv[2]))
    os._exit(0)
