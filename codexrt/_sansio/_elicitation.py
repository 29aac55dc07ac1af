"""MCP elicitation: from ``mcpServer/elicitation/request`` params to questions and back (R-INT-4).

Why this module exists: an MCP server asks the user something through the app-server with a
small JSON Schema (``requestedSchema``: a flat object of string/number/integer/boolean/enum/
multi-select properties, MCP 2025-11-25) or with a URL to open. A host UI shows questions and
gets *strings* back (text boxes, toggles, pickers); the MCP server wants the schema's types.
This module is the pure, no-I/O bridge:

* :func:`parse_elicitation` turns the params into an :class:`Elicitation`: ``mode`` is
  ``form``, ``url``, ``toolApproval`` or ``unsupported`` (the experimental ``openai/form`` / ``openaiForm`` modes
  with an arbitrary schema, ``openai/userVerification`` whose proof codexrt cannot produce, or a
  form whose properties do not fit the MCP primitives). Each form property becomes an
  :class:`ElicitationField` whose ``id`` is the property name — stable across replays and
  sessions, and the key the MCP server expects back. ``required`` comes from the schema's
  ``required`` list only.
* ``toolApproval``: the real app-server (0.169.0) asks to approve an MCP *tool call* with this
  same method — a field-less form whose ``_meta`` carries ``codex_approval_kind:
  "mcp_tool_call"``, ``tool_name``, ``tool_params`` (``tool_params_display``) and the
  ``persist`` choices (``["session", "always"]``). It is an approval, not a question:
  :func:`tool_approval_reply` builds ``{action: "accept", content: {}}`` (plus
  ``_meta: {persist: "session"|"always"}`` when the host chose to remember it), and the safe
  negative is ``{action: "decline", content: null}``.
* :func:`restore_content` turns the host's answers (strings or already-typed values) back into
  the schema's types (string / number / integer / boolean / array of strings), enforcing
  ``required``, enum membership and the numeric/length bounds, and drops empty optional fields.
  Problems raise :class:`~codexrt._sansio._errors.InteractionError` (``ELICITATION_INVALID_ANSWER``)
  naming the field, never echoing the value (it may be a secret).
* Replies: :func:`accept_reply` (``{action: "accept", content}``), :func:`cancel_reply`
  (``{action: "cancel", content: null}`` — also what an unsupported schema gets),
  :func:`decline_reply`, and :func:`url_accept_reply` for URL mode, which a host sends only
  after the *user* opened the URL. codexrt never opens a URL and never treats it as model text:
  it is surfaced as ``Elicitation.url`` and nothing else.

Nothing here ever accepts on its own: every reply is built from an explicit host call.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

import attrs

from codexrt._sansio._errors import ElicitationInvalidAnswer, InteractionError, InteractionInvalidReply
from codexrt._sansio._convert import to_wire, wire

__all__ = [
    "ELICITATION_METHOD",
    "FIELD_TYPES",
    "ElicitationOption",
    "ElicitationField",
    "Elicitation",
    "parse_elicitation",
    "restore_content",
    "validate_content",
    "accept_reply",
    "cancel_reply",
    "decline_reply",
    "url_accept_reply",
    "tool_approval_reply",
    "is_tool_approval",
    "TOOL_APPROVAL_KIND",
]

ELICITATION_METHOD = "mcpServer/elicitation/request"
#: Types a form field can restore to (the MCP primitive schema).
FIELD_TYPES = ("string", "number", "integer", "boolean", "array")

_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}
_INT_RE = re.compile(r"^[+-]?\d+$")
_STRING_KEYS = {"type", "title", "description", "default", "format", "minLength", "maxLength",
                "enum", "enumNames", "oneOf"}
_NUMBER_KEYS = {"type", "title", "description", "default", "minimum", "maximum"}
_BOOL_KEYS = {"type", "title", "description", "default"}
_ARRAY_KEYS = {"type", "title", "description", "default", "items", "minItems", "maxItems"}


@wire()
@attrs.frozen
class ElicitationOption:
    value: str
    label: str

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)


@wire(omit_none=True, last=("options",))
@attrs.frozen
class ElicitationField:
    """One question of a form elicitation. ``id`` is the property name (stable)."""

    id: str
    type: str  # one of FIELD_TYPES
    required: bool
    title: str | None = None
    description: str | None = None
    default: Any = None
    format: str | None = None
    options: tuple[ElicitationOption, ...] = ()  # enum (string) or multi-select (array)
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None

    def to_wire(self) -> dict[str, Any]:
        """The set fields, camelCase, ``options`` last (the converter in ``_convert.py``)."""
        return to_wire(self)


@attrs.frozen
class Elicitation:
    """A parsed elicitation request. ``mode``: ``form`` | ``url`` | ``unsupported``."""

    mode: str
    native_mode: str | None
    message: str
    server_name: str | None
    thread_id: str | None
    turn_id: str | None
    fields: tuple[ElicitationField, ...] = ()
    url: str | None = None
    elicitation_id: str | None = None
    unsupported_reason: str | None = None
    tool_name: str | None = None
    tool_description: str | None = None
    tool_params: Any = None
    tool_params_display: tuple[dict[str, Any], ...] = ()
    persist_choices: tuple[str, ...] = ()

    def field(self, field_id: str) -> ElicitationField | None:
        for f in self.fields:
            if f.id == field_id:
                return f
        return None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "nativeMode": self.native_mode, "message": self.message,
                               "serverName": self.server_name}
        if self.mode == "form":
            out["fields"] = [f.to_wire() for f in self.fields]
        if self.mode == "url":
            out["url"] = self.url
            out["elicitationId"] = self.elicitation_id
        if self.mode == "toolApproval":
            out["toolApproval"] = {"tool": self.tool_name, "toolDescription": self.tool_description,
                                   "params": self.tool_params, "paramsDisplay": list(self.tool_params_display),
                                   "persistChoices": list(self.persist_choices)}
        if self.unsupported_reason is not None:
            out["unsupportedReason"] = self.unsupported_reason
        return out


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _num_or_none(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return v


class _Unsupported(Exception):
    pass


def _options_from(prop: Mapping[str, Any]) -> tuple[ElicitationOption, ...]:
    if "enum" in prop:
        values = prop["enum"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _Unsupported("enum values must be strings")
        names = prop.get("enumNames")
        if names is not None and (not isinstance(names, list) or len(names) != len(values)
                                  or not all(isinstance(n, str) for n in names)):
            raise _Unsupported("enumNames must be strings, one per enum value")
        return tuple(ElicitationOption(v, names[i] if names else v) for i, v in enumerate(values))
    if "oneOf" in prop or "anyOf" in prop:
        opts = prop.get("oneOf", prop.get("anyOf"))
        if not isinstance(opts, list):
            raise _Unsupported("options must be a list")
        out = []
        for o in opts:
            if not isinstance(o, dict) or not isinstance(o.get("const"), str) or not isinstance(o.get("title"), str):
                raise _Unsupported("each titled option needs a string const and title")
            out.append(ElicitationOption(o["const"], o["title"]))
        return tuple(out)
    return ()


def _field(name: str, prop: Any, required: bool) -> ElicitationField:
    if not isinstance(prop, dict):
        raise _Unsupported(f"property {name!r} is not a schema object")
    t = prop.get("type")
    common = {"title": _str_or_none(prop.get("title")), "description": _str_or_none(prop.get("description"))}
    if t == "string":
        extra = set(prop) - _STRING_KEYS
        if extra:
            raise _Unsupported(f"property {name!r} uses unsupported keywords {sorted(extra)}")
        default = prop.get("default")
        return ElicitationField(name, "string", required, default=default if isinstance(default, str) else None,
                                format=_str_or_none(prop.get("format")), options=_options_from(prop),
                                min_length=_int_or_none(prop.get("minLength")),
                                max_length=_int_or_none(prop.get("maxLength")), **common)
    if t in ("number", "integer"):
        extra = set(prop) - _NUMBER_KEYS
        if extra:
            raise _Unsupported(f"property {name!r} uses unsupported keywords {sorted(extra)}")
        return ElicitationField(name, t, required, default=_num_or_none(prop.get("default")),
                                minimum=_num_or_none(prop.get("minimum")), maximum=_num_or_none(prop.get("maximum")),
                                **common)
    if t == "boolean":
        extra = set(prop) - _BOOL_KEYS
        if extra:
            raise _Unsupported(f"property {name!r} uses unsupported keywords {sorted(extra)}")
        default = prop.get("default")
        return ElicitationField(name, "boolean", required, default=default if isinstance(default, bool) else None,
                                **common)
    if t == "array":
        extra = set(prop) - _ARRAY_KEYS
        if extra:
            raise _Unsupported(f"property {name!r} uses unsupported keywords {sorted(extra)}")
        items = prop.get("items")
        if not isinstance(items, dict):
            raise _Unsupported(f"array property {name!r} needs an items schema")
        options = _options_from(items)
        if not options:
            raise _Unsupported(f"array property {name!r} must be a multi-select of string options")
        default = prop.get("default")
        return ElicitationField(name, "array", required,
                                default=list(default) if isinstance(default, list) else None, options=options,
                                min_items=_int_or_none(prop.get("minItems")),
                                max_items=_int_or_none(prop.get("maxItems")), **common)
    raise _Unsupported(f"property {name!r} has unsupported type {t!r}")


#: ``_meta.codex_approval_kind`` of the real server's MCP tool-call approval.
TOOL_APPROVAL_KIND = "mcp_tool_call"


def is_tool_approval(params: Any) -> bool:
    """True for the real server's MCP tool-call approval (``_meta.codex_approval_kind``)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and meta.get("codex_approval_kind") == TOOL_APPROVAL_KIND


#: The tool named in the approval message: 0.147.0 sends no ``_meta.tool_name``, only
#: ``Allow the <server> MCP server to run tool "<tool>"?``.
_APPROVAL_TOOL_RE = re.compile(r'run tool "(.+)"\?\s*$')


def _tool_approval(p: Mapping[str, Any], base: dict[str, Any]) -> Elicitation:
    meta = p.get("_meta") if isinstance(p.get("_meta"), Mapping) else {}
    persist = meta.get("persist")
    display = meta.get("tool_params_display")
    tool = _str_or_none(meta.get("tool_name"))
    if tool is None:
        m = _APPROVAL_TOOL_RE.search(base["message"])
        tool = m.group(1) if m else None
    return Elicitation("toolApproval", tool_name=tool,
                       tool_description=_str_or_none(meta.get("tool_description")),
                       tool_params=meta.get("tool_params"),
                       tool_params_display=tuple(d for d in display if isinstance(d, dict))
                       if isinstance(display, list) else (),
                       persist_choices=tuple(x for x in persist if isinstance(x, str)) if isinstance(persist, list)
                       else (), **base)


def parse_elicitation(params: Mapping[str, Any]) -> Elicitation:
    """Classify and parse ``mcpServer/elicitation/request`` params (R-INT-4). Never raises:
    anything codexrt cannot present faithfully becomes ``mode="unsupported"`` (answer it with
    :func:`cancel_reply`)."""
    p = params if isinstance(params, Mapping) else {}
    native = _str_or_none(p.get("mode"))
    base = {"native_mode": native, "message": _str_or_none(p.get("message")) or _str_or_none(p.get("description"))
            or "", "server_name": _str_or_none(p.get("serverName")), "thread_id": _str_or_none(p.get("threadId")),
            "turn_id": _str_or_none(p.get("turnId"))}
    if is_tool_approval(p):
        return _tool_approval(p, base)
    if native == "url":
        url = _str_or_none(p.get("url"))
        if not url:
            return Elicitation("unsupported", unsupported_reason="url mode without a url", **base)
        return Elicitation("url", url=url, elicitation_id=_str_or_none(p.get("elicitationId")), **base)
    if native != "form":
        reason = ("device-authenticated verification needs a proof codexrt cannot produce"
                  if native == "openai/userVerification" else f"elicitation mode {native!r} is not supported")
        return Elicitation("unsupported", unsupported_reason=reason, **base)
    schema = p.get("requestedSchema")
    try:
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise _Unsupported("requestedSchema must be an object schema")
        props = schema.get("properties")
        if not isinstance(props, dict):
            raise _Unsupported("requestedSchema.properties must be an object")
        req = schema.get("required") or []
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
            raise _Unsupported("requestedSchema.required must be a list of names")
        unknown_required = [r for r in req if r not in props]
        if unknown_required:
            raise _Unsupported(f"required names {unknown_required} are not properties")
        fields = tuple(_field(name, prop, name in req) for name, prop in props.items())
    except _Unsupported as exc:
        return Elicitation("unsupported", unsupported_reason=str(exc), **base)
    return Elicitation("form", fields=fields, **base)


def _bad(field: ElicitationField, why: str) -> InteractionError:
    return ElicitationInvalidAnswer(f"elicitation field {field.id!r}: {why}",
                                    details={"field": field.id})


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip() == "") or (isinstance(v, list) and not v)


def _restore_one(f: ElicitationField, v: Any) -> Any:
    if f.type == "string":
        if not isinstance(v, str):
            raise _bad(f, "expected text")
        if f.options and v not in {o.value for o in f.options}:
            raise _bad(f, "not one of the offered options")
        if f.min_length is not None and len(v) < f.min_length:
            raise _bad(f, f"shorter than {f.min_length} characters")
        if f.max_length is not None and len(v) > f.max_length:
            raise _bad(f, f"longer than {f.max_length} characters")
        return v
    if f.type in ("number", "integer"):
        if isinstance(v, bool):
            raise _bad(f, f"expected a {f.type}")
        if isinstance(v, str):
            s = v.strip()
            if _INT_RE.match(s):
                num: float | int = int(s)
            elif f.type == "integer":
                raise _bad(f, "expected a whole number")
            else:
                try:
                    num = float(s)
                except ValueError:
                    raise _bad(f, "expected a number") from None
        elif isinstance(v, (int, float)):
            num = v
        else:
            raise _bad(f, f"expected a {f.type}")
        if isinstance(num, float) and not math.isfinite(num):
            raise _bad(f, "expected a finite number")
        if f.type == "integer":
            if isinstance(num, float):
                if not num.is_integer():
                    raise _bad(f, "expected a whole number")
                num = int(num)
        if f.minimum is not None and num < f.minimum:
            raise _bad(f, f"below the minimum {f.minimum}")
        if f.maximum is not None and num > f.maximum:
            raise _bad(f, f"above the maximum {f.maximum}")
        return num
    if f.type == "boolean":
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in _TRUE:
            return True
        if isinstance(v, str) and v.strip().lower() in _FALSE:
            return False
        raise _bad(f, "expected yes/no (true/false)")
    # array: a multi-select of string options
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            try:
                v = json.loads(s)
            except ValueError:
                raise _bad(f, "expected a list of options") from None
        else:
            v = [x.strip() for x in s.split(",") if x.strip()]
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise _bad(f, "expected a list of options")
    allowed = {o.value for o in f.options}
    if any(x not in allowed for x in v):
        raise _bad(f, "contains a value that is not one of the offered options")
    if f.min_items is not None and len(v) < f.min_items:
        raise _bad(f, f"needs at least {f.min_items} choices")
    if f.max_items is not None and len(v) > f.max_items:
        raise _bad(f, f"allows at most {f.max_items} choices")
    return list(v)


def restore_content(elicitation: Elicitation, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The host's answers (by field id) → typed ``content`` for ``{action: "accept"}``.

    Empty optional answers are left out; an empty required one, an unknown field id, or a
    value that does not fit raises ``InteractionError(ELICITATION_INVALID_ANSWER)``."""
    if elicitation.mode != "form":
        raise ElicitationInvalidAnswer(f"a {elicitation.mode} elicitation has no form to submit")
    if not isinstance(answers, Mapping):
        raise ElicitationInvalidAnswer("elicitation answers must map field ids to values")
    known = {f.id for f in elicitation.fields}
    unknown = [k for k in answers if k not in known]
    if unknown:
        raise ElicitationInvalidAnswer(f"unknown elicitation field(s) {sorted(map(str, unknown))}",
                                       details={"fields": sorted(map(str, unknown))})
    content: dict[str, Any] = {}
    for f in elicitation.fields:
        v = answers.get(f.id)
        if _empty(v):
            if f.required:
                raise _bad(f, "is required")
            continue
        content[f.id] = _restore_one(f, v)
    return content


def validate_content(elicitation: Elicitation, content: Any) -> None:
    """Check an already-typed ``content`` object against the form (used for raw host replies):
    every value must already have its schema type, required fields present."""
    if not isinstance(content, dict):
        raise InteractionInvalidReply("accepted form elicitations need an object content")
    restored = restore_content(elicitation, content)
    for key, value in content.items():
        r = restored.get(key)
        if key in restored and (type(r) is not type(value) and not (
                isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(r, (int, float)))):
            raise InteractionInvalidReply(f"elicitation field {key!r} does not have its schema type",
                                          details={"field": key})


def accept_reply(elicitation: Elicitation, answers: Mapping[str, Any]) -> dict[str, Any]:
    """``{action: "accept", content}`` with types restored (form mode only)."""
    return {"action": "accept", "content": restore_content(elicitation, answers)}


def cancel_reply() -> dict[str, Any]:
    """``{action: "cancel", content: null}``: the user cancelled, or the schema is unsupported."""
    return {"action": "cancel", "content": None}


def decline_reply() -> dict[str, Any]:
    return {"action": "decline", "content": None}


def tool_approval_reply(elicitation: Elicitation, *, approve: bool, persist: str | None = None) -> dict[str, Any]:
    """The answer to an MCP tool-call approval: ``{action: "accept", content: {}}`` (with
    ``_meta: {persist}`` when ``persist`` is one of the offered choices), or
    ``{action: "decline", content: null}``. Observed on 0.169.0: ``persist: "session"`` stops
    the server asking again for that tool in the session; ``"always"`` makes it write
    ``approval_mode = "approve"`` under ``[mcp_servers.<server>.tools.<tool>]`` in its
    ``config.toml``."""
    if elicitation.mode != "toolApproval":
        raise InteractionInvalidReply("not an MCP tool-call approval")
    if not approve:
        if persist is not None:
            raise InteractionInvalidReply("a declined tool call is not remembered")
        return decline_reply()
    reply: dict[str, Any] = {"action": "accept", "content": {}}
    if persist is not None:
        if persist not in elicitation.persist_choices:
            raise InteractionInvalidReply(f"persist {persist!r} is not offered (choices: {list(elicitation.persist_choices)})")
        reply["_meta"] = {"persist": persist}
    return reply


def url_accept_reply(elicitation: Elicitation) -> dict[str, Any]:
    """URL mode, after the *user* explicitly opened the URL: ``{action: "accept", content: null}``."""
    if elicitation.mode != "url":
        raise InteractionInvalidReply("only a url elicitation is accepted without content")
    return {"action": "accept", "content": None}
