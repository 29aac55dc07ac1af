"""The ``codexrt serve`` commands as types: one msgspec Struct per command's params and one
:data:`COMMANDS` table (name → params type, lane). Pure: no trio, no I/O.

Decoding a command's params into its Struct *is* the validation (``msgspec.convert``, strict):
types, required and unknown fields, lengths, patterns and numeric ranges (``Meta(ge=…, le=…)``)
are all stated here, once. The ``commandParams`` part of the shipped JSON Schema is generated
from these Structs (:mod:`codexrt._serve._schema`), so the docs, the parser and the schema
cannot disagree. A few commands pass keys they do not name through to the native method
(``forbid_unknown_fields=False``); the handlers read the params as the host sent them
(:attr:`codexrt._serve._codec.Command.params`), the decoded Struct is
:attr:`~codexrt._serve._codec.Command.args`.

Field names are the wire's camelCase (``rename="camel"``). A field whose absence means something
other than ``null`` (``codexHome``, ``openReview.sessionId`` …) defaults to ``UNSET``.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from codexrt._sansio._wire import MAX_INPUT_CHARS

__all__ = [
    "COMMANDS",
    "CommandSpec",
    "Lane",
    "ALL_COMMANDS",
    "LONG_COMMANDS",
    "CONTROL_COMMANDS",
    "LIFECYCLE_COMMANDS",
    "LAUNCH_COMMANDS",
    "READ_ONLY_COMMANDS",
    "READ_ONLY_METHODS",
    "CATALOG_COMMANDS",
    "HELPER_COMMANDS",
    "WORKSPACE_COMMANDS",
    "SCHEMA_EXTRA_DEFS",
    "PARAMS_EXTRA_SCHEMA",
    "STRUCT_EXTRA_SCHEMA",
    "check_context",
]

# -- shared field types ---------------------------------------------------------------------

#: Longest identifier a host may send (thread, turn, item, ticket, session, operation and
#: channel ids, interaction keys, dialog tokens): the sidecar keeps such strings in tables, so
#: they are refused at the edge instead of being kept (issue 35; native ids are 36-character
#: UUIDs). Paths (cwd, codexHome, codexBin, file paths) are at most PATH_MAX, secrets 16 KiB.
MAX_ID_CHARS = 1024
MAX_PATH_CHARS = 4096
MAX_SECRET_CHARS = 16 * 1024
#: The end of the string in both Python's ``re.search`` and ECMAScript (``$`` also matches
#: before a final newline in Python: ``"FOO\n"`` passed as an env name, issue 35).
_END = r"(?![\s\S])"

NonEmpty = Annotated[str, Meta(min_length=1)]
Id = Annotated[str, Meta(min_length=1, max_length=MAX_ID_CHARS)]
OptId = Annotated[str, Meta(max_length=MAX_ID_CHARS)]
PathStr = Annotated[str, Meta(min_length=1, max_length=MAX_PATH_CHARS)]
OptPath = Annotated[str, Meta(max_length=MAX_PATH_CHARS)]
ChannelId = Annotated[str, Meta(min_length=1, max_length=MAX_ID_CHARS,
                                description="One runtime (one app-server child) per channel.")]
EnvName = Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*" + _END, max_length=256)]
HeaderName = Annotated[str, Meta(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+" + _END, max_length=256)]
SecretValue = Annotated[str, Meta(max_length=MAX_SECRET_CHARS)]
PageSize = Annotated[int, Meta(ge=1, le=10_000, description="Page size, 1 … 10000.")]
MaxPages = Annotated[int, Meta(ge=1, le=100_000, description="At most this many pages are walked (1 … 100000).")]
Seconds = Annotated[float, Meta(gt=0, le=3600, description="Seconds, > 0 and at most 3600.")]
LineNo = Annotated[int, Meta(ge=1, le=2**31 - 1)]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]


class _Params(Struct, forbid_unknown_fields=True, rename="camel", omit_defaults=True):
    """A strict wire object: unknown fields are refused."""


class _OpenParams(_Params, forbid_unknown_fields=False):
    """Keys it does not name are passed to the native method unchanged."""


# -- nested objects -------------------------------------------------------------------------


class TurnSettings(_Params):
    """Desired per-turn settings (``codex.send`` ``settings``, ``codex.updateSettings``)."""

    model: str | None = None
    effort: str | None = None
    approval_policy: Literal["untrusted", "on-failure", "on-request", "never"] | None = None
    sandbox: SandboxMode | None = None
    sandbox_mode: SandboxMode | None = None
    developer_instructions: str | None = None
    cwd: OptPath | None = None
    summary: str | None = None
    personality: str | None = None
    collaboration_mode: dict[str, Any] | None = None


class ContextFragment(_Params):
    """One ``turn/start.additionalContext`` fragment."""

    kind: Literal["application", "untrusted"]
    value: str
    name: str | None = None


class LineRange(_Params):
    start: LineNo
    end: LineNo


class ActiveFile(_Params):
    path: str
    selection: LineRange | None = None


class WorkspaceFolders(_Params):
    folders: list[str] = []
    name: str | None = None


class ReferencedFile(_Params):
    path: str
    lines: LineRange | None = None


class Terminal(_Params):
    name: str
    cwd: OptPath | None = None
    output: str | None = None


class EditorState(_Params):
    """IDE editor state; codexrt builds the additionalContext fragments from it (R-CTX-1).
    See docs/daemon-protocol.md#codexsend."""

    active_file: ActiveFile | None = None
    open_tabs: list[str] | None = None
    workspace: WorkspaceFolders | None = None
    referenced_files: list[ReferencedFile] | None = None
    terminals: list[Terminal] | None = None


class SkillRef(_Params):
    name: NonEmpty
    path: NonEmpty
    cwd: OptPath | None = None


class EditKey(_Params):
    """Operation identity of one file's change (R-EDIT-1). In params threadId may be left out
    (the command's threadId); path is the native path of the change (absolute in practice)."""

    turn_id: OptId
    item_id: OptId
    path: PathStr
    thread_id: Id | UnsetType = UNSET


class RpcError(_Params):
    code: Int32
    message: str


class Provider(_Params):
    id: Annotated[str, Meta(pattern=r"^[A-Za-z0-9_-]+" + _END, max_length=256)]
    base_url: PathStr
    env_key: EnvName
    name: str | UnsetType = UNSET
    wire_api: NonEmpty | UnsetType = UNSET
    headers: Annotated[dict[HeaderName, SecretValue], Meta(
        description="HTTP headers; values are secret (sent to the child by environment, never on its command "
                    "line)")] | UnsetType = UNSET
    query_params: Annotated[dict[str, str], Meta(
        description="URL query parameters (not secret: passed as -c overrides)")] | UnsetType = UNSET


def check_context(value: dict[str, Any]) -> None:
    """``codex.send`` ``context`` is a fragment map or an editor state (a union msgspec cannot
    state: both are objects). Decided like the handler decides (``is_fragment_map``: every
    entry has ``kind`` and ``value``, or some entry looks like a fragment), then decoded as
    that; raises :class:`msgspec.ValidationError` with the path under ``$.context``."""
    fragments = bool(value) and all(isinstance(v, dict) and ("kind" in v or "value" in v) for v in value.values())
    try:
        msgspec.convert(value, dict[str, ContextFragment] if fragments else EditorState)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if " - at `$" in text:
            raise msgspec.ValidationError(text.replace(" - at `$", " - at `$.context", 1)) from None
        raise msgspec.ValidationError(f"{text} - at `$.context`") from None


# -- params, one Struct per command -----------------------------------------------------------


class SendParams(_Params):
    channel_id: ChannelId
    message: Annotated[str, Meta(max_length=MAX_INPUT_CHARS, description=(
        "The user's text only; at most 1048576 characters (the app-server's input limit), checked "
        "before anything is created."))]
    thread_id: OptId | None = None
    client_message_id: OptId | None = None
    images: list[NonEmpty] = []
    cwd: OptPath | None = None
    settings: TurnSettings | None = None
    # additionalContext fragments or an editor state (see check_context; schema: SCHEMA_EXTRA_DEFS)
    context: dict[str, Any] | None = None
    skills: Annotated[list[SkillRef], Meta(
        description="Selected skills, sent as native skill input items ({type: skill, name, path}).")] = []

    def __post_init__(self) -> None:
        if self.context is not None:
            check_context(self.context)


class CompactParams(_Params):
    channel_id: ChannelId
    thread_id: Id


class ReviewParams(_Params):
    channel_id: ChannelId
    thread_id: Id
    target: dict[str, Any] | None = None


class PreconnectParams(_Params):
    channel_id: ChannelId
    thread_id: OptId | None = None


class UpdateSettingsParams(_Params):
    channel_id: ChannelId
    settings: TurnSettings


class RespondInteractionParams(_Params):
    interaction_key: Id
    dialog_token: Id
    result: Any
    channel_id: ChannelId | UnsetType = UNSET


class RespondInteractionErrorParams(_Params):
    interaction_key: Id
    dialog_token: Id
    error: RpcError
    channel_id: ChannelId | UnsetType = UNSET


class AbortTurnParams(_Params):
    channel_id: ChannelId
    client_operation_id: OptId | None = None


class ThreadParams(_Params):
    """``codex.releaseThread``."""

    channel_id: ChannelId
    thread_id: Id


class ChannelParams(_Params):
    """Commands that name only their channel."""

    channel_id: ChannelId


class StatusParams(_Params):
    channel_id: ChannelId | UnsetType = UNSET


class ListThreadsParams(_OpenParams):
    channel_id: ChannelId
    limit: PageSize | None = None


class ReadThreadParams(_OpenParams):
    channel_id: ChannelId
    thread_id: Id
    display: bool = False


class ReadHistoryPageParams(_OpenParams):
    channel_id: ChannelId
    thread_id: Id
    limit: PageSize | None = None
    sort_direction: str | None = None
    scope: Literal["turns", "items"] = "turns"


class CountThreadMessagesParams(_Params):
    channel_id: ChannelId
    thread_id: Id
    updated_at: Annotated[str | int | None, Meta(
        description="The thread's updatedAt as the host's list showed it; a count made for another metadata "
                    "version comes back with stale: true (R-H-7).")] = None


class ReadSubagentParams(_Params):
    channel_id: ChannelId
    thread_id: Id
    parent_thread_id: OptId | None = None


class ListModelsParams(_OpenParams):
    """Walks every page (R-CAT-1): includeHidden, modelProvider, limit (page size), cursor, maxPages."""

    channel_id: ChannelId
    limit: PageSize | None = None
    max_pages: MaxPages | UnsetType = UNSET
    include_hidden: bool = False
    model_provider: str | None = None


class ListSkillsParams(_OpenParams):
    channel_id: ChannelId
    cwds: list[str] | None = None
    cwd: OptPath | None = None
    force_reload: bool = False
    selected: Annotated[list[SkillRef], Meta(
        description="The host's selected skills, checked against this refresh: kept ones come back in selected, "
                    "the others in stale.")] | UnsetType = UNSET


class GetMcpStatusParams(_OpenParams):
    channel_id: ChannelId
    limit: PageSize | None = None
    max_pages: MaxPages | UnsetType = UNSET
    thread_id: OptId | None = None
    server_name: str | None = None


class ReadWorkspaceDiffParams(_Params):
    cwd: PathStr
    channel_id: ChannelId | UnsetType = UNSET
    session_id: OptId | None = None
    max_bytes: Annotated[int, Meta(ge=1, le=2**30)] | None = None
    timeout: Seconds | None = None


class GenerateTitleParams(_Params):
    channel_id: ChannelId
    message: NonEmpty
    thread_id: OptId | None = None
    save: bool = True
    cwd: OptPath | None = None
    timeout: Seconds | None = None


class EnhancePromptParams(_Params):
    channel_id: ChannelId
    prompt: NonEmpty
    cwd: OptPath | None = None
    timeout: Seconds | None = None


class GenerateCommitMessageParams(_Params):
    channel_id: ChannelId
    diff: str | None = None
    cwd: OptPath | None = None
    session_id: OptId | None = None
    timeout: Seconds | None = None


class ListEditsParams(_Params):
    channel_id: ChannelId
    thread_id: Id
    path: PathStr | UnsetType = UNSET
    pending_only: bool = False


def _exactly_one(params: Any, a: str, b: str) -> None:
    if (getattr(params, a) is UNSET) == (getattr(params, b) is UNSET):
        raise ValueError(f"give exactly one of `{a}` and `{b}`")


class OpenReviewParams(_Params):
    """Give path (every applied, not undone change whose target is that file) or keys. sessionId
    defaults to the thread's session; an explicit null is frozen as null and the decision is then
    refused (REVIEW_NO_SESSION)."""

    channel_id: ChannelId
    thread_id: Id
    path: PathStr | UnsetType = UNSET
    keys: Annotated[list[EditKey], Meta(min_length=1, max_length=1000)] | UnsetType = UNSET
    session_id: OptId | None | UnsetType = UNSET
    provider: str | None = None

    def __post_init__(self) -> None:
        _exactly_one(self, "path", "keys")


class TicketParams(_Params):
    """``codex.acceptReview`` / ``codex.rejectReview``."""

    channel_id: ChannelId
    thread_id: Id
    ticket_id: Id


class UndoFileParams(_Params):
    """path: every applied, not undone change of that file in the thread, newest first (relative
    paths are relative to the thread's recorded cwd); key: exactly one change."""

    channel_id: ChannelId
    thread_id: Id
    path: PathStr | UnsetType = UNSET
    key: EditKey | UnsetType = UNSET
    dry_run: bool = False
    allow_outside_workspace: bool = False

    def __post_init__(self) -> None:
        _exactly_one(self, "path", "key")


class ReplayInteractionsParams(_Params):
    """Control command (answered at once): the channel's pending interactions in
    deliverySequence order, each with a new dialogToken; the previous tokens are refused from now
    on (R-INT-2). Each is also re-sent as an interactionRequested event with payload.replayed =
    true."""

    channel_id: ChannelId


class ExecutePlanParams(_Params):
    """Execute the completed plan on offer for threadId (R-INT-5): single-flight, checks the
    thread/plan identity, queues one turn in the default collaboration mode (approval and sandbox
    unchanged). The reply comes when that turn ends; it always echoes
    requestType/requestId/threadId."""

    channel_id: ChannelId
    thread_id: Id
    plan_item_id: Id
    model: NonEmpty | UnsetType = UNSET


class ConfigureLaunchParams(_Params):
    """A new launch configuration (R-LC-1..3). Without channelId: the default for channels
    created later and every live one. apiKey is secret: it reaches the child only as the
    environment variable named by provider.envKey and is masked in every output."""

    access_mode: Literal["cli_login", "managed", "inactive"]
    channel_id: ChannelId | UnsetType = UNSET
    provider: Provider | UnsetType = UNSET
    api_key: Annotated[str, Meta(min_length=1, max_length=MAX_SECRET_CHARS, extra_json_schema={
        "writeOnly": True, "x-secret": True,
        "description": "SECRET. The provider's API key: only in the child's environment (provider.envKey); never "
                       "echoed, logged or written."})] | UnsetType = UNSET
    model: str | None = None
    codex_home: OptPath | None | UnsetType = UNSET
    codex_bin: OptPath | None | UnsetType = UNSET


# -- the table ------------------------------------------------------------------------------


class Lane(enum.Enum):
    """How the daemon runs a command (module doc of :mod:`codexrt._serve._daemon`)."""

    STATUS = "status"  #: answered by the reader at once
    CONTROL = "control"  #: answered by the reader at once, never queued (R-OP-1)
    LAUNCH = "launch"  #: answered at once; the rebuild runs on the channel's FIFO (R-LC-1..3)
    INTERACTION = "interaction"  #: replay at once; executePlan queues a turn (R-INT-2, R-INT-5)
    LONG = "long"  #: queued on the channel's FIFO in line order; replied at its terminal
    LIFECYCLE = "lifecycle"  #: own task; stops work, never takes the FIFO (R-D-1)
    READ = "read"  #: own task; the runtime's connection, never the FIFO or a resume (R-D-1)
    EDIT = "edit"  #: own task; the channel's edit ledgers (R-EDIT-1..3)
    HELPER = "helper"  #: own task on its own ephemeral child (R-HLP-1..3)
    WORKSPACE = "workspace"  #: own task; git only, no Codex process, also when inactive (R-DIFF-1)


class CommandSpec(Struct, frozen=True):
    name: str
    params: type[_Params]
    lane: Lane
    #: the native method a read calls (``codex.readHistoryPage`` picks one by ``scope``)
    method: str | None = None


_SPECS = [
    CommandSpec("codex.send", SendParams, Lane.LONG),
    CommandSpec("codex.compact", CompactParams, Lane.LONG),
    CommandSpec("codex.review", ReviewParams, Lane.LONG),
    CommandSpec("codex.preconnect", PreconnectParams, Lane.LONG),
    CommandSpec("codex.updateSettings", UpdateSettingsParams, Lane.CONTROL),
    CommandSpec("codex.respondInteraction", RespondInteractionParams, Lane.CONTROL),
    CommandSpec("codex.respondInteractionError", RespondInteractionErrorParams, Lane.CONTROL),
    CommandSpec("codex.abortTurn", AbortTurnParams, Lane.CONTROL),
    CommandSpec("codex.releaseThread", ThreadParams, Lane.LIFECYCLE),
    CommandSpec("codex.resetRuntime", ChannelParams, Lane.LIFECYCLE),
    CommandSpec("codex.listThreads", ListThreadsParams, Lane.READ, "thread/list"),
    CommandSpec("codex.readThread", ReadThreadParams, Lane.READ, "thread/read"),
    CommandSpec("codex.readHistoryPage", ReadHistoryPageParams, Lane.READ, "thread/turns/list"),
    CommandSpec("codex.countThreadMessages", CountThreadMessagesParams, Lane.READ),
    CommandSpec("codex.readSubagent", ReadSubagentParams, Lane.READ, "thread/read"),
    CommandSpec("codex.listModels", ListModelsParams, Lane.READ, "model/list"),
    CommandSpec("codex.listSkills", ListSkillsParams, Lane.READ, "skills/list"),
    CommandSpec("codex.getMcpStatus", GetMcpStatusParams, Lane.READ, "mcpServerStatus/list"),
    CommandSpec("codex.reloadMcp", ChannelParams, Lane.READ, "config/mcpServer/reload"),
    CommandSpec("status", StatusParams, Lane.STATUS),
    CommandSpec("codex.readWorkspaceDiff", ReadWorkspaceDiffParams, Lane.WORKSPACE),
    CommandSpec("codex.generateTitle", GenerateTitleParams, Lane.HELPER),
    CommandSpec("codex.enhancePrompt", EnhancePromptParams, Lane.HELPER),
    CommandSpec("codex.generateCommitMessage", GenerateCommitMessageParams, Lane.HELPER),
    CommandSpec("codex.listEdits", ListEditsParams, Lane.EDIT),
    CommandSpec("codex.openReview", OpenReviewParams, Lane.EDIT),
    CommandSpec("codex.acceptReview", TicketParams, Lane.EDIT),
    CommandSpec("codex.rejectReview", TicketParams, Lane.EDIT),
    CommandSpec("codex.undoFile", UndoFileParams, Lane.EDIT),
    CommandSpec("codex.replayInteractions", ReplayInteractionsParams, Lane.INTERACTION),
    CommandSpec("codex.executePlan", ExecutePlanParams, Lane.INTERACTION),
    CommandSpec("codex.configureLaunch", ConfigureLaunchParams, Lane.LAUNCH),
]

#: Every command: name → (params type, lane, native method).
COMMANDS: dict[str, CommandSpec] = {spec.name: spec for spec in _SPECS}


def _lane(lane: Lane) -> frozenset[str]:
    return frozenset(name for name, spec in COMMANDS.items() if spec.lane is lane)


ALL_COMMANDS = frozenset(COMMANDS)
LONG_COMMANDS = _lane(Lane.LONG)
CONTROL_COMMANDS = _lane(Lane.CONTROL)
LIFECYCLE_COMMANDS = _lane(Lane.LIFECYCLE)
LAUNCH_COMMANDS = _lane(Lane.LAUNCH)
READ_ONLY_COMMANDS = _lane(Lane.READ)
HELPER_COMMANDS = _lane(Lane.HELPER)
WORKSPACE_COMMANDS = _lane(Lane.WORKSPACE)
#: Read-only command → native method.
READ_ONLY_METHODS: dict[str, str] = {name: spec.method for name, spec in COMMANDS.items() if spec.method}
#: Read-only commands answered by ``codexrt._features._catalog`` (paged, bounded; R-CAT-1).
CATALOG_COMMANDS = frozenset({"codex.listModels", "codex.listSkills", "codex.getMcpStatus", "codex.reloadMcp"})

#: Schema parts msgspec cannot derive (used by :mod:`codexrt._serve._schema`): the two shapes of
#: ``codex.send`` ``context`` (see :func:`check_context`) ...
SCHEMA_EXTRA_DEFS: dict[str, Any] = {
    "AdditionalContext": {
        "type": "object",
        "description": "turn/start.additionalContext fragments, e.g. {\"ide_context\": {\"kind\": \"application\", "
                       "\"value\": \"Active file: a.py\"}}",
        "additionalProperties": {"$ref": "#/$defs/ContextFragment"},
    },
}
#: ... the property schemas that replace what msgspec derives for them ...
PARAMS_EXTRA_SCHEMA: dict[tuple[str, str], Any] = {
    ("SendParams", "context"): {"anyOf": [{"$ref": "#/$defs/AdditionalContext"}, {"$ref": "#/$defs/EditorState"},
                                          {"type": "null"}]},
}
#: ... and the object-level rules checked by ``__post_init__`` (exactly one of two fields).
STRUCT_EXTRA_SCHEMA: dict[str, Any] = {
    "OpenReviewParams": {"oneOf": [{"required": ["path"]}, {"required": ["keys"]}]},
    "UndoFileParams": {"oneOf": [{"required": ["path"]}, {"required": ["key"]}]},
}
