"""Run every benchmark and print one table: ``python -m bench`` (or ``python bench/run.py``).

Each row measures codexrt **and its baseline in the same run**, alternating them
``--repeat`` times (the machines this runs on are shared and noisy; absolute times mean
little), and reports the medians and their ratio. Every benchmark runs in a fresh interpreter
(``python -m bench.stream NAME N`` / ``python -m bench.startup NAME``) so peak RSS is its own.

Options: ``--quick`` (smaller N, one repeat: a smoke run), ``--only SUBSTRING`` (rows whose
name contains it), ``--no-real`` (skip the rows that need the pinned real codex binary),
``--json PATH`` (also write the raw results).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # run by path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, env_with_root  # noqa: E402


def worker(module: str, *args: str, timeout: float = 600) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env_with_root(),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"{module} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def paired(a: Callable[[], dict[str, Any]], b: Callable[[], dict[str, Any]], repeat: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    ra, rb = [], []
    for _ in range(repeat):
        ra.append(a())
        rb.append(b())
    return ra, rb


def med(rows: list[dict[str, Any]], key: str) -> float:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str, str]] = []
        self.raw: dict[str, Any] = {}
        self.failed: list[str] = []

    def add(self, name: str, codexrt: str, baseline: str, ratio: str, target: str, notes: str) -> None:
        self.rows.append((name, codexrt, baseline, ratio, target, notes))
        if "MISMATCH" in notes:  # a row that lost, duplicated or reordered text (or records, or messages) fails the run
            self.failed.append(name)
        print(f"  {name}: {codexrt} | {baseline} | {ratio} | {target} | {notes}", file=sys.stderr, flush=True)

    def render(self) -> str:
        head = ("benchmark", "codexrt", "baseline", "ratio", "target", "notes")
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            out.append("| " + " | ".join(r) + " |")
        return "\n".join(out)


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024} MiB"
    except OSError:
        pass
    return (f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, {mem} RAM, "
            f"Python {platform.python_version()}")


def _pinned() -> str:
    """The pinned real codex version (``.ci/codex-version``), which the real rows run."""
    from peer_fixtures.codex_bin import pinned_version

    return pinned_version()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small N, one repeat (smoke run)")
    ap.add_argument("--repeat", type=int, default=None, help="pairs per row (default 5; --quick: 1)")
    ap.add_argument("--only", default=None, help="run rows whose name contains this")
    ap.add_argument("--no-real", action="store_true", help="skip rows needing the real codex binary")
    ap.add_argument("--json", default=None, help="write raw results here")
    ns = ap.parse_args(argv)
    repeat = ns.repeat or (1 if ns.quick else 5)
    n = 20_000 if ns.quick else 200_000
    t = Table()

    def want(name: str) -> bool:
        return ns.only is None or ns.only in name

    def stream(name: str) -> dict[str, Any]:
        return worker("bench.stream", name, str(n))

    def optional(label: str, module: str, *args: str) -> dict[str, Any] | None:
        """A long worker (up to an hour) whose failure (no real binary, say) is a skipped row."""
        try:
            return worker(module, *args, timeout=3600)
        except RuntimeError as exc:
            t.add(label, "skipped", "", "", "", str(exc).splitlines()[0][:120])
            return None

    print(f"machine: {machine()}", file=sys.stderr)
    def rounds(names: list[str], count: int) -> dict[str, list[dict[str, Any]]]:
        """``count`` rounds of the peer's ceiling, the naive loop (default 8 KiB buffer), the
        buffered naive loop (``bufsize=65536``, the baseline of every target) and each of
        ``names``, one after another in every round (so drift hits all of them alike)."""
        out: dict[str, list[dict[str, Any]]] = {k: [] for k in ("ceiling", "raw_msgspec", "raw_msgspec_buf", *names)}
        for _ in range(count):
            for k in out:
                out[k].append(stream(k))
        return out

    def per_round(rows: dict[str, list[dict[str, Any]]], a: str, b: str) -> float:
        """Median over rounds of ``rate(a) / rate(b)`` measured in the same round."""
        return statistics.median(x["rate"] / y["rate"] for x, y in zip(rows[a], rows[b]))

    def exact(rows: list[dict[str, Any]]) -> str:
        return "text exact" if all(r["ok"] for r in rows) else "MISMATCH (a character was lost)"

    def cpu_note(rows: dict[str, list[dict[str, Any]]], key: str) -> str:
        """The client's own CPU time per delta (process time while the turn streamed): on a
        shared machine a steadier measure of the client's cost than the wall-clock rate."""
        return (f"client CPU {med(rows[key], 'cpu_s') / n * 1e6:.2f} µs/delta "
                f"(buffered naive {med(rows['raw_msgspec_buf'], 'cpu_s') / n * 1e6:.2f})")

    def ceiling_note(rows: dict[str, list[dict[str, Any]]]) -> str:
        return (f"peer ceiling (os.read + count) {med(rows['ceiling'], 'rate'):,.0f}/s; "
                f"buffered naive = {per_round(rows, 'raw_msgspec_buf', 'ceiling'):.2f}× ceiling, "
                f"8 KiB naive {med(rows['raw_msgspec'], 'rate'):,.0f}/s = "
                f"{per_round(rows, 'raw_msgspec', 'ceiling'):.2f}× ceiling")

    def unbuf_note(rows: dict[str, list[dict[str, Any]]], key: str) -> str:
        return f"{per_round(rows, key, 'raw_msgspec'):.2f}× the 8 KiB naive loop"

    if want("stream"):
        g = rounds(["lib", "blocking", "aio"], repeat)
        t.raw["stream"] = g
        naive = f"buffered naive loop {med(g['raw_msgspec_buf'], 'rate'):,.0f}/s"
        t.add(f"1. stream, {n:,} deltas: library API (open_runtime → send → op.events()), warm thread",
              f"{med(g['lib'], 'rate'):,.0f}/s, peak RSS {med(g['lib'], 'rss_mb'):.0f} MB", naive,
              f"{per_round(g, 'lib', 'raw_msgspec_buf'):.2f}×", "≥ 1.0× buffered naive, RSS ≤ 60 MB",
              f"{exact(g['lib'] + g['raw_msgspec'] + g['raw_msgspec_buf'] + g['ceiling'])}; {unbuf_note(g, 'lib')}; "
              f"{ceiling_note(g)}; {cpu_note(g, 'lib')}; {med(g['lib'], 'events'):.0f} consumer events")
        for key, label in (("blocking", "blocking facade `for ev in rt.stream(...)`"),
                           ("aio", "codexrt.aio under asyncio.run")):
            t.add(f"   {label}", f"{med(g[key], 'rate'):,.0f}/s, peak RSS {med(g[key], 'rss_mb'):.0f} MB", naive,
                  f"{per_round(g, key, 'raw_msgspec_buf'):.2f}× buffered naive, {per_round(g, key, 'lib'):.2f}× library",
                  "≥ 0.8× library", f"{exact(g[key])}; {cpu_note(g, key)}; {med(g[key], 'events'):.0f} consumer events")
        if "raw_json" not in g:
            js = [stream("raw_json") for _ in range(1 if ns.quick else 2)]
            t.raw["stream"]["raw_json"] = js
            t.add("   stdlib json loop (reference)", "", f"{med(js, 'rate'):,.0f}/s",
                  f"library {med(g['lib'], 'rate') / med(js, 'rate'):.2f}×", "", exact(js))
    if want("serve"):
        g = rounds(["serve"], repeat)
        t.raw["serve"] = g
        t.add(f"2. through `codexrt serve`, {n:,} deltas, warm, host decodes every line",
              f"{med(g['serve'], 'rate'):,.0f}/s, serve peak RSS {med(g['serve'], 'rss_mb'):.0f} MB",
              f"buffered naive loop {med(g['raw_msgspec_buf'], 'rate'):,.0f}/s",
              f"{per_round(g, 'serve', 'raw_msgspec_buf'):.2f}×", "≥ 0.8× buffered naive",
              f"{exact(g['serve'] + g['raw_msgspec_buf'])}; {unbuf_note(g, 'serve')}; "
              f"{med(g['serve'], 'lines'):.0f} stdout lines; {ceiling_note(g)}; serve process CPU "
              f"{med(g['serve'], 'serve_cpu_s') / n * 1e6:.2f} µs/delta, host "
              f"{med(g['serve'], 'host_cpu_s') / n * 1e6:.2f} (buffered naive "
              f"{med(g['raw_msgspec_buf'], 'cpu_s') / n * 1e6:.2f})")
        m = max(1, repeat // 2)
        g8 = rounds(["serve8"], m)
        t.raw["serve8"] = g8
        s8 = g8["serve8"]
        t.add(f"   8 channels at once through one serve, {n:,} deltas each",
              f"aggregate {med(s8, 'rate'):,.0f}/s, serve peak RSS {med(s8, 'rss_mb'):.0f} MB",
              f"buffered naive loop (one peer) {med(g8['raw_msgspec_buf'], 'rate'):,.0f}/s",
              f"{per_round(g8, 'serve8', 'raw_msgspec_buf'):.2f}× aggregate; fastest/slowest channel "
              f"{med(s8, 'fairness'):.2f}×", "fairness ≤ 2×",
              f"{exact(s8)}; channel rates {med(s8, 'min_rate'):,.0f}–{med(s8, 'max_rate'):,.0f}/s")
    if want("slow"):
        fast, slow = paired(lambda: stream("lib_chatter"), lambda: stream("lib_slow"), max(1, repeat // 2))
        ok = all(r["ok"] for r in slow + fast)
        t.raw["slow"] = {"fast": fast, "slow": slow}
        t.add("3. slow consumer (2 ms sleep per event), chatter every 50 deltas",
              f"peak RSS {med(slow, 'rss_mb'):.0f} MB, max queued {med(slow, 'max_queued'):.0f}",
              f"fast consumer {med(fast, 'rss_mb'):.0f} MB", f"{med(slow, 'rss_mb') / med(fast, 'rss_mb'):.2f}× RSS",
              "bounded, lossless text", f"text {'exact' if ok else 'MISMATCH'}; "
              f"{med(slow, 'dropped_chatter'):.0f} status events dropped (reported)")
        intr = [stream("lib_slow_interrupt") for _ in range(max(1, repeat // 2))]
        t.raw["slow"]["interrupt"] = intr
        t.add("   interrupt during the flood, slow consumer", f"ack after {med(intr, 'interrupt_ack_ms'):.1f} ms",
              "", "", "prompt", f"status {intr[0]['status']}; streamed text == final text: {all(r['ok'] for r in intr)}")
    if want("latency"):
        for mode in ("flood", "idle"):
            raw, lib = paired(lambda: stream(f"raw_latency_{mode}"), lambda: stream(f"lib_latency_{mode}"), max(1, repeat // 2))
            t.raw[f"latency_{mode}"] = {"raw": raw, "lib": lib}
            t.add(f"4. latency pipe→consumer, {mode}", f"p50 {med(lib, 'p50_us'):,.0f} µs, p99 {med(lib, 'p99_us'):,.0f} µs",
                  f"raw loop p50 {med(raw, 'p50_us'):,.0f} µs, p99 {med(raw, 'p99_us'):,.0f} µs",
                  f"{med(lib, 'p50_us') / med(raw, 'p50_us'):.2f}× p50", "", f"{med(lib, 'probes'):.0f} probes")
    if want("history"):
        pairs = 1 if ns.quick else 5
        r = worker("bench.history", "legacy", f"{20 if ns.quick else 200}:{pairs}", timeout=1800)
        t.raw["history_legacy"] = r
        t.add(f"5. legacy rollout parse, {r['mb']:.0f} MB", f"{r['codexrt_mb_s']:.0f} MB/s ({r['records']:,} records), "
              f"peak RSS {r['codexrt_rss_mb']:.0f} MB", f"raw msgspec line loop {r['baseline_mb_s']:.0f} MB/s, "
              f"peak RSS {r['baseline_rss_mb']:.0f} MB", f"{r['ratio']:.2f}×", "≥ 0.8× raw, RSS bounded",
              f"{'records == raw lines' if r['records_match'] else 'MISMATCH (records != raw lines)'}; "
              f"median of {pairs} alternated pairs")
        # one turn of N and 4N code-mode cells, each replaced by its commands / each kept whole
        for mode, key, what, done, right in (
                ("wrappers", "history_wrappers", "code-mode wrappers", "all_replaced",
                 "every wrapper replaced; each polls a direct command"),
                ("kept", "history_kept_cells", "kept cells in one turn", "all_kept",
                 "every cell kept whole; each beside its command's item, another cell's command of the same text")):
            w = worker("bench.history", mode, "200" if ns.quick else "500")
            t.raw[key] = w
            t.add(f"   legacy {what}, {w['small']['wrappers']:,} vs {w['large']['wrappers']:,}",
                  f"{w['large']['per_wrapper_ms']:.2f} ms per cell at {w['large']['wrappers']:,}",
                  f"{w['small']['per_wrapper_ms']:.2f} ms per cell at {w['small']['wrappers']:,}",
                  f"{w['ratio']:.2f}× per cell", "≤ 1.5× (linear)",
                  right if w[done] else f"MISMATCH (not {right.split(';')[0]})")
        li = worker("bench.history", "listing", "1250" if ns.quick else "5000")
        t.raw["history_listing"] = li
        t.add(f"   legacy thread list (50 rows), {li['small']['files']:,} vs {li['large']['files']:,} rollouts",
              f"{li['large']['seconds'] * 1000:.0f} ms at {li['large']['files']:,} "
              f"({li['large']['per_file_us']:.1f} µs per file)",
              f"raw walk+lstat {li['large']['raw_seconds'] * 1000:.0f} ms; {li['small']['per_file_us']:.1f} µs per file "
              f"at {li['small']['files']:,}", f"{li['ratio']:.2f}× per file", "≤ 1.5× (linear)",
              f"{'50 newest rows right' if li['rows_right'] else 'MISMATCH (wrong rows)'}; "
              f"{li['raw_ratio']:.1f}× the raw scan")
        # A count takes ~0.1 s and its wall time follows the peer's scheduling: many more pairs than
        # the legacy row's, so the median is the client's cost, not one unlucky wake-up.
        count_pairs = 3 if ns.quick else 15
        c = worker("bench.history", "count", f"{2000 if ns.quick else 20000}:{count_pairs}")
        t.raw["history_count"] = c
        if c.get("available"):
            t.add(f"   count messages, native thread of {c['items']:,} items", f"{c['codexrt_s'] * 1000:.0f} ms "
                  f"({c['count']:,} messages, {c['pages']} pages)", f"raw paging loop {c['baseline_s'] * 1000:.0f} ms",
                  f"{c['ratio']:.2f}× time", "≤ 1.5× raw",
                  f"{'counts equal in every pair' if not c.get('mismatches') else 'MISMATCH (counts differ)'}; "
                  f"fake peer over a pipe; "
                  f"median of {count_pairs} alternated pairs; client CPU {c['codexrt_cpu_s'] * 1000:.0f} ms vs the raw "
                  f"loop's {c['baseline_cpu_s'] * 1000:.0f} ms ({c['cpu_ratio']:.2f}×)")
        else:
            t.add("   count messages, native thread", "n/a", "", "", "", c.get("reason", ""))
        # Issue 34: paging a thread's history through serve and through the library.
        hist_items, page_pairs = (2000, 3) if ns.quick else (2000, 15)
        for kind, label, base, ok_note, what in (
                ("pages", "`codex.readHistoryPage` walk through serve", "raw `thread/items/list` loop",
                 "pages, entries, messages equal; one record per message",
                 "host decodes every line; serve reads a walk ahead from its 2nd page (two pages at machine pace; from its 1st for a host that walked a thread at machine pace before, as this one), the raw loop does not"),
                ("read_thread", "library `read_thread`", "raw loop, same requests", "records == messages, complete",
                 "thread/read + turns walk + items walk on both sides")):
            r = worker("bench.history", kind, f"{hist_items}:{page_pairs}")
            t.raw[f"history_{kind}"] = r
            cpu = f"; serve CPU {r['serve_cpu_s'] * 1000:.1f} ms per walk" if "serve_cpu_s" in r else ""
            if "cold_s" in r:  # the walk above reuses serve's page cache; this one projects every page
                cpu += (f"; pages never read before (every page projected) {r['cold_s'] * 1000:.0f} ms, "
                        f"{r['cold_ratio']:.2f}× raw, serve CPU {r['cold_cpu_s'] * 1000:.1f} ms")
            t.add(f"   {label}, {r['items']:,} items, page size {r['limit']}",
                  f"{r['codexrt_s'] * 1000:.0f} ms ({r['pages']} pages, {r['records']:,} records)",
                  f"{base} {r['baseline_s'] * 1000:.0f} ms", f"{r['ratio']:.2f}× time", "≤ 1.5× raw",
                  f"{ok_note if not r.get('mismatches') else 'MISMATCH (pages, counts or records differ)'}; "
                  f"median of {page_pairs} alternated pairs{cpu}; {what}")
        if not ns.no_real:
            # The same walks on the pinned real binary (loopback mock model): a thread of
            # ``real_items`` items recorded once per run in a throw-away CODEX_HOME.
            real_items = 400 if ns.quick else 2000
            label = f"real codex {_pinned()}, {real_items:,} items, page size 100"
            rr = optional(f"   history paging, {label}", "bench.history_real", "pages", f"{real_items}:{page_pairs}")
            if rr is not None:
                t.raw["history_real"] = rr
                bad = "MISMATCH (pages, counts or records differ)"
                p, q = rr["pages"], rr["read_thread"]
                t.add(f"   `codex.readHistoryPage` walk through serve, {label}, pages never read before",
                      f"{p['cold_s'] * 1000:.0f} ms ({p['pages']} pages, {p['records']:,} records)",
                      f"raw `thread/items/list` loop {p['baseline_s'] * 1000:.0f} ms", f"{p['cold_ratio']:.2f}× time",
                      "≤ 1.5× raw", f"{'pages, entries, messages equal; one record per message' if not p.get('mismatches') else bad}; "
                      f"median of {page_pairs} alternated pairs; a fresh serve per pair; serve CPU "
                      f"{p['serve_cpu_s'] * 1000:.1f} ms per walk; serve reads ahead from the 2nd page (two pages at machine pace; the pair's second walk from its 1st), "
                      f"the raw loop does not; thread recorded in {rr['record_s']:.0f} s")
                t.add("   the same walk, pages read before (serve's records cache)",
                      f"{p['codexrt_s'] * 1000:.0f} ms", f"raw loop {p['baseline_s'] * 1000:.0f} ms",
                      f"{p['ratio']:.2f}× time", "≤ 1.5× raw", "pages still read from the app-server every time")
                t.add(f"   library `read_thread`, {label}",
                      f"{q['codexrt_s'] * 1000:.0f} ms ({q['pages']} pages, {q['records']:,} records)",
                      f"raw loop, same requests {q['baseline_s'] * 1000:.0f} ms", f"{q['ratio']:.2f}× time", "≤ 1.5× raw",
                      f"{'records == messages, complete' if not q.get('mismatches') else bad}; "
                      f"median of {page_pairs} alternated pairs")
    if want("startup"):
        r = worker("bench.startup", "serve_first")
        t.raw["startup_serve_first"] = r
        t.add("6. `codexrt serve` spawned → first reply to `status`", f"{r['codexrt_s'] * 1000:.1f} ms",
              f"`python -c \"import trio, msgspec\"` {r['deps_s'] * 1000:.1f} ms", f"{r['ratio']:.2f}×",
              "≤ 1.3× import trio, msgspec",
              f"median of {r['pairs']} alternated pairs (ratio: median of per-pair ratios); bytecode cached; "
              f"bare interpreter {r['baseline_s'] * 1000:.0f} ms")
        for name, label in (("import", "`import codexrt`"), ("help", "`codexrt --help`"),
                            ("version", "`codexrt --version`"), ("discovery", "discovery over 50 candidates")):
            r = worker("bench.startup", name)
            t.raw[f"startup_{name}"] = r
            t.add(f"6. {label}", f"{r['codexrt_s'] * 1000:.1f} ms", f"{r['baseline_s'] * 1000:.1f} ms",
                  f"{r['codexrt_s'] / r['baseline_s']:.2f}×", "", {
                      "import": f"baseline: import trio, msgspec, attrs; bare interpreter {r.get('bare_s', 0) * 1000:.0f} ms",
                      "help": f"baseline: python -c pass; import trio, msgspec {r.get('deps_s', 0) * 1000:.0f} ms",
                      "version": f"baseline: python -c pass; import trio, msgspec {r.get('deps_s', 0) * 1000:.0f} ms",
                      "discovery": "baseline: os.access over the same 50 paths"}[name])
        if not ns.no_real:
            try:
                r = worker("bench.startup", "ready")
                t.raw["startup_ready"] = r
                t.add(f"6. spawn → READY, real codex {_pinned()}", f"{r['codexrt_s'] * 1000:.0f} ms",
                      f"raw handshake script {r['baseline_s'] * 1000:.0f} ms", f"{r['codexrt_s'] / r['baseline_s']:.2f}×",
                      "", "median of 3")
                r = worker("bench.startup", "real_turn")
                t.raw["real_turn"] = r
                t.add("   real server (issue 4), medians of 3", f"READY {r['ready_s'] * 1000:.0f} ms, first delta "
                      f"{r['first_delta_s'] * 1000:.0f} ms, turn {r['turn_s'] * 1000:.0f} ms, warm turn "
                      f"{r['warm_turn_s'] * 1000:.0f} ms", "", "", "", "200 mock deltas, loopback mock model")
            except RuntimeError as exc:
                t.add("6. spawn → READY, real codex", "skipped", "", "", "", str(exc).splitlines()[0][:120])
    if want("bounds"):
        # 8. Linear under a chatty peer (issue 35).
        b = worker("bench.bounds", "burst", f"{80_000}:{1 if ns.quick else 5}")
        t.raw["bounds_burst"] = b
        t.add(f"8. chatter burst, {b['large']:,} vs {b['small']:,} mixed notifications",
              f"{b['large_s'] * 1000:.0f} ms at {b['large']:,}", f"{b['small_s'] * 1000:.0f} ms at {b['small']:,}",
              f"{b['ratio']:.2f}×", "≤ 6× (linear 4×)",
              f"{'every kept event delivered' if b['kept_ok'] else 'MISMATCH (kept events lost)'}; "
              f"EventStream in process, nobody reading; median of {b['pairs']} alternated pairs")
        r = worker("bench.bounds", "redact", "1" if ns.quick else "5")
        t.raw["bounds_redact"] = r
        t.add("   serve error reply, 300 vs 1 registered keys", f"{r['many_ms'] * 1000:.0f} µs with 300 keys",
              f"{r['one_ms'] * 1000:.0f} µs with 1 key", f"{r['ratio']:.2f}×", "≤ 5×",
              f"one-pass matcher (radix trie of prefixes); its rebuild after the set changed "
              f"{r['rebuild_ms']:.1f} ms, once; median of {r['pairs']} alternated pairs")
        lines = 12_000 if ns.quick else 120_000
        f = worker("bench.bounds", "fuzz_rss", str(lines), timeout=3600)
        t.raw["bounds_fuzz_rss"] = f
        growth = f["growth_mb"]
        t.add(f"   serve RSS over {lines:,} hostile lines", f"{f['rss_start_mb']:.1f} → {f['rss_end_mb']:.1f} MiB "
              f"(+{growth:.1f} MiB)" if growth is not None else "n/a", "", "", "≤ 20 MiB growth",
              f"{f['replies']:,} replies to {f['lines']:,} lines"
              f"{'' if f['complete'] and f['replies'] == f['lines'] else ' MISMATCH (replies missing)'}; "
              f"a new managed configureLaunch key every 3rd line; {f['seconds']:.0f} s; exit {f['exit']}")
    if want("acp") and not ns.no_real:
        # 9. `codexrt acp` (issue 30): an ACP editor's view, against the library in the same run.
        try:
            c = worker("bench.acp", "cancel", timeout=1200)
            t.raw["acp_cancel"] = c
            t.add(f"9. `codexrt acp` session/cancel → `cancelled`, {c['rounds']} rounds, real codex {_pinned()}",
                  f"p50 {c['acp_p50_ms']:.1f} ms, max {c['acp_max_ms']:.0f} ms",
                  f"library abort → result p50 {c['lib_p50_ms']:.1f} ms, max {c['lib_max_ms']:.0f} ms",
                  f"{c['acp_p50_ms'] / c['lib_p50_ms']:.2f}× p50", "p50 ≤ 50 ms",
                  f"stop reasons {c['stop_reasons']}; {c['late_chunks']} chunks after the cancel"
                  + ("" if c["ok"] else "; MISMATCH (not cancelled, text after the cancel, or a command ran)"))
            t.add(f"   session/cancel with a permission open, {c['perm_rounds']} rounds",
                  f"$/cancel_request p50 {c['withdraw_p50_ms']:.1f} ms, max {c['withdraw_max_ms']:.0f} ms",
                  f"prompt answered `cancelled` p50 {c['perm_answer_p50_ms']:.1f} ms", "", "withdrawn ≤ 50 ms",
                  f"{c['commands_run']} of the held commands ran")
            f = worker("bench.acp", "first_chunk", timeout=1200)
            t.raw["acp_first_chunk"] = f
            t.add("   first agent_message_chunk, warm session", f"{f['acp_ms']:.0f} ms",
                  f"library first delta {f['lib_ms']:.0f} ms", f"{f['diff_ms']:+.1f} ms",
                  "≤ library + 10 ms",
                  f"medians; the ratio column is the median per-pair difference of {f['pairs']} alternated "
                  "pairs, 200 mock deltas")
            p = worker("bench.acp", "paused", timeout=1200)
            t.raw["acp_paused"] = p
            done = "never" if p["model_done_s"] is None else f"{p['model_done_s']:.2f} s"
            t.add(f"   {p['deltas']:,} deltas, client reads nothing for {p['pause_s']:.0f} s",
                  f"{p['notifications']:,} notifications", f"{p['deltas']:,} model deltas",
                  f"{p['notifications'] / p['deltas']:.3f}×", "≤ 1,000 notifications, model done in the pause",
                  ("text exact" if p["ok"] else f"MISMATCH (text by the prompt's answer not exact; {p['chars_after_answer']:,} "
                     f"chars came after it, whole text exact: {p['whole_text_ok']})") + f"; model stream done after {done}; "
                  f"stop {p['stop_reason']}; agent peak RSS {p['agent_rss_mb'] or 0:.0f} MB")
        except RuntimeError as exc:
            t.add("9. `codexrt acp`, real codex", "skipped", "", "", "", str(exc).splitlines()[0][:120])
    if want("soak"):
        # 7. A sidecar that runs for days (issue 17): many turns through one `codexrt serve`.
        plans = [("fake", 200 if ns.quick else 1000, "fake app-server (handshake-ok)")]
        if not ns.no_real:
            plans.append(("real", 50 if ns.quick else 200, f"real codex {_pinned()}, loopback mock model"))
        for kind, turns, label in plans:
            r = optional(f"7. soak through `codexrt serve`, {label}", "bench.soak", kind, str(turns))
            if r is None:
                continue
            t.raw[f"soak_{kind}"] = r
            done = r["statuses"].get("completed", 0)
            t.add(f"7. soak through `codexrt serve`, {turns:,} turns, {label}",
                  f"RSS {r['rss_at_50_mb']:.1f} → {r['rss_last_mb']:.1f} MB (+{r['rss_growth_mb']:.2f} MB after turn 50)",
                  f"fds {r['fds_at_50']} → {r['fds_last']}", "", "≤ 5 MB growth, fds flat, no leaked process",
                  f"{done}/{turns} completed, {len(r['leaked_processes'])} leaked of {r['children_seen']} children, "
                  f"{r['turns_per_s']:.0f} turns/s, exit {r['exit']}")
    if want("turns") and not ns.no_real:
        # 8. Issue 34: what a user waits on per turn, on the real binary.
        plans = [("one", 100 if ns.quick else 600, "1 channel", "overhead ≤ 2 ms p50, p99 ≤ 1.1× raw"),
                 ("eight", 10 if ns.quick else 40, "8 channels at once", "p99 ≤ 1.2× raw")]
        for kind, turns, label, target in plans:
            r = optional(f"8. per-turn latency, {label}", "bench.turns", kind, str(turns))
            if r is None:
                continue
            t.raw[f"turns_{kind}"] = r
            raw = r["raw"]
            for side, name in (("lib", "library (`rt.send` → events → `op.wait()`)"),
                               ("serve", "`codexrt serve` (`codex.send` → reply)")):
                x = r[side]
                t.add(f"8. per-turn latency, real codex {_pinned()}, {label}, {x['n']} turns: {name}",
                      f"p50 {x['p50_ms']:.1f} / p95 {x['p95_ms']:.1f} / p99 {x['p99_ms']:.1f} ms",
                      f"raw stdlib client p50 {raw['p50_ms']:.1f} / p95 {raw['p95_ms']:.1f} / p99 {raw['p99_ms']:.1f} ms",
                      f"{x['overhead_p50_ms']:+.1f} ms p50 (95% CI {x['overhead_p50_ci95_ms'][0]:+.1f} … "
                      f"{x['overhead_p50_ci95_ms'][1]:+.1f}); {x['ratio_p95']:.2f}× p95; {x['ratio_p99']:.2f}× p99",
                      target, f"{'final text exact in every turn' if r['text_ok'] else 'MISMATCH (a final text differs)'}; "
                      f"alternated {'turn by turn' if kind == 'one' else 'in blocks of 2 turns per channel'}; "
                      f"loopback mock model" + (f"; client CPU per turn {x['cpu_ms_per_turn']:.2f} ms "
                                                f"(raw client {raw['cpu_ms_per_turn']:.2f} ms)"
                                                if "cpu_ms_per_turn" in x else "")
                      + (f"; its app-server per turn: CPU {x['server_cpu_ms_per_turn']:.1f} ms, its threads' wait "
                         f"for a core {x['server_wait_ms_per_turn']:.1f} ms summed (raw's: "
                         f"{raw['server_cpu_ms_per_turn']:.1f} / {raw['server_wait_ms_per_turn']:.1f} ms)"
                         if "server_cpu_ms_per_turn" in x and "server_cpu_ms_per_turn" in raw else ""))
    print(f"\nmachine: {machine()}\n")
    print(t.render())
    if ns.json:
        Path(ns.json).write_text(json.dumps({"machine": machine(), "results": t.raw}, indent=1))
    if t.failed:
        print(f"\nFAILED: text not exact in: {'; '.join(t.failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
