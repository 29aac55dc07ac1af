"""A ``CODEX_HOME`` holding hostile files, for the history tests (issue 32; R-H-3, R-H-6).

The real codex never writes these — they are what a damaged disk, a hostile co-tenant or a
malicious archive could leave: lines nested 100k–200k deep, MCP ``structuredContent`` nested ~900
deep, a FIFO and a device named like rollouts, symlinks leading outside the home, a
``session_index.jsonl`` with a hostile line. The good lines are in the shapes 0.171.0 writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STAMP = "2026-11-30T10:00:00.000Z"


def tid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def meta(n: int) -> str:
    return json.dumps({"timestamp": STAMP, "type": "session_meta",
                       "payload": {"id": tid(n), "cwd": "/w", "cli_version": "0.171.0", "source": "cli"}})


def user(text: str) -> str:
    return json.dumps({"timestamp": STAMP, "type": "event_msg", "payload": {"type": "user_message", "message": text}})


def depth_of(v: Any) -> int:
    """Container nesting of a JSON value (a scalar is 0), without recursion."""
    best, stack = 0, [(v, 0)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            best = max(best, d + 1)
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return best


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def rollout_path(home: Path, n: int) -> Path:
    day = home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True, exist_ok=True)
    return day / f"rollout-2026-11-30T10-00-{n % 60:02d}-{tid(n)}.jsonl"


def write(home: Path, n: int, *lines: str) -> Path:
    p = rollout_path(home, n)
    p.write_text("".join(line + "\n" for line in lines))
    os.utime(p, (1_800_000_000 + n, 1_800_000_000 + n))
    return p


def mcp_end(call_id: str, structured: str) -> str:
    """An ``mcp_tool_call_end`` line whose result's ``structuredContent`` is the raw JSON text
    ``structured``."""
    head = json.dumps({"timestamp": STAMP, "type": "event_msg", "payload": {
        "type": "mcp_tool_call_end", "call_id": call_id,
        "invocation": {"server": "srv", "tool": "tool", "arguments": {}},
        "result": {"Ok": {"content": [], "structuredContent": None}}}})
    return head.replace('"structuredContent": null', f'"structuredContent": {structured}')


GOOD, DEEP_HEAD, DEEP_MCP, FIFO, DEVICE, OUTSIDE, DEEP_BODY = 1, 2, 3, 4, 5, 6, 7


def build(home: Path) -> dict[int, Path]:
    """The hostile home; returns the path of each numbered entry."""
    out = {
        GOOD: write(home, GOOD, meta(GOOD), user("hello good")),
        # a line nested 100k deep among the first lines: the head reader skips it
        DEEP_HEAD: write(home, DEEP_HEAD, meta(DEEP_HEAD), '{"type":"event_msg","payload":' + deep(100_000) + "}",
                         user("after the deep line")),
        # MCP structuredContent nested 900 deep: decodes, must print without a RecursionError
        DEEP_MCP: write(home, DEEP_MCP, meta(DEEP_MCP), user("mcp deep"), mcp_end("c1", deep(900))),
        # a line nested 200k deep in the body: that line is skipped, the rest is read
        DEEP_BODY: write(home, DEEP_BODY, meta(DEEP_BODY), user("before"),
                         '{"type":"response_item","payload":' + deep(200_000) + "}", user("after")),
    }
    out[FIFO] = rollout_path(home, FIFO)
    os.mkfifo(out[FIFO])
    out[DEVICE] = rollout_path(home, DEVICE)
    os.symlink("/dev/zero", out[DEVICE])
    outside = home.parent / f"{home.name}-outside.jsonl"
    outside.write_text(meta(OUTSIDE) + "\n" + user("a file outside CODEX_HOME") + "\n")
    out[OUTSIDE] = rollout_path(home, OUTSIDE)
    os.symlink(outside, out[OUTSIDE])
    (home / "session_index.jsonl").write_text(
        '{"id":"x","thread_name":' + deep(100_000) + "}\n"
        + json.dumps({"id": tid(GOOD), "thread_name": "named good"}) + "\n")
    return out
