"""The privacy index on disk (R-PRIV-1): one scope of records, written atomically.

OS-facing and runtime-free: the runtime writes a record here (in a worker thread) before it
forwards an answer to ``item/tool/requestUserInput`` or an accepted MCP elicitation; the record's
content (identities and ``isSecret`` flags only) is built by ``codexrt._sansio._privacy``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Mapping

from codexrt._io._private import ensure_private_dir
from codexrt._sansio._privacy import (
    PrivacyIndex,
    PrivacyRecord,
    home_fingerprint,
    legacy_file_name,
    load_index,
    marker_file_name,
    record_file_name,
)

__all__ = ["PrivacyStore", "default_privacy_dir", "MAX_INLINE_ENTRIES"]

#: How many directory entries :meth:`PrivacyStore.cached_index` looks at on the caller's thread
#: before it gives up (the caller then loads on a worker thread): it must stay short.
MAX_INLINE_ENTRIES = 256


def default_privacy_dir(env: Mapping[str, str] | None = None) -> str:
    """``$CODEXRT_PRIVACY_DIR``, else ``$XDG_STATE_HOME/codexrt/privacy``, else
    ``~/.local/state/codexrt/privacy``."""
    env = os.environ if env is None else env
    if env.get("CODEXRT_PRIVACY_DIR"):
        return env["CODEXRT_PRIVACY_DIR"]
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "codexrt", "privacy")


class PrivacyStore:
    """One scope (home fingerprint) of the index in ``directory`` (created 0700).

    :meth:`write` is synchronous and blocking (call it in a thread): temp file (0600) in the
    same directory, write, fsync, rename to ``<fp>.record.<uuid>.json``, fsync the directory.
    A process killed at any point leaves either no record or a whole one, never a torn file
    under a record name (temp files are ignored by :meth:`load`)."""

    def __init__(self, directory: str, fingerprint: str) -> None:
        self.directory = directory
        self.fingerprint = fingerprint
        #: (the scope's files, the index read from them) of the last :meth:`load` that had a key
        self._held: tuple[tuple[tuple[Any, ...], ...], PrivacyIndex] | None = None

    @classmethod
    def for_home(cls, directory: str, codex_home: str) -> "PrivacyStore":
        return cls(directory, home_fingerprint(codex_home))

    def __repr__(self) -> str:
        return f"<PrivacyStore {self.directory} scope={self.fingerprint}>"

    def _ensure_dir(self) -> None:
        ensure_private_dir(self.directory)  # every directory it creates 0700, not only the last

    def write(self, record: PrivacyRecord) -> str:
        self._ensure_dir()
        data = json.dumps(record.to_json(), separators=(",", ":"), sort_keys=True).encode()
        final = os.path.join(self.directory, record_file_name(self.fingerprint, record.record_id))
        fd, tmp = tempfile.mkstemp(prefix=f".{self.fingerprint}.", suffix=".tmp", dir=self.directory)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)
        try:
            os.rename(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):
            dfd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return final

    def _scope_files(self) -> tuple[tuple[Any, ...], ...] | None:
        """What :meth:`load` reads, as it is now: each record file of the scope as ``(name,
        st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` and the marker's name, sorted;
        ``()`` without a directory. None when that is not an exact key: the directory holds more
        than :data:`MAX_INLINE_ENTRIES` entries, the scope has a legacy file (rewritten in place,
        where a rewrite of the same size within one timestamp tick would not show), or a stat
        failed. Record files are never rewritten: :meth:`write` makes each one under a new
        uuid name, by rename (a new inode); the stat fields tell a file replaced under the same
        name."""
        prefix = f"{self.fingerprint}."
        wanted_prefix = f"{self.fingerprint}.record."
        marker, legacy = marker_file_name(self.fingerprint), legacy_file_name(self.fingerprint)
        files: list[tuple[Any, ...]] = []
        try:
            listing = os.scandir(self.directory)
        except FileNotFoundError:
            return ()  # what ``load`` reads then: nothing
        except OSError:
            return None
        try:
            with listing:
                for n, entry in enumerate(listing):
                    if n >= MAX_INLINE_ENTRIES:
                        return None
                    name = entry.name
                    if not name.startswith(prefix):
                        continue
                    if name == marker:
                        files.append((name,))
                    elif name == legacy:
                        return None
                    elif name.startswith(wanted_prefix) and name.endswith(".json"):
                        st = os.stat(entry.path)  # followed, as ``open`` in :meth:`load` does
                        files.append((name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        except OSError:  # a file gone or unreadable meanwhile: no key (``load`` sees what it sees)
            return None
        return tuple(sorted(files))

    def cached_index(self) -> PrivacyIndex | None:
        """The index the last :meth:`load` read, when the scope's files are still exactly the
        ones it read (issue 34: a history page then needs no worker thread); else None — call
        :meth:`load`. Runs on the caller's thread: a directory listing bounded by
        :data:`MAX_INLINE_ENTRIES` and a ``stat`` per record file of the scope, no file read."""
        held = self._held
        if held is None:
            return None
        files = self._scope_files()
        return held[1] if files is not None and files == held[0] else None

    def load(self) -> PrivacyIndex:
        """Read every record of this scope (and the legacy file). A corrupt file makes the index
        conservative, and that is persisted with a marker file so it survives later writes.
        The index is kept with the scope's files as they were *before* the read
        (:meth:`cached_index`): a file changed while it was read changes the next key."""
        files = self._scope_files()
        index = self._read()
        if files is not None:
            self._held = (files, index)
        return index

    def _read(self) -> PrivacyIndex:
        files: dict[str, bytes] = {}
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            names = []
        except OSError as exc:
            index = load_index(self.fingerprint, {}, marker=True)
            index.problems.append(f"index directory unreadable: {exc.strerror}")
            return index
        marker = marker_file_name(self.fingerprint) in names
        wanted_prefix = f"{self.fingerprint}.record."
        for name in names:
            if name == legacy_file_name(self.fingerprint) or (name.startswith(wanted_prefix) and name.endswith(".json")):
                try:
                    with open(os.path.join(self.directory, name), "rb") as fh:
                        files[name] = fh.read()
                except OSError:
                    files[name] = b"\0unreadable"
        index = load_index(self.fingerprint, files, marker=marker)
        if index.conservative and not marker:
            with contextlib.suppress(OSError):
                self._ensure_dir()
                fd = os.open(os.path.join(self.directory, marker_file_name(self.fingerprint)),
                             os.O_WRONLY | os.O_CREAT, 0o600)
                os.close(fd)
        return index
