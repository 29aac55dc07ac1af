"""How :mod:`codexrt.loopback._model` reads a request body: HTTP/1.1 message framing (RFC 9112,
section 6), strictly — a body it cannot frame for certain is refused, never guessed at. Stdlib only."""

from __future__ import annotations

import re
from typing import Any, Protocol

__all__ = ["read_body"]

_HEX_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")  # a chunk size: no sign, prefix or underscore (int() takes those)
_DECIMAL = re.compile(r"[0-9]{1,16}")  # a Content-Length
_LINE_LIMIT = 65536


class _Reader(Protocol):  # the handler's ``rfile``
    def read(self, size: int, /) -> bytes: ...
    def readline(self, size: int, /) -> bytes: ...


def read_body(rfile: _Reader, headers: Any, max_body: int) -> bytes:
    """The body of the request whose ``headers`` (an ``email.message.Message``) were read from
    ``rfile``. ValueError for a body it cannot read: a transfer-coding other than ``chunked``
    alone, a chunk size that is not plain hex, Content-Length values that disagree or are not
    plain digits, more than ``max_body`` bytes, a framing line over 64 KiB, chunk data longer
    than its size."""
    codings = [c.strip().lower() for v in headers.get_all("transfer-encoding") or () for c in v.split(",")
               if c.strip()]
    if codings:  # (it wins over any Content-Length: RFC 9112, 6.3)
        if codings != ["chunked"]:
            raise ValueError(f"transfer-coding {', '.join(codings)[:100]!r}: only chunked is read")
        return _chunked(rfile, max_body)
    lengths = {v.strip() for h in headers.get_all("content-length") or () for v in h.split(",")}
    if len(lengths) > 1:  # (the same value repeated is one: RFC 9112, 6.3)
        raise ValueError(f"content-length values disagree: {sorted(lengths)[:4]}")
    text = lengths.pop() if lengths else "0"
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"content-length {text[:20]!r} is not a decimal number")
    length = int(text)
    if length > max_body:
        raise ValueError(f"content-length {length}")
    return rfile.read(length) if length else b""


def _chunked(rfile: _Reader, max_body: int) -> bytes:
    out = bytearray()
    while True:
        token = _line(rfile).split(b";")[0].strip()  # 1*HEXDIG, blanks around it tolerated
        if not _HEX_SIZE.fullmatch(token):
            raise ValueError(f"chunk size {token[:20]!r} is not a hex number")
        size = int(token, 16)
        if size == 0:
            while _line(rfile) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return bytes(out)
        if not 0 < size <= max_body - len(out):
            raise ValueError(f"a chunk of {size} bytes after {len(out)}")
        out += rfile.read(size)
        if _line(rfile) not in (b"\r\n", b"\n", b""):
            raise ValueError("chunk data longer than its size")


def _line(rfile: _Reader) -> bytes:
    line = rfile.readline(_LINE_LIMIT + 1)
    if len(line) > _LINE_LIMIT:  # never cut: its rest would be read as the next line
        raise ValueError(f"a chunked-framing line over {_LINE_LIMIT} bytes")
    return line
