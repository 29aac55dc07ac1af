"""A ``thread/items/list`` page of plain messages, from its JSON text straight to its records'
JSON text (issue 34: serve projects every page it answers; decoding the page to dicts, then
building one dict per record, was most of its CPU per page).

:func:`decode_page` decodes the page text into the typed structs below. They name every field
the pinned server writes on a page, an entry, a message item and a user input block (the
schema's ``ThreadItemsListResponse``, ``ThreadItemEntry``, ``userMessage``/``agentMessage``
and ``UserInput``), each with its schema type, and only null for the rare objects
(``moderation``, ``memoryCitation``, ``questions``). Nothing is skipped: an unknown field, a
value of another type, an entry or item that is not an object fail the decode
(``forbid_unknown_fields``), and every value is read — a number out of range fails it as it
fails a plain decode. The caller then takes the general path, which decides as before. So a
page this decodes is one a plain decode takes too, and it nests at most
:data:`PAGE_MAX_DEPTH` levels (its ``source``/``records``, when the server sends them, are
the exception: such a page is answered the general way).

:func:`page_records_json` turns a decoded page into the exact JSON text of
``[record_to_json(r) for r in Projector.page_records(thread_id, data)]`` — or None where that
needs the general path: what :func:`~._native_feed.plain_page` declines (an id or a
``clientId`` seen twice, a ``local-turn:`` turn), a user message with an image or a file
mention, an assistant message whose text is not in ``text``. ``tests/sansio/test_plain_text.py``
checks the equality, the declines and the depth bound.

:func:`decode_entries` decodes a page's ``data`` array the same way, and :func:`plain_ids` and
:func:`plain_record` give the id, ``clientId`` and record :func:`~._native.project_native_item`
gives for each of its items (``read_thread``'s items walk: ``NativeFeed._append_plain``). The
structs are not tracked by the cycle collector and read by attribute: a page of 100 messages
is decoded and projected in about two thirds of the time its dicts take (issue 34).

The message count has its own decode of the same pages (``MessageTally.decode_page`` in
:mod:`._tally`): it reads four facts per entry and skips the rest, where this one must read every
value (the records' text, the depth bound), so the two do not share their structs."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .._sanitize import may_hold_wrapper, sanitize_user_text
from ._records import AssistantMessage, UserMessage
from ._shapes import _IMAGE_TYPES

__all__ = ["PAGE_MAX_DEPTH", "RECORDS_DEPTH", "PlainPage", "decode_entries", "decode_page", "page_records_json",
           "plain_ids", "plain_record"]

_UNSET: Any = msgspec.UNSET


class _ByteRange(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    start: int
    end: int


class _TextElement(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    byteRange: _ByteRange  # noqa: N815 (the wire's names)
    placeholder: str | None = None


class _Block(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One ``UserInput`` block: the fields of every kind the schema names."""

    type: str
    text: str = _UNSET
    text_elements: list[_TextElement] = []
    url: str = _UNSET
    fileId: str = _UNSET  # noqa: N815
    detail: str | None = None
    path: str = _UNSET
    name: str = _UNSET


class _Item(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A ``userMessage`` or ``agentMessage`` item: the fields of both. The rare objects
    (``moderation``, ``memoryCitation``, ``questions``) only as null: a page with one takes the
    general path."""

    type: str
    id: str = ""  # absent: "" (as the general path reads it)
    text: str = _UNSET
    content: list[_Block] | None = None
    clientId: str | None = None  # noqa: N815
    phase: str | None = None
    moderation: None = None
    memoryCitation: None = None  # noqa: N815
    delivery: str | None = None
    questions: None = None
    startedAtMs: int | None = None  # noqa: N815
    completedAtMs: int | None = None  # noqa: N815


class _Entry(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    item: _Item
    turnId: str = ""  # noqa: N815 (absent: "", as the general path reads it)
    startedAtMs: int | None = None  # noqa: N815
    completedAtMs: int | None = None  # noqa: N815
    outputDeferred: bool = False  # noqa: N815


class PlainPage(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A page whose entries all hold a message-shaped item. ``source``/``records``: set when
    the server's result has them (serve then answers the general way)."""

    data: list[_Entry]
    nextCursor: str | None = None  # noqa: N815
    backwardsCursor: str | None = None  # noqa: N815
    source: Any = _UNSET
    records: Any = _UNSET

    def has_own_records(self) -> bool:
        """Whether the result names ``source`` or ``records`` itself."""
        return self.source is not _UNSET or self.records is not _UNSET


#: How deep the text of a :class:`PlainPage` without ``source``/``records`` nests, at most:
#: the page, ``data``, an entry, its item, ``content``, a block, ``text_elements``, an
#: element, its ``byteRange`` (every other value is a scalar). ``tests/sansio/test_plain_text.py``
#: derives it from the types above.
PAGE_MAX_DEPTH = 9
#: How deep :func:`page_records_json`'s text nests: the list, a record, its lists of strings.
RECORDS_DEPTH = 3


# The structs are not tracked by the cycle collector (``gc=False``): a decoded page or a record
# holds no cycle, and a page is thousands of them.
_page_decoder = msgspec.json.Decoder(PlainPage)
_entries_decoder = msgspec.json.Decoder(list[_Entry])
_encoder = msgspec.json.Encoder()


#: A ``"type":"…"`` naming something other than a message or a text block. One regex pass
#: (a fast search for ``"type":"``, then a look at what follows each): ≈ 17 µs a 28 KB page,
#: where the four ``bytes.count`` passes it replaces took ≈ 44 µs (issue 34). In JSON text
#: ``"type":"`` is always a ``type`` key and the start of its string value, so a page this
#: refuses is one the counts refused; on other text the decode fails either way.
_OTHER_TYPE = re.compile(rb'"type":"(?!(?:userMessage|agentMessage|text)")')


def decode_entries(text: bytes | msgspec.Raw) -> list[_Entry] | None:
    """A page's ``data`` array (its JSON text) as entry structs, or None: an entry, item or
    block the structs do not model (the caller decodes it plainly). A text that names a
    ``"type":"…"`` other than a message's or a text block's (a command, reasoning, an image:
    most pages of a real thread) is not tried — the decode would fail part way; a ``"type"``
    written otherwise (spaced) only means the decode decides."""
    data = text if type(text) is bytes else bytes(text)  # a Raw: one copy, ~2 µs for 28 KB
    if _OTHER_TYPE.search(data) is not None:
        return None
    try:
        return _entries_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        return None


def plain_ids(entries: list[_Entry]) -> list[tuple[str, str | None]] | None:
    """Each entry's item id and ``clientId`` (``plain_message_ids`` of its dict form) when
    :func:`plain_record` makes a record of every one, else None."""
    out: list[tuple[str, str | None]] = []
    for e in entries:
        item = e.item
        t = item.type
        if t == "agentMessage":
            if item.text is _UNSET:
                return None  # its text is in another field, if anywhere
            out.append((item.id, None))
        elif t == "userMessage":
            for b in item.content or ():
                if b.type in _IMAGE_TYPES:
                    return None  # an image: the general path makes its record
            out.append((item.id, item.clientId))
        else:
            return None
    return out


def plain_record(item: _Item, thread_id: str | None, turn_id: str) -> UserMessage | AssistantMessage:
    """What ``project_native_item`` makes of this item's dict form (``completed=True``), for
    an item :func:`plain_ids` accepts."""
    # positional (id, thread_id, turn_id, status, text, …): ≈ 0.2 µs less a record than by keyword,
    # 2,000 records a read (issue 34); tests/sansio/test_projection_fast_paths.py compares them
    if item.type == "agentMessage":
        return AssistantMessage(item.id, thread_id, turn_id, "completed", item.text, item.phase)
    parts: list[str] = []
    for b in item.content or ():
        if b.type == "text" and b.text is not _UNSET:
            parts.append(b.text)
    text = parts[0] if len(parts) == 1 else "".join(parts)
    if not may_hold_wrapper(text):  # images, file_mentions empty; then client_id
        return UserMessage(item.id, thread_id, turn_id, "completed", text, (), (), item.clientId)
    s = sanitize_user_text(text)
    return UserMessage(id=item.id, thread_id=thread_id, turn_id=turn_id, status="completed", text=s.text,
                       file_mentions=s.file_mentions, client_id=item.clientId, stripped=s.stripped)


def decode_page(text: bytes) -> PlainPage | None:
    """``text`` as a :class:`PlainPage`, or None (the general path decodes it)."""
    try:
        return _page_decoder.decode(text)
    except (msgspec.DecodeError, RecursionError):  # DecodeError includes ValidationError
        return None


class _RecordJson(msgspec.Struct, tag_field="kind", gc=False):
    """The JSON of a message's record: ``record_to_json``'s keys, in its order (``kind``, the
    tag, first; a subclass's own fields after these)."""

    id: str
    threadId: str | None  # noqa: N815
    turnId: str  # noqa: N815
    status: str
    text: str


class _AssistantJson(_RecordJson, tag="assistantMessage"):
    phase: str | None
    source: str


class _UserJson(_RecordJson, tag="userMessage"):
    """Without images or file mentions."""

    images: list[str]  # always empty here
    fileMentions: list[str]  # noqa: N815 (always empty here)
    clientId: str | None  # noqa: N815
    stripped: list[str]
    source: str


_NONE: list[str] = []  # written as ``[]``; never changed


def _user_json(item: _Item, thread_id: str | None, turn_id: str, iid: str) -> _UserJson | None:
    parts: list[str] = []
    for b in item.content or ():
        kind = b.type
        if kind == "text":
            if b.text is not _UNSET:
                parts.append(b.text)
        elif kind in _IMAGE_TYPES:
            return None  # an image: the general path makes its record
    text = parts[0] if len(parts) == 1 else "".join(parts)
    stripped = _NONE
    if may_hold_wrapper(text):
        s = sanitize_user_text(text)
        if s.file_mentions:
            return None
        text, stripped = s.text, list(s.stripped)
    return _UserJson(iid, thread_id, turn_id, "completed", text, _NONE, _NONE, item.clientId, stripped, "native")


def page_records_json(page: PlainPage, thread_id: str | None) -> bytes | None:
    """The JSON text of the records of ``page`` (see the module doc), or None."""
    turns: dict[str, list[Any]] = {}
    ids: list[str] = []
    clients: list[str] = []
    group: list[Any] = []
    group_turn: Any = None
    for e in page.data:
        turn_id = e.turnId
        if turn_id != group_turn:  # records come turn by turn, in the order turns first appear
            if turn_id.startswith("local-turn:"):
                return None
            group_turn = turn_id
            group = turns.get(turn_id)  # type: ignore[assignment]
            if group is None:
                group = turns[turn_id] = []
        item = e.item
        iid = item.id
        ids.append(iid)
        t = item.type
        if t == "agentMessage":
            if item.text is _UNSET:
                return None  # its text is in another field, if anywhere
            group.append(_AssistantJson(iid, thread_id, turn_id, "completed", item.text, item.phase, "native"))
        elif t == "userMessage":
            value = _user_json(item, thread_id, turn_id, iid)
            if value is None:
                return None
            if value.clientId:
                clients.append(value.clientId)
            group.append(value)
        else:
            return None
    if len(set(ids)) != len(ids) or len(set(clients)) != len(clients):
        return None  # an id or a clientId seen twice: the store upserts
    return _encoder.encode([v for g in turns.values() for v in g])
