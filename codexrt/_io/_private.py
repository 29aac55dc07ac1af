"""Private files: what codexrt writes for itself holds private data (issue 18, R-PRIV-1).

The edit store (review checkpoints, undone keys, every edited path of a workspace) and the
privacy index (which answers were secret) say what a user worked on. On a machine with other
accounts they must not be readable by them, whatever the process umask is: every directory
codexrt creates for them is 0700 and every file 0600. Directories codexrt creates are created
0700 component by component (``os.makedirs(mode=...)`` only applies the mode to the last one);
codexrt's own leaf directories and files found with group or other bits (written by an older
version) are tightened. Directories that already existed and are not codexrt's own (``~``,
``~/.local/state``) are left alone.

SQLite creates its ``-journal``, ``-wal`` and ``-shm`` files with the mode of the database
file, so a 0600 database keeps them 0600 too (tests/sansio/test_private_files.py checks it).
"""

from __future__ import annotations

import os
import stat

__all__ = ["DIR_MODE", "FILE_MODE", "ensure_private_dir", "ensure_private_file", "replace_private_file"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def ensure_private_dir(path: str, *, owned: int = 1) -> None:
    """Make directory ``path`` exist: every missing component is created 0700; the last
    ``owned`` components (codexrt's own directories) are tightened to 0700 if they allow group
    or other access. Raises ``OSError``."""
    path = os.path.abspath(path)
    missing: list[str] = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(d, DIR_MODE)  # mkdir's mode was masked by the umask; make it exact
    p = path
    for _ in range(max(owned, 0)):
        st = os.stat(p)
        # never a shared directory (sticky bit, like /tmp) and never someone else's
        if stat.S_IMODE(st.st_mode) & 0o077 and st.st_uid == os.geteuid() and not st.st_mode & stat.S_ISVTX:
            os.chmod(p, stat.S_IMODE(st.st_mode) & DIR_MODE)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent


def ensure_private_file(path: str) -> None:
    """Create file ``path`` 0600 if it is missing; tighten it to 0600 if it allows group or
    other access. Never follows a symbolic link at ``path``. Raises ``OSError``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        st = os.fstat(fd)
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & FILE_MODE)
    finally:
        os.close(fd)


def replace_private_file(path: str, text: str | bytes, *, prefix: str = ".tmp-") -> None:
    """Replace file ``path`` with ``text`` (UTF-8 when a ``str``) atomically (a temporary file in the same directory,
    0600, renamed over it): a reader sees the old or the new content, never a part. Raises
    ``OSError`` (the temporary file is removed)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=os.path.dirname(path) or ".")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
