"""Blocking file helpers for rollout files (R-H-3): find them, stream them.

Plain blocking I/O on purpose: the Trio history reader runs these in a worker thread
(``trio.to_thread.run_sync``) and keeps the sans-IO parser on its side; the CLI and tests call
them directly. Reading is strictly read-only and streaming: a file of hundreds of MB is read in
``chunk_size`` pieces and never held whole.

Where files live (research §11): ``CODEX_HOME/sessions/YYYY/MM/DD/rollout-<stamp>-<uuid>.jsonl``
(and ``CODEX_HOME/archived_sessions/`` for archived threads, flat or dated). The thread id is the
trailing UUID of the file name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from codexrt._sansio._legacy import LegacyParser, LegacyRecord

__all__ = ["RolloutInfo", "find_rollouts", "find_rollout", "iter_rollout", "DEFAULT_CHUNK_SIZE"]

#: Bytes read (and fed to the parser) at a time. Small on purpose: a chunk's records are alive
#: together until the caller takes them, and Python's cyclic GC walks every live container on
#: each collection — 32 KiB chunks parse a large rollout about twice as fast as 256 KiB ones.
DEFAULT_CHUNK_SIZE = 32 * 1024

_NAME_RE = re.compile(
    r"^rollout-(?P<stamp>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-"
    r"(?P<id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.jsonl$"
)


@attrs.frozen
class RolloutInfo:
    """One rollout file. ``started`` is the file name's local stamp (``YYYY-MM-DDTHH-MM-SS``);
    ``mtime`` is seconds since the epoch; ``archived`` when found under ``archived_sessions``."""

    path: Path
    thread_id: str
    started: str
    mtime: float
    size: int
    archived: bool = False


def _scan(root: Path, archived: bool, out: list[RolloutInfo]) -> None:
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            m = _NAME_RE.match(name)
            if m is None:
                continue
            p = Path(dirpath) / name
            try:
                st = p.stat()
            except OSError:
                continue  # vanished between listing and stat
            out.append(RolloutInfo(p, m["id"].lower(), m["stamp"], st.st_mtime, st.st_size, archived))


def find_rollouts(codex_home: str | os.PathLike[str], *, include_archived: bool = False) -> list[RolloutInfo]:
    """Every rollout under ``codex_home``, newest first (by mtime, then name).

    Files whose names do not carry a thread id are ignored. Never raises for a missing
    ``sessions`` directory (an empty list: no legacy history).
    """
    home = Path(codex_home)
    out: list[RolloutInfo] = []
    _scan(home / "sessions", False, out)
    if include_archived:
        _scan(home / "archived_sessions", True, out)
    out.sort(key=lambda r: (r.mtime, r.path.name), reverse=True)
    return out


def find_rollout(
    codex_home: str | os.PathLike[str], thread_id: str, *, include_archived: bool = True
) -> RolloutInfo | None:
    """The newest rollout file of ``thread_id``, or ``None``."""
    tid = thread_id.lower()
    for info in find_rollouts(codex_home, include_archived=include_archived):
        if info.thread_id == tid:
            return info
    return None


def iter_rollout(
    path: str | os.PathLike[str],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    parser: LegacyParser | None = None,
) -> Iterator[LegacyRecord]:
    """Stream the records of one rollout file, in order.

    Pass your own ``parser`` to read its ``stats`` / ``problems`` / ``session_meta`` afterwards.
    Memory: one chunk plus the longest line (bounded by the parser's ``max_line``).
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    p = parser if parser is not None else LegacyParser()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                break
            yield from p.feed(chunk)
    yield from p.close()
