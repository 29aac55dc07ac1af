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

__all__ = [
    "__version__",
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
