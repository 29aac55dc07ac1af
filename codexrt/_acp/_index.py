"""Which codex thread each ACP session stands for, kept across agent processes.

An ACP client asks for a session id at ``session/new``, before anything was said; codex has a
thread only once a turn ran (a thread without a turn has no rollout and cannot be resumed,
``docs/runtime.md``). So ``session/new`` mints the id, and the thread the first prompt creates
is recorded against it here, as soon as its id is known — so ``session/load`` of that id works
in a later process too (a killed agent's session loads). A session id that is not in the index
is taken as a thread id (``session/list`` lists codex threads under their own id).

The file (``<state dir>/acp/sessions.json``, the state dir of ``docs/edits.md``:
``$CODEXRT_STATE_DIR``, else ``$XDG_STATE_HOME/codexrt``, else ``~/.local/state/codexrt``) is
private (0600 in a 0700 directory, ``codexrt._io._private``), replaced atomically, and bounded:
the oldest entries beyond :data:`MAX_ENTRIES` are dropped. A missing or unreadable file is an
empty index (logged), never an error of the request that reads it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from codexrt._io._private import ensure_private_dir, replace_private_file

__all__ = ["SessionIndex", "default_index_path", "MAX_ENTRIES"]

log = logging.getLogger("codexrt.acp")

MAX_ENTRIES = 5000


def default_index_path(state_dir: str | None = None) -> str:
    if state_dir is None:
        state_dir = os.environ.get("CODEXRT_STATE_DIR") or os.path.join(
            os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "codexrt")
    return os.path.join(state_dir, "acp", "sessions.json")


class SessionIndex:
    """session id → ``{threadId, cwd, createdAt}``. Blocking file I/O: call from a worker
    thread (the agent does). ``path`` empty: kept in memory only (sessions then load only in
    this process) and cheap enough to call from the event loop."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] | None = None

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is not None:
            return self._entries
        entries: dict[str, dict[str, Any]] = {}
        if not self.path:
            self._entries = entries
            return entries
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
            raw = data.get("sessions") if isinstance(data, dict) else None
            if isinstance(raw, dict):
                entries = {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, dict)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.warning("ACP session index %s is unreadable (%s); starting an empty one", self.path,
                        type(exc).__name__)
        self._entries = entries
        return entries

    def get(self, session_id: str) -> dict[str, Any] | None:
        entry = self._load().get(session_id)
        return dict(entry) if entry is not None else None

    def session_of_thread(self, thread_ids: list[str]) -> dict[str, str]:
        """thread id → the session id recorded for it (only threads that have one)."""
        wanted = set(thread_ids)
        return {e["threadId"]: sid for sid, e in self._load().items() if e.get("threadId") in wanted}

    def put(self, session_id: str, *, thread_id: str | None, cwd: str) -> None:
        entries = self._load()
        old = entries.pop(session_id, None) or {}
        entries[session_id] = {"threadId": thread_id, "cwd": cwd, "createdAt": old.get("createdAt", int(time.time()))}
        while len(entries) > MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        self._save(entries)

    def _save(self, entries: dict[str, dict[str, Any]]) -> None:
        if not self.path:
            return
        directory = os.path.dirname(self.path)
        try:
            ensure_private_dir(directory, owned=2)
            replace_private_file(self.path, json.dumps({"version": 1, "sessions": entries}, separators=(",", ":")),
                                 prefix=".sessions-")
        except OSError as exc:
            log.warning("ACP session index %s not written (%s): sessions of this process will not load in "
                        "another one", self.path, exc.strerror or type(exc).__name__)
