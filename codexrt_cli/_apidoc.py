"""Generate ``docs/api.md`` from the docstrings of codexrt's public API.

``python -m codexrt_cli._apidoc`` rewrites the file; ``--check`` exits 1 when it is stale
(``tests/e2e/test_docs_snippets.py`` runs the same comparison). The public API is what
``codexrt.__all__``, ``codexrt.aio.__all__`` and ``codexrt.blocking.__all__`` list; for a class, its public methods and
properties defined in codexrt. Output is deterministic (no addresses, no dates) so the
staleness test compares text.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["render", "main", "API_MD", "MODULES"]

API_MD = Path(__file__).resolve().parent.parent / "docs" / "api.md"
#: Documented modules, in order.
MODULES = ("codexrt", "codexrt.aio", "codexrt.blocking")
_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


def _sig(obj: Any, name: str) -> str:
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return name
    sig = _ADDR.sub("", sig).replace("<class '", "").replace("'>", "")
    return f"{name}{sig}"


def _doc(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip()


def _documented() -> set[str]:
    """The names the documented modules export (a base among them documents its own members)."""
    import importlib

    return {name for mod in MODULES for name in getattr(importlib.import_module(mod), "__all__", ())}


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties of ``cls``, with those of its private codexrt bases (the
    parts a class is assembled from, e.g. ``Runtime``'s); a public base documents its own."""
    out = []
    seen: set[str] = set()
    parts = [k for k in cls.__mro__ if k is cls or (k.__module__.startswith("codexrt")
                                                     and (k.__name__.startswith("_") or k.__name__ not in _documented()))]
    for name, value in [item for part in parts for item in vars(part).items()]:
        if name.startswith("_") or name in seen:
            continue
        seen.add(name)
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property) or inspect.isfunction(value):
            out.append((name, value))
    return out


def _render_object(modname: str, name: str, obj: Any, lines: list[str]) -> None:
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else ("enum" if issubclass(obj, enum.Enum) else "class")
        lines.append(f"### `{_sig(obj, name) if kind == 'class' else name}`  ({kind})")
        lines.append("")
        doc = _doc(obj)
        if doc and not (kind == "class" and doc == _doc(object)):
            lines += [doc, ""]
        if kind == "enum":
            lines += ["Values: " + ", ".join(f"`{m.name}`" for m in obj), ""]
            return
        for mname, member in _members(obj):
            if isinstance(member, property):
                lines.append(f"- **`{mname}`** (property)" + (f" — {_doc(member).splitlines()[0]}" if _doc(member) else ""))
            else:
                first = _doc(member)
                lines.append(f"- **`{_sig(member, mname)}`**" + ("\n\n  " + first.replace("\n", "\n  ") if first else ""))
            lines.append("")
        if isinstance(getattr(obj, "code", None), str) and issubclass(obj, BaseException):
            lines += [f"Code: `{obj.code}`", ""]
    elif callable(obj):
        lines.append(f"### `{_sig(obj, name)}`")
        lines.append("")
        if _doc(obj):
            lines += [_doc(obj), ""]
    else:
        lines.append(f"### `{name}`")
        lines.append("")
        lines += [f"`{name} = {_ADDR.sub('', repr(obj))}`", ""]


def render() -> str:
    """The text of ``docs/api.md``."""
    lines = ["# API reference", "",
             "Generated from the docstrings by `python -m codexrt_cli._apidoc` — do not edit by hand;",
             "`tests/e2e/test_docs_snippets.py` fails when this file is stale. Start with",
             "[`quickstart.md`](quickstart.md).", ""]
    for modname in MODULES:
        mod = importlib.import_module(modname)
        lines += [f"## `{modname}`", ""]
        head = (_doc(mod).split("\n\n")[0]).strip()
        if head:
            lines += [head, ""]
        for name in getattr(mod, "__all__", []):
            if name.startswith("__"):
                continue
            _render_object(modname, name, getattr(mod, name), lines)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m codexrt_cli._apidoc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/api.md is stale, write nothing")
    ns = ap.parse_args(argv)
    text = render()
    current = API_MD.read_text(encoding="utf-8") if API_MD.exists() else ""
    if ns.check:
        if current != text:
            print(f"{API_MD} is stale: run python -m codexrt_cli._apidoc", file=sys.stderr)
            return 1
        return 0
    if current != text:
        API_MD.write_text(text, encoding="utf-8")
        print(f"wrote {API_MD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
