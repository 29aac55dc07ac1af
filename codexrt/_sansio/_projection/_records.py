"""Display records of the history projection (R-H-4): frozen attrs value objects, one class per
item kind, grouped by turn. Both sources (native items, rollout records) land in these.

The records carry no ``to_wire``/``to_dict`` methods: their JSON form (serve, ``show --json``) is
:func:`codexrt._features._history_json.record_to_json`, one generic walk over the attrs fields
(camelCase names, ``kind`` first), so there is no per-class conversion here for a cattrs
converter to replace."""

from __future__ import annotations

from typing import Any, ClassVar, Union

import attrs

from .._sanitize import FileMention

#: Display status vocabulary (native camelCase). ``unknown`` means "not recorded".
STATUSES = ("inProgress", "completed", "failed", "declined", "interrupted", "unknown")


# ---------------------------------------------------------------------------------------------
# value objects


@attrs.frozen
class ImageSource:
    """One image, whatever shape it came in (native ``url``/``localImage``/``fileId``, legacy
    ``image_url``/``local_images``, MCP ``data``+``mimeType``, base64 results).

    ``kind``: ``url`` (http(s) URL), ``data`` (base64 ``value`` + ``mime_type``; ``data:`` URLs
    are split into this form), ``path`` (local file), ``fileId``.
    """

    kind: str
    value: str
    mime_type: str | None = None


@attrs.frozen
class ContentBlock:
    """A tool result block: ``text`` or ``image`` (then ``image`` is set); any other block
    type keeps its raw JSON in ``raw``."""

    type: str
    text: str | None = None
    image: ImageSource | None = None
    raw: Any = None


@attrs.frozen
class CommandAction:
    """What a command does, as codex parsed it: ``read`` / ``listFiles`` / ``search`` /
    ``unknown`` (native ``commandActions``, legacy ``parsed_cmd``)."""

    type: str
    command: str
    path: str | None = None
    name: str | None = None
    query: str | None = None


@attrs.frozen
class FileChangeEntry:
    """One file of a change. ``kind``: ``add`` / ``delete`` / ``update`` / ``move``.

    ``diff`` is what codex recorded: the new content for ``add``, the old content (or empty)
    for ``delete``, a unified diff / patch hunks for ``update``/``move`` — never presented as a
    whole old/new file. ``added``/``removed`` are line counts derived from it.
    """

    path: str
    kind: str
    diff: str
    added: int
    removed: int
    move_path: str | None = None


@attrs.frozen
class PlanStep:
    step: str
    status: str


def _src_field() -> Any:
    return attrs.field(default="native", eq=False, kw_only=True)


@attrs.frozen
class UserMessage:
    kind: ClassVar[str] = "userMessage"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    text: str
    images: tuple[ImageSource, ...] = ()
    file_mentions: tuple[FileMention, ...] = ()
    client_id: str | None = None
    stripped: tuple[str, ...] = ()
    source: str = _src_field()


@attrs.frozen
class AssistantMessage:
    kind: ClassVar[str] = "assistantMessage"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    text: str
    phase: str | None = None
    source: str = _src_field()


@attrs.frozen
class Reasoning:
    """``state``: ``plain`` (summary/content text available) or ``encrypted`` (the model
    reasoned, only ciphertext or nothing readable was kept — the ciphertext is never here)."""

    kind: ClassVar[str] = "reasoning"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    summary: tuple[str, ...]
    content: tuple[str, ...]
    state: str
    source: str = _src_field()


@attrs.frozen
class CommandExecution:
    """``output`` is ``None`` when none was recorded (and ``output_deferred`` when the server
    omitted it from the page); ``approval_reason`` is the approval request's ``reason``
    (legacy ``justification``), kept apart from ``description``."""

    kind: ClassVar[str] = "commandExecution"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    command: str
    cwd: str | None = None
    exit_code: int | None = None
    output: str | None = None
    output_deferred: bool = False
    actions: tuple[CommandAction, ...] = ()
    description: str | None = None
    approval_reason: str | None = None
    process_id: str | None = None
    duration_ms: int | None = None
    source: str = _src_field()


@attrs.frozen
class FileChange:
    kind: ClassVar[str] = "fileChange"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    changes: tuple[FileChangeEntry, ...]
    #: The tool's own report (legacy ``stdout``/``stderr``); informational, not compared.
    output: str | None = attrs.field(default=None, eq=False)
    source: str = _src_field()


@attrs.frozen
class DynamicToolCall:
    kind: ClassVar[str] = "dynamicToolCall"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    tool: str
    namespace: str | None = None
    arguments: Any = None
    success: bool | None = None
    content: tuple[ContentBlock, ...] = ()
    error: str | None = None
    source: str = _src_field()


@attrs.frozen
class McpToolCall:
    kind: ClassVar[str] = "mcpToolCall"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    server: str
    tool: str
    arguments: Any = None
    content: tuple[ContentBlock, ...] = ()
    structured_content: Any = None
    error: str | None = None
    source: str = _src_field()


@attrs.frozen
class WebSearch:
    kind: ClassVar[str] = "webSearch"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    query: str
    action: Any = None
    source: str = _src_field()


@attrs.frozen
class ImageView:
    kind: ClassVar[str] = "imageView"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    path: str | None
    source: str = _src_field()


@attrs.frozen
class ImageGeneration:
    kind: ClassVar[str] = "imageGeneration"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    revised_prompt: str | None = None
    saved_path: str | None = None
    image: ImageSource | None = None
    failure: Any = None
    source: str = _src_field()


@attrs.frozen
class Plan:
    """A plan: native ``plan`` text, or legacy ``update_plan`` steps."""

    kind: ClassVar[str] = "plan"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    text: str | None = None
    steps: tuple[PlanStep, ...] = ()
    explanation: str | None = None
    source: str = _src_field()


@attrs.frozen
class CompactionBoundary:
    """Context compaction, kept in place even without a summary.

    ``time_source``: ``item`` (the item's own time), ``turn`` (its turn's time — approximate),
    ``recorded`` (when we received it live), ``unknown``. ``trigger`` is copied only from an
    explicit field, never guessed.
    """

    kind: ClassVar[str] = "compaction"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    time_ms: int | None = None
    time_source: str = "unknown"
    trigger: str | None = None
    summary: str | None = None
    source: str = _src_field()


@attrs.frozen
class SubAgent:
    """A sub-agent call or activity; ``child_thread_ids`` are the real child thread ids.
    (Ancestry verification, R-H-8, is the reader's job.)"""

    kind: ClassVar[str] = "subAgent"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    tool: str | None = None
    activity: str | None = None
    child_thread_ids: tuple[str, ...] = ()
    prompt: str | None = None
    agent_states: tuple[tuple[str, str], ...] = ()
    source: str = _src_field()


@attrs.frozen
class ErrorRecord:
    kind: ClassVar[str] = "error"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    message: str
    info: Any = None
    source: str = _src_field()


@attrs.frozen
class GenericRecord:
    """An item this version cannot project (kept, never dropped): ``item_type`` + raw JSON."""

    kind: ClassVar[str] = "generic"
    id: str
    thread_id: str | None
    turn_id: str
    status: str
    item_type: str
    raw: Any = None
    source: str = _src_field()


DisplayRecord = Union[
    UserMessage,
    AssistantMessage,
    Reasoning,
    CommandExecution,
    FileChange,
    DynamicToolCall,
    McpToolCall,
    WebSearch,
    ImageView,
    ImageGeneration,
    Plan,
    CompactionBoundary,
    SubAgent,
    ErrorRecord,
    GenericRecord,
]


@attrs.frozen
class TurnGroup:
    """One turn: its status (``unknown`` when never recorded) and its records, in order."""

    turn_id: str
    status: str
    records: tuple[DisplayRecord, ...]
    started_at: int | None = None
    completed_at: int | None = None
    error: Any = None
