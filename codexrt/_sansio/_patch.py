"""Native file-change patches: parse, reverse, and apply a reverse to current content (no I/O).

Why this exists (R-EDIT-1, R-EDIT-3): an edit ledger must know *exactly* what Codex wrote so
it can later take one file back without touching anything else and without ever clobbering a
user's later edit. This module is the pure half of that: it turns one native change into a
:class:`FilePatch`, computes the reverse operation, and checks a reverse against the bytes
that are on disk *now*, returning either the resulting contents or a :class:`Conflict`.
The I/O half (locks, atomic writes, the sqlite store) is ``codexrt/_io/_edits.py``.

What the real server sends (pinned 0.169.0 schema ``FileUpdateChange``/``PatchChangeKind``,
and ``codex-rs/app-server-protocol`` ``format_file_change_diff``)::

    {path, kind: {type: "add"}, diff}                      diff = the new file's full text
    {path, kind: {type: "delete"}, diff}                   diff = the deleted file's full text
    {path, kind: {type: "update", move_path: null}, diff}  diff = unified diff (no ---/+++ header,
                                                            context radius 1, ``\\ No newline…``)
    {path, kind: {type: "update", move_path: P}, diff}     diff = unified diff + "\\n\\nMoved to: P"

All four were confirmed on the pinned binary (``tests/data/edits-filechange-0.169.0.json``).
``path``/``move_path`` are absolute in practice (codex resolves them against the turn's cwd),
but relative ones are accepted; resolving them is the caller's job. The older "core" shape
(``ApplyPatchApprovalParams.fileChanges`` and legacy rollouts: ``{type:"add", content}``,
``{type:"delete", content}``, ``{type:"update", unified_diff, move_path}``) parses too.

Rules of the reverse check — *a mismatch is a conflict, never an overwrite*:

* add → delete: the file must still hold exactly the added text;
* delete → restore: the path must be free (a file the user created since is never replaced);
* update → reverse hunks: every hunk's new side must sit at its recorded position, line for
  line, byte for byte (line endings and a missing final newline included) — no fuzz, no
  offset search: with codex's one line of context an offset match is a guess;
* move → move back: the destination must exist and match, the source must be free.

Content is text: codex itself only patches UTF-8 files. A diff carrying NUL, or a file on disk
that is not UTF-8 or holds NUL bytes, is refused with :class:`BinaryContentError`.

The other patch shape, the ``apply_patch`` *envelope* a model writes (``*** Begin Patch`` …),
is read here too, by :func:`parse_apply_patch` — the one parser the history projection and the
wrapper replay share. It is lenient and for display and matching only; nothing applies it.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from codexrt._sansio._errors import BinaryContentError, PatchFormatError  # re-exported: defined in _errors

__all__ = [
    "ChangeKind",
    "HunkLine",
    "Hunk",
    "FilePatch",
    "Conflict",
    "FileOp",
    "ReversePlan",
    "PatchFormatError",
    "BinaryContentError",
    "parse_change",
    "parse_unified_diff",
    "reverse",
    "apply_hunks",
    "plan_apply",
    "render",
    "decode_text",
    "split_lines",
    "EnvelopeFile",
    "parse_apply_patch",
]

NO_EOF_MARKER = "\\ No newline at end of file"
_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
# Lines a unified diff may carry outside hunks (git headers); anything else there is an error.
_HEADER_PREFIXES = (
    "diff --git ",
    "index ",
    "--- ",
    "+++ ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
)


class ChangeKind(enum.Enum):
    ADD = "add"
    DELETE = "delete"
    UPDATE = "update"
    MOVE = "move"  # native ``update`` with a ``move_path``


@attrs.frozen
class HunkLine:
    """One hunk line: ``tag`` is ``" "``, ``"-"`` or ``"+"``; ``value`` keeps its line ending
    (``"\\n"``, ``"\\r\\n"``) and has none when the diff marked *no newline at end of file*."""

    tag: str
    value: str


@attrs.frozen
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[HunkLine, ...]
    section: str = ""

    @property
    def old_lines(self) -> list[str]:
        return [ln.value for ln in self.lines if ln.tag in " -"]

    @property
    def new_lines(self) -> list[str]:
        return [ln.value for ln in self.lines if ln.tag in " +"]

    def reversed(self) -> Hunk:
        swap = {"-": "+", "+": "-", " ": " "}
        # A reversed hunk lists its removals before its additions, like every unified diff.
        out: list[HunkLine] = []
        pending_add: list[HunkLine] = []
        for ln in self.lines:
            t = swap[ln.tag]
            if t == "+":
                pending_add.append(HunkLine("+", ln.value))
            elif t == "-":
                out.append(HunkLine("-", ln.value))
            else:
                out.extend(pending_add)
                pending_add.clear()
                out.append(ln)
        out.extend(pending_add)
        return Hunk(
            self.new_start, self.new_len, self.old_start, self.old_len, tuple(out), self.section
        )


@attrs.frozen
class FilePatch:
    """One file's change, structured.

    ``path`` is where the file was before the change (the rename source for a move);
    ``move_path`` where it went (moves only). ``content`` is the full text for add/delete;
    ``hunks`` the update hunks (possibly empty for a pure rename). ``native_kind`` is the
    server's own ``kind.type`` (``add``/``delete``/``update``).
    """

    kind: ChangeKind
    path: str
    move_path: str | None = None
    content: str | None = None
    hunks: tuple[Hunk, ...] = ()
    native_kind: str = ""

    @property
    def target(self) -> str:
        """Where the file lives after the change (``None``-free; a delete's target is its path)."""
        return self.move_path if self.move_path is not None else self.path

    @property
    def rename_source(self) -> str | None:
        return self.path if self.kind is ChangeKind.MOVE else None

    @property
    def added(self) -> int:
        if self.kind is ChangeKind.ADD:
            return len(split_lines(self.content or ""))
        if self.kind is ChangeKind.DELETE:
            return 0
        return sum(1 for h in self.hunks for ln in h.lines if ln.tag == "+")

    @property
    def removed(self) -> int:
        if self.kind is ChangeKind.DELETE:
            return len(split_lines(self.content or ""))
        if self.kind is ChangeKind.ADD:
            return 0
        return sum(1 for h in self.hunks for ln in h.lines if ln.tag == "-")


@attrs.frozen
class Conflict:
    """The file no longer holds what the change left there; nothing may be written.

    ``expected``/``actual`` are the texts compared (``None`` = file absent); :attr:`diff`
    shows them as a unified diff for a human.
    """

    path: str
    reason: str
    expected: str | None = None
    actual: str | None = None

    @property
    def diff(self) -> str:
        exp = split_lines(self.expected or "")
        act = split_lines(self.actual or "")
        lines = difflib.unified_diff(
            [_visible_eol(x) for x in exp],
            [_visible_eol(x) for x in act],
            fromfile=f"expected {self.path}" + (" (absent)" if self.expected is None else ""),
            tofile=f"actual {self.path}" + (" (absent)" if self.actual is None else ""),
        )
        return "".join(lines)


@attrs.frozen
class FileOp:
    """One write of a plan: ``content`` is the new text, or ``None`` to delete the path.
    ``mode_from`` names the path whose permission bits the written file should keep."""

    path: str
    content: str | None
    mode_from: str | None = None


@attrs.frozen
class ReversePlan:
    """What applying a patch to the current state does: ordered ops (writes before deletes,
    so a crash between two ops never loses the only copy of a file)."""

    ops: tuple[FileOp, ...]


# ---------------------------------------------------------------------------------- parsing


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only, keeping endings (``str.splitlines`` would also split on
    ``\\r``, ``\\x0c``, ``\\u2028``… which diffs do not)."""
    if not text:
        return []
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _visible_eol(line: str) -> str:
    return line if line.endswith("\n") else line + "\n" + NO_EOF_MARKER + "\n"


def decode_text(data: bytes, *, path: str = "") -> str:
    """Bytes → text, refusing binary-ish content (NUL byte or not UTF-8)."""
    if b"\x00" in data:
        raise BinaryContentError(
            f"refusing binary content (NUL byte) in {path or 'file'}", details={"path": path}
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BinaryContentError(
            f"refusing non-UTF-8 content in {path or 'file'} (byte {exc.start})",
            details={"path": path},
        ) from None


def _check_text(text: str, path: str) -> None:
    if "\x00" in text:
        raise BinaryContentError(
            f"refusing binary content (NUL byte) in the change for {path}", details={"path": path}
        )


def parse_unified_diff(text: str, *, path: str = "") -> tuple[Hunk, ...]:
    """Parse unified-diff hunks; headers (``---``/``+++``/``diff --git``) are skipped.

    Hunks are delimited by their header counts, so a context line that is an empty string
    (a generator that stripped the leading space) is still read right.
    """
    lines = split_lines(text)
    hunks: list[Hunk] = []
    i = 0
    n = len(lines)
    while i < n:
        raw = lines[i]
        body = raw.rstrip("\n")
        m = _HUNK_HEADER.match(body.rstrip("\r"))
        if m is None:
            if body.strip() == "" or body.startswith(_HEADER_PREFIXES):
                i += 1
                continue
            raise PatchFormatError(
                f"unexpected line {i + 1} outside a hunk in the diff for {path!r}: {body[:80]!r}",
                details={"path": path, "line": i + 1},
            )
        old_start, old_len = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        new_start, new_len = int(m.group(3)), int(m.group(4) if m.group(4) is not None else 1)
        i += 1
        old_left, new_left = old_len, new_len
        hl: list[HunkLine] = []
        while old_left > 0 or new_left > 0 or (i < n and lines[i].startswith("\\")):
            if i >= n:
                raise PatchFormatError(
                    f"hunk @@ -{old_start},{old_len} +{new_start},{new_len} @@ in the diff for "
                    f"{path!r} ends early ({old_left} old / {new_left} new lines missing)",
                    details={"path": path},
                )
            raw = lines[i]
            i += 1
            if raw.startswith("\\"):
                if not hl:
                    raise PatchFormatError(
                        f"'\\ No newline' marker before any line in the diff for {path!r}",
                        details={"path": path},
                    )
                last = hl[-1]
                if last.value.endswith("\n"):
                    hl[-1] = HunkLine(last.tag, last.value[:-1])
                continue
            tag, value = (raw[0], raw[1:]) if raw not in ("\n", "") else (" ", "\n")
            if tag == " ":
                old_left -= 1
                new_left -= 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            else:
                raise PatchFormatError(
                    f"bad hunk line {i} in the diff for {path!r}: {raw[:80]!r}",
                    details={"path": path, "line": i},
                )
            if old_left < 0 or new_left < 0:
                raise PatchFormatError(
                    f"hunk @@ -{old_start},{old_len} +{new_start},{new_len} @@ in the diff for "
                    f"{path!r} has more lines than its header says",
                    details={"path": path},
                )
            hl.append(HunkLine(tag, value))
        hunks.append(Hunk(old_start, old_len, new_start, new_len, tuple(hl), m.group(5)))
    return tuple(hunks)


def _strip_moved_to(diff: str, move_path: str) -> str:
    suffix = f"\n\nMoved to: {move_path}"
    if diff.endswith(suffix):
        return diff[: -len(suffix)]
    # Older servers, or a path rendered differently: drop any trailing "Moved to:" block.
    m = re.search(r"\n\nMoved to: [^\n]*\Z", diff)
    return diff[: m.start()] if m else diff


def parse_change(change: Mapping[str, Any], *, path: str | None = None) -> FilePatch:
    """Parse one native change into a :class:`FilePatch`.

    Accepts the v2 ``FileUpdateChange`` (``{path, kind:{type, move_path?}, diff}``) and the
    core ``FileChange`` (``{type, content}`` / ``{type, unified_diff, move_path}``, with the
    path given separately as ``path=`` because it is the key of a map there).
    """
    if not isinstance(change, Mapping):
        raise PatchFormatError(f"a file change must be an object, got {type(change).__name__}")
    kind_obj = change.get("kind")
    if isinstance(kind_obj, Mapping):  # v2 FileUpdateChange
        p = change.get("path", path)
        native = kind_obj.get("type")
        move_path = kind_obj.get("move_path", kind_obj.get("movePath"))
        text = change.get("diff")
    elif isinstance(kind_obj, str) or "type" in change:  # core FileChange
        p = path if path is not None else change.get("path")
        native = change.get("type", kind_obj)
        move_path = change.get("move_path", change.get("movePath"))
        text = change.get("content") if native in ("add", "delete") else change.get("unified_diff")
    else:
        raise PatchFormatError("a file change has neither 'kind' nor 'type'")
    if not isinstance(p, str) or not p:
        raise PatchFormatError("a file change has no path", details={"change": _brief(change)})
    if not isinstance(text, str):
        raise PatchFormatError(
            f"the change for {p!r} has no diff text", details={"path": p, "kind": native}
        )
    if move_path is not None and not isinstance(move_path, str):
        raise PatchFormatError(f"the change for {p!r} has a non-string move_path")
    _check_text(text, p)
    if native == "add":
        return FilePatch(ChangeKind.ADD, p, content=text, native_kind="add")
    if native == "delete":
        return FilePatch(ChangeKind.DELETE, p, content=text, native_kind="delete")
    if native == "update":
        if move_path:
            hunks = parse_unified_diff(_strip_moved_to(text, move_path), path=p)
            return FilePatch(ChangeKind.MOVE, p, move_path=move_path, hunks=hunks, native_kind="update")
        return FilePatch(ChangeKind.UPDATE, p, hunks=parse_unified_diff(text, path=p), native_kind="update")
    raise PatchFormatError(
        f"unknown change kind {native!r} for {p!r}", details={"path": p, "kind": native}
    )


def _brief(obj: Any) -> str:
    s = repr(obj)
    return s if len(s) < 200 else s[:200] + "…"


# ---------------------------------------------------------------------------------- reverse


def reverse(patch: FilePatch) -> FilePatch:
    """The operation that takes the change back: add ↔ delete, update → reversed hunks,
    move → move back (destination → source) with reversed hunks."""
    if patch.kind is ChangeKind.ADD:
        return FilePatch(ChangeKind.DELETE, patch.path, content=patch.content, native_kind="delete")
    if patch.kind is ChangeKind.DELETE:
        return FilePatch(ChangeKind.ADD, patch.path, content=patch.content, native_kind="add")
    hunks = tuple(h.reversed() for h in patch.hunks)
    if patch.kind is ChangeKind.MOVE:
        assert patch.move_path is not None
        return FilePatch(
            ChangeKind.MOVE, patch.move_path, move_path=patch.path, hunks=hunks, native_kind="update"
        )
    return FilePatch(ChangeKind.UPDATE, patch.path, hunks=hunks, native_kind="update")


def apply_hunks(text: str, hunks: tuple[Hunk, ...], *, path: str = "") -> str | Conflict:
    """Apply hunks to ``text`` strictly: each hunk's old side must be found at exactly its
    recorded position. Returns the new text or a :class:`Conflict` (first mismatch)."""
    src = split_lines(text)
    out: list[str] = []
    cursor = 0
    for idx, h in enumerate(hunks):
        want = h.old_lines
        # For an empty old side, old_start names the line *after which* lines are inserted.
        start = h.old_start if h.old_len == 0 else h.old_start - 1
        if start < cursor or start > len(src):
            return Conflict(
                path,
                f"hunk {idx + 1} (@@ -{h.old_start},{h.old_len} @@) lies outside the file "
                f"({len(src)} lines) or overlaps the previous hunk",
                "".join(want),
                "".join(src[start : start + len(want)]) if start <= len(src) else "",
            )
        have = src[start : start + len(want)]
        if have != want:
            return Conflict(
                path,
                f"hunk {idx + 1} (@@ -{h.old_start},{h.old_len} @@) does not match the file: "
                "it changed since Codex wrote it",
                "".join(want),
                "".join(have),
            )
        out.extend(src[cursor:start])
        out.extend(h.new_lines)
        cursor = start + len(want)
    out.extend(src[cursor:])
    return "".join(out)


def plan_apply(patch: FilePatch, current: Mapping[str, str | None]) -> ReversePlan | Conflict:
    """Check ``patch`` against the current texts and return the writes it implies.

    ``current`` maps every path the patch touches (``patch.path`` and ``patch.move_path``)
    to its text now, or ``None`` if absent. Used with ``reverse(p)`` this is the undo check.
    """

    def cur(p: str) -> str | None:
        if p not in current:
            raise KeyError(f"plan_apply needs the current content of {p!r}")
        return current[p]

    now = cur(patch.path)
    if patch.kind is ChangeKind.ADD:
        if now is not None:
            return Conflict(
                patch.path, "the file exists again: restoring it would overwrite it", None, now
            )
        return ReversePlan((FileOp(patch.path, patch.content or ""),))
    if patch.kind is ChangeKind.DELETE:
        if now is None:
            return Conflict(patch.path, "the file is gone", patch.content, None)
        if now != patch.content:
            return Conflict(
                patch.path, "the file changed since Codex wrote it", patch.content, now
            )
        return ReversePlan((FileOp(patch.path, None),))
    if now is None:
        return Conflict(patch.path, "the file is gone", "".join(_expected_side(patch)), None)
    new = apply_hunks(now, patch.hunks, path=patch.path)
    if isinstance(new, Conflict):
        return new
    if patch.kind is ChangeKind.UPDATE:
        return ReversePlan((FileOp(patch.path, new, mode_from=patch.path),))
    assert patch.move_path is not None
    if patch.move_path == patch.path:
        return ReversePlan((FileOp(patch.path, new, mode_from=patch.path),))
    dest_now = cur(patch.move_path)
    if dest_now is not None:
        return Conflict(
            patch.move_path,
            "a file exists where the move would put it back: it would be overwritten",
            None,
            dest_now,
        )
    return ReversePlan(
        (FileOp(patch.move_path, new, mode_from=patch.path), FileOp(patch.path, None))
    )


def _expected_side(patch: FilePatch) -> list[str]:
    return [v for h in patch.hunks for v in h.old_lines]


# ---------------------------------------------------------------------------------- render


def _render_lines(tag: str, lines: list[str]) -> list[str]:
    out = []
    for v in lines:
        out.append(tag + v if v.endswith("\n") else tag + v + "\n" + NO_EOF_MARKER + "\n")
    return out


def _label(prefix: str, path: str) -> str:
    return path if path.startswith("/") else prefix + path


def render(patch: FilePatch) -> str:
    """A git-style unified diff of ``patch`` (``--- a/… +++ b/…`` headers), for humans and
    ``--dry-run``. Round-trips through :func:`parse_unified_diff`."""
    src = _label("a/", patch.path)
    dst = _label("b/", patch.target)
    if patch.kind is ChangeKind.ADD:
        body = split_lines(patch.content or "")
        head = ["--- /dev/null\n", f"+++ {dst}\n"]
        if not body:
            return "".join(head)
        return "".join(head + [f"@@ -0,0 +1,{len(body)} @@\n"] + _render_lines("+", body))
    if patch.kind is ChangeKind.DELETE:
        body = split_lines(patch.content or "")
        head = [f"--- {src}\n", "+++ /dev/null\n"]
        if not body:
            return "".join(head)
        return "".join(head + [f"@@ -1,{len(body)} +0,0 @@\n"] + _render_lines("-", body))
    out = [f"--- {src}\n", f"+++ {dst}\n"]
    for h in patch.hunks:
        out.append(f"@@ -{h.old_start},{h.old_len} +{h.new_start},{h.new_len} @@{h.section}\n")
        for ln in h.lines:
            out.extend(_render_lines(ln.tag, [ln.value]))
    return "".join(out)


# ---------------------------------------------------------------- apply_patch envelopes


_ENVELOPE_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")
_ENVELOPE_MOVE = "*** Move to: "
_ENVELOPE_MARKERS = ("*** Begin Patch", "*** End Patch", "*** End of File")


@attrs.frozen
class EnvelopeFile:
    """One file section of an ``apply_patch`` envelope — the patch *text* the model hands
    codex's ``apply_patch`` tool (``*** Begin Patch`` / ``*** Add File: p`` / ``+line`` …
    ``*** End Patch``), as opposed to the native change :func:`parse_change` reads.

    ``lines`` are the section's lines after its header, endings kept, without the ``*** Move
    to:`` line and the ``*** …`` markers. Parsed for display and matching only: never applied.
    """

    kind: Literal["add", "update", "delete"]
    path: str
    move_path: str | None = None
    lines: tuple[str, ...] = ()

    @property
    def added(self) -> int:
        """``+`` lines. The envelope has no ``---``/``+++`` file headers (its headers are
        ``*** `` lines), so ``+++x`` is the added line ``++x``."""
        return sum(1 for ln in self.lines if ln.startswith("+"))

    @property
    def removed(self) -> int:
        """``-`` lines (none for an added file)."""
        if self.kind == "add":
            return 0
        return sum(1 for ln in self.lines if ln.startswith("-"))

    @property
    def body(self) -> str:
        """The section as written (hunk lines of an update)."""
        return "".join(self.lines)

    @property
    def content(self) -> str:
        """The text of an added file: its lines without their ``+``."""
        return "".join(ln[1:] if ln.startswith("+") else ln for ln in self.lines)


def parse_apply_patch(text: str) -> tuple[EnvelopeFile, ...]:
    """The file sections of an ``apply_patch`` envelope, in order; ``()`` when ``text`` holds
    none. Lenient, because it reads what a model wrote: text before the first file header is
    ignored, and nothing raises. Lines split on ``\\n`` only (:func:`split_lines`); a header
    line's trailing ``\\r`` is ignored, the body keeps its endings."""
    out: list[EnvelopeFile] = []
    head: tuple[Any, str] | None = None  # (kind, path) of the open section
    move: str | None = None
    lines: list[str] = []
    for line in split_lines(text):
        bare = line.rstrip("\r\n")
        m = _ENVELOPE_FILE.match(bare)
        if m:
            if head is not None:
                out.append(EnvelopeFile(head[0], head[1], move, tuple(lines)))
            head, move, lines = (m[1].lower(), m[2].strip()), None, []
            continue
        if head is None or bare.startswith(_ENVELOPE_MARKERS):
            continue
        if bare.startswith(_ENVELOPE_MOVE):
            move = bare[len(_ENVELOPE_MOVE) :].strip() or None
        else:
            lines.append(line)
    if head is not None:
        out.append(EnvelopeFile(head[0], head[1], move, tuple(lines)))
    return tuple(out)
