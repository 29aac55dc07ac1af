"""codexrt: run and supervise the OpenAI Codex CLI's ``codex app-server`` on Trio.

Public API only; everything else lives in private modules. See ``docs/architecture.md``.
"""

from codexrt._errors import (
    BusyResourceError,
    ChildExited,
    CliUnavailable,
    ClosedError,
    CodexError,
    ConfigError,
    HandshakeError,
    InteractionError,
    LocalProtocolError,
    OperationCancelled,
    OperationFailed,
    RemoteProtocolError,
    RpcError,
    RpcTimeout,
    ServerOverloaded,
    ThreadResumeError,
)

__version__ = "0.1.0.dev0"

from codexrt._connection import ClientInfo, Connection, open_connection  # noqa: E402
from codexrt._events import CodexEvent, EventStream  # noqa: E402
from codexrt._runtime import (  # noqa: E402
    Interaction,
    Operation,
    OperationResult,
    Runtime,
    RuntimeConfig,
    open_runtime,
)
from codexrt._sansio._states import OpPhase, RuntimeState  # noqa: E402
from codexrt._settings import Settings  # noqa: E402
from codexrt._transport import ExitStatus, ProcessTransport, StreamTransport, spawn_process_transport  # noqa: E402

__all__ = [
    "__version__",
    "ClientInfo",
    "CodexEvent",
    "Connection",
    "EventStream",
    "ExitStatus",
    "Interaction",
    "OpPhase",
    "Operation",
    "OperationResult",
    "ProcessTransport",
    "Runtime",
    "RuntimeConfig",
    "RuntimeState",
    "Settings",
    "StreamTransport",
    "open_connection",
    "open_runtime",
    "spawn_process_transport",
    "BusyResourceError",
    "ChildExited",
    "CliUnavailable",
    "ClosedError",
    "CodexError",
    "ConfigError",
    "HandshakeError",
    "InteractionError",
    "LocalProtocolError",
    "OperationCancelled",
    "OperationFailed",
    "RemoteProtocolError",
    "RpcError",
    "RpcTimeout",
    "ServerOverloaded",
    "ThreadResumeError",
]
