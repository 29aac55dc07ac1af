"""The R-H-7 message count: :func:`count_messages` over display records, and
:class:`MessageTally`, the same count over ``thread/items/list`` pages without building them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._native import project_native_item
from ._projector import Projector
from ._records import AssistantMessage, DisplayRecord, UserMessage

def count_messages(records: Iterable[DisplayRecord]) -> int:
    """What R-H-7 counts as a "message": every user message and every assistant message of the
    display projection (commentary included). Reasoning, tools, plans, compactions and errors
    are not messages. A caller counting an incomplete history must report *unknown*, not this
    number (R-H-7) — this helper only counts what it is given."""
    return sum(1 for r in records if isinstance(r, (UserMessage, AssistantMessage)))


class MessageTally:
    """The R-H-7 count of ``thread/items/list`` pages without building display records:
    ``tally.add_native_entries(page)`` per page, then :meth:`count` — always equal to
    ``count_messages(p.records())`` for a :class:`Projector` ``p`` fed the same pages through
    :meth:`Projector.add_native_entries`, and raising where that would raise.

    Per entry it keeps only what decides the count: the item id's last type (message or not)
    and how many times the projector lists the id (an id repeated in a batch before any known
    id is listed twice). Item kinds other than plain messages are still projected
    (:func:`project_native_item`, result dropped) so malformed ones fail exactly as they do
    in the projector. The decoded pages themselves are not kept (a long thread's pages held
    until the end made the count's memory, and the garbage collector's work, grow with the
    thread): per entry only its turn id, item id, kind and ``clientId`` (:attr:`_skel`).

    Shapes it does not model — an entry or item that is not an object, an id or turn id that
    is not a string, one ``clientId`` on two ids (the projector re-keys those) — and any error
    switch it to a real :class:`Projector` (the rare path): the pages seen so far are replayed
    into it as *skeleton* entries (``{"id", "type"}``, plus ``clientId`` for a user message;
    a non-message as an empty ``reasoning`` item), page by page, then the page at hand as it
    came, and every later page too. A skeleton projects to a record with the same key, the
    same message-or-not kind and the same ``clientId``, and the projector's merge depends only
    on those, so its count is the count of the real pages; what the fallback projector raises
    is what a projector fed the real pages raises (the earlier pages projected without error,
    which is why they were tallied)."""

    __slots__ = ("thread_id", "_skel", "_last", "_mult", "_clients", "_proj")

    def __init__(self, thread_id: str | None = None) -> None:
        self.thread_id = thread_id
        # per page: (turnId, item id, "agentMessage" | "userMessage" | "", clientId | None) per entry
        self._skel: list[list[tuple[str, str, str, str | None]]] = []
        self._last: dict[str, bool] = {}  # id -> its last snapshot is a user/assistant message
        self._mult: dict[str, int] = {}  # id -> times it is listed in its turn
        self._clients: dict[str, str] = {}  # clientId -> item id
        self._proj: Projector | None = None

    def __repr__(self) -> str:
        return f"<MessageTally thread={self.thread_id} ids={len(self._last)} projected={self._proj is not None}>"

    @property
    def projected(self) -> bool:
        """True once a page needed the full projector."""
        return self._proj is not None

    def add_native_entries(self, entries: Iterable[Any]) -> None:
        if self._proj is not None:
            self._proj.add_native_entries(entries)
            return
        page = entries if isinstance(entries, list) else list(entries)
        skel: list[tuple[str, str, str, str | None]] = []
        try:
            fast = self._fast(page, skel)
        except Exception:  # the projector decides what (and in which order) fails
            fast = False
        if fast:
            self._skel.append(skel)
            return
        proj = Projector(self.thread_id)
        self._proj = proj
        pages, self._skel = self._skel, []
        self._last, self._mult, self._clients = {}, {}, {}
        for p in pages:
            proj.add_native_entries(_skeleton_entries(p))
        proj.add_native_entries(page)

    def _fast(self, page: list[Any], skel: list[tuple[str, str, str, str | None]]) -> bool:
        """Mirror of ``add_native_entries`` → ``_add_batch`` for the count, appending each
        entry's skeleton to ``skel``; False (state to be discarded) at the first shape it does
        not model."""
        last, mult, clients = self._last, self._mult, self._clients
        keep = skel.append
        pending: list[tuple[str, bool]] = []
        prev: str | None = None
        cur: Any = None
        for e in page:
            if type(e) is not dict:
                return False
            item = e.get("item")
            tid = e.get("turnId", "")
            if type(item) is not dict or type(tid) is not str:
                return False
            iid = item.get("id")
            if type(iid) is not str:
                return False
            if tid != cur:  # a new batch: the previous one's pending ids are inserted
                for k, m in pending:
                    mult[k] = mult.get(k, 0) + 1
                    last[k] = m
                pending, prev, cur = [], None, tid
            else:
                tid = cur  # one string object per batch in the skeleton
            t = item.get("type")
            cid = None
            if t == "agentMessage":
                msg = True
            elif t == "userMessage":
                msg = True
                content = item.get("content")
                if type(content) is list:
                    for b in content:
                        if type(b) is not dict or b.get("type") != "text":
                            # images (or odd blocks): project, since that may raise
                            project_native_item(item, thread_id=self.thread_id, turn_id=tid)
                            break
                elif content is not None:
                    project_native_item(item, thread_id=self.thread_id, turn_id=tid)
                cid = item.get("clientId")
                if isinstance(cid, str) and cid:
                    known = clients.get(cid)
                    if known is not None and known != iid:
                        return False
                    clients[cid] = iid
                else:
                    cid = None
            else:
                msg = False
                t = ""
                project_native_item(item, thread_id=self.thread_id, turn_id=tid)  # may raise, as there
            keep((tid, iid, t, cid))
            if iid in last:
                for k, m in pending:
                    mult[k] = mult.get(k, 0) + 1
                    last[k] = m
                pending = []
                last[iid] = msg
                prev = iid
            elif prev is None:
                pending.append((iid, msg))
            else:
                mult[iid] = mult.get(iid, 0) + 1
                last[iid] = msg
                prev = iid
        for k, m in pending:
            mult[k] = mult.get(k, 0) + 1
            last[k] = m
        return True

    def count(self) -> int:
        """What :func:`count_messages` counts over the projection of every page given."""
        if self._proj is not None:
            return count_messages(self._proj.records())
        last = self._last
        return sum(n for k, n in self._mult.items() if last[k])


def _skeleton_entries(page: list[tuple[str, str, str, str | None]]) -> list[dict[str, Any]]:
    """A tallied page as entries a :class:`Projector` merges exactly like the real ones (same
    key, same message-or-not kind, same ``clientId``): see :class:`MessageTally`."""
    out: list[dict[str, Any]] = []
    for tid, iid, t, cid in page:
        item: dict[str, Any] = {"id": iid, "type": t or "reasoning"}
        if cid is not None:
            item["clientId"] = cid
        out.append({"turnId": tid, "item": item})
    return out
