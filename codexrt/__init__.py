"""codexrt: run and supervise the OpenAI Codex CLI's ``codex app-server`` on Trio.

Public API only; everything else lives in private modules. See ``docs/architecture.md``.
"""

from typing import TYPE_CHECKING

from codexrt._sansio._errors import (
    AccessInactive,
    AlreadyUndone,
    BadEndpoint,
    BadProvider,
    BadToken,
    BinaryContentError,
    BusyResourceError,
    CatalogBadEntry,
    CatalogBadPage,
    CatalogCursorRepeated,
    CatalogPageLimit,
    CatalogStale,
    ChildExited,
    CliOverrideInvalid,
    CliUnavailable,
    ClosedError,
    CodexError,
    ConfigError,
    ContextNotDeliverable,
    CursorRepeated,
    DiffUnavailable,
    DuplicateRequestId,
    EditConflict,
    EditNotFound,
    EditStoreError,
    ElicitationInvalidAnswer,
    EmptyDiff,
    EndpointRejected,
    EndpointUnavailable,
    HandshakeError,
    HelperEmpty,
    HelperFailed,
    HelperInterrupted,
    HelperTimeout,
    HistoryReadFailed,
    InteractionConfigError,
    InteractionDuplicate,
    InteractionError,
    InteractionExpired,
    InteractionInvalidReply,
    InteractionStaleToken,
    InteractionStateError,
    InteractionUnknown,
    InteractionWrongChannel,
    InteractionWrongGeneration,
    InvalidParams,
    InvalidTextElements,
    LocalProtocolError,
    NotLoggedIn,
    NotARegularFile,
    NotApplied,
    NotStarted,
    OperationCancelled,
    OperationFailed,
    OutsideWorkspace,
    PatchFormatError,
    PrivacyIndexWriteFailed,
    QueueFull,
    RelationUnverified,
    RemoteNotAllowed,
    RemoteProtocolError,
    ReviewError,
    ReviewNoSession,
    ReviewStale,
    RpcError,
    RpcTimeout,
    ServerOverloaded,
    SettingsMismatch,
    SettingsUnconfirmed,
    SlashNotDispatched,
    ThreadNotFound,
    ThreadResumeError,
    TokenUnavailable,
    TooManyChannels,
    TurnTimeout,
    UndoBinaryContent,
    UndoError,
    UndoIOError,
    UndoPatchFormat,
    UnknownCommand,
    UnknownSlashCommand,
    WriterConflict,
)

from codexrt._sansio._redact import install_log_filter as _install_log_filter
from codexrt._version import __version__

_install_log_filter()  # every codexrt logger redacts its records (docs/security.md)

if TYPE_CHECKING:  # the lazy public names, for type checkers (``X as X``: explicitly re-exported)
    from codexrt._sansio._wire import (
        ClientInfo as ClientInfo,
    )
    from codexrt._connection import (
        Connection as Connection,
    )
    from codexrt._runtime._events import (
        CodexEvent as CodexEvent,
        EventStream as EventStream,
    )
    from codexrt._runtime._runtime import (
        ChildHandle as ChildHandle,
        Interaction as Interaction,
        Operation as Operation,
        OperationResult as OperationResult,
        Runtime as Runtime,
        open_runtime as open_runtime,
    )
    from codexrt._runtime._config import (
        RuntimeConfig as RuntimeConfig,
    )
    from codexrt._sansio._states import (
        OpPhase as OpPhase,
        RuntimeState as RuntimeState,
    )
    from codexrt._sansio._settings import (
        Settings as Settings,
    )
    from codexrt._payloads import (
        AGENT_TEXT as AGENT_TEXT,
        Decision as Decision,
        Event as Event,
        EventKind as EventKind,
        payload as payload,
    )
    from codexrt._io._transport import (
        ExitStatus as ExitStatus,
        ProcessTransport as ProcessTransport,
        StreamTransport as StreamTransport,
        spawn_process_transport as spawn_process_transport,
    )
    from codexrt._io._discovery import (
        discover_cli as discover_cli,
        DiscoveryResult as DiscoveryResult,
        Candidate as Candidate,
        Rejected as Rejected,
        probe_version as probe_version,
    )
    from codexrt._features._history import (
        open_history_reader as open_history_reader,
        HistoryReader as HistoryReader,
        Transcript as Transcript,
        MessageCount as MessageCount,
        MessageCounter as MessageCounter,
        ThreadPage as ThreadPage,
        ThreadSummary as ThreadSummary,
        SubagentView as SubagentView,
    )
    from codexrt._runtime._interactions import (
        PrivacyStore as PrivacyStore,
    )
    from codexrt._runtime._interaction_policies import (
        decline_all as decline_all,
        decline_all_in_read_only as decline_all_in_read_only,
    )
    from codexrt._sansio._states import InteractionState as InteractionState
    from codexrt._io._edits import (
        EditLedger as EditLedger,
        EditStore as EditStore,
        EditKey as EditKey,
        EditEntry as EditEntry,
        UndoReceipt as UndoReceipt,
        ReviewTicket as ReviewTicket,
        Checkpoint as Checkpoint,
    )
    from codexrt._features._edits_live import (
        LiveEdits as LiveEdits,
        open_live_edits as open_live_edits,
        load_thread_edits as load_thread_edits,
        ThreadEdits as ThreadEdits,
    )
    from codexrt._sansio._context import (
        EditorState as EditorState,
        build_context as build_context,
    )
    from codexrt._io._workspace import (
        read_workspace_diff as read_workspace_diff,
        WorkspaceDiff as WorkspaceDiff,
        DiffStatus as DiffStatus,
    )
    from codexrt._features._helpers import (
        open_title_manager as open_title_manager,
        TitleManager as TitleManager,
        generate_title as generate_title,
        enhance_prompt as enhance_prompt,
        generate_commit_message as generate_commit_message,
    )
    from codexrt._features._catalog import (
        list_models as list_models,
        list_skills as list_skills,
        mcp_status as mcp_status,
        reload_mcp as reload_mcp,
        start_slash_command as start_slash_command,
    )
    from codexrt._io._retry import (
        Backoff as Backoff,
    )
    from codexrt import (
        aio as aio,
        blocking as blocking,
        loopback as loopback,
    )

#: The runtime and what a user holds of it: public names like the rest, loaded on first use too,
#: so ``import codexrt`` (and a ``codexrt serve`` answering its first ``status``, issue 34) does
#: not pay for them; ``from codexrt import Runtime`` imports the runtime then, once.
_CORE = {  # in ``__all__``'s order
    "ChildHandle": "codexrt._runtime._runtime",
    "ClientInfo": "codexrt._sansio._wire",
    "CodexEvent": "codexrt._runtime._events",
    "Connection": "codexrt._connection",
    "EventStream": "codexrt._runtime._events",
    "ExitStatus": "codexrt._io._transport",
    "Interaction": "codexrt._runtime._runtime",
    "OpPhase": "codexrt._sansio._states",
    "Operation": "codexrt._runtime._runtime",
    "OperationResult": "codexrt._runtime._runtime",
    "ProcessTransport": "codexrt._io._transport",
    "Runtime": "codexrt._runtime._runtime",
    "RuntimeConfig": "codexrt._runtime._config",
    "RuntimeState": "codexrt._sansio._states",
    "Settings": "codexrt._sansio._settings",
    "StreamTransport": "codexrt._io._transport",
    "open_runtime": "codexrt._runtime._runtime",
    "payload": "codexrt._payloads",
    "AGENT_TEXT": "codexrt._payloads",
    "Decision": "codexrt._payloads",
    "Event": "codexrt._payloads",
    "EventKind": "codexrt._payloads",
    "spawn_process_transport": "codexrt._io._transport",
}

#: Heavier parts of the public API load on first use, so ``import codexrt`` stays quick.
_LAZY = {
    # finding the CLI (docs/discovery.md)
    "discover_cli": "codexrt._io._discovery", "DiscoveryResult": "codexrt._io._discovery",
    "Candidate": "codexrt._io._discovery", "Rejected": "codexrt._io._discovery", "probe_version": "codexrt._io._discovery",
    # history (docs/history.md)
    "open_history_reader": "codexrt._features._history", "HistoryReader": "codexrt._features._history",
    "Transcript": "codexrt._features._history", "MessageCount": "codexrt._features._history",
    "MessageCounter": "codexrt._features._history",
    "ThreadPage": "codexrt._features._history", "ThreadSummary": "codexrt._features._history", "SubagentView": "codexrt._features._history",
    # interactions (docs/interactions.md)
    "PrivacyStore": "codexrt._runtime._interactions",
    "decline_all": "codexrt._runtime._interaction_policies",
    "decline_all_in_read_only": "codexrt._runtime._interaction_policies",
    "InteractionState": "codexrt._sansio._states",
    # edits (docs/edits.md)
    "EditLedger": "codexrt._io._edits", "EditStore": "codexrt._io._edits", "EditKey": "codexrt._io._edits",
    "EditEntry": "codexrt._io._edits", "UndoReceipt": "codexrt._io._edits", "ReviewTicket": "codexrt._io._edits",
    "Checkpoint": "codexrt._io._edits",
    "LiveEdits": "codexrt._features._edits_live", "open_live_edits": "codexrt._features._edits_live",
    "load_thread_edits": "codexrt._features._edits_live", "ThreadEdits": "codexrt._features._edits_live",
    # IDE context, helpers, catalogs, workspace diff (docs/context-and-diff.md)
    "EditorState": "codexrt._sansio._context", "build_context": "codexrt._sansio._context",
    "read_workspace_diff": "codexrt._io._workspace", "WorkspaceDiff": "codexrt._io._workspace",
    "DiffStatus": "codexrt._io._workspace",
    "open_title_manager": "codexrt._features._helpers", "TitleManager": "codexrt._features._helpers",
    "generate_title": "codexrt._features._helpers", "enhance_prompt": "codexrt._features._helpers",
    "generate_commit_message": "codexrt._features._helpers",
    "list_models": "codexrt._features._catalog", "list_skills": "codexrt._features._catalog", "mcp_status": "codexrt._features._catalog",
    "reload_mcp": "codexrt._features._catalog", "start_slash_command": "codexrt._features._catalog",
    # RuntimeConfig(reconnect_backoff=...) (docs/transports.md)
    "Backoff": "codexrt._io._retry",
}

#: Plumbing that earlier versions exported (issue 33 curated the namespace). The rule for the rest:
#: public is what a user calls, catches (every error class), configures, holds (``Runtime``, the
#: ``Connection`` of ``rt.ensure_started()``, a reader, a ledger) or compares against (the state
#: enums), and the results a user annotates most (``OperationResult``, ``Transcript``, the edit
#: ledger's records…). Other values a public call returns (a catalog page, a transcript's records)
#: are reachable through it and carry public-looking names, without a top-level name. What only the
#: runtime, ``serve``, ``acp`` or the CLI use is not public. The names below still import from
#: ``codexrt`` so existing code keeps running, but are not in ``__all__``, ``dir(codexrt)``, the
#: API reference or a type checker's view. Each lives in the module named here; the CLI, ``serve`` and ``acp`` import them
#: from there (the CLI through ``codexrt._serve._cli_support``).
_UNADVERTISED = {
    # a connection over a transport of your own (a Runtime makes its own)
    "open_connection": "codexrt._connection",
    # the launch configuration the runtime derives from RuntimeConfig (rt.launch_fingerprint())
    "LaunchConfig": "codexrt._runtime._launch",
    "AccessMode": "codexrt._runtime._launch",
    "launch_fingerprint": "codexrt._runtime._launch",
    # the retry loop's internals and the endpoint parser (RuntimeConfig(connect=...) takes a str)
    "call_read_only": "codexrt._io._retry",
    "READ_ONLY_RETRY_TABLE": "codexrt._io._retry",
    "Endpoint": "codexrt._io._transport_ws",
    # a runtime's interaction table; the decision vocabulary as a tuple (``Decision`` types it)
    "InteractionRegistry": "codexrt._runtime._interactions",
    "DECISIONS": "codexrt._sansio._methods",
}


#: Submodules reachable as attributes after a plain ``import codexrt``.
_SUBMODULES = frozenset({"aio", "blocking", "loopback"})


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"codexrt.{name}")
    module = _CORE.get(name) or _LAZY.get(name) or _UNADVERTISED.get(name)
    if module is None:
        raise AttributeError(f"module 'codexrt' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    if name not in _UNADVERTISED:  # cached as a global (vars(codexrt)) only when advertised
        globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The curated names (what a notebook's completion offers), not the module's plumbing."""
    return sorted({*__all__, *_SUBMODULES})


__all__ = [
    "__version__",
    # the error tree (codexrt/_sansio/_errors.py; docs/architecture.md#errors)
    "AccessInactive",
    "AlreadyUndone",
    "BadEndpoint",
    "BadProvider",
    "BadToken",
    "BinaryContentError",
    "BusyResourceError",
    "CatalogBadEntry",
    "CatalogBadPage",
    "CatalogCursorRepeated",
    "CatalogPageLimit",
    "CatalogStale",
    "ChildExited",
    "CliOverrideInvalid",
    "CliUnavailable",
    "ClosedError",
    "CodexError",
    "ConfigError",
    "ContextNotDeliverable",
    "CursorRepeated",
    "DiffUnavailable",
    "DuplicateRequestId",
    "EditConflict",
    "EditNotFound",
    "EditStoreError",
    "ElicitationInvalidAnswer",
    "EmptyDiff",
    "EndpointRejected",
    "EndpointUnavailable",
    "HandshakeError",
    "HelperEmpty",
    "HelperFailed",
    "HelperInterrupted",
    "HelperTimeout",
    "HistoryReadFailed",
    "InteractionConfigError",
    "InteractionDuplicate",
    "InteractionError",
    "InteractionExpired",
    "InteractionInvalidReply",
    "InteractionStaleToken",
    "InteractionStateError",
    "InteractionUnknown",
    "InteractionWrongChannel",
    "InteractionWrongGeneration",
    "InvalidParams",
    "InvalidTextElements",
    "LocalProtocolError",
    "NotARegularFile",
    "NotLoggedIn",
    "NotApplied",
    "NotStarted",
    "OperationCancelled",
    "OperationFailed",
    "OutsideWorkspace",
    "PatchFormatError",
    "PrivacyIndexWriteFailed",
    "QueueFull",
    "RelationUnverified",
    "RemoteNotAllowed",
    "RemoteProtocolError",
    "ReviewError",
    "ReviewNoSession",
    "ReviewStale",
    "RpcError",
    "RpcTimeout",
    "ServerOverloaded",
    "SettingsMismatch",
    "SettingsUnconfirmed",
    "SlashNotDispatched",
    "ThreadNotFound",
    "ThreadResumeError",
    "TokenUnavailable",
    "TooManyChannels",
    "TurnTimeout",
    "UndoBinaryContent",
    "UndoError",
    "UndoIOError",
    "UndoPatchFormat",
    "UnknownCommand",
    "UnknownSlashCommand",
    "WriterConflict",
    *sorted(_LAZY),
    *_CORE,
]
