"""Small readers shared by the native and the legacy projection: status synonyms, typed field
reads, image/content/text shapes, command vectors and ``apply_patch`` envelopes (display only)."""

from __future__ import annotations

import re
from typing import Any

from .._patch import parse_apply_patch as parse_envelope
from ._records import ContentBlock, FileChangeEntry, ImageSource

_STATUS_MAP = {
    "inprogress": "inProgress",
    "in_progress": "inProgress",
    "running": "inProgress",
    "generating": "inProgress",
    "completed": "completed",
    "complete": "completed",
    "success": "completed",
    "failed": "failed",
    "failure": "failed",
    "error": "failed",
    "errored": "failed",
    "declined": "declined",
    "rejected": "declined",
    "interrupted": "interrupted",
    "cancelled": "interrupted",
    "canceled": "interrupted",
    "aborted": "interrupted",
}


#: The statuses :func:`_norm_status` keeps as they are (the wire's own spelling): one lookup.
_STATUS_KEPT = {v: v for v in _STATUS_MAP.values()}


def _norm_status(value: Any) -> str:
    if not isinstance(value, str):
        return "unknown"
    kept = _STATUS_KEPT.get(value)
    if kept is not None:
        return kept
    return _STATUS_MAP.get(value.replace("-", "_").lower(), _STATUS_MAP.get(value.lower(), "unknown"))


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _camel(s: str) -> str:
    head, *rest = s.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _image_from_url(url: str) -> ImageSource:
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        mime = header[5:].split(";", 1)[0] or None
        return ImageSource("data", data, mime)
    if url.startswith("file://"):
        return ImageSource("path", url[7:])
    return ImageSource("url", url)


def _image_from_block(block: dict[str, Any]) -> ImageSource | None:
    """Every image shape we know → one :class:`ImageSource` (R-H-4 "one shared image source")."""
    for k in ("url", "image_url", "imageUrl"):
        v = block.get(k)
        if isinstance(v, str):
            return _image_from_url(v)
        if isinstance(v, dict) and isinstance(v.get("url"), str):
            return _image_from_url(v["url"])
    data = block.get("data")
    if isinstance(data, str):
        return ImageSource("data", data, _str(block.get("mimeType")) or _str(block.get("mime_type")))
    src = block.get("source")
    if isinstance(src, dict):
        if isinstance(src.get("data"), str):
            return ImageSource("data", src["data"], _str(src.get("media_type")) or _str(src.get("mimeType")))
        if isinstance(src.get("url"), str):
            return _image_from_url(src["url"])
    if isinstance(block.get("path"), str):
        return ImageSource("path", block["path"])
    for k in ("fileId", "file_id"):
        if isinstance(block.get(k), str):
            return ImageSource("fileId", block[k])
    return None


_IMAGE_TYPES = {"image", "localImage", "local_image", "input_image", "inputImage", "output_image"}
_TEXT_TYPES = {"text", "Text", "input_text", "output_text", "inputText", "outputText"}


def _content_blocks(items: Any) -> tuple[ContentBlock, ...]:
    if isinstance(items, str):
        return (ContentBlock("text", text=items),)
    if not isinstance(items, list):
        return ()
    out: list[ContentBlock] = []
    for b in items:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t in _TEXT_TYPES and isinstance(b.get("text"), str):
            out.append(ContentBlock("text", text=b["text"]))
        elif t in _IMAGE_TYPES:
            out.append(ContentBlock("image", image=_image_from_block(b), raw=b))
        else:
            out.append(ContentBlock(str(t) if t is not None else "unknown", raw=b))
    return tuple(out)


def _assistant_text(item: dict[str, Any]) -> str:
    """``text``, a ``content`` array or a ``content`` string: one projection (R-H-4)."""
    text = item.get("text")
    if isinstance(text, str):
        return text
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    msg = item.get("message")
    return msg if isinstance(msg, str) else ""


def _texts(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list):
        return ()
    out = []
    for x in v:
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict) and isinstance(x.get("text"), str):
            out.append(x["text"])
    return tuple(out)


def patch_line_counts(diff: str, kind: str) -> tuple[int, int]:
    """(+, −) line counts of one file's recorded change.

    ``add``: every line of the content is added; ``delete``: every line removed; otherwise the
    ``+``/``-`` lines of the hunks, headers (``+++``/``---``/``@@``/``***``) excluded.
    """
    if kind == "add":
        return (len(diff.splitlines()), 0)
    if kind == "delete":
        return (0, len(diff.splitlines()))
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+++") or line.startswith("---"):
            continue
        if line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
    return (added, removed)


def parse_apply_patch(text: str) -> tuple[FileChangeEntry, ...]:
    """Files of an ``apply_patch`` envelope (``*** Begin Patch`` … ``*** End Patch``), each with
    its hunk lines and +/− counts. Display only: the patch is never applied. Read by the
    library's one envelope parser, :func:`codexrt._sansio._patch.parse_apply_patch`."""
    out: list[FileChangeEntry] = []
    for f in parse_envelope(text):
        if f.kind == "add":
            out.append(FileChangeEntry(f.path, "add", f.content, f.added, f.removed))
        else:
            kind = "move" if f.move_path else f.kind
            out.append(FileChangeEntry(f.path, kind, f.body, f.added, f.removed, f.move_path))
    return tuple(out)


_SAFE_WORD = re.compile(r"^[A-Za-z0-9_\-./=:,+@%]+$")


def _quote_word(w: str) -> str:
    # Same rendering the server uses for a command vector (observed: `/bin/bash -lc "…"`).
    if w and _SAFE_WORD.match(w):
        return w
    if "'" not in w:
        return "'" + w + "'"
    return '"' + re.sub(r'([\\"$`])', r"\\\1", w) + '"'


def _join_argv(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return " ".join(_quote_word(str(x)) for x in v)
    return ""
