"""The one error tree (issue #20; R-WIRE-9): one fixed code per class, no ``code=`` override
anywhere, and one table from a server's JSON-RPC error to a codexrt class.

The code strings are the ``serve`` wire's and the hosts' contract: the table below is the list
they match on, so a renamed code fails here first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codexrt._sansio import _errors as E

ROOT = Path(__file__).resolve().parents[2]

#: Every class of the tree and its code, as hosts and the serve wire see them.
CODES: dict[str, str] = {
    "CodexError": "CODEX_ERROR",
    "LocalProtocolError": "LOCAL_PROTOCOL_ERROR",
    "RemoteProtocolError": "PROTOCOL_ERROR",
    "CursorRepeated": "CURSOR_REPEATED",
    "RpcError": "RPC_ERROR",
    "ServerOverloaded": "SERVER_OVERLOADED",
    "RpcTimeout": "RPC_TIMEOUT",
    "TurnTimeout": "TURN_TIMEOUT",
    "ChildExited": "CHILD_EXITED",
    "HandshakeError": "INITIALIZE_FAILED",
    "ClosedError": "CLOSED",
    "BusyResourceError": "BUSY",
    "CliUnavailable": "CODEX_CLI_UNAVAILABLE",
    "CliOverrideInvalid": "CODEX_CLI_OVERRIDE_INVALID",
    "EndpointUnavailable": "ENDPOINT_UNAVAILABLE",
    "EndpointRejected": "ENDPOINT_REJECTED",
    "OperationCancelled": "CANCELLED",
    "OperationFailed": "OPERATION_FAILED",
    "SettingsMismatch": "SETTINGS_MISMATCH",
    "SettingsUnconfirmed": "SETTINGS_UNCONFIRMED",
    "HelperFailed": "HELPER_FAILED",
    "HelperTimeout": "HELPER_TIMEOUT",
    "HelperInterrupted": "HELPER_INTERRUPTED",
    "HelperEmpty": "HELPER_EMPTY",
    "QueueFull": "QUEUE_FULL",
    "NotStarted": "NOT_STARTED",
    "ThreadResumeError": "RESUME_FAILED",
    "ThreadNotFound": "THREAD_NOT_FOUND",
    "WriterConflict": "WRITER_CONFLICT",
    "HistoryReadFailed": "HISTORY_READ_FAILED",
    "RelationUnverified": "RELATION_UNVERIFIED",
    "InteractionError": "INTERACTION_REJECTED",
    "InteractionUnknown": "INTERACTION_UNKNOWN",
    "InteractionDuplicate": "INTERACTION_DUPLICATE",
    "InteractionExpired": "INTERACTION_EXPIRED",
    "InteractionStaleToken": "INTERACTION_STALE_TOKEN",
    "InteractionWrongGeneration": "INTERACTION_WRONG_GENERATION",
    "InteractionWrongChannel": "INTERACTION_WRONG_CHANNEL",
    "InteractionStateError": "INTERACTION_STATE",
    "InteractionInvalidReply": "INTERACTION_INVALID_REPLY",
    "ElicitationInvalidAnswer": "ELICITATION_INVALID_ANSWER",
    "PrivacyIndexWriteFailed": "PRIVACY_INDEX_WRITE_FAILED",
    "ConfigError": "CONFIG_ERROR",
    "InteractionConfigError": "CONFIG_ERROR",
    "AccessInactive": "ACCESS_INACTIVE",
    "NotLoggedIn": "NOT_LOGGED_IN",
    "BadEndpoint": "BAD_ENDPOINT",
    "BadProvider": "BAD_PROVIDER",
    "BadToken": "BAD_TOKEN",
    "TokenUnavailable": "TOKEN_UNAVAILABLE",
    "RemoteNotAllowed": "REMOTE_NOT_ALLOWED",
    "InvalidParams": "INVALID_PARAMS",
    "InvalidTextElements": "INVALID_TEXT_ELEMENTS",
    "ContextNotDeliverable": "CONTEXT_NOT_DELIVERABLE",
    "EmptyDiff": "EMPTY_DIFF",
    "UnknownSlashCommand": "UNKNOWN_SLASH_COMMAND",
    "SlashNotDispatched": "SLASH_NOT_DISPATCHED",
    "CatalogBadEntry": "CATALOG_BAD_ENTRY",
    "CatalogBadPage": "CATALOG_BAD_PAGE",
    "CatalogCursorRepeated": "CATALOG_CURSOR_REPEATED",
    "CatalogPageLimit": "CATALOG_PAGE_LIMIT",
    "CatalogStale": "CATALOG_STALE",
    "TooManyChannels": "TOO_MANY_CHANNELS",
    "DiffUnavailable": "DIFF_UNAVAILABLE",
    "UnknownCommand": "UNKNOWN_COMMAND",
    "DuplicateRequestId": "DUPLICATE_REQUEST_ID",
    "PatchFormatError": "PATCH_FORMAT",
    "BinaryContentError": "BINARY_CONTENT",
    "EditStoreError": "EDIT_STORE",
    "UndoError": "UNDO_FAILED",
    "AlreadyUndone": "ALREADY_UNDONE",
    "NotApplied": "NOT_APPLIED",
    "NotARegularFile": "NOT_A_REGULAR_FILE",
    "UndoIOError": "UNDO_IO",
    "UndoBinaryContent": "BINARY_CONTENT",
    "UndoPatchFormat": "PATCH_FORMAT",
    "EditConflict": "EDIT_CONFLICT",
    "OutsideWorkspace": "OUTSIDE_WORKSPACE",
    "ReviewError": "REVIEW_FAILED",
    "ReviewStale": "REVIEW_STALE",
    "ReviewNoSession": "REVIEW_NO_SESSION",
    "EditNotFound": "EDIT_NOT_FOUND",
}

TREE = {n: getattr(E, n) for n in E.__all__ if isinstance(getattr(E, n), type)
        and issubclass(getattr(E, n), BaseException)}


def test_r_wire_9_every_class_has_its_listed_code():
    """Each class of the tree carries exactly the code listed above (and the list is complete)."""
    assert set(TREE) == set(CODES)
    assert {n: c.code for n, c in TREE.items()} == CODES


def test_every_class_declares_its_own_code():
    """No class inherits its parent's code silently: each one says its code in its own body."""
    missing = [n for n, c in TREE.items() if "code" not in vars(c)]
    assert not missing


def test_a_shared_code_belongs_to_a_subclass_of_its_owner():
    """Two classes share a code only when one is a subclass of the other (an undo refused for
    binary content is an UndoError *and* a BinaryContentError), so ``except Owner`` still
    catches every error that carries the owner's code."""
    owners: dict[str, type] = {}
    for cls in TREE.values():
        owner = owners.setdefault(cls.code, cls)
        if owner is not cls:
            low, high = (owner, cls) if issubclass(owner, cls) else (cls, owner)
            assert issubclass(low, high), (owner, cls)
            owners[cls.code] = high


def test_the_code_cannot_be_overridden():
    """``code=`` is not an argument any more: the class is the code."""
    with pytest.raises(TypeError):
        E.CodexError("x", code="SOMETHING_ELSE")  # type: ignore[call-arg]
    err = E.QueueFull("x", details={"queued": 3})
    assert err.to_dict() == {"code": "QUEUE_FULL", "message": "x", "details": {"queued": 3}}


def _error_calls_with_code() -> list[str]:
    bad = []
    for pkg in ("codexrt", "codexrt_cli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TREE:
                    if any(k.arg == "code" for k in node.keywords):
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.id}(code=…)")
    return bad


def test_no_module_raises_an_error_with_a_code_override():
    """Nothing in the library or the CLI passes ``code=`` to an error class (issue #20)."""
    assert _error_calls_with_code() == []


def test_endpoint_errors_are_in_the_tree_and_still_os_errors():
    """A refused endpoint is a CodexError *and* an OSError (a failed start, R-CLI-5)."""
    assert issubclass(E.EndpointUnavailable, E.CodexError) and issubclass(E.EndpointUnavailable, OSError)
    assert issubclass(E.EndpointRejected, E.CodexError) and issubclass(E.EndpointRejected, PermissionError)
    assert str(E.EndpointUnavailable("cannot connect to ws://127.0.0.1:1")) == "cannot connect to ws://127.0.0.1:1"


def test_undo_refusals_are_caught_by_the_content_class():
    """``except BinaryContentError`` catches an undo refused for binary content (it escaped
    before: the undo raised a plain UndoError with the BINARY_CONTENT code)."""
    with pytest.raises(E.BinaryContentError) as info:
        raise E.UndoBinaryContent("a.bin: binary content")
    assert isinstance(info.value, E.UndoError) and info.value.code == "BINARY_CONTENT"
    assert issubclass(E.UndoPatchFormat, E.PatchFormatError) and issubclass(E.UndoPatchFormat, E.UndoError)
    assert issubclass(E.EditNotFound, E.UndoError) and issubclass(E.EditNotFound, E.ReviewError)


def _rpc(code: int, message: str) -> E.RpcError:
    return E.RpcError(message, rpc_code=code, method="thread/read")


#: (JSON-RPC code, message as the server words it, row kind, class).
RPC_CASES = [
    (-32001, "Server overloaded; retry later.", "overloaded", E.ServerOverloaded),
    (-32600, "Server overloaded; retry later.", "overloaded", E.ServerOverloaded),  # re-coded by a proxy
    (-32601, "Method not found", "unsupported", None),
    (-32600, "thread/items/list is not supported yet", "unsupported", None),
    (-32600, "unknown variant `thread/turns/list`", "unsupported", None),
    (-32600, "no rollout found for thread id 0199", "threadNotFound", E.ThreadNotFound),
    (-32600, "thread not loaded: 0199", "threadNotFound", E.ThreadNotFound),
    (-32600, "invalid thread id: xyz", "threadNotFound", E.ThreadNotFound),
    (-32600, "thread 0199 not found", "threadNotFound", E.ThreadNotFound),
    (-32600, "thread 0199 has an active writer in another process", "writerConflict", E.WriterConflict),
    (-32600, "Invalid request: missing field `input`", None, None),
]


@pytest.mark.parametrize(("rpc_code", "message", "kind", "cls"), RPC_CASES)
def test_from_rpc_error_table(rpc_code, message, kind, cls):
    """One table classifies server errors (overload, unsupported method, unknown thread,
    writer conflict); the first matching row wins."""
    exc = _rpc(rpc_code, message)
    assert E.rpc_error_kind(exc) == kind
    assert E.from_rpc_error(exc) is cls


def test_from_rpc_error_only_reads_rpc_errors():
    assert E.from_rpc_error(ValueError("not found")) is None
    assert E.rpc_error_kind(E.CodexError("server overloaded")) is None
    assert E.from_rpc_error(E.ServerOverloaded("x", rpc_code=-32600)) is E.ServerOverloaded


def test_the_documented_table_is_the_tree():
    """docs/architecture.md lists every class with its code; the list cannot go stale."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| `([A-Z_]+)` \|", text, re.M))
    assert rows == CODES
