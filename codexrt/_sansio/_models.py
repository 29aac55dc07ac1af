# size: a catalogue of small msgspec Structs mirroring the app-server schema (tests/sansio/test_models.py checks them against it); one table reads better than several.
"""Typed wire models for the app-server payloads a client needs on the hot path (no I/O).

Derived by hand from the pinned ``codex app-server generate-json-schema --experimental`` of
codex-cli 0.169.0, and checked by ``tests/sansio/test_models.py`` against the pinned schema
(``tests/data/schema-<pinned version>/``, 0.171.0 now): every field name below must exist in the
schema definition named by the class's
``__schema__``, and every line of a recorded real session
(``tests/data/real-session-0.169.0.jsonl``) must decode with these models.

Why hand-written and not generated: the schema has 864 v2 definitions; codexrt needs a few dozen,
and it needs them *tolerant*:

* unknown fields are ignored (msgspec's default; ``forbid_unknown_fields`` stays off), so a newer
  server that adds fields does not break decoding;
* almost every field has a default, so an older server (0.147.0 lacks e.g. ``Thread.model``,
  ``TurnError.misalignment``, ``kind`` on command approvals) decodes too; only identities
  (``id``, ``threadId`` …) are required;
* string enums (turn status, item status, approval policy …) are plain ``str``: an unknown value
  is passed up, not rejected ("unknown stays unknown", R-H-4);
* a ``ThreadItem`` of a type codexrt does not model decodes to :class:`UnknownItem` (type, id and
  the raw JSON), never an error. Items stay :class:`msgspec.Raw` inside their container and are
  decoded on access (``Turn.items``, ``ItemStartedParams.item``), so one odd item can not fail
  a whole ``turn/completed``.

The envelope is decoded elsewhere (``_wire.py``) with ``msgspec.Raw`` payloads; here the payload is
decoded by method with prebuilt decoders: :func:`decode_notification_params`,
:func:`decode_server_request_params`, :func:`decode_result`, :func:`decode_item`. A method not in
the tables yields ``None`` (pass it through untouched, R-WIRE-7).

The wire is camelCase (``rename="camel"``) except where the schema says otherwise:
``UserInput.text_elements`` and ``PatchChangeKind.move_path`` are snake_case on the wire.

What reads the wire through them today: ``Connection.call(method, params, typed=True)`` decodes
the result's raw bytes into its model (:func:`decode_typed_result`; a misfit is a
``RemoteProtocolError`` saying where). The message count reads ``thread/read`` that way (R-H-7).
Every other result and every notification is still read as plain Python (``decode_json``): the
history, catalogs and edit ledger read those dicts field by field, tolerating a wrong-typed field
per field. The models cannot simply be applied to such a dict — ``msgspec.convert`` does not fill
a ``Raw`` field (a turn's items) from Python objects — so moving a reader over means asking the
connection for the typed result. Until then the remaining result and notification models are a
checked description of the wire (``tests/sansio/test_models.py``), not code the runtime depends on.
"""

from __future__ import annotations

from typing import Any, ClassVar, Union

import msgspec
from msgspec import Raw

from codexrt._sansio._errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "Thread",
    "ThreadStatus",
    "Turn",
    "TurnError",
    "ThreadItem",
    "UserMessageItem",
    "AgentMessageItem",
    "ReasoningItem",
    "CommandExecutionItem",
    "FileChangeItem",
    "FileUpdateChange",
    "PatchChangeKind",
    "PlanItem",
    "ContextCompactionItem",
    "UnknownItem",
    "TokenUsageBreakdown",
    "ThreadTokenUsage",
    "ThreadSettings",
    # notifications
    "ThreadStartedParams",
    "ThreadStatusChangedParams",
    "ThreadSettingsUpdatedParams",
    "ThreadNameUpdatedParams",
    "ThreadTokenUsageUpdatedParams",
    "TurnStartedParams",
    "TurnCompletedParams",
    "TurnDiffUpdatedParams",
    "TurnPlanUpdatedParams",
    "ItemStartedParams",
    "ItemCompletedParams",
    "ItemDeltaParams",
    "ReasoningSummaryTextDeltaParams",
    "ReasoningSummaryPartAddedParams",
    "ReasoningTextDeltaParams",
    "ServerRequestResolvedParams",
    "ErrorParams",
    "WarningParams",
    "ConfigWarningParams",
    "DeprecationNoticeParams",
    # server requests
    "CommandExecutionRequestApprovalParams",
    "FileChangeRequestApprovalParams",
    "PermissionsRequestApprovalParams",
    "ToolRequestUserInputParams",
    "ToolRequestUserInputQuestion",
    "ToolRequestUserInputOption",
    "McpServerElicitationRequestParams",
    "DynamicToolCallParams",
    "ExecCommandApprovalParams",
    "ApplyPatchApprovalParams",
    # results
    "InitializeResult",
    "ThreadStartResult",
    "ThreadReadResult",
    "ThreadListResult",
    "ThreadTurnsListResult",
    "ThreadItemsListResult",
    "ThreadItemEntry",
    "TurnStartResult",
    "EmptyResult",
    # tables and decoders
    "NOTIFICATION_TYPES",
    "SERVER_REQUEST_TYPES",
    "RESULT_TYPES",
    "CLIENT_REQUEST_METHODS",
    "ITEM_TYPES",
    "decode_item",
    "decode_notification_params",
    "decode_server_request_params",
    "decode_result",
    "decode_typed_result",
]


class _Wire(msgspec.Struct, rename="camel", kw_only=True):
    """Base: camelCase on the wire, unknown fields ignored, keyword-only construction.

    ``__schema__`` names the schema definition (``v2/<Name>`` or a top-level ``<Name>``) the
    field names are checked against."""

    __schema__: ClassVar[str] = ""


def _decode_raw_items(raws: list[Raw]) -> list["ThreadItem"]:
    return [decode_item(r) for r in raws]


# -- threads and turns --------------------------------------------------------------------------


class ThreadStatus(_Wire):
    """``{type: notLoaded|idle|systemError|active, activeFlags?}`` as one tolerant struct."""

    __schema__ = "v2/ThreadStatus"
    type: str
    active_flags: list[str] = []


class TurnError(_Wire):
    """``turn.error`` and the ``error`` notification's payload. ``codex_error_info`` is a string
    (``"other"``, ``"internalServerError"`` …) or an object for the structured variants."""

    __schema__ = "v2/TurnError"
    message: str
    codex_error_info: Any = None
    additional_details: str | None = None
    misalignment: Any = None  # absent before 0.169


class Turn(_Wire):
    __schema__ = "v2/Turn"
    id: str
    status: str  # completed | interrupted | failed | inProgress (others passed through)
    items_raw: list[Raw] = msgspec.field(default_factory=list, name="items")
    error: TurnError | None = None
    items_view: str | None = None
    root_turn_id: str | None = None
    started_at: int | None = None
    completed_at: int | None = None
    duration_ms: int | None = None

    @property
    def items(self) -> list["ThreadItem"]:
        """The items, decoded now (call once and keep the list)."""
        return _decode_raw_items(self.items_raw)


class Thread(_Wire):
    __schema__ = "v2/Thread"
    id: str
    session_id: str | None = None
    preview: str = ""
    ephemeral: bool = False
    model_provider: str | None = None
    model: str | None = None  # absent before 0.169
    created_at: int | None = None
    updated_at: int | None = None
    status: ThreadStatus | None = None
    path: str | None = None
    cwd: str | None = None
    cli_version: str | None = None
    source: Any = None
    name: str | None = None
    turns: list[Turn] = []
    parent_thread_id: str | None = None
    forked_from_id: str | None = None
    history_mode: str | None = None
    agent_nickname: str | None = None
    agent_role: str | None = None
    originator: str | None = None
    can_accept_direct_input: bool | None = None


class TokenUsageBreakdown(_Wire):
    __schema__ = "v2/TokenUsageBreakdown"
    total_tokens: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0


class ThreadTokenUsage(_Wire):
    __schema__ = "v2/ThreadTokenUsage"
    total: TokenUsageBreakdown
    last: TokenUsageBreakdown
    model_context_window: int | None = None


class ThreadSettings(_Wire):
    """The *effective* settings of ``thread/settings/updated`` (R-SET-1). Union-typed settings
    (approval policy, sandbox policy, collaboration mode …) stay plain JSON values."""

    __schema__ = "v2/ThreadSettings"
    approval_policy: Any = None
    approvals_reviewer: Any = None
    sandbox_policy: Any = None
    collaboration_mode: Any = None
    cwd: str | None = None
    model: str | None = None
    model_provider: str | None = None
    effort: str | None = None
    summary: Any = None
    service_tier: str | None = None
    personality: Any = None
    active_permission_profile: Any = None
    disabled_plugin_ids: list[str] = []
    environments: Any = None
    multi_agent_mode: Any = None


# -- items ----------------------------------------------------------------------------------------


class _Item(_Wire, tag_field="type"):
    __schema__ = "v2/ThreadItem"
    id: str
    started_at_ms: int | None = None
    completed_at_ms: int | None = None


class UserMessageItem(_Item, tag="userMessage"):
    content: list[dict[str, Any]] = []  # UserInput variants; ``text_elements`` is snake_case
    client_id: str | None = None  # echoes turn/start's clientUserMessageId (R-OP-7)

    @property
    def text(self) -> str:
        return "".join(c.get("text", "") for c in self.content if c.get("type") == "text")


class AgentMessageItem(_Item, tag="agentMessage"):
    text: str = ""
    phase: str | None = None
    moderation: Any = None
    memory_citation: Any = None
    delivery: Any = None
    questions: Any = None


class ReasoningItem(_Item, tag="reasoning"):
    summary: list[str] = []
    content: list[str] = []


class CommandExecutionItem(_Item, tag="commandExecution"):
    command: str = ""
    cwd: str | None = None
    status: str | None = None  # inProgress | completed | failed | declined (unknown → passed up)
    command_actions: list[dict[str, Any]] = []
    aggregated_output: str | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    process_id: str | None = None
    source: str | None = None


class PatchChangeKind(msgspec.Struct):
    """``{type: add|delete|update, move_path?}`` — snake_case ``move_path`` on the wire."""

    __schema__: ClassVar[str] = "v2/PatchChangeKind"
    type: str
    move_path: str | None = None


class FileUpdateChange(_Wire):
    __schema__ = "v2/FileUpdateChange"
    path: str
    kind: PatchChangeKind
    diff: str = ""


class FileChangeItem(_Item, tag="fileChange"):
    changes: list[FileUpdateChange] = []
    status: str | None = None


class PlanItem(_Item, tag="plan"):
    text: str = ""


class ContextCompactionItem(_Item, tag="contextCompaction"):
    pass


class UnknownItem(msgspec.Struct, kw_only=True):
    """An item whose ``type`` codexrt does not model (or that failed to decode: ``decode_error``).
    ``data`` is the item's full JSON object."""

    type: str | None
    id: str | None
    data: dict[str, Any]
    decode_error: str | None = None


ThreadItem = Union[UserMessageItem, AgentMessageItem, ReasoningItem, CommandExecutionItem, FileChangeItem,
                   PlanItem, ContextCompactionItem, UnknownItem]

#: item ``type`` tag → model class
ITEM_TYPES: dict[str, type[_Item]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (UserMessageItem, AgentMessageItem, ReasoningItem, CommandExecutionItem, FileChangeItem,
                PlanItem, ContextCompactionItem)
}


class _TypeTag(msgspec.Struct):
    type: Union[str, None] = None


_TAG_DECODER = msgspec.json.Decoder(_TypeTag)
_ITEM_DECODERS = {tag: msgspec.json.Decoder(cls) for tag, cls in ITEM_TYPES.items()}


def decode_item(data: bytes | Raw | dict[str, Any]) -> ThreadItem:
    """Decode one ``ThreadItem``; never raises for a well-formed JSON object.

    An unknown ``type``, or a known one whose fields do not fit, gives :class:`UnknownItem`
    (with ``decode_error`` set in the second case, so the problem stays visible)."""
    if isinstance(data, dict):
        data = msgspec.json.encode(data)
    tag = _TAG_DECODER.decode(data).type
    dec = _ITEM_DECODERS.get(tag) if tag is not None else None
    err: str | None = None
    if dec is not None:
        try:
            return dec.decode(data)
        except msgspec.ValidationError as exc:
            err = str(exc)
    obj = msgspec.json.decode(data)
    if not isinstance(obj, dict):
        raise msgspec.ValidationError(f"a ThreadItem must be an object, got {type(obj).__name__}")
    item_id = obj.get("id")
    return UnknownItem(type=tag, id=item_id if isinstance(item_id, str) else None, data=obj, decode_error=err)


# -- notification params ---------------------------------------------------------------------------


class ThreadStartedParams(_Wire):
    __schema__ = "v2/ThreadStartedNotification"
    thread: Thread


class ThreadStatusChangedParams(_Wire):
    __schema__ = "v2/ThreadStatusChangedNotification"
    thread_id: str
    status: ThreadStatus


class ThreadSettingsUpdatedParams(_Wire):
    __schema__ = "v2/ThreadSettingsUpdatedNotification"
    thread_id: str
    thread_settings: ThreadSettings


class ThreadNameUpdatedParams(_Wire):
    __schema__ = "v2/ThreadNameUpdatedNotification"
    thread_id: str
    thread_name: str | None = None


class ThreadTokenUsageUpdatedParams(_Wire):
    __schema__ = "v2/ThreadTokenUsageUpdatedNotification"
    thread_id: str
    turn_id: str
    token_usage: ThreadTokenUsage


class TurnStartedParams(_Wire):
    __schema__ = "v2/TurnStartedNotification"
    thread_id: str
    turn: Turn


class TurnCompletedParams(_Wire):
    __schema__ = "v2/TurnCompletedNotification"
    thread_id: str
    turn: Turn


class TurnDiffUpdatedParams(_Wire):
    __schema__ = "v2/TurnDiffUpdatedNotification"
    thread_id: str
    turn_id: str
    diff: str = ""


class TurnPlanUpdatedParams(_Wire):
    __schema__ = "v2/TurnPlanUpdatedNotification"
    thread_id: str
    turn_id: str
    plan: list[dict[str, Any]] = []
    explanation: str | None = None


class ItemStartedParams(_Wire):
    __schema__ = "v2/ItemStartedNotification"
    thread_id: str
    turn_id: str
    item_raw: Raw = msgspec.field(name="item")
    started_at_ms: int | None = None

    @property
    def item(self) -> ThreadItem:
        return decode_item(self.item_raw)


class ItemCompletedParams(_Wire):
    __schema__ = "v2/ItemCompletedNotification"
    thread_id: str
    turn_id: str
    item_raw: Raw = msgspec.field(name="item")
    completed_at_ms: int | None = None
    content_token_count: int | None = None

    @property
    def item(self) -> ThreadItem:
        return decode_item(self.item_raw)


class ItemDeltaParams(_Wire):
    """``item/agentMessage/delta``, ``item/commandExecution/outputDelta``, ``item/plan/delta``,
    ``item/fileChange/outputDelta`` — all ``{threadId, turnId, itemId, delta}``."""

    __schema__ = "v2/AgentMessageDeltaNotification"
    thread_id: str
    turn_id: str
    item_id: str
    delta: str


class ReasoningSummaryTextDeltaParams(_Wire):
    __schema__ = "v2/ReasoningSummaryTextDeltaNotification"
    thread_id: str
    turn_id: str
    item_id: str
    delta: str
    summary_index: int = 0


class ReasoningSummaryPartAddedParams(_Wire):
    __schema__ = "v2/ReasoningSummaryPartAddedNotification"
    thread_id: str
    turn_id: str
    item_id: str
    summary_index: int = 0


class ReasoningTextDeltaParams(_Wire):
    __schema__ = "v2/ReasoningTextDeltaNotification"
    thread_id: str
    turn_id: str
    item_id: str
    delta: str
    content_index: int = 0


class ServerRequestResolvedParams(_Wire):
    """Closes a pending server request, also one the client never answered (R-INT-1, R-INT-2).
    ``request_id`` keeps its JSON type (R-WIRE-2)."""

    __schema__ = "v2/ServerRequestResolvedNotification"
    thread_id: str
    request_id: Union[int, str]


class ErrorParams(_Wire):
    """The ``error`` notification: not terminal by itself (R-OP-4); ``will_retry`` says whether
    codex retries."""

    __schema__ = "v2/ErrorNotification"
    error: TurnError
    will_retry: bool = False
    thread_id: str | None = None
    turn_id: str | None = None


class WarningParams(_Wire):
    __schema__ = "v2/WarningNotification"
    message: str
    thread_id: str | None = None


class ConfigWarningParams(_Wire):
    __schema__ = "v2/ConfigWarningNotification"
    summary: str
    details: str | None = None
    path: str | None = None
    range: Any = None


class DeprecationNoticeParams(_Wire):
    __schema__ = "v2/DeprecationNoticeNotification"
    summary: str
    details: str | None = None


# -- server request params -----------------------------------------------------------------------


class CommandExecutionRequestApprovalParams(_Wire):
    """``item/commandExecution/requestApproval``. ``available_decisions`` holds strings and
    objects (``{"acceptWithExecpolicyAmendment": …}``); the real server also accepts ``decline``
    when it is not listed (see docs/real-server-notes.md)."""

    __schema__ = "CommandExecutionRequestApprovalParams"
    thread_id: str
    turn_id: str
    item_id: str
    started_at_ms: int | None = None
    kind: Any = None  # "command" | "writeStdin" | object; absent in 0.147
    approval_id: str | None = None
    command: str | None = None
    cwd: str | None = None
    reason: str | None = None
    command_actions: list[dict[str, Any]] | None = None
    available_decisions: list[Any] | None = None
    proposed_execpolicy_amendment: list[str] | None = None
    proposed_network_policy_amendments: list[Any] | None = None
    network_approval_context: Any = None
    additional_permissions: Any = None
    environment_id: str | None = None


class FileChangeRequestApprovalParams(_Wire):
    __schema__ = "FileChangeRequestApprovalParams"
    thread_id: str
    turn_id: str
    item_id: str
    started_at_ms: int | None = None
    reason: str | None = None
    grant_root: str | None = None


class PermissionsRequestApprovalParams(_Wire):
    __schema__ = "PermissionsRequestApprovalParams"
    thread_id: str
    turn_id: str
    item_id: str
    started_at_ms: int | None = None
    cwd: str | None = None
    permissions: dict[str, Any] = {}
    reason: str | None = None
    environment_id: str | None = None


class ToolRequestUserInputOption(_Wire):
    __schema__ = "ToolRequestUserInputOption"
    label: str
    description: str = ""


class ToolRequestUserInputQuestion(_Wire):
    __schema__ = "ToolRequestUserInputQuestion"
    id: str
    header: str = ""
    question: str = ""
    is_other: bool = False
    is_secret: bool = False  # R-PRIV-1: never store the answer
    options: list[ToolRequestUserInputOption] | None = None


class ToolRequestUserInputParams(_Wire):
    __schema__ = "ToolRequestUserInputParams"
    thread_id: str
    turn_id: str
    item_id: str
    questions: list[ToolRequestUserInputQuestion] = []
    is_blocking: bool = True
    auto_resolution_ms: int | None = None


class McpServerElicitationRequestParams(_Wire):
    """``mcpServer/elicitation/request``: one struct over the schema's ``mode`` variants
    (``form``, ``url``, ``openai/form``, ``openaiForm``, ``openai/userVerification``)."""

    __schema__ = "McpServerElicitationRequestParams"
    server_name: str
    thread_id: str
    turn_id: str | None = None
    mode: str | None = None
    message: str | None = None
    requested_schema: Any = None
    url: str | None = None
    elicitation_id: str | None = None
    title: str | None = None
    description: str | None = None
    challenge: str | None = None
    meta: Any = msgspec.field(default=None, name="_meta")


class DynamicToolCallParams(_Wire):
    __schema__ = "DynamicToolCallParams"
    thread_id: str
    turn_id: str
    call_id: str
    tool: str
    namespace: str | None = None
    arguments: Any = None



class ExecCommandApprovalParams(_Wire):
    """Legacy ``execCommandApproval`` (deprecated SendUserTurn APIs, which codexrt never uses)."""

    __schema__ = "ExecCommandApprovalParams"
    conversation_id: str
    call_id: str
    approval_id: str | None = None
    command: list[str] = []
    cwd: str | None = None
    reason: str | None = None
    parsed_cmd: list[Any] = []


class ApplyPatchApprovalParams(_Wire):
    """Legacy ``applyPatchApproval`` (deprecated SendUserTurn APIs, which codexrt never uses)."""

    __schema__ = "ApplyPatchApprovalParams"
    conversation_id: str
    call_id: str
    file_changes: dict[str, Any] = {}
    reason: str | None = None
    grant_root: str | None = None

# -- results ---------------------------------------------------------------------------------------


class InitializeResult(_Wire):
    __schema__ = "InitializeResponse"
    user_agent: str
    codex_home: str | None = None
    platform_family: str | None = None
    platform_os: str | None = None


class ThreadStartResult(_Wire):
    """Result of ``thread/start``, ``thread/resume`` and ``thread/fork`` (same core fields)."""

    __schema__ = "v2/ThreadStartResponse"
    thread: Thread
    model: str | None = None
    model_provider: str | None = None
    cwd: str | None = None
    approval_policy: Any = None
    approvals_reviewer: Any = None
    sandbox: Any = None
    reasoning_effort: str | None = None
    service_tier: str | None = None


class ThreadReadResult(_Wire):
    __schema__ = "v2/ThreadReadResponse"
    thread: Thread
    read_state: Any = None


class ThreadListResult(_Wire):
    __schema__ = "v2/ThreadListResponse"
    data: list[Thread] = []
    next_cursor: str | None = None
    backwards_cursor: str | None = None
    read_states: dict[str, Any] | None = None


class ThreadTurnsListResult(_Wire):
    __schema__ = "v2/ThreadTurnsListResponse"
    data: list[Turn] = []
    next_cursor: str | None = None
    backwards_cursor: str | None = None


class ThreadItemEntry(_Wire):
    __schema__ = "v2/ThreadItemEntry"
    turn_id: str
    item_raw: Raw = msgspec.field(name="item")
    started_at_ms: int | None = None
    completed_at_ms: int | None = None
    output_deferred: bool = False

    @property
    def item(self) -> ThreadItem:
        return decode_item(self.item_raw)


class ThreadItemsListResult(_Wire):
    __schema__ = "v2/ThreadItemsListResponse"
    data: list[ThreadItemEntry] = []
    next_cursor: str | None = None
    backwards_cursor: str | None = None


class TurnStartResult(_Wire):
    __schema__ = "v2/TurnStartResponse"
    turn: Turn


class EmptyResult(_Wire):
    """``{}`` results (``turn/interrupt``, ``thread/settings/update``, ``thread/name/set``)."""

    __schema__ = "v2/TurnInterruptResponse"


# -- tables -----------------------------------------------------------------------------------------

#: notification method → params model (others: pass through untouched)
NOTIFICATION_TYPES: dict[str, type[msgspec.Struct]] = {
    "thread/started": ThreadStartedParams,
    "thread/status/changed": ThreadStatusChangedParams,
    "thread/settings/updated": ThreadSettingsUpdatedParams,
    "thread/name/updated": ThreadNameUpdatedParams,
    "thread/tokenUsage/updated": ThreadTokenUsageUpdatedParams,
    "turn/started": TurnStartedParams,
    "turn/completed": TurnCompletedParams,
    "turn/diff/updated": TurnDiffUpdatedParams,
    "turn/plan/updated": TurnPlanUpdatedParams,
    "item/started": ItemStartedParams,
    "item/completed": ItemCompletedParams,
    "item/agentMessage/delta": ItemDeltaParams,
    "item/commandExecution/outputDelta": ItemDeltaParams,
    "item/fileChange/outputDelta": ItemDeltaParams,
    "item/plan/delta": ItemDeltaParams,
    "item/reasoning/summaryTextDelta": ReasoningSummaryTextDeltaParams,
    "item/reasoning/summaryPartAdded": ReasoningSummaryPartAddedParams,
    "item/reasoning/textDelta": ReasoningTextDeltaParams,
    "serverRequest/resolved": ServerRequestResolvedParams,
    "error": ErrorParams,
    "warning": WarningParams,
    "configWarning": ConfigWarningParams,
    "deprecationNotice": DeprecationNoticeParams,
}

#: server→client request method → params model (others get -32601, R-WIRE-7)
SERVER_REQUEST_TYPES: dict[str, type[msgspec.Struct]] = {
    "item/commandExecution/requestApproval": CommandExecutionRequestApprovalParams,
    "item/fileChange/requestApproval": FileChangeRequestApprovalParams,
    "item/permissions/requestApproval": PermissionsRequestApprovalParams,
    "item/tool/requestUserInput": ToolRequestUserInputParams,
    "mcpServer/elicitation/request": McpServerElicitationRequestParams,
    "item/tool/call": DynamicToolCallParams,
    "execCommandApproval": ExecCommandApprovalParams,
    "applyPatchApproval": ApplyPatchApprovalParams,
}

#: client request method → result model
RESULT_TYPES: dict[str, type[msgspec.Struct]] = {
    "initialize": InitializeResult,
    "thread/start": ThreadStartResult,
    "thread/resume": ThreadStartResult,
    "thread/fork": ThreadStartResult,
    "thread/read": ThreadReadResult,
    "thread/list": ThreadListResult,
    "thread/turns/list": ThreadTurnsListResult,
    "thread/items/list": ThreadItemsListResult,
    "turn/start": TurnStartResult,
    "turn/interrupt": EmptyResult,
    "thread/settings/update": EmptyResult,
    "thread/name/set": EmptyResult,
}

#: the client request methods codexrt sends (each checked to exist in the pinned schema)
CLIENT_REQUEST_METHODS: frozenset[str] = frozenset({
    "initialize",
    "thread/start", "thread/resume", "thread/fork", "thread/read", "thread/list", "thread/loaded/list",
    "thread/turns/list", "thread/items/list", "thread/name/set", "thread/settings/update",
    "thread/compact/start", "thread/archive", "thread/unsubscribe",
    "turn/start", "turn/steer", "turn/interrupt",
    "review/start",
    "model/list", "skills/list", "mcpServerStatus/list", "config/mcpServer/reload", "collaborationMode/list",
    "modelProvider/list", "account/read", "config/read",
})

_DECODERS: dict[type[msgspec.Struct], msgspec.json.Decoder[Any]] = {
    t: msgspec.json.Decoder(t)
    for t in {*NOTIFICATION_TYPES.values(), *SERVER_REQUEST_TYPES.values(), *RESULT_TYPES.values()}
}


def _decode(table: dict[str, type[msgspec.Struct]], method: str, data: bytes | Raw) -> Any:
    t = table.get(method)
    if t is None:
        return None
    return _DECODERS[t].decode(data)


def decode_notification_params(method: str, params: bytes | Raw) -> Any:
    """The typed params of notification ``method``; ``None`` if the method is not modelled.
    Raises ``msgspec.ValidationError`` when a modelled payload lacks a required identity."""
    return _decode(NOTIFICATION_TYPES, method, params)


def decode_server_request_params(method: str, params: bytes | Raw) -> Any:
    """The typed params of server request ``method``; ``None`` if the method is not modelled."""
    return _decode(SERVER_REQUEST_TYPES, method, params)


def decode_result(method: str, result: bytes | Raw) -> Any:
    """The typed result of client request ``method``; ``None`` if not modelled."""
    return _decode(RESULT_TYPES, method, result)


def decode_typed_result(method: str, result: bytes | Raw) -> Any:
    """:func:`decode_result` for a method that has a model, at the boundary where the wire is
    read (``Connection.call(..., typed=True)``): an answer that does not fit is a
    :class:`~codexrt._sansio._errors.RemoteProtocolError` saying where (``at $.thread.status``)."""
    if method not in RESULT_TYPES:
        raise LocalProtocolError(f"no result model for {method}", details={"method": method})
    try:
        return _decode(RESULT_TYPES, method, result)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise RemoteProtocolError(f"{method} answered with an unexpected shape: {exc}",
                                  details={"method": method}) from None
