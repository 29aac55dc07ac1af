"""Edit ledgers fed from a runtime: a thread's native history and its live ``fileChange`` items.

Why this exists (R-EDIT-1..3): ``codexrt/_io/_edits.py`` is the ledger itself — it is told about
``fileChange`` items and knows nothing of where they come from. This module is the glue to a
running app-server, shared by ``codexrt edits``/``codexrt undo`` (``codexrt_cli/_edits_cli.py``)
and the ``codex.listEdits`` … ``codex.undoFile`` commands of ``codexrt serve``.

Theory of operation
-------------------
*One ledger per thread.* An :class:`~codexrt._io._edits.EditKey` starts with the thread id, and a
thread has one recorded working directory, so a thread is the natural unit: its ledger belongs
to the thread's native ``sessionId`` (shared by a thread and its sub-agents) and
``modelProvider``, and persists checkpoints and undone keys in the per-workspace sqlite store of
the thread's ``cwd`` (:meth:`EditStore.for_workspace`). Several threads of one workspace share
one store object.

*History is read-only.* :func:`read_thread_meta` is ``thread/read`` without turns (cwd,
session, provider, ephemeral); :func:`read_thread_turns` pages through ``thread/turns/list``
with ``itemsView: "full"`` in ascending order, falling back to ``thread/read`` with
``includeTurns`` where the server has no ``thread/turns/list``. Neither resumes the thread nor
takes the send FIFO. Ephemeral threads have no history to read.

*History first, then live.* A ledger numbers its entries in record order, and undoing a file
reverses its changes newest first by that order — so older changes must be recorded before
newer ones. :class:`LiveEdits` therefore creates a thread's ledger (under a per-thread lock)
by reading its history *before* recording any live item of it; live items that arrived while
the history was read wait in the subscription buffer (item events are never dropped) and then
refresh the entries history already gave. If the history could not be read (no connection,
an error), the ledger starts from the live items alone and remembers that; the next request
that can read the history rebuilds it: history first, then the live items again.

*The submission's cwd.* A live item is recorded with the working directory of the submission
that produced it: the ``cwd`` setting of the codexrt operation the event belongs to, else the
thread's recorded ``cwd``. History items get the thread's recorded ``cwd``. The ledger freezes
the cwd of a key the first time it sees it, so a later cwd change never retargets an undo.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from codexrt._io._retry import call_read
from codexrt._features._paging import CursorWalk, walk_pages
from codexrt._io._edits import EditEntry, EditKey, EditLedger, EditStore, ReviewTicket, default_store_path
from codexrt._sansio._errors import (
    ClosedError,
    CodexError,
    EditNotFound,
    HistoryReadFailed,
    RpcError,
    ThreadNotFound,
    UnknownCommand,
    from_rpc_error,
    rpc_error_kind,
)

__all__ = [
    "ThreadMeta",
    "ThreadEdits",
    "LiveEdits",
    "open_live_edits",
    "read_thread_meta",
    "read_thread_turns",
    "load_thread_edits",
    "entry_view",
    "review_state",
    "EDIT_COMMANDS",
    "run_edit_command",
]

log = logging.getLogger("codexrt.edits")

#: Turns per ``thread/turns/list`` page, and the most pages read for one thread.
PAGE_SIZE = 50
MAX_PAGES = 400
#: Live ``fileChange`` items kept per thread for a rebuild after a failed history read.
MAX_LIVE_ITEMS = 10_000
#: Threads whose live file changes / start metadata are kept (oldest forgotten first).
MAX_TRACKED_THREADS = 1024
#: Ledgers kept in memory (issue 35: a host asking about 40,000 threads held them all). The
#: least recently used one that no task is using is dropped; asked again, it is rebuilt from
#: the thread's history and the workspace's edit store (undos, reviews and tickets live there).
MAX_LEDGERS = 256


class RpcCaller(Protocol):
    """What ``load_thread_edits`` reads through: anything with the connection's ``call`` (a
    ``codexrt.Connection`` from ``await rt.ensure_started()``, a ``codexrt.ChildHandle``)."""

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any: ...


# ------------------------------------------------------------------------------ history


@attrs.frozen
class ThreadMeta:
    """What the ledger needs to know about a thread (from a native ``Thread`` object)."""

    thread_id: str
    cwd: str
    session_id: str
    provider: str | None
    ephemeral: bool = False

    @classmethod
    def from_thread(cls, thread: Mapping[str, Any]) -> ThreadMeta:
        tid = thread.get("id")
        cwd = thread.get("cwd")
        if not isinstance(tid, str) or not tid:
            raise HistoryReadFailed("the server's thread has no id",
                                    details={"keys": sorted(thread)})
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise HistoryReadFailed(f"thread {tid} has no absolute recorded cwd ({cwd!r}); its edits "
                                    "cannot be placed", details={"threadId": tid})
        sid = thread.get("sessionId")
        prov = thread.get("modelProvider")
        return cls(
            thread_id=tid,
            cwd=cwd,
            session_id=sid if isinstance(sid, str) and sid else tid,
            provider=prov if isinstance(prov, str) else None,
            ephemeral=thread.get("ephemeral") is True,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"threadId": self.thread_id, "cwd": self.cwd, "sessionId": self.session_id,
                "provider": self.provider, "ephemeral": self.ephemeral}


def _thread_read_error(thread_id: str, exc: RpcError) -> CodexError:
    # (a persisted thread is read fine without being loaded, so "thread not loaded" means unknown)
    if from_rpc_error(exc) is ThreadNotFound:
        return ThreadNotFound(f"thread {thread_id} not found: {exc.message}",
                              details={"threadId": thread_id, "rpcCode": exc.rpc_code})
    return HistoryReadFailed(f"could not read thread {thread_id}: {exc.message}",
                             details={"threadId": thread_id, "rpcCode": exc.rpc_code})


async def read_thread_meta(conn: RpcCaller, thread_id: str, *, timeout: float | None = None) -> ThreadMeta:
    """``thread/read`` without turns (read-only, never resumes). Raises :class:`CodexError`
    ``THREAD_NOT_FOUND`` for an unknown thread, ``HISTORY_READ_FAILED`` otherwise."""
    try:
        result = await call_read(conn, "thread/read", {"threadId": thread_id}, timeout=timeout)
    except RpcError as exc:
        raise _thread_read_error(thread_id, exc) from None
    thread = (result or {}).get("thread") if isinstance(result, dict) else None
    if not isinstance(thread, dict):
        raise HistoryReadFailed(f"thread/read of {thread_id} returned no thread",
                                details={"threadId": thread_id})
    return ThreadMeta.from_thread(thread)


async def read_thread_turns(conn: RpcCaller, thread_id: str, *, page_size: int = PAGE_SIZE,
                            max_pages: int = MAX_PAGES, timeout: float | None = None) -> list[dict[str, Any]]:
    """Every turn of the thread with all its items, oldest first (read-only).

    ``thread/turns/list`` (``itemsView: "full"``, ascending, paginated); if the server does not
    know that method, ``thread/read`` with ``includeTurns``. Each call is bounded by the
    connection's RPC timeout (or ``timeout``); more than ``max_pages`` pages or a page without
    ``nextCursor`` is ``HISTORY_READ_FAILED``, a repeated cursor ``CURSOR_REPEATED`` (the shared
    cursor walk) — never an endless or a guessed read."""
    turns: list[dict[str, Any]] = []
    walk = CursorWalk("thread/turns/list", max_pages=max_pages)

    async def read(params: dict[str, Any], _sent: Any) -> Any:  # no read ahead here: always None
        return await call_read(conn, "thread/turns/list", params, timeout=timeout)

    def bad_page(w: CursorWalk) -> Exception:
        return HistoryReadFailed(f"thread/turns/list of {thread_id} returned no data",
                                 details={"threadId": thread_id})

    try:
        await walk_pages(read, walk, {"threadId": thread_id, "itemsView": "full", "sortDirection": "asc",
                                      "limit": page_size},
                         lambda data: turns.extend(t for t in data if isinstance(t, dict)), bad_page=bad_page)
    except RpcError as exc:
        if walk.pages or not _unsupported(exc):
            raise _thread_read_error(thread_id, exc) from None
        return await _read_with_turns(conn, thread_id, timeout)
    if walk.stop == "missing":
        raise HistoryReadFailed(f"thread/turns/list of {thread_id} answered without nextCursor; cannot tell whether "
                                "more turns exist", details={"threadId": thread_id,
                                                                                   "pages": walk.pages})
    if walk.stop == "pageLimit":
        raise HistoryReadFailed(f"thread {thread_id} has more than {max_pages} pages of turns; refusing to read on",
                                details={"threadId": thread_id, "pages": max_pages})
    return turns


def _unsupported(exc: RpcError) -> bool:
    return rpc_error_kind(exc) == "unsupported"


async def _read_with_turns(conn: RpcCaller, thread_id: str, timeout: float | None) -> list[dict[str, Any]]:
    try:
        result = await call_read(conn, "thread/read", {"threadId": thread_id, "includeTurns": True}, timeout=timeout)
    except RpcError as exc:
        raise _thread_read_error(thread_id, exc) from None
    thread = (result or {}).get("thread") if isinstance(result, dict) else None
    turns = (thread or {}).get("turns") if isinstance(thread, dict) else None
    return [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else []


@attrs.define
class ThreadEdits:
    """A thread's ledger with what it was built from. ``history_loaded`` is False when the
    ledger holds live items only (the history could not be read: ``history_error`` says why)."""

    meta: ThreadMeta
    ledger: EditLedger
    history_loaded: bool = True
    history_error: CodexError | None = None

    def display_path(self, entry: EditEntry) -> str:
        """The entry's target relative to the thread's cwd (absolute when outside it)."""
        return _display(self.meta.cwd, entry.target)

    def display_path_of(self, path: str) -> str:
        return _display(self.meta.cwd, path)


async def load_thread_edits(conn: RpcCaller, thread_id: str, *, store: EditStore | None = None,
                            state_dir: str | None = None) -> ThreadEdits:
    """Read a thread's metadata and history (read-only) into a new ledger bound to the
    thread's session and provider. Without ``store`` the per-workspace store of the thread's
    cwd is opened (the caller closes ``result.ledger.store``)."""
    meta = await read_thread_meta(conn, thread_id)
    turns = [] if meta.ephemeral else await read_thread_turns(conn, thread_id)
    if store is None:
        store = EditStore(default_store_path(meta.cwd, state_dir=state_dir))
    ledger = EditLedger(session_id=meta.session_id, provider=meta.provider, store=store)
    ledger.record_history(thread_id, turns, cwd=meta.cwd)
    return ThreadEdits(meta, ledger)


# ------------------------------------------------------------------------------ views


def _display(cwd: str, path: str) -> str:
    rel = os.path.relpath(path, cwd)
    return path if rel.startswith(os.pardir + os.sep) or rel == os.pardir else rel


def review_state(ledger: EditLedger, entry: EditEntry) -> str:
    """``undone``, ``notApplied`` (not ``completed``), ``accepted``/``rejected`` (a checkpoint
    in the ledger's session) or ``pending``."""
    if ledger.is_undone(entry.key):
        return "undone"
    if entry.status != "completed":
        return "notApplied"
    cp = ledger.review_state(entry.key)
    return cp.decision if cp is not None else "pending"


def entry_view(ledger: EditLedger, entry: EditEntry, *, cwd: str | None = None) -> dict[str, Any]:
    """One entry as JSON: :meth:`EditEntry.to_dict` plus ``state``, ``path`` (relative to
    ``cwd`` when inside it), ``undoFailure`` and the checkpoint's ticket."""
    out = entry.to_dict()
    out["state"] = review_state(ledger, entry)
    out["path"] = _display(cwd or entry.cwd, entry.target)
    src = entry.rename_source
    out["fromPath"] = _display(cwd or entry.cwd, src) if src else None
    failure = ledger.undo_failure(entry.key)
    out["undoFailure"] = failure.to_dict() if failure is not None else None
    cp = ledger.review_state(entry.key)
    out["reviewTicketId"] = cp.ticket_id if cp is not None else None
    return out


# ------------------------------------------------------------------------------ live


@attrs.define
class _LiveItem:
    item: dict[str, Any]
    turn_id: str
    cwd: str | None


class LiveEdits:
    """Per-thread ledgers of one runtime, fed by its events (see the module doc).

    Run :meth:`run` in a nursery (``await nursery.start(live.run)``) or use
    :func:`open_live_edits`. :meth:`ledger` returns a thread's :class:`ThreadEdits`, creating
    it from the history on first use. ``state_dir`` is where the per-workspace stores live
    (default: ``$CODEXRT_STATE_DIR`` …, see :func:`~codexrt._io._edits.default_store_path`).
    """

    def __init__(self, rt: Any, *, state_dir: str | None = None, load_history: bool = True,
                 default_cwd: str | None = None) -> None:
        self.rt = rt
        self.state_dir = state_dir
        self.load_history = load_history
        self.default_cwd = os.path.abspath(default_cwd or getattr(rt.config, "cwd", None) or os.getcwd())
        self._threads: dict[str, ThreadEdits] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._live: dict[str, list[_LiveItem]] = {}
        self._started_meta: dict[str, ThreadMeta] = {}
        self._stores: dict[str, EditStore] = {}
        self._closed = False
        self.recorded = 0
        #: Set once :meth:`run` is subscribed: every later event of the runtime is seen.
        self.subscribed = trio.Event()

    def __repr__(self) -> str:
        return f"<LiveEdits threads={len(self._threads)} recorded={self.recorded} closed={self._closed}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, thread_id: str) -> ThreadEdits | None:
        """The thread's ledger if one exists already (no I/O)."""
        return self._threads.get(thread_id)

    def threads(self) -> list[str]:
        return sorted(self._threads)

    def _store(self, cwd: str) -> EditStore:
        path = default_store_path(cwd, state_dir=self.state_dir)
        store = self._stores.get(path)
        if store is None:
            store = self._stores[path] = EditStore(path)
        return store

    def close(self) -> None:
        """Close the stores; later :meth:`ledger` calls raise :class:`ClosedError`. Idempotent."""
        self._closed = True
        for store in self._stores.values():
            store.close()
        self._stores.clear()

    async def _conn(self, *, start: bool) -> RpcCaller | None:
        if start:
            return await self.rt.ensure_started()
        conn = getattr(self.rt, "conn", None)
        if conn is None or conn.closed.is_set():
            return None
        return conn

    async def ledger(self, thread_id: str, *, start: bool = True) -> ThreadEdits:
        """The thread's ledger, created from its history on first use (read-only reads; with
        ``start`` the runtime's child is started if needed, like any read-only command).
        A ledger built without history is rebuilt once the history can be read."""
        if self._closed:
            raise ClosedError("the edit ledgers of this runtime are closed")
        lock = self._locks.setdefault(thread_id, trio.Lock())
        try:
            async with lock:
                return await self._ledger_locked(thread_id, start)
        finally:
            # A thread whose ledger could not be built keeps no lock either (issue 35).
            if (thread_id not in self._threads and self._locks.get(thread_id) is lock and not lock.locked()
                    and not lock.statistics().tasks_waiting):
                del self._locks[thread_id]

    async def _ledger_locked(self, thread_id: str, start: bool) -> ThreadEdits:
        if self._closed:
            raise ClosedError("the edit ledgers of this runtime are closed")
        te = self._threads.get(thread_id)
        # The feeder (start=False) never retries a failed history read: only a request does.
        if te is not None and (te.history_loaded or not self.load_history or not start):
            self._threads[thread_id] = self._threads.pop(thread_id)  # most recently used last
            return te
        conn = await self._conn(start=start)
        meta: ThreadMeta | None = None
        turns: list[dict[str, Any]] = []
        error: CodexError | None = None
        if conn is not None:
            try:
                meta = await read_thread_meta(conn, thread_id)
                if self.load_history and not meta.ephemeral:
                    turns = await read_thread_turns(conn, thread_id)
            except CodexError as exc:
                if start:  # a request: tell the caller; an existing ledger stays as it was
                    raise
                error = exc
        if meta is None:
            meta = self._started_meta.get(thread_id) or ThreadMeta(
                thread_id, self.default_cwd, thread_id, None)
            error = error or HistoryReadFailed("no connection to read the history")
            log.warning("edits of thread %s: history not read (%s); live items only", thread_id, error.message)
        led = EditLedger(session_id=meta.session_id, provider=meta.provider, store=self._store(meta.cwd))
        if error is None:
            led.record_history(thread_id, turns, cwd=meta.cwd)
        for li in self._live.get(thread_id, ()):
            led.record_item(li.item, thread_id=thread_id, turn_id=li.turn_id, cwd=li.cwd or meta.cwd)
        te = ThreadEdits(meta, led, history_loaded=error is None, history_error=error)
        self._threads.pop(thread_id, None)
        self._threads[thread_id] = te
        self._forget_ledgers()
        return te

    def _forget_ledgers(self) -> None:
        """Keep at most :data:`MAX_LEDGERS` ledgers (and their locks): drop the least recently
        used ones whose lock nobody holds or waits for."""
        excess = len(self._threads) - MAX_LEDGERS
        for tid in list(self._threads):
            if excess <= 0:
                break
            lock = self._locks.get(tid)
            if lock is not None and (lock.locked() or lock.statistics().tasks_waiting):
                continue
            del self._threads[tid]
            self._locks.pop(tid, None)
            excess -= 1

    def _submission_cwd(self, op_id: str | None) -> str | None:
        if not op_id:
            return None
        # The runtime keeps its operations by id; the op's settings carry the submission's cwd.
        op = self.rt.operation(op_id) if hasattr(self.rt, "operation") else None
        settings = getattr(op, "settings", None)
        cwd = getattr(settings, "cwd", None)
        return os.path.abspath(cwd) if isinstance(cwd, str) and cwd else None

    async def record_event(self, ev: Any) -> list[EditEntry]:
        """Record one runtime event (:class:`~codexrt._runtime._events.CodexEvent`); only
        ``itemStarted``/``itemCompleted`` carrying a ``fileChange`` item count."""
        if ev.kind == "threadStarted":
            thread = ev.payload.get("thread")
            if isinstance(thread, dict):
                with contextlib.suppress(CodexError):
                    meta = ThreadMeta.from_thread(thread)
                    self._started_meta[meta.thread_id] = meta
                    while len(self._started_meta) > MAX_TRACKED_THREADS:  # oldest first
                        del self._started_meta[next(iter(self._started_meta))]
            return []
        if ev.kind not in ("itemStarted", "itemCompleted"):
            return []
        item = ev.payload.get("item")
        if not isinstance(item, dict) or item.get("type") != "fileChange" or not ev.thread_id:
            return []
        cwd = self._submission_cwd(ev.client_operation_id)
        live = self._live.get(ev.thread_id)
        if live is None:
            live = self._live[ev.thread_id] = []
            while len(self._live) > MAX_TRACKED_THREADS:
                # the oldest thread's live items go (its ledger, if built, keeps what it recorded;
                # a ledger built later reads the thread's history, which has its finished turns)
                del self._live[next(iter(self._live))]
        if len(live) < MAX_LIVE_ITEMS:
            live.append(_LiveItem(item, str(ev.turn_id or ""), cwd))
        te = await self.ledger(ev.thread_id, start=False)
        out = te.ledger.record_item(item, thread_id=ev.thread_id, turn_id=str(ev.turn_id or ""),
                                    cwd=cwd or te.meta.cwd)
        self.recorded += len(out)
        return out

    async def run(self, *, task_status: trio.TaskStatus[LiveEdits] = trio.TASK_STATUS_IGNORED) -> None:
        """Consume the runtime's events until its subscription closes (the runtime closed) or
        this task is cancelled; then close the stores. Reports readiness once subscribed, so
        every event after ``await nursery.start(live.run)`` is seen."""
        try:
            with self.rt.subscribe() as events:
                self.subscribed.set()
                task_status.started(self)
                async for ev in events:
                    try:
                        await self.record_event(ev)
                    except ClosedError:
                        return
                    except CodexError as exc:  # one bad item never stops the feed
                        log.warning("edit ledger: could not record %s of thread %s: %s",
                                    ev.kind, ev.thread_id, exc.message)
                    except Exception as exc:  # nor does a malformed one (this task runs in serve's nursery)
                        log.warning("edit ledger: could not record %s of thread %s: %s",
                                    ev.kind, ev.thread_id, type(exc).__name__)
        finally:
            self.close()


@contextlib.asynccontextmanager
async def open_live_edits(rt: Any, **kwargs: Any) -> AsyncIterator[LiveEdits]:
    """``async with open_live_edits(rt) as live:`` — :class:`LiveEdits` fed for the block's
    duration; the stores are closed on exit."""
    live = LiveEdits(rt, **kwargs)
    async with trio.open_nursery() as nursery:
        await nursery.start(live.run)
        try:
            yield live
        finally:
            nursery.cancel_scope.cancel()
    live.close()


# ------------------------------------------------------------------------------ serve commands

EDIT_COMMANDS = frozenset(
    {"codex.listEdits", "codex.openReview", "codex.acceptReview", "codex.rejectReview", "codex.undoFile"}
)


def _key_from(obj: Mapping[str, Any], thread_id: str) -> EditKey:
    if obj.get("threadId", thread_id) != thread_id:
        raise EditNotFound("a key of another thread", details={"key": dict(obj)})
    return EditKey(thread_id, str(obj["turnId"]), str(obj["itemId"]), str(obj["path"]))


def _resolve_in(te: ThreadEdits, path: str) -> str:
    return os.path.normpath(os.path.join(te.meta.cwd, path))


def _review_keys(te: ThreadEdits, params: Mapping[str, Any]) -> list[EditKey]:
    tid = te.meta.thread_id
    if params.get("keys"):
        return [_key_from(k, tid) for k in params["keys"]]
    target = _resolve_in(te, params["path"])
    keys = [e.key for e in te.ledger.entries(thread_id=tid, include_undone=False)
            if e.status == "completed" and e.target == target]
    if not keys:
        raise EditNotFound(f"no applied change of {params['path']!r} in thread {tid} to review",
                           details={"threadId": tid, "path": params["path"]})
    return keys


def _open_review(te: ThreadEdits, keys: Sequence[EditKey], params: Mapping[str, Any]) -> ReviewTicket:
    led = te.ledger
    if "sessionId" not in params:
        return led.open_review(keys)
    # The host names the session explicitly (a null stays null: it never borrows the current
    # one, R-EDIT-2). open_review freezes the ledger's session, so bind it for this one call —
    # synchronous, nothing else runs on this ledger in between.
    saved = (led.session_id, led.provider)
    led.rebind_session(params["sessionId"], params.get("provider", led.provider))
    try:
        return led.open_review(keys)
    finally:
        led.rebind_session(*saved)


def _ticket_view(t: ReviewTicket) -> dict[str, Any]:
    return {"ticketId": t.ticket_id, "keys": [k.to_dict() for k in t.keys], "target": t.target,
            "renameSource": t.rename_source, "sessionId": t.session_id, "provider": t.provider,
            "openedAt": t.opened_at}


async def run_edit_command(live: LiveEdits, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run one ``serve`` edit command (``docs/daemon-protocol.md``) and return its result.
    Raises :class:`CodexError` subclasses for ``ok: false`` replies."""
    tid = params["threadId"]
    te = await live.ledger(tid)
    led = te.ledger
    if name == "codex.listEdits":
        if params.get("pendingOnly"):
            entries = led.pending_review(thread_id=tid)
        else:
            entries = led.entries(thread_id=tid)
        if params.get("path"):
            want = _resolve_in(te, params["path"])
            entries = [e for e in entries if want in e.paths]
        return {**te.meta.to_dict(), "historyLoaded": te.history_loaded,
                "entries": [entry_view(led, e, cwd=te.meta.cwd) for e in entries]}
    if name == "codex.openReview":
        return _ticket_view(_open_review(te, _review_keys(te, params), params))
    if name in ("codex.acceptReview", "codex.rejectReview"):
        decide = led.accept if name == "codex.acceptReview" else led.reject
        cps = decide(params["ticketId"])
        return {"ticketId": params["ticketId"], "decision": cps[0].decision if cps else None,
                "sessionId": cps[0].session_id if cps else None,
                "keys": [c.key.to_dict() for c in cps]}
    if name == "codex.undoFile":
        target: EditKey | tuple[str, str]
        if params.get("key"):
            target = _key_from(params["key"], tid)
        else:
            target = (tid, _resolve_in(te, params["path"]))
        receipt = await led.undo_file(target, dry_run=bool(params.get("dryRun")),
                                      allow_outside_workspace=params.get("allowOutsideWorkspace") is True)
        return receipt.to_dict()
    raise UnknownCommand(f"not an edit command: {name}")
