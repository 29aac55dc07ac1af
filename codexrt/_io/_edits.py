# size: the edit ledger and its confined file I/O stay together: the crash-injection tests patch its I/O steps (_after_check, _fsync, _replace) in this module.
"""The edit ledger: every file Codex changed, review checkpoints, and safe per-file undo.

Theory of operation (R-EDIT-1..3)
---------------------------------
*Ledger.* An :class:`EditLedger` belongs to one session. It is fed native ``fileChange``
items — live (``item/started``/``item/completed`` via :meth:`EditLedger.record_notification`)
or from history (:meth:`EditLedger.record_history`) — and keeps one :class:`EditEntry` per
:class:`EditKey` ``(thread, turn, item, path)``: the parsed patch (``_sansio/_patch.py``), the
kind (add / delete / update / move with its source), the native status, and the **cwd of the
submission**, frozen the first time the key is seen. A later record of the same key (the
``completed`` after the ``inProgress``, or history after live) refreshes patch and status but
never the cwd: a later cwd change never retargets a write.

*Review checkpoints.* :meth:`EditLedger.open_review` freezes, at that moment, the absolute
target, the absolute rename source, the session id / provider and the ledger keys into a
:class:`ReviewTicket` (persisted as *open*). :meth:`accept`/:meth:`reject` write a
:class:`Checkpoint` for exactly those keys under the **ticket's** session — never the ledger's
current one, and a ticket frozen with ``session_id=None`` is refused rather than borrowing the
current session. Later edits of the same file are new keys and stay pending. Every decision
is one sqlite transaction: a failure records nothing.

*Undo.* :meth:`EditLedger.undo_file` takes one key, or ``(thread_id, path)`` meaning "every
applied, not yet undone change of that file in that thread", newest first. It locks the
absolute paths involved (per-path locks, taken in sorted order: undos of different files run
in parallel, undos of one file serialize), reads them, and checks each reverse against what is
there *now* — the file must still hold what Codex wrote, else :class:`EditConflict` (with a
diff) and nothing is written. Writes are atomic per file (temp file in the same directory,
fsync, ``os.replace``, fsync of the directory); for a move back the source is written before
the destination is removed, so a crash never loses the only copy. *Confinement*: every path an
undo reads, writes or removes must lie below the entry's frozen cwd (``OutsideWorkspace``
otherwise, unless the call passes ``allow_outside_workspace=True``), and is reached through
directory descriptors opened component by component with ``O_NOFOLLOW`` — held from the check
to the write, so no symbolic link is ever followed (see the section "confinement" below). A receipt marks undone only
the keys it actually undid; a failed undo keeps its entry (with the error in
:meth:`EditLedger.undo_failure`) and is never retried automatically.

Store: a small sqlite file per workspace (:meth:`EditStore.for_workspace`) outside the
workspace itself, so it never shows up in the user's ``git status``. The records and the store
live in :mod:`codexrt._io._edit_store` (re-exported here); this module holds the ledger and the
confined file I/O its undo uses.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

from codexrt._sansio._errors import (
    AlreadyUndone,
    EditConflict,
    EditNotFound,
    LocalProtocolError,
    NotApplied,
    NotARegularFile,
    OutsideWorkspace,
    ReviewError,
    ReviewNoSession,
    ReviewStale,
    UndoBinaryContent,
    UndoError,
    UndoIOError,
    UndoPatchFormat,
)
from codexrt._sansio._patch import (
    BinaryContentError,
    Conflict,
    FileOp,
    FilePatch,
    PatchFormatError,
    decode_text,
    parse_change,
    plan_apply,
    render,
    reverse,
)
from codexrt._io._edit_store import (  # the records and the store, re-exported
    Checkpoint,
    EditEntry,
    EditKey,
    EditStore,
    ReviewTicket,
    UndoReceipt,
    _resolve,
    default_store_path,
)

__all__ = [
    "EditKey",
    "EditEntry",
    "ReviewTicket",
    "Checkpoint",
    "UndoReceipt",
    "EditLedger",
    "EditStore",
    "UndoError",
    "EditConflict",
    "OutsideWorkspace",
    "ReviewError",
    "default_store_path",
]


# ------------------------------------------------------------------------------ errors
# UndoError, EditConflict and ReviewError live in codexrt/_sansio/_errors.py (the one exception tree);
# they are imported above and stay importable from here.


# ------------------------------------------------------------------------------ file I/O
# Module-level indirections so tests can inject failures (a crash mid-undo, a barrier).
_replace = os.replace
_fsync = os.fsync
_TMP_TAG = ".codexrt-undo-"


@functools.cache
def _umask() -> int:
    """The process umask, read without the set-and-restore dance where possible: that dance
    briefly sets umask 0 for every thread of the process."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        m = os.umask(0o022)
        os.umask(m)
    return m


_UMASK_LOCK = threading.Lock()


# ------------------------------------------------------------------------------ confinement
# Undo writes only inside the submission's workspace (R-EDIT-3, issue 18). A path is placed
# lexically first (``_place``: inside a root, else refused unless the host opted in), then every
# directory below the anchor is opened one component at a time with ``O_NOFOLLOW`` relative to
# the previous one (``_Dirs``), and the file itself is read, written (temp file + ``os.replace``
# with ``src_dir_fd``/``dst_dir_fd``) and unlinked relative to that directory's descriptor. The
# descriptors are opened at check time and the writes go through the very same ones, so swapping
# a directory for a symbolic link after the check cannot redirect a write.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _after_check(paths: Sequence[str]) -> None:
    """Called between the check (everything read and compared) and the first write. A no-op;
    tests replace it to change the file system at exactly that moment."""


@attrs.frozen
class _Place:
    """Where a path is: its ``anchor`` directory (a workspace root, or ``/`` for an opted-in
    outside path) and the components below it (the last one is the file's name)."""

    path: str
    anchor: str
    parts: tuple[str, ...]


def _inside(path: str, root: str) -> bool:
    return path.startswith(root if root.endswith(os.sep) else root + os.sep)


def _place(path: str, roots: Sequence[str], allow_outside: bool) -> _Place:
    path = os.path.normpath(path)
    for root in sorted((os.path.normpath(r) for r in roots), key=len, reverse=True):
        if _inside(path, root):
            return _Place(path, root, tuple(os.path.relpath(path, root).split(os.sep)))
    if not allow_outside:
        raise OutsideWorkspace(
            f"refusing to undo {path}: it is outside the workspace ({', '.join(roots)}); "
            "nothing was written (the host may allow it for one undo: allow_outside_workspace)",
            details={"path": path, "roots": list(roots)},
        )
    return _Place(path, os.sep, tuple(p for p in path.split(os.sep) if p))


class _Dirs:
    """Directory descriptors of one undo, opened without following links, kept until the
    undo is over (see the section comment)."""

    def __init__(self) -> None:
        self._fds: dict[tuple[str, tuple[str, ...]], int] = {}

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def parent(self, place: _Place, *, create: bool) -> int | None:
        """The descriptor of ``place``'s directory; ``None`` if a directory on the way does
        not exist and ``create`` is false. Missing directories are created only below a
        workspace root, never outside it."""
        key: tuple[str, tuple[str, ...]] = (place.anchor, ())
        fd = self._fds.get(key)
        if fd is None:
            # The anchor is the host's own root (its path may go through links it chose).
            fd = self._fds[key] = os.open(place.anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for i, part in enumerate(place.parts[:-1]):
            key = (place.anchor, place.parts[: i + 1])
            nxt = self._fds.get(key)
            if nxt is None:
                nxt = self._fds[key] = self._open_dir(fd, part, place, i, create)
                if nxt < 0:
                    del self._fds[key]
                    return None
            fd = nxt
        return fd

    @staticmethod
    def _open_dir(fd: int, part: str, place: _Place, i: int, create: bool) -> int:
        shown = os.path.join(place.anchor, *place.parts[: i + 1])
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                return -1
            if place.anchor == os.sep:
                raise OutsideWorkspace(
                    f"refusing to undo {place.path}: its directory {shown} does not exist and "
                    "codexrt creates no directory outside the workspace; nothing was written",
                    details={"path": place.path, "missing": shown},
                ) from None
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            return _Dirs._open_dir(fd, part, place, i, False)
        except OSError as exc:
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except OSError:
                raise exc from None
            if stat.S_ISLNK(st.st_mode):
                raise OutsideWorkspace(
                    f"refusing to undo {place.path}: {shown} is a symbolic link (undo never "
                    "follows links); nothing was written",
                    details={"path": place.path, "link": shown},
                ) from None
            raise


def _read_at(dirs: _Dirs, place: _Place) -> tuple[bytes | None, int | None]:
    dfd = dirs.parent(place, create=False)
    if dfd is None:
        return None, None
    name = place.parts[-1]
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile(
            f"refusing to undo into {place.path}: not a regular file",
            details={"path": place.path},
        )
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):  # swapped since the stat above
            raise NotARegularFile(
                f"refusing to undo into {place.path}: not a regular file",
                details={"path": place.path},
            )
        return f.read(), st.st_mode


def _write_at(dirs: _Dirs, place: _Place, data: bytes, mode: int | None) -> None:
    """Write ``data`` so a reader (or a crash) sees the old or the new file, never a partial
    one: temp file in the same directory (by descriptor), fsync, ``os.replace``."""
    dfd = dirs.parent(place, create=True)
    if dfd is None:  # created, then removed again by someone else before we could open it
        raise FileNotFoundError(2, "No such file or directory", os.path.dirname(place.path))
    name = place.parts[-1]
    tmp = "." + name[:160] + _TMP_TAG + uuid.uuid4().hex[:12]
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                 dir_fd=dfd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if mode is None:
                mode = 0o666 & ~_umask()
            os.fchmod(f.fileno(), stat.S_IMODE(mode))
            _fsync(f.fileno())
        _replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    _fsync_fd(dfd)


def _delete_at(dirs: _Dirs, place: _Place) -> None:
    dfd = dirs.parent(place, create=False)
    if dfd is None:
        raise FileNotFoundError(2, "No such file or directory", place.path)
    os.unlink(place.parts[-1], dir_fd=dfd)
    _fsync_fd(dfd)


def _fsync_fd(fd: int) -> None:
    try:
        _fsync(fd)
    except OSError:
        pass


# ------------------------------------------------------------------------------ ledger


class EditLedger:
    """Per-session edit ledger (R-EDIT-1), review checkpoints (R-EDIT-2), undo (R-EDIT-3).

    ``store`` persists checkpoints and undone keys (default: an in-memory store). The ledger
    does not close a store it was given.
    """

    def __init__(
        self,
        *,
        session_id: str | None,
        provider: str | None = None,
        store: EditStore | None = None,
    ) -> None:
        self.session_id = session_id
        self.provider = provider
        self._own_store = store is None
        self.store = store if store is not None else EditStore.memory()
        self._state = threading.Lock()
        self._entries: dict[EditKey, EditEntry] = {}
        self._seq = 0
        self._undone: set[EditKey] = self.store.undone_keys()
        self._failures: dict[EditKey, UndoError] = {}
        self._path_locks: dict[str, threading.Lock] = {}

    def __repr__(self) -> str:
        return (
            f"<EditLedger session={self.session_id!r} entries={len(self._entries)} "
            f"undone={len(self._undone)}>"
        )

    def close(self) -> None:
        if self._own_store:
            self.store.close()

    def rebind_session(self, session_id: str | None, provider: str | None = None) -> None:
        """The ledger now belongs to another session (e.g. after a runtime rebuild). Tickets
        opened before keep their frozen session."""
        self.session_id = session_id
        self.provider = provider

    # ----------------------------------------------------------------- recording

    def record_item(
        self,
        item: Mapping[str, Any],
        *,
        thread_id: str,
        turn_id: str,
        cwd: str,
        origin: str = "live",
    ) -> list[EditEntry]:
        """Record one native item (non-``fileChange`` items are ignored → ``[]``).

        ``cwd`` is the working directory of the submission that produced the turn; it must be
        absolute and is frozen for the key the first time it is seen.
        """
        if not isinstance(item, Mapping) or item.get("type") != "fileChange":
            return []
        if not os.path.isabs(cwd):
            raise LocalProtocolError(f"the submission cwd must be absolute, got {cwd!r}")
        item_id = str(item.get("id", ""))
        status = str(item.get("status", "unknown"))
        changes = item.get("changes") or []
        pairs: list[tuple[str | None, Any]]
        if isinstance(changes, Mapping):  # core shape: {path: FileChange}
            pairs = [(p, c) for p, c in changes.items()]
        else:
            pairs = [(None, c) for c in changes]
        out = []
        with self._state:
            for p, change in pairs:
                patch: FilePatch | None
                try:
                    patch = parse_change(change, path=p)
                    path = patch.path
                    err = None
                except (PatchFormatError, BinaryContentError) as exc:
                    patch, err = None, exc.message
                    path = p or (change.get("path") if isinstance(change, Mapping) else None) or "?"
                key = EditKey(thread_id, turn_id, item_id, path)
                old = self._entries.get(key)
                if old is not None:
                    entry = attrs.evolve(old, patch=patch, status=status, parse_error=err)
                else:
                    self._seq += 1
                    entry = EditEntry(key, patch, status, cwd, origin, self._seq, err)
                self._entries[key] = entry
                out.append(entry)
        return out

    def record_notification(
        self, method: str, params: Mapping[str, Any], *, cwd: str
    ) -> list[EditEntry]:
        """Feed a live notification; only ``item/started``/``item/completed`` carrying a
        ``fileChange`` item are recorded."""
        if method not in ("item/started", "item/completed"):
            return []
        item = params.get("item")
        if not isinstance(item, Mapping):
            return []
        return self.record_item(
            item,
            thread_id=str(params.get("threadId", "")),
            turn_id=str(params.get("turnId", "")),
            cwd=cwd,
        )

    def record_history(
        self, thread_id: str, turns: Iterable[Mapping[str, Any]], *, cwd: str
    ) -> list[EditEntry]:
        """Feed history: ``turns`` as native ``Turn`` objects (``{id, items: [...]}``)."""
        out: list[EditEntry] = []
        for turn in turns:
            for item in turn.get("items") or []:
                out.extend(
                    self.record_item(
                        item, thread_id=thread_id, turn_id=str(turn.get("id", "")), cwd=cwd,
                        origin="history",
                    )
                )
        return out

    def record_projected(self, record: Any, *, cwd: str) -> list[EditEntry]:
        """Record a projected history ``FileChange`` (``codexrt._sansio._projection``: native
        or legacy rollout) — any object with ``id``, ``thread_id``, ``turn_id``, ``status``,
        ``source`` and ``changes`` of ``(path, kind, diff, move_path)``; ``kind`` may be
        ``move``. Other records are ignored (→ ``[]``)."""
        if getattr(record, "kind", None) != "fileChange":
            return []
        changes = [
            {
                "path": c.path,
                "kind": {
                    "type": "update" if c.kind == "move" else c.kind,
                    "move_path": getattr(c, "move_path", None),
                },
                "diff": c.diff,
            }
            for c in record.changes
        ]
        item = {"type": "fileChange", "id": record.id, "status": record.status, "changes": changes}
        return self.record_item(
            item,
            thread_id=str(record.thread_id or ""),
            turn_id=str(record.turn_id),
            cwd=cwd,
            origin="history" if getattr(record, "source", "") != "legacy" else "legacy",
        )

    # ----------------------------------------------------------------- queries

    def get(self, key: EditKey) -> EditEntry:
        try:
            return self._entries[key]
        except KeyError:
            raise EditNotFound(
                f"no ledger entry {key.to_dict()}",
                details={"keys": [key.to_dict()]},
            ) from None

    def entries(
        self, *, thread_id: str | None = None, path: str | None = None, include_undone: bool = True
    ) -> list[EditEntry]:
        """Entries in record order, filtered by thread and/or file (``path`` absolute, or
        relative to each entry's frozen cwd; it matches a target or a rename source)."""
        with self._state:
            items = sorted(self._entries.values(), key=lambda e: e.seq)
            undone = set(self._undone)
        out = []
        for e in items:
            if thread_id is not None and e.key.thread_id != thread_id:
                continue
            if path is not None and _resolve(e.cwd, path) not in e.paths:
                continue
            if not include_undone and e.key in undone:
                continue
            out.append(e)
        return out

    def by_thread(self, thread_id: str) -> list[EditEntry]:
        return self.entries(thread_id=thread_id)

    def by_file(self, path: str) -> list[EditEntry]:
        return self.entries(path=path)

    def is_undone(self, key: EditKey) -> bool:
        return key in self._undone

    def undo_failure(self, key: EditKey) -> UndoError | None:
        """The error of the last failed undo of ``key`` (kept until a later undo succeeds)."""
        return self._failures.get(key)

    def pending_review(self, *, thread_id: str | None = None) -> list[EditEntry]:
        """Applied, not undone entries with no decided checkpoint in the current session."""
        out = []
        for e in self.entries(thread_id=thread_id, include_undone=False):
            if e.status != "completed":
                continue
            if self.session_id is not None and self.store.checkpoint(self.session_id, e.key):
                continue
            out.append(e)
        return out

    def review_state(self, key: EditKey, *, session_id: str | None = None) -> Checkpoint | None:
        """The checkpoint of ``key`` in ``session_id`` (default: the current session)."""
        sid = session_id if session_id is not None else self.session_id
        return self.store.checkpoint(sid, key) if sid is not None else None

    # ----------------------------------------------------------------- review

    def open_review(self, keys: EditKey | Sequence[EditKey]) -> ReviewTicket:
        """Open change(s) of one file for review, freezing target, rename source, session,
        provider and keys now (R-EDIT-2). The ticket is persisted as open."""
        ks = (keys,) if isinstance(keys, EditKey) else tuple(keys)
        if not ks:
            raise ReviewError("open_review needs at least one ledger key")
        entries = []
        for k in ks:
            e = self._entries.get(k)
            if e is None:
                raise EditNotFound(
                    f"no ledger entry {k.to_dict()}",
                    details={"keys": [k.to_dict()]},
                )
            entries.append(e)
        targets = {e.target for e in entries}
        if len(targets) != 1:
            raise ReviewError(
                "one review covers one file; these keys target several",
                details={"targets": sorted(targets)},
            )
        newest = max(entries, key=lambda e: e.seq)
        sources = [e.rename_source for e in sorted(entries, key=lambda e: e.seq) if e.rename_source]
        ticket = ReviewTicket(
            ticket_id=uuid.uuid4().hex,
            keys=ks,
            target=newest.target,
            rename_source=sources[0] if sources else None,
            session_id=self.session_id,
            provider=self.provider,
            opened_at=time.time(),
        )
        try:
            self.store.insert_ticket(ticket)
        except sqlite3.Error as exc:
            raise ReviewError(f"could not persist the review: {exc}") from exc
        return ticket

    def accept(self, ticket: ReviewTicket | str) -> list[Checkpoint]:
        return self._decide(ticket, "accepted")

    def reject(self, ticket: ReviewTicket | str) -> list[Checkpoint]:
        return self._decide(ticket, "rejected")

    def _decide(self, ticket: ReviewTicket | str, decision: str) -> list[Checkpoint]:
        tid = ticket if isinstance(ticket, str) else ticket.ticket_id
        found = self.store.get_ticket(tid)
        if found is None:
            raise ReviewStale(f"unknown review {tid}", details={"ticketId": tid})
        frozen, _state = found  # the stored ticket is the truth, not the caller's copy
        if frozen.session_id is None:
            raise ReviewNoSession(
                f"review {tid} was opened without a session; a null session never borrows "
                "the current one, so nothing was recorded",
                details={"ticketId": tid},
            )
        at = time.time()
        try:
            self.store.decide(frozen, decision, at)
        except sqlite3.Error as exc:
            raise ReviewError(f"could not record the review: {exc}") from exc
        return [
            Checkpoint(
                frozen.session_id, k, decision, tid, frozen.target, frozen.rename_source,
                frozen.provider, at,
            )
            for k in frozen.keys
        ]

    # ----------------------------------------------------------------- undo

    async def undo_file(
        self, target: EditKey | tuple[str, str], *, dry_run: bool = False,
        allow_outside_workspace: bool = False,
    ) -> UndoReceipt:
        """Undo one file's change(s) (R-EDIT-3); see :meth:`undo_file_sync`.

        The blocking work runs in a worker thread. Cancelling this call does not abandon
        it: the undo finishes (or fails) atomically, then the cancellation is delivered.
        """
        return await trio.to_thread.run_sync(
            functools.partial(self.undo_file_sync, target, dry_run=dry_run,
                              allow_outside_workspace=allow_outside_workspace)
        )

    def _select(self, target: EditKey | tuple[str, str]) -> list[EditEntry]:
        if isinstance(target, EditKey):
            e = self.get(target)
            if e.key in self._undone:
                raise AlreadyUndone(
                    f"{e.target}: this change was already undone",
                    details={"keys": [e.key.to_dict()]},
                )
            chosen = [e]
        else:
            thread_id, path = target
            chosen = [
                e
                for e in self.entries(thread_id=thread_id, path=path, include_undone=False)
                if e.status == "completed"
            ]
            if not chosen:
                raise EditNotFound(
                    f"no applied, not yet undone change of {path!r} in thread {thread_id}",
                    details={"threadId": thread_id, "path": path},
                )
            chosen.sort(key=lambda e: e.seq, reverse=True)
        for e in chosen:
            if e.patch is None:
                raise UndoPatchFormat(
                    f"{e.key.path}: the change could not be parsed ({e.parse_error}); "
                    "it cannot be undone",
                    details={"keys": [e.key.to_dict()]},
                )
            if e.status != "completed":
                raise NotApplied(
                    f"{e.target}: the change is {e.status!r}, not applied; nothing to undo",
                    details={"keys": [e.key.to_dict()], "status": e.status},
                )
        return chosen

    def _locks_for(self, paths: Iterable[str]) -> list[threading.Lock]:
        with self._state:
            return [self._path_locks.setdefault(p, threading.Lock()) for p in sorted(set(paths))]

    def undo_file_sync(
        self, target: EditKey | tuple[str, str], *, dry_run: bool = False,
        allow_outside_workspace: bool = False,
    ) -> UndoReceipt:
        """Blocking undo. ``target`` is one :class:`EditKey`, or ``(thread_id, path)`` for
        every applied, not undone change of that file in that thread (newest first).

        Raises :class:`EditConflict` if the file no longer holds what Codex wrote (nothing
        written), :class:`UndoError` otherwise. With ``dry_run`` nothing is written and the
        receipt shows the reverse diff.

        Confinement: every path read, written or removed (a move's source included) must lie
        below the cwd of the submission that made the change; a path outside it, or one that
        goes through a symbolic link to a directory, raises :class:`OutsideWorkspace` and
        nothing is read or written. ``allow_outside_workspace=True`` lets this one call touch
        paths outside the cwd — still without following any link, and without creating a
        missing directory there.
        """
        chosen = self._select(target)
        keys = tuple(e.key for e in chosen)
        paths = {p for e in chosen for p in e.paths}
        locks = self._locks_for(paths)
        for lk in locks:
            lk.acquire()
        try:
            try:
                receipt = self._undo_locked(chosen, keys, paths, dry_run, allow_outside_workspace)
            except UndoError as exc:
                if not dry_run:
                    with self._state:
                        for k in keys:
                            self._failures[k] = exc
                raise
            return receipt
        finally:
            for lk in reversed(locks):
                lk.release()

    def _undo_locked(
        self,
        chosen: list[EditEntry],
        keys: tuple[EditKey, ...],
        paths: set[str],
        dry_run: bool,
        allow_outside: bool = False,
    ) -> UndoReceipt:
        places: dict[str, _Place] = {}
        for e in chosen:
            for p in e.paths:
                try:
                    places.setdefault(p, _place(p, [e.cwd], allow_outside))
                except OutsideWorkspace as exc:
                    exc.details["keys"] = [k.to_dict() for k in keys]
                    raise
        dirs = _Dirs()
        try:
            return self._undo_confined(chosen, keys, paths, dry_run, places, dirs)
        finally:
            dirs.close()

    def _undo_confined(
        self,
        chosen: list[EditEntry],
        keys: tuple[EditKey, ...],
        paths: set[str],
        dry_run: bool,
        places: dict[str, _Place],
        dirs: _Dirs,
    ) -> UndoReceipt:
        with self._state:
            gone = [k for k in keys if k in self._undone]
        if gone:  # another undo won the race for the lock
            raise AlreadyUndone(
                "already undone", details={"keys": [k.to_dict() for k in gone]}
            )
        original: dict[str, str | None] = {}
        modes: dict[str, int | None] = {}
        for p in sorted(paths):
            try:
                data, mode = _read_at(dirs, places[p])
            except OutsideWorkspace as exc:
                exc.details["keys"] = [k.to_dict() for k in keys]
                raise
            except OSError as exc:
                raise UndoIOError(
                    f"could not read {p}: {exc.strerror or exc}",
                    details={"path": p, "keys": [k.to_dict() for k in keys]},
                ) from exc
            try:
                original[p] = decode_text(data, path=p) if data is not None else None
            except BinaryContentError as exc:
                raise UndoBinaryContent(
                    exc.message,
                    details={"path": p, "keys": [k.to_dict() for k in keys]},
                ) from exc
            modes[p] = mode
        overlay = dict(original)
        diffs = []
        for e in chosen:
            rp = reverse(e.absolute_patch())
            plan = plan_apply(rp, overlay)
            if isinstance(plan, Conflict):
                raise EditConflict(plan, keys=keys)
            diffs.append(render(rp))
            for op in plan.ops:
                if op.content is not None and op.mode_from and op.mode_from != op.path:
                    modes[op.path] = modes.get(op.mode_from)
                overlay[op.path] = op.content
        writes = [FileOp(p, overlay[p]) for p in sorted(paths) if overlay[p] != original[p] and overlay[p] is not None]
        deletes = [FileOp(p, None) for p in sorted(paths) if overlay[p] is None and original[p] is not None]
        ops = tuple(writes + deletes)
        receipt = UndoReceipt(keys, dry_run, "".join(diffs), ops)
        if dry_run:
            return receipt
        _after_check([op.path for op in ops])
        done: list[str] = []
        for op in ops:
            try:
                if op.content is None:
                    _delete_at(dirs, places[op.path])
                else:
                    _write_at(dirs, places[op.path], op.content.encode("utf-8"), modes.get(op.path))
            except OutsideWorkspace as exc:
                exc.details.update(written=done, keys=[k.to_dict() for k in keys])
                raise
            except OSError as exc:
                raise UndoIOError(
                    f"undo of {op.path} failed: {exc.strerror or exc}"
                    + (f" (already written: {', '.join(done)})" if done else "; nothing was written"),
                    details={
                        "path": op.path,
                        "written": done,
                        "keys": [k.to_dict() for k in keys],
                    },
                ) from exc
            done.append(op.path)
        try:
            self.store.mark_undone(keys, time.time())
        except sqlite3.Error:
            # The files are reverted; only the record failed. The in-memory mark below still
            # holds, and a repeated undo after a restart meets a conflict, never a double write.
            pass
        with self._state:
            self._undone.update(keys)
            for k in keys:
                self._failures.pop(k, None)
        return receipt
