"""IDE context: editor state → frozen ``additionalContext`` fragments (R-CTX-1, R-CTX-3, R-CTX-4).

Theory of operation
-------------------
A host (an editor plugin, a chat UI) knows what the user has open. That state is *not* the
user's message: ``send.message`` keeps only what the user typed (R-CTX-1). The editor state
travels beside it, in one of two ways decided per CLI/child by the capability probe
(``codexrt._io._context_probe``, R-CTX-2):

* **supported** — ``turn/start.additionalContext`` (an experimental field; the connection must
  have negotiated ``capabilities.experimentalApi``), a map ``{key: {kind, value, name?}}``.
  The server turns every ``application`` entry into a developer message
  ``<key>value</key>`` placed before the user message, truncates each entry at about
  1,000 tokens and dedupes identical adjacent state (R-CTX-3). Entries are append-only in
  native history: what was sent cannot be taken back.
* **fallback** — the official text convention of the Codex IDE clients: the user text is
  prefixed with ``# Context from my IDE setup:``, one ``## …`` section per fragment, then
  ``## My request for Codex:`` and the user's own input (R-CTX-4). Images keep their
  relative order; ``text_elements`` byte ranges are shifted by the prefix length **in UTF-8
  bytes**, because the protocol's ``TextElement.byteRange`` counts bytes of ``text``.

:func:`build_context` is pure: it reads an :class:`EditorState` and returns a frozen
:class:`ContextFragments`, which the operation keeps for its whole life, so later editor
changes never leak into a send that is already queued (R-CTX-1, R-CTX-6: editor changes are
not part of the runtime fingerprint or settings revision either — this module knows nothing
of those).

Invariants
----------
* Keys are exactly ``ide_context``, ``open_tabs``, ``workspace_context``,
  ``referenced_files_<i>`` and ``terminal_context_<i>`` (``i`` counts from 0 in the order the
  host gave), each with ``kind: "application"``.
* Every fragment has its **own** byte budget (:class:`ContextBudgets`), each at most
  :data:`MAX_FRAGMENT_BYTES` (sized so that even ~3 bytes per token stays under the server's
  ~1,000-token cut). A long tab list is trimmed inside ``open_tabs`` and can never truncate
  the active file or crowd out an explicit reference.
* Fragments describe editor state only: paths, line numbers, folder names, terminal names.
  They never inline file bodies or selected code, and never claim the active file is what
  the request is about. The one piece of free text is terminal output the user explicitly
  attached to a terminal reference, budgeted and indented.
* No line inside a fragment can start with ``#``: paths lose control characters (a newline
  in a file name must not forge a ``## My request for Codex:`` heading), terminal output is
  indented. So a sanitizer that looks for the last request marker (R-CTX-5) finds ours.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from codexrt._sansio._errors import LocalProtocolError
from codexrt._sansio._wire import MAX_INPUT_CHARS  # re-exported: the limit lives with the wire's

__all__ = [
    "CONTEXT_HEADER",
    "REQUEST_HEADER",
    "MAX_FRAGMENT_BYTES",
    "MAX_INPUT_CHARS",
    "LineRange",
    "ActiveFile",
    "FileReference",
    "TerminalReference",
    "WorkspaceInfo",
    "EditorState",
    "ContextBudgets",
    "ContextFragment",
    "ContextFragments",
    "build_context",
    "apply_text_convention",
    "text_convention_prefix",
    "ContextDelivery",
    "PreparedInput",
    "prepare_input",
]

#: First line of the official fallback convention (R-CTX-4).
CONTEXT_HEADER = "# Context from my IDE setup:"
#: Heading that introduces the user's own input in the fallback convention (R-CTX-4).
REQUEST_HEADER = "## My request for Codex:"


#: Upper bound of any one fragment's budget, in UTF-8 bytes. The server cuts each fragment
#: at about 1,000 tokens (R-CTX-3); 3,000 bytes stays below that even for text that costs
#: ~3 bytes per token (CJK paths), and far below it for ASCII (~4 bytes per token).
MAX_FRAGMENT_BYTES = 3000
#: Smallest budget that still holds a heading and a shortened path.
MIN_FRAGMENT_BYTES = 64

_ELLIPSIS = "…"
_KIND = "application"
_MAX_OPEN_TABS = 20


# --------------------------------------------------------------------------- editor state


@attrs.frozen
class LineRange:
    """Inclusive, 1-based line numbers of a selection or reference."""

    start: int = attrs.field(validator=attrs.validators.ge(1))
    end: int = attrs.field(validator=attrs.validators.ge(1))

    def __attrs_post_init__(self) -> None:
        if self.end < self.start:
            raise LocalProtocolError(
                f"line range end {self.end} is before start {self.start}",
                details={"start": self.start, "end": self.end},
            )

    def describe(self) -> str:
        if self.start == self.end:
            return f"line {self.start}"
        return f"lines {self.start}-{self.end}"


def _opt_range(value: LineRange | tuple[int, int] | None) -> LineRange | None:
    if value is None or isinstance(value, LineRange):
        return value
    start, end = value
    return LineRange(start, end)


@attrs.frozen
class ActiveFile:
    """The focused editor: its path and, if any, the selected lines (never the selected text)."""

    path: str
    selection: LineRange | None = attrs.field(default=None, converter=_opt_range)


@attrs.frozen
class FileReference:
    """A file the user explicitly referenced (e.g. ``@file``), optionally a line range."""

    path: str
    lines: LineRange | None = attrs.field(default=None, converter=_opt_range)


@attrs.frozen
class TerminalReference:
    """A terminal the user explicitly referenced.

    ``output`` is terminal output the user explicitly attached (a selection of the terminal
    buffer); it is budgeted, keeps its most recent lines and is indented so it cannot forge
    headings. It is never filled in implicitly.
    """

    name: str
    cwd: str | None = None
    output: str | None = None


@attrs.frozen
class WorkspaceInfo:
    """The workspace the editor has open: its folders (roots) and optional display name."""

    folders: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    name: str | None = None


@attrs.frozen
class EditorState:
    """Everything a host knows about the editor at the moment of a send.

    Frozen and made of tuples, so an operation can keep it as-is (R-CTX-1).
    """

    active_file: ActiveFile | None = None
    open_tabs: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    workspace: WorkspaceInfo | None = None
    referenced_files: tuple[FileReference, ...] = attrs.field(default=(), converter=tuple)
    terminals: tuple[TerminalReference, ...] = attrs.field(default=(), converter=tuple)

    def is_empty(self) -> bool:
        return not build_context(self)


def _budget(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if not (MIN_FRAGMENT_BYTES <= value <= MAX_FRAGMENT_BYTES):
        raise LocalProtocolError(
            f"context budget {attribute.name}={value} must be within "
            f"{MIN_FRAGMENT_BYTES}..{MAX_FRAGMENT_BYTES} UTF-8 bytes (R-CTX-3)",
            details={"budget": attribute.name, "value": value},
        )


@attrs.frozen
class ContextBudgets:
    """Per-fragment byte budgets (UTF-8) and count limits (R-CTX-1, R-CTX-3).

    Each ``referenced_files_<i>`` / ``terminal_context_<i>`` fragment gets its own
    ``referenced_file`` / ``terminal`` budget. References beyond ``max_referenced_files`` /
    ``max_terminals`` are dropped and counted in :attr:`ContextFragments.dropped`.
    """

    ide_context: int = attrs.field(default=1024, validator=_budget)
    open_tabs: int = attrs.field(default=2400, validator=_budget)
    workspace_context: int = attrs.field(default=1024, validator=_budget)
    referenced_file: int = attrs.field(default=1024, validator=_budget)
    terminal: int = attrs.field(default=2400, validator=_budget)
    max_open_tabs: int = attrs.field(
        default=_MAX_OPEN_TABS, validator=[attrs.validators.ge(0), attrs.validators.le(_MAX_OPEN_TABS)]
    )
    max_referenced_files: int = attrs.field(default=32, validator=attrs.validators.ge(0))
    max_terminals: int = attrs.field(default=8, validator=attrs.validators.ge(0))


# --------------------------------------------------------------------------- fragments


@attrs.frozen
class ContextFragment:
    """One ``additionalContext`` entry: ``key`` and its budgeted ``value``."""

    key: str
    value: str

    def to_wire(self) -> dict[str, str]:
        """``AdditionalContextEntry`` of the schema: ``{kind: "application", value}``."""
        return {"kind": _KIND, "value": self.value}

    def section(self) -> str:
        """The fallback form: the first line becomes a ``##`` heading (R-CTX-4)."""
        return "## " + self.value


@attrs.frozen
class ContextFragments:
    """The frozen context of one send, in a fixed order.

    Falsy when empty — then nothing is probed and nothing is added (R-CTX-2).
    ``dropped`` counts explicit references left out by the count limits.
    """

    fragments: tuple[ContextFragment, ...] = ()
    dropped: int = 0

    def __bool__(self) -> bool:
        return bool(self.fragments)

    def __len__(self) -> int:
        return len(self.fragments)

    def __iter__(self) -> Iterator[ContextFragment]:
        return iter(self.fragments)

    def keys(self) -> tuple[str, ...]:
        return tuple(f.key for f in self.fragments)

    def to_additional_context(self) -> dict[str, dict[str, str]]:
        """A fresh ``TurnStartParams.additionalContext`` map (R-CTX-1, R-CTX-3)."""
        return {f.key: f.to_wire() for f in self.fragments}


# --------------------------------------------------------------------------- text helpers


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _clip_bytes(text: str, limit: int, *, from_end: bool = False) -> str:
    """The longest prefix (or suffix) of ``text`` that fits ``limit`` UTF-8 bytes."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    if limit <= 0:
        return ""
    cut = raw[len(raw) - limit :] if from_end else raw[:limit]
    # Dropping a partial code point at the cut edge: errors="ignore" only removes the
    # incomplete sequence at the boundary, every whole character survives.
    return cut.decode("utf-8", errors="ignore")


def _shorten_middle(text: str, limit: int) -> str:
    """Fit ``text`` in ``limit`` bytes keeping its head and tail (paths keep the file name)."""
    if _utf8_len(text) <= limit:
        return text
    room = limit - _utf8_len(_ELLIPSIS)
    if room <= 0:
        return _clip_bytes(_ELLIPSIS, limit)
    tail = _clip_bytes(text, room - room // 2, from_end=True)
    head = _clip_bytes(text, room - _utf8_len(tail))
    return head + _ELLIPSIS + tail


def _clean_line(text: str) -> str:
    """One line of text: control characters (newlines included) become spaces."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        out.append(" " if cat in ("Cc", "Zl", "Zp") else ch)
    return "".join(out).strip()


def _fit_lines(head: Sequence[str], limit: int) -> str:
    """Join lines; the first line is shortened in the middle if even it does not fit."""
    text = "\n".join(head)
    if _utf8_len(text) <= limit:
        return text
    # Only reached for absurdly long single paths: shorten line by line, keep order.
    out: list[str] = []
    used = 0
    for line in head:
        sep = 1 if out else 0
        room = limit - used - sep
        if room <= 0:
            break
        piece = _shorten_middle(line, room)
        out.append(piece)
        used += sep + _utf8_len(piece)
    return "\n".join(out)


# --------------------------------------------------------------------------- builders


def _ide_context(active: ActiveFile, budget: int) -> ContextFragment | None:
    path = _clean_line(active.path)
    if not path:
        return None
    tail = [f"Selected {active.selection.describe()}"] if active.selection else []
    label = "Active file: "
    room = budget - _utf8_len(label) - sum(1 + _utf8_len(t) for t in tail)
    value = "\n".join([label + _shorten_middle(path, max(room, 8)), *tail])
    return ContextFragment("ide_context", _fit_lines(value.split("\n"), budget))


def _list_within(lines: list[str], items: Sequence[str], *, total: int, prefix: str, cap: int, budget: int,
                 more: str) -> int:
    """Append ``prefix + item`` lines (each item shortened to ``cap``) below the one line in
    ``lines`` while they fit ``budget`` — keeping room for the ``(+N <more>)`` line, so trimming
    never overflows the budget — then that line for the rest of ``total``. Returns how many
    items were listed."""
    used = _utf8_len(lines[0])
    listed = 0
    for raw in items:
        item = prefix + _shorten_middle(raw, cap)
        rest = total - listed - 1
        reserve = _utf8_len(f"\n(+{rest} {more})") if rest else 0
        if used + 1 + _utf8_len(item) + reserve > budget:
            break
        lines.append(item)
        used += 1 + _utf8_len(item)
        listed += 1
    if listed < total:
        lines.append(f"(+{total - listed} {more})")
    return listed


def _open_tabs(tabs: Iterable[str], active: str | None, budget: int, max_tabs: int) -> ContextFragment | None:
    seen: set[str] = set()
    if active:
        seen.add(active)
    others: list[str] = []
    for raw in tabs:
        path = _clean_line(raw)
        if not path or path in seen:
            continue
        seen.add(path)
        others.append(path)
    if not others:
        return None
    header = "Open tabs:"
    lines = [header]
    if _list_within(lines, others[:max_tabs], total=len(others), prefix="- ", cap=max(32, budget // 4),
                    budget=budget, more="more not listed") == 0:
        return None
    return ContextFragment("open_tabs", "\n".join(lines))


def _workspace(ws: WorkspaceInfo, budget: int) -> ContextFragment | None:
    folders = [p for p in (_clean_line(f) for f in ws.folders) if p]
    name = _clean_line(ws.name) if ws.name else ""
    if not folders and not name:
        return None
    lines: list[str] = []
    if name:
        lines.append("Workspace: " + _shorten_middle(name, 200))
    else:
        lines.append("Workspace:")
    _list_within(lines, folders, total=len(folders), prefix="- folder ", cap=max(32, budget // 3), budget=budget,
                 more="more folders")
    return ContextFragment("workspace_context", _fit_lines(lines, budget))


def _reference(index: int, ref: FileReference, budget: int) -> ContextFragment | None:
    path = _clean_line(ref.path)
    if not path:
        return None
    label = "Referenced file: "
    suffix = f" ({ref.lines.describe()})" if ref.lines else ""
    room = budget - _utf8_len(label) - _utf8_len(suffix)
    value = label + _shorten_middle(path, max(room, 8)) + suffix
    return ContextFragment(f"referenced_files_{index}", _fit_lines([value], budget))


def _terminal(index: int, term: TerminalReference, budget: int) -> ContextFragment | None:
    name = _clean_line(term.name) or "terminal"
    lines = ["Terminal: " + _shorten_middle(name, 200)]
    if term.cwd:
        cwd = _clean_line(term.cwd)
        if cwd:
            lines.append("Working directory: " + _shorten_middle(cwd, max(32, budget // 4)))
    head = "\n".join(lines)
    if term.output:
        label = "\nAttached output (most recent lines):"
        room = budget - _utf8_len(head) - _utf8_len(label)
        body = _indented_tail(term.output, room)
        if body:
            head = head + label + body
    return ContextFragment(f"terminal_context_{index}", _fit_lines(head.split("\n"), budget))


def _indented_tail(output: str, room: int) -> str:
    """The most recent lines of ``output`` that fit ``room`` bytes, each indented by 4."""
    kept: list[str] = []
    used = 0
    lines = output.replace("\r\n", "\n").replace("\r", "\n").strip("\n").split("\n")
    for raw in reversed(lines):
        line = "\n    " + "".join(
            " " if unicodedata.category(ch) == "Cc" and ch != "\t" else ch for ch in raw
        ).rstrip()
        size = _utf8_len(line)
        if used + size > room:
            if not kept and room > 8:
                kept.append("\n    " + _clip_bytes(line[5:], room - 5, from_end=True))
            break
        kept.append(line)
        used += size
    while kept and not kept[-1].strip():
        kept.pop()  # leading blank lines (we built the list from the end)
    while kept and not kept[0].strip():
        kept.pop(0)
    return "".join(reversed(kept))


def build_context(state: EditorState, *, budgets: ContextBudgets | None = None) -> ContextFragments:
    """Turn editor state into the frozen fragments of one send (R-CTX-1, R-CTX-3).

    Order: ``ide_context``, ``open_tabs``, ``workspace_context``, ``referenced_files_<i>``,
    ``terminal_context_<i>``. Empty parts produce no fragment; an empty state produces an
    empty (falsy) :class:`ContextFragments`.
    """
    b = budgets or ContextBudgets()
    out: list[ContextFragment] = []
    active_path: str | None = None
    if state.active_file is not None:
        frag = _ide_context(state.active_file, b.ide_context)
        if frag is not None:
            out.append(frag)
            active_path = _clean_line(state.active_file.path)
    tabs = _open_tabs(state.open_tabs, active_path, b.open_tabs, b.max_open_tabs)
    if tabs is not None:
        out.append(tabs)
    if state.workspace is not None:
        ws = _workspace(state.workspace, b.workspace_context)
        if ws is not None:
            out.append(ws)
    dropped = 0
    refs = [r for r in state.referenced_files if _clean_line(r.path)]
    dropped += max(0, len(refs) - b.max_referenced_files)
    for i, ref in enumerate(refs[: b.max_referenced_files]):
        frag = _reference(i, ref, b.referenced_file)
        if frag is not None:
            out.append(frag)
    terms = list(state.terminals)
    dropped += max(0, len(terms) - b.max_terminals)
    for i, term in enumerate(terms[: b.max_terminals]):
        frag = _terminal(i, term, b.terminal)
        if frag is not None:
            out.append(frag)
    return ContextFragments(tuple(out), dropped)


# --------------------------------------------------------------------------- fallback


def text_convention_prefix(fragments: ContextFragments) -> str:
    """Everything the fallback puts before the user's text ("" for empty context)."""
    if not fragments:
        return ""
    sections = "\n\n".join(f.section() for f in fragments)
    return f"{CONTEXT_HEADER}\n\n{sections}\n\n{REQUEST_HEADER}\n"


def _shift_element(element: Mapping[str, Any], shift: int, text_len: int) -> dict[str, Any]:
    try:
        rng = element["byteRange"]
        start, end = rng["start"], rng["end"]
    except (KeyError, TypeError) as exc:
        raise LocalProtocolError(
            "text element needs byteRange {start, end}", details={"element": repr(element)[:200]}
        ) from exc
    if not (
        isinstance(start, int)
        and isinstance(end, int)
        and not isinstance(start, bool)
        and not isinstance(end, bool)
        and 0 <= start <= end <= text_len
    ):
        raise LocalProtocolError(
            f"text element byteRange {start!r}..{end!r} is outside the text "
            f"({text_len} UTF-8 bytes)",
            details={"start": start, "end": end, "textBytes": text_len},
        )
    out = dict(element)
    out["byteRange"] = {**rng, "start": start + shift, "end": end + shift}
    return out


def apply_text_convention(
    user_text: str,
    fragments: ContextFragments,
    *,
    images: Sequence[Any] = (),
    text_elements: Sequence[Mapping[str, Any]] = (),
) -> tuple[str, list[Any], list[dict[str, Any]]]:
    """The fallback of R-CTX-4: ``# Context from my IDE setup:`` … ``## My request for Codex:``.

    Returns ``(text, images, text_elements)``: the wrapped text, the images in their original
    relative order (a new list, items untouched) and the text elements (wire shape
    ``{"byteRange": {"start", "end"}, "placeholder"?}``) with both offsets moved by the
    prefix length in **UTF-8 bytes**. Other keys of an element are kept. With empty
    ``fragments`` the text and offsets are returned unchanged.

    Raises :class:`~codexrt.LocalProtocolError` for an element whose range does not lie in
    ``user_text``.
    """
    prefix = text_convention_prefix(fragments)
    shift = _utf8_len(prefix)
    text_len = _utf8_len(user_text)
    shifted = [_shift_element(e, shift, text_len) for e in text_elements]
    return prefix + user_text, list(images), shifted


# --------------------------------------------------------------------------- delivery


class ContextDelivery(enum.Enum):
    """How one send's context travels, as the capability probe decided (R-CTX-2)."""

    #: no context: nothing probed, nothing added
    NONE = "none"
    #: ``turn/start.additionalContext`` beside the raw user input (R-CTX-3)
    ADDITIONAL_CONTEXT = "additionalContext"
    #: the ``# Context from my IDE setup:`` text convention (R-CTX-4)
    TEXT_CONVENTION = "textConvention"


@attrs.frozen
class PreparedInput:
    """What goes into ``turn/start`` for one send.

    ``additional_context`` is the ``TurnStartParams.additionalContext`` map or ``None``
    (then the field must be omitted). :meth:`input_items` gives ``TurnStartParams.input``.
    """

    text: str
    images: tuple[Any, ...]
    text_elements: tuple[dict[str, Any], ...]
    additional_context: dict[str, dict[str, str]] | None
    delivery: ContextDelivery

    def input_items(self) -> list[Any]:
        """``[{"type": "text", "text", "text_elements"}, *images]`` — images keep their order."""
        item: dict[str, Any] = {
            "type": "text",
            "text": self.text,
            "text_elements": [dict(e) for e in self.text_elements],
        }
        return [item, *self.images]


def prepare_input(
    user_text: str,
    fragments: ContextFragments,
    delivery: ContextDelivery,
    *,
    images: Sequence[Any] = (),
    text_elements: Sequence[Mapping[str, Any]] = (),
) -> PreparedInput:
    """Apply a delivery decision to one send (R-CTX-1, R-CTX-3, R-CTX-4).

    ``ADDITIONAL_CONTEXT`` keeps the raw text, images and elements and returns the map;
    ``TEXT_CONVENTION`` wraps the text and shifts the elements; empty ``fragments`` (or
    ``NONE``) change nothing. ``NONE`` with non-empty fragments is a caller bug: the probe
    only answers ``NONE`` for empty context.
    """
    if not fragments or delivery is ContextDelivery.NONE:
        if fragments:
            raise LocalProtocolError("non-empty context needs a delivery decision (R-CTX-2)")
        _, imgs, els = apply_text_convention(user_text, fragments, images=images, text_elements=text_elements)
        return PreparedInput(user_text, tuple(imgs), tuple(els), None, ContextDelivery.NONE)
    if delivery is ContextDelivery.ADDITIONAL_CONTEXT:
        _, imgs, els = apply_text_convention(
            user_text, ContextFragments(), images=images, text_elements=text_elements
        )
        return PreparedInput(user_text, tuple(imgs), tuple(els), fragments.to_additional_context(), delivery)
    text, imgs, els = apply_text_convention(user_text, fragments, images=images, text_elements=text_elements)
    return PreparedInput(text, tuple(imgs), tuple(els), None, delivery)
