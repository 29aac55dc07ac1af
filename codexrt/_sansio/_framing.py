"""Line framing for the app-server's newline-delimited JSON (no I/O).

Theory of operation: bytes arrive in arbitrary chunks (a frame split over several reads, or
several frames in one read). :class:`LineBuffer` keeps the unfinished tail and hands back every
complete line. A line longer than ``max_line`` is a protocol error, not a crash and not an
unbounded buffer: the buffer switches to *discarding* until the next newline and reports one
:class:`OversizedLine` for it (R-WIRE-5). The default limit is 16 MiB — far above the 64 KiB
``readline`` limit that breaks other clients on long command output.

Memory is bounded by ``max_line`` plus one chunk.
"""

from __future__ import annotations

from typing import Union

import attrs

__all__ = ["LineBuffer", "OversizedLine", "DEFAULT_MAX_LINE"]

DEFAULT_MAX_LINE = 16 * 1024 * 1024
#: How much of an oversized line :class:`OversizedLine` keeps.
HEAD_BYTES = 4096


@attrs.frozen
class OversizedLine:
    """A line that exceeded the limit; ``size`` is how many bytes it had (complete). ``head``
    is its first :data:`HEAD_BYTES` bytes (not compared): enough for ``serve`` to read the
    request id of a command that was too long, so its refusal carries that id."""

    size: int
    limit: int
    head: bytes = attrs.field(default=b"", eq=False, repr=False)


Frame = Union[bytes, OversizedLine]


class LineBuffer:
    """Split a byte stream into lines (without the trailing ``\\n``; a ``\\r`` before it is kept
    and left to the JSON decoder, which treats it as whitespace)."""

    __slots__ = ("max_line", "_buf", "_discarding", "_discarded", "_head")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0
        self._head = b""  # the start of the line being discarded

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data``; return every line it completed, in order."""
        if not self._discarding:
            return self._feed_fast(data)
        out: list[Frame] = []
        start = 0
        n = len(data)
        while start < n:
            nl = data.find(b"\n", start)
            if nl < 0:
                self._append_partial(data, start, n)
                break
            if self._discarding:
                size = self._discarded + (nl - start)
                out.append(OversizedLine(size, self.max_line, self._head))
                self._head = b""
                self._discarding = False
                self._discarded = 0
            elif self._buf:
                self._buf += data[start:nl]
                if len(self._buf) > self.max_line:
                    out.append(OversizedLine(len(self._buf), self.max_line, bytes(self._buf[:HEAD_BYTES])))
                else:
                    out.append(bytes(self._buf))
                self._buf.clear()
            elif nl - start > self.max_line:
                out.append(OversizedLine(nl - start, self.max_line, data[start:start + HEAD_BYTES]))
            else:
                out.append(data[start:nl])
            start = nl + 1
        return out

    def _feed_fast(self, data: bytes) -> list[Frame]:
        """Not discarding: finish the held-over line, then split the rest in C and check the
        limit once (a flood is hundreds of lines per read; a Python loop per line is what
        this avoids)."""
        limit = self.max_line
        first: Frame | None = None
        if self._buf:
            nl = data.find(b"\n")
            if nl < 0:
                self._append_partial(data, 0, len(data))
                return []
            self._buf += data[:nl]
            first = (OversizedLine(len(self._buf), limit, bytes(self._buf[:HEAD_BYTES])) if len(self._buf) > limit
                     else bytes(self._buf))
            self._buf.clear()
            data = data[nl + 1:]
        lines: list[Frame] = data.split(b"\n")  # type: ignore[assignment]
        tail = lines.pop()
        if lines and max(map(len, lines)) > limit:  # type: ignore[arg-type]
            lines = [OversizedLine(len(x), limit, x[:HEAD_BYTES]) if len(x) > limit else x  # type: ignore[arg-type,index]
                     for x in lines]
        if first is not None:
            lines.insert(0, first)
        if tail:
            self._append_partial(tail, 0, len(tail))  # type: ignore[arg-type]
        return lines

    def take_block(self, data: bytes) -> bytes | None:
        """Add ``data`` and return every line it completed as **one** bytes object (the lines
        with their ``\n``, in order; ``b""`` when none), keeping the unfinished tail — for a
        caller that decodes a read's lines in one call. Returns None, having consumed
        nothing, when that form cannot honour the line limit (an oversized line is being
        discarded, ``data`` ends no line, or the block is longer than ``max_line``): then
        call :meth:`feed` with the same ``data``."""
        if self._discarding:
            return None
        nl = data.rfind(b"\n")
        if nl < 0:
            return None
        end = nl + 1
        if self._buf:
            if len(self._buf) + end > self.max_line:
                return None
            # one copy (issue 34): ``+=`` of a slice, then ``bytes()``, copied a 124 KiB block
            # three times, the bytearray's growth past glibc's mmap threshold faulting fresh
            # pages in on every read (≈ 90 µs a read; this is ≈ 4)
            block = b"".join((self._buf, memoryview(data)[:end]))
            self._buf.clear()
        else:
            if end > self.max_line:
                return None
            block = data if end == len(data) else data[:end]
        if end < len(data):
            self._append_partial(data, end, len(data))
        return block

    def _append_partial(self, data: bytes, start: int, end: int) -> None:
        if self._discarding:
            self._discarded += end - start
            return
        self._buf += data[start:end]
        if len(self._buf) > self.max_line:
            self._discarding = True
            self._discarded = len(self._buf)
            self._head = bytes(self._buf[:HEAD_BYTES])
            self._buf = bytearray()

    def close(self) -> list[Frame]:
        """At EOF: the unterminated tail, if any, as a final line (the peer may omit the last
        newline). An oversized tail is reported as such."""
        if self._discarding:
            self._discarding = False
            size, self._discarded = self._discarded, 0
            return [OversizedLine(size, self.max_line)]
        if self._buf:
            tail = bytes(self._buf)
            self._buf.clear()
            if tail.strip():
                return [tail]
        return []

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished line."""
        return len(self._buf)
