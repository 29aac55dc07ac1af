"""The :class:`Projector`: incremental, deduplicating projection of one thread (R-H-1, R-H-4).

A facade over collaborating parts: the :class:`~._store.RecordStore` (entries per turn), the
native path (:class:`~._native_feed.NativeFeed`), the legacy path
(:class:`~._legacy_feed.LegacyFeed`) and the wrapper replay (:class:`~._replay.WrapperReplay`,
R-H-5), which the reading methods here put together."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._legacy import LegacyRecord
from .._paging import RawPageData
from .._wrappers import Attribution
from ._legacy_feed import LegacyFeed
from ._native_feed import NativeFeed, plain_page_records
from ._records import DisplayRecord, ErrorRecord, ImageSource, TurnGroup
from ._replay import ReplayLog, WrapperReplay, _Resolution
from ._store import RecordStore, _Entry, _Turn


class Projector:
    """Incremental, deduplicating projection of one thread (R-H-1, R-H-4).

    Native feeding: :meth:`add_native_turn` (a ``Turn`` of ``thread/turns/list`` or
    ``thread/read``), :meth:`add_native_items` (one page or slice of items),
    :meth:`add_native_item` (``item/started``/``item/completed``), :meth:`add_native_entries`
    (``thread/items/list`` data), :meth:`add_delta`, :meth:`turn_status`.
    Legacy feeding: :meth:`add_legacy_record` (records in file order).
    Reading: :meth:`records` (flat, in order), :meth:`turns` (grouped). One projector is one
    source: never feed native and legacy into the same projector (R-H-3: no splicing).

    ``redact`` (optional) is applied to every displayed text (user/assistant text, reasoning,
    commands and their output, tool text blocks) — a text-level hook, e.g. for known secret
    values. ``mask`` (optional) maps each finished display record to the record to show (same
    type) — the record-level hook for privacy-index masking (R-PRIV-2), which needs a record's
    identity (thread, turn, call id) and kind, not just its text: pass
    ``codexrt._sansio._privacy.Masker(index).mask``. Both apply in :meth:`records`/:meth:`turns`,
    ``redact`` first.
    """

    def __init__(self, thread_id: str | None = None, *, redact: Callable[[str], str] | None = None,
                 mask: Callable[[Any], Any] | None = None) -> None:
        self._mask = mask
        self._store = RecordStore(thread_id, redact=redact)
        self._native = NativeFeed(self._store)
        self._log = ReplayLog()
        self._legacy = LegacyFeed(self._store, self._log)
        self._replay = WrapperReplay(self._store, self._log)

    @property
    def thread_id(self) -> str | None:
        """The session thread id given, or (legacy) read from the rollout's ``session_meta``."""
        return self._store.thread_id

    @thread_id.setter
    def thread_id(self, value: str | None) -> None:
        self._store.thread_id = value

    def __repr__(self) -> str:
        return f"<Projector thread={self.thread_id} turns={len(self._store.order)} entries={len(self._store.entries)}>"

    # -- feeding -----------------------------------------------------------------------------

    def turn_status(
        self,
        turn_id: str,
        status: str,
        *,
        started_at: int | None = None,
        completed_at: int | None = None,
        error: Any = None,
    ) -> None:
        """Record a turn's status (native ``TurnStatus`` or a synonym) and times (seconds).

        ``interrupted``/``failed`` closes that turn's still-open items at read time; a failed
        turn's ``error`` (``TurnError``) becomes an :class:`ErrorRecord` at the turn's end.
        """
        self._store.turn_status(turn_id, status, started_at=started_at, completed_at=completed_at, error=error)

    def add_native_turn(self, turn: dict[str, Any], *, prepend: bool = False, items_follow: bool = False) -> None:
        """Upsert a native ``Turn`` and its ``items``. ``prepend=True`` for pages read newest
        first (``thread/turns/list`` descending) so turns stay in chronological order.

        ``items_follow=True``: the caller feeds these items again afterwards (``thread/items/list``
        entries: :meth:`HistoryReader.read_thread`), whose copies replace them; the records of
        the turn's plain messages are then made only for those no later copy replaced, at
        read time (issue 34: each was projected twice). What the projector shows is the same
        either way; the items must not change until then."""
        self._native.add_native_turn(turn, prepend=prepend, items_follow=items_follow)

    def add_native_turns(self, turns: Iterable[Any] | RawPageData, *, items_follow: bool = False) -> None:
        """:meth:`add_native_turn` of each object of a ``thread/turns/list`` page's ``data``
        (other values skipped), decoded or as a walk's
        :class:`~codexrt._sansio._paging.RawPageData` (decoded here: into structs when every turn
        comes without items, as ``itemsView: "notLoaded"`` asks, issue 34)."""
        self._native.add_native_turns(turns, items_follow=items_follow)

    @classmethod
    def page_records(cls, thread_id: str | None, entries: Sequence[Any], *,
                     redact: Callable[[str], str] | None = None,
                     mask: Callable[[Any], Any] | None = None) -> list[DisplayRecord]:
        """The records of one ``thread/items/list`` page on its own: what a fresh projector
        fed only ``entries`` (non-objects skipped) gives from :meth:`records`. A page of plain
        messages is projected directly, without the record store (issue 34,
        :func:`~._native_feed.plain_page_records`); any other page takes the general path."""
        entries = [e for e in entries if isinstance(e, dict)]
        fast = plain_page_records(entries, thread_id, redact=redact, mask=mask)
        if fast is not None:
            return fast
        proj = cls(thread_id, redact=redact, mask=mask)
        proj.add_native_entries(entries)
        return proj.records()

    def add_native_entries(self, entries: Iterable[dict[str, Any]] | RawPageData) -> None:
        """``thread/items/list`` data: ``{turnId, item, startedAtMs, completedAtMs,
        outputDeferred}`` entries (consecutive entries of one turn are merged as one batch),
        decoded or as a walk's :class:`~codexrt._sansio._paging.RawPageData` (decoded here:
        into structs when every entry is a message new to the store, issue 34)."""
        self._native.add_native_entries(entries)

    def add_native_items(self, turn_id: str, items: Sequence[dict[str, Any]]) -> None:
        """Upsert an ordered slice of one turn's completed items (a page or a turn's ``items``)."""
        self._native.add_native_items(turn_id, items)

    def add_native_item(
        self,
        turn_id: str,
        item: dict[str, Any],
        *,
        completed: bool = True,
        started_at_ms: int | None = None,
        completed_at_ms: int | None = None,
        received_at_ms: int | None = None,
    ) -> None:
        """One live item (``item/completed``, or ``item/started`` with ``completed=False``).
        ``received_at_ms`` is when it reached us (the ``recorded`` compaction time source)."""
        self._native.add_native_item(turn_id, item, completed=completed, started_at_ms=started_at_ms,
                                     completed_at_ms=completed_at_ms, received_at_ms=received_at_ms)

    def add_delta(self, turn_id: str, item_id: str, delta: str, *, field: str = "text") -> None:
        """A streaming fragment (``field``: ``text`` for agentMessage, ``output`` for a command,
        ``summary``/``content`` for reasoning). Ignored once the item has a completed snapshot;
        never completes anything (R-H-4)."""
        self._native.add_delta(turn_id, item_id, delta, field=field)

    def add_local_submission(self, client_id: str, text: str, *, images: Sequence[ImageSource] = ()) -> None:
        """A submission this host sent (or queued) that the native history does not show yet
        (R-H-1): a :class:`UserMessage` ``local:<client_id>`` (``status="inProgress"``,
        ``source="local"``) in its own trailing turn ``local-turn:<client_id>``; its id takes a
        ``+`` for each native item already holding that one. Nothing when a native user message
        with that ``clientId`` is already known; a native one arriving later takes its place
        (never both)."""
        self._native.add_local_submission(client_id, text, images=images)

    def add_legacy_record(self, rec: LegacyRecord) -> None:
        """Feed one rollout record (in file order)."""
        self._store.settle()  # the legacy path reads stored records
        self._replay.invalidate()
        self._legacy.add_record(rec)

    # -- reading -----------------------------------------------------------------------------

    def wrapper_attributions(self) -> dict[str, Attribution]:
        """The engine's decision for every legacy exec wrapper that has an output, by the
        wrapper's call id (R-H-5). A wrapper without an output is kept whole and not listed."""
        self._store.settle()  # the replay reads stored records
        return dict(self._replay.resolve().attributions)

    def turns(self) -> list[TurnGroup]:
        """Every turn in order with its projected records."""
        self._store.settle()
        out = []
        active = self._replay.active()
        res = self._replay.resolve() if active else _Resolution({}, set(), {}, {})
        order = self._store.order
        local = [tid for tid in order if tid.startswith("local-turn:")]
        if local:
            order = [tid for tid in order if not tid.startswith("local-turn:")] + local
        for tid in order:
            t = self._store.turns[tid]
            # a rollout turn still open at the end of the file: a killed writer or one still
            # writing — the file cannot tell, so it is `unknown`, never shown live (R-H-4)
            shown = "unknown" if self._legacy.fed and t.status == "inProgress" else None
            if not active:  # nothing replaced, hidden, updated or added (the native path)
                recs = self._store.finished(t, shown)
            else:
                recs = self._replayed(t, shown, res)
            if t.status == "failed" and t.error:
                msg = t.error.get("message") if isinstance(t.error, dict) else str(t.error)
                recs.append(ErrorRecord(id=f"turn-error:{tid}", thread_id=self.thread_id, turn_id=tid,
                                        status="failed", message=str(msg or ""),
                                        info=t.error.get("codexErrorInfo") if isinstance(t.error, dict) else None))
            if not recs and shown is None and t.status == "unknown" and tid.startswith("legacy-turn-"):
                continue  # a made-up turn holding only injected context (older files): nothing to show
            if self._mask is not None:
                recs = [self._mask(r) for r in recs]
            out.append(TurnGroup(tid, shown or t.status, tuple(recs), t.started_at, t.completed_at, t.error))
        return out

    def _replayed(self, t: _Turn, shown: str | None, res: _Resolution) -> list[Any]:
        """The records of turn ``t`` after the wrapper replay (R-H-5): its wrappers replaced,
        hidden or kept with their previews, its commands updated by polls."""
        tid, hidden, repl, updates = t.turn_id, res.hidden, res.repl, res.updates
        recs: list[Any] = []
        for e in self._store.visible(t):
            if e.key in repl:
                recs.extend(self._store.finish(self._replay.updated(_Entry(r.id, r, True, False, "response", tid),
                                                                    updates.get(r.id, ())), t, shown)
                            for r in repl[e.key])
            if e.key not in hidden:
                recs.append(self._store.finish(self._replay.updated(e, updates.get(e.key, ())), t, shown))
                recs.extend(self._store.finish(_Entry(r.id, r, True, False, "response", tid), t, shown)
                            for r in res.after.get(e.key, ()))
                if e.key in self._log.wrappers:
                    recs.extend(self._store.finish(_Entry(r.id, r, True, False, "response", tid), t, shown)
                                for r in self._replay.kept_previews(e.key, tid))
        return recs

    def records(self) -> list[DisplayRecord]:
        """All display records, turn by turn, in order."""
        return [r for g in self.turns() for r in g.records]
