"""The ``codexrt serve`` line codec (pure: no trio, no I/O): one stdin line → a :class:`Command`
or a :class:`BadCommand` carrying its ``ok: false`` reply (R-D-4), and the reply/output lines.

A line that is not JSON, has no usable id, names an unknown command or carries params that do
not decode into the command's Struct (:mod:`codexrt._serve._commands`) gets an ``ok: false``
reply carrying the line's id whenever its top level holds one — also when the line does not
decode whole (a number a double cannot hold, invalid UTF-8, a bad escape elsewhere: the id is
read by a shallow scan) and when the id is a string over :data:`MAX_ID_LENGTH` (refused, and
echoed whole); ``"id": null`` only when no id can be read (none, ``null``, a boolean, an
object, a number out of range). Params errors say where:
``INVALID_PARAMS`` ``"codex.send: Expected `str`, got `int` - at $.params.threadId"`` with
``details.path`` ``"$.params.threadId"``. A line nested deeper than :data:`MAX_COMMAND_DEPTH`
gets ``LINE_TOO_DEEP`` (its id is read from the top level of the line when it can be).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Union

import attrs
import msgspec

from codexrt._sansio._redact import process_redactor
from codexrt._sansio._wire import json_depth_exceeds
from codexrt._sansio._errors import CodexError
from codexrt._serve._commands import ALL_COMMANDS, COMMANDS

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_COMMAND_DEPTH",
    "RequestId",
    "Command",
    "BadCommand",
    "parse_command",
    "line_head_id",
    "encode_line",
    "response_ok",
    "response_error",
    "error_reply",
]

#: Longest usable string id; a command with a longer one is refused (``INVALID_REQUEST``, the
#: refusal echoing the id whole).
MAX_ID_LENGTH = 1024
#: Deepest nesting of arrays/objects in one command line (``LINE_TOO_DEEP`` beyond it). Real
#: commands nest a few levels; the bound keeps parsing and validation far from Python's
#: recursion limit whatever the host sends.
MAX_COMMAND_DEPTH = 64

RequestId = Union[str, int, float]

_JSON_TYPE_NAMES = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                    (list, "array"), (dict, "object"))


def _type_name(v: Any) -> str:
    for cls, name in _JSON_TYPE_NAMES:
        if isinstance(v, cls):
            return name
    return type(v).__name__



@attrs.frozen
class Command:
    """A well-formed command line whose params decoded into the command's Struct."""

    id: RequestId
    name: str
    #: the params as the host sent them (read commands pass keys they do not name through)
    params: dict[str, Any]
    #: the same params decoded (:data:`codexrt._serve._commands.COMMANDS`)
    args: Any = None


@attrs.frozen
class BadCommand:
    """A line that cannot be run; :meth:`reply` is its ``ok: false`` line."""

    id: RequestId | None
    code: str
    message: str
    details: dict[str, Any] | None = None

    def reply(self) -> dict[str, Any]:
        return response_error(self.id, self.code, self.message, self.details)


def response_ok(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"type": "response", "id": request_id, "ok": True, "result": result}


def response_error(request_id: RequestId | None, code: str, message: str,
                   details: Any = None, phase: str | None = None) -> dict[str, Any]:
    # Every error reply is redacted on its way out, whatever made it (R-WIRE-9, docs/security.md).
    redact = process_redactor()
    error: dict[str, Any] = {"code": code, "message": redact(message)}
    if phase is not None:
        error["phase"] = phase
    if details is not None:
        error["details"] = redact.redact_obj(details, by_key=False)
    return {"type": "response", "id": request_id, "ok": False, "error": error}


def error_reply(request_id: RequestId | None, exc: CodexError) -> dict[str, Any]:
    d = exc.to_dict()
    return response_error(request_id, d["code"], d["message"], d.get("details"), d.get("phase"))


def _usable_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return len(value) <= MAX_ID_LENGTH
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _echo_id(value: Any) -> RequestId | None:
    """The id a refusal carries: a usable id, or a string id over :data:`MAX_ID_LENGTH` —
    echoed whole, so the host's wait on it ends (it is the host's own text, bounded by the line
    limit like everything on the line); None for what no host can wait on (null, true, an
    object, a number a double cannot hold)."""
    return value if _usable_id(value) or isinstance(value, str) else None


def _id_too_long(rid: str) -> BadCommand:
    return BadCommand(rid, "INVALID_REQUEST",
                      f"id of {len(rid)} characters is longer than {MAX_ID_LENGTH}; the command was not run "
                      "(this reply echoes the id whole)", {"idLength": len(rid), "maxIdLength": MAX_ID_LENGTH})


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


_decoder = msgspec.json.Decoder()

#: One token of a JSON text, for the shallow id scan of a line too deep to decode: a string, a
#: run of openers, a run of closers, ``:``, ``,``, or a bare literal/number.
_TOKEN = re.compile(rb'\s*(?:("[^"\\]*(?:\\.[^"\\]*)*")|([\[{]+)|([\]}]+)|(:)|(,)|([^\s"\[\]{},:]+))')
#: The shallow scan gives up after this many tokens (the id is then unreadable).
_SCAN_TOKENS = 100_000


def _shallow_id(line: bytes) -> RequestId | None:
    """The top-level ``"id"`` of a command line that cannot be decoded whole (too deep, not
    JSON, a number out of range elsewhere), read by walking tokens and decoding only the id's
    own scalar (:func:`_echo_id`); None when it is not there, not echoable, or not found within
    :data:`_SCAN_TOKENS` tokens. Linear in the line's length."""
    pos, depth, n = 0, 0, len(line)
    key: bytes | None = None
    expect_key = False
    for _ in range(_SCAN_TOKENS):
        m = _TOKEN.match(line, pos)
        if m is None or m.end() == pos:
            return None
        pos = m.end()
        string, opens, closes, colon, comma, literal = m.groups()
        if opens:
            if depth == 0 and opens[:1] != b"{":
                return None
            depth += len(opens)
            if depth == 1:
                expect_key = True
            key = None
        elif closes:
            depth -= len(closes)
            if depth <= 0:
                return None
            key = None
        elif depth == 1 and comma:
            expect_key, key = True, None
        elif depth == 1 and string is not None and expect_key:
            key, expect_key = string, False
        elif depth == 1 and colon:
            pass
        elif depth == 1 and key == b'"id"' and (string is not None or literal):
            if literal and pos >= n:
                return None  # a number at the very end may be cut short (a truncated line, a head)
            try:
                value = _decoder.decode(string if string is not None else literal)
            except msgspec.MsgspecError:
                return None
            return _echo_id(value)
        else:
            key = None if depth == 1 else key
        if pos >= n:
            return None
    return None


def line_head_id(head: bytes) -> RequestId | None:
    """The id of a command line too long to be read, from its first bytes
    (:class:`~codexrt._sansio._framing.OversizedLine` ``head``): found when the line names it at
    its top level before the cut (``{"id": …, "command": …, "params": <the long part>}``)."""
    return _shallow_id(head) if head else None


def _where(text: str) -> tuple[str, str]:
    """msgspec's ``"<reason> - at `$.x`"`` → (reason, ``"$.params.x"``); no path: ``$.params``."""
    reason, sep, path = text.rpartition(" - at `")
    if not sep or not path.startswith("$"):
        return text, "$.params"
    return reason, "$.params" + path.rstrip("`")[1:]


def _too_deep(rid: RequestId | None) -> BadCommand:
    return BadCommand(rid, "LINE_TOO_DEEP", f"command line nests deeper than {MAX_COMMAND_DEPTH} levels",
                      {"maxDepth": MAX_COMMAND_DEPTH})


def parse_command(line: bytes | bytearray | str) -> Command | BadCommand:
    """One stdin line → a :class:`Command`, or a :class:`BadCommand` carrying its error reply
    (R-D-4). Never raises for any input."""
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
    try:
        obj = _decoder.decode(data)
    except RecursionError:
        return _too_deep(_shallow_id(data))
    except msgspec.MsgspecError as exc:
        # the id is recovered when the line has one at its top level (R-D-4: a host waits on it)
        return BadCommand(_shallow_id(data), "INVALID_JSON", f"line is not valid JSON: {exc}")
    if json_depth_exceeds(data, MAX_COMMAND_DEPTH):
        return _too_deep(_echo_id(obj.get("id")) if isinstance(obj, dict) else None)
    if not isinstance(obj, dict):
        return BadCommand(None, "INVALID_REQUEST",
                          f"a command must be a JSON object, got {_type_name(obj)}")
    if "id" not in obj:
        return BadCommand(None, "INVALID_REQUEST",
                          "a command needs an 'id' (string or number); lines without an id are not notifications here")
    rid = obj["id"]
    if isinstance(rid, str) and len(rid) > MAX_ID_LENGTH:
        return _id_too_long(rid)
    if not _usable_id(rid):
        return BadCommand(None, "INVALID_REQUEST",
                          f"unusable id of type {_type_name(rid)}: use a string (at most {MAX_ID_LENGTH} "
                          "characters) or a finite number")
    name = obj.get("command")
    if not isinstance(name, str):
        return BadCommand(rid, "INVALID_REQUEST", "a command needs a 'command' string")
    extra = sorted(k for k in obj if k not in ("id", "command", "params"))
    if extra:
        return BadCommand(rid, "INVALID_REQUEST", f"unknown top-level field(s) {extra}; a command is "
                          "{\"id\", \"command\", \"params\"}", {"fields": extra})
    if name not in ALL_COMMANDS:
        return BadCommand(rid, "UNKNOWN_COMMAND", f"unknown command {_short(name)!r}",
                          {"command": _short(name), "known": sorted(ALL_COMMANDS)})
    params = obj.get("params", {})
    if not isinstance(params, dict):
        return BadCommand(rid, "INVALID_PARAMS", f"params must be an object, got {_type_name(params)}")
    try:
        args = msgspec.convert(params, COMMANDS[name].params)
    except msgspec.ValidationError as exc:
        reason, path = _where(str(exc))
        return BadCommand(rid, "INVALID_PARAMS", f"{name}: {reason} - at {path}", {"command": name, "path": path})
    return Command(rid, name, params, args)


_encoder = msgspec.json.Encoder()


def encode_line(obj: Any) -> bytes:
    """One output line (compact JSON + ``\\n``). Values msgspec cannot encode are stringified
    rather than losing the line."""
    try:
        return _encoder.encode(obj) + b"\n"
    except (TypeError, ValueError, OverflowError):
        return json.dumps(obj, ensure_ascii=True, default=str, separators=(",", ":")).encode() + b"\n"
