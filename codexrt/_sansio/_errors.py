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

Canonical message texts of the contract are kept verbatim so existing matchers keep working:
``codex app-server exited (code=…, signal=…)`` (R-WIRE-9, R-H-3).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Awaitable, Callable, Iterator, TypeVar

from codexrt._sansio._redact import process_redactor

__all__ = [
    "CodexError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "CursorRepeated",
    "RpcError",
    "RpcTimeout",
    "ChildExited",
    "HandshakeError",
    "ClosedError",
    "BusyResourceError",
    "ServerOverloaded",
    "CliUnavailable",
    "OperationCancelled",
    "OperationFailed",
    "ThreadResumeError",
    "InteractionError",
    "ConfigError",
    "PatchFormatError",
    "BinaryContentError",
    "UndoError",
    "OutsideWorkspace",
    "EditConflict",
    "ReviewError",
    "CHILD_EXITED_PREFIX",
    "child_exited_message",
    "malformed_data",
    "malformed_data_is_typed",
]

CHILD_EXITED_PREFIX = "codex app-server exited"


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
        code: str | None = None,
        phase: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        redact = process_redactor()
        message = redact(message) if isinstance(message, str) else message
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
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
        code: str | None = None,
        phase: str | None = None,
    ) -> None:
        details: dict[str, Any] = {"rpcCode": rpc_code}
        if method is not None:
            details["method"] = method
        if data is not None:
            data = process_redactor().redact_obj(data)  # the peer's data: by key too
            details["data"] = data
        super().__init__(message, code=code, phase=phase, details=details)
        self.rpc_code = rpc_code
        self.method = method
        self.data = data


class ServerOverloaded(RpcError):
    """The server answered ``-32001 "Server overloaded; retry later."``."""

    code = "SERVER_OVERLOADED"


class RpcTimeout(CodexError):
    """A client-side wait ran out (R-WIRE-4). The native operation may still be running:
    ``phase`` tells whether the request was ever written (``notWritten``) or written but
    not answered (``writtenUnconfirmed``). A later answer surfaces as a ``lateResponse``."""

    code = "RPC_TIMEOUT"


class ChildExited(CodexError):
    """The app-server (or the connection to it) is gone (R-WIRE-6).

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


class ClosedError(CodexError):
    """The object was closed by its owner (trio's ``ClosedResourceError`` in spirit)."""

    code = "CLOSED"


class BusyResourceError(CodexError):
    """Misuse: e.g. two tasks iterating one operation's events at once."""

    code = "BUSY"


class CliUnavailable(CodexError):
    """No usable Codex CLI candidate (R-CLI-6); ``details['codexCliUnavailable']`` lists them."""

    code = "CODEX_CLI_UNAVAILABLE"


class OperationCancelled(CodexError):
    """The operation was stopped before it produced a native turn (R-OP-5)."""

    code = "CANCELLED"


class OperationFailed(CodexError):
    """The operation reached a failed terminal (native ``failed`` turn, start failure)."""

    code = "OPERATION_FAILED"


class ThreadResumeError(CodexError):
    """``thread/resume`` failed: ``code`` is ``THREAD_NOT_FOUND`` (a thread that never ran
    a turn has no rollout), ``WRITER_CONFLICT`` (another process holds the writer — often an
    orphan of an earlier crash, R-RT-7) or ``RESUME_FAILED``."""

    code = "RESUME_FAILED"


class InteractionError(CodexError):
    """An answer to an interaction was refused: unknown, duplicate, expired or stale
    (R-INT-1), or the reply did not fit the request's schema (R-INT-3)."""

    code = "INTERACTION_REJECTED"


class ConfigError(CodexError):
    """A launch configuration or setting is invalid (refused before anything is written)."""

    code = "CONFIG_ERROR"


# ---------------------------------------------------------------------------- edit ledger
# (R-EDIT-1..3; raised by ``codexrt/_io/_edits.py`` and ``codexrt/_sansio/_patch.py``, which
# re-export them under their old names.)


class PatchFormatError(RemoteProtocolError):
    """A native change could not be parsed (unknown kind, malformed hunk, counts that lie)."""

    code = "PATCH_FORMAT"


class BinaryContentError(CodexError):
    """Content that is not text (NUL bytes, not UTF-8): codexrt never patches it."""

    code = "BINARY_CONTENT"


class UndoError(CodexError):
    """An undo did not happen (unknown key, not applied, already undone, binary content,
    I/O failure). ``details['keys']`` names the ledger keys; the entries are kept."""

    code = "UNDO_FAILED"


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
