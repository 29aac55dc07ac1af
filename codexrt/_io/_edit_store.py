"""The edit ledger's records and its sqlite store (R-EDIT-1, R-EDIT-2).

Records: :class:`EditKey` ``(thread, turn, item, path)``, :class:`EditEntry` (the parsed
patch, kind, native status and the frozen cwd of the submission), :class:`ReviewTicket`,
:class:`Checkpoint` and :class:`UndoReceipt`. Store: :class:`EditStore`, a small sqlite file
per workspace (:func:`default_store_path`) outside the workspace itself; every decision is one
transaction. The ledger that uses them, and the overview, are in :mod:`codexrt._io._edits`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any

import attrs

from codexrt._sansio._errors import EditStoreError, ReviewStale
from codexrt._io._private import ensure_private_dir, ensure_private_file
from codexrt._sansio._patch import ChangeKind, FileOp, FilePatch

__all__ = [
    "EditKey",
    "EditEntry",
    "ReviewTicket",
    "Checkpoint",
    "UndoReceipt",
    "EditStore",
    "default_store_path",
]


# ------------------------------------------------------------------------------ records


@attrs.frozen(order=True)
class EditKey:
    """Operation identity of one file's change (R-EDIT-1). ``path`` is the native path
    string of the change (the source path for a move)."""

    thread_id: str
    turn_id: str
    item_id: str
    path: str

    def to_dict(self) -> dict[str, str]:
        return {
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "itemId": self.item_id,
            "path": self.path,
        }

    def to_json(self) -> str:
        return json.dumps([self.thread_id, self.turn_id, self.item_id, self.path])

    @classmethod
    def from_json(cls, s: str) -> EditKey:
        t, u, i, p = json.loads(s)
        return cls(t, u, i, p)


def _resolve(cwd: str, path: str) -> str:
    return os.path.normpath(os.path.join(cwd, path))


@attrs.frozen
class EditEntry:
    """One file's change as the ledger knows it.

    ``patch`` is ``None`` when the native change could not be parsed (``parse_error`` says
    why): such an entry is listed but can't be undone. ``status`` is the native
    ``PatchApplyStatus`` (``inProgress``/``completed``/``failed``/``declined``); only
    ``completed`` changes are on disk and undoable. ``origin`` is ``live`` or ``history``.
    """

    key: EditKey
    patch: FilePatch | None
    status: str
    cwd: str
    origin: str
    seq: int
    parse_error: str | None = None

    @property
    def kind(self) -> ChangeKind | None:
        return self.patch.kind if self.patch else None

    @property
    def target(self) -> str:
        """Absolute path of the file after the change (resolved against the frozen cwd)."""
        return _resolve(self.cwd, self.patch.target if self.patch else self.key.path)

    @property
    def rename_source(self) -> str | None:
        src = self.patch.rename_source if self.patch else None
        return _resolve(self.cwd, src) if src is not None else None

    @property
    def paths(self) -> tuple[str, ...]:
        """Every absolute path this change touched."""
        src = self.rename_source
        return (self.target,) if src is None else (src, self.target)

    @property
    def added(self) -> int:
        return self.patch.added if self.patch else 0

    @property
    def removed(self) -> int:
        return self.patch.removed if self.patch else 0

    def absolute_patch(self) -> FilePatch:
        assert self.patch is not None
        p = self.patch
        mp = _resolve(self.cwd, p.move_path) if p.move_path is not None else None
        return attrs.evolve(p, path=_resolve(self.cwd, p.path), move_path=mp)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key.to_dict(),
            "kind": self.kind.value if self.kind else None,
            "nativeKind": self.patch.native_kind if self.patch else None,
            "status": self.status,
            "cwd": self.cwd,
            "target": self.target,
            "renameSource": self.rename_source,
            "added": self.added,
            "removed": self.removed,
            "origin": self.origin,
            "parseError": self.parse_error,
        }


@attrs.frozen
class ReviewTicket:
    """A change opened for review, frozen at that moment (R-EDIT-2)."""

    ticket_id: str
    keys: tuple[EditKey, ...]
    target: str
    rename_source: str | None
    session_id: str | None
    provider: str | None
    opened_at: float


@attrs.frozen
class Checkpoint:
    """A decided review of one ledger key in one session."""

    session_id: str
    key: EditKey
    decision: str  # "accepted" | "rejected"
    ticket_id: str
    target: str
    rename_source: str | None
    provider: str | None
    decided_at: float


@attrs.frozen
class UndoReceipt:
    """What an undo did (or, with ``dry_run``, would do). ``keys`` are exactly the keys
    undone; ``ops`` the absolute writes (``content is None`` = removed); ``reverse_diff``
    the reverse patch as a unified diff."""

    keys: tuple[EditKey, ...]
    dry_run: bool
    reverse_diff: str
    ops: tuple[FileOp, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "keys": [k.to_dict() for k in self.keys],
            "dryRun": self.dry_run,
            "reverseDiff": self.reverse_diff,
            "ops": [
                {"path": op.path, "action": "delete" if op.content is None else "write"}
                for op in self.ops
            ],
        }


# ------------------------------------------------------------------------------ store


def default_store_path(workspace: str, *, state_dir: str | None = None) -> str:
    """Where the store of ``workspace`` lives: ``<state_dir>/workspaces/edits-<hash>.sqlite3``.

    ``state_dir`` defaults to ``$CODEXRT_STATE_DIR``, else ``$XDG_STATE_HOME/codexrt``, else
    ``~/.local/state/codexrt``. The workspace path is made absolute before hashing.
    """
    if state_dir is None:
        state_dir = os.environ.get("CODEXRT_STATE_DIR") or os.path.join(
            os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "codexrt"
        )
    digest = hashlib.sha256(os.path.abspath(workspace).encode("utf-8")).hexdigest()[:20]
    return os.path.join(state_dir, "workspaces", f"edits-{digest}.sqlite3")


_SCHEMA = """
CREATE TABLE IF NOT EXISTS tickets (
    ticket_id TEXT PRIMARY KEY, keys TEXT NOT NULL, target TEXT NOT NULL, rename_source TEXT,
    session_id TEXT, provider TEXT, opened_at REAL NOT NULL, state TEXT NOT NULL,
    decided_at REAL);
CREATE TABLE IF NOT EXISTS checkpoints (
    session_id TEXT NOT NULL, ledger_key TEXT NOT NULL, decision TEXT NOT NULL,
    ticket_id TEXT NOT NULL, target TEXT NOT NULL, rename_source TEXT, provider TEXT,
    decided_at REAL NOT NULL, PRIMARY KEY (session_id, ledger_key));
CREATE TABLE IF NOT EXISTS undone (
    ledger_key TEXT PRIMARY KEY, undone_at REAL NOT NULL);
"""


class EditStore:
    """A small sqlite store of review tickets, checkpoints and undone keys.

    Every mutation is one transaction (all or nothing). Thread-safe: undos run in worker
    threads. Use :meth:`for_workspace` for the per-workspace file, :meth:`memory` for a
    throwaway one.
    """

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            # Private data (which files of which workspace were edited): directories 0700, the
            # database 0600 before sqlite opens it (its -journal/-wal/-shm files follow the
            # database's mode). The default layout .../codexrt/workspaces/ owns both levels; a
            # $CODEXRT_STATE_DIR chosen by the user (it may be shared, e.g. /tmp) is not tightened.
            directory = os.path.dirname(os.path.abspath(path))
            own_both = (os.path.basename(directory) == "workspaces"
                        and os.path.basename(os.path.dirname(directory)) == "codexrt")
            try:
                ensure_private_dir(directory, owned=2 if own_both else 1)
                ensure_private_file(path)
            except OSError as exc:
                raise EditStoreError(
                    f"cannot create the edit store {path}: {exc.strerror or exc}",
                    details={"path": path},
                ) from exc
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise EditStoreError(
                f"cannot open the edit store {path}: {exc}", details={"path": path}
            ) from exc

    @classmethod
    def for_workspace(cls, workspace: str, *, state_dir: str | None = None) -> EditStore:
        return cls(default_store_path(workspace, state_dir=state_dir))

    @classmethod
    def memory(cls) -> EditStore:
        return cls(":memory:")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EditStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tx(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    cur.execute(sql, args)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._db.execute(sql, args))

    # tickets
    def insert_ticket(self, t: ReviewTicket) -> None:
        self._tx(
            [
                (
                    "INSERT INTO tickets VALUES (?,?,?,?,?,?,?,'open',NULL)",
                    (
                        t.ticket_id,
                        json.dumps([k.to_json() for k in t.keys]),
                        t.target,
                        t.rename_source,
                        t.session_id,
                        t.provider,
                        t.opened_at,
                    ),
                )
            ]
        )

    def get_ticket(self, ticket_id: str) -> tuple[ReviewTicket, str] | None:
        rows = self._query("SELECT * FROM tickets WHERE ticket_id=?", (ticket_id,))
        if not rows:
            return None
        tid, keys, target, src, sid, prov, opened, state, _ = rows[0]
        ticket = ReviewTicket(
            tid, tuple(EditKey.from_json(k) for k in json.loads(keys)), target, src, sid, prov, opened
        )
        return ticket, state

    def decide(self, t: ReviewTicket, decision: str, at: float) -> None:
        assert t.session_id is not None
        stmts: list[tuple[str, Sequence[Any]]] = [
            (
                "UPDATE tickets SET state=?, decided_at=? WHERE ticket_id=? AND state='open'",
                (decision, at, t.ticket_id),
            )
        ]
        for k in t.keys:
            stmts.append(
                (
                    "INSERT OR REPLACE INTO checkpoints VALUES (?,?,?,?,?,?,?,?)",
                    (
                        t.session_id,
                        k.to_json(),
                        decision,
                        t.ticket_id,
                        t.target,
                        t.rename_source,
                        t.provider,
                        at,
                    ),
                )
            )
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                cur.execute(*stmts[0])
                if cur.rowcount != 1:
                    raise ReviewStale(
                        f"review {t.ticket_id} is not open (unknown or already decided)",
                        details={"ticketId": t.ticket_id},
                    )
                for sql, args in stmts[1:]:
                    cur.execute(sql, args)
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def checkpoint(self, session_id: str, key: EditKey) -> Checkpoint | None:
        rows = self._query(
            "SELECT * FROM checkpoints WHERE session_id=? AND ledger_key=?",
            (session_id, key.to_json()),
        )
        if not rows:
            return None
        sid, k, decision, tid, target, src, prov, at = rows[0]
        return Checkpoint(sid, EditKey.from_json(k), decision, tid, target, src, prov, at)

    # undone keys
    def mark_undone(self, keys: Sequence[EditKey], at: float) -> None:
        self._tx(
            [("INSERT OR REPLACE INTO undone VALUES (?,?)", (k.to_json(), at)) for k in keys]
        )

    def undone_keys(self) -> set[EditKey]:
        return {EditKey.from_json(r[0]) for r in self._query("SELECT ledger_key FROM undone")}
