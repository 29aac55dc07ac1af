"""Conversion of legacy rollout records (R-H-4): core ``TurnItem`` snapshots in the native item
shape, line timestamps, exec tool receipts (their own header, never the command's output) and
the constants the legacy path of the projector uses. (The rollout *line parser* is
:mod:`codexrt._sansio._legacy`.)"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import attrs

from ._shapes import _assistant_text, _camel, _int, _join_argv

def _uri_path(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    return v[7:] if v.startswith("file://") else v


def _duration_ms(v: Any) -> int | None:
    if isinstance(v, dict) and isinstance(v.get("secs"), int):
        return v["secs"] * 1000 + int(v.get("nanos", 0) or 0) // 1_000_000
    return _int(v)


def _core_item_to_native(item: dict[str, Any]) -> dict[str, Any]:
    """A rollout ``event_msg/item_completed`` item (core ``TurnItem``: PascalCase type,
    snake_case fields) in the app-server's ``ThreadItem`` shape."""
    t = str(item.get("type", ""))
    nt = t[:1].lower() + t[1:]
    out: dict[str, Any] = {_camel(k): v for k, v in item.items()}
    out["type"] = nt
    if nt == "userMessage":
        content = []
        for b in item.get("content") or ():
            if not isinstance(b, dict):
                continue
            bt = b.get("type")
            if bt == "text":
                content.append({"type": "text", "text": b.get("text", "")})
            elif bt == "image":
                content.append({"type": "image", "url": b.get("image_url", b.get("url"))})
            elif bt in ("local_image", "localImage"):
                content.append({"type": "localImage", "path": b.get("path")})
        out["content"] = content
    elif nt == "agentMessage":
        out["text"] = _assistant_text(item)
        out.pop("content", None)
    elif nt == "reasoning":
        out["summary"] = list(item.get("summary_text") or ())
        out["content"] = list(item.get("raw_content") or ())
    elif nt == "commandExecution":
        out["command"] = _join_argv(item.get("command"))
        out["cwd"] = _uri_path(item.get("cwd"))
        out["commandActions"] = item.get("parsed_cmd") or []
        out["source"] = _camel(str(item.get("source", "")))
        out["durationMs"] = _duration_ms(item.get("duration"))
        if item.get("aggregated_output") == "":
            out["aggregatedOutput"] = None  # no output: the server says null, never "" (issue 32)
    elif nt == "fileChange":
        out["changes"] = item.get("changes")
    return out


def _parse_ts(ts: str | None) -> int | None:
    if not ts:
        return None
    try:
        return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


# Unified-exec / shell receipts: the tool's own header, not data produced by the command. A
# header is a run of these lines from the first line on, ended by an ``Output:`` line.
_HEADER_LINE = re.compile(
    r"^(?:Chunk ID: \S+|Wall time:? [^\n]*|Process exited with code (?P<code>-?\d+)"
    r"|Process running with session ID (?P<pid>\S+)|Original token count: \d+|Total output lines: \d+"
    r"|Exit code: (?P<code2>-?\d+))$"
)
_OLD_SHELL_TOOLS = frozenset({"shell", "container.exec", "local_shell"})


@attrs.frozen
class ExecReceipt:
    """What a legacy exec tool's own output record says: the body, the exit code, and the
    process id when the command was still running (``Process running with session ID N``)."""

    body: str | None
    exit_code: int | None = None
    running_pid: str | None = None

    @property
    def running(self) -> bool:
        return self.running_pid is not None and self.exit_code is None


def _split_header(text: str) -> tuple[str, int | None, str | None, bool] | None:
    """(body, exit code, running pid, saw an exit/running line) when ``text`` starts with a
    complete tool header, else ``None`` (then nothing is read out of the text)."""
    lines = text.split("\n")
    code: int | None = None
    pid: str | None = None
    for j, line in enumerate(lines[:8]):
        if line == "Output:":
            return "\n".join(lines[j + 1:]), code, pid, code is not None or pid is not None
        m = _HEADER_LINE.match(line.rstrip("\r"))
        if m is None:
            return None
        c = m.group("code") or m.group("code2")
        if c is not None and code is None:
            code = int(c)
        if m.group("pid") is not None and pid is None:
            pid = m.group("pid")
    return None


def _parse_exec_output(output: Any, tool: str | None = None) -> ExecReceipt:
    """A legacy exec tool's output record (R-H-4). Status comes only from the tool's own
    header (or the old ``shell`` tool's structured ``metadata.exit_code``), never from the
    command's output: a body that prints ``Exit code: 1`` or ``Output:`` is data."""
    if isinstance(output, list):  # content items
        output = "".join(b.get("text", "") for b in output if isinstance(b, dict))
    if isinstance(output, dict):
        body = output.get("content", output.get("output"))
        return ExecReceipt(body if isinstance(body, str) else None)
    if not isinstance(output, str):
        return ExecReceipt(None)
    s = output.strip()
    if tool in _OLD_SHELL_TOOLS and s.startswith("{"):
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):  # too deep is not JSON here
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            return ExecReceipt(obj["output"], _int(meta.get("exit_code")))
    head = _split_header(output)
    if head is None:
        return ExecReceipt(output)
    body, code, pid, decided = head
    if not decided:
        # Only a header without an outcome wraps a second one: the unified-exec envelope
        # around an intercepted ``apply_patch`` (``Wall time…\nOutput:\nExit code: 0\n…``).
        inner = _split_header(body)
        if inner is not None:
            body, code, pid, _ = inner
    return ExecReceipt(body, code, pid)


#: Facets of one legacy compaction are written back to back (milliseconds apart); facets whose
#: line timestamps are further apart than this are separate compactions (seed: 不同明确时间的
#: compact 记录继续独立显示).
COMPACTION_FACET_WINDOW_MS = 2000

_CONTEXT_PREFIXES = (
    "<environment_context",
    "# AGENTS.md instructions",
    "<user_instructions",
    "<turn_aborted",
    "<permissions",
    "<skills_instructions",
    "<subagent_notification",
    "<user_shell_command",
    "<recommended_plugins",
)

_EXEC_TOOLS = {"exec_command", "shell", "shell_command", "container.exec", "local_shell"}
