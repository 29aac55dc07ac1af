"""The Agent Client Protocol (ACP) v1 wire of ``codexrt acp`` (pure: no trio, no I/O).

Theory of operation: ACP is JSON-RPC 2.0, one message per line, UTF-8, on the agent's
stdin/stdout. :func:`decode_message` turns one line into exactly one of

* :class:`Request` — a client → agent request whose params decoded into the method's Struct;
* :class:`Notification` — a client → agent notification we handle (``session/cancel``,
  ``$/cancel_request``); notifications of other methods are :class:`Ignored` (JSON-RPC: a
  notification never gets an answer);
* :class:`Response` — the client's answer to one of *our* requests
  (``session/request_permission``, ``elicitation/create``), decoded later by method;
* :class:`Invalid` — a line that gets an error answer: ``-32700`` (not JSON; the id is recovered
  from the line's top level when it has one), ``-32600`` (not a request object, an unusable id,
  nested deeper than :data:`MAX_DEPTH`), ``-32601`` (unknown method), ``-32602`` (params that do
  not decode; the message names the field: ``session/prompt: Object missing required field
  `prompt` - at `$.params```).

Ids of every JSON type JSON-RPC allows (string, number, null) are echoed back as they came.
The Structs here are the stable v1 subset this agent implements, checked against the pinned
official schema (``@agentclientprotocol/sdk`` 2.4.0, ``schema/v1/schema.json``) by
``tests/sansio/test_acp_wire.py``. They are tolerant of unknown fields (``_meta`` and later
additions) and strict on the types of the fields they name.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, Union

import attrs
import msgspec

from codexrt._sansio._redact import process_redactor
from codexrt._sansio._wire import json_depth_exceeds

__all__ = [
    "PROTOCOL_VERSION", "MAX_DEPTH", "PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS",
    "INTERNAL_ERROR", "REQUEST_CANCELLED", "RESOURCE_NOT_FOUND", "AGENT_METHODS", "Request", "Notification",
    "Response", "Invalid", "Ignored", "decode_message", "encode", "response", "error_response", "request",
    "notification", "decode_permission_outcome", "decode_elicitation_response", "PermissionOutcome",
    "ElicitationAnswer",
]

#: The ACP protocol version this agent speaks (an integer, ``ProtocolVersion`` uint16).
PROTOCOL_VERSION = 1
#: Deepest nesting of arrays/objects accepted in one line (the answer is ``-32600`` beyond).
MAX_DEPTH = 64

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
RESOURCE_NOT_FOUND = -32002

RequestId = Union[str, int, float, None]


# --------------------------------------------------------------------------- params Structs

class _S(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of the params Structs: camelCase on the wire, unknown fields ignored."""


class FileSystemCapabilities(_S):
    read_text_file: bool = False
    write_text_file: bool = False


class ElicitationCapabilities(_S):
    form: Union[dict[str, Any], None] = None
    url: Union[dict[str, Any], None] = None


class ClientCapabilities(_S):
    fs: FileSystemCapabilities = msgspec.field(default_factory=FileSystemCapabilities)
    terminal: bool = False
    elicitation: Union[ElicitationCapabilities, None] = None


class Implementation(_S):
    name: str
    version: str
    title: Union[str, None] = None


class InitializeParams(_S):
    protocol_version: int
    client_capabilities: ClientCapabilities = msgspec.field(default_factory=ClientCapabilities)
    client_info: Union[Implementation, None] = None


#: What the schema marks ``x-deserialize-default-on-error`` in ``initialize``: a value of the
#: wrong shape there is read as its default (:func:`_defaulted`), never a refused ``initialize``.
_DEFAULT_ON_ERROR: dict[type, dict[str, Any]] = {
    InitializeParams: {"clientCapabilities": ClientCapabilities, "clientInfo": None},
    ClientCapabilities: {"fs": FileSystemCapabilities, "terminal": None, "elicitation": ElicitationCapabilities},
    FileSystemCapabilities: {"readTextFile": None, "writeTextFile": None},
    ElicitationCapabilities: {"form": None, "url": None},
}


def _defaulted(obj: Any, typ: type) -> dict[str, Any]:
    """``obj`` (params of ``typ``) without the marked fields that do not decode: an object
    field is kept with its own bad fields dropped, any other is dropped (→ its default)."""
    if not isinstance(obj, dict):
        return {}
    out = dict(obj)
    required = {"protocolVersion": 1} if typ is InitializeParams else {}  # to try one field alone
    for key, sub in _DEFAULT_ON_ERROR[typ].items():
        if key not in out:
            continue
        if sub is not None and isinstance(out[key], dict):
            out[key] = _defaulted(out[key], sub)
        try:
            msgspec.convert({**required, key: out[key]}, typ)
        except msgspec.ValidationError:
            del out[key]
    return out


class NewSessionParams(_S):
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] = []


class LoadSessionParams(_S):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] = []


class ResumeSessionParams(_S):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = []
    additional_directories: list[str] = []


class ListSessionsParams(_S):
    cwd: Union[str, None] = None
    cursor: Union[str, None] = None


class CloseSessionParams(_S):
    session_id: str


class TextContent(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class ImageContent(msgspec.Struct, tag="image", tag_field="type", rename="camel"):
    data: str
    mime_type: str
    uri: Union[str, None] = None


class AudioContent(msgspec.Struct, tag="audio", tag_field="type", rename="camel"):
    data: str
    mime_type: str


class ResourceLink(msgspec.Struct, tag="resource_link", tag_field="type", rename="camel"):
    name: str
    uri: str
    title: Union[str, None] = None
    mime_type: Union[str, None] = None


class ResourceContents(msgspec.Struct, rename="camel"):
    """``TextResourceContents`` or ``BlobResourceContents`` (one of ``text``/``blob``)."""

    uri: str
    text: Union[str, None] = None
    blob: Union[str, None] = None
    mime_type: Union[str, None] = None


class EmbeddedResource(msgspec.Struct, tag="resource", tag_field="type"):
    resource: ResourceContents


ContentBlock = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]


class PromptParams(_S):
    session_id: str
    prompt: list[ContentBlock]


#: The optional string fields of content blocks the schema marks ``x-deserialize-default-on-error``
#: (by block ``type``; ``resource`` is its ``resource`` object's): of another type, they are absent.
_BLOCK_DEFAULT_ON_ERROR = {"image": ("uri",), "resource_link": ("mimeType", "title"), "resource": ("mimeType",)}


def _defaulted_blocks(params: dict[str, Any]) -> dict[str, Any]:
    blocks = params.get("prompt")
    if not isinstance(blocks, list):
        return params
    out = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        names = _BLOCK_DEFAULT_ON_ERROR.get(kind) if isinstance(kind, str) else None
        if names:
            inner = block.get("resource") if kind == "resource" else block
            if isinstance(inner, dict) and any(not isinstance(inner.get(n, ""), (str, type(None))) for n in names):
                inner = {k: v for k, v in inner.items() if k not in names or isinstance(v, (str, type(None)))}
                block = {**block, "resource": inner} if kind == "resource" else inner
        out.append(block)
    return {**params, "prompt": out}


class CancelParams(_S):
    session_id: str


class CancelRequestParams(_S):
    request_id: Union[str, int, None]


class SetConfigOptionParams(_S):
    session_id: str
    config_id: str
    value: Union[str, bool]
    type: Union[str, None] = None


#: Client → agent requests this agent implements: method → params Struct.
AGENT_METHODS: dict[str, type[msgspec.Struct]] = {
    "initialize": InitializeParams,
    "session/new": NewSessionParams,
    "session/load": LoadSessionParams,
    "session/resume": ResumeSessionParams,
    "session/list": ListSessionsParams,
    "session/close": CloseSessionParams,
    "session/prompt": PromptParams,
    "session/set_config_option": SetConfigOptionParams,
}

#: Client → agent notifications this agent acts on.
AGENT_NOTIFICATIONS: dict[str, type[msgspec.Struct]] = {
    "session/cancel": CancelParams,
    "$/cancel_request": CancelRequestParams,
}


# --------------------------------------------------------------------------- decoded messages

@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: Any


@attrs.frozen
class Notification:
    method: str
    params: Any


@attrs.frozen
class Response:
    """The client's answer to one of our requests: ``result`` or ``error`` (a dict)."""

    id: RequestId
    result: Any = None
    error: Any = None


@attrs.frozen
class Invalid:
    """A line that gets an error answer (:meth:`reply`)."""

    id: RequestId
    code: int
    message: str
    data: Any = None

    def reply(self) -> dict[str, Any]:
        return error_response(self.id, self.code, self.message, self.data)


@attrs.frozen
class Ignored:
    """Nothing to answer (a notification of a method we do not act on, a blank line)."""

    reason: str


Message = Union[Request, Notification, Response, Invalid, Ignored]

_decoder = msgspec.json.Decoder()


def _usable_id(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _where(text: str) -> str:
    """msgspec's ``"<reason> - at `$.x`"`` with the path made absolute (``$.params.x``)."""
    reason, sep, path = text.rpartition(" - at `")
    if not sep or not path.startswith("$"):
        return f"{text} - at `$.params`"
    return f"{reason} - at `$.params{path.rstrip('`')[1:]}`"


def recover_id(line: bytes) -> RequestId:
    """The top-level ``"id"`` of a line that is not valid JSON, when a scalar id can be read
    there (string, number, null); else None. A bounded scan: strings are skipped whole, only
    keys at depth 1 are looked at, and the scan stops at the first top-level ``"id"``."""
    i, n, depth = 0, len(line), 0
    expect_key = False
    while i < n:
        c = line[i]
        if c == 0x22:  # a string: find its end
            j = i + 1
            while j < n and line[j] != 0x22:
                j += 2 if line[j] == 0x5C else 1
            if j >= n:
                return None
            if depth == 1 and expect_key:
                if line[i:j + 1] == b'"id"':
                    return _scalar_after_colon(line, j + 1)
                expect_key = False
            i = j + 1
            continue
        if c in (0x7B, 0x5B):  # { [
            depth += 1
            expect_key = depth == 1 and c == 0x7B
        elif c in (0x7D, 0x5D):  # } ]
            depth -= 1
            if depth <= 0:
                return None
        elif c == 0x2C and depth == 1:  # ,
            expect_key = True
        i += 1
    return None


def _scalar_after_colon(line: bytes, i: int) -> RequestId:
    rest = line[i:].lstrip()
    if not rest.startswith(b":"):
        return None
    rest = rest[1:].lstrip()
    if rest.startswith(b'"'):
        end = 1
        while end < len(rest) and rest[end] != 0x22:
            end += 2 if rest[end] == 0x5C else 1
        token = rest[:end + 1]
    else:
        end = 0
        while end < len(rest) and rest[end] not in b",}] \t\r\n":
            end += 1
        token = rest[:end]
    try:
        value = _decoder.decode(token)
    except msgspec.MsgspecError:
        return None
    return value if _usable_id(value) else None


def decode_message(line: bytes | bytearray | str) -> Message:
    """One stdin line → one decoded message (module doc). Never raises for any input."""
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
    if not data.strip():
        return Ignored("blank line")
    try:
        obj = _decoder.decode(data)
    except RecursionError:
        return Invalid(recover_id(data), INVALID_REQUEST, f"message nests deeper than {MAX_DEPTH} levels")
    except msgspec.MsgspecError as exc:
        return Invalid(recover_id(data), PARSE_ERROR, f"parse error: {exc}")
    if not isinstance(obj, dict):
        return Invalid(None, INVALID_REQUEST, "a JSON-RPC message must be an object")
    rid = obj.get("id")
    if not _usable_id(rid):
        return Invalid(None, INVALID_REQUEST, "unusable id: a JSON-RPC id is a string, a number or null")
    if json_depth_exceeds(data, MAX_DEPTH):
        return Invalid(rid, INVALID_REQUEST, f"message nests deeper than {MAX_DEPTH} levels")
    method = obj.get("method")
    if method is None:
        if "id" in obj and ("result" in obj or "error" in obj):
            return Response(rid, obj.get("result"), obj.get("error"))
        return Invalid(rid, INVALID_REQUEST, "a request needs a 'method' string")
    if not isinstance(method, str):
        return Invalid(rid, INVALID_REQUEST, "a request needs a 'method' string")
    params = obj.get("params")
    if "id" not in obj:
        ntype = AGENT_NOTIFICATIONS.get(method)
        if ntype is None:
            return Ignored(f"notification {method[:80]!r} is not acted on")
        try:
            return Notification(method, msgspec.convert(params if params is not None else {}, ntype))
        except msgspec.ValidationError as exc:
            return Ignored(f"{method}: {exc}")  # a notification never gets an answer
    ptype = AGENT_METHODS.get(method) or AGENT_NOTIFICATIONS.get(method)  # a notification sent with an id
    if ptype is None:
        return Invalid(rid, METHOD_NOT_FOUND, f"method not found: {method[:120]}", {"method": method[:120]})
    if params is None and method in ("session/list",):
        params = {}
    if not isinstance(params, dict):
        return Invalid(rid, INVALID_PARAMS, f"{method}: params must be an object - at `$.params`")
    if method == "initialize":
        params = _defaulted(params, InitializeParams)
    elif method == "session/prompt":
        params = _defaulted_blocks(params)
    try:
        decoded = msgspec.convert(params, ptype)
    except msgspec.ValidationError as exc:
        return Invalid(rid, INVALID_PARAMS, f"{method}: {_where(str(exc))}")
    if method == "initialize" and not 0 <= decoded.protocol_version <= 65535:  # type: ignore[attr-defined]
        return Invalid(rid, INVALID_PARAMS,
                       f"initialize: protocolVersion must be an integer 0..65535 - at `$.params.protocolVersion`")
    return Request(rid, method, decoded)


# --------------------------------------------------------------------------- client answers

class _Selected(msgspec.Struct, tag="selected", tag_field="outcome", rename="camel"):
    option_id: str


class _Cancelled(msgspec.Struct, tag="cancelled", tag_field="outcome"):
    pass


class _PermissionResponse(msgspec.Struct):
    outcome: Union[_Selected, _Cancelled]


@attrs.frozen
class PermissionOutcome:
    """``selected`` with the option id, or ``cancelled`` (option None)."""

    option_id: str | None


def decode_permission_outcome(result: Any) -> PermissionOutcome:
    """A ``session/request_permission`` result; raises ``ValueError`` naming what is wrong."""
    try:
        res = msgspec.convert(result, _PermissionResponse)
    except msgspec.ValidationError as exc:
        raise ValueError(f"session/request_permission result: {exc}") from None
    return PermissionOutcome(res.outcome.option_id if isinstance(res.outcome, _Selected) else None)


@attrs.frozen
class ElicitationAnswer:
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def decode_elicitation_response(result: Any) -> ElicitationAnswer:
    """An ``elicitation/create`` result; any action but accept/decline/cancel is ``cancel``
    (never an acceptance). Raises ``ValueError`` for a result that is not an object."""
    if not isinstance(result, dict):
        raise ValueError("elicitation/create result must be an object")
    action = result.get("action")
    if action == "accept":
        content = result.get("content")
        if content is not None and not isinstance(content, dict):
            raise ValueError("elicitation/create result: content must be an object")
        return ElicitationAnswer("accept", content or {})
    return ElicitationAnswer("decline" if action == "decline" else "cancel")


# --------------------------------------------------------------------------- output

_encoder = msgspec.json.Encoder()


def encode(obj: Any) -> bytes:
    """One output line (compact JSON + ``\\n``; JSON never holds a raw newline). A value msgspec
    cannot encode is stringified rather than losing the line."""
    try:
        return _encoder.encode(obj) + b"\n"
    except (TypeError, ValueError, OverflowError):
        return json.dumps(obj, ensure_ascii=True, default=str, separators=(",", ":")).encode() + b"\n"


def response(rid: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def error_response(rid: RequestId, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error answer; message and data are redacted on the way out (docs/security.md)."""
    redact = process_redactor()
    err: dict[str, Any] = {"code": code, "message": redact(message)}
    if data is not None:
        err["data"] = redact.redact_obj(data, by_key=False)
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def request(rid: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
