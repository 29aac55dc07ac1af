"""Attribution of legacy code-mode ``exec`` wrappers to individual tool records (R-H-5).

Why this module exists
----------------------
Codex "code mode" lets the model run a JavaScript cell (the ``exec`` *custom* tool) that
calls real tools through the global ``tools`` object — ``await tools.exec_command({...})``,
often several at once inside ``Promise.all``. A transcript then holds one opaque wrapper
(the script and its printed text) followed by *independent* native receipts of the nested
calls. A history reader that shows only the blob is useless; one that guesses which output
belongs to which command shows the wrong output under the wrong command, which is worse.
This engine decides, for one wrapper, whether it can be *replaced* by individual records
or must be *kept* whole — and it only replaces when every call and its result are
attributed without doubt.

Theory of operation
-------------------
The engine is pure: no I/O, no trio, and it never executes anything. It runs in three
stages, each of which may only *remove* certainty, never invent it:

1. **Static source scan.** A small tokenizer for the JS subset that matters (strings,
   template literals with nested ``${}``, comments, brackets, numbers, punctuation — no
   regex literals, no JS engine) finds every ``tools.NAME(...)`` call, parses literal
   arguments (anything computed is *dynamic*), finds ``Promise.all([...])`` /
   ``Promise.allSettled([...])`` batches and their element slots (``Promise.resolve(...)``
   and other non-tool entries are internal orchestration data: they keep their slot but
   make no record and are not counted), and recognises how the batch is printed:
   labels from ``forEach`` or from a ``for`` loop over ``batch.length`` (template strings
   or ``"Result " + i``), ``{i, result}`` / ``{index, ...}`` envelopes, or the whole array.
   A call inside a loop/callback, with a dynamic tool name, or reachable through an alias
   of ``tools`` has unknown multiplicity: the wrapper is kept.
2. **Printed output parse.** The ``Script completed|failed|...`` header and the trailing
   ``Script error:`` envelope are split off (CRLF normalised); then the print plan yields
   one *slot value* per array index — JSON, plain text, an explicit rejection (only when
   the source prints the whole ``allSettled`` receipt by index), or a spread envelope with
   no independent result. Empty array, ``null`` and a rejection stay distinct; text equal
   to a label is data; an ``i``/``index`` conflict or a duplicate slot keeps the wrapper.
3. **Receipt matching.** Native receipts are paired call→output by ``call_id`` (order
   independent; a bounded cache holds unpaired records and reports overflow). A source
   call is matched to a native invocation first by process identity (a ``session_id`` in
   its own slot value against the receipt's ``process_id``), then by *mutually unique*
   tool+command+working-directory compatibility (explicit absolute directories compared
   as normalised paths, ``file:`` URIs as paths, Windows separators folded, a POSIX
   backslash kept as a file-name character). Arrival or completion order is never used.
   Receipts that match a call but not uniquely keep the wrapper; receipts matching
   nothing are reported as unmatched and never override a complete projection.

Statuses come only from native receipts (exit code, ``success``, ``Process exited with
code N``) or from an unwrapped settled rejection — never from ``exit_code``/``status``
fields inside printed data. ``write_stdin`` never creates a record: it updates the
command whose process it targets (inside this wrapper, or one passed in
``known_processes``); Ctrl+C ends only that command. A wrapper of pure polling therefore
replaces into zero records plus updates. Static ``apply_patch`` literals always yield a
preview; without a separate result their status is ``unknown`` and the wrapper is kept.
"""

from __future__ import annotations

import enum
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import unquote, urlparse

import attrs

__all__ = [
    "DEFAULT_MAX_UNPAIRED",
    "Attribution",
    "InternalEntry",
    "KeepReason",
    "PatchFile",
    "PatchPreview",
    "PollUpdate",
    "ProcessUpdate",
    "Receipt",
    "ReceiptPairer",
    "SlotValue",
    "ToolRecord",
    "WrapperCall",
    "attribute_wrapper",
    "normalize_dir",
    "patch_end_receipts",
    "receipts_from_rollout_line",
]

#: Default bound of the cache of unpaired native receipts (calls waiting for their output
#: and outputs waiting for their call). Overflow evicts the oldest entry and is reported.
DEFAULT_MAX_UNPAIRED = 256

COMMAND_TOOLS = frozenset({"exec_command", "shell_command", "shell", "local_shell"})
KNOWN_TOOLS = COMMAND_TOOLS | {"write_stdin", "apply_patch"}
_PRINT_FUNCS = ("text",)
_CTRL_C = "\x03"


class KeepReason(str, enum.Enum):
    """Why a wrapper is kept whole (stable codes; the reader may show them)."""

    SOURCE_UNPARSEABLE = "source_unparseable"
    NO_TOOL_CALLS = "no_tool_calls"
    DYNAMIC_TOOL = "dynamic_tool"
    DYNAMIC_MULTIPLICITY = "dynamic_multiplicity"
    DYNAMIC_INPUT = "dynamic_input"
    UNKNOWN_TOOL = "unknown_tool"
    INDEX_CONFLICT = "index_conflict"
    AMBIGUOUS_OUTPUT = "ambiguous_output"
    SLOT_MISMATCH = "slot_mismatch"
    MISSING_RESULT = "missing_result"
    AMBIGUOUS_RECEIPT = "ambiguous_receipt"
    IDENTITY_CONFLICT = "identity_conflict"
    UNKNOWN_PROCESS = "unknown_process"
    PATCH_WITHOUT_RESULT = "patch_without_result"
    STATUS_CONFLICT = "status_conflict"
    RECEIPT_OVERFLOW = "receipt_overflow"
    ARRAY_REBOUND = "array_rebound"


class _Dynamic:
    """Marker for a value the static scan cannot know (identifiers, ``${}``, calls)."""

    _inst: _Dynamic | None = None

    def __new__(cls) -> _Dynamic:
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "DYNAMIC"


DYNAMIC: Any = _Dynamic()


class _Unresolved(Exception):
    """Internal: the wrapper must be kept; carries the reason and a human detail."""

    def __init__(self, reason: KeepReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# ---------------------------------------------------------------------------------------
# Public data model
# ---------------------------------------------------------------------------------------


@attrs.frozen
class WrapperCall:
    """One legacy wrapper call.

    ``source`` is the static JavaScript text (the ``exec`` custom tool input). ``output`` is
    what the wrapper returned: a single string, or the list of text content items (the
    first of which normally carries the ``Script completed`` header); ``None`` when no
    output was recorded. ``call_id`` is the wrapper's own call id (kept for the reader).
    """

    source: str
    output: str | Sequence[str] | None = None
    call_id: str | None = None

    @classmethod
    def from_response_items(cls, call: Mapping[str, Any], output: Mapping[str, Any] | None) -> WrapperCall:
        """From the rollout payloads ``custom_tool_call`` (name ``exec``, ``input`` = the
        script) and its ``custom_tool_call_output`` (``output`` = a list of ``input_text``
        items, the first being the ``Script completed`` header) — the real 0.169.0 shape."""
        out: Any = None if output is None else output.get("output")
        if isinstance(out, list):
            out = [x["text"] for x in out if isinstance(x, Mapping) and isinstance(x.get("text"), str)]
        elif not isinstance(out, str):
            out = None
        src = call.get("input", call.get("arguments", ""))
        return cls(src if isinstance(src, str) else "", out, call.get("call_id"))


@attrs.frozen
class Receipt:
    """One native record following the wrapper: a nested call or its output.

    ``kind`` is ``"call"`` (``function_call`` / ``custom_tool_call``) or ``"output"``
    (``function_call_output`` / ``custom_tool_call_output``). On a call, ``tool`` is the
    tool name and ``arguments`` the parsed argument object (or the raw freeform input of
    ``apply_patch``). On an output, ``output`` is the text and ``success`` / ``exit_code``
    the *native* outcome when the record states it. ``process_id`` is the native
    process/session id where the record carries one. ``ordinal`` is the record's position
    in its transcript (used only to order polling chunks, never to attribute).
    ``headerless`` marks an output that is the command's own bytes (``aggregated_output``
    of an item, a patch's stdout): it has no tool header, so nothing in it is read as an
    exit code or a process id.
    """

    kind: Literal["call", "output"]
    call_id: str
    tool: str | None = None
    arguments: Any = None
    output: str | None = None
    success: bool | None = None
    exit_code: int | None = None
    process_id: str | None = attrs.field(default=None, converter=lambda v: _pid(v))
    ordinal: int | None = None
    headerless: bool = False

    @classmethod
    def from_response_item(cls, payload: Mapping[str, Any], *, ordinal: int | None = None) -> Receipt | None:
        """Build a receipt from a rollout ``response_item`` payload; ``None`` if it is not
        a tool call or tool output (messages, reasoning, …)."""
        typ = payload.get("type")
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return None
        if typ in ("function_call", "custom_tool_call", "local_shell_call"):
            name = payload.get("name") or ("local_shell" if typ == "local_shell_call" else None)
            raw = payload.get("arguments", payload.get("input", payload.get("action")))
            args: Any = raw
            if typ == "function_call" and isinstance(raw, str):
                try:
                    args = json.loads(raw)
                except ValueError:
                    args = raw
            return cls("call", call_id, tool=name, arguments=args, ordinal=ordinal)
        if typ in ("function_call_output", "custom_tool_call_output"):
            out = payload.get("output")
            success = None
            if isinstance(out, Mapping):
                success = out.get("success") if isinstance(out.get("success"), bool) else None
                out = out.get("content", out.get("body"))
            text = _content_text(out)
            return cls("output", call_id, output=text, success=success, ordinal=ordinal)
        return None


def receipts_from_rollout_line(line: Mapping[str, Any]) -> list[Receipt]:
    """Native receipts carried by one rollout line (``{timestamp, [ordinal], type, payload}``).

    * ``response_item`` tool calls / outputs → one receipt (see :meth:`Receipt.from_response_item`);
    * ``event_msg`` ``item_completed`` of a ``CommandExecution`` item — how the real 0.169.0
      server records a command run from inside a code-mode cell (id ``exec-<uuid>``,
      ``process_id``, ``command`` argv, ``cwd`` as a ``file:`` URI, ``aggregated_output``,
      ``exit_code``, ``status``) → a call and its output, paired by the item id. A bash
      ``-lc`` argv is read back as its script text.
    Anything else → ``[]``.
    """
    payload = line.get("payload")
    ordinal = line.get("ordinal") if isinstance(line.get("ordinal"), int) else None
    if not isinstance(payload, Mapping):
        return []
    if line.get("type") == "response_item":
        r = Receipt.from_response_item(payload, ordinal=ordinal)
        return [] if r is None else [r]
    if line.get("type") != "event_msg" or payload.get("type") != "item_completed":
        return []
    item = payload.get("item")
    if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
        return []
    if item.get("type") == "FileChange":
        return _file_change_receipts(item["id"], item.get("changes"), item.get("status"), item, ordinal)
    if item.get("type") != "CommandExecution":
        return []
    argv = item.get("command")
    if isinstance(argv, list) and len(argv) == 3 and argv[1] in ("-lc", "-c") and isinstance(argv[2], str):
        cmd: Any = argv[2]
    elif isinstance(argv, list):
        cmd = " ".join(str(a) for a in argv)
    else:
        cmd = argv
    args: dict[str, Any] = {"cmd": cmd}
    if isinstance(item.get("cwd"), str):
        args["workdir"] = item["cwd"]
    pid = item.get("process_id")
    status = item.get("status")
    call = Receipt("call", item["id"], tool="exec_command", arguments=args, process_id=pid, ordinal=ordinal)
    if status in ("in_progress", "inProgress"):
        return [call]
    exit_code = item.get("exit_code")
    success = None if status not in ("failed", "declined") else False
    out = item.get("aggregated_output")
    return [
        call,
        Receipt(
            "output",
            item["id"],
            output=_crlf(out) if isinstance(out, str) else None,
            success=success,
            exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            process_id=pid,
            ordinal=ordinal,
            headerless=True,
        ),
    ]


def patch_end_receipts(payload: Mapping[str, Any], *, ordinal: int | None = None) -> list[Receipt]:
    """Receipts of an ``event_msg/patch_apply_end`` (``call_id``, ``changes``, ``success`` /
    ``status``, ``stdout``/``stderr``): an ``apply_patch`` call identified by the files it
    changed, and its native outcome."""
    cid = payload.get("call_id")
    if not isinstance(cid, str):
        return []
    status = payload.get("status")
    if not isinstance(status, str):
        status = {True: "completed", False: "failed"}.get(payload.get("success"))  # type: ignore[arg-type]
    return _file_change_receipts(cid, payload.get("changes"), status, payload, ordinal)


def _file_change_receipts(cid: str, changes: Any, status: Any, src: Mapping[str, Any],
                          ordinal: int | None) -> list[Receipt]:
    files: list[str] = []
    if isinstance(changes, Mapping):
        for path, ch in changes.items():
            files.append(str(path))
            mv = ch.get("move_path") if isinstance(ch, Mapping) else None
            if isinstance(mv, str):
                files.append(mv)
    elif isinstance(changes, list):
        for ch in changes:
            if isinstance(ch, Mapping) and isinstance(ch.get("path"), str):
                files.append(ch["path"])
    call = Receipt("call", cid, tool="apply_patch", arguments={"files": sorted(files)}, ordinal=ordinal)
    if status in ("in_progress", "inProgress", None):
        return [call]
    text = "".join(x for x in (src.get("stdout"), src.get("stderr")) if isinstance(x, str)) or None
    success = True if status == "completed" else False if status in ("failed", "declined") else None
    return [call, Receipt("output", cid, output=_crlf(text) if text else None, success=success, ordinal=ordinal,
                          headerless=True)]


@attrs.frozen
class SlotValue:
    """The value printed for one batch slot.

    ``kind``: ``"json"`` (``value`` is the decoded JSON, so ``[]`` and ``None`` stay
    distinct), ``"text"`` (non-JSON text after a label), ``"rejected"`` (an ``allSettled``
    rejection unwrapped because the source printed the whole settled receipt by index;
    ``value`` is the reason body — the marker itself is ``kind``, never a field of the
    body), ``"spread"`` (an index envelope into which the local value was spread: there is
    no independent result, ``value`` is the object as printed).
    """

    kind: Literal["json", "text", "rejected", "spread"]
    value: Any
    raw: str


@attrs.frozen
class PatchFile:
    path: str
    change: Literal["add", "update", "delete"]
    move_to: str | None = None
    added: int = 0
    removed: int = 0


@attrs.frozen
class PatchPreview:
    """A static ``apply_patch`` literal parsed for display only (never applied). ``status``
    is ``"unknown"`` unless a separate native result exists."""

    source_index: int
    patch: str
    files: tuple[PatchFile, ...]
    status: str = "unknown"


@attrs.frozen
class PollUpdate:
    """One ``write_stdin`` (polling or input) applied to the command it targets."""

    chars: str | None
    output: str | None
    exit_code: int | None
    call_id: str | None
    source_index: int | None
    evidence: tuple[str, ...]


@attrs.frozen
class ProcessUpdate:
    """Updates for a process started *outside* this wrapper (``known_processes``)."""

    process_id: str
    record_key: str
    polls: tuple[PollUpdate, ...]
    status: str | None
    exit_code: int | None


@attrs.frozen
class InternalEntry:
    """A non-tool batch entry (e.g. ``Promise.resolve(...)``): orchestration data, no record,
    not counted; keeps its expression and the value printed at its slot."""

    batch: int
    slot: int
    expression: str
    value: SlotValue | None


@attrs.frozen
class ToolRecord:
    """One individual tool record replacing (part of) a wrapper.

    ``status`` is one of ``completed``, ``failed``, ``in_progress``, ``interrupted``,
    ``unknown`` and only ever comes from native evidence. ``output`` is the native output
    body when a receipt was matched, else the printed slot text; ``data`` keeps the printed
    slot value as data. ``evidence`` names how the attribution was proved.
    """

    tool: str
    command: str | None
    args: Mapping[str, Any] | str
    cwd: str | None
    output: str | None
    data: SlotValue | None
    status: str
    exit_code: int | None
    process_id: str | None
    call_id: str | None
    source_index: int
    slot: tuple[int, int] | None
    evidence: tuple[str, ...]
    polls: tuple[PollUpdate, ...] = ()
    patch: PatchPreview | None = None


@attrs.frozen
class Attribution:
    """The engine's answer for one wrapper.

    ``replace`` True: show ``records`` (in source order) instead of the wrapper, apply
    ``updates`` to earlier records. ``replace`` False: keep the wrapper and its output;
    ``reason``/``detail`` say why; ``previews`` still lists static patch previews.
    """

    replace: bool
    records: tuple[ToolRecord, ...] = ()
    reason: KeepReason | None = None
    detail: str | None = None
    previews: tuple[PatchPreview, ...] = ()
    internal: tuple[InternalEntry, ...] = ()
    updates: tuple[ProcessUpdate, ...] = ()
    script_status: str | None = None
    script_error: str | None = None
    unmatched_receipts: tuple[str, ...] = ()
    evicted: int = 0

    @property
    def keep(self) -> bool:
        return not self.replace


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------


def _pid(v: Any) -> str | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


def _crlf(s: str) -> str:
    return s.replace("\r\n", "\n")


def _content_text(out: Any) -> str | None:
    if out is None:
        return None
    if isinstance(out, str):
        return _crlf(out)
    if isinstance(out, Sequence):
        parts = [
            item.get("text", "") for item in out if isinstance(item, Mapping) and isinstance(item.get("text"), str)
        ]
        return _crlf("\n".join(parts))
    return _crlf(json.dumps(out))


_WIN_ABS = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\[^\\]+\\)")


def normalize_dir(path: Any) -> str | None:
    """Normalise an explicit *absolute* working directory for comparison; ``None`` when the
    value is not an absolute directory (relative or missing: no unique evidence).

    ``file:`` URIs compare as paths; Windows paths get ``/`` separators and an upper-case
    drive letter; a backslash in a POSIX absolute path stays a file-name character.
    """
    if not isinstance(path, str) or not path:
        return None
    p = path
    if p.lower().startswith("file:"):
        u = urlparse(p)
        p = unquote(u.path)
        if u.netloc and u.netloc.lower() != "localhost":
            p = f"//{u.netloc}{p}"
        if re.match(r"^/[A-Za-z]:", p):
            p = p[1:]
    if _WIN_ABS.match(p):
        p = p.replace("\\", "/")
        if p[1] == ":":
            p = p[0].upper() + p[1:]
        prefix = "//" if p.startswith("//") else ""
        body = re.sub(r"/+", "/", p[len(prefix):])
        p = prefix + body
    elif p.startswith("/"):
        p = re.sub(r"/+", "/", p)
    else:
        return None
    p = re.sub(r"/\./", "/", p)
    while len(p) > 1 and p.endswith("/") and not re.fullmatch(r"[A-Za-z]:/", p):
        p = p[:-1]
    if p.endswith("/."):
        p = p[:-2] or "/"
    return p


# ---------------------------------------------------------------------------------------
# Tokenizer for the JS subset
# ---------------------------------------------------------------------------------------


@attrs.frozen
class _Tok:
    kind: str  # "id" | "num" | "str" | "tpl" | "p"
    value: Any  # id/p: text; num: number; str: decoded text; tpl: tuple[str | tuple[_Tok, ...]]
    pos: int


_PUNCTS = sorted(
    "=== !== ... **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *= /= %= ** << >>".split(),
    key=len,
    reverse=True,
)
_ESC = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


class _Lexer:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0

    def error(self, msg: str) -> _Unresolved:
        return _Unresolved(KeepReason.SOURCE_UNPARSEABLE, f"{msg} at offset {self.i}")

    def escape(self) -> str:
        s, i = self.s, self.i
        c = s[i + 1] if i + 1 < len(s) else ""
        if c == "u":
            if s.startswith("{", i + 2):
                end = s.index("}", i + 3)
                self.i = end + 1
                return chr(int(s[i + 3 : end], 16))
            self.i = i + 6
            return chr(int(s[i + 2 : i + 6], 16))
        if c == "x":
            self.i = i + 4
            return chr(int(s[i + 2 : i + 4], 16))
        if c == "\n":
            self.i = i + 2
            return ""
        self.i = i + 2
        return _ESC.get(c, c)

    def tokens(self, *, until_brace: bool = False) -> list[_Tok]:
        s = self.s
        out: list[_Tok] = []
        depth = 0
        while self.i < len(s):
            c = s[self.i]
            if c.isspace():
                self.i += 1
            elif s.startswith("//", self.i):
                nl = s.find("\n", self.i)
                self.i = len(s) if nl < 0 else nl
            elif s.startswith("/*", self.i):
                end = s.find("*/", self.i + 2)
                if end < 0:
                    raise self.error("unterminated comment")
                self.i = end + 2
            elif c in "\"'":
                start = self.i
                self.i += 1
                buf = []
                while True:
                    if self.i >= len(s) or s[self.i] == "\n":
                        raise self.error("unterminated string")
                    ch = s[self.i]
                    if ch == c:
                        self.i += 1
                        break
                    if ch == "\\":
                        try:
                            buf.append(self.escape())
                        except (ValueError, IndexError):
                            raise self.error("bad escape") from None
                    else:
                        buf.append(ch)
                        self.i += 1
                out.append(_Tok("str", "".join(buf), start))
            elif c == "`":
                out.append(self.template())
            elif c.isdigit() or (c == "." and self.i + 1 < len(s) and s[self.i + 1].isdigit()):
                m = re.compile(r"0[xX][0-9a-fA-F_]+|(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][+-]?\d+)?").match(s, self.i)
                assert m is not None
                txt = m.group(0).replace("_", "")
                val: Any = int(txt, 16) if txt[:2].lower() == "0x" else float(txt)
                if isinstance(val, float) and val.is_integer() and "." not in txt and "e" not in txt.lower():
                    val = int(val)
                out.append(_Tok("num", val, self.i))
                self.i = m.end()
            elif c.isalpha() or c in "_$":
                m = re.compile(r"[\w$]+").match(s, self.i)
                assert m is not None
                out.append(_Tok("id", m.group(0), self.i))
                self.i = m.end()
            else:
                if until_brace:
                    if c == "{":
                        depth += 1
                    elif c == "}":
                        if depth == 0:
                            self.i += 1
                            return out
                        depth -= 1
                for p in _PUNCTS:
                    if s.startswith(p, self.i):
                        out.append(_Tok("p", p, self.i))
                        self.i += len(p)
                        break
                else:
                    out.append(_Tok("p", c, self.i))
                    self.i += 1
        if until_brace:
            raise self.error("unterminated template substitution")
        return out

    def template(self) -> _Tok:
        s = self.s
        start = self.i
        self.i += 1
        parts: list[Any] = []
        buf: list[str] = []
        while True:
            if self.i >= len(s):
                raise self.error("unterminated template literal")
            ch = s[self.i]
            if ch == "`":
                self.i += 1
                break
            if ch == "\\":
                try:
                    buf.append(self.escape())
                except (ValueError, IndexError):
                    raise self.error("bad escape") from None
            elif s.startswith("${", self.i):
                parts.append("".join(buf))
                buf = []
                self.i += 2
                parts.append(tuple(self.tokens(until_brace=True)))
            else:
                buf.append(ch)
                self.i += 1
        parts.append("".join(buf))
        return _Tok("tpl", tuple(parts), start)


def _tokenize(src: str) -> list[_Tok]:
    return _Lexer(_crlf(src)).tokens()


_OPEN = {"(": ")", "[": "]", "{": "}"}


def _brackets(toks: Sequence[_Tok]) -> dict[int, int]:
    match: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.kind != "p":
            continue
        if t.value in _OPEN:
            stack.append(i)
        elif t.value in (")", "]", "}"):
            if not stack or _OPEN[toks[stack[-1]].value] != t.value:
                raise _Unresolved(KeepReason.SOURCE_UNPARSEABLE, f"unbalanced {t.value!r} at offset {t.pos}")
            match[stack.pop()] = i
    if stack:
        raise _Unresolved(KeepReason.SOURCE_UNPARSEABLE, "unbalanced brackets")
    return match


def _is(t: _Tok | None, kind: str, value: Any = None) -> bool:
    return t is not None and t.kind == kind and (value is None or t.value == value)


def _split_top(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int], sep: str = ",") -> list[tuple[int, int]]:
    """Split ``toks[lo:hi]`` at top-level ``sep``; empty trailing element dropped."""
    spans: list[tuple[int, int]] = []
    i = start = lo
    while i < hi:
        t = toks[i]
        if t.kind == "p" and t.value in _OPEN:
            i = match[i] + 1
            continue
        if t.kind == "p" and t.value == sep:
            spans.append((start, i))
            start = i + 1
        i += 1
    if start < hi:
        spans.append((start, hi))
    return spans


def _tok_text(toks: Sequence[_Tok]) -> str:
    def one(t: _Tok) -> str:
        if t.kind == "str":
            return json.dumps(t.value)
        if t.kind == "tpl":
            return "`" + "".join(p if isinstance(p, str) else "${" + _tok_text(p) + "}" for p in t.value) + "`"
        return str(t.value)

    out = ""
    for t in toks:
        s = one(t)
        if out and (out[-1].isalnum() or out[-1] in "_$") and (s[0].isalnum() or s[0] in "_$"):
            out += " "
        out += s
    return out


def _literal(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int]) -> Any:
    """The static value of the expression ``toks[lo:hi]``, or DYNAMIC."""
    if hi - lo == 2 and _is(toks[lo], "p", "-") and toks[lo + 1].kind == "num":
        return -toks[lo + 1].value
    if hi - lo == 1:
        t = toks[lo]
        if t.kind in ("str", "num"):
            return t.value
        if t.kind == "tpl":
            return t.value[0] if len(t.value) == 1 else DYNAMIC
        if t.kind == "id" and t.value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[t.value]
        return DYNAMIC
    t = toks[lo]
    if t.kind == "p" and t.value in ("[", "{") and match.get(lo) == hi - 1:
        inner = _split_top(toks, lo + 1, hi - 1, match)
        if t.value == "[":
            return [_literal(toks, a, b, match) for a, b in inner]
        obj: dict[str, Any] = {}
        for a, b in inner:
            k = toks[a]
            if b - a >= 3 and k.kind in ("id", "str", "num") and _is(toks[a + 1], "p", ":"):
                obj[str(k.value)] = _literal(toks, a + 2, b, match)
            else:
                return DYNAMIC
        return obj
    return DYNAMIC


def _has_dynamic(v: Any) -> bool:
    if v is DYNAMIC:
        return True
    if isinstance(v, list):
        return any(_has_dynamic(x) for x in v)
    if isinstance(v, dict):
        return any(_has_dynamic(x) for x in v.values())
    return False


# ---------------------------------------------------------------------------------------
# Static source model
# ---------------------------------------------------------------------------------------


@attrs.define
class _SrcCall:
    index: int  # order in source, counting tool calls only
    tool: str
    args: Any  # static literal (dict / str) or DYNAMIC parts inside
    lo: int  # token span of the whole call expression
    hi: int
    batch: int | None = None
    slot: int | None = None


@attrs.define
class _Batch:
    number: int
    settled: bool
    var: str | None
    entries: list[tuple[str, Any]]  # ("call", _SrcCall) | ("internal", expression text)
    end: int = -1  # token index of the closing ``)`` of ``Promise.all(...)``


@attrs.define
class _Plan:
    """How a batch's values are printed."""

    kind: Literal["label", "envelope", "array"]
    batch: int
    prefix: str = ""
    sep: str = ""
    offset: int = 0
    json_value: bool = True
    whole: bool = True  # the printed value is the whole element (settled receipt for allSettled)
    spread: bool = False  # envelope spreads the local value (no independent result)
    index_keys: tuple[str, ...] = ()
    exclusive: bool = True  # no other print call could interleave text


@attrs.define
class _Source:
    calls: list[_SrcCall]
    batches: list[_Batch]
    plans: list[_Plan]


def _scopes(toks: Sequence[_Tok], match: Mapping[int, int]) -> list[tuple[int, int]]:
    """Token spans of bodies that may run zero or many times: arrow and function bodies,
    loop bodies."""
    spans: list[tuple[int, int]] = []
    n = len(toks)
    for i, t in enumerate(toks):
        if _is(t, "p", "=>"):
            j = i + 1
            if j < n and _is(toks[j], "p", "{"):
                spans.append((j, match[j]))
            else:
                spans.append((j, _expr_end(toks, j, match)))
        elif t.kind == "id" and t.value in ("function", "for", "while", "do"):
            j = i + 1
            while j < n and not _is(toks[j], "p", "(") and not _is(toks[j], "p", "{"):
                j += 1
            if j < n and _is(toks[j], "p", "(") and t.value != "do":
                head_end = match[j]
                if t.value in ("for", "while"):
                    spans.append((j, head_end))  # loop head runs repeatedly too
                j = head_end + 1
            if j < n and _is(toks[j], "p", "{"):
                spans.append((j, match[j]))
            elif j < n:
                spans.append((j, _expr_end(toks, j, match, stop_semicolon=True)))
    return spans


def _expr_end(toks: Sequence[_Tok], i: int, match: Mapping[int, int], *, stop_semicolon: bool = True) -> int:
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.kind == "p":
            if t.value in _OPEN:
                i = match[i] + 1
                continue
            if t.value in (")", "]", "}", ","):
                return i
            if t.value == ";" and stop_semicolon:
                return i
        i += 1
    return n


def _call_at(toks: Sequence[_Tok], i: int, match: Mapping[int, int]) -> tuple[str, int, int] | None:
    """If a tool call starts at token ``i``: (tool name, index of "(", index of ")")."""
    t = toks[i]
    n = len(toks)
    if _is(t, "id", "tools"):
        if i + 3 < n and _is(toks[i + 1], "p", ".") and toks[i + 2].kind == "id" and _is(toks[i + 3], "p", "("):
            return toks[i + 2].value, i + 3, match[i + 3]
        if (
            i + 4 < n
            and _is(toks[i + 1], "p", "[")
            and toks[i + 2].kind == "str"
            and _is(toks[i + 3], "p", "]")
            and _is(toks[i + 4], "p", "(")
        ):
            return toks[i + 2].value, i + 4, match[i + 4]
        return None
    if t.kind == "id" and t.value in KNOWN_TOOLS and i + 1 < n and _is(toks[i + 1], "p", "("):
        prev = toks[i - 1] if i else None
        if prev is not None and (_is(prev, "p", ".") or _is(prev, "id", "function")):
            return None
        return t.value, i + 1, match[i + 1]
    return None


def _scan_source(src: str) -> _Source:
    toks = _tokenize(src)
    match = _brackets(toks)
    for t in toks:
        if t.kind == "tpl" and any(not isinstance(p, str) and any(_is(x, "id", "tools") for x in p) for p in t.value):
            raise _Unresolved(KeepReason.DYNAMIC_TOOL, "tools used inside a template substitution")
    scopes = _scopes(toks, match)
    calls: list[_SrcCall] = []
    used_tools_tokens: set[int] = set()
    for i in range(len(toks)):
        found = _call_at(toks, i, match)
        if found is None:
            continue
        name, lp, rp = found
        if name not in KNOWN_TOOLS:
            raise _Unresolved(KeepReason.UNKNOWN_TOOL, f"tool {name!r} has no individual record form")
        if any(a <= i <= b for a, b in scopes):
            raise _Unresolved(
                KeepReason.DYNAMIC_MULTIPLICITY, f"{name} call inside a loop or callback may run any number of times"
            )
        argspans = _split_top(toks, lp + 1, rp, match)
        args: Any = {} if not argspans else _literal(toks, argspans[0][0], argspans[0][1], match)
        if name == "apply_patch" and isinstance(args, dict) and set(args) <= {"input", "patch"} and args:
            args = next(iter(args.values()))
        calls.append(_SrcCall(len(calls), name, args, i, rp + 1))
        used_tools_tokens.add(i)
    for i, t in enumerate(toks):
        if _is(t, "id", "tools") and i not in used_tools_tokens:
            prev = toks[i - 1] if i else None
            if not _is(prev, "p", "."):
                raise _Unresolved(KeepReason.DYNAMIC_TOOL, "the tools object is used other than as a direct call")

    by_start = {c.lo: c for c in calls}
    batches: list[_Batch] = []
    for i in range(len(toks) - 4):
        if not (
            _is(toks[i], "id", "Promise")
            and _is(toks[i + 1], "p", ".")
            and toks[i + 2].kind == "id"
            and toks[i + 2].value in ("all", "allSettled")
            and _is(toks[i + 3], "p", "(")
        ):
            continue
        rp = match[i + 3]
        if not (_is(toks[i + 4], "p", "[") and match[i + 4] == rp - 1):
            continue  # not an array literal: its calls are in callbacks and already refused
        entries: list[tuple[str, Any]] = []
        number = len(batches)
        for slot, (a, b) in enumerate(_split_top(toks, i + 5, rp - 1, match)):
            call = by_start.get(a)
            if call is not None and call.hi == b:
                call.batch, call.slot = number, slot
                entries.append(("call", call))
            elif any(a <= c.lo < b for c in calls):
                raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"batch entry {slot} wraps a tool call in an expression")
            else:
                entries.append(("internal", _tok_text(toks[a:b])))
        var = None
        j = i - 1
        if j >= 0 and _is(toks[j], "id", "await"):
            j -= 1
        if j >= 1 and _is(toks[j], "p", "=") and toks[j - 1].kind == "id":
            var = toks[j - 1].value
        batches.append(_Batch(number, toks[i + 2].value == "allSettled", var, entries, rp))
    for bt in batches:
        if bt.var is not None:
            _check_not_rebound(toks, match, bt)
    plans = _find_plans(toks, match, batches)
    return _Source(calls, batches, plans)


_MUTATORS = frozenset({"reverse", "sort", "push", "pop", "shift", "unshift", "splice", "fill", "copyWithin"})
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", "&&=", "||=", "??=", "++", "--"})


def _check_not_rebound(toks: Sequence[_Tok], match: Mapping[int, int], batch: _Batch) -> None:
    """R-H-5: a label or envelope printed from a batch variable names its slot only while
    the array is the one ``Promise.all`` returned. After the batch, every use of the
    variable must be a read that cannot reorder, replace or alias it: ``V.forEach`` /
    ``V.map`` (callback without the array parameter), ``V.length``, ``V[k]`` reads,
    ``JSON.stringify(V)``, ``for (… of V)`` or a bare print. Anything else — ``reverse()``,
    ``sort()``, ``push()``, an assignment to ``V``, ``V[k]`` or ``V.length``, a
    destructuring target, passing ``V`` on — keeps the wrapper (``array_rebound``)."""
    var = batch.var

    def scan(ts: Sequence[_Tok], m: Mapping[int, int], start: int) -> None:
        spans = [(a, b) for a, b in m.items() if ts[a].value in ("[", "{")]
        for i in range(start, len(ts)):
            t = ts[i]
            if t.kind == "tpl":
                for part in t.value:
                    if not isinstance(part, str):
                        sub = list(part)
                        scan(sub, _brackets(sub), 0)
                continue
            if not _is(t, "id", var):
                continue
            prev = ts[i - 1] if i else None
            if prev is not None and (_is(prev, "p", ".") or _is(prev, "p", "?.")):
                continue  # a property name, not the variable
            if not _safe_use(ts, m, i, spans):
                raise _Unresolved(KeepReason.ARRAY_REBOUND,
                                  f"batch array {var!r} may be reordered, replaced or aliased before it is printed")

    scan(toks, match, batch.end + 1)


def _safe_use(ts: Sequence[_Tok], m: Mapping[int, int], i: int, spans: Sequence[tuple[int, int]]) -> bool:
    n = len(ts)
    prev = ts[i - 1] if i else None
    nxt = ts[i + 1] if i + 1 < n else None
    if _is(prev, "p", "++") or _is(prev, "p", "--"):
        return False
    for a, b in spans:  # a destructuring assignment target: [V[1], V[0]] = …
        if a < i < b and b + 1 < n and _is(ts[b + 1], "p", "="):
            return False
    if _is(nxt, "p", ".") and i + 2 < n and ts[i + 2].kind == "id":
        name = ts[i + 2].value
        after = ts[i + 3] if i + 3 < n else None
        if name in ("forEach", "map") and _is(after, "p", "("):
            cb = _callback(ts, i + 4, m)
            return cb is not None and len(cb[0]) <= 2
        if name == "length":
            return not (after is not None and after.kind == "p" and after.value in _ASSIGN)
        return False
    if _is(nxt, "p", "["):
        j = m[i + 1] + 1
        while j < n:  # follow the member chain of the element: V[k].x[y]
            if (_is(ts[j], "p", ".") or _is(ts[j], "p", "?.")) and j + 1 < n and ts[j + 1].kind == "id":
                j += 2
            elif _is(ts[j], "p", "["):
                j = m[j] + 1
            else:
                break
        return not (j < n and ts[j].kind == "p" and ts[j].value in _ASSIGN)
    closes = _is(nxt, "p", ")") or _is(nxt, "p", ",")
    if (closes and i >= 4 and _is(prev, "p", "(") and _is(ts[i - 2], "id", "stringify")
            and _is(ts[i - 3], "p", ".") and _is(ts[i - 4], "id", "JSON")):
        return True
    if _is(prev, "id", "of") and _is(nxt, "p", ")"):
        return True
    if _is(nxt, "p", ")") and _is(prev, "p", "(") and i >= 2 and (
        (ts[i - 2].kind == "id" and ts[i - 2].value in _PRINT_FUNCS)
        or (_is(ts[i - 2], "id", "log") and i >= 4 and _is(ts[i - 4], "id", "console"))
    ):
        return True
    return False


# ---------------------------------------------------------------------------------------
# Print plans
# ---------------------------------------------------------------------------------------


def _print_calls(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int]) -> list[tuple[int, int]]:
    """Argument spans of ``text(...)`` / ``console.log(...)`` calls within ``[lo, hi)``."""
    out = []
    for i in range(lo, hi):
        t = toks[i]
        if t.kind == "id" and t.value in _PRINT_FUNCS and i + 1 < hi and _is(toks[i + 1], "p", "("):
            if i and _is(toks[i - 1], "p", "."):
                continue
            out.append((i + 2, match[i + 1]))
        elif (
            _is(t, "id", "console")
            and i + 3 < hi
            and _is(toks[i + 1], "p", ".")
            and _is(toks[i + 2], "id", "log")
            and _is(toks[i + 3], "p", "(")
        ):
            out.append((i + 4, match[i + 3]))
    return out


def _value_ref(toks: Sequence[_Tok], match: Mapping[int, int], value_is: Any) -> tuple[bool, bool] | None:
    """Classify a printed value expression. ``value_is(toks, a, b)`` says whether
    ``toks[a:b]`` denotes the slot's element. Returns (json, whole) or None when the
    expression is not the slot's element (or a field of it)."""
    n = len(toks)
    js = False
    a, b = 0, n
    if (
        n >= 4
        and _is(toks[0], "id", "JSON")
        and _is(toks[1], "p", ".")
        and _is(toks[2], "id", "stringify")
        and _is(toks[3], "p", "(")
        and match.get(3) == n - 1
    ):
        spans = _split_top(toks, 4, n - 1, match)
        if not spans:
            return None
        a, b = spans[0]
        js = len(spans) == 1
    elif n >= 3 and _is(toks[0], "id", "String") and _is(toks[1], "p", "(") and match.get(1) == n - 1:
        a, b = 2, n - 1
    if value_is(toks, a, b):
        return js, True
    # a field of the element: x.output / r[i].output
    if b - a >= 3 and _is(toks[b - 2], "p", ".") and toks[b - 1].kind == "id" and value_is(toks, a, b - 2):
        return js, False
    return None


def _label_parts(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int]) -> list[Any] | None:
    """Flatten a template literal or a ``+`` concatenation into static strings and
    expression token tuples."""
    if hi - lo == 1 and toks[lo].kind == "tpl":
        return [p if isinstance(p, str) else tuple(p) for p in toks[lo].value]
    parts: list[Any] = []
    for a, b in _split_top(toks, lo, hi, match, sep="+"):
        if b - a == 1 and toks[a].kind == "str":
            parts.append(toks[a].value)
        elif b - a == 1 and toks[a].kind == "tpl":
            parts.extend(p if isinstance(p, str) else tuple(p) for p in toks[a].value)
        else:
            parts.append(tuple(toks[a:b]))
    return parts if len(parts) > 1 else None


def _index_expr(expr: Sequence[_Tok], idx: str) -> int | None:
    """Offset K if ``expr`` is ``idx`` or ``idx + K``."""
    if len(expr) == 1 and _is(expr[0], "id", idx):
        return 0
    if len(expr) == 3 and _is(expr[0], "id", idx) and _is(expr[1], "p", "+") and expr[2].kind == "num":
        return int(expr[2].value)
    if len(expr) == 3 and _is(expr[0], "p", "(") and _is(expr[2], "p", ")"):
        return _index_expr(expr[1:2], idx)
    return None


def _analyse_print(
    toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int], idx: str, value_is: Any, batch: _Batch
) -> _Plan | None:
    """A print inside a forEach/for body: labels or a per-item envelope."""
    parts = _label_parts(toks, lo, hi, match)
    if parts is not None:
        merged: list[Any] = []
        for p in parts:
            if isinstance(p, str) and merged and isinstance(merged[-1], str):
                merged[-1] += p
            else:
                merged.append(p)
        exprs = [k for k, p in enumerate(merged) if not isinstance(p, str)]
        if len(exprs) != 2:
            return None
        k_idx, k_val = exprs
        offset = _index_expr(merged[k_idx], idx)
        if offset is None:
            return None
        sub = list(merged[k_val])
        ref = _value_ref(sub, _brackets(sub), value_is)
        if ref is None:
            raise _Unresolved(KeepReason.SLOT_MISMATCH, "the value printed under an index label is not that slot's value")
        prefix = "".join(p for p in merged[:k_idx] if isinstance(p, str))
        sep = "".join(p for p in merged[k_idx + 1 : k_val] if isinstance(p, str))
        if not sep:
            return None
        json_value, whole = ref
        return _Plan("label", batch.number, prefix=prefix, sep=sep, offset=offset, json_value=json_value, whole=whole)
    # text(JSON.stringify({i, result: x})) per item
    sub = list(toks[lo:hi])
    if (
        len(sub) >= 5
        and _is(sub[0], "id", "JSON")
        and _is(sub[2], "id", "stringify")
        and _is(sub[3], "p", "(")
        and _is(sub[4], "p", "{")
    ):
        m2 = _brackets(sub)
        return _envelope_plan(sub, 4, m2[4] + 1, m2, idx, value_is, batch)
    return None


def _envelope_plan(
    toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int], idx: str, value_is: Any, batch: _Batch
) -> _Plan | None:
    """An object literal ``{i, result: x}`` / ``{index: i, ...x}`` built per element."""
    keys: dict[str, int | None] = {}
    spread = has_result = False
    whole = True
    for a, b in _split_top(toks, lo + 1, hi - 1, match):
        t = toks[a]
        if b - a == 1 and t.kind == "id" and t.value in ("i", "index"):
            keys[t.value] = 0 if t.value == idx else None
        elif b - a == 1 and _is(t, "id", "result"):
            has_result = True
            whole = bool(value_is(toks, a, b))
        elif _is(t, "p", "...") and value_is(toks, a + 1, b):
            spread = True
        elif b - a >= 3 and t.kind in ("id", "str") and _is(toks[a + 1], "p", ":"):
            key = str(t.value)
            if key in ("i", "index"):
                keys[key] = _index_expr(toks[a + 2 : b], idx)
            elif key == "result":
                has_result = True
                whole = bool(value_is(toks, a + 2, b))
    index_keys = tuple(k for k in ("i", "index") if k in keys)
    if not index_keys or not (spread or has_result):
        return None
    offsets = {keys[k] for k in index_keys}
    if None in offsets:
        raise _Unresolved(KeepReason.INDEX_CONFLICT, "an index envelope key is not the element's index")
    if len(offsets) > 1:
        raise _Unresolved(KeepReason.INDEX_CONFLICT, "the i and index keys of an envelope disagree")
    return _Plan(
        "envelope",
        batch.number,
        offset=offsets.pop() or 0,
        whole=whole,
        spread=spread and not has_result,
        index_keys=index_keys,
    )


def _callback(toks: Sequence[_Tok], i: int, match: Mapping[int, int]) -> tuple[list[str], int, int] | None:
    """Parse ``(a, b) => body`` / ``a => body`` / ``function (a, b) {body}`` at ``i``:
    (params, body lo, body hi)."""
    n = len(toks)
    params: list[str] = []
    if i < n and _is(toks[i], "id", "function"):
        i += 1
        if i < n and toks[i].kind == "id":
            i += 1
        if i >= n or not _is(toks[i], "p", "("):
            return None
        rp = match[i]
        params = [toks[a].value for a, b in _split_top(toks, i + 1, rp, match) if b - a == 1 and toks[a].kind == "id"]
        if rp + 1 < n and _is(toks[rp + 1], "p", "{"):
            return params, rp + 2, match[rp + 1]
        return None
    if i < n and _is(toks[i], "id", "async"):
        i += 1
    if i < n and toks[i].kind == "id" and i + 1 < n and _is(toks[i + 1], "p", "=>"):
        params, arrow = [toks[i].value], i + 1
    elif i < n and _is(toks[i], "p", "("):
        rp = match[i]
        params = [toks[a].value for a, b in _split_top(toks, i + 1, rp, match) if b - a == 1 and toks[a].kind == "id"]
        arrow = rp + 1
        if arrow >= n or not _is(toks[arrow], "p", "=>"):
            return None
    else:
        return None
    j = arrow + 1
    if j < n and _is(toks[j], "p", "{"):
        return params, j + 1, match[j]
    return params, j, _expr_end(toks, j, match)


def _find_plans(toks: Sequence[_Tok], match: Mapping[int, int], batches: Sequence[_Batch]) -> list[_Plan]:
    by_var = {b.var: b for b in batches if b.var}
    plans: list[_Plan] = []
    all_prints = _print_calls(toks, 0, len(toks), match)
    claimed: set[tuple[int, int]] = set()
    n = len(toks)
    for i in range(n):
        t = toks[i]
        # VAR.forEach(cb) / VAR.map(cb)
        if (
            t.kind == "id"
            and t.value in by_var
            and i + 3 < n
            and _is(toks[i + 1], "p", ".")
            and toks[i + 2].kind == "id"
            and toks[i + 2].value in ("forEach", "map")
            and _is(toks[i + 3], "p", "(")
        ):
            batch = by_var[t.value]
            cb = _callback(toks, i + 4, match)
            if cb is None or len(cb[0]) < 2:
                continue
            (v, idx, *_), blo, bhi = cb
            value_is = lambda ts, a, b, v=v: b - a == 1 and _is(ts[a], "id", v)  # noqa: E731
            if toks[i + 2].value == "forEach":
                for a, b in _print_calls(toks, blo, bhi, match):
                    plan = _analyse_print(toks, a, b, match, idx, value_is, batch)
                    if plan is not None:
                        plans.append(plan)
                        claimed.add((a, b))
            else:
                lo, hi = blo, bhi
                if _is(toks[lo], "p", "(") and match[lo] == hi - 1:
                    lo, hi = lo + 1, hi - 1
                elif _is(toks[lo], "id", "return"):
                    lo, hi = lo + 1, _expr_end(toks, lo + 1, match)
                if _is(toks[lo], "p", "{") and match[lo] == hi - 1:
                    plan = _envelope_plan(toks, lo, hi, match, idx, value_is, batch)
                    if plan is not None:
                        enclosing = [(a, b) for a, b in all_prints if a <= i < b]
                        if enclosing:
                            plans.append(plan)
                            claimed.update(enclosing)
        # for (let I = 0; I < VAR.length; I++) body
        if _is(t, "id", "for") and i + 1 < n and _is(toks[i + 1], "p", "("):
            rp = match[i + 1]
            head = toks[i + 2 : rp]
            hs = [x for x in head if not (x.kind == "id" and x.value in ("let", "var", "const"))]
            if (
                len(hs) >= 12
                and hs[0].kind == "id"
                and _is(hs[1], "p", "=")
                and _is(hs[2], "num", 0)
                and _is(hs[3], "p", ";")
                and _is(hs[4], "id", hs[0].value)
                and _is(hs[5], "p", "<")
                and hs[6].kind == "id"
                and hs[6].value in by_var
                and _is(hs[7], "p", ".")
                and _is(hs[8], "id", "length")
                and _is(hs[9], "p", ";")
            ):
                idx, batch = hs[0].value, by_var[hs[6].value]
                step = [x.value for x in hs[10:]]
                if step not in ([idx, "++"], ["++", idx], [idx, "+=", 1]):
                    continue
                var = batch.var
                value_is = lambda ts, a, b, var=var, idx=idx: (  # noqa: E731
                    b - a == 4
                    and _is(ts[a], "id", var)
                    and _is(ts[a + 1], "p", "[")
                    and _is(ts[a + 2], "id", idx)
                    and _is(ts[a + 3], "p", "]")
                )
                blo = rp + 1
                bhi = match[blo] if _is(toks[blo], "p", "{") else _expr_end(toks, blo, match)
                for a, b in _print_calls(toks, blo, bhi, match):
                    plan = _analyse_print(toks, a, b, match, idx, value_is, batch)
                    if plan is not None:
                        plans.append(plan)
                        claimed.add((a, b))
    # text(JSON.stringify(VAR))
    for a, b in all_prints:
        sub = toks[a:b]
        if (
            len(sub) >= 6
            and _is(sub[0], "id", "JSON")
            and _is(sub[2], "id", "stringify")
            and _is(sub[3], "p", "(")
            and sub[4].kind == "id"
            and sub[4].value in by_var
            and (_is(sub[5], "p", ")") or _is(sub[5], "p", ","))
            and match.get(a + 3) == b - 1
        ):
            plans.append(_Plan("array", by_var[sub[4].value].number))
            claimed.add((a, b))
    exclusive = len(claimed) == len(all_prints)
    for p in plans:
        p.exclusive = exclusive
    return plans


# ---------------------------------------------------------------------------------------
# Output parsing
# ---------------------------------------------------------------------------------------

_HEADER = re.compile(
    r"^(Script completed|Script failed|Script terminated|Script running with cell ID \S+)\n"
    r"(?:Wall time [^\n]*\n)?Output:\n?"
)


def _split_output(output: str | Sequence[str] | None) -> tuple[str | None, str | None, list[str] | None, str]:
    """(script status, script error, items or None, joined printed text)."""
    if output is None:
        return None, None, None, ""
    items = [_crlf(output)] if isinstance(output, str) else [_crlf(x) for x in output]
    status = None
    if items:
        m = _HEADER.match(items[0])
        if m:
            head = m.group(1)
            status = {
                "Script completed": "completed",
                "Script failed": "failed",
                "Script terminated": "terminated",
            }.get(head, "running")
            rest = items[0][m.end() :]
            items = ([rest] if rest else []) + items[1:]
    error = None
    if status == "failed" and items:
        last = items[-1]
        k = last.rfind("Script error:\n")
        if k >= 0 and (k == 0 or last[k - 1] == "\n"):
            error = last[k + len("Script error:\n") :]
            items[-1] = last[:k].rstrip("\n")
            if not items[-1]:
                items.pop()
    as_items = None if isinstance(output, str) else items
    return status, error, as_items, "\n".join(items)


def _json_or_text(raw: str) -> SlotValue:
    try:
        return SlotValue("json", json.loads(raw), raw)
    except ValueError:
        return SlotValue("text", raw, raw)


_DECODER = json.JSONDecoder()


def _label_slots(plan: _Plan, n: int, items: list[str] | None, text: str) -> dict[int, SlotValue]:
    label = re.compile(re.escape(plan.prefix) + r"(-?\d+)" + re.escape(plan.sep), re.S)
    slots: dict[int, SlotValue] = {}

    def put(k: int, raw: str) -> None:
        slot = k - plan.offset
        if not 0 <= slot < n:
            raise _Unresolved(KeepReason.SLOT_MISMATCH, f"label index {k} is outside the batch of {n}")
        if slot in slots:
            raise _Unresolved(KeepReason.INDEX_CONFLICT, f"slot {slot} printed twice")
        slots[slot] = _json_or_text(raw) if plan.json_value else SlotValue("text", raw, raw)

    if items is not None:  # one text() per item: a label can only start an item
        for item in items:
            m = label.match(item)
            if m:
                put(int(m.group(1)), item[m.end() :])
        return slots
    if plan.json_value:
        # A JSON value cannot hold a raw newline, so a label starts at the beginning of a
        # line or right where the previous value ended; label text inside a JSON string is
        # data. Exactly one JSON value is consumed after each label.
        pos = 0
        for k in range(plan.offset, plan.offset + n):
            want = f"{plan.prefix}{k}{plan.sep}"
            cands = [
                m.start()
                for m in re.finditer(re.escape(want), text)
                if m.start() >= pos and (m.start() in (0, pos) or text[m.start() - 1] == "\n")
            ]
            if len(cands) > 1:
                raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, f"label {want!r} appears more than once")
            if not cands:
                continue
            start = cands[0] + len(want)
            try:
                _, end = _DECODER.raw_decode(text, start)
            except ValueError:
                nl = text.find("\n", start)
                end = len(text) if nl < 0 else nl
            put(k, text[start:end])
            pos = end
        return slots
    # Raw (non-JSON) values may span lines: a slot starts at a line beginning with the
    # expected next label; every boundary must be unique, and nothing else may print.
    if not plan.exclusive:
        raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, "other prints interleave with multi-line labelled values")
    lines = text.split("\n")
    starts: list[int] = []
    for k in range(plan.offset, plan.offset + n):
        want = f"{plan.prefix}{k}{plan.sep}"
        lo = starts[-1] + 1 if starts else 0
        cands = [j for j in range(lo, len(lines)) if lines[j].startswith(want)]
        if len(cands) > 1:
            raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, f"label {want!r} appears more than once")
        if not cands:
            break
        starts.append(cands[0])
    for pos_k, j in enumerate(starts):
        end = starts[pos_k + 1] if pos_k + 1 < len(starts) else len(lines)
        want = f"{plan.prefix}{plan.offset + pos_k}{plan.sep}"
        body = "\n".join([lines[j][len(want) :], *lines[j + 1 : end]])
        put(plan.offset + pos_k, body)
    return slots


def _json_values(items: list[str] | None, text: str) -> list[Any]:
    chunks = items if items is not None else [text]
    values: list[Any] = []
    for chunk in chunks:
        pos = 0
        while True:
            while pos < len(chunk) and chunk[pos].isspace():
                pos += 1
            if pos >= len(chunk):
                break
            try:
                v, pos = _DECODER.raw_decode(chunk, pos)
            except ValueError:
                nl = chunk.find("\n", pos)
                if nl < 0:
                    break
                pos = nl + 1
                continue
            values.append(v)
    return values


def _envelope_slots(plan: _Plan, n: int, items: list[str] | None, text: str) -> dict[int, SlotValue]:
    slots: dict[int, SlotValue] = {}
    for v in _json_values(items, text):
        envs = v if isinstance(v, list) else [v]
        for env in envs:
            if not isinstance(env, dict) or not any(k in env for k in ("i", "index")):
                continue
            ids = {env[k] for k in ("i", "index") if k in env and not isinstance(env[k], (dict, list))}
            if len(ids) != 1 or any(k not in plan.index_keys for k in ("i", "index") if k in env):
                raise _Unresolved(KeepReason.INDEX_CONFLICT, f"envelope index keys conflict: {env!r}")
            k = ids.pop()
            if not isinstance(k, int) or isinstance(k, bool):
                raise _Unresolved(KeepReason.INDEX_CONFLICT, f"envelope index {k!r} is not an integer")
            slot = k - plan.offset
            if not 0 <= slot < n or slot in slots:
                raise _Unresolved(KeepReason.INDEX_CONFLICT, f"envelope slot {k} is out of range or repeated")
            if plan.spread or "result" not in env:
                body = {key: val for key, val in env.items() if key not in ("i", "index")}
                slots[slot] = SlotValue("spread", body, json.dumps(env))
            else:
                slots[slot] = SlotValue("json", env["result"], json.dumps(env["result"]))
    return slots


def _array_slots(n: int, items: list[str] | None, text: str) -> dict[int, SlotValue]:
    arrays = [v for v in _json_values(items, text) if isinstance(v, list) and len(v) == n]
    if len(arrays) != 1:
        if arrays:
            raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, "the batch array was printed more than once")
        return {}
    return {k: SlotValue("json", v, json.dumps(v)) for k, v in enumerate(arrays[0])}


def _unwrap_settled(v: SlotValue) -> SlotValue:
    """Unwrap a whole settled receipt printed by index (R-H-5): the rejection marker
    becomes the slot kind, the reason stays the body."""
    val = v.value
    if v.kind == "json" and isinstance(val, dict):
        if val.get("status") == "fulfilled" and set(val) == {"status", "value"}:
            return SlotValue("json", val["value"], json.dumps(val["value"]))
        if val.get("status") == "rejected" and set(val) <= {"status", "reason"}:
            reason = val.get("reason")
            return SlotValue("rejected", reason, json.dumps(reason))
    raise _Unresolved(KeepReason.SLOT_MISMATCH, "an allSettled slot is not a settled receipt")


# ---------------------------------------------------------------------------------------
# Receipts
# ---------------------------------------------------------------------------------------


@attrs.frozen
class _Invocation:
    call: Receipt
    output: Receipt | None

    @property
    def tool(self) -> str:
        return self.call.tool or ""

    @property
    def args(self) -> Any:
        return self.call.arguments


class ReceiptPairer:
    """Pairs native call records with their outputs by ``call_id`` regardless of arrival
    order. Unpaired records (inputs waiting for an output, outputs waiting for their call)
    wait in a bounded cache of ``max_unpaired`` entries; on overflow the oldest unpaired
    record is evicted and counted in ``evicted`` (R-H-5: bounded cache of unpaired inputs)."""

    def __init__(self, max_unpaired: int = DEFAULT_MAX_UNPAIRED) -> None:
        if max_unpaired < 1:
            raise ValueError("max_unpaired must be at least 1")
        self.max_unpaired = max_unpaired
        self._unpaired: OrderedDict[tuple[str, str], Receipt] = OrderedDict()
        self.paired: dict[str, _Invocation] = {}
        self.evicted = 0

    def feed(self, receipt: Receipt) -> None:
        cid = receipt.call_id
        if cid in self.paired:
            return  # a duplicate record of an already paired invocation
        other = ("output" if receipt.kind == "call" else "call", cid)
        partner = self._unpaired.pop(other, None)
        if partner is not None:
            call, out = (receipt, partner) if receipt.kind == "call" else (partner, receipt)
            self.paired[cid] = _Invocation(call, out)
            return
        self._unpaired[(receipt.kind, cid)] = receipt
        while len(self._unpaired) > self.max_unpaired:
            self._unpaired.popitem(last=False)
            self.evicted += 1

    def invocations(self) -> list[_Invocation]:
        """Paired invocations plus calls still waiting for an output (output ``None``)."""
        waiting = [_Invocation(r, None) for (kind, _), r in self._unpaired.items() if kind == "call"]
        return [*self.paired.values(), *waiting]

    def orphan_outputs(self) -> list[Receipt]:
        return [r for (kind, _), r in self._unpaired.items() if kind == "output"]


_NATIVE_HEADER = re.compile(r"^(?:Chunk ID|Wall time|Original token count|Total output lines)\b[^\n]*$")


@attrs.frozen
class _Native:
    """What a native invocation proves: output body, exit code, process id, running."""

    inv: _Invocation
    body: str | None
    exit_code: int | None
    pid: str | None
    success: bool | None
    running: bool


def _native_result(inv: _Invocation) -> _Native:
    """Read the native outcome: structured fields first, then the unified-exec /
    shell header of the native output text (``Process exited with code N``, ``Exit code:
    N``, ``Process running with session ID N``) — these are the *receipt's* own words, not
    data printed by the wrapper."""
    out = inv.output
    if out is None:
        return _Native(inv, None, None, inv.call.process_id, None, False)
    text = out.output
    exit_code = out.exit_code
    pid = out.process_id or inv.call.process_id
    running = False
    if text is not None and not out.headerless:
        # The tool's own header: known lines only, ended by ``Output:``. Without that end
        # there is no header and nothing is read out of the text.
        lines = text.split("\n")
        h_code: int | None = None
        h_pid: str | None = None
        for j, line in enumerate(lines[:8]):
            m = re.match(r"^Process exited with code (-?\d+)$", line) or re.match(r"^Exit code: (-?\d+)$", line)
            if m:
                h_code = int(m.group(1)) if h_code is None else h_code
                continue
            m = re.match(r"^Process running with session ID (\S+)$", line)
            if m:
                h_pid = h_pid or m.group(1)
                continue
            if line == "Output:":
                text = "\n".join(lines[j + 1 :])
                exit_code = h_code if exit_code is None else exit_code
                if h_pid is not None:
                    pid, running = pid or h_pid, True
                break
            if not _NATIVE_HEADER.match(line):
                break
    return _Native(inv, text, exit_code, pid, out.success, running and exit_code is None)


def _command_of(tool: str, args: Any) -> str | None:
    if not isinstance(args, Mapping):
        return None
    v = args.get("cmd", args.get("command"))
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return " ".join(v)
    return _crlf(v).strip() if isinstance(v, str) else None


def _cwd_of_raw(args: Any) -> Any:
    if not isinstance(args, Mapping):
        return None
    return args.get("workdir", args.get("cwd", args.get("working_directory")))


def _cwd_of(args: Any) -> str | None:
    if not isinstance(args, Mapping):
        return None
    v = args.get("workdir", args.get("cwd", args.get("working_directory")))
    return v if isinstance(v, str) else None


def _same_files(patch: str, files: Sequence[Any]) -> bool:
    """A native FileChange result (absolute paths) is this literal patch's when each file
    of the patch names exactly one of the result's files and none is left over."""
    pv = _patch_preview(0, patch)
    mine = [f.path for f in pv.files] + [f.move_to for f in pv.files if f.move_to]
    theirs = [normalize_dir(f) or str(f).replace("\\", "/") for f in files if isinstance(f, str)]
    if not mine or len(mine) != len(theirs):
        return False
    left = list(theirs)
    for m in mine:
        m_abs = normalize_dir(m)
        rel = m.replace("\\", "/").lstrip("/")
        while rel.startswith("./"):
            rel = rel[2:]
        hits = [t for t in left if (t == m_abs if m_abs else (t == rel or t.endswith("/" + rel)))]
        if len(hits) != 1:
            return False
        left.remove(hits[0])
    return not left


def _tool_family(tool: str) -> str:
    return "command" if tool in COMMAND_TOOLS else tool


# ---------------------------------------------------------------------------------------
# apply_patch preview
# ---------------------------------------------------------------------------------------


def _patch_preview(index: int, patch: str) -> PatchPreview:
    files: list[PatchFile] = []
    cur: dict[str, Any] | None = None
    for line in _crlf(patch).split("\n"):
        m = re.match(r"^\*\*\* (Add|Update|Delete) File: (.+)$", line)
        if m:
            if cur:
                files.append(PatchFile(**cur))
            cur = {"path": m.group(2).strip(), "change": m.group(1).lower(), "added": 0, "removed": 0}
            continue
        if cur is None:
            continue
        m = re.match(r"^\*\*\* Move to: (.+)$", line)
        if m:
            cur["move_to"] = m.group(1).strip()
        elif line.startswith("+") and not line.startswith("+++"):
            cur["added"] += 1
        elif line.startswith("-") and not line.startswith("---"):
            cur["removed"] += 1
    if cur:
        files.append(PatchFile(**cur))
    return PatchPreview(index, _crlf(patch), tuple(files))


# ---------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------


def _status(exit_code: int | None, success: bool | None, running: bool, rejected: bool) -> str:
    if running:
        return "in_progress"
    if exit_code is not None:
        return "completed" if exit_code == 0 else "failed"
    if success is not None:
        return "completed" if success else "failed"
    if rejected:
        return "failed"
    return "unknown"


def _slot_pid(v: SlotValue | None) -> str | None:
    if v is None or v.kind != "json" or not isinstance(v.value, dict):
        return None
    return _pid(v.value.get("session_id", v.value.get("process_id")))


def _unique_pairs(
    left: Sequence[Any], right: Sequence[Any], compatible: Any
) -> tuple[dict[int, int], set[int], set[int]]:
    """Mutually unique compatibility: pairs (l -> r), and the left/right indexes that had
    candidates but no unique partner (ambiguous)."""
    cand_l = {i: [j for j, r in enumerate(right) if compatible(l, r)] for i, l in enumerate(left)}
    cand_r: dict[int, list[int]] = {j: [] for j in range(len(right))}
    for i, js in cand_l.items():
        for j in js:
            cand_r[j].append(i)
    pairs = {i: js[0] for i, js in cand_l.items() if len(js) == 1 and len(cand_r[js[0]]) == 1}
    amb_l = {i for i, js in cand_l.items() if js and i not in pairs}
    amb_r = {j for j, is_ in cand_r.items() if is_ and j not in pairs.values()}
    return pairs, amb_l, amb_r


def attribute_wrapper(
    wrapper: WrapperCall,
    receipts: Iterable[Receipt],
    *,
    known_processes: Mapping[Any, str] | None = None,
    max_unpaired: int = DEFAULT_MAX_UNPAIRED,
) -> Attribution:
    """Decide whether ``wrapper`` can be replaced by individual tool records (R-H-5).

    ``receipts`` are the native records that follow the wrapper (any order).
    ``known_processes`` maps process ids of commands started *before* this wrapper to the
    reader's key for their record, so ``write_stdin`` polling can update them.

    Pure and deterministic: the same inputs give the same answer whatever the receipt
    order (only poll chunks of one command are ordered, by ``ordinal`` then call id).
    Never raises for bad input: anything it cannot prove yields a kept wrapper.
    """
    pairer = ReceiptPairer(max_unpaired)
    for r in receipts:
        pairer.feed(r)
    status, error, items, text = _split_output(wrapper.output)
    previews: list[PatchPreview] = []
    internal: list[InternalEntry] = []

    def keep(reason: KeepReason, detail: str) -> Attribution:
        if pairer.evicted and reason in (KeepReason.MISSING_RESULT, KeepReason.PATCH_WITHOUT_RESULT):
            reason, detail = KeepReason.RECEIPT_OVERFLOW, f"{detail} ({pairer.evicted} unpaired receipts evicted)"
        return Attribution(
            False,
            reason=reason,
            detail=detail,
            previews=tuple(previews),
            internal=tuple(internal),
            script_status=status,
            script_error=error,
            evicted=pairer.evicted,
        )

    try:
        src = _scan_source(wrapper.source)
    except _Unresolved as e:
        return keep(e.reason, e.detail)
    for c in src.calls:
        if c.tool == "apply_patch" and isinstance(c.args, str):
            previews.append(_patch_preview(c.index, c.args))
    try:
        known: Mapping[Any, str] = known_processes if known_processes is not None else {}
        return _attribute(src, pairer, status, error, items, text, known, previews, internal)
    except _Unresolved as e:
        return keep(e.reason, e.detail)


def _display(v: SlotValue | None) -> str | None:
    if v is None:
        return None
    if v.kind == "text" or (v.kind == "json" and isinstance(v.value, str)):
        return v.value
    return v.raw


def _stdin_args(args: Any) -> tuple[str | None, str | None]:
    if not isinstance(args, Mapping):
        return None, None
    chars = args.get("chars", args.get("input"))
    target = args.get("session_id", args.get("process_id"))
    return (None if target is DYNAMIC else _pid(target)), (chars if isinstance(chars, str) else None)


class _Known:
    """``known_processes`` looked up by normalised process id without copying the mapping
    (a reader's mapping may be large): a direct lookup first, the normalised table only on a
    miss (keys given as ints, floats, …)."""

    def __init__(self, m: Mapping[Any, str]) -> None:
        self._m = m
        self._norm: dict[str | None, str] | None = None

    def get(self, pid: str | None) -> str | None:
        v = self._m.get(pid) if pid is not None else None
        if v is None:
            if self._norm is None:
                self._norm = {_pid(k): x for k, x in self._m.items()}
            v = self._norm.get(pid)
        return v

    def __contains__(self, pid: str | None) -> bool:
        return self.get(pid) is not None

    def __getitem__(self, pid: str | None) -> str:
        v = self.get(pid)
        if v is None:
            raise KeyError(pid)
        return v


def _attribute(
    src: _Source,
    pairer: ReceiptPairer,
    status: str | None,
    error: str | None,
    items: list[str] | None,
    text: str,
    known: Mapping[Any, str],
    previews: list[PatchPreview],
    internal: list[InternalEntry],
) -> Attribution:
    if not src.calls:
        raise _Unresolved(KeepReason.NO_TOOL_CALLS, "the wrapper calls no tools")
    for c in src.calls:
        if c.tool == "apply_patch":
            if not isinstance(c.args, str):
                raise _Unresolved(KeepReason.DYNAMIC_INPUT, "apply_patch input is not a static literal")
        elif not isinstance(c.args, dict):
            raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"{c.tool} arguments are not a static object")
        elif c.tool != "write_stdin" and (
            _has_dynamic(c.args.get("cmd", c.args.get("command"))) or _command_of(c.tool, c.args) is None
        ):
            raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"{c.tool} command is not static")
        elif c.tool != "write_stdin" and _has_dynamic(_cwd_of_raw(c.args)):
            raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"{c.tool} working directory is not static")

    # --- slot values from the print plans ----------------------------------------------
    slot_of: dict[tuple[int, int], SlotValue] = {}
    for batch in src.batches:
        plans = [p for p in src.plans if p.batch == batch.number]
        if len(plans) > 1:
            raise _Unresolved(KeepReason.AMBIGUOUS_OUTPUT, "the batch is printed in more than one way")
        n = len(batch.entries)
        if plans:
            plan = plans[0]
            if plan.kind == "label":
                slots = _label_slots(plan, n, items, text)
            elif plan.kind == "envelope":
                slots = _envelope_slots(plan, n, items, text)
            else:
                slots = _array_slots(n, items, text)
            for k, v in slots.items():
                if batch.settled and plan.whole and v.kind == "json":
                    v = _unwrap_settled(v)  # the whole settled receipt was printed by index
                slot_of[(batch.number, k)] = v
        for k, (what, entry) in enumerate(batch.entries):
            if what == "internal":
                internal.append(InternalEntry(batch.number, k, entry, slot_of.get((batch.number, k))))

    def slot_value(c: _SrcCall) -> SlotValue | None:
        if c.batch is None or c.slot is None:
            return None
        return slot_of.get((c.batch, c.slot))

    # --- native receipts: never by arrival order ----------------------------------------
    invs = sorted(pairer.invocations(), key=lambda v: v.call.call_id)
    native = [_native_result(inv) for inv in invs]
    used: set[int] = set()
    match_of: dict[int, int] = {}  # source call index -> native index
    evidence: dict[int, list[str]] = {c.index: [] for c in src.calls}
    main_calls = [c for c in src.calls if c.tool != "write_stdin"]

    # (1) process identity printed in the call's own slot wins over command text
    for c in main_calls:
        pid = _slot_pid(slot_value(c))
        if pid is None:
            continue
        hits = [j for j, nv in enumerate(native) if nv.pid == pid and nv.inv.tool != "write_stdin"]
        if len(hits) > 1:
            raise _Unresolved(KeepReason.AMBIGUOUS_RECEIPT, f"several receipts carry process id {pid}")
        if not hits:
            continue
        nv = native[hits[0]]
        if _tool_family(nv.inv.tool) != _tool_family(c.tool) or _command_of(nv.inv.tool, nv.inv.args) != _command_of(
            c.tool, c.args
        ):
            raise _Unresolved(KeepReason.IDENTITY_CONFLICT, f"process {pid} belongs to a different command")
        match_of[c.index] = hits[0]
        used.add(hits[0])
        evidence[c.index].append(f"process_id:{pid}")

    # (2) mutually unique tool + command + explicit absolute directory
    def compatible(c: _SrcCall, j: int) -> bool:
        inv = native[j].inv
        if j in used or _tool_family(inv.tool) != _tool_family(c.tool):
            return False
        if c.tool == "apply_patch":
            raw = inv.args
            if isinstance(raw, Mapping) and isinstance(raw.get("files"), list):
                return _same_files(c.args, raw["files"])  # a FileChange result names its files
            if isinstance(raw, Mapping):
                raw = raw.get("input", raw.get("patch"))
            return isinstance(raw, str) and _crlf(raw).strip() == _crlf(c.args).strip()
        if _command_of(inv.tool, inv.args) != _command_of(c.tool, c.args):
            return False
        a, b = normalize_dir(_cwd_of(c.args)), normalize_dir(_cwd_of(inv.args))
        return a is None or b is None or a == b

    rest = [c for c in main_calls if c.index not in match_of]
    free = [j for j in range(len(native)) if j not in used]
    pairs, amb, _ = _unique_pairs(rest, free, lambda c, j: compatible(c, j))
    if amb:
        c = rest[min(amb)]
        raise _Unresolved(
            KeepReason.AMBIGUOUS_RECEIPT,
            f"call {c.index} ({_command_of(c.tool, c.args) or c.tool}) has no unique native receipt",
        )
    for li, rj in pairs.items():
        c, j = rest[li], free[rj]
        match_of[c.index] = j
        used.add(j)
        a, b = normalize_dir(_cwd_of(c.args)), normalize_dir(_cwd_of(native[j].inv.args))
        evidence[c.index].append("command+cwd" if a is not None and a == b else "command")
        pid = _slot_pid(slot_value(c))
        if pid is not None and native[j].pid not in (None, pid):
            raise _Unresolved(KeepReason.IDENTITY_CONFLICT, f"call {c.index}: slot and receipt disagree on process id")

    # --- command / patch records ---------------------------------------------------------
    records: dict[int, dict[str, Any]] = {}
    for c in main_calls:
        v = slot_value(c)
        j = match_of.get(c.index)
        nv = native[j] if j is not None else None
        if v is not None:
            evidence[c.index].insert(0, f"slot:{c.batch}/{c.slot}")
        has_native_result = nv is not None and nv.inv.output is not None
        if not has_native_result and (v is None or v.kind == "spread"):
            if c.tool == "apply_patch":
                raise _Unresolved(KeepReason.PATCH_WITHOUT_RESULT, f"apply_patch call {c.index} has no separate result")
            raise _Unresolved(KeepReason.MISSING_RESULT, f"call {c.index} has no attributable result")
        records[c.index] = {
            "output": nv.body if has_native_result and nv is not None else _display(v),
            "data": v,
            "exit_code": nv.exit_code if nv else None,
            "success": nv.success if nv else None,
            "running": bool(nv and nv.running),
            "process_id": (nv.pid if nv else None) or _slot_pid(v),
            "call_id": nv.inv.call.call_id if nv else None,
            "rejected": v is not None and v.kind == "rejected",
            "polls": [],
            "interrupted": False,
        }

    # --- write_stdin: updates the command it targets, never a record of its own ----------
    by_pid: dict[str, int] = {}
    for idx, rec in records.items():
        pid = rec["process_id"]
        if pid is not None:
            if pid in by_pid:
                raise _Unresolved(KeepReason.IDENTITY_CONFLICT, f"two commands claim process {pid}")
            by_pid[pid] = idx
    known_s = _Known(known)
    ext: dict[str, list[PollUpdate]] = {}
    ext_interrupt: set[str] = set()

    def apply_poll(target: str, upd: PollUpdate) -> None:
        ctrl_c = upd.chars is not None and _CTRL_C in upd.chars
        if target in by_pid:
            rec = records[by_pid[target]]
            rec["polls"].append(upd)
            rec["interrupted"] |= ctrl_c
        elif target in known_s:
            ext.setdefault(target, []).append(upd)
            if ctrl_c:
                ext_interrupt.add(target)
        else:
            raise _Unresolved(KeepReason.UNKNOWN_PROCESS, f"write_stdin targets unknown process {target}")

    stdin_src = [c for c in src.calls if c.tool == "write_stdin"]
    stdin_native = [j for j in range(len(native)) if native[j].inv.tool == "write_stdin" and j not in used]

    def stdin_compatible(c: _SrcCall, j: int) -> bool:
        s_pid, s_chars = _stdin_args(c.args)
        n_pid, n_chars = _stdin_args(native[j].inv.args)
        if s_pid is not None and s_pid != n_pid:
            return False
        return c.args.get("chars", c.args.get("input")) in (None, DYNAMIC) or s_chars == n_chars

    spairs, samb, _ = _unique_pairs(stdin_src, stdin_native, stdin_compatible)
    if samb:
        raise _Unresolved(KeepReason.AMBIGUOUS_RECEIPT, "a write_stdin call has no unique native receipt")
    for li, c in enumerate(stdin_src):
        s_pid, s_chars = _stdin_args(c.args)
        v = slot_value(c)
        j = stdin_native[spairs[li]] if li in spairs else None
        nv = native[j] if j is not None else None
        if nv is not None and j is not None:
            used.add(j)
            n_pid, n_chars = _stdin_args(nv.inv.args)
            s_pid = s_pid or n_pid
            s_chars = s_chars if s_chars is not None else n_chars
        if s_pid is None:
            raise _Unresolved(KeepReason.UNKNOWN_PROCESS, f"write_stdin call {c.index} has no provable target")
        if (nv is None or nv.inv.output is None) and v is None:
            raise _Unresolved(KeepReason.MISSING_RESULT, f"write_stdin call {c.index} has no attributable result")
        ev = ([f"slot:{c.batch}/{c.slot}"] if v is not None else []) + (
            [f"receipt:{nv.inv.call.call_id}"] if nv is not None else []
        )
        body = nv.body if nv is not None and nv.inv.output is not None else _display(v)
        apply_poll(
            s_pid,
            PollUpdate(
                s_chars,
                body,
                nv.exit_code if nv else None,
                nv.inv.call.call_id if nv else None,
                c.index,
                tuple(ev),
            ),
        )
    # native polls and late completions outside the source update their command too
    for j, nv in enumerate(native):
        if j in used or nv.inv.tool != "write_stdin":
            continue
        t_pid, chars = _stdin_args(nv.inv.args)
        if t_pid is not None and (t_pid in by_pid or t_pid in known_s):
            used.add(j)
            apply_poll(t_pid, PollUpdate(chars, nv.body, nv.exit_code, nv.inv.call.call_id, None, ("native_poll",)))
    for out in pairer.orphan_outputs():
        if out.process_id is not None and out.process_id in by_pid:
            late = _native_result(_Invocation(Receipt("call", out.call_id), out))
            records[by_pid[out.process_id]]["polls"].append(
                PollUpdate(None, late.body, late.exit_code, out.call_id, None, ("late_completion",))
            )

    ordinals = {inv.call.call_id: (inv.output.ordinal if inv.output else None) for inv in invs}
    ordinals.update({o.call_id: o.ordinal for o in pairer.orphan_outputs()})

    def order(p: PollUpdate) -> tuple[int, int, str]:
        if p.source_index is not None:
            return (0, p.source_index, "")
        ordinal = ordinals.get(p.call_id or "")
        return (1, ordinal if ordinal is not None else 1 << 62, p.call_id or "")

    def settle(polls: list[PollUpdate], exit_code: int | None, what: str) -> int | None:
        codes = {p.exit_code for p in polls if p.exit_code is not None}
        if exit_code is not None:
            codes.add(exit_code)
        if len(codes) > 1:
            raise _Unresolved(KeepReason.STATUS_CONFLICT, f"{what} has conflicting native exit codes")
        return codes.pop() if codes else None

    out_records: list[ToolRecord] = []
    for c in main_calls:
        rec = records[c.index]
        polls = sorted(rec["polls"], key=order)
        exit_code = settle(polls, rec["exit_code"], f"call {c.index}")
        running = rec["running"] and exit_code is None
        st = "interrupted" if rec["interrupted"] else _status(exit_code, rec["success"], running, rec["rejected"])
        patch = None
        if c.tool == "apply_patch":
            patch = next(p for p in previews if p.source_index == c.index)
            patch = attrs.evolve(patch, status=st)
            previews[:] = [patch if p.source_index == c.index else p for p in previews]
        out_records.append(
            ToolRecord(
                tool=c.tool,
                command=_command_of(c.tool, c.args) if c.tool != "apply_patch" else None,
                args=c.args,
                cwd=_cwd_of(c.args),
                output=rec["output"],
                data=rec["data"],
                status=st,
                exit_code=exit_code,
                process_id=rec["process_id"],
                call_id=rec["call_id"],
                source_index=c.index,
                slot=(c.batch, c.slot) if c.batch is not None and c.slot is not None else None,
                evidence=tuple(evidence[c.index]),
                polls=tuple(polls),
                patch=patch,
            )
        )
    updates = []
    for pid_ in sorted(ext):
        polls = sorted(ext[pid_], key=order)
        code = settle(polls, None, f"process {pid_}")
        st = "interrupted" if pid_ in ext_interrupt else (_status(code, None, False, False) if code is not None else None)
        updates.append(ProcessUpdate(pid_, known_s[pid_], tuple(polls), st, code))
    unmatched = tuple(sorted(nv.inv.call.call_id for j, nv in enumerate(native) if j not in used))
    unmatched += tuple(sorted(o.call_id for o in pairer.orphan_outputs() if o.process_id not in by_pid))
    return Attribution(
        True,
        records=tuple(out_records),
        previews=tuple(previews),
        internal=tuple(internal),
        updates=tuple(updates),
        script_status=status,
        script_error=error,
        unmatched_receipts=unmatched,
        evicted=pairer.evicted,
    )
