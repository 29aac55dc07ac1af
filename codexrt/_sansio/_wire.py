"""Envelope classification of app-server lines (R-WIRE-1), no I/O.

The app-server speaks JSON-RPC 2.0 *without* the ``jsonrpc`` field. One line is one object:

=========================  ==========================================
shape                      meaning
=========================  ==========================================
``{id, method, params?}``  server → client request
``{method, params?}``      notification (the real server adds ``emittedAtMs``)
``{id, result}``           response to one of our requests
``{id, error}``            error response to one of our requests
anything else              a protocol violation (reported, not fatal)
=========================  ==========================================

Classification is by structure only, never by guessing from method names. The envelope is
decoded once with a prebuilt msgspec decoder; payloads stay :class:`msgspec.Raw` until someone
asks for them (the msgspec "decode the envelope first" pattern), so a delta flood costs one
envelope decode per line. ``id`` keeps its JSON type: ``3`` and ``"3"`` are different ids
(R-WIRE-2); a float or boolean id is a violation.

*Depth.* A line nested deeper than :data:`MAX_JSON_DEPTH` is a violation like any other bad line
(R-WIRE-5). The bound is ours, not the decoder's: msgspec stops at Python's recursion limit,
which depends on how deep the *calling* stack already is, so the same line could decode on the
reader and then raise ``RecursionError`` in whoever reads its params later. Checking a fixed
depth up front makes every later decode of an accepted line safe. :func:`json_depth_exceeds`
is cheap: one ``translate`` to the line's brackets and quotes and one count decide almost every
line; only a line with more brackets than the limit is looked at further (C-level passes), and
only after it decoded (so it is valid JSON and the scan is linear).
"""

from __future__ import annotations

import re
from typing import Any, Union

import attrs
import msgspec
from msgspec import UNSET, Raw, UnsetType

from codexrt._version import __version__

__all__ = [
    "ClientInfo",
    "RequestId",
    "Notification",
    "DeltaParams",
    "ServerRequest",
    "Response",
    "ErrorResponse",
    "Violation",
    "BadReply",
    "Envelope",
    "decode_envelope",
    "decode_delta_line",
    "merge_delta_lines",
    "merge_delta_read",
    "encode_json",
    "decode_json",
    "ErrorObject",
    "MAX_JSON_DEPTH",
    "MAX_INPUT_CHARS",
    "json_depth_exceeds",
    "BoundedText",
]

#: Deepest nesting of arrays/objects accepted in one app-server line. Real payloads stay far
#: below it (MCP tool schemas are the deepest, a few dozen levels); the bound keeps every later
#: decode and recursive walk of a line far from Python's recursion limit.
MAX_JSON_DEPTH = 128

#: The real app-server's limit on a turn's input text (0.171.0: ``turn/start`` with more is
#: refused, -32602 ``input_too_large``, counted in characters over every text item). codexrt
#: checks it before anything is created for a send (no thread, no turn), and ``serve``'s schema
#: states it as ``codex.send``'s ``message`` ``maxLength``. Kept here, beside the other limits
#: of the wire, so that ``serve``'s command table does not import the context builder
#: (:mod:`codexrt._sansio._context`, ≈ 14 ms of attrs classes) before its first reply (issue 34).
MAX_INPUT_CHARS = 1 << 20

RequestId = Union[int, str]


# Public as ``codexrt.ClientInfo``; defined with the wire, not the connection, so a
# ``RuntimeConfig`` is made without importing the connection (issue 34: serve's first reply).
@attrs.frozen
class ClientInfo:
    """``initialize.clientInfo`` (the real server uses ``name`` as its user-agent prefix)."""

    name: str = "codexrt"
    title: str | None = "codexrt"
    version: str = __version__

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            out["title"] = self.title
        return out


class ErrorObject(msgspec.Struct):
    code: int
    message: str = ""
    data: Any = None


class _Envelope(msgspec.Struct):
    id: Union[int, str, None, UnsetType] = UNSET
    method: Union[str, UnsetType] = UNSET
    params: Raw = Raw()
    result: Raw = Raw()
    error: Raw = Raw()
    emittedAtMs: Union[int, float, None, UnsetType] = UNSET


_envelope_decoder = msgspec.json.Decoder(_Envelope)
_error_decoder = msgspec.json.Decoder(ErrorObject)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


_SHAPE_TABLE = bytes.maketrans(b"{}", b"[]")
_NOT_SHAPE = bytes(c for c in range(256) if c not in b'[]{}"')


def _brackets_and_quotes(data: bytes) -> bytes:
    """Valid JSON text ``data`` reduced to its brackets (``{}`` written as ``[]``) and its
    string-delimiting quotes, in order — one ``translate``, after dropping escapes.

    In valid JSON a backslash only occurs inside a string and starts a two-character escape;
    dropping ``\\\\`` pairs left to right (what ``bytes.replace`` does) pairs every run of
    backslashes exactly as the escapes do, after which dropping ``\\"`` removes exactly the
    escaped quotes: every quote left delimits a string, opening and closing in turn. Keeping only
    brackets and quotes keeps that order.

    Only the span from the first backslash to the character after the last one is searched for
    escapes (issue 34: a history page's backslashes sit in its two cursors — JSON in a string —
    and dropping escapes over the whole 60 KB line cost ≈ 160 µs): an escape starts at a
    backslash and is two characters long, so none lies outside that span, and ``replace`` finds
    the same pairs in the span as in the whole text (no match starts before it)."""
    first = data.find(b"\\")
    if first < 0:
        return data.translate(_SHAPE_TABLE, _NOT_SHAPE)
    end = data.rfind(b"\\") + 2
    mid = data[first:end].replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join((data[:first].translate(_SHAPE_TABLE, _NOT_SHAPE), mid.translate(_SHAPE_TABLE, _NOT_SHAPE),
                     data[end:].translate(_SHAPE_TABLE, _NOT_SHAPE)))


def _cut_strings(kept: bytes) -> bytes:
    """The brackets of :func:`_brackets_and_quotes`'s output that are outside strings.

    Usually no string holds a bracket: then every string is an adjacent quote pair, which two
    counts prove (``count(b'""')`` pairs quotes greedily from the left, so it covers every quote
    exactly when each string's opening quote is followed at once by its closing one), and
    deleting the quotes leaves the shape. Otherwise dropping two *adjacent* quotes never moves a
    bracket across a string boundary — they close and open strings with nothing between, or open
    and close a string with no bracket inside — so ``replace(b'""', b"")`` takes away nearly
    every string at once; the few left (strings with brackets in them) are cut out as every
    other piece between quotes."""
    if kept.count(b'""') * 2 == kept.count(b'"'):
        return kept.translate(None, b'"')
    shape = kept.replace(b'""', b"")
    if b'"' in shape:
        shape = b"".join(shape.split(b'"')[::2])
    return shape


def _bracket_shape(data: bytes) -> bytes:
    """The structure of valid JSON text ``data``: its brackets outside strings, ``{}`` written
    as ``[]``, everything else dropped — in C-level passes, without one object per string
    (splitting the whole text at its quotes, as this did once, made one object per string:
    ~70 µs for a 28 KB history page; now ~10 µs)."""
    return _cut_strings(_brackets_and_quotes(data))


_BRACKET_RUN = re.compile(rb"\[+|\]+")

#: Past this many bytes a line's depth is checked by :func:`json_depth_exceeds` at once, without
#: counting its brackets first (:func:`decode_envelope`).
_LONG_LINE = 1024


def json_depth_exceeds(data: bytes, limit: int) -> bool:
    """True when the JSON text ``data`` nests arrays/objects deeper than ``limit``.

    Meant for text that already decoded (valid JSON): brackets inside strings are skipped
    (:func:`_bracket_shape`, which assumes well-formed strings). The text is first reduced to
    its brackets and string quotes (:func:`_brackets_and_quotes`: escapes dropped, one
    ``translate``); with at most ``limit`` opening brackets in all it cannot be too deep (an
    escape holds no bracket, so the count is the text's own). Otherwise the strings
    are cut out, the rest (``[``/``]`` only) has its leaves peeled off and what is left is
    walked run by run."""
    kept = _brackets_and_quotes(data)  # an escape holds no bracket: every bracket of ``data`` is here
    if kept.count(b"[") <= limit:
        return False
    shape = _cut_strings(kept)
    # Each pass drops every innermost "[]" pair, which lowers the maximum depth by exactly one;
    # ordinary (wide, shallow) data is gone after a few C-level passes.
    for _ in range(16):
        if not shape:
            return limit < 0
        shape = shape.replace(b"[]", b"")
        limit -= 1
    depth = 0
    for run in _BRACKET_RUN.finditer(shape):
        n = run.end() - run.start()
        if shape[run.start()] == 0x5B:  # "["
            depth += n
            if depth > limit:
                return True
        else:
            depth -= n
    return limit < 0  # the passes emptied the shape: its depth was what they removed


class BoundedText:
    """JSON text to write verbatim — the concatenation of ``chunks`` — that nests at most
    ``max_depth`` levels, known from how it was made, so a writer that bounds the depth of what
    it writes (``codexrt serve``) need not walk it again (issue 34: a history page's reply, the
    server's page text and its records, whose structure a typed decode proved). Kept in
    pieces, the text is copied once, into the line written; ``bytes()`` joins them. Not an
    attrs class: msgspec would write one as an object of its fields (the pieces in base64), where
    this way any writer but serve's refuses it."""

    __slots__ = ("chunks", "max_depth")

    def __init__(self, chunks: tuple[bytes | memoryview, ...], max_depth: int) -> None:
        self.chunks = chunks
        self.max_depth = max_depth

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks)

    def __repr__(self) -> str:
        return f"BoundedText({sum(len(c) for c in self.chunks)} bytes, max_depth={self.max_depth})"


def encode_json(obj: Any) -> bytes:
    """Encode one JSON value (no newline)."""
    return _encoder.encode(obj)


def decode_json(data: bytes | Raw) -> Any:
    """Decode a JSON value to plain Python (dict/list/str/…); ``Raw()`` (absent) → None."""
    if isinstance(data, Raw) and len(data) == 0:
        return None
    return _any_decoder.decode(data)


class _LazyParams:
    """Mixin: ``params`` decoded on first access, from ``params_raw``."""

    params_raw: Raw

    @property
    def params(self) -> Any:
        cache = self.__dict__.get("_params", UNSET) if hasattr(self, "__dict__") else UNSET
        if cache is UNSET:
            cache = decode_json(self.params_raw)
            if cache is None:
                cache = {}
            object.__setattr__(self, "_params", cache)
        return cache


class DeltaParams(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The exact params of a streaming-text notification (``item/agentMessage/delta`` and
    its siblings): the hot path of a flood decodes straight into this (see :func:`decode_envelope`).
    Strings only, so never part of a cycle: ``gc=False`` keeps a read's hundreds of them out of
    the collector's young generation (issue 34)."""

    threadId: str
    turnId: str
    itemId: str
    delta: str


class _DeltaLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):  # (no cycle: str, DeltaParams, number)
    method: str
    params: DeltaParams
    emittedAtMs: Union[int, float, None] = None


_delta_decoder = msgspec.json.Decoder(_DeltaLine)


class Notification(msgspec.Struct, eq=False, repr_omit_defaults=True):
    """A server notification. ``params`` is decoded lazily (plain dict).

    ``delta`` is set (a :class:`DeltaParams`) when the line had exactly the shape of a
    streaming-text notification — ``{method, params: {threadId, turnId, itemId, delta},
    emittedAtMs?}`` with string values — so the runtime's delta path reads typed fields and
    never builds a dict; ``params`` still works (built from it on first access). A msgspec
    Struct rather than an attrs class because one is built per line of a flood (C init)."""

    method: str
    params_raw: Union[Raw, bytes] = Raw()
    emitted_at_ms: Union[int, float, None] = None
    delta: Union[DeltaParams, None] = None
    #: How many native notifications this one stands for (> 1 only for merged deltas, see
    #: :func:`merge_delta_lines`).
    delta_count: int = 1
    _params: Any = UNSET

    @property
    def params(self) -> Any:
        cache = self._params
        if cache is UNSET:
            d = self.delta
            if d is not None:
                cache = {"threadId": d.threadId, "turnId": d.turnId, "itemId": d.itemId, "delta": d.delta}
            else:
                raw = self.params_raw  # decode_json(), inlined: read once per routed line (issue 34)
                cache = None if isinstance(raw, Raw) and len(raw) == 0 else _any_decoder.decode(raw)
                if cache is None:
                    cache = {}
            self._params = cache
        return cache


_NO_PARAMS = Raw()


@attrs.define(eq=False, slots=False)
class ServerRequest(_LazyParams):
    """A server → client request awaiting exactly one reply with the same ``id`` (R-WIRE-8)."""

    id: RequestId
    method: str
    params_raw: Raw = attrs.field(repr=False)


@attrs.frozen
class Response:
    """A successful response to one of our requests."""

    id: RequestId
    result_raw: Raw = attrs.field(repr=False)

    @property
    def result(self) -> Any:
        return decode_json(self.result_raw)


@attrs.frozen
class ErrorResponse:
    """An error response to one of our requests (``id`` may be null for a parse error)."""

    id: RequestId | None
    error: ErrorObject


@attrs.frozen
class Violation:
    """A line that is not JSON, or JSON of no known shape (R-WIRE-5). ``excerpt`` is at most
    200 bytes of the line, for diagnostics."""

    reason: str
    excerpt: bytes = attrs.field(repr=False, default=b"")


@attrs.frozen
class BadReply:
    """A response or error response whose id is readable but whose bytes are not valid UTF-8
    (issue 35): the call it answers fails at once as a protocol error."""

    id: RequestId | None
    reason: str
    excerpt: bytes = attrs.field(repr=False, default=b"")


Envelope = Union[Notification, ServerRequest, Response, ErrorResponse, BadReply, Violation]


def _excerpt(line: bytes) -> bytes:
    return bytes(line[:200])


#: Lines of the exact delta shape from the real server start like this (its key order). Only
#: a hint for where to try the typed decoder first; it never changes how a line is classified.
_DELTA_HINT = b'{"method":"item/'


def decode_delta_line(line: bytes) -> Notification | None:
    """The line as a streaming-text :class:`Notification` (with ``delta`` set) when it has
    exactly that shape, else None (then :func:`decode_envelope` classifies it). A delta line
    is a notification, so it never touches RPC state: the connection's reader may take this
    shortcut before :class:`~codexrt._sansio._rpc.RpcCore` sees the line."""
    try:
        d = _delta_decoder.decode(line)
    except msgspec.DecodeError:
        return None
    return Notification(d.method, _NO_PARAMS, d.emittedAtMs, d.params)


def merge_delta_lines(frames: list[Any]) -> list[Any]:
    """Frames of one read (bytes lines, or anything else) with every run of back-to-back exact
    delta lines of the same method/thread/turn/item replaced by one :class:`Notification`
    whose ``delta.delta`` is their text joined in order and ``delta_count`` their number.

    Why here: a flood is hundreds of deltas per pipe read, and the text is what consumers
    keep; handing the runtime one notification per run instead of per line removes the
    per-line routing cost without changing what any consumer can observe (buffers merge
    such deltas anyway, text and order are kept, and a non-delta line always ends a run,
    so nothing is reordered around it). Other frames pass through unchanged, in order."""
    out: list[Any] = []
    run: _DeltaLine | None = None
    parts: list[str] = []
    decode = _delta_decoder.decode
    hint = _DELTA_HINT
    for frame in frames:
        if type(frame) is bytes and frame.startswith(hint):
            try:
                d = decode(frame)
            except msgspec.DecodeError:
                pass
            else:
                if run is not None:
                    p, q = run.params, d.params
                    if d.method == run.method and q.itemId == p.itemId and q.turnId == p.turnId \
                            and q.threadId == p.threadId:
                        parts.append(q.delta)
                        continue
                    out.append(_run_notification(run, parts))
                run = d
                parts = [d.params.delta]
                continue
        if run is not None:
            out.append(_run_notification(run, parts))
            run = None
        out.append(frame)
    if run is not None:
        out.append(_run_notification(run, parts))
    return out


_NL_HINT = b"\n" + _DELTA_HINT


def merge_delta_read(framer: Any, data: bytes) -> list[Any]:
    """What :func:`merge_delta_lines` returns for ``framer.feed(data)``, decoding a read's
    lines in **one** call when they are all exact delta lines (the steady state of a flood).

    ``framer`` is a :class:`~codexrt._sansio._framing.LineBuffer`. Its
    :meth:`~codexrt._sansio._framing.LineBuffer.take_block` hands over the read's complete
    lines as one bytes object; when it starts with a delta line, ``decode_lines`` of the exact
    delta shape decodes the whole block in C. That result is used only when it provably means
    the same as decoding line by line: the block decoded without error, and it gave exactly
    one value per line that starts like a delta line (so no line held two values, no line
    that starts otherwise held one, and the lines skipped are blank ones the RPC core skips
    too). Anything else — a read with a response, chatter, a malformed line, an oversized
    line — takes the line-by-line path, and every frame is classified as before."""
    block = framer.take_block(data)
    if block is None:
        return merge_delta_lines(framer.feed(data))
    if not block:
        return []
    if block.find(b"\n") == len(block) - 1 and (not block.startswith(_DELTA_HINT) or _item_line(block)):
        # One line that is not an exact delta line — most reads of a turn (its lines arrive
        # alone): what merge_delta_lines returns for it, without the split, its frame, or a
        # typed decode that can only fail (issue 34).
        return [block[:-1]]
    if block.startswith(_DELTA_HINT):
        try:
            ds = _delta_decoder.decode_lines(block)
        except msgspec.DecodeError:  # includes ValidationError: some line is not a delta
            ds = None
            if block.count(b"\n") == 1:
                # One line that is not an exact delta line (an item/started, item/completed …:
                # most lines of a turn arrive alone): the per-line decode below would only
                # fail again on the same line (issue 34).
                return [block[:-1]]
        if ds is not None and len(ds) == block.count(_NL_HINT) + 1:
            return _merge_decoded(ds)
    lines: list[Any] = block.split(b"\n")
    lines.pop()  # the block ends with a newline
    return merge_delta_lines(lines)


_ITEM_PARAMS = b'","params":{"item":'


def _item_line(line: bytes) -> bool:
    """True when ``line`` (which starts with :data:`_DELTA_HINT`) surely is not an exact delta
    line because its params open with an ``item`` key, as the real server's item/started and
    item/completed do: the method string has no backslash (so the first quote after the hint
    closes it) and is followed at once by ``,"params":{"item":`` — a key
    :class:`DeltaParams` forbids, so the typed decode would fail there. False means "may be
    one": the typed decode decides."""
    start = len(_DELTA_HINT)
    end = line.find(b'"', start)
    return end > 0 and line.startswith(_ITEM_PARAMS, end) and line.find(b"\\", start, end) < 0


def _merge_decoded(ds: list[_DeltaLine]) -> list[Notification]:
    """Runs of same method/thread/turn/item in decoded delta lines, one notification each."""
    d0 = ds[0]
    p0 = d0.params
    m0, t0, u0, i0 = d0.method, p0.threadId, p0.turnId, p0.itemId
    if len(ds) == 1:
        return [Notification(m0, _NO_PARAMS, d0.emittedAtMs, p0)]
    for d in ds:  # one run? (a plain loop: a third cheaper than all() over a generator, issue 34)
        p = d.params
        if d.method != m0 or p.itemId != i0 or p.turnId != u0 or p.threadId != t0:
            break
    else:
        merged = DeltaParams(t0, u0, i0, "".join([d.params.delta for d in ds]))
        return [Notification(m0, _NO_PARAMS, d0.emittedAtMs, merged, len(ds))]
    out: list[Notification] = []
    run = d0
    parts = [p0.delta]
    for d in ds[1:]:
        p, q = run.params, d.params
        if d.method == run.method and q.itemId == p.itemId and q.turnId == p.turnId and q.threadId == p.threadId:
            parts.append(q.delta)
            continue
        out.append(_run_notification(run, parts))
        run = d
        parts = [q.delta]
    out.append(_run_notification(run, parts))
    return out


def _run_notification(first: _DeltaLine, parts: list[str]) -> Notification:
    p = first.params
    if len(parts) == 1:
        return Notification(first.method, _NO_PARAMS, first.emittedAtMs, p)
    merged = DeltaParams(p.threadId, p.turnId, p.itemId, "".join(parts))
    return Notification(first.method, _NO_PARAMS, first.emittedAtMs, merged, len(parts))


def decode_envelope(line: bytes, try_delta: bool = True) -> Envelope:
    """Classify one line by structure. Never raises on bad input: returns a :class:`Violation`.

    Streaming text is most of the traffic of a busy turn, so a line that starts like an item
    notification is first tried against the exact delta shape (one typed decode, no dict);
    any other shape fails that decoder at its first unexpected key and takes the general
    path. The prefix test is only a hint: either path classifies every line the same way.
    ``try_delta=False`` skips that first try, for a line already known not to have the exact
    delta shape (one that :func:`merge_delta_read` passed through as bytes, issue 34): the
    general path gives the same classification, only without the typed ``delta``."""
    if try_delta and line.startswith(_DELTA_HINT):
        n = decode_delta_line(line)
        if n is not None:
            return n
    try:
        env = _envelope_decoder.decode(line)
    except msgspec.DecodeError as exc:  # includes ValidationError
        return Violation(f"invalid message: {exc}", _excerpt(line))
    except RecursionError:
        return Violation(f"message nested deeper than {MAX_JSON_DEPTH} levels", _excerpt(line))
    # json_depth_exceeds's own first test, inlined for a short line (issue 34: one frame and one
    # ``translate`` less per line): with at most MAX_JSON_DEPTH opening brackets it cannot be too
    # deep. A long line (a history page) goes straight to the check, whose one ``translate``
    # costs less than two counts over its whole text.
    if ((len(line) > _LONG_LINE or line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH)
            and json_depth_exceeds(line, MAX_JSON_DEPTH)):
        return Violation(f"message nested deeper than {MAX_JSON_DEPTH} levels", _excerpt(line))
    has_id = env.id is not UNSET
    if env.method is not UNSET:
        if has_id:
            if env.id is None:
                return Violation("server request with a null id", _excerpt(line))
            return ServerRequest(env.id, env.method, env.params)  # type: ignore[arg-type]
        emitted = None if env.emittedAtMs is UNSET else env.emittedAtMs
        return Notification(env.method, env.params, emitted)  # type: ignore[arg-type]
    if not has_id:
        return Violation("message has neither id nor method", _excerpt(line))
    try:  # a reply is rare next to notifications: checking its bytes costs little
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"reply is not valid UTF-8 (byte {exc.start})"
        return BadReply(env.id, reason, _excerpt(line))  # type: ignore[arg-type]
    has_result = len(env.result) > 0
    has_error = len(env.error) > 0
    if has_result and has_error:
        return Violation("response has both result and error", _excerpt(line))
    if has_error:
        try:
            err = _error_decoder.decode(env.error)
        except msgspec.DecodeError as exc:
            return Violation(f"malformed error object: {exc}", _excerpt(line))
        return ErrorResponse(env.id, err)  # type: ignore[arg-type]
    if has_result:
        if env.id is None:
            return Violation("result response with a null id", _excerpt(line))
        return Response(env.id, env.result)  # type: ignore[arg-type]
    return Violation("response has neither result nor error", _excerpt(line))
