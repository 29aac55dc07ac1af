"""The R-H-7 message count: :func:`count_messages` over display records, and
:class:`MessageTally`, the same count over ``thread/items/list`` pages without building them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Union

import msgspec
from msgspec import Raw

from codexrt._sansio._paging import RawPageData, peek_page

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

    Per entry it keeps only what decides the count: the item id's last type (message or not);
    the projector lists each id once (a copy of it later in the same page, even before any
    known id, replaces the first: R-H-1). Item kinds other than plain messages are still projected
    (:func:`project_native_item`, result dropped) so malformed ones fail exactly as they do
    in the projector. The decoded pages themselves are not kept (a long thread's pages held
    until the end made the count's memory, and the garbage collector's work, grow with the
    thread): per entry only its turn id, item id, kind and ``clientId`` (:attr:`_skel`).

    A page arrives either as decoded JSON (a list of entry dicts) or as :class:`TallyEntries`,
    what :meth:`decode_page` makes of the answer's bytes: the same entries decoded straight
    into small structs holding only those four facts (and a user message's block types), so a
    page of messages never becomes dicts. Both shapes reduce each entry to the same skeleton,
    and one loop (:meth:`_apply`) merges skeletons into the count. One difference from a plain
    decode is left: a number too large for a float (``1e400``) in a field the count does not
    read fails a plain decode but not the structs, which skip it (``serde_json``, which writes
    the server's JSON, never writes one).

    Shapes it does not model — an entry or item that is not an object, an id or turn id that
    is not a string, one ``clientId`` on two ids (the projector re-keys or drops those) — and any error
    switch it to a real :class:`Projector` (the rare path): the pages seen so far are replayed
    into it as *skeleton* entries (``{"id", "type"}``, plus ``clientId`` for a user message;
    a non-message as an empty ``reasoning`` item), page by page, then the page at hand as it
    came, and every later page too. A skeleton projects to a record with the same key, the
    same message-or-not kind and the same ``clientId``, and the projector's merge depends only
    on those, so its count is the count of the real pages; what the fallback projector raises
    is what a projector fed the real pages raises (the earlier pages projected without error,
    which is why they were tallied)."""

    __slots__ = ("thread_id", "_skel", "_last", "_clients", "_proj")

    def __init__(self, thread_id: str | None = None) -> None:
        self.thread_id = thread_id
        # per page: (turnId, item id, "agentMessage" | "userMessage" | "", clientId | None) per entry
        self._skel: list[list[Skeleton]] = []
        self._last: dict[str, bool] = {}  # id -> its last snapshot is a user/assistant message
        self._clients: dict[str, str] = {}  # clientId -> item id
        self._proj: Projector | None = None

    def __repr__(self) -> str:
        return f"<MessageTally thread={self.thread_id} ids={len(self._last)} projected={self._proj is not None}>"

    @property
    def projected(self) -> bool:
        """True once a page needed the full projector."""
        return self._proj is not None

    @staticmethod
    def decode_page(raw: bytes | Raw) -> Any:
        """One ``thread/items/list`` answer (the result's JSON text) as the page walk reads it:
        :func:`~codexrt._sansio._paging.peek_page` with the entries left as :class:`TallyEntries`,
        decoded when :meth:`add_native_entries` counts them — so a walk reading ahead has
        already asked for the next page by then. (The structs skip the fields the count does
        not read, and skipping does not check their bytes: ``peek_page`` checks UTF-8 first.)"""
        return peek_page(raw, TallyEntries)

    def add_native_entries(self, entries: Iterable[Any]) -> None:
        lazy = entries if type(entries) is TallyEntries else None
        if self._proj is not None:
            self._proj.add_native_entries(lazy.dicts() if lazy is not None else entries)
            return
        typed = lazy.entries() if lazy is not None else None
        if typed is not None:
            page: Any = lazy
        elif lazy is not None:  # a shape the structs do not model: judged as decoded JSON
            page = lazy.dicts()
        else:
            page = entries if isinstance(entries, list) else list(entries)
        try:
            skel = (_typed_skeleton(typed, lazy, self.thread_id) if typed is not None  # type: ignore[arg-type]
                    else _dict_skeleton(page, self.thread_id))
            fast = skel is not None and self._apply(skel)
        except Exception:  # the projector decides what (and in which order) fails
            fast = False
        if fast:
            self._skel.append(skel)  # type: ignore[arg-type]
            return
        proj = Projector(self.thread_id)
        self._proj = proj
        pages, self._skel = self._skel, []
        self._last, self._clients = {}, {}
        for p in pages:
            proj.add_native_entries(_skeleton_entries(p))
        proj.add_native_entries(lazy.dicts() if lazy is not None else page)

    def _apply(self, skel: list[Skeleton]) -> bool:
        """Mirror of ``add_native_entries`` → ``_add_batch`` for the count, over one page's
        skeletons; False (state to be discarded) at a ``clientId`` already on another id.
        ``clientId``s only meet each other, so they are checked first, in order. The projector
        lists every id once, as its last copy (R-H-1), so the count keeps each id's last kind."""
        clients = self._clients
        for _tid, iid, _t, cid in [s for s in skel if s[3] is not None]:
            known = clients.get(cid)  # type: ignore[arg-type]
            if known is not None and known != iid:
                return False
            clients[cid] = iid  # type: ignore[index]
        self._last.update(zip([s[1] for s in skel], [s[2] != "" for s in skel]))  # a later copy wins
        return True

    def count(self) -> int:
        """What :func:`count_messages` counts over the projection of every page given."""
        if self._proj is not None:
            return count_messages(self._proj.records())
        return sum(self._last.values())


#: One entry as the count sees it: (turnId, item id, "agentMessage" | "userMessage" | "" for
#: any other kind, the user message's non-empty ``clientId`` or None).
Skeleton = tuple[str, str, str, "str | None"]


def _dict_skeleton(page: list[Any], thread_id: str | None) -> list[Skeleton] | None:
    """The skeletons of a page of decoded entries; None at the first shape the tally does not
    model. Non-message items (and user messages with other than text blocks) are projected,
    result dropped, so a malformed one raises as it does in the projector."""
    skel: list[Skeleton] = []
    keep = skel.append
    cur = None
    for e in page:
        if type(e) is not dict:
            return None
        item = e.get("item")
        tid = e.get("turnId", "")
        if type(item) is not dict or type(tid) is not str:
            return None
        iid = item.get("id")
        if type(iid) is not str:
            return None
        if tid == cur:
            tid = cur  # one string object per batch in the skeleton
        cur = tid
        t = item.get("type")
        cid = None
        if t == "agentMessage":
            pass
        elif t == "userMessage":
            content = item.get("content")
            if type(content) is list:
                for b in content:
                    if type(b) is not dict or b.get("type") != "text":
                        # images (or odd blocks): project, since that may raise
                        project_native_item(item, thread_id=thread_id, turn_id=tid)
                        break
            elif content is not None:
                project_native_item(item, thread_id=thread_id, turn_id=tid)
            cid = item.get("clientId")
            if not (isinstance(cid, str) and cid):
                cid = None
        else:
            t = ""
            project_native_item(item, thread_id=thread_id, turn_id=tid)  # may raise, as there
        keep((tid, iid, t, cid))
    return skel


def _typed_skeleton(typed: list[_Entry], page: TallyEntries, thread_id: str | None) -> list[Skeleton]:
    """:func:`_dict_skeleton` of a :class:`TallyEntries` page decoded into structs (``typed``):
    the decode already checked every shape, and only the items that must be projected are
    looked up in the page's plain decode."""
    skel: list[Skeleton] = []
    keep = skel.append
    cur = None
    for i, e in enumerate(typed):
        item = e.item
        tid = e.turnId
        if tid == cur:
            tid = cur
        cur = tid
        t = item.type
        cid = None
        if t == "agentMessage":
            pass
        elif t == "userMessage":
            content = item.content
            if content is not None:
                for b in content:
                    if b.type != "text":
                        project_native_item(page.item(i), thread_id=thread_id, turn_id=tid)
                        break
            cid = item.clientId or None
        else:
            t = ""
            project_native_item(page.item(i), thread_id=thread_id, turn_id=tid)
        keep((tid, item.id, t, cid))
    return skel


class _Block(msgspec.Struct, gc=False):
    type: Any = None


class _Item(msgspec.Struct, gc=False):
    id: str
    type: Union[str, None] = None
    clientId: Union[str, None] = None
    content: Union[list[_Block], None] = None


class _Entry(msgspec.Struct, gc=False):
    item: _Item
    turnId: str = ""


_ENTRIES = msgspec.json.Decoder(list[_Entry])


class TallyEntries(RawPageData):
    """A page's ``data`` array as :meth:`MessageTally.decode_page` left it: its JSON text,
    decoded when counted — into small structs of the facts the count needs (:meth:`entries`),
    or, for a shape they do not model, for the projector fallback and for the items the count
    projects, as plain JSON (:meth:`dicts`). Duplicate keys decode the same way in both (the
    last one wins), so the two views agree."""

    __slots__ = ()

    def entries(self) -> list[_Entry] | None:
        """The entries as structs; None when one does not fit them."""
        try:
            return _ENTRIES.decode(self.raw)
        except msgspec.DecodeError:  # includes ValidationError
            return None

    def item(self, i: int) -> dict[str, Any]:
        return self.dicts()[i]["item"]  # type: ignore[no-any-return]


def _skeleton_entries(page: list[Skeleton]) -> list[dict[str, Any]]:
    """A tallied page as entries a :class:`Projector` merges exactly like the real ones (same
    key, same message-or-not kind, same ``clientId``): see :class:`MessageTally`."""
    out: list[dict[str, Any]] = []
    for tid, iid, t, cid in page:
        item: dict[str, Any] = {"id": iid, "type": t or "reasoning"}
        if cid is not None:
            item["clientId"] = cid
        out.append({"turnId": tid, "item": item})
    return out
