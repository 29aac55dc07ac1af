"""Catalogs and slash commands: models, skills, MCP status/reload (R-CAT-1, R-CAT-2).

Why a module of its own: catalogs are *read-only native data queries*. They run on the
runtime's connection beside the send FIFO — never queued behind a turn, never resuming a
thread — and every failure is returned to the caller as a typed :class:`~codexrt.CodexError`
(never swallowed, never turned into an empty list). What they describe is what the effective
runtime sees (its provider and config), not what the account is entitled to.

Theory of operation
-------------------
* :func:`list_models` walks ``model/list`` pages, :func:`mcp_status` walks
  ``mcpServerStatus/list`` pages. A paged walk stops with an error when the server hands back a
  cursor it already gave (``CATALOG_CURSOR_REPEATED``), when a page has no ``nextCursor`` field
  (``CATALOG_BAD_PAGE``: nobody can tell whether more exists) or when more than ``max_pages``
  pages came (``CATALOG_PAGE_LIMIT``): a buggy or hostile server can never make it loop. The
  walk is the shared one (``codexrt._features._paging``).
* A walk is bound to the connection (and generation) it started on: if the runtime's child
  changed between two pages, the walk fails with ``CATALOG_STALE`` rather than mixing pages
  of two children or publishing an old client's answer into the new generation (R-RT-2).
* :func:`list_skills` asks ``skills/list`` for the given cwds. Skills are kept per cwd and per
  path: the same name at two paths is two skills (R-CAT-1). It loads neither models nor MCP.
  A host's selection (:class:`SkillRef`) is checked against each refresh with
  :func:`reconcile_selection`: a skill the refreshed catalog no longer lists (or lists
  disabled) is stale and cleared; selected skills travel as native ``skill`` input items
  (``Runtime.send(skills=…)``, ``codex.send`` ``skills``).
* :func:`reload_mcp` is the explicit ``config/mcpServer/reload``. The pinned 0.169.0 schema
  declares its params as ``null``; the real server answers ``{}`` for ``params: {}``,
  ``params: null`` and no params alike (checked in ``tests/real/test_helpers_real.py``);
  codexrt sends ``{}`` like for every other request.
* In access mode ``inactive`` every catalog fails with ``ACCESS_INACTIVE`` before anything is
  spawned (R-LC-3); no catalog ever falls back to a legacy ``exec``.
* :func:`start_slash_command` runs ``/compact``, ``/review`` and ``/diff`` (R-CAT-2). It
  answers ``started`` only once the native side acknowledged the operation; an operation that
  cannot be dispatched raises its error — never "started", never a fake model message.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import attrs
import trio

from codexrt._features._paging import CursorRepeated, CursorWalk, walk_pages
from codexrt._sansio._convert import from_wire, to_wire, wire
from codexrt._sansio._errors import (
    CatalogBadEntry,
    CatalogBadPage,
    CatalogCursorRepeated,
    CatalogPageLimit,
    CatalogStale,
    ConfigError,
    InvalidParams,
    malformed_data_is_typed,
    NotStarted,
    SlashNotDispatched,
    UnknownSlashCommand,
)
from codexrt._runtime._runtime import ChildHandle, Operation, Runtime

__all__ = [
    "DEFAULT_MAX_PAGES",
    "ModelInfo",
    "ModelCatalog",
    "SkillInfo",
    "SkillRef",
    "SkillsCatalog",
    "McpStatus",
    "list_models",
    "list_skills",
    "reconcile_selection",
    "mcp_status",
    "reload_mcp",
    "SlashResult",
    "start_slash_command",
    "SLASH_COMMANDS",
]

#: Most pages a paged catalog walk reads before giving up (R-CAT-1).
DEFAULT_MAX_PAGES = 50


# --------------------------------------------------------------------------- results


@wire()
@attrs.frozen
class ModelInfo:
    """One model as the runtime sees it: ``slug`` (the ``model`` value a turn takes), whether
    it is ``hidden`` from the default picker, and its reasoning efforts."""

    slug: str
    id: str
    display_name: str | None
    hidden: bool
    is_default: bool
    default_reasoning_effort: str | None
    reasoning_efforts: tuple[str, ...]

    @classmethod
    def from_native(cls, m: dict[str, Any]) -> "ModelInfo":
        slug = m.get("model") if isinstance(m.get("model"), str) else m.get("id")
        if not isinstance(slug, str) or not slug:
            raise CatalogBadEntry("model/list entry has no model slug",
                                  details={"entry": repr(m)[:200]})
        efforts = []
        for opt in m.get("supportedReasoningEfforts") or []:
            e = opt.get("reasoningEffort") if isinstance(opt, dict) else opt
            if isinstance(e, str):
                efforts.append(e)
        default = m.get("defaultReasoningEffort")
        return cls(
            slug=slug,
            id=m["id"] if isinstance(m.get("id"), str) else slug,
            display_name=m.get("displayName") if isinstance(m.get("displayName"), str) else None,
            hidden=m.get("hidden") is True,
            is_default=m.get("isDefault") is True,
            default_reasoning_effort=default if isinstance(default, str) else None,
            reasoning_efforts=tuple(efforts),
        )

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)


@attrs.frozen
class ModelCatalog:
    models: tuple[ModelInfo, ...]
    native: tuple[dict[str, Any], ...]
    pages: int

    def visible(self) -> tuple[ModelInfo, ...]:
        return tuple(m for m in self.models if not m.hidden)

    def to_wire(self) -> dict[str, Any]:
        return {"data": list(self.native), "nextCursor": None, "pages": self.pages,
                "models": [m.to_wire() for m in self.models]}


@wire()
@attrs.frozen
class SkillInfo:
    """One skill under one cwd. Identity is ``(cwd, path)``, never the name alone."""

    cwd: str
    name: str
    path: str
    scope: str | None
    enabled: bool
    description: str | None

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)


@attrs.frozen
class SkillsCatalog:
    skills: tuple[SkillInfo, ...]
    errors: tuple[dict[str, Any], ...]
    native: tuple[dict[str, Any], ...]

    def by_cwd(self, cwd: str) -> tuple[SkillInfo, ...]:
        return tuple(s for s in self.skills if s.cwd == cwd)

    def to_wire(self) -> dict[str, Any]:
        return {"data": list(self.native), "skills": [s.to_wire() for s in self.skills],
                "errors": list(self.errors)}


@wire()
@attrs.frozen
class SkillRef:
    """A selected skill as a host keeps it: ``name`` and ``path`` (the native skill input),
    and the ``cwd`` it was listed under when known. Identity is the path (and cwd), never the
    name alone (R-CAT-1)."""

    name: str
    path: str
    cwd: str | None = None

    @classmethod
    def from_wire(cls, v: Any) -> SkillRef:
        if not (isinstance(v, dict) and isinstance(v.get("name"), str) and v["name"]
                and isinstance(v.get("path"), str) and v["path"]
                and (v.get("cwd") is None or isinstance(v.get("cwd"), str))):
            raise InvalidParams("a skill is {name, path, cwd?} with non-empty name and path",
                                details={"skill": v if isinstance(v, (dict, str)) else repr(v)})
        return from_wire(v, cls)

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)

    def input_item(self) -> dict[str, Any]:
        """The native ``turn/start`` input item (``SkillUserInput``)."""
        return {"type": "skill", "name": self.name, "path": self.path}


def reconcile_selection(catalog: SkillsCatalog, selected: Sequence[SkillRef]) -> tuple[list[SkillRef], list[SkillRef]]:
    """``(kept, stale)``: a selection survives a catalog refresh only while the refreshed
    catalog still lists an *enabled* skill with the same name and path (under the same cwd
    when the selection names one); anything else is stale and must be cleared (R-CAT-1)."""
    kept: list[SkillRef] = []
    stale: list[SkillRef] = []
    for ref in selected:
        hit = any(sk.enabled and sk.name == ref.name and sk.path == ref.path and (ref.cwd is None or sk.cwd == ref.cwd)
                  for sk in catalog.skills)
        (kept if hit else stale).append(ref)
    return kept, stale


@attrs.frozen
class McpStatus:
    servers: tuple[dict[str, Any], ...]
    pages: int

    def to_wire(self) -> dict[str, Any]:
        # the native shape, all pages merged (the page count stays on the object)
        return {"data": list(self.servers), "nextCursor": None}


# --------------------------------------------------------------------------- paging


def _check_same_child(rt: Runtime, child: ChildHandle, method: str) -> None:
    if not child.is_current():
        raise CatalogStale(
            f"{method}: the app-server changed while the catalog was read; ask again",
            details={"method": method, "startedGeneration": child.generation,
                                           "currentGeneration": rt.generation})


async def _walk(rt: Runtime, method: str, params: dict[str, Any], max_pages: int) -> tuple[list[Any], int]:
    """All ``data`` of a paged native list, bounded (R-CAT-1): the one cursor walk, where a
    repeated cursor, a page without ``nextCursor`` and the page limit are errors."""
    if max_pages < 1:
        raise ConfigError("max_pages must be at least 1")
    child = await rt.start_child()  # ACCESS_INACTIVE in inactive mode: nothing spawned
    items: list[Any] = []
    req = dict(params)
    walk = CursorWalk(method, max_pages=max_pages, cursor=req.pop("cursor", None))

    async def read(p: dict[str, Any], _sent: Any) -> Any:  # no read ahead here: always None
        result = await child.call_read(method, p)
        _check_same_child(rt, child, method)
        return result

    def bad_page(w: CursorWalk) -> Exception:
        return CatalogBadPage(f"{method} answered without a data list",
                              details={"method": method, "page": w.pages + 1})

    try:
        await walk_pages(read, walk, req, items.extend, bad_page=bad_page)
    except CursorRepeated as exc:
        raise CatalogCursorRepeated(exc.message,
                                    details={"method": method, "page": walk.pages, "items": len(items)}) from None
    if walk.stop == "missing":
        raise CatalogBadPage(f"{method} answered without nextCursor; cannot tell whether more pages exist",
                             details={"method": method, "page": walk.pages})
    if walk.stop == "pageLimit":
        raise CatalogPageLimit(f"{method} has more than {max_pages} pages; stopped",
                               details={"method": method, "maxPages": max_pages, "items": len(items)})
    return items, walk.pages


# --------------------------------------------------------------------------- catalogs


@malformed_data_is_typed("catalog data")
async def list_models(rt: Runtime, *, include_hidden: bool = False, model_provider: str | None = None,
                      page_size: int | None = None, cursor: str | None = None,
                      max_pages: int = DEFAULT_MAX_PAGES) -> ModelCatalog:
    """Every model of ``model/list`` (all pages) as the effective runtime sees it (R-CAT-1).

    Raises the native error (``RPC_ERROR`` …), ``CATALOG_CURSOR_REPEATED``,
    ``CATALOG_PAGE_LIMIT``, ``CATALOG_STALE`` or ``ACCESS_INACTIVE``; never answers an empty
    list for a failure. Cancelling it withdraws the request in flight.
    """
    params: dict[str, Any] = {}
    if include_hidden:
        params["includeHidden"] = True
    if model_provider is not None:
        params["modelProvider"] = model_provider
    if page_size is not None:
        params["limit"] = page_size
    if cursor is not None:
        params["cursor"] = cursor
    native, pages = await _walk(rt, "model/list", params, max_pages)
    native = [m for m in native if isinstance(m, dict)]
    return ModelCatalog(tuple(ModelInfo.from_native(m) for m in native), tuple(native), pages)


@malformed_data_is_typed("catalog data")
async def list_skills(rt: Runtime, cwds: Sequence[str | os.PathLike[str]] = (), *,
                      force_reload: bool = False) -> SkillsCatalog:
    """Skills per cwd (``skills/list``; empty ``cwds`` = the session's cwd). The same name at
    different paths stays two skills. Loads neither models nor MCP (R-CAT-1)."""
    params: dict[str, Any] = {}
    if cwds:
        params["cwds"] = [os.fspath(c) for c in cwds]
    if force_reload:
        params["forceReload"] = True
    child = await rt.start_child()  # ACCESS_INACTIVE in inactive mode: nothing spawned
    result = await child.call_read("skills/list", params)
    _check_same_child(rt, child, "skills/list")
    data = result.get("data") if isinstance(result, dict) else None
    if not isinstance(data, list):
        raise CatalogBadPage("skills/list answered without a data list")
    skills: list[SkillInfo] = []
    errors: list[dict[str, Any]] = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        cwd = str(entry.get("cwd") or "")
        for err in entry.get("errors") or []:
            if isinstance(err, dict):
                errors.append({"cwd": cwd, **err})
        for s in entry.get("skills") or []:
            if not isinstance(s, dict) or not isinstance(s.get("name"), str):
                continue
            skills.append(SkillInfo(cwd=cwd, name=s["name"], path=str(s.get("path") or ""),
                                    scope=s.get("scope") if isinstance(s.get("scope"), str) else None,
                                    enabled=s.get("enabled") is not False,
                                    description=s.get("description") if isinstance(s.get("description"), str)
                                    else None))
    return SkillsCatalog(tuple(skills), tuple(errors), tuple(e for e in data if isinstance(e, dict)))


@malformed_data_is_typed("catalog data")
async def mcp_status(rt: Runtime, *, thread_id: str | None = None, server_name: str | None = None,
                     detail: str | None = None, page_size: int | None = None,
                     max_pages: int = DEFAULT_MAX_PAGES) -> McpStatus:
    """MCP server status (``mcpServerStatus/list``, all pages, bounded)."""
    params: dict[str, Any] = {}
    for key, value in (("threadId", thread_id), ("serverName", server_name), ("detail", detail),
                       ("limit", page_size)):
        if value is not None:
            params[key] = value
    servers, pages = await _walk(rt, "mcpServerStatus/list", params, max_pages)
    return McpStatus(tuple(s for s in servers if isinstance(s, dict)), pages)


@malformed_data_is_typed("catalog data")
async def reload_mcp(rt: Runtime) -> dict[str, Any]:
    """Explicit ``config/mcpServer/reload`` (after a refresh or a successful config write).
    Gated by the access mode (inactive → ``ACCESS_INACTIVE``); errors are raised."""
    child = await rt.start_child()  # ACCESS_INACTIVE in inactive mode: nothing spawned
    result = await child.call("config/mcpServer/reload", {})
    _check_same_child(rt, child, "config/mcpServer/reload")
    return result if isinstance(result, dict) else {}


#: serve command → the catalog call that answers it (params are the command's, minus channelId)
def _max_pages(p: dict[str, Any]) -> int:
    """``maxPages`` from a host's params: a positive integer, else ``INVALID_PARAMS``."""
    value = p.pop("maxPages", DEFAULT_MAX_PAGES)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
        raise InvalidParams("maxPages must be an integer from 1 to 100000",
                            details={"path": "$.params.maxPages"})
    return value


async def run_catalog_command(rt: Runtime, command: str, params: dict[str, Any]) -> dict[str, Any]:
    """The ``codexrt serve`` catalog commands (R-D-1, R-CAT-1). Unknown extra params are
    passed to the native method for the single-request catalogs."""
    p = dict(params)
    if command == "codex.listModels":
        max_pages = _max_pages(p)
        cat = await list_models(rt, include_hidden=bool(p.pop("includeHidden", False)),
                                model_provider=p.pop("modelProvider", None), page_size=p.pop("limit", None),
                                cursor=p.pop("cursor", None), max_pages=max_pages)
        return cat.to_wire()
    if command == "codex.listSkills":
        selected_raw = p.pop("selected", None)
        if selected_raw is not None and not isinstance(selected_raw, list):
            raise InvalidParams("selected must be a list of skills",
                                details={"path": "$.params.selected"})
        selected = [SkillRef.from_wire(v) for v in selected_raw or ()]
        cwds = p.pop("cwds", None) or ([p.pop("cwd")] if p.get("cwd") else [])
        sk = await list_skills(rt, cwds, force_reload=bool(p.pop("forceReload", False)))
        kept, stale = reconcile_selection(sk, selected)
        return {**sk.to_wire(), "selected": [r.to_wire() for r in kept], "stale": [r.to_wire() for r in stale]}
    if command == "codex.getMcpStatus":
        st = await mcp_status(rt, thread_id=p.pop("threadId", None), server_name=p.pop("serverName", None),
                              detail=p.pop("detail", None), page_size=p.pop("limit", None),
                              max_pages=_max_pages(p))
        return st.to_wire()
    if command == "codex.reloadMcp":
        return await reload_mcp(rt)
    raise ConfigError(f"not a catalog command: {command!r}")


# --------------------------------------------------------------------------- slash commands

SLASH_COMMANDS = ("/compact", "/review", "/diff")


@attrs.frozen
class SlashResult:
    """``status`` is ``started`` (native ack seen; ``operation`` runs on) or ``completed``
    (``/diff``: ``diff`` holds the :class:`~codexrt._io._workspace.WorkspaceDiff`)."""

    command: str
    status: str
    operation: Operation | None = None
    diff: Any = None


async def _acked_or_failed(op: Operation, events: Any) -> None:
    """Wait until ``op`` is acknowledged natively (``operationAcked``/``turnStarted``) or ends.
    A terminal before the ack is an error unless it completed. ``events`` is a runtime
    subscription taken before ``op`` could run, so the op's own stream stays the caller's."""
    async for ev in events:
        if ev.client_operation_id != op.id:
            continue
        if ev.kind in ("operationAcked", "turnStarted"):
            return
        if ev.kind == "operationDone":
            break
    result = await op.wait()
    if result.status != "completed":
        raise result.error or NotStarted(f"{op.kind} ended {result.status} before it started")


async def start_slash_command(rt: Runtime, command: str, *, thread_id: str | None = None,
                              cwd: str | os.PathLike[str] | None = None, session_id: str | None = None,
                              review_target: dict[str, Any] | None = None,
                              ack_timeout: float = 60.0) -> SlashResult:
    """Dispatch ``/compact``, ``/review`` or ``/diff`` (R-CAT-2).

    ``/compact`` and ``/review`` need a ``thread_id``; the result says ``started`` only after
    the app-server acknowledged the operation — a refusal, a missing thread, an inactive
    runtime or no ack within ``ack_timeout`` raises (the operation is aborted in the last
    case). ``/diff`` reads Git for ``cwd`` (no model turn, R-DIFF-1) and returns its explicit
    status (``notGit`` …). Anything else raises ``ConfigError`` (``UNKNOWN_SLASH_COMMAND``).
    """
    name = command.strip().split()[0] if command.strip() else ""
    if name == "/diff":
        from codexrt._io._workspace import read_workspace_diff

        if cwd is None:
            raise SlashNotDispatched("/diff needs a cwd")
        diff = await read_workspace_diff(cwd, session_id=session_id or thread_id or "")
        return SlashResult(name, "completed", diff=diff)
    if name not in ("/compact", "/review"):
        raise UnknownSlashCommand(f"unknown slash command {name or command!r}; known: {', '.join(SLASH_COMMANDS)}")
    if not thread_id:
        raise SlashNotDispatched(f"{name} needs a thread: nothing was started")
    with rt.subscribe() as events:  # before the op exists: no event of it can be missed
        op = rt.compact(thread_id) if name == "/compact" else rt.review(thread_id, review_target)
        with trio.move_on_after(ack_timeout):
            await _acked_or_failed(op, events)
            return SlashResult(name, "started", operation=op)
    rt.abort(op)
    raise SlashNotDispatched(f"{name} was not acknowledged within {ack_timeout:g} s; stopped",
                             details={"clientOperationId": op.id})
