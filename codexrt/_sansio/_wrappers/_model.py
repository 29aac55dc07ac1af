"""The wrapper replay's vocabulary: keep reasons, the public records, and small value helpers.

Everything here is data (attrs records and enums) plus the normalisations every stage shares
(process ids, line endings, working directories). No stage logic lives here; the other modules
of the package import it, and it imports none of them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from urllib.parse import unquote, urlparse

import attrs

from .._patch import parse_apply_patch
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
# apply_patch preview
# ---------------------------------------------------------------------------------------


def _patch_preview(index: int, patch: str) -> PatchPreview:
    """A static ``apply_patch`` literal as a preview (read by the one envelope parser,
    :func:`codexrt._sansio._patch.parse_apply_patch`)."""
    text = _crlf(patch)
    files = tuple(PatchFile(f.path, f.kind, f.move_path, f.added, f.removed) for f in parse_apply_patch(text))
    return PatchPreview(index, text, files)
