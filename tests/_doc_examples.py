"""The ```json examples of ``docs/daemon-protocol.md`` as data (issue 31): parsed into blocks
of commands, replies and events, and the comparison the example tests use. Pure (no trio, no
process): ``tests/sansio/test_daemon_protocol_doc.py`` checks the examples statically,
``tests/real/test_daemon_protocol_examples_real.py`` runs them on the real server (its module
doc says how)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests._support import ROOT

DOC = ROOT / "docs" / "daemon-protocol.md"
ELIDED = "…"
#: What an id looks like (a thread id, an interaction key, a token, a path): no spaces.
_ID = re.compile(r"^[\w./:@+=-]{6,300}$")
NOT_RUN = re.compile(r"^<!--\s*not-run:?\s*(.*?)\s*-->$")


def _items(lines: list[str], start: int) -> list[dict[str, Any]]:
    """The JSON lines of one block; a command may span lines (continuations are indented)."""
    out, buf = [], ""
    for offset, line in enumerate(lines):
        buf = f"{buf}\n{line}" if buf else line
        try:
            out.append(json.loads(buf))
        except json.JSONDecodeError:
            if offset + 1 < len(lines) and lines[offset + 1].startswith(" "):
                continue
            raise AssertionError(f"{DOC.name}:{start + offset}: not JSON: {buf[:200]}") from None
        buf = ""
    return out


def blocks() -> list[tuple[int, list[dict[str, Any]], str | None]]:
    """``(line, items, not_run_reason)`` for every ```json block of the doc."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```json":
            prev = next((l.strip() for l in reversed(lines[:i]) if l.strip()), "")
            m = NOT_RUN.match(prev)
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            out.append((i + 1, _items(lines[i + 1:j], i + 2), m.group(1) if m else None))
            i = j
        i += 1
    return out


def item_kind(item: dict[str, Any]) -> str:
    if "command" in item:
        return "command"
    return "reply" if item.get("type") == "response" else "event"


def shape_problems(doc: Any, actual: Any, path: str = "$") -> list[str]:
    if doc == ELIDED:
        return []
    if doc is None or actual is None:
        return []
    if isinstance(doc, dict):
        if not isinstance(actual, dict):
            return [f"{path}: object expected, got {type(actual).__name__}"]
        keys = set(doc) - {ELIDED}
        problems = []
        if ELIDED in doc:
            missing = keys - set(actual)
            if missing:
                problems.append(f"{path}: missing {sorted(missing)}")
        elif keys != set(actual):
            problems.append(f"{path}: keys differ: doc only {sorted(keys - set(actual))}, "
                            f"server only {sorted(set(actual) - keys)}")
        for k in sorted(keys & set(actual)):
            problems += shape_problems(doc[k], actual[k], f"{path}.{k}")
        return problems
    if isinstance(doc, list):
        if not isinstance(actual, list):
            return [f"{path}: array expected, got {type(actual).__name__}"]
        if doc == [ELIDED]:
            return []
        return [p for i, (d, a) in enumerate(zip(doc, actual)) for p in shape_problems(d, a, f"{path}[{i}]")]
    kinds = (bool, (int, float), str)
    for k in kinds:
        if isinstance(doc, k) and not (isinstance(doc, bool) and k != bool):
            ok = isinstance(actual, k) and not (isinstance(actual, bool) and k != bool)
            return [] if ok else [f"{path}: {type(doc).__name__} expected, got {actual!r:.80}"]
    return []


def learn(doc: Any, actual: Any, subs: dict[str, Any]) -> None:
    """Ids the example shows → the ones this run made (same place in the same line)."""
    if isinstance(doc, dict) and isinstance(actual, dict):
        for k in doc.keys() & actual.keys():
            learn(doc[k], actual[k], subs)
    elif isinstance(doc, list) and isinstance(actual, list):
        for d, a in zip(doc, actual):
            learn(d, a, subs)
    elif (isinstance(doc, str) and isinstance(actual, str) and doc != actual and ELIDED not in doc
          and _ID.match(doc)):
        subs.setdefault(doc, actual)


def substitute(value: Any, subs: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: substitute(v, subs) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, subs) for v in value]
    if isinstance(value, str):
        return subs.get(value, value)
    return value
