"""codexrt ↔ ACP, as pure functions (no trio, no I/O): runtime events → ``session/update``s,
interactions → ``session/request_permission`` and its outcome → a decision, ACP prompt content
→ the arguments of ``Runtime.send``, history records → the replay of ``session/load``, and the
session's config options.

Everything here works on plain data (event kind, payload dict, item id; display records), so
it is tested without an event loop (``tests/sansio/test_acp_mapping.py``). The one outside
input, the current text of a changed file (for the whole old/new text of an ``edit`` diff), is
a callable the agent passes in.

Mapping notes (``docs/acp.md``):

* text and reasoning deltas → ``agent_message_chunk`` / ``agent_thought_chunk``, one chunk per
  runtime event: the runtime's event buffers already merge consecutive deltas of one item while
  the client lags, so a chunk may carry many native deltas, byte-exact. Errors, warnings and
  status chatter are never turned into answer text.
* ``commandExecution`` → ``tool_call`` kind ``read``/``search``/``execute`` (from
  ``commandActions``: every action a read → ``read``, every action a search/listing →
  ``search``, else ``execute``), output at completion (ACP content replaces, so streaming the
  output would resend it whole on every chunk); ``fileChange`` → ``edit`` with ``diff`` content;
  ``mcpToolCall`` → ``other``; ``webSearch`` → ``fetch``; ``dynamicToolCall`` → ``other``.
* native statuses → ACP: ``inProgress`` → ``in_progress``; ``completed`` → ``completed``;
  ``failed``/``declined``/``interrupted`` → ``failed``. A replayed call that never finished
  (its turn is over) is shown ``failed`` — never ``pending``/``in_progress``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlparse

import attrs

from codexrt._sansio._errors import PatchFormatError
from codexrt._sansio._patch import ChangeKind, Conflict, apply_hunks, parse_change

__all__ = [
    "TEXT_STREAMS", "THOUGHT_STREAMS", "tool_status", "command_kind", "UpdateMapper", "permission_request",
    "PERMISSION_DECISIONS", "STOP_OPTION", "PromptInput", "PromptError", "prompt_input", "replay_updates",
    "plan_update", "ConfigState", "config_options", "apply_config_option", "ConfigOptionError", "usage_update",
    "FileReader",
]

TEXT_STREAMS = frozenset({"item/agentMessage/delta"})
THOUGHT_STREAMS = frozenset({"item/reasoning/summaryTextDelta", "item/reasoning/textDelta"})

#: Reads a file's current text (None when absent, unreadable or too big); used for diffs.
FileReader = Callable[[str], "str | None"]

_STATUS = {"inProgress": "in_progress", "pending": "pending", "completed": "completed", "failed": "failed",
           "declined": "failed", "interrupted": "failed"}


def tool_status(native: Any, *, finished: bool = False) -> str:
    """ACP status of a native item status. ``finished``: the item's turn is over, so a status
    that is not terminal (or unknown) is ``failed`` — a dead call is never shown running."""
    status = _STATUS.get(native, "in_progress") if isinstance(native, str) else "in_progress"
    if finished and status in ("pending", "in_progress"):
        return "failed"
    return status


def command_kind(actions: Iterable[Mapping[str, Any]]) -> str:
    """``read`` / ``search`` / ``execute`` from a command's ``commandActions``."""
    types = [a.get("type") for a in actions if isinstance(a, Mapping)]
    if types and all(t == "read" for t in types):
        return "read"
    if types and all(t in ("search", "listFiles") for t in types):
        return "search"
    return "execute"


def _locations(actions: Iterable[Mapping[str, Any]], cwd: str | None) -> list[dict[str, Any]]:
    out = []
    for a in actions:
        path = a.get("path") if isinstance(a, Mapping) else None
        if isinstance(path, str) and path:
            out.append({"path": _absolute(path, cwd)})
    return out


def _absolute(path: str, cwd: str | None) -> str:
    return path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)


def _text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _command_text(cmd: Any) -> str:
    if isinstance(cmd, list):
        return " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) else "command"


# --------------------------------------------------------------------------- file diffs

def _hunk_texts(patch: Any) -> tuple[str, str]:
    old = "".join(line for h in patch.hunks for line in h.old_lines)
    new = "".join(line for h in patch.hunks for line in h.new_lines)
    return old, new


def diff_content(changes: Sequence[Any], *, cwd: str | None, applied: bool,
                 read: FileReader | None) -> list[dict[str, Any]]:
    """ACP ``diff`` content for a ``fileChange`` item's changes: the whole old and new text.
    An added file has no old text; a deleted one an empty new text. For an update the file's
    current text (``read``; before the change when ``applied`` is False, after it when True)
    is completed with the hunks into the other side; when it cannot be read or does not match
    the hunks, the hunks' own lines (context and changed lines) stand in for both sides."""
    out: list[dict[str, Any]] = []
    for change in changes:
        try:
            patch = parse_change(change)
        except PatchFormatError:
            continue
        path = _absolute(patch.target, cwd)
        if patch.kind is ChangeKind.ADD:
            out.append({"type": "diff", "path": path, "oldText": None, "newText": patch.content or ""})
            continue
        if patch.kind is ChangeKind.DELETE:
            out.append({"type": "diff", "path": path, "oldText": patch.content or "", "newText": ""})
            continue
        old, new = _hunk_texts(patch)
        current = read(_absolute(patch.target if applied else patch.path, cwd)) if read is not None else None
        if current is not None:
            if applied:
                back = apply_hunks(current, tuple(h.reversed() for h in patch.hunks), path=path)
                if not isinstance(back, Conflict):
                    old, new = back, current
            else:
                fwd = apply_hunks(current, patch.hunks, path=path)
                if not isinstance(fwd, Conflict):
                    old, new = current, fwd
        out.append({"type": "diff", "path": path, "oldText": old, "newText": new})
    return out


# --------------------------------------------------------------------------- live events

def _tool_call_of(item: Mapping[str, Any], *, finished: bool, read: FileReader | None,
                  cwd: str | None) -> dict[str, Any] | None:
    """The ``tool_call`` fields of a native item (None: the item is not a tool call)."""
    itype, iid = item.get("type"), item.get("id")
    if not isinstance(iid, str):
        return None
    status = tool_status(item.get("status"), finished=finished)
    if itype == "commandExecution":
        actions = [a for a in item.get("commandActions") or () if isinstance(a, Mapping)]
        icwd = item.get("cwd") if isinstance(item.get("cwd"), str) else cwd
        call: dict[str, Any] = {"toolCallId": iid, "title": _command_text(item.get("command")),
                                "kind": command_kind(actions), "status": status,
                                "rawInput": {"command": item.get("command"), "cwd": icwd}}
        locs = _locations(actions, icwd)
        if locs:
            call["locations"] = locs
        output = item.get("aggregatedOutput")
        if isinstance(output, str) and output:
            call["content"] = [_text_content(output)]
        if item.get("exitCode") is not None:
            call["rawOutput"] = {"exitCode": item.get("exitCode")}
        return call
    if itype == "fileChange":
        changes = [c for c in item.get("changes") or () if isinstance(c, Mapping)]
        paths = [_absolute(c["path"], cwd) for c in changes if isinstance(c.get("path"), str)]
        title = "Edit " + ", ".join(os.path.basename(p) for p in paths[:3]) + (" …" if len(paths) > 3 else "")
        applied = item.get("status") == "completed"
        return {"toolCallId": iid, "title": title if paths else "Edit files", "kind": "edit", "status": status,
                "locations": [{"path": p} for p in paths],
                "content": diff_content(changes, cwd=cwd, applied=applied, read=read)}
    if itype == "mcpToolCall":
        call = {"toolCallId": iid, "title": f"{item.get('server', '?')}: {item.get('tool', '?')}", "kind": "other",
                "status": status, "rawInput": item.get("arguments")}
        result, error = item.get("result"), item.get("error")
        texts = _mcp_texts(result)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            texts.append(error["message"])
        if texts:
            call["content"] = [_text_content(t) for t in texts]
        return call
    if itype == "webSearch":
        query = item.get("query") if isinstance(item.get("query"), str) else ""
        return {"toolCallId": iid, "title": f"Web search: {query}" if query else "Web search", "kind": "fetch",
                "status": status, "rawInput": {"query": query}}
    if itype == "dynamicToolCall":
        return {"toolCallId": iid, "title": str(item.get("tool") or "tool"), "kind": "other", "status": status,
                "rawInput": item.get("arguments")}
    return None


def _mcp_texts(result: Any) -> list[str]:
    if not isinstance(result, Mapping):
        return []
    return [b["text"] for b in result.get("content") or () if isinstance(b, Mapping) and isinstance(b.get("text"), str)]


def plan_update(steps: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``plan`` from the todo list (``todosUpdated``): codex has no priority, so ``medium``."""
    entries = []
    for s in steps:
        if not isinstance(s, Mapping) or not isinstance(s.get("step"), str):
            continue
        status = {"inProgress": "in_progress", "in_progress": "in_progress", "completed": "completed"}.get(
            str(s.get("status")), "pending")
        entries.append({"content": s["step"], "priority": "medium", "status": status})
    return {"sessionUpdate": "plan", "entries": entries}


def usage_update(token_usage: Any) -> dict[str, Any] | None:
    """``usage_update`` from ``thread/tokenUsage/updated`` (tokens in context and the window);
    None when the window is unknown."""
    if not isinstance(token_usage, Mapping):
        return None
    window, last = token_usage.get("modelContextWindow"), token_usage.get("last")
    used = last.get("totalTokens") if isinstance(last, Mapping) else None
    if not isinstance(window, int) or not isinstance(used, int) or window < 0 or used < 0:
        return None
    return {"sessionUpdate": "usage_update", "used": used, "size": window}


class UpdateMapper:
    """One session's live mapping: runtime events → ACP ``session/update`` objects. Remembers
    which tool calls it announced, so a completion without a start still gets a ``tool_call``
    first and a call is never announced twice."""

    def __init__(self, *, cwd: str | None = None, read: FileReader | None = None) -> None:
        self.cwd = cwd
        self.read = read
        self.announced: set[str] = set()
        self.open: set[str] = set()  # announced calls not yet completed or failed
        self.title: str | None = None

    def updates(self, kind: str, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
        if kind == "itemUpdated":
            delta, stream = payload.get("delta"), payload.get("stream")
            if not isinstance(delta, str) or not delta:
                return []
            if stream in TEXT_STREAMS:
                return [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": delta}}]
            if stream in THOUGHT_STREAMS:
                return [{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": delta}}]
            return []
        if kind in ("itemStarted", "itemCompleted"):
            item = payload.get("item")
            if not isinstance(item, Mapping):
                return []
            return self._item(item, completed=kind == "itemCompleted")
        if kind == "todosUpdated":
            return [plan_update(payload.get("steps") or ())]
        if kind == "threadTitle" and payload.get("status") == "saved" and isinstance(payload.get("title"), str):
            return self._title(payload["title"])
        if kind == "nativeNotification":
            method, params = payload.get("method"), payload.get("params")
            if not isinstance(params, Mapping):
                return []
            if method == "thread/tokenUsage/updated":
                up = usage_update(params.get("tokenUsage"))
                return [up] if up else []
            if method == "thread/name/updated" and isinstance(params.get("threadName"), str):
                return self._title(params["threadName"])
        return []

    def _title(self, title: str) -> list[dict[str, Any]]:
        if title == self.title:
            return []
        self.title = title
        return [{"sessionUpdate": "session_info_update", "title": title}]

    def _item(self, item: Mapping[str, Any], *, completed: bool) -> list[dict[str, Any]]:
        call = _tool_call_of(item, finished=completed, read=self.read, cwd=self.cwd)
        if call is None:
            return []
        tid = call["toolCallId"]
        if tid not in self.announced:
            self.announced.add(tid)
            return [{"sessionUpdate": "tool_call", **call}]
        return [{"sessionUpdate": "tool_call_update", **call}]

    def interrupted(self) -> list[dict[str, Any]]:
        """The turn ended: every announced call that did not finish is closed ``failed`` —
        calls stay open only while their turn runs (a dead call is never shown running)."""
        out = [{"sessionUpdate": "tool_call_update", "toolCallId": t, "status": "failed"} for t in sorted(self.open)]
        self.open.clear()
        return out

    def track(self, update: Mapping[str, Any]) -> None:
        """Follow which calls are still open (called for every update sent)."""
        tid = update.get("toolCallId")
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update") and isinstance(tid, str):
            if update.get("status") in ("completed", "failed"):
                self.open.discard(tid)
            elif update.get("status") is not None:
                self.open.add(tid)



# --------------------------------------------------------------------------- permissions

#: Option id → the interaction decision it stands for. ``reject`` declines that call only (the
#: turn goes on, the model sees the refusal); ``stop`` declines it and ends the turn.
PERMISSION_DECISIONS = {"allow": "accept", "allow_always": "acceptForSession", "reject": "decline",
                        "stop": "cancel"}
STOP_OPTION = "stop"


def permission_request(session_id: str, kind: str, method: str, params: Mapping[str, Any], *,
                       description: str, tool_call_id: str, cwd: str | None = None,
                       read: FileReader | None = None) -> dict[str, Any]:
    """``session/request_permission`` params for an approval interaction: the call it is about
    (the item's id when the server names one) and the options allow once / allow always (for
    the session) / reject once / reject and stop the turn."""
    call: dict[str, Any] = {"toolCallId": tool_call_id, "title": description, "status": "pending"}
    if kind == "commandApproval":
        actions = [a for a in params.get("commandActions") or () if isinstance(a, Mapping)]
        call["kind"] = command_kind(actions)
        call["rawInput"] = {"command": params.get("command"), "cwd": params.get("cwd"), "reason": params.get("reason")}
    elif kind == "fileChangeApproval":
        call["kind"] = "edit"
        changes = params.get("changes")
        if isinstance(changes, list):
            call["content"] = diff_content([c for c in changes if isinstance(c, Mapping)], cwd=cwd,
                                           applied=False, read=read)
    elif kind == "mcpToolApproval":
        call["kind"] = "other"
    else:
        call["kind"] = "other"
        call["rawInput"] = dict(params)
    options = [{"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
               {"optionId": "allow_always", "name": "Allow for this session", "kind": "allow_always"}]
    options.append({"optionId": "reject", "name": "Reject (the turn goes on)", "kind": "reject_once"})
    options.append({"optionId": STOP_OPTION, "name": "Reject and stop the turn", "kind": "reject_once"})
    return {"sessionId": session_id, "toolCall": call, "options": options}


# --------------------------------------------------------------------------- prompts

class PromptError(ValueError):
    """Prompt content this agent cannot take (answered ``-32602``)."""


@attrs.frozen
class PromptInput:
    """The arguments of ``Runtime.send`` for one ACP prompt."""

    text: str
    images: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    additional_context: dict[str, dict[str, str]] = attrs.field(factory=dict)


#: Most bytes of embedded resource text one prompt may carry.
MAX_EMBEDDED_BYTES = 4 * 1024 * 1024


def _path_of(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path) or None
    if not parsed.scheme and uri.startswith("/"):
        return uri
    return None


def _context_name(uri: str, index: int) -> str:
    """A context name the server accepts (``[a-z][a-z0-9_]{0,63}``) from a resource's URI."""
    base = os.path.basename(urlparse(uri).path.rstrip("/")) or "resource"
    name = "".join(c if c.isascii() and c.isalnum() else "_" for c in base.lower()).strip("_") or "resource"
    if not name[0].isalpha():
        name = "r_" + name
    return f"{name[:56]}_{index}"


def prompt_input(blocks: Sequence[Any], *, images_ok: bool) -> PromptInput:
    """ACP prompt content → :class:`PromptInput`. Text blocks are the user's text (joined);
    a ``resource_link`` to a file is a mention (an IDE reference to the file, not its text);
    any other link is named in the text; an embedded text ``resource`` becomes an IDE context
    fragment (``untrusted``, its value headed by the URI) — never inlined into the user's text; images
    only when advertised (``data:`` URLs). Raises :class:`PromptError`."""
    from codexrt._acp._wire import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    texts: list[str] = []
    images: list[str] = []
    files: list[str] = []
    context: dict[str, dict[str, str]] = {}
    embedded = 0
    for i, block in enumerate(blocks):
        where = f"$.params.prompt[{i}]"
        if isinstance(block, TextContent):
            texts.append(block.text)
        elif isinstance(block, ResourceLink):
            path = _path_of(block.uri)
            if path is not None:
                files.append(path)
            else:
                texts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            if res.text is None:
                raise PromptError(f"session/prompt: binary embedded resources are not supported - at `{where}`")
            embedded += len(res.text.encode("utf-8", "surrogatepass"))
            if embedded > MAX_EMBEDDED_BYTES:
                raise PromptError(f"session/prompt: embedded resources exceed {MAX_EMBEDDED_BYTES} bytes "
                                  f"- at `{where}`")
            # the server takes a context name of [a-z][a-z0-9_]{0,63} only: the URI heads the value
            context[f"acp_resource_{i}"] = {"kind": "untrusted", "name": _context_name(res.uri, i),
                                            "value": f"{res.uri}\n{res.text}"}
        elif isinstance(block, ImageContent):
            if not images_ok:
                raise PromptError(f"session/prompt: image content was not advertised - at `{where}`")
            images.append(f"data:{block.mime_type};base64,{block.data}")
        elif isinstance(block, AudioContent):
            raise PromptError(f"session/prompt: audio content was not advertised - at `{where}`")
    text = "\n\n".join(t for t in texts if t)
    if not text and not images and not files and not context:
        raise PromptError("session/prompt: the prompt is empty - at `$.params.prompt`")
    return PromptInput(text, tuple(images), tuple(files), context)


# --------------------------------------------------------------------------- replay

def _record_changes(r: Any) -> list[dict[str, Any]]:
    """A ``FileChange`` record's changes in the native ``FileUpdateChange`` shape."""
    return [{"path": c.path, "kind": {"type": "update" if c.kind == "move" else c.kind,
                                      **({"move_path": c.move_path} if c.move_path else {})},
             "diff": c.diff} for c in r.changes]


def _replay_readers(records: list[Any], cwd: str | None, read: FileReader | None) -> dict[str, FileReader]:
    """For each ``fileChange`` record id, a reader of the files it touched as they were right
    after it (before it, for a change that was not applied): the files on disk now, walked back
    through the later changes' hunks. A file whose history does not fit (a conflict, a move, a
    change made outside codex) reads as None there and earlier — its diff then shows hunks only."""
    if read is None:
        return {}
    current: dict[str, str | None] = {}

    def now(path: str) -> str | None:
        if path not in current:
            current[path] = read(path)
        return current[path]

    readers: dict[str, FileReader] = {}
    for r in reversed(records):
        if getattr(r, "kind", None) != "fileChange":
            continue
        patches = []
        for change in _record_changes(r):
            try:
                patches.append(parse_change(change))
            except PatchFormatError:
                continue
        snapshot = {_absolute(x, cwd): now(_absolute(x, cwd)) for pt in patches for x in {pt.path, pt.target}}
        readers[r.id] = snapshot.get
        if r.status != "completed":
            continue  # not applied: the files were as they are after it
        for pt in reversed(patches):
            src, dst = _absolute(pt.path, cwd), _absolute(pt.target, cwd)
            if pt.kind is ChangeKind.ADD:
                current[dst] = None
            elif pt.kind is ChangeKind.DELETE:
                current[src] = pt.content
            elif pt.kind is ChangeKind.UPDATE and current.get(src) is not None:
                back = apply_hunks(current[src] or "", tuple(h.reversed() for h in pt.hunks), path=src)
                current[src] = None if isinstance(back, Conflict) else back
            else:
                current[src] = current[dst] = None
    return readers


def replay_updates(records: Iterable[Any], *, cwd: str | None = None,
                   read: FileReader | None = None) -> list[dict[str, Any]]:
    """The ``session/update``s that replay a thread's history records (``session/load``),
    statuses as recorded; a call whose turn ended without finishing it is ``failed``. With
    ``read`` (the files' current text), edits carry the whole old and new text where the files'
    history allows (:func:`_replay_readers`); else the hunks' lines."""
    records = list(records)
    readers = _replay_readers(records, cwd, read)
    out: list[dict[str, Any]] = []
    for r in records:
        kind = getattr(r, "kind", None)
        if kind == "userMessage":
            if r.text:
                out.append({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": r.text}})
        elif kind == "assistantMessage":
            if r.text:
                out.append({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": r.text}})
        elif kind == "reasoning":
            text = "\n".join(list(r.summary) or list(r.content))
            if text:
                out.append({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}})
        elif kind == "commandExecution":
            actions = [{"type": a.type, "path": a.path} for a in r.actions]
            call: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": r.id, "title": r.command,
                                    "kind": command_kind(actions), "status": tool_status(r.status, finished=True),
                                    "rawInput": {"command": r.command, "cwd": r.cwd}}
            locs = _locations(actions, r.cwd or cwd)
            if locs:
                call["locations"] = locs
            if r.output:
                call["content"] = [_text_content(r.output)]
            if r.exit_code is not None:
                call["rawOutput"] = {"exitCode": r.exit_code}
            out.append(call)
        elif kind == "fileChange":
            changes = _record_changes(r)
            paths = [_absolute(c.move_path or c.path, cwd) for c in r.changes]
            out.append({"sessionUpdate": "tool_call", "toolCallId": r.id,
                        "title": "Edit " + ", ".join(os.path.basename(p) for p in paths) if paths else "Edit files",
                        "kind": "edit", "status": tool_status(r.status, finished=True),
                        "locations": [{"path": p} for p in paths],
                        "content": diff_content(changes, cwd=cwd, applied=r.status == "completed",
                                                read=readers.get(r.id))})
        elif kind == "mcpToolCall":
            call = {"sessionUpdate": "tool_call", "toolCallId": r.id, "title": f"{r.server}: {r.tool}",
                    "kind": "other", "status": tool_status(r.status, finished=True), "rawInput": r.arguments}
            texts = [b.text for b in r.content if b.text]
            if r.error:
                texts.append(r.error)
            if texts:
                call["content"] = [_text_content(t) for t in texts]
            out.append(call)
        elif kind == "webSearch":
            out.append({"sessionUpdate": "tool_call", "toolCallId": r.id,
                        "title": f"Web search: {r.query}" if r.query else "Web search", "kind": "fetch",
                        "status": tool_status(r.status, finished=True), "rawInput": {"query": r.query}})
        elif kind == "dynamicToolCall":
            out.append({"sessionUpdate": "tool_call", "toolCallId": r.id, "title": r.tool, "kind": "other",
                        "status": tool_status(r.status, finished=True), "rawInput": r.arguments})
    return out


# --------------------------------------------------------------------------- config options

APPROVAL_MODES = {
    # id: (name, approval policy, description)
    "ask": ("Ask for every command and edit", "untrusted"),
    "on-request": ("Ask when the model requests it", "on-request"),
    "never": ("Never ask (commands run unasked)", "never"),
}
SANDBOX_MODES = {"read-only": "Read only", "workspace-write": "Workspace write",
                 "danger-full-access": "Full access (no sandbox)"}
EFFORTS = ("default", "minimal", "low", "medium", "high", "xhigh")


class ConfigOptionError(ValueError):
    """An unknown config option or value (answered ``-32602``)."""


@attrs.define
class ConfigState:
    """A session's chosen settings. ``approval`` defaults to ``ask``: every command and edit
    asks the editor; anything more permissive is an explicit choice."""

    model: str = "default"
    effort: str = "default"
    approval: str = "ask"
    sandbox: str = "workspace-write"
    models: tuple[tuple[str, str], ...] = ()  # (id, name) of the models on offer

    def settings_changes(self) -> dict[str, Any]:
        """Keyword arguments of ``Runtime.update_settings`` for this state."""
        out: dict[str, Any] = {"approval_policy": APPROVAL_MODES[self.approval][1], "sandbox": self.sandbox}
        if self.model != "default":
            out["model"] = self.model
        if self.effort != "default":
            out["effort"] = self.effort
        return out


def config_options(state: ConfigState) -> list[dict[str, Any]]:
    models = [{"value": "default", "name": "Default (from the Codex configuration)"}]
    models += [{"value": m, "name": n} for m, n in state.models if m != "default"]
    if state.model not in {m["value"] for m in models}:
        models.append({"value": state.model, "name": state.model})
    return [
        {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": state.model,
         "options": models},
        {"id": "reasoning_effort", "name": "Reasoning effort", "category": "thought_level", "type": "select",
         "currentValue": state.effort, "options": [{"value": e, "name": e.capitalize()} for e in EFFORTS]},
        {"id": "approval", "name": "Approvals", "category": "mode", "type": "select", "currentValue": state.approval,
         "options": [{"value": k, "name": v[0]} for k, v in APPROVAL_MODES.items()]},
        {"id": "sandbox", "name": "Sandbox", "type": "select", "currentValue": state.sandbox,
         "options": [{"value": k, "name": v} for k, v in SANDBOX_MODES.items()]},
    ]


def apply_config_option(state: ConfigState, config_id: str, value: Any) -> ConfigState:
    """A new state with ``config_id`` set to ``value``; raises :class:`ConfigOptionError`."""
    if not isinstance(value, str):
        raise ConfigOptionError(f"session/set_config_option: {config_id} takes a value id (a string) "
                                "- at `$.params.value`")
    if config_id == "model":
        if not value or len(value) > 200:
            raise ConfigOptionError("session/set_config_option: not a model id - at `$.params.value`")
        return attrs.evolve(state, model=value)
    allowed: Mapping[str, Any] | Sequence[str]
    if config_id == "reasoning_effort":
        allowed = EFFORTS
    elif config_id == "approval":
        allowed = APPROVAL_MODES
    elif config_id == "sandbox":
        allowed = SANDBOX_MODES
    else:
        raise ConfigOptionError(f"session/set_config_option: unknown config option {config_id[:80]!r} "
                                "- at `$.params.configId`")
    if value not in allowed:
        raise ConfigOptionError(f"session/set_config_option: {config_id} has no value {value[:80]!r} "
                                f"(one of {list(allowed)}) - at `$.params.value`")
    if config_id == "reasoning_effort":
        return attrs.evolve(state, effort=value)
    if config_id == "approval":
        return attrs.evolve(state, approval=value)
    return attrs.evolve(state, sandbox=value)
