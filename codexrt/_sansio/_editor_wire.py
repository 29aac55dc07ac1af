"""The JSON form of :class:`~codexrt._sansio._context.EditorState` (``codexrt serve``'s
``codex.send`` ``context`` param, R-CTX-1).

A host sends either ready ``additionalContext`` fragments (``{key: {kind, value, name?}}``) or
the editor state below, and codexrt builds the fragments itself (budgets, key names, no file
bodies). The two are told apart by shape: a fragments map has only ``{kind, value}`` objects.

    {"activeFile": {"path": "src/app.py", "selection": {"start": 10, "end": 20}},
     "openTabs": ["README.md"],
     "workspace": {"folders": ["/home/me/proj"], "name": "proj"},
     "referencedFiles": [{"path": "src/b.py", "lines": {"start": 3, "end": 9}}],
     "terminals": [{"name": "zsh", "cwd": "/home/me/proj", "output": "…"}]}

Every field is optional; ``null`` means absent. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from codexrt._sansio._errors import ConfigError, LocalProtocolError
from codexrt._sansio._context import (
    ActiveFile,
    EditorState,
    FileReference,
    LineRange,
    TerminalReference,
    WorkspaceInfo,
)

__all__ = ["EDITOR_STATE_KEYS", "is_fragment_map", "editor_state_from_wire"]

EDITOR_STATE_KEYS = frozenset({"activeFile", "openTabs", "workspace", "referencedFiles", "terminals"})


def is_fragment_map(value: dict[str, Any]) -> bool:
    """True when ``value`` is a ready ``additionalContext`` map (every entry ``{kind, value}``)."""
    return all(isinstance(v, dict) and "kind" in v and "value" in v for v in value.values())


def _range(obj: Any, where: str) -> LineRange | None:
    if obj is None:
        return None
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k), int) and not isinstance(obj.get(k), bool)
                                            for k in ("start", "end")):
        raise ConfigError(f"{where} must be {{start: int, end: int}}", details={"field": where})
    try:
        return LineRange(obj["start"], obj["end"])
    except (LocalProtocolError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}", details={"field": where}) from None


def _str(obj: Any, where: str, *, optional: bool = False) -> str | None:
    if obj is None and optional:
        return None
    if not isinstance(obj, str):
        raise ConfigError(f"{where} must be a string", details={"field": where})
    return obj


def _list(obj: Any, where: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ConfigError(f"{where} must be an array", details={"field": where})
    return obj


def editor_state_from_wire(data: dict[str, Any]) -> EditorState:
    """Parse the JSON editor state; ``ConfigError`` names the bad field."""
    unknown = sorted(set(data) - EDITOR_STATE_KEYS)
    if unknown:
        raise ConfigError(f"unknown editor-state field(s) {unknown}", details={"fields": unknown})
    active = None
    af = data.get("activeFile")
    if af is not None:
        if not isinstance(af, dict):
            raise ConfigError("activeFile must be an object", details={"field": "activeFile"})
        active = ActiveFile(_str(af.get("path"), "activeFile.path") or "",
                            _range(af.get("selection"), "activeFile.selection"))
    ws = data.get("workspace")
    workspace = None
    if ws is not None:
        if not isinstance(ws, dict):
            raise ConfigError("workspace must be an object", details={"field": "workspace"})
        workspace = WorkspaceInfo(tuple(_str(f, "workspace.folders[]") or "" for f in _list(ws.get("folders"),
                                                                                              "workspace.folders")),
                                  _str(ws.get("name"), "workspace.name", optional=True))
    refs = []
    for i, r in enumerate(_list(data.get("referencedFiles"), "referencedFiles")):
        if not isinstance(r, dict):
            raise ConfigError(f"referencedFiles[{i}] must be an object", details={"field": "referencedFiles"})
        refs.append(FileReference(_str(r.get("path"), f"referencedFiles[{i}].path") or "",
                                  _range(r.get("lines"), f"referencedFiles[{i}].lines")))
    terms = []
    for i, t in enumerate(_list(data.get("terminals"), "terminals")):
        if not isinstance(t, dict):
            raise ConfigError(f"terminals[{i}] must be an object", details={"field": "terminals"})
        terms.append(TerminalReference(_str(t.get("name"), f"terminals[{i}].name") or "",
                                       _str(t.get("cwd"), f"terminals[{i}].cwd", optional=True),
                                       _str(t.get("output"), f"terminals[{i}].output", optional=True)))
    tabs = tuple(_str(p, "openTabs[]") or "" for p in _list(data.get("openTabs"), "openTabs"))
    return EditorState(active_file=active, open_tabs=tabs, workspace=workspace,
                       referenced_files=tuple(refs), terminals=tuple(terms))
