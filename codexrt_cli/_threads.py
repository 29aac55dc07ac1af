"""``codexrt threads``: list the user's Codex threads with their message counts (R-H-6, R-H-7).

The list comes from the app-server's ``thread/list`` (one runtime, started for this command and
reaped at exit; nothing is resumed, no turn is started). Message counts are made by the history
reader's counter (display projection, ≤ 4 at once, 110 s budget each); a count that is not
known is shown as ``?`` and is ``null`` in ``--json`` — never 0. ``--offline`` reads the rollout
files under ``CODEX_HOME/sessions`` only (access mode inactive: no process is spawned).

The CLI and ``CODEX_HOME`` are found like the rest of the CLI: ``--codex-bin`` / ``$CODEX_BIN``
…, ``--codex-home`` / ``$CODEX_HOME``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

import attrs
import trio

from codexrt import CodexError, RuntimeConfig, ThreadSummary, open_history_reader, open_runtime

__all__ = ["add_parser", "add_source_options", "runtime_config", "run_threads", "format_table"]


def add_source_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``threads`` and ``show``."""
    p.add_argument("--codex-bin", metavar="PATH",
                   help="the Codex CLI (default: $CODEX_BIN, else `codex` on PATH and the usual places)")
    p.add_argument("--codex-home", metavar="DIR", help="CODEX_HOME to read (default: $CODEX_HOME, else ~/.codex)")
    p.add_argument("--offline", action="store_true",
                   help="read the rollout files under CODEX_HOME/sessions only; never start the app-server")
    p.add_argument("--rpc-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="budget of each JSON-RPC request (default 30)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def runtime_config(args: argparse.Namespace) -> RuntimeConfig:
    return RuntimeConfig(codex_bin=args.codex_bin, codex_home=args.codex_home,
                         access_mode="inactive" if args.offline else "cli_login",
                         rpc_timeout=args.rpc_timeout, handshake_timeout=args.rpc_timeout)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "threads",
        help="list Codex threads with their message counts",
        description=("List the threads the app-server knows (newest first) with their message counts. "
                     "Unknown counts show as `?` (null in --json), never as 0."),
    )
    add_source_options(p)
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N threads (default 50)")
    p.add_argument("--no-counts", action="store_true", help="do not count messages (faster)")
    p.set_defaults(func=_main)
    return p


def _main(args: argparse.Namespace) -> int:
    return trio.run(run_threads, args, sys.stdout, sys.stderr)


async def run_threads(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        async with open_runtime(runtime_config(args)) as rt, \
                open_history_reader(rt, codex_home=args.codex_home) as reader:
            page = await reader.list_all_threads(limit=args.limit)
            rows = list(page.threads)
            if not args.no_counts and rows:
                counts, _total = await reader.count_many(t.thread_id for t in rows)
                rows = [t if t.thread_id not in counts else _with_count(t, counts[t.thread_id].count) for t in rows]
    except CodexError as exc:
        print(f"codexrt threads: {exc.code}: {exc.message}", file=err)
        return 1
    for notice in page.notices:  # skipped files (legacy list): stderr, so stdout stays the list
        print(f"codexrt threads: notice: {notice}", file=err)
    if args.json:
        json.dump([t.to_json() for t in rows], out, indent=2)
        out.write("\n")
    else:
        out.write(format_table(rows, source=page.source, partial=page.partial))
    return 0


def _with_count(t: ThreadSummary, count: int | None) -> ThreadSummary:
    return attrs.evolve(t, message_count=count)


def _when(ts: int | None) -> str:
    if ts is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _one_line(text: str | None, width: int) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


def format_table(rows: list[ThreadSummary], *, source: str = "native", partial: bool = False) -> str:
    """A plain-text table: updated, messages (``?`` = unknown), thread id, name or preview."""
    if not rows:
        return f"no threads ({source})\n"
    lines = [f"{'UPDATED':<16}  {'MSGS':>4}  {'THREAD ID':<36}  NAME"]
    for t in rows:
        count = "?" if t.message_count is None else str(t.message_count)
        title = t.name or _one_line(t.preview, 60) or "(untitled)"
        lines.append(f"{_when(t.updated_at):<16}  {count:>4}  {t.thread_id:<36}  {_one_line(title, 60)}")
    foot = f"{len(rows)} thread(s), source: {source}"
    if partial:
        foot += " (more exist: raise --limit)"
    return "\n".join(lines + [foot]) + "\n"
