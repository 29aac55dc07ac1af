"""``codexrt show THREAD_ID``: one thread's transcript, readable in a terminal (R-H-1 … R-H-5).

The transcript is the history reader's display projection from **one** source: the app-server's
paged history (never resumed, no turn started), or — when the app-server is unavailable, access
is ``--offline``, or the native history of a legacy-mode thread visibly lacks tools — the
thread's rollout file as a whole, with a notice saying so. Legacy code-mode ``exec`` wrappers
are shown as the individual commands the attribution engine proved (R-H-5), or kept whole with
the engine's reason. ``--json`` prints the projected records instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

import trio

from codexrt import CodexError, Transcript, open_history_reader, open_runtime
from codexrt._serve._cli_support import (
    AssistantMessage,
    CommandExecution,
    CompactionBoundary,
    DynamicToolCall,
    ErrorRecord,
    FileChange,
    GenericRecord,
    ImageGeneration,
    ImageView,
    McpToolCall,
    Plan,
    Reasoning,
    SubAgent,
    UserMessage,
    WebSearch,
    transcript_to_json,
)

from ._threads import add_source_options, runtime_config

__all__ = ["add_parser", "run_show", "render_transcript"]

#: Output lines shown per tool record before the rest is summarised.
MAX_OUTPUT_LINES = 20


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "show",
        help="print one thread's transcript",
        description="Print a thread's transcript (user and assistant messages, reasoning, commands, file changes, "
                    "tools), grouped by turn.",
    )
    p.add_argument("thread_id", metavar="THREAD_ID")
    add_source_options(p)
    p.add_argument("--full-output", action="store_true", help="do not shorten command/tool output")
    p.set_defaults(func=_main)
    return p


def _main(args: argparse.Namespace) -> int:
    return trio.run(run_show, args, sys.stdout, sys.stderr)


async def run_show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        async with open_runtime(runtime_config(args)) as rt, \
                open_history_reader(rt, codex_home=args.codex_home) as reader:
            tr = await reader.read_thread(args.thread_id)
    except CodexError as exc:
        print(f"codexrt show: {exc.code}: {exc.message}", file=err)
        return 1
    if args.json:
        json.dump(transcript_to_json(tr), out, indent=2, default=str)
        out.write("\n")
    else:
        out.write(render_transcript(tr, full_output=args.full_output))
    return 0


def _indent(text: str, prefix: str = "    ", *, limit: int | None = MAX_OUTPUT_LINES) -> list[str]:
    lines = text.rstrip("\n").split("\n") if text else []
    shown = lines if limit is None else lines[:limit]
    out = [prefix + ln for ln in shown]
    if limit is not None and len(lines) > limit:
        out.append(f"{prefix}… {len(lines) - limit} more line(s)")
    return out


def _record(r: Any, tr: Transcript, limit: int | None) -> list[str]:
    st = f"[{r.status}]"
    if isinstance(r, UserMessage):
        lines = ["You:"] + _indent(r.text, "  ", limit=None)
        lines += [f"  [image: {i.value if i.kind != 'data' else (i.mime_type or 'inline data')}]" for i in r.images]
        lines += [f"  [file: {m.path}]" for m in r.file_mentions]
        return lines
    if isinstance(r, AssistantMessage):
        return ["Codex:"] + _indent(r.text, "  ", limit=None)
    if isinstance(r, Reasoning):
        if r.state == "encrypted":
            return ["  (reasoning: encrypted, not shown)"]
        return ["  (reasoning)"] + _indent("\n".join(r.summary + r.content), "    ", limit=limit)
    if isinstance(r, CommandExecution):
        code = "" if r.exit_code is None else f" exit {r.exit_code}"
        where = f"  (in {r.cwd})" if r.cwd else ""
        lines = [f"$ {r.command}{where} {st}{code}"]
        if r.approval_reason:
            lines.append(f"    reason: {r.approval_reason}")
        if r.output_deferred:
            lines.append("    (output not loaded)")
        elif r.output:
            lines += _indent(r.output, "    | ", limit=limit)
        return lines
    if isinstance(r, FileChange):
        lines = [f"✎ file change {st}"]
        for c in r.changes:
            target = f"{c.path} → {c.move_path}" if c.move_path else c.path
            lines.append(f"    {c.kind} {target} (+{c.added} −{c.removed})")
        return lines
    if isinstance(r, DynamicToolCall):
        att = tr.wrappers.get(r.id)
        if r.tool == "exec" and att is not None and not att.replace:
            reason = att.reason.value if att.reason is not None else "unattributed"
            detail = f": {att.detail}" if att.detail else ""
            lines = [f"⚙ code-mode exec wrapper {st} — kept whole ({reason}{detail})"]
        else:
            name = f"{r.namespace}.{r.tool}" if r.namespace else r.tool
            lines = [f"⚙ {name} {st}"]
        text = "\n".join(b.text for b in r.content if b.text)
        if text:
            lines += _indent(text, "    | ", limit=limit)
        lines += [f"    [image: {b.image.mime_type or b.image.kind}]" for b in r.content if b.image is not None]
        if r.error:
            lines.append(f"    error: {r.error}")
        return lines
    if isinstance(r, McpToolCall):
        lines = [f"⚙ mcp {r.server}/{r.tool} {st}"]
        text = "\n".join(b.text for b in r.content if b.text)
        if text:
            lines += _indent(text, "    | ", limit=limit)
        lines += [f"    [image: {b.image.mime_type or b.image.kind}]" for b in r.content if b.image is not None]
        if r.error:
            lines.append(f"    error: {r.error}")
        return lines
    if isinstance(r, WebSearch):
        return [f"🔎 web search {st}: {r.query}"]
    if isinstance(r, ImageView):
        return [f"🖼 viewed image {st}: {r.path or '?'}"]
    if isinstance(r, ImageGeneration):
        return [f"🖼 generated image {st}: {r.saved_path or r.revised_prompt or ''}".rstrip()]
    if isinstance(r, Plan):
        lines = ["☰ plan"]
        if r.text:
            lines += _indent(r.text, "    ", limit=limit)
        lines += [f"    [{s.status}] {s.step}" for s in r.steps]
        return lines
    if isinstance(r, CompactionBoundary):
        when = f", time from {r.time_source}" if r.time_source != "unknown" else ""
        return [f"── context compacted{when} ──"]
    if isinstance(r, SubAgent):
        kids = ", ".join(r.child_thread_ids) or "?"
        return [f"⇢ sub-agent {r.tool or r.activity or ''} {st}: {kids}"]
    if isinstance(r, ErrorRecord):
        return [f"! error: {r.message}"]
    if isinstance(r, GenericRecord):
        return [f"? {r.item_type} {st}"]
    return [f"? {getattr(r, 'kind', type(r).__name__)}"]


def render_transcript(tr: Transcript, *, full_output: bool = False) -> str:
    """The transcript as terminal text, turn by turn."""
    limit = None if full_output else MAX_OUTPUT_LINES
    head = f"Thread {tr.thread_id} — source: {tr.source}, {len(tr.turns)} turn(s)"
    if not tr.complete:
        head += " (incomplete: the server ended a page without a continuation cursor)"
    lines = [head]
    lines += [f"! {n}" for n in tr.notices]
    for i, g in enumerate(tr.turns, 1):
        lines.append("")
        lines.append(f"── turn {i} · {g.status} ──")
        for r in g.records:
            lines += _record(r, tr, limit)
    return "\n".join(lines) + "\n"
