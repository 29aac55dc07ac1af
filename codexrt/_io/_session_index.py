"""Session index cache for the legacy thread list (R-H-9, R-H-6).

The legacy list (rollout files under ``CODEX_HOME/sessions``, used when access is inactive)
needs, per file, what only its first lines say: the thread's ``session_meta`` (id, ``source``,
cwd, cli version, history mode) and a title from the first real user message. Reading every
file head on every listing is slow for a large home, so :class:`SessionIndex` keeps one entry
per file and re-reads a file only when it changed.

Rules:

* **Versioned.** The cache carries :data:`SESSION_INDEX_VERSION` (10, the original's current
  version). A cache of any other version — or one that does not decode — is rebuilt whole:
  that is how titles built by an older version (an attachment list in the title) are rebuilt
  with today's sanitizer.
* **Stale entries.** An entry is reused only while its file's ``(mtime_ns, size)`` is the
  same; a changed file is read again, a vanished one dropped, a new one read.
* **Sources.** ``session_meta.source`` decides what a file is: a plain client source
  (``cli``, ``vscode``, ``exec``, ``mcp``…) is a top-level thread; any ``subagent`` source
  (``review``, ``compact``, ``thread_spawn`` with its parent, ``other``) is a sub-agent; a
  source naming ``guardian`` (the internal auto-approval reviewer) is ``guardian``. Only
  top-level threads are listed (:meth:`SessionIndex.top_level`).
* **Where.** In memory for the process by default. A file is written only when a path is
  given (``SessionIndex(home, path=…)``), or — for :func:`shared_index` — when
  ``$CODEXRT_STATE_DIR`` is set (then ``$CODEXRT_STATE_DIR/session-index-<hash of home>.json``,
  written atomically, mode 0600). Nothing else is written.

Reading a head is bounded (:data:`HEAD_LINES` lines, :data:`HEAD_BYTES` bytes — at most that
many bytes are read, however long the first line is); a file whose head has no
``session_meta`` is still listed (top-level, no title). A head line that is nested too deeply
to decode, or longer than the head, is skipped and the entry carries a ``problem`` (one notice
per file); files that are not regular files are never opened (see
:mod:`codexrt._io._history_files`). :meth:`SessionIndex.refresh` with a ``limit`` stops reading
heads once that many top-level threads are found (a list of 50 out of 20,000 rollouts reads
the ``stat`` of every file but only the first heads). Blocking; run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import msgspec

from codexrt._io._history_files import find_rollouts, open_regular
from codexrt._io._private import replace_private_file
from codexrt._sansio._sanitize import sanitize_user_text

__all__ = ["SESSION_INDEX_VERSION", "SessionEntry", "SessionIndex", "shared_index", "source_kind"]

#: The cache format/content version (the original's SessionIndexManager is at v10).
SESSION_INDEX_VERSION = 10
#: Bounds of one head read.
HEAD_LINES = 200
HEAD_BYTES = 1024 * 1024
_TITLE_MAX = 200

_CONTEXT_PREFIXES = ("<environment_context", "# AGENTS.md instructions", "<user_instructions", "<permissions",
                     "<skills_instructions", "<turn_aborted", "<subagent_notification", "<user_shell_command")


def source_kind(source: Any) -> tuple[str, str | None]:
    """``(kind, parent_thread_id)`` of a ``session_meta.source``: ``top``, ``subagent`` or
    ``guardian`` (R-H-9)."""
    try:
        text = msgspec.json.encode(source).decode().lower() if source is not None else ""
    except (RecursionError, TypeError, ValueError):
        text = ""
    if "guardian" in text:
        return "guardian", None
    if isinstance(source, dict) and any(str(k).lower() in ("subagent", "sub_agent") for k in source):
        sub = next(v for k, v in source.items() if str(k).lower() in ("subagent", "sub_agent"))
        parent = None
        if isinstance(sub, dict):
            spawn = sub.get("thread_spawn")
            if isinstance(spawn, dict) and isinstance(spawn.get("parent_thread_id"), str):
                parent = spawn["parent_thread_id"]
        return "subagent", parent
    if isinstance(source, str) and source.lower().startswith("subagent"):
        return "subagent", None
    return "top", None


@attrs.frozen
class SessionEntry:
    """What the index knows about one rollout file."""

    path: str
    mtime_ns: int
    size: int
    thread_id: str
    kind: str = "top"  # top | subagent | guardian
    source: Any = None
    parent_thread_id: str | None = None
    title: str | None = None
    cwd: str | None = None
    cli_version: str | None = None
    history_mode: str | None = None
    created_at: str | None = None
    problem: str | None = None  # why (part of) the head could not be read: one notice for this file

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False)  # values are JSON already; never walk a hostile `source`


def _title(text: str) -> str | None:
    if text.lstrip().startswith(_CONTEXT_PREFIXES):
        return None
    t = sanitize_user_text(text).text.strip()
    if not t:
        return None
    line = t.splitlines()[0].strip()
    return line[:_TITLE_MAX]


def decode_line(raw: bytes) -> tuple[Any, str | None]:
    """One JSON line of a ``CODEX_HOME`` file: ``(value, None)``, or ``(None, problem)`` for a
    line that does not decode (``problem`` is ``"nested too deeply"`` for a line msgspec refuses
    with a RecursionError — the only problem worth a notice; plain garbage is ``"invalid"``)."""
    try:
        return msgspec.json.decode(raw), None
    except RecursionError:
        return None, "nested too deeply"
    except msgspec.DecodeError:
        return None, "invalid"


_HEAD_CHUNK = 64 * 1024


def _head_lines(f: BinaryIO) -> Iterator[tuple[int, bytes | str]]:
    """The first complete lines of ``f`` (``(line_no, bytes)``), read in small chunks: at most
    :data:`HEAD_BYTES` bytes in all (a line still unfinished at the bound is never decoded); a
    problem string is yielded (instead of a line) when the very first line exceeds the bound."""
    buf, total = b"", 0
    n = 0
    while total <= HEAD_BYTES:
        chunk = f.read(min(_HEAD_CHUNK, HEAD_BYTES + 1 - total))
        if not chunk:
            if buf:
                yield n, buf
            return
        total += len(chunk)
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield n, line
            n += 1
    if n == 0:
        yield n, f"its first line is longer than {HEAD_BYTES} bytes; listed without its metadata"


def read_head(path: Path, thread_id: str, mtime_ns: int, size: int) -> SessionEntry:
    """The entry of one rollout file from its first lines: at most :data:`HEAD_BYTES` bytes are
    read, in small chunks and only until the ``session_meta`` and a title are found (a longer
    first line is never loaded whole), and at most :data:`HEAD_LINES` lines decoded."""
    meta: dict[str, Any] = {}
    title: str | None = None
    problem: str | None = None
    try:
        with open_regular(path) as f:
            for n, raw in _head_lines(f):
                if n >= HEAD_LINES:
                    break
                if isinstance(raw, str):
                    problem = raw
                    break
                if not raw.strip():
                    continue
                d, bad = decode_line(raw)
                if bad == "nested too deeply" and problem is None:
                    problem = f"line {n + 1} is nested too deeply to read; it was skipped"
                if not isinstance(d, dict) or not isinstance(d.get("payload"), dict):
                    continue
                p = d["payload"]
                if d.get("type") == "session_meta" and not meta:
                    meta = p
                elif d.get("type") == "event_msg" and p.get("type") == "user_message" and title is None:
                    if isinstance(p.get("message"), str):
                        title = _title(p["message"])
                elif (d.get("type") == "response_item" and p.get("type") == "message" and p.get("role") == "user"
                      and title is None):
                    text = "".join(b.get("text", "") for b in p.get("content") or () if isinstance(b, dict)
                                   and isinstance(b.get("text"), str))
                    title = _title(text)
                if meta and title is not None:
                    break
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or exc})"
    kind, parent = source_kind(meta.get("source"))
    if parent is None and isinstance(meta.get("parent_thread_id"), str):
        parent = meta["parent_thread_id"]

    def s(k: str) -> str | None:
        v = meta.get(k)
        return v if isinstance(v, str) else None

    return SessionEntry(str(path), mtime_ns, size, (s("id") or thread_id).lower(), kind, meta.get("source"), parent,
                        title, s("cwd"), s("cli_version"), s("history_mode"), s("timestamp"), problem)


@attrs.define
class IndexStats:
    rebuilt: bool = False
    scanned: int = 0
    reused: int = 0
    dropped: int = 0


class SessionIndex:
    """The per-file index of one ``CODEX_HOME`` (module doc). :meth:`refresh` brings it up to
    date with the files and returns every entry, newest first."""

    def __init__(self, codex_home: str | os.PathLike[str], *, path: str | os.PathLike[str] | None = None) -> None:
        self.codex_home = Path(codex_home)
        self.path = Path(path) if path is not None else None
        self._entries: dict[str, SessionEntry] | None = None
        self._lock = threading.Lock()
        self.stats = IndexStats()

    def _load(self) -> dict[str, SessionEntry] | None:
        """The cached entries, or ``None`` when the cache must be rebuilt (missing, damaged,
        another version, another home)."""
        if self._entries is not None:
            return self._entries
        if self.path is None:
            return None
        try:
            with open_regular(self.path) as f:
                data = msgspec.json.decode(f.read())
        except (OSError, ValueError, RecursionError):
            return None
        if (not isinstance(data, dict) or data.get("version") != SESSION_INDEX_VERSION
                or data.get("codexHome") != str(self.codex_home) or not isinstance(data.get("entries"), list)):
            return None
        out: dict[str, SessionEntry] = {}
        for e in data["entries"]:
            try:
                entry = SessionEntry(**e)
            except TypeError:
                return None
            out[entry.path] = entry
        return out

    def _save(self, entries: dict[str, SessionEntry]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            body = msgspec.json.encode({"version": SESSION_INDEX_VERSION, "codexHome": str(self.codex_home),
                                        "entries": [e.to_json() for e in entries.values()]})
        except RecursionError:
            return  # a source nested too deeply to write back: this run is only slower, never wrong
        replace_private_file(str(self.path), body, prefix=".session-index-")

    def refresh(self, *, limit: int | None = None, notices: list[str] | None = None) -> list[SessionEntry]:
        """Every entry, newest first. ``limit``: stop reading heads once that many top-level
        entries are found (the entries of files not reached keep their cached state and are
        checked when a later refresh reaches them). ``notices``: one line per skipped file or
        per file whose head had a problem."""
        with self._lock:
            cached = self._load()
            stats = IndexStats(rebuilt=cached is None)
            cached = cached or {}
            fresh: dict[str, SessionEntry] = {}
            order: list[str] = []
            top = 0
            infos = find_rollouts(self.codex_home, notices=notices)
            for i, info in enumerate(infos):
                if limit is not None and top >= limit:
                    fresh.update((k, cached[k]) for k in (str(r.path) for r in infos[i:]) if k in cached)
                    break
                key = str(info.path)
                old = cached.get(key)
                if old is not None and (old.mtime_ns, old.size) == (info.mtime_ns, info.size):
                    fresh[key] = old
                    stats.reused += 1
                else:
                    fresh[key] = read_head(info.path, info.thread_id, info.mtime_ns, info.size)
                    stats.scanned += 1
                if fresh[key].problem is not None and notices is not None:
                    notices.append(f"{key}: {fresh[key].problem}")
                top += fresh[key].kind == "top"
                order.append(key)
            else:
                stats.dropped = len(set(cached) - set(fresh))
            changed = stats.rebuilt or stats.scanned or stats.dropped
            self._entries = fresh
            self.stats = stats
            if changed:
                try:
                    self._save(fresh)
                except OSError:
                    pass  # a cache that cannot be written is only slower, never wrong
            return [fresh[k] for k in order]

    def top_level(self, *, limit: int | None = None, notices: list[str] | None = None) -> list[SessionEntry]:
        """Entries of top-level threads only (at most ``limit``): sub-agent and Guardian
        rollouts are filtered out by their ``session_meta`` source (R-H-9)."""
        out = [e for e in self.refresh(limit=limit, notices=notices) if e.kind == "top"]
        return out if limit is None else out[:limit]


_SHARED: dict[str, SessionIndex] = {}
_SHARED_LOCK = threading.Lock()


def shared_index(codex_home: str | os.PathLike[str]) -> SessionIndex:
    """The process's index of ``codex_home``: in memory, persisted under ``$CODEXRT_STATE_DIR``
    only when that variable is set (an explicit opt-in)."""
    home = str(Path(codex_home))
    state = os.environ.get("CODEXRT_STATE_DIR")
    path = None
    if state:
        digest = hashlib.sha256(os.path.abspath(home).encode("utf-8")).hexdigest()[:20]
        path = Path(state) / f"session-index-{digest}.json"
    key = f"{home}\0{path}"
    with _SHARED_LOCK:
        idx = _SHARED.get(key)
        if idx is None:
            idx = _SHARED[key] = SessionIndex(home, path=path)
        return idx
