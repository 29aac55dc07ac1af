"""History readers on Trio: native pages, thread lists, message counts, legacy fallback (R-H-1 … R-H-8).

Why this module exists
----------------------
A host shows a user's threads (thousands of turns, rollout files of hundreds of MB) while a
send may be running. Reading must never disturb that send, never resume a thread, never take
the writer, and be honest about what it does not know. The sans-IO half — rollout parser,
display projection, wrapper engine — lives in ``codexrt._sansio``; this module does the I/O.

Shape of the API (a decision, see ``docs/history.md``): **nursery-scoped**.
``async with open_history_reader(rt) as reader:`` gives a :class:`HistoryReader` whose
background work (shared in-flight message counts) runs in the reader's own nursery, so a
count that several callers wait for is never cancelled because its first caller gave up, and
nothing outlives the block. The first argument is a :class:`~codexrt._runtime._runtime.Runtime`, a
*connection provider* (``async () -> Connection``), or ``None`` (offline: rollout files only).

Theory of operation
-------------------
*Reads never queue.* A reader gets its connection from ``await rt.ensure_started()`` and calls
``conn.call(...)`` directly: no send FIFO, no ``thread/resume``, no ``turn/start`` (R-D-1).

*Native load* (:meth:`HistoryReader.read_thread`, R-H-1): ``thread/read`` (metadata), then
``thread/turns/list`` (ascending, turn statuses, ``itemsView: "notLoaded"``: no items) and
``thread/items/list`` (ascending, every item), each walked with the server's opaque cursors
passed back verbatim; every page goes into one :class:`~codexrt._sansio._projection.Projector`,
which upserts by native id/clientId, so overlapping pages never duplicate. Each page's cursor is
read first (``peek_page``) and its entries decoded after the next page is asked for — into
structs when all are plain messages new to the projector, in shapes the structs model
(``NativeFeed._append_plain``). Only when the server
says pagination is unsupported (JSON-RPC ``-32601``, or a message saying "not supported" — the
real server's answer for legacy-mode threads) is one ``thread/read includeTurns`` done instead,
into a fresh projector.

*Legacy, as a whole source* (R-H-3): the rollout file is read (streaming, in a worker thread)
and shown *instead of* the native history when access is inactive, when no CLI/transport is
available (``CliUnavailable``, or an error whose message starts with the canonical
``codex app-server exited`` prefix, whatever diagnostic suffix follows), or when the native
projection misses calls, plaintext reasoning or pre-compaction turns that the rollout identifies
— by identity, never by counts (:func:`missing_identities`; checked only for threads whose
native pagination is unsupported: legacy-mode threads, whose native items omit commands). One load never splices the two. Every other error — auth,
writer, policy, timeouts, malformed answers — is raised, never turned into a fallback (R-H-2).

*Masking* (R-PRIV-2, R-H-3): every transcript and page, native or legacy, goes through the
privacy index's :class:`~codexrt._sansio._privacy.Masker` (the projector's record-level ``mask``
hook). The index is loaded (in a worker thread) on each read, from ``privacy=`` — for a
``Runtime``, ``rt.privacy_index``. Without an index, legacy transcripts say that secret masking is
not guaranteed (:data:`MASKING_NOTICE`); a damaged index masks conservatively and says so.

*Counting* (R-H-7): :class:`MessageCounter` is host-level (share one between readers). A count
walks native pages and counts the user+assistant messages of their display projection
(``count_messages``), without building the records where the pages allow it
(:class:`~codexrt._sansio._projection.MessageTally`, same number); at most ``max_concurrent`` (4) run at once (a ``CapacityLimiter``);
identical requests (thread id + expected metadata version) share one in-flight count; each
count has a 110 s budget, after which it stops and is *unknown* (a retry starts afresh). Only
known counts are cached (≤ 128 entries, 60 s TTL on Trio's clock, LRU), never for an active
thread, dropped when the thread's metadata version changes. A page without a continuation
cursor field, a cursor loop, a turn whose items are only a summary, or any error → unknown
(``None``), never 0, never a switch to the rollout file.

*Thread list* (R-H-6): :class:`ThreadIndex` merges pages (upsert by id, newer ``updatedAt``
wins, local deletes and renames kept); an empty page never clears known records. The legacy
list (rollout files + ``session_index.jsonl`` names, top-level threads only, through the R-H-9
session index cache of :mod:`codexrt._io._session_index`) is used only when access is inactive.

*Sub-agents* (R-H-8): :meth:`HistoryReader.read_subagent` walks ``parentThreadId`` upwards
(bounded) before anything is shown; the child's status comes from the child's own thread and
turns, never from its parent's.

*Where it lives*: this module holds the reader and serve's history commands, and re-exports
the rest: value objects, the thread index and the error rules in
:mod:`codexrt._features._history_values`, rollout-file history in
:mod:`codexrt._features._history_legacy`, counting and the page walk in
:mod:`codexrt._features._history_count`, the JSON forms in
:mod:`codexrt._features._history_json`, serve's cache of answered pages in
:mod:`codexrt._features._history_pages`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgspec
import trio

from codexrt._io._retry import call_read
from codexrt._io._util import unwrap_single_group
from codexrt._connection import Connection
from codexrt._features._paging import CursorRepeated, CursorWalk
from codexrt._sansio._paging import page_is_partial
from codexrt._sansio._errors import (
    AccessInactive,
    CodexError,
    HistoryReadFailed,
    malformed_data,
    malformed_data_is_typed,
    RelationUnverified,
    RemoteProtocolError,
    RpcError,
    ThreadNotFound,
)
from codexrt._io._history_files import RolloutInfo, find_rollout
from codexrt._io._codex_home import resolve_codex_home
from codexrt._io._privacy_store import PrivacyStore
from codexrt._sansio._privacy import Masker, PrivacyIndex
from codexrt._sansio._wire import BoundedText, decode_json
from codexrt._sansio._projection import (PAGE_MAX_DEPTH, RECORDS_DEPTH, Projector, _norm_status, decode_page,
                                         page_records_json)
from codexrt._sansio._redact import Redactor
from codexrt._features._history_values import (
    ConnectionProvider,
    DEFAULT_MAX_PAGES,
    DEFAULT_PAGE_LIMIT,
    MASKING_NOTICE,
    MAX_ANCESTRY_DEPTH,
    MessageCount,
    PRIVACY_DAMAGED_NOTICE,
    PrivacySource,
    SubagentView,
    ThreadIndex,
    ThreadPage,
    ThreadSummary,
    Transcript,
    is_offline_error,
    is_pagination_unsupported,
    _status_type,
)
from codexrt._features._history_legacy import (
    LocalSubmission,
    legacy_thread_list,
    load_rollout_transcript,
    local_submissions,
    missing_identities,
)
from codexrt._features._history_count import MessageCounter, _full_read, _paged_read, _walk
from codexrt._features._history_ahead import PageReadAhead, read_ahead_timeout
from codexrt._features._history_pages import CachedPage, PageKey, PageRecordsCache, page_request
from codexrt._features._history_json import (CLIPPED_VALUE, MAX_VALUE_DEPTH, plain_page_json, record_to_json,
                                             transcript_to_json)

__all__ = [
    "ConnectionProvider",
    "HistoryReader",
    "MessageCount",
    "MessageCounter",
    "SubagentView",
    "ThreadIndex",
    "ThreadPage",
    "ThreadSummary",
    "Transcript",
    "open_history_reader",
    "is_offline_error",
    "is_pagination_unsupported",
    "load_rollout_transcript",
    "LocalSubmission",
    "legacy_thread_list",
    "local_submissions",
    "record_to_json",
    "transcript_to_json",
    "CLIPPED_VALUE",
    "MAX_VALUE_DEPTH",
    "MASKING_NOTICE",
    "PRIVACY_DAMAGED_NOTICE",
    "PrivacySource",
]


log = logging.getLogger("codexrt.history")


# ---------------------------------------------------------------------------------------------
# the reader


class HistoryReader:
    """Read-only history of one runtime (or provider). Create with :func:`open_history_reader`."""

    def __init__(self, nursery: trio.Nursery, provider: ConnectionProvider | None, *,
                 codex_home: str | os.PathLike[str] | None = None, inactive: bool = False,
                 redact: Callable[[str], str] | None = None, counter: MessageCounter | None = None,
                 page_limit: int = DEFAULT_PAGE_LIMIT, max_pages: int = DEFAULT_MAX_PAGES,
                 privacy: PrivacySource | None = None, page_cache: PageRecordsCache | None = None,
                 read_ahead: PageReadAhead | None = None, env: Mapping[str, str] | None = None) -> None:
        self._nursery = nursery
        self._provider = provider
        self._home_given, self._home_env = codex_home, env
        self.inactive = inactive or provider is None
        self.redact = redact
        self.privacy = privacy
        self.counter = counter if counter is not None else MessageCounter(nursery)
        self.page_limit = page_limit
        self.max_pages = max_pages
        #: records of pages already answered by :meth:`read_page` (issue 34); None: none kept
        self.page_cache = page_cache
        #: serve's read-ahead of history walks (issue 34); None: every page is read when asked
        self.read_ahead = read_ahead
        self.index = ThreadIndex()
        #: ``thread_id -> [LocalSubmission]``: the host's unconfirmed sends (R-H-1); set by
        #: :func:`open_history_reader` for a ``Runtime`` source.
        self.local_source: Callable[[str], list[LocalSubmission]] | None = None

    def __repr__(self) -> str:
        return f"<HistoryReader inactive={self.inactive} known={len(self.index)}>"

    @functools.cached_property
    def codex_home(self) -> Path:
        """The ``CODEX_HOME`` of the rollout files read (``codex_home``, else ``env``'s, else
        ``~/.codex``), found on first use: a page read never needs it (issue 34)."""
        return resolve_codex_home(self._home_given, self._home_env)

    async def _masker(self) -> tuple[Masker | None, tuple[str, ...]]:
        """The privacy-index masking of this read (R-PRIV-2) and the notices it implies: no
        index → no masker (legacy reads then carry :data:`MASKING_NOTICE`); an index that lost
        a classification, or a loader that failed → conservative masking and
        :data:`PRIVACY_DAMAGED_NOTICE`."""
        src = self.privacy
        if src is None:
            return None, ()
        if isinstance(src, PrivacyIndex):
            index = src
        else:
            try:
                held = src.cached_index() if isinstance(src, PrivacyStore) else None
                index = held if held is not None else await trio.to_thread.run_sync(
                    src.load if isinstance(src, PrivacyStore) else src)
            except Exception as exc:  # an index we cannot read must not unmask anything
                log.warning("privacy index could not be loaded (%s); masking conservatively", type(exc).__name__)
                index = PrivacyIndex("unavailable", problems=[f"index could not be loaded ({type(exc).__name__})"],
                                     conservative=True)
        return Masker(index), ((PRIVACY_DAMAGED_NOTICE,) if index.conservative else ())

    def _start_masker(self) -> Callable[[], Awaitable[tuple[Masker | None, tuple[str, ...]]]]:
        """Start :meth:`_masker` now, on the reader's nursery, and return the wait for its
        result: the index (read afresh for every read, R-PRIV-2, on a worker thread) loads
        while a request is in flight instead of after it (issue 34). Not waited for, it ends
        on its own; an error it met is raised by the wait. An index at hand (none, an index, a
        :class:`PrivacyStore` whose files are still the ones its last load read:
        :func:`_index_at_hand`) answers at once, without the task and the thread."""
        at_hand, held = _index_at_hand(self.privacy)
        if at_hand:
            masking = (None, ()) if held is None else (
                Masker(held), (PRIVACY_DAMAGED_NOTICE,) if held.conservative else ())

            async def ready() -> tuple[Masker | None, tuple[str, ...]]:
                return masking

            return ready
        loaded: list[tuple[Masker | None, tuple[str, ...]] | Exception] = []
        done = trio.Event()

        async def load() -> None:
            try:
                loaded.append(await self._masker())
            except Exception as exc:  # raised by the wait, never in the reader's nursery
                loaded.append(exc)
            finally:
                done.set()

        self._nursery.start_soon(load)

        async def wait() -> tuple[Masker | None, tuple[str, ...]]:
            await done.wait()
            got = loaded[0] if loaded else await self._masker()  # empty: the load was cancelled
            if isinstance(got, Exception):
                raise got
            return got

        return wait

    async def _conn(self) -> Connection:
        if self._provider is None:
            raise AccessInactive("no runtime: history is read from rollout files only")
        return await self._provider()

    # -- thread list (R-H-6) ---------------------------------------------------------------

    @malformed_data_is_typed("history data")
    async def list_threads(self, *, cursor: Any = None, limit: int | None = None, **filters: Any) -> ThreadPage:
        """One page of ``thread/list`` (``source="native"``), merged into :attr:`index`. In
        inactive mode, the legacy list (every rollout file, one page, ``source="legacy"``)."""
        if self.inactive:
            notices: list[str] = []
            rows = await trio.to_thread.run_sync(
                functools.partial(legacy_thread_list, self.codex_home, limit=limit, notices=notices))
            self.index.merge(rows)
            return ThreadPage(tuple(rows), None, partial=False, source="legacy", notices=tuple(notices))
        conn = await self._conn()
        params: dict[str, Any] = {k: v for k, v in filters.items() if v is not None}
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = limit
        res = await call_read(conn, "thread/list", params)
        if not isinstance(res, dict) or not isinstance(res.get("data"), list):
            raise RemoteProtocolError("thread/list answered without a data list", details={"method": "thread/list"})
        rows, skipped = [], 0
        for t in res["data"]:
            if isinstance(t, dict) and isinstance(t.get("id"), str):
                rows.append(ThreadSummary.from_native(t))
            else:
                skipped += 1
        for tid in self.index.merge(rows):
            self.counter.invalidate(tid)
        partial = page_is_partial(res) or skipped > 0
        return ThreadPage(tuple(rows), res.get("nextCursor"), partial=partial, source="native", skipped=skipped)

    @malformed_data_is_typed("history data")
    async def list_all_threads(self, *, limit: int | None = None, **filters: Any) -> ThreadPage:
        """Every page (up to ``limit`` threads) as one page; ``partial`` if stopped early."""
        rows: list[ThreadSummary] = []
        walk = CursorWalk("thread/list", max_pages=self.max_pages)  # the one cursor rule set
        partial = False
        source = "native"
        notices: list[str] = []
        while True:
            want = None if limit is None else max(1, min(self.page_limit, limit - len(rows)))
            if self.inactive:
                want = limit  # the legacy list is one page: read only the heads it needs
            page = await self.list_threads(cursor=walk.cursor, limit=want, **filters)
            source = page.source
            rows.extend(page.threads)
            notices.extend(page.notices)
            if page.next_cursor is not None and limit is not None and len(rows) >= limit:
                partial = True
                break
            try:
                more = walk.advance({"nextCursor": page.next_cursor})
            except CursorRepeated:
                partial = True  # a loop: what was read so far, marked partial
                break
            if not more:
                partial = partial or page.partial or walk.stop == "pageLimit"
                break
        if limit is not None:
            rows = rows[:limit]
        return ThreadPage(tuple(rows), None, partial=partial, source=source, notices=tuple(notices))

    # -- message counts (R-H-7) ------------------------------------------------------------

    @malformed_data_is_typed("history data")
    async def count_messages(self, thread_id: str, *, expected_version: str | None = None) -> MessageCount:
        """R-H-7 count over native pages; in inactive mode, over the rollout file (the legacy
        source is then the whole source of this host). Never 0 for unknown."""
        if self.inactive:
            return await self._count_rollout(thread_id)
        assert self._provider is not None
        res = await self.counter.count(thread_id, self._provider, expected_version=expected_version)
        t = self.index.get(thread_id)
        if t is not None and not res.stale and res.version == t.version:
            self.index.set_count(thread_id, res.version, res.count)
        return res

    async def _count_rollout(self, thread_id: str) -> MessageCount:
        """R-H-7 over the rollout file. The file of a listed row is taken from the list (one
        ``stat``), not found again by a scan of the whole home: counting the 50 rows of a list
        over 20,000 rollouts costs 50 file reads, not 50 scans. A file that cannot be read is
        an unknown count with its error, never a failure of the other counts."""
        row = self.index.get(thread_id)

        def locate() -> tuple[str, int] | None:
            if row is not None and row.source == "legacy" and row.path:
                try:
                    return row.path, int(os.stat(row.path).st_mtime)
                except OSError:
                    pass
            info = find_rollout(self.codex_home, thread_id)
            return None if info is None else (str(info.path), int(info.mtime))

        found = await trio.to_thread.run_sync(locate)
        if found is None:
            return MessageCount(thread_id, None, reason="unavailable",
                                error={"code": "THREAD_NOT_FOUND", "message": f"no rollout file for {thread_id}"})
        path, mtime = found
        try:
            tr = await trio.to_thread.run_sync(lambda: load_rollout_transcript(path, thread_id=thread_id))
        except HistoryReadFailed as exc:
            return MessageCount(thread_id, None, version=str(mtime), reason="error", error=exc.to_dict())
        return MessageCount(thread_id, tr.message_count, version=str(mtime))

    async def count_many(self, thread_ids: Iterable[str]) -> tuple[dict[str, MessageCount], int | None]:
        """Counts of several threads (concurrency bounded by the counter) and their total —
        ``None`` unless every count is known (R-H-7)."""
        ids = list(dict.fromkeys(thread_ids))
        out: dict[str, MessageCount] = {}

        async def one(tid: str) -> None:
            t = self.index.get(tid)
            out[tid] = await self.count_messages(tid, expected_version=t.version if t is not None else None)

        async with trio.open_nursery() as n:
            for tid in ids:
                n.start_soon(one, tid)
        total = sum(c.count for c in out.values() if c.count is not None) \
            if all(c.known for c in out.values()) else None
        return out, total

    # -- transcripts (R-H-1 … R-H-4) -------------------------------------------------------

    @malformed_data_is_typed("history data")
    async def read_thread(self, thread_id: str, *, allow_legacy: bool = True,
                          local: Iterable[LocalSubmission] | None = None) -> Transcript:
        """The whole thread from one source (module doc). ``allow_legacy=False`` never reads the
        rollout file (offline errors are then raised). ``local``: submissions this host sent
        that the native pages may not show yet (R-H-1), reconciled by ``clientId``; default:
        the runtime's own unconfirmed sends when the reader was opened on a ``Runtime``."""
        if local is None and self.local_source is not None:
            local = self.local_source(thread_id)
        subs = list(local or ())
        if self.inactive:
            if not allow_legacy:
                raise AccessInactive("runtime access is inactive and legacy reading is disabled")
            return await self._read_legacy(thread_id, None, "runtime access is inactive")
        try:
            conn = await self._conn()
            return await self._read_native(conn, thread_id, allow_legacy=allow_legacy, local=subs)
        except CodexError as exc:
            if allow_legacy and is_offline_error(exc):
                return await self._read_legacy(thread_id, None, f"the app-server is unavailable ({exc.message})",
                                               original=exc)
            raise

    async def _read_legacy(self, thread_id: str, path: str | None, reason: str,
                           original: CodexError | None = None) -> Transcript:
        masker, privacy_notices = await self._masker()

        def load() -> Transcript | None:
            p: Path | None = Path(path) if path else None
            if p is None or not p.is_file():
                skipped: list[str] = []
                info: RolloutInfo | None = find_rollout(self.codex_home, thread_id, notices=skipped)
                p = info.path if info is not None else None
                if p is None and skipped:  # the thread's file exists but is not one we read
                    raise HistoryReadFailed(f"cannot read the rollout file of thread {thread_id}: {skipped[0]}",
                                            details={"threadId": thread_id})
            if p is None:
                return None
            return load_rollout_transcript(p, thread_id=thread_id, redact=self.redact,
                                           notices=(f"showing the rollout file: {reason}", *privacy_notices),
                                           fallback_reason=reason, mask=masker.mask if masker is not None else None)

        tr = await trio.to_thread.run_sync(load)
        if tr is None:
            if original is not None:
                raise original
            raise ThreadNotFound(f"no rollout file for thread {thread_id} under {self.codex_home}",
                                 details={"threadId": thread_id})
        return tr

    async def _read_native(self, conn: Connection, thread_id: str, *, allow_legacy: bool,
                           local: Sequence[LocalSubmission] = ()) -> Transcript:
        masking = self._start_masker()  # loads while thread/read is in flight
        meta = await call_read(conn, "thread/read", {"threadId": thread_id})
        thread = meta.get("thread") if isinstance(meta, dict) else None
        if not isinstance(thread, dict):
            raise RemoteProtocolError("thread/read answered without a thread", details={"method": "thread/read"})
        masker, privacy_notices = await masking()
        mask = masker.mask if masker is not None else None
        proj = Projector(thread_id, redact=self.redact, mask=mask)
        complete = await _paged_read(conn, thread_id, proj, limit=self.page_limit, max_pages=self.max_pages)
        pagination = "paged"
        if complete is None:  # the server cannot page this thread's history
            pagination = "fullRead"
            proj = Projector(thread_id, redact=self.redact, mask=mask)
            complete = await _full_read(conn, thread_id, proj)
        for sub in local:
            proj.add_local_submission(sub.client_id, sub.text)
        native = Transcript(thread_id=thread_id, source="native", turns=tuple(proj.turns()), thread=thread,
                            complete=complete, pagination=pagination, notices=privacy_notices)
        if pagination == "fullRead" and allow_legacy:
            lacking = await self._legacy_if_lacking(thread_id, thread, native)
            if lacking is not None:
                return lacking
        return native

    async def _legacy_if_lacking(self, thread_id: str, thread: dict[str, Any], native: Transcript) -> Transcript | None:
        """R-H-3 "native projection misses tools, plaintext reasoning or pre-compaction
        records": the rollout wins *whole* only when it identifies calls, reasoning or turns the
        native projection lacks (:func:`missing_identities`) — never by raw counts."""
        path = thread.get("path") if isinstance(thread.get("path"), str) else None
        try:
            legacy = await self._read_legacy(thread_id, path, "the native history of this legacy-mode thread "
                                             "lacks records the rollout file has")
        except CodexError:
            return None  # no rollout file: the native history is all there is
        missing = missing_identities(native, legacy)
        if not missing:
            return None
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return attrs.evolve(legacy, thread=thread, notices=(*legacy.notices, f"the native history lacks: {shown}"))

    @malformed_data_is_typed("history data")
    async def read_page(self, thread_id: str, *, scope: str = "turns", cursor: Any = None,
                        limit: int | None = None, sort_direction: str | None = None) -> dict[str, Any]:
        """One native history page (``scope`` ``turns`` or ``items``), cursor passed verbatim,
        with its display records. Pagination-unsupported errors are raised: the caller decides
        (:meth:`read_thread` does the full read)."""
        page = await self._page(thread_id, scope, cursor, limit, sort_direction, encoded=False)
        assert isinstance(page, dict)
        return page

    async def read_page_json(self, thread_id: str, *, scope: str = "turns", cursor: Any = None,
                             limit: int | None = None, sort_direction: str | None = None) -> Any:
        """:meth:`read_page` as JSON text when it can be (a :class:`msgspec.Raw`: the server's
        result text as it came, the records appended; issue 34), else as the dict."""
        page = await self._serve_page(thread_id, scope, cursor, limit, sort_direction)
        return msgspec.Raw(bytes(page)) if type(page) is BoundedText else page

    @malformed_data_is_typed("history data")
    async def _serve_page(self, thread_id: str, scope: str = "turns", cursor: Any = None, limit: int | None = None,
                          sort_direction: str | None = None) -> Any:
        """:meth:`read_page_json` for serve's writer: one object per cached page (its depth
        checked once), a typed page as a :class:`~codexrt._sansio._wire.BoundedText` (never)."""
        return await self._page(thread_id, scope, cursor, limit, sort_direction, encoded=True)

    async def _page(self, thread_id: str, scope: str, cursor: Any, limit: int | None, sort_direction: str | None,
                    *, encoded: bool) -> Any:
        conn = await self._conn()
        method, params, key = page_request(thread_id, scope, cursor, limit, sort_direction)
        masking = self._start_masker()  # loads while the page is in flight
        # an odd cursor is no key (a bool is not one: True == 1 would take cursor 1's page)
        plain_key = all(x is None or type(x) is str or type(x) is int for x in key)
        ahead = self.read_ahead if plain_key else None
        text, timeout = None, None
        if ahead is not None:  # a page read ahead that stalled raises the host's timeout (take)
            asked = trio.current_time()
            text = await ahead.take(key, conn)
            # one that failed otherwise is read again, within what is left of one RPC timeout
            timeout = conn.rpc_timeout - (trio.current_time() - asked)
            if text is None and timeout <= 0:
                raise read_ahead_timeout(method, conn.rpc_timeout)
        raw = text if text is not None else bytes(await call_read(conn, method, params, raw=True, timeout=timeout))
        masker, _ = await masking()
        cache = self.page_cache if plain_key else None
        on_next = None if ahead is None else functools.partial(ahead.answered, self._nursery, conn, key,
                                                                on_text=self._prebuild, from_ahead=text is not None)
        if cursor is not None or on_next is None:
            return self._answer(key, raw, masker, cache, encoded=encoded, on_next=on_next)
        # a first page: the page after it (read ahead for a host that loads whole histories) is
        # asked for once this one is made — the app-server reads it while the host reads this one
        next_cursor: list[Any] = []
        page = self._answer(key, raw, masker, cache, encoded=encoded, on_next=next_cursor.append)
        if next_cursor:
            on_next(next_cursor[0])
        return page

    def _answer(self, key: PageKey, raw: bytes, masker: Masker | None, cache: PageRecordsCache | None, *,
                encoded: bool, on_next: Callable[[Any], None] | None = None) -> Any:
        """The page ``key`` whose result text is ``raw``, masked by ``masker``, with its records
        (from ``cache`` when made from the same text and index); ``on_next`` gets its ``nextCursor``
        before it is projected (read-ahead; for a first page :meth:`_page` passes it on after)."""
        thread_id, method, _, _, sort_direction = key
        index = masker.index if masker is not None else None
        if self.redact is not None:
            cache = None  # a redactor also masks process-wide values: its pages are never cached
        hit = cache.get(key, raw, index) if cache is not None else None
        if hit is not None and encoded and hit.records_json is not None:
            if on_next is not None:
                on_next(hit.next_cursor)
            if hit.reply is None:  # the same page, masked by the same index (its text: ``raw``)
                hit.reply = _with_records(raw, hit.records_json)
            return hit.reply
        if hit is None and encoded and method == "thread/items/list" and _plain_ok(self.redact, masker):
            hit, on_next = _direct_page(raw, thread_id, index, on_next)
            if hit is not None:
                if cache is not None:
                    cache.put(key, hit)
                return hit.reply
        res = decode_json(raw) if raw else None
        if not isinstance(res, dict) or not isinstance(res.get("data"), list):
            raise RemoteProtocolError(f"{method} answered without a data list", details={"method": method})
        if on_next is not None:  # the next page is asked for before this one is projected
            on_next(res.get("nextCursor"))
        if hit is not None:
            records = hit.record_values()
        else:
            mask = masker.mask if masker is not None else None
            # a privacy masker leaves messages as they are (Masker.mask): a page of them is
            # written as JSON directly
            items = method == "thread/items/list"
            direct = items and _plain_ok(self.redact, masker)
            plain = plain_page_json(res["data"], thread_id) if direct else None
            if plain is not None:
                records = plain
            else:
                if items:
                    recs = Projector.page_records(thread_id, res["data"], redact=self.redact, mask=mask)
                else:
                    proj = Projector(thread_id, redact=self.redact, mask=mask)
                    for t in res["data"]:
                        if isinstance(t, dict):
                            proj.add_native_turn(t, prepend=(sort_direction or "desc") == "desc")
                    recs = proj.records()
                records = [record_to_json(r) for r in recs]
            hit = CachedPage(raw, len(res["data"]), index, records, next_cursor=res.get("nextCursor"))
            if cache is not None:
                cache.put(key, hit)
        if encoded and "source" not in res and "records" not in res:
            try:
                records_json = msgspec.json.encode(records)
            except (TypeError, ValueError, OverflowError):
                pass  # a value msgspec cannot write: the dict, which serve writes its own way
            else:
                hit.encoded(records_json)
                hit.reply = _with_records(raw, records_json)
                return hit.reply
        return {**res, "source": "native", "records": records}

    def _prebuild(self, key: PageKey, raw: bytes, ask_next: Callable[[Any], None] | None = None) -> None:
        """A page read ahead has come: make its records and reply now, into the page cache,
        while serve waits for the host's request for it (issue 34). The request then finds
        them when the index it loads afresh is the one used here (the cache's own rule). Only
        when the index is at hand without a load (none, or one whose files did not change);
        a page that cannot be answered is left for the request, which says why. ``ask_next``: as
        :meth:`_answer`'s ``on_next``."""
        cache = self.page_cache
        at_hand, index = _index_at_hand(self.privacy)
        if cache is None or self.redact is not None or not at_hand:
            return
        made = cache.peek(key, raw, index)
        if made is not None:  # made already (a walk read before): only the page after is asked for
            if ask_next is not None:
                ask_next(made.next_cursor)
            return
        with contextlib.suppress(CodexError), malformed_data("history data"):
            self._answer(key, raw, None if index is None else Masker(index), cache, encoded=True, on_next=ask_next)

    # -- sub-agents (R-H-8) ----------------------------------------------------------------

    @malformed_data_is_typed("history data")
    async def read_subagent(self, thread_id: str, parent_thread_id: str | None = None) -> SubagentView:
        """Verify ``thread_id`` descends from ``parent_thread_id`` through ``parentThreadId``
        (bounded walk) and report the child's own status. Raises ``RELATION_UNVERIFIED`` when
        a parent is given and is not an ancestor. Never resumes anything."""
        conn = await self._conn()
        res = await call_read(conn, "thread/read", {"threadId": thread_id})
        thread = (res or {}).get("thread") if isinstance(res, dict) else None
        if not isinstance(thread, dict):
            raise RemoteProtocolError("thread/read answered without a thread", details={"method": "thread/read"})
        ancestry: list[str] = []
        cur = thread.get("parentThreadId")
        verified = False
        while isinstance(cur, str) and cur and len(ancestry) < MAX_ANCESTRY_DEPTH and cur not in ancestry:
            ancestry.append(cur)
            if parent_thread_id is not None and cur == parent_thread_id:
                verified = True
                break
            up = await call_read(conn, "thread/read", {"threadId": cur})
            cur = ((up or {}).get("thread") or {}).get("parentThreadId") if isinstance(up, dict) else None
        if parent_thread_id is not None and not verified:
            raise RelationUnverified(
                f"thread {thread_id} is not a descendant of {parent_thread_id} (ancestry: {ancestry or 'none'})",
                details={"threadId": thread_id, "parentThreadId": thread.get("parentThreadId"), "ancestry": ancestry})
        status = await _own_status(conn, thread)
        return SubagentView(thread=thread, parent_thread_id=thread.get("parentThreadId"), ancestry=tuple(ancestry),
                            relation_verified=verified, status=status)


async def _own_status(conn: Connection, thread: dict[str, Any]) -> str:
    """A sub-agent thread's own status (R-H-8): ``inProgress`` while active, else its latest
    turn's, ``unknown`` when that cannot be read."""
    st = _status_type(thread.get("status"))
    if st == "active":
        return "inProgress"
    try:
        res = await call_read(conn, "thread/turns/list", {"threadId": thread["id"], "limit": 1, "sortDirection": "desc"})
    except RpcError:
        return "unknown"  # unknown means keep querying, never guess (R-H-8)
    data = res.get("data") if isinstance(res, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return _norm_status(data[0].get("status"))
    return "unknown"


@contextlib.asynccontextmanager
async def open_history_reader(
    source: Any = None,
    *,
    codex_home: str | os.PathLike[str] | None = None,
    redact: Callable[[str], str] | None = None,
    counter: MessageCounter | None = None,
    page_limit: int = DEFAULT_PAGE_LIMIT,
    max_pages: int = DEFAULT_MAX_PAGES,
    inactive: bool | None = None,
    privacy: PrivacySource | None = None,
) -> AsyncIterator[HistoryReader]:
    """``async with open_history_reader(rt) as reader:`` (see the module doc).

    ``source``: a :class:`~codexrt._runtime._runtime.Runtime` (its ``ensure_started`` is the provider;
    its ``codex_home`` or else the ``CODEX_HOME`` of its ``env`` — the child's —, its access mode
    and known secrets are used), an ``async () -> Connection`` provider, or ``None`` for rollout
    files only. ``privacy`` is the privacy index
    (:data:`PrivacySource`) whose :class:`~codexrt._sansio._privacy.Masker` is applied to every
    transcript and page, native and legacy (R-PRIV-2, R-H-3); for a ``Runtime`` it defaults to
    ``rt.privacy_index``. Without an index, transcripts read from rollout files carry
    :data:`MASKING_NOTICE`. ``redact`` is a text-level hook (a ``Runtime``'s known secrets).

    An error raised in the ``async with`` body (a reader call's own error, say an unknown
    thread's ``RpcError``) leaves the block as itself, not wrapped in an ``ExceptionGroup`` by
    the reader's nursery.
    """
    from codexrt._runtime._runtime import Runtime

    provider: ConnectionProvider | None
    if isinstance(source, Runtime):
        provider = source.ensure_started
        if codex_home is None and source.config.codex_home:
            codex_home = source.config.codex_home
        env = source.config.env  # the child's CODEX_HOME, when the config gives none
        if inactive is None:
            inactive = source.config.access_mode == "inactive"
        if redact is None and source.config.secrets:
            redact = Redactor(source.config.secrets)
        if privacy is None:
            privacy = source.privacy_index
    else:
        provider, env = source, None
    async with unwrap_single_group(), trio.open_nursery() as nursery:
        reader = HistoryReader(nursery, provider, codex_home=codex_home, inactive=bool(inactive), redact=redact,
                               counter=counter, page_limit=page_limit, max_pages=max_pages, privacy=privacy,
                               env=env)
        if isinstance(source, Runtime):
            rt = source
            reader.local_source = lambda tid: local_submissions(rt, tid)
        try:
            yield reader
        finally:
            nursery.cancel_scope.cancel()


def _index_at_hand(src: PrivacySource | None) -> tuple[bool, PrivacyIndex | None]:
    """``(True, index)`` when ``src``'s privacy index is at hand without a load (none, an
    index, or a store's whose files did not change), else ``(False, None)``."""
    if src is None or isinstance(src, PrivacyIndex):
        return True, src
    index = src.cached_index() if isinstance(src, PrivacyStore) else None
    return index is not None, index


def _plain_ok(redact: Callable[[str], str] | None, masker: Masker | None) -> bool:
    """Whether a page of plain messages may be written as JSON directly: no redactor, and no
    masker or a privacy masker (:meth:`Masker.mask` leaves messages as they are)."""
    return redact is None and (masker is None or type(masker) is Masker)


def _direct_page(raw: bytes, thread_id: str, index: PrivacyIndex | None,
                 on_next: Callable[[Any], None] | None) -> tuple[CachedPage | None, Callable[[Any], None] | None]:
    """The page whose result text is ``raw``, its records made straight from that text when
    it is a page of plain messages (typed, no dict per value: issue 34), with serve's reply;
    else None (the general path runs). Second: ``on_next``, or None once it was called."""
    page = decode_page(raw)
    if page is None or page.has_own_records():
        return None, on_next
    if on_next is not None:  # the next page is asked for before this one is projected
        on_next(page.nextCursor)
    records_json = page_records_json(page, thread_id)
    if records_json is None:
        return None, None
    hit = CachedPage(raw, len(page.data), index, None, records_json, next_cursor=page.nextCursor)
    # the reply in pieces, the page's text not copied (the cache holds it: ``hit.result``)
    hit.reply = BoundedText(_record_chunks(raw, records_json), max(PAGE_MAX_DEPTH, 1 + RECORDS_DEPTH))
    return hit, None


def _record_chunks(result: bytes, records_json: bytes) -> tuple[memoryview, bytes, bytes, bytes]:
    """``{**result, "source": "native", "records": records}`` as pieces of JSON text, from the
    result's own text (an object holding a ``data`` list, neither ``source`` nor ``records``:
    the caller checked; a view of it, not a copy) and the records' text."""
    return memoryview(result)[:len(result.rstrip()) - 1], b',"source":"native","records":', records_json, b"}"


def _with_records(result: bytes, records_json: bytes) -> msgspec.Raw:
    """:func:`_record_chunks` as one text."""
    return msgspec.Raw(b"".join(_record_chunks(result, records_json)))
