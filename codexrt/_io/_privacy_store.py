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
from typing import Mapping

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

__all__ = ["PrivacyStore", "default_privacy_dir"]


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

    def load(self) -> PrivacyIndex:
        """Read every record of this scope (and the legacy file). A corrupt file makes the index
        conservative, and that is persisted with a marker file so it survives later writes."""
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
