"""Blocking file helpers for rollout files (R-H-3): find them, stream them.

Plain blocking I/O on purpose: the Trio history reader runs these in a worker thread
(``trio.to_thread.run_sync``) and keeps the sans-IO parser on its side; the CLI and tests call
them directly. Reading is strictly read-only and streaming: a file of hundreds of MB is read in
``chunk_size`` pieces and never held whole.

Where files live (research §11): ``CODEX_HOME/sessions/YYYY/MM/DD/rollout-<stamp>-<uuid>.jsonl``
(and ``CODEX_HOME/archived_sessions/`` for archived threads, flat or dated). The thread id is the
trailing UUID of the file name.

Hostile homes (issue 32): a ``CODEX_HOME`` may hold anything. Only **regular files** are read:
the scan uses ``lstat`` and skips FIFOs, devices and directories named like rollouts, and a
symlink (file or directory) is followed only when its target stays inside the real
``CODEX_HOME``; every file is opened by :func:`open_regular` (``O_NOFOLLOW | O_NONBLOCK``, then
``fstat`` must say regular file), so a FIFO or device swapped in after the scan is refused
instead of hanging or streaming forever. Each skipped entry is one notice (``notices=``).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from codexrt._sansio._legacy import LegacyParser, LegacyRecord

__all__ = ["RolloutInfo", "find_rollouts", "find_rollout", "iter_rollout", "open_regular", "DEFAULT_CHUNK_SIZE"]

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
    ``mtime`` is seconds since the epoch (``mtime_ns`` the same in nanoseconds, as ``stat`` gave
    it); ``archived`` when found under ``archived_sessions``."""

    path: Path
    thread_id: str
    started: str
    mtime: float
    size: int
    archived: bool = False
    mtime_ns: int = 0


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a file of ``CODEX_HOME`` (a rollout, ``session_index.jsonl``) for reading, refusing
    anything but a regular file: the last path component must not be a symlink
    (``O_NOFOLLOW``), the open never blocks on a FIFO
    (``O_NONBLOCK``), and ``fstat`` of what was opened must say *regular file* — so a device
    (``/dev/zero``) or a FIFO is an :class:`OSError` naming what it is, never a hang or an endless
    read."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{_kind(st.st_mode)}, not a regular file", os.fspath(path))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _scan(root: Path, real_home: str, archived: bool, out: list[RolloutInfo], notices: list[str] | None) -> None:
    def notice(text: str) -> None:
        if notices is not None:
            notices.append(text)

    if not root.is_dir():
        return
    if not _inside(os.path.realpath(root), real_home):
        notice(f"skipped {root}: a symlink leading outside CODEX_HOME")
        return
    for dirpath, dirnames, filenames in os.walk(root):  # never descends into symlinked directories
        dirnames.sort()
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                notice(f"skipped {os.path.join(dirpath, name)}: a symlinked directory is not followed")
        for name in filenames:
            m = _NAME_RE.match(name)
            if m is None:
                continue
            p = Path(dirpath) / name
            try:
                st = p.lstat()
                if stat.S_ISLNK(st.st_mode):
                    real = os.path.realpath(p)
                    if not _inside(real, real_home):
                        notice(f"skipped {p}: a symlink leading outside CODEX_HOME")
                        continue
                    p, st = Path(real), os.stat(real)
            except OSError:
                continue  # vanished between listing and stat, or a dangling link
            if not stat.S_ISREG(st.st_mode):
                notice(f"skipped {p}: {_kind(st.st_mode)}, not a regular file")
                continue
            out.append(RolloutInfo(p, m["id"].lower(), m["stamp"], st.st_mtime, st.st_size, archived, st.st_mtime_ns))


def find_rollouts(codex_home: str | os.PathLike[str], *, include_archived: bool = False,
                  notices: list[str] | None = None) -> list[RolloutInfo]:
    """Every rollout under ``codex_home``, newest first (by mtime, then name).

    Files whose names do not carry a thread id are ignored. Never raises for a missing
    ``sessions`` directory (an empty list: no legacy history). Entries that are not regular
    files, or symlinks leading outside ``codex_home``, are skipped — one line each appended to
    ``notices`` when given (module doc). Cost: one ``lstat`` per entry, no file is opened.
    """
    home = Path(codex_home)
    real_home = os.path.realpath(home)
    out: list[RolloutInfo] = []
    _scan(home / "sessions", real_home, False, out, notices)
    if include_archived:
        _scan(home / "archived_sessions", real_home, True, out, notices)
    out.sort(key=lambda r: (r.mtime_ns, r.path.name), reverse=True)
    return out


def find_rollout(
    codex_home: str | os.PathLike[str], thread_id: str, *, include_archived: bool = True,
    notices: list[str] | None = None,
) -> RolloutInfo | None:
    """The newest rollout file of ``thread_id``, or ``None``. ``notices`` receives the entries
    the scan skipped that are named for this thread (so a caller can say *why* there is none)."""
    tid = thread_id.lower()
    skipped: list[str] = []
    found = None
    for info in find_rollouts(codex_home, include_archived=include_archived, notices=skipped):
        if info.thread_id == tid:
            found = info
            break
    if notices is not None:
        notices.extend(n for n in skipped if tid in n.lower())
    return found


def iter_rollout(
    path: str | os.PathLike[str],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    parser: LegacyParser | None = None,
) -> Iterator[LegacyRecord]:
    """Stream the records of one rollout file, in order.

    Pass your own ``parser`` to read its ``stats`` / ``problems`` / ``session_meta`` afterwards.
    Memory: one chunk plus the longest line (bounded by the parser's ``max_line``). A path that
    is not a regular file raises :class:`OSError` before anything is read (:func:`open_regular`).
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    p = parser if parser is not None else LegacyParser()
    with open_regular(path) as f:
        while True:
            chunk = f.read(chunk_size)
            if not chunk:
                break
            yield from p.feed(chunk)
    yield from p.close()
