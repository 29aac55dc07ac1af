"""History's value objects and shared rules: results (:class:`ThreadSummary`, :class:`ThreadPage`,
:class:`Transcript`, :class:`MessageCount`, :class:`SubagentView`), the thread index (R-H-6),
the error classification (fallback or not, R-H-2/R-H-3) and the reader's limits and notices.
Part of the history readers; the overview is in :mod:`codexrt._features._history`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Union

import attrs

from codexrt._connection import Connection
from codexrt._io._privacy_store import PrivacyStore
from codexrt._sansio._errors import (
    CHILD_EXITED_PREFIX,
    CliUnavailable,
    CodexError,
    ConfigError,
    rpc_error_kind,
)
from codexrt._sansio._legacy import LegacyProblem
from codexrt._sansio._privacy import PrivacyIndex
from codexrt._sansio._projection import DisplayRecord, TurnGroup, count_messages

__all__ = [
    "ConnectionProvider",
    "DEFAULT_PAGE_LIMIT",
    "DEFAULT_MAX_PAGES",
    "MAX_ANCESTRY_DEPTH",
    "MASKING_NOTICE",
    "PRIVACY_DAMAGED_NOTICE",
    "PrivacySource",
    "is_pagination_unsupported",
    "is_offline_error",
    "ThreadSummary",
    "ThreadPage",
    "Transcript",
    "MessageCount",
    "SubagentView",
    "ThreadIndex",
]


ConnectionProvider = Callable[[], Awaitable[Connection]]

#: Page size asked of the server (the server may return fewer).
DEFAULT_PAGE_LIMIT = 100
#: Upper bound on pages walked for one thread (a runaway cursor never loops forever).
DEFAULT_MAX_PAGES = 100_000
#: ``parentThreadId`` hops walked to verify a sub-agent's ancestry (R-H-8).
MAX_ANCESTRY_DEPTH = 16

MASKING_NOTICE = "secret masking is not guaranteed in this transcript (read from the rollout file)"
#: Shown when the privacy index lost a classification (R-PRIV-2: conservative masking).
PRIVACY_DAMAGED_NOTICE = ("the privacy index is incomplete or damaged: results it cannot classify are masked "
                          "(conservative masking)")

#: Where a reader gets the privacy index (R-PRIV-2): an index, or a blocking loader such as
#: ``Runtime.privacy_index`` / ``PrivacyStore.load`` (called in a worker thread on every
#: transcript read, so answers recorded since the last read are covered), or a
#: :class:`~codexrt._io._privacy_store.PrivacyStore` (its last load reused while the scope's
#: files are the ones it read, else loaded in a worker thread: ``codexrt serve``'s pages).
PrivacySource = Union[PrivacyIndex, PrivacyStore, Callable[[], PrivacyIndex]]

_TOOL_KINDS = frozenset({"commandExecution", "fileChange", "dynamicToolCall", "mcpToolCall", "webSearch",
                         "imageView", "imageGeneration", "plan", "subAgent"})


# ---------------------------------------------------------------------------------------------
# classification of errors


def is_pagination_unsupported(exc: BaseException) -> bool:
    """The server explicitly says the paginated method is unsupported (R-H-1): ``-32601``, or
    a message saying so (0.169.0: ``thread/items/list is not supported yet``)."""
    return rpc_error_kind(exc) == "unsupported"


def is_offline_error(exc: BaseException) -> bool:
    """Errors that permit the offline (rollout) fallback (R-H-3): no CLI, access inactive, or
    the app-server exited — matched on the canonical prefix, so diagnostic suffixes never
    defeat it. Auth, writer and policy errors are never offline errors (R-H-2)."""
    if isinstance(exc, CliUnavailable):
        return True
    if isinstance(exc, ConfigError) and exc.code == "ACCESS_INACTIVE":
        return True
    msg = exc.message if isinstance(exc, CodexError) else str(exc)
    return msg.startswith(CHILD_EXITED_PREFIX)


# ---------------------------------------------------------------------------------------------
# value objects


def _status_type(v: Any) -> str | None:
    if isinstance(v, dict):
        t = v.get("type")
        return t if isinstance(t, str) else None
    return v if isinstance(v, str) else None


@attrs.frozen
class ThreadSummary:
    """One thread of a list. ``message_count`` is ``None`` (unknown) unless a count was made;
    ``version`` is the metadata version counts are checked against (``updatedAt``)."""

    thread_id: str
    name: str | None = None
    preview: str | None = None
    updated_at: int | None = None
    created_at: int | None = None
    status: str | None = None
    parent_thread_id: str | None = None
    path: str | None = None
    history_mode: str | None = None
    source: str = "native"
    message_count: int | None = None
    raw: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def version(self) -> str | None:
        return None if self.updated_at is None else str(self.updated_at)

    @classmethod
    def from_native(cls, t: dict[str, Any]) -> ThreadSummary:
        def s(k: str) -> str | None:
            v = t.get(k)
            return v if isinstance(v, str) else None

        def i(k: str) -> int | None:
            v = t.get(k)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        return cls(thread_id=str(t["id"]), name=s("name"), preview=s("preview"), updated_at=i("updatedAt"),
                   created_at=i("createdAt"), status=_status_type(t.get("status")),
                   parent_thread_id=s("parentThreadId"), path=s("path"), history_mode=s("historyMode"),
                   source="native", raw=t)

    def to_json(self) -> dict[str, Any]:
        return {"threadId": self.thread_id, "name": self.name, "preview": self.preview,
                "updatedAt": self.updated_at, "createdAt": self.created_at, "status": self.status,
                "parentThreadId": self.parent_thread_id, "path": self.path, "historyMode": self.history_mode,
                "source": self.source, "messageCount": self.message_count}


@attrs.frozen
class ThreadPage:
    """One page of a thread list (R-H-6). ``next_cursor`` is opaque (pass it back verbatim).
    ``partial``: this page is known not to be the whole list — more pages exist, the answer had
    no ``nextCursor`` field at all, or malformed entries were skipped. ``notices``: what the
    user should be told about entries left out (legacy: rollout files that are not regular
    files, lead outside ``CODEX_HOME`` or whose head could not be read — one line per file)."""

    threads: tuple[ThreadSummary, ...]
    next_cursor: Any
    partial: bool
    source: str
    skipped: int = 0
    notices: tuple[str, ...] = ()


@attrs.frozen
class Transcript:
    """A whole thread projected to display records, from **one** source (R-H-3).

    ``source``: ``native`` or ``legacy``. ``complete``: every page was read to its end (False
    when a page ended without a continuation cursor field or a turn's items were only a
    summary). ``notices``: what the user should be told (fallback reason, masking).
    ``pagination``: ``paged`` or ``fullRead`` (the server does not paginate this thread) or
    ``None`` for legacy. ``problems``: skipped rollout lines (legacy only).
    """

    thread_id: str
    source: str
    turns: tuple[TurnGroup, ...]
    thread: dict[str, Any] | None = None
    complete: bool = True
    notices: tuple[str, ...] = ()
    pagination: str | None = None
    fallback_reason: str | None = None
    problems: tuple[LegacyProblem, ...] = ()
    wrappers: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    def records(self) -> list[DisplayRecord]:
        return [r for g in self.turns for r in g.records]

    @property
    def message_count(self) -> int | None:
        """R-H-7 on this transcript: unknown (None) unless it is complete."""
        return count_messages(self.records()) if self.complete else None


@attrs.frozen
class MessageCount:
    """The answer of one count (R-H-7). ``count`` is ``None`` when unknown — never 0 for a
    failure. ``reason`` says why it is unknown (``error``, ``budget``, ``incomplete``,
    ``unavailable``). ``stale``: the thread's metadata version differs from the one the request
    expected (the caller should drop it for that list row)."""

    thread_id: str
    count: int | None
    version: str | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None
    cached: bool = False
    stale: bool = False
    active: bool = False

    @property
    def known(self) -> bool:
        return self.count is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"threadId": self.thread_id, "messageCount": self.count, "known": self.known,
                               "version": self.version, "reason": self.reason, "cached": self.cached,
                               "stale": self.stale, "active": self.active}
        if self.error is not None:
            out["error"] = self.error
        return out


@attrs.frozen
class SubagentView:
    """A child thread verified through its ``parentThreadId`` ancestry (R-H-8).

    ``ancestry`` lists the thread ids from the child's parent upwards as far as they were
    walked. ``status`` is the child's own (``active`` thread → ``inProgress``; else its latest
    turn's status; ``unknown`` when neither says) — never its parent's."""

    thread: dict[str, Any]
    parent_thread_id: str | None
    ancestry: tuple[str, ...]
    relation_verified: bool
    status: str


# ---------------------------------------------------------------------------------------------
# thread index (R-H-6)


class ThreadIndex:
    """Known thread records merged across list pages (R-H-6, R-H-7 merge rules).

    * upsert by thread id; a record never replaces a *newer* one (``updatedAt``);
    * an empty (or metadata-only) page never clears anything: absence is not deletion;
    * local deletes (:meth:`forget`) and local renames (:meth:`rename`) survive later pages;
    * a count is attached only to the version it was made for; a newer record never inherits
      an older record's count.
    """

    def __init__(self) -> None:
        self._records: dict[str, ThreadSummary] = {}
        self._deleted: set[str] = set()
        self._names: dict[str, str | None] = {}
        self._counts: dict[str, tuple[str | None, int]] = {}

    def __len__(self) -> int:
        return len(self._records)

    def merge(self, threads: Iterable[ThreadSummary]) -> list[str]:
        """Merge a page; returns the ids whose metadata version changed."""
        changed = []
        for t in threads:
            if t.thread_id in self._deleted:
                continue
            old = self._records.get(t.thread_id)
            if old is not None and old.updated_at is not None and t.updated_at is not None \
                    and t.updated_at < old.updated_at:
                continue  # a stale page: the newer record stays
            if old is None or old.version != t.version:
                changed.append(t.thread_id)
            self._records[t.thread_id] = t
        return changed

    def forget(self, thread_id: str) -> None:
        self._deleted.add(thread_id)
        self._records.pop(thread_id, None)

    def rename(self, thread_id: str, name: str | None) -> None:
        self._names[thread_id] = name

    def set_count(self, thread_id: str, version: str | None, count: int | None) -> None:
        if count is None:
            return  # unknown is never recorded as a number
        self._counts[thread_id] = (version, count)

    def get(self, thread_id: str) -> ThreadSummary | None:
        t = self._records.get(thread_id)
        if t is None:
            return None
        name = self._names.get(thread_id, t.name) if thread_id in self._names else t.name
        c = self._counts.get(thread_id)
        count = c[1] if c is not None and c[0] == t.version else None
        return attrs.evolve(t, name=name, message_count=count)

    def threads(self) -> list[ThreadSummary]:
        """Known threads, newest first."""
        out = [self.get(k) for k in self._records]
        return sorted((t for t in out if t is not None), key=lambda t: (t.updated_at or 0), reverse=True)
