"""The shipped wire schema, ``codexrt/_serve/daemon-protocol.schema.json``: its command part is
generated from the command Structs (:mod:`codexrt._serve._commands`).

Generated (``msgspec.json.schema_components`` plus :data:`SCHEMA_EXTRA_DEFS` and friends for what
msgspec cannot state): ``$defs/commandParams`` (command → its params Struct), every Struct those
reference (``$defs/SendParams``, ``$defs/EditKey`` …, listed in ``x-generated.defs``) and the
command-name enum of ``$defs/command``. Carried over unchanged from the checked-in file (written
by hand, the fixed envelope parts): the replies, results, events and their payloads.

Regenerate after changing a command Struct (a test fails while the file is stale)::

    python -m codexrt._serve._schema --write
"""

from __future__ import annotations

import copy
import functools
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from codexrt._serve._commands import (COMMANDS, PARAMS_EXTRA_SCHEMA, SCHEMA_EXTRA_DEFS, STRUCT_EXTRA_SCHEMA)

__all__ = ["SCHEMA_PATH", "REGENERATE", "load_schema", "build_schema", "render_schema"]

SCHEMA_PATH = Path(__file__).resolve().parent / "daemon-protocol.schema.json"
REGENERATE = "python -m codexrt._serve._schema --write"
_REF = "#/$defs/{name}"

_DESCRIPTION = (
    "One JSON object per line. stdin carries #/$defs/command lines; stdout carries #/$defs/outputLine lines "
    "(responses and events) and nothing else. Results per command: #/$defs/commandResult/<command>; params per "
    "command: #/$defs/commandParams/<command>, generated from codexrt's command types (codexrt/_serve/_commands.py), "
    "which is also what validates them.")


@functools.lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The shipped wire schema (``codexrt/_serve/daemon-protocol.schema.json``)."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return json.load(fh)


def _params_components() -> tuple[dict[str, Any], dict[str, Any]]:
    """(command → params schema, component name → schema) from the Structs."""
    names = list(COMMANDS)
    types = [COMMANDS[n].params for n in names]
    refs, components = msgspec.json.schema_components(types, ref_template=_REF)
    for (struct, prop), schema in PARAMS_EXTRA_SCHEMA.items():
        props = components[struct]["properties"]
        default = props[prop].get("default", msgspec.UNSET)
        props[prop] = dict(schema) if default is msgspec.UNSET else {**schema, "default": default}
    for struct, extra in STRUCT_EXTRA_SCHEMA.items():
        components[struct].update(extra)
    for name, schema in SCHEMA_EXTRA_DEFS.items():
        components[name] = schema
    missing = {ref["$ref"].rsplit("/", 1)[1] for s in components.values() for ref in _refs(s)} - set(components)
    if missing:  # e.g. a component only SCHEMA_EXTRA_DEFS names
        _, more = msgspec.json.schema_components(
            [getattr(sys.modules["codexrt._serve._commands"], m) for m in sorted(missing)], ref_template=_REF)
        components.update(more)
    return dict(zip(names, refs)), components


def _refs(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        own = [node] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def build_schema(current: dict[str, Any]) -> dict[str, Any]:
    """``current`` (the checked-in schema) with its generated parts made anew from the Structs."""
    out = copy.deepcopy(current)
    defs = out["$defs"]
    for name in current.get("x-generated", {}).get("defs", []):
        defs.pop(name, None)
    params, components = _params_components()
    clash = set(components) & set(defs)
    if clash:
        raise ValueError(f"generated schema components {sorted(clash)} clash with hand-written $defs")
    defs.update(components)
    defs["commandParams"] = params
    defs["command"]["properties"]["command"] = {"enum": sorted(COMMANDS)}
    out["description"] = _DESCRIPTION
    out["x-generated"] = {"by": REGENERATE, "defs": sorted(components)}
    # generated parts first, then the hand-written ones in their checked-in order
    out["$defs"] = {**{k: defs[k] for k in current["$defs"] if k in defs}, **defs}
    return out


def render_schema(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = SCHEMA_PATH.read_text(encoding="utf-8")
    fresh = render_schema(build_schema(json.loads(text)))
    if "--write" in argv:
        if fresh != text:
            SCHEMA_PATH.write_text(fresh, encoding="utf-8")
            print(f"wrote {SCHEMA_PATH}")
        return 0
    if fresh != text:
        print(f"{SCHEMA_PATH} is stale; regenerate with: {REGENERATE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
