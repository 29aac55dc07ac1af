# size: the one error tree, a small class per error code (docs/architecture.md lists them); one module keeps the whole tree in view.
"""The one exception tree of codexrt.

Every error codexrt raises on purpose derives from :class:`CodexError` and carries:

* ``code`` — a stable UPPER_SNAKE string (the contract's codes: ``RPC_TIMEOUT``,
  ``CHILD_EXITED``, …) that hosts and the ``serve`` wire match on;
* ``phase`` — for failures of a client request, how far it got (``notWritten`` /
  ``writtenUnconfirmed``, R-WIRE-4, R-OP-2), else ``None``;
* ``details`` — a JSON-able dict of extra facts (exit code, stderr tail, candidates…).

Messages and details are redacted when the error is made (``codexrt._sansio._redact``: the
secret values registered in this process, URL credentials, ``Bearer …``, key shapes), so
``str(exc)``, ``repr`` and :meth:`CodexError.to_dict` never carry a secret codexrt knows of or
can recognise (R-WIRE-9). A server's ``error.data`` is redacted by key as well.

The split follows h11: :class:`LocalProtocolError` means *we* (or our caller) broke the
protocol; :class:`RemoteProtocolError` means the peer did. Misuse of an object is
:class:`BusyResourceError`/:class:`ClosedError`, as in trio.

One class per code: a class's ``code`` is fixed (there is no ``code=`` argument), so ``except``
on a class catches exactly the errors that carry its code (or a subclass's). Where one failure is
two things at once the class says so by its bases (an undo refused for binary content is an
:class:`UndoError` *and* a :class:`BinaryContentError`). :class:`ClosedError`,
:class:`ChildExited` and :class:`BusyResourceError` also derive from trio's
``ClosedResourceError``, ``BrokenResourceError`` and ``BusyResourceError`` (so ``except
trio.ClosedResourceError`` works on them too); importing those three exception classes is the one
place the sans-IO layer names trio (``docs/architecture.md``). The endpoint errors stay
``OSError`` subclasses as well, so a refused endpoint is a failed start like a failed spawn.

How a server's JSON-RPC error maps to a codexrt class is one table, :data:`RPC_ERROR_TABLE`
(:func:`from_rpc_error`); nothing else classifies server errors by their wording.

Canonical message texts of the contract are kept verbatim so existing matchers keep working:
``codex app-server exited (code=…, signal=…)`` (R-WIRE-9, R-H-3).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Awaitable, Callable, Iterator, NamedTuple, TypeVar

# The one trio import of the sans-IO layer: exception classes only (no event loop), so that
# ``except trio.ClosedResourceError`` also catches codexrt's ClosedError (see the module doc).
from trio import BrokenResourceError as _TrioBrokenResourceError
from trio import BusyResourceError as _TrioBusyResourceError
from trio import ClosedResourceError as _TrioClosedResourceError

from codexrt._sansio._redact import process_redactor

__all__ = [
    "CodexError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "CursorRepeated",
    "RpcError",
    "ServerOverloaded",
    "RpcTimeout",
    "TurnTimeout",
    "ChildExited",
    "HandshakeError",
    "ClosedError",
    "BusyResourceError",
    "CliUnavailable",
    "CliOverrideInvalid",
    "EndpointUnavailable",
    "EndpointRejected",
    "OperationCancelled",
    "OperationFailed",
    "SettingsMismatch",
    "SettingsUnconfirmed",
    "HelperFailed",
    "HelperTimeout",
    "HelperInterrupted",
    "HelperEmpty",
    "QueueFull",
    "NotStarted",
    "ThreadResumeError",
    "ThreadNotFound",
    "WriterConflict",
    "HistoryReadFailed",
    "RelationUnverified",
    "InteractionError",
    "InteractionUnknown",
    "InteractionDuplicate",
    "InteractionExpired",
    "InteractionStaleToken",
    "InteractionWrongGeneration",
    "InteractionWrongChannel",
    "InteractionStateError",
    "InteractionInvalidReply",
    "ElicitationInvalidAnswer",
    "PrivacyIndexWriteFailed",
    "ConfigError",
    "InteractionConfigError",
    "AccessInactive",
    "NotLoggedIn",
    "BadEndpoint",
    "BadProvider",
    "BadToken",
    "TokenUnavailable",
    "RemoteNotAllowed",
    "InvalidParams",
    "InvalidTextElements",
    "ContextNotDeliverable",
    "EmptyDiff",
    "UnknownSlashCommand",
    "SlashNotDispatched",
    "CatalogBadEntry",
    "CatalogBadPage",
    "CatalogCursorRepeated",
    "CatalogPageLimit",
    "CatalogStale",
    "TooManyChannels",
    "DiffUnavailable",
    "UnknownCommand",
    "DuplicateRequestId",
    "PatchFormatError",
    "BinaryContentError",
    "EditStoreError",
    "UndoError",
    "AlreadyUndone",
    "NotApplied",
    "NotARegularFile",
    "UndoIOError",
    "UndoBinaryContent",
    "UndoPatchFormat",
    "EditConflict",
    "OutsideWorkspace",
    "ReviewError",
    "ReviewStale",
    "ReviewNoSession",
    "EditNotFound",
    "RPC_ERROR_TABLE",
    "OVERLOAD_CODE",
    "RpcErrorRule",
    "rpc_error_rule",
    "rpc_error_kind",
    "from_rpc_error",
    "CHILD_EXITED_PREFIX",
    "child_exited_message",
    "malformed_data",
    "malformed_data_is_typed",
]

CHILD_EXITED_PREFIX = "codex app-server exited"
#: The JSON-RPC code of the server's overload answer (``"Server overloaded; retry later."``).
OVERLOAD_CODE = -32001


def child_exited_message(code: int | None, signal: int | None) -> str:
    """The canonical exit message (R-WIRE-9): ``codex app-server exited (code=0, signal=null)``."""
    c = "null" if code is None else str(code)
    s = "null" if signal is None else str(signal)
    return f"{CHILD_EXITED_PREFIX} (code={c}, signal={s})"


class CodexError(Exception):
    """Base of every error codexrt raises on purpose."""

    code: str = "CODEX_ERROR"

    def __init__(
        self,
        message: str,
        *,
        phase: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        redact = process_redactor()
        message = redact(message) if isinstance(message, str) else message
        super().__init__(message)
        self.message = message
        self.phase = phase
        self.details: dict[str, Any] = redact.redact_obj(dict(details or {}), by_key=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form for the ``serve`` wire and events."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.phase is not None:
            out["phase"] = self.phase
        if self.details:
            out["details"] = self.details
        return out

    def __repr__(self) -> str:
        extra = f", phase={self.phase!r}" if self.phase else ""
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}{extra})"


class LocalProtocolError(CodexError):
    """We (or our caller) would break the protocol: bad params, impossible transition."""

    code = "LOCAL_PROTOCOL_ERROR"


class RemoteProtocolError(CodexError):
    """The peer broke the protocol (bad line, unknown shape, response to an unknown id)."""

    code = "PROTOCOL_ERROR"


class CursorRepeated(RemoteProtocolError):
    """The server handed back a cursor that the walk already sent (``codexrt._sansio._paging``):
    stopped instead of looping. ``details``: ``method``, ``page`` (1-based), ``cursor``."""

    code = "CURSOR_REPEATED"


class RpcError(CodexError):
    """The server answered a client request with a JSON-RPC error object.

    ``rpc_code`` is the numeric JSON-RPC code (the real server uses ``-32600`` for nearly
    everything), ``data`` the optional ``error.data``.
    """

    code = "RPC_ERROR"

    def __init__(
        self,
        message: str,
        *,
        rpc_code: int,
        method: str | None = None,
        data: Any = None,
        phase: str | None = None,
    ) -> None:
        details: dict[str, Any] = {"rpcCode": rpc_code}
        if method is not None:
            details["method"] = method
        if data is not None:
            data = process_redactor().redact_obj(data)  # the peer's data: by key too
            details["data"] = data
        super().__init__(message, phase=phase, details=details)
        self.rpc_code = rpc_code
        self.method = method
        self.data = data


class ServerOverloaded(RpcError):
    """The server answered ``-32001 "Server overloaded; retry later."``."""

    code = "SERVER_OVERLOADED"


#: The default budget (seconds) of one short JSON-RPC request before it fails with
#: :class:`RpcTimeout` (``Connection``'s and ``RuntimeConfig``'s ``rpc_timeout``). It lives here,
#: not in ``_connection``, so the runtime's configuration is importable without the connection
#: (``codexrt serve`` answers its first ``status`` without it, issue 34).
DEFAULT_RPC_TIMEOUT = 30.0


class RpcTimeout(CodexError):
    """A client-side wait ran out (R-WIRE-4). The native operation may still be running:
    ``phase`` tells whether the request was ever written (``notWritten``) or written but
    not answered (``writtenUnconfirmed``). A later answer surfaces as a ``lateResponse``."""

    code = "RPC_TIMEOUT"


class TurnTimeout(RpcTimeout):
    """The blocking facade's wait for a whole turn ran out (the turn may still be running)."""

    code = "TURN_TIMEOUT"


class ChildExited(CodexError, _TrioBrokenResourceError):
    """The app-server (or the connection to it) is gone (R-WIRE-6). Also a
    ``trio.BrokenResourceError``: the resource broke under its user.

    The message is always the canonical ``codex app-server exited (code=…, signal=…)``;
    ``details`` may add ``stderrTail`` (redacted), ``command`` and ``startupFailure``.
    """

    code = "CHILD_EXITED"

    def __init__(
        self,
        returncode: int | None,
        signal: int | None,
        *,
        phase: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(child_exited_message(returncode, signal), phase=phase, details=details)
        self.returncode = returncode
        self.signal = signal


class HandshakeError(CodexError):
    """``initialize`` was refused or never answered; no business RPC was written (R-WIRE-3)."""

    code = "INITIALIZE_FAILED"


class ClosedError(CodexError, _TrioClosedResourceError):
    """The object was closed by its owner; also a ``trio.ClosedResourceError``."""

    code = "CLOSED"


class BusyResourceError(CodexError, _TrioBusyResourceError):
    """Misuse: e.g. two tasks iterating one operation's events at once. Also a
    ``trio.BusyResourceError``, whose name it shares: ``except trio.BusyResourceError`` catches
    it, and ``except codexrt.BusyResourceError`` catches only codexrt's."""

    code = "BUSY"


class CliUnavailable(CodexError):
    """No usable Codex CLI candidate (R-CLI-6); ``details['codexCliUnavailable']`` lists them."""

    code = "CODEX_CLI_UNAVAILABLE"


class CliOverrideInvalid(CliUnavailable):
    """An explicit CLI override (``cli_path``, ``CODEX_BIN`` …) names no usable CLI."""

    code = "CODEX_CLI_OVERRIDE_INVALID"


class EndpointUnavailable(CodexError, OSError):
    """An attached endpoint could not be reached, was not ready, or broke the handshake. Also
    an ``OSError``, so the runtime treats it like a failed spawn (a startup failure, R-CLI-5)."""

    code = "ENDPOINT_UNAVAILABLE"


class EndpointRejected(CodexError, PermissionError):
    """The server refused the WebSocket upgrade (``401``: missing or wrong token). Not retried:
    repeating the same token cannot help. Also a ``PermissionError``."""

    code = "ENDPOINT_REJECTED"


class OperationCancelled(CodexError):
    """The operation was stopped before it produced a native turn (R-OP-5)."""

    code = "CANCELLED"


class OperationFailed(CodexError):
    """The operation reached a failed terminal (native ``failed`` turn, start failure)."""

    code = "OPERATION_FAILED"


class SettingsMismatch(OperationFailed):
    """The server confirmed other settings than the operation asked for; nothing was started (R-SET-2)."""

    code = "SETTINGS_MISMATCH"


class SettingsUnconfirmed(OperationFailed):
    """The server never confirmed the settings revision the operation needs; nothing was started (R-SET-2)."""

    code = "SETTINGS_UNCONFIRMED"


class HelperFailed(OperationFailed):
    """A helper run (title, commit message, prompt enhancement) failed."""

    code = "HELPER_FAILED"


class HelperTimeout(OperationFailed):
    """A helper run gave no answer in time; its child was closed."""

    code = "HELPER_TIMEOUT"


class HelperInterrupted(OperationFailed):
    """A helper run's turn ended interrupted."""

    code = "HELPER_INTERRUPTED"


class HelperEmpty(OperationFailed):
    """A helper run's model answered nothing usable."""

    code = "HELPER_EMPTY"


class QueueFull(CodexError):
    """Too many operations are queued on the runtime; wait for some to finish."""

    code = "QUEUE_FULL"


class NotStarted(CodexError):
    """A command that needs a started runtime or turn found none."""

    code = "NOT_STARTED"


class ThreadResumeError(CodexError):
    """``thread/resume`` failed: ``code`` is ``THREAD_NOT_FOUND`` (a thread that never ran
    a turn has no rollout), ``WRITER_CONFLICT`` (another process holds the writer — often an
    orphan of an earlier crash, R-RT-7) or ``RESUME_FAILED``."""

    code = "RESUME_FAILED"


class ThreadNotFound(ThreadResumeError):
    """The server does not know the thread (no rollout: it never ran a turn, or a wrong id). A
    :class:`ThreadResumeError` too, since resuming is where a host meets it first."""

    code = "THREAD_NOT_FOUND"


class WriterConflict(ThreadResumeError):
    """Another process holds the thread's writer (often an orphan of an earlier crash, R-RT-7)."""

    code = "WRITER_CONFLICT"


class HistoryReadFailed(CodexError):
    """A thread's history could not be read (a server error, or an answer without the data)."""

    code = "HISTORY_READ_FAILED"


class RelationUnverified(CodexError):
    """A sub-agent thread's parent could not be verified, so it is not shown as its child."""

    code = "RELATION_UNVERIFIED"


class InteractionError(CodexError):
    """An answer to an interaction was refused: unknown, duplicate, expired or stale
    (R-INT-1), or the reply did not fit the request's schema (R-INT-3)."""

    code = "INTERACTION_REJECTED"


class InteractionUnknown(InteractionError):
    """No interaction has that key."""

    code = "INTERACTION_UNKNOWN"


class InteractionDuplicate(InteractionError):
    """The interaction was already answered."""

    code = "INTERACTION_DUPLICATE"


class InteractionExpired(InteractionError):
    """The interaction is no longer pending (deadline passed, resolved, or the runtime is gone)."""

    code = "INTERACTION_EXPIRED"


class InteractionStaleToken(InteractionError):
    """The answer carries a token of another page of the interaction."""

    code = "INTERACTION_STALE_TOKEN"


class InteractionWrongGeneration(InteractionError):
    """The answer names a runtime generation the interaction does not belong to."""

    code = "INTERACTION_WRONG_GENERATION"


class InteractionWrongChannel(InteractionError):
    """``codexrt serve``: a live interaction key answered with the ``channelId`` of another
    channel than the one holding it; nothing was sent."""

    code = "INTERACTION_WRONG_CHANNEL"


class InteractionStateError(InteractionError):
    """The interaction is not in a state that allows this step."""

    code = "INTERACTION_STATE"


class InteractionInvalidReply(InteractionError):
    """The reply does not fit the request's schema (R-INT-3), or no safe reply is known."""

    code = "INTERACTION_INVALID_REPLY"


class ElicitationInvalidAnswer(InteractionError):
    """An answer to an MCP elicitation does not fit its requested form."""

    code = "ELICITATION_INVALID_ANSWER"


class PrivacyIndexWriteFailed(InteractionError):
    """The privacy record of an answer could not be written; the answer was not forwarded (R-PRIV-1)."""

    code = "PRIVACY_INDEX_WRITE_FAILED"


class ConfigError(CodexError):
    """A launch configuration or setting is invalid (refused before anything is written)."""

    code = "CONFIG_ERROR"


class InteractionConfigError(ConfigError, InteractionError):
    """An invalid interaction setting (e.g. a deadline of an unknown kind); ``CONFIG_ERROR``."""

    code = "CONFIG_ERROR"


class AccessInactive(ConfigError):
    """The access mode is ``inactive``: nothing that would start or reach a server runs."""

    code = "ACCESS_INACTIVE"


class NotLoggedIn(ConfigError):
    """The app-server needs an OpenAI login (``account/read``: no account, ``requiresOpenaiAuth``)
    and has none: said before the first turn instead of waiting out the server's retries."""

    code = "NOT_LOGGED_IN"


class BadEndpoint(ConfigError):
    """An endpoint (``ws://…``/``unix://…``) or the choice between spawning and attaching is invalid."""

    code = "BAD_ENDPOINT"


class BadProvider(ConfigError):
    """A model provider configuration is invalid."""

    code = "BAD_PROVIDER"


class BadToken(ConfigError):
    """An endpoint token is unusable (empty, or not fit for a header)."""

    code = "BAD_TOKEN"


class TokenUnavailable(ConfigError):
    """An endpoint token could not be read (missing file or variable, unsafe file)."""

    code = "TOKEN_UNAVAILABLE"


class RemoteNotAllowed(ConfigError):
    """A non-loopback endpoint was given without opting in (or without a token)."""

    code = "REMOTE_NOT_ALLOWED"


class InvalidParams(ConfigError):
    """Parameters of a call are invalid; nothing was sent."""

    code = "INVALID_PARAMS"


class InvalidTextElements(ConfigError):
    """A message's text elements do not fit its text; nothing was sent."""

    code = "INVALID_TEXT_ELEMENTS"


class ContextNotDeliverable(ConfigError):
    """Additional context cannot be delivered with this turn; nothing was started."""

    code = "CONTEXT_NOT_DELIVERABLE"


class EmptyDiff(ConfigError):
    """There is nothing to describe: the diff is empty."""

    code = "EMPTY_DIFF"


class UnknownSlashCommand(ConfigError):
    """A slash command codexrt does not know."""

    code = "UNKNOWN_SLASH_COMMAND"


class SlashNotDispatched(ConfigError):
    """A slash command could not be dispatched (missing thread or cwd, or no acknowledgement in
    time); nothing was started, or what was started was stopped."""

    code = "SLASH_NOT_DISPATCHED"


# ---------------------------------------------------------------------------- catalogs, serve


class CatalogBadEntry(RemoteProtocolError):
    """A catalog entry (model, skill…) lacks what identifies it."""

    code = "CATALOG_BAD_ENTRY"


class CatalogBadPage(RemoteProtocolError):
    """A catalog page came without its data list."""

    code = "CATALOG_BAD_PAGE"


class CatalogCursorRepeated(RemoteProtocolError):
    """A paginated catalog answered a cursor it had already given (the walk would never end)."""

    code = "CATALOG_CURSOR_REPEATED"


class CatalogPageLimit(CodexError):
    """A catalog has more pages than the caller allowed; the walk stopped."""

    code = "CATALOG_PAGE_LIMIT"


class CatalogStale(CodexError):
    """The runtime restarted while a catalog was being read; its pages do not belong together."""

    code = "CATALOG_STALE"


class TooManyChannels(CodexError):
    """``codexrt serve`` has as many channels open and in use as it allows."""

    code = "TOO_MANY_CHANNELS"


class DiffUnavailable(CodexError):
    """The workspace diff could not be read (not Git, too large, timeout…)."""

    code = "DIFF_UNAVAILABLE"


class UnknownCommand(CodexError):
    """A command name that this handler does not know."""

    code = "UNKNOWN_COMMAND"


class DuplicateRequestId(CodexError):
    """A ``codexrt serve`` command reused the id of a command that has no reply yet: refused,
    not run (the pending command keeps its one reply)."""

    code = "DUPLICATE_REQUEST_ID"


# ---------------------------------------------------------------------------- edit ledger
# (R-EDIT-1..3; raised by ``codexrt/_io/_edits.py`` and ``codexrt/_sansio/_patch.py``, which
# re-export them under their old names.)


class PatchFormatError(RemoteProtocolError):
    """A native change could not be parsed (unknown kind, malformed hunk, counts that lie)."""

    code = "PATCH_FORMAT"


class BinaryContentError(CodexError):
    """Content that is not text (NUL bytes, not UTF-8): codexrt never patches it."""

    code = "BINARY_CONTENT"


class EditStoreError(CodexError):
    """The edit store (the ledger's file) could not be opened or read."""

    code = "EDIT_STORE"


class UndoError(CodexError):
    """An undo did not happen (unknown key, not applied, already undone, binary content,
    I/O failure). ``details['keys']`` names the ledger keys; the entries are kept."""

    code = "UNDO_FAILED"


class AlreadyUndone(UndoError):
    """The change was already undone."""

    code = "ALREADY_UNDONE"


class NotApplied(UndoError):
    """The change was never applied on disk, so there is nothing to undo."""

    code = "NOT_APPLIED"


class NotARegularFile(UndoError):
    """The undo target is not a regular file; nothing was written."""

    code = "NOT_A_REGULAR_FILE"


class UndoIOError(UndoError):
    """Reading or writing a file of the undo failed; nothing (more) was written."""

    code = "UNDO_IO"


class UndoBinaryContent(UndoError, BinaryContentError):
    """An undo refused because the file holds binary content: an :class:`UndoError` and a
    :class:`BinaryContentError` (``BINARY_CONTENT``)."""

    code = "BINARY_CONTENT"


class UndoPatchFormat(UndoError, PatchFormatError):
    """An undo refused because the change could not be parsed: an :class:`UndoError` and a
    :class:`PatchFormatError` (``PATCH_FORMAT``)."""

    code = "PATCH_FORMAT"


class EditConflict(UndoError):
    """The file no longer holds what Codex wrote: nothing was written (R-EDIT-3).
    ``conflict`` holds the comparison (a ``codexrt._sansio._patch.Conflict``: ``path``,
    ``reason``, ``diff``); ``details['diff']`` shows expected vs actual."""

    code = "EDIT_CONFLICT"

    def __init__(self, conflict: Any, *, keys: Any) -> None:
        super().__init__(
            f"undo refused: {conflict.path}: {conflict.reason}; nothing was written",
            details={
                "path": conflict.path,
                "reason": conflict.reason,
                "diff": conflict.diff,
                "keys": [k.to_dict() for k in keys],
            },
        )
        self.conflict = conflict


class OutsideWorkspace(UndoError):
    """An undo would write, delete or read outside the submission's workspace (a ``..`` or
    absolute path outside it, or a symbolic link to a directory along the path); nothing was
    touched. ``details['path']`` names the path, ``details['roots']`` the allowed roots. The
    host may opt in per call (``allow_outside_workspace=True``); symbolic links along the path
    are refused even then."""

    code = "OUTSIDE_WORKSPACE"


class ReviewError(CodexError):
    """A review checkpoint could not be opened or decided; nothing was recorded (R-EDIT-2)."""

    code = "REVIEW_FAILED"


class ReviewStale(ReviewError):
    """The review ticket is unknown or no longer matches the ledger."""

    code = "REVIEW_STALE"


class ReviewNoSession(ReviewError):
    """A review needs a session id and there is none."""

    code = "REVIEW_NO_SESSION"


class EditNotFound(UndoError, ReviewError):
    """No ledger entry has that key (an :class:`UndoError` and a :class:`ReviewError`)."""

    code = "EDIT_NOT_FOUND"


# ---------------------------------------------------------------------------- server errors


class RpcErrorRule(NamedTuple):
    """One row of :data:`RPC_ERROR_TABLE`: a server error whose numeric code is in
    ``rpc_codes`` or whose lower-cased message contains one of ``markers`` is ``kind``."""

    kind: str
    cls: "type[CodexError] | None"
    rpc_codes: frozenset[int]
    markers: tuple[str, ...]


#: Server JSON-RPC error → codexrt class, first matching row wins. The real server answers
#: nearly everything with ``-32600``, so most rows match its wording (docs/real-server-notes.md).
#: ``unsupported`` has no class: it tells a caller to fall back, it is never raised.
RPC_ERROR_TABLE: tuple[RpcErrorRule, ...] = (
    RpcErrorRule("overloaded", ServerOverloaded, frozenset({OVERLOAD_CODE}), ("server overloaded", "retry later")),
    RpcErrorRule("unsupported", None, frozenset({-32601}),
                 ("not supported", "unknown variant", "method not found")),
    RpcErrorRule("writerConflict", WriterConflict, frozenset(), ("active writer",)),
    # 0.169.0 answers thread/read of an id it has no rollout for with "thread not loaded: <id>";
    # older wording: "no rollout found"
    RpcErrorRule("threadNotFound", ThreadNotFound, frozenset(),
                 ("not found", "no rollout", "invalid thread id", "thread not loaded")),
)


def rpc_error_rule(exc: BaseException) -> RpcErrorRule | None:
    """The first row of :data:`RPC_ERROR_TABLE` that ``exc`` (an :class:`RpcError`) matches."""
    if not isinstance(exc, RpcError):
        return None
    text = (exc.message or "").lower() if isinstance(exc.message, str) else ""
    for rule in RPC_ERROR_TABLE:
        if exc.rpc_code in rule.rpc_codes or any(m in text for m in rule.markers):
            return rule
    return None


def rpc_error_kind(exc: BaseException) -> str | None:
    """The ``kind`` of the first matching row (``overloaded``, ``unsupported``, …), else ``None``."""
    rule = rpc_error_rule(exc)
    return rule.kind if rule is not None else None


def from_rpc_error(exc: BaseException) -> "type[CodexError] | None":
    """The codexrt class for a server's JSON-RPC error (:data:`RPC_ERROR_TABLE`), or ``None``
    when no row with a class matches (then it stays a plain :class:`RpcError`)."""
    if isinstance(exc, ServerOverloaded):
        return ServerOverloaded
    rule = rpc_error_rule(exc)
    return rule.cls if rule is not None else None


#: What wrong-shaped data makes Python code raise when it reads it as if it were well formed.
_SHAPE_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


@contextlib.contextmanager
def malformed_data(what: str) -> Iterator[None]:
    """Data read inside the block that has the wrong shape (``{"data": ["oops"]}``, a string
    where an object belongs …) raises :class:`RemoteProtocolError` naming ``what``, never a bare
    ``TypeError``/``AttributeError`` outside the tree. CodexErrors pass through unchanged."""
    try:
        yield
    except CodexError:
        raise
    except _SHAPE_ERRORS as exc:
        raise RemoteProtocolError(f"malformed {what}: {type(exc).__name__}: {str(exc)[:200]}",
                                  details={"malformed": what, "error": type(exc).__name__}) from exc


_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def malformed_data_is_typed(what: str) -> Callable[[_F], _F]:
    """Decorator form of :func:`malformed_data` for a coroutine function."""
    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            with malformed_data(what):
                return await fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return deco
