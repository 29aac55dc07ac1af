"""Native ``ThreadItem`` JSON (what the app-server sends) → display records (R-H-4)."""

from __future__ import annotations

from typing import Any

from .._sanitize import sanitize_user_text
from ._records import (
    AssistantMessage,
    CommandAction,
    CommandExecution,
    CompactionBoundary,
    DisplayRecord,
    DynamicToolCall,
    FileChange,
    FileChangeEntry,
    GenericRecord,
    ImageGeneration,
    ImageSource,
    ImageView,
    McpToolCall,
    Plan,
    Reasoning,
    SubAgent,
    UserMessage,
    WebSearch,
)
from ._shapes import (
    _IMAGE_TYPES,
    _assistant_text,
    _content_blocks,
    _image_from_block,
    _int,
    _join_argv,
    _norm_status,
    _str,
    _texts,
    patch_line_counts,
)

def _native_changes(changes: Any) -> tuple[FileChangeEntry, ...]:
    out: list[FileChangeEntry] = []
    if isinstance(changes, dict):  # core form: {path: {type, content | unified_diff, move_path}}
        changes = [
            {
                "path": p,
                "kind": {"type": c.get("type"), "move_path": c.get("move_path")},
                "diff": c.get("unified_diff") if c.get("unified_diff") is not None else c.get("content", ""),
            }
            for p, c in changes.items()
            if isinstance(c, dict)
        ]
    if not isinstance(changes, list):
        return ()
    for c in changes:
        if not isinstance(c, dict):
            continue
        k = c.get("kind")
        ktype = k.get("type") if isinstance(k, dict) else k
        move = (k.get("move_path") or k.get("movePath")) if isinstance(k, dict) else None
        kind = str(ktype) if isinstance(ktype, str) else "update"
        if kind == "update" and move:
            kind = "move"
        diff = c.get("diff") if isinstance(c.get("diff"), str) else ""
        a, r = patch_line_counts(diff, kind)
        out.append(FileChangeEntry(str(c.get("path", "")), kind, diff, a, r, _str(move)))
    return tuple(out)


def _actions(v: Any) -> tuple[CommandAction, ...]:
    if not isinstance(v, list):
        return ()
    out = []
    for a in v:
        if not isinstance(a, dict):
            continue
        t = a.get("type")
        t = {"list_files": "listFiles"}.get(t, t) if isinstance(t, str) else "unknown"
        cmd = a.get("command", a.get("cmd"))
        out.append(
            CommandAction(
                t, cmd if isinstance(cmd, str) else "", _str(a.get("path")), _str(a.get("name")), _str(a.get("query"))
            )
        )
    return tuple(out)


def _lifecycle_status(completed: bool) -> str:
    return "completed" if completed else "inProgress"


def _user_content(item: dict[str, Any]) -> tuple[str, list[ImageSource]]:
    """A user message's text blocks joined (not yet sanitized) and its images by shape."""
    content = item.get("content")
    parts: list[str] = []
    images: list[ImageSource] = []
    if isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif kind in _IMAGE_TYPES:
                img = _image_from_block(b)
                if img is not None:
                    images.append(img)
    return "".join(parts), images


def _user_message(item: dict[str, Any], common: dict[str, Any], life: str) -> UserMessage:
    """Text blocks joined and sanitized, images by shape (R-H-4, R-CTX-5)."""
    text, images = _user_content(item)
    s = sanitize_user_text(text)
    return UserMessage(
        **common, status=life, text=s.text, images=tuple(images), file_mentions=s.file_mentions,
        client_id=_str(item.get("clientId")), stripped=s.stripped,
    )


def _command_execution(item: dict[str, Any], common: dict[str, Any], status: str | None) -> CommandExecution:
    """A ``commandExecution`` item (its status only from its own field)."""
    desc = next((item[k] for k in ("description", "summary", "title") if isinstance(item.get(k), str)), None)
    return CommandExecution(
        **common,
        status=status or "unknown",
        command=item["command"] if isinstance(item.get("command"), str) else _join_argv(item.get("command")),
        cwd=_str(item.get("cwd")),
        exit_code=_int(item.get("exitCode")),
        output=_str(item.get("aggregatedOutput")),
        output_deferred=bool(item.get("outputDeferred", False)),
        actions=_actions(item.get("commandActions")),
        description=desc,
        approval_reason=_str(item.get("reason")),
        process_id=_str(item.get("processId")),
        duration_ms=_int(item.get("durationMs")),
    )


def _image_generation(item: dict[str, Any], common: dict[str, Any], status: str | None) -> ImageGeneration:
    """An ``imageGeneration`` item: a failure fails it; the image is the result or the saved file."""
    st = status or "unknown"
    if item.get("failure"):
        st = "failed"
    result = item.get("result")
    img = ImageSource("data", result, "image/png") if isinstance(result, str) and result else None
    if img is None and isinstance(item.get("savedPath"), str):
        img = ImageSource("path", item["savedPath"])
    return ImageGeneration(
        **common, status=st, revised_prompt=_str(item.get("revisedPrompt")),
        saved_path=_str(item.get("savedPath")), image=img, failure=item.get("failure"),
    )


def _collab_call(item: dict[str, Any], common: dict[str, Any], status: str | None) -> SubAgent:
    """A ``collabAgentToolCall``: the real child thread ids and each agent's state."""
    states = item.get("agentsStates") if isinstance(item.get("agentsStates"), dict) else {}
    return SubAgent(
        **common, status=status or "unknown", tool=_str(item.get("tool")),
        child_thread_ids=tuple(x for x in item.get("receiverThreadIds") or () if isinstance(x, str)),
        prompt=_str(item.get("prompt")),
        agent_states=tuple(
            (k, str(v.get("status", "unknown")) if isinstance(v, dict) else "unknown") for k, v in states.items()
        ),
    )


def plain_message_json(item: dict[str, Any], *, thread_id: str | None, turn_id: str) -> dict[str, Any] | None:
    """The JSON form of a completed ``agentMessage``/``userMessage`` item's record — the
    dict ``codexrt._features._history_json.record_to_json`` makes of
    :func:`project_native_item`'s record (``kind`` first, fields in order, camelCase) — made
    straight from the item (issue 34: serve turns every page it answers into these; the record
    and its conversion were ≈ 3/4 of that time). None for another type or a user message with
    an image or a file mention (the caller converts the record). ``tests/sansio/test_plain_page.py``
    checks the equality."""
    t = item.get("type")
    if t == "agentMessage":
        return {"kind": "assistantMessage", "id": str(item.get("id", "")), "threadId": thread_id, "turnId": turn_id,
                "status": "completed", "text": _assistant_text(item), "phase": _str(item.get("phase")),
                "source": "native"}
    if t != "userMessage":
        return None
    text, images = _user_content(item)
    if images:
        return None
    s = sanitize_user_text(text)
    if s.file_mentions:
        return None
    return {"kind": "userMessage", "id": str(item.get("id", "")), "threadId": thread_id, "turnId": turn_id,
            "status": "completed", "text": s.text, "images": [], "fileMentions": [],
            "clientId": _str(item.get("clientId")), "stripped": list(s.stripped), "source": "native"}


def plain_message_ids(item: dict[str, Any]) -> tuple[str, str | None] | None:
    """The id and ``clientId`` of the record :func:`project_native_item` makes of ``item``
    (``completed=True``) when that call surely returns — never raises — a ``completed`` record
    made from the item alone: an ``agentMessage`` (no ``clientId``), or a ``userMessage`` whose
    content blocks are text (a block's ``type`` a plain ``str`` other than an image type).
    Such a record can be made later, from the same item, with the same result (issue 34:
    :meth:`~._projector.Projector.add_native_turn` with ``items_follow``). None otherwise."""
    t = item.get("type")
    if t == "agentMessage" and type(t) is str:
        return str(item.get("id", "")), None
    if t != "userMessage" or type(t) is not str:
        return None
    content = item.get("content")
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict):
                kind = b.get("type")
                if type(kind) is not str or kind in _IMAGE_TYPES:
                    return None
    client_id = item.get("clientId")
    return str(item.get("id", "")), client_id if isinstance(client_id, str) else None


def project_native_item(
    item: dict[str, Any], *, thread_id: str | None, turn_id: str, completed: bool = True
) -> DisplayRecord:
    """Project one native ``ThreadItem`` (the JSON the server sends) to a display record.

    ``completed``: the item comes from a completed snapshot (``item/completed``, history pages)
    rather than ``item/started``; it decides the status of item kinds without a status field.
    """
    t = item.get("type")
    iid = str(item.get("id", ""))
    life = _lifecycle_status(completed)
    if t == "agentMessage":  # the messages first: most items (issue 34); no status field read
        return AssistantMessage(id=iid, thread_id=thread_id, turn_id=turn_id, status=life,
                                text=_assistant_text(item), phase=_str(item.get("phase")))
    common = {"id": iid, "thread_id": thread_id, "turn_id": turn_id}
    if t == "userMessage":
        return _user_message(item, common, life)
    has_status = "status" in item
    status = _norm_status(item.get("status")) if has_status else None
    if t == "reasoning":
        summary, content = _texts(item.get("summary")), _texts(item.get("content"))
        plain = any(x.strip() for x in summary + content)
        return Reasoning(**common, status=life, summary=summary, content=content,
                         state="plain" if plain else "encrypted")
    if t == "commandExecution":
        return _command_execution(item, common, status)
    if t == "fileChange":
        return FileChange(**common, status=status or "unknown", changes=_native_changes(item.get("changes")))
    if t == "dynamicToolCall":
        st = status or "unknown"
        if item.get("success") is False and st in ("completed", "unknown"):
            st = "failed"
        return DynamicToolCall(
            **common, status=st, tool=str(item.get("tool", "")), namespace=_str(item.get("namespace")),
            arguments=item.get("arguments"), success=item.get("success") if isinstance(item.get("success"), bool) else None,
            content=_content_blocks(item.get("contentItems")), error=_str(item.get("error")),
        )
    if t == "mcpToolCall":
        res = item.get("result") if isinstance(item.get("result"), dict) else {}
        err = item.get("error")
        return McpToolCall(
            **common, status=status or "unknown", server=str(item.get("server", "")), tool=str(item.get("tool", "")),
            arguments=item.get("arguments"), content=_content_blocks(res.get("content")),
            structured_content=res.get("structuredContent"),
            error=err.get("message") if isinstance(err, dict) else _str(err),
        )
    if t == "webSearch":
        return WebSearch(**common, status=status or life, query=str(item.get("query", "")), action=item.get("action"))
    if t == "imageView":
        return ImageView(**common, status=status or life, path=_str(item.get("path")))
    if t == "imageGeneration":
        return _image_generation(item, common, status)
    if t == "plan":
        return Plan(**common, status=life, text=_str(item.get("text")))
    if t == "contextCompaction":
        return CompactionBoundary(**common, status=life, trigger=_str(item.get("trigger")),
                                  summary=_str(item.get("summary")))
    if t == "collabAgentToolCall":
        return _collab_call(item, common, status)
    if t == "subAgentActivity":
        child = item.get("agentThreadId")
        return SubAgent(**common, status=life, activity=_str(item.get("kind")),
                        child_thread_ids=(child,) if isinstance(child, str) else ())
    return GenericRecord(**common, status=status or life, item_type=str(t), raw=item)
