"""The stdio line plumbing both editor front ends use (``codexrt serve``, ``codexrt acp``): a
reader of framed lines from a byte stream and a writer of whole lines in FIFO order.

*Reading* (:func:`read_frames`): bounded frames from :class:`~codexrt._sansio._framing.LineBuffer`
(a line over the limit is one :class:`~codexrt._sansio._framing.OversizedLine`); a failing
stream is treated as EOF; the last unterminated line is delivered at EOF.

*Writing* (:class:`LineWriter`): each line is encoded once and written with one ``send_all``
under a FIFO lock, so lines never interleave and each leaves whole. When the stream breaks (the
host went away) ``on_broken`` runs once and later lines are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from codexrt._io._chunks import ChunkReader
from codexrt._sansio._framing import Frame, LineBuffer

__all__ = ["LineWriter", "read_frames"]

log = logging.getLogger("codexrt.lines")

_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


async def read_frames(receive: trio.abc.ReceiveStream, max_line: int) -> AsyncIterator[Frame]:
    """Every line of ``receive`` until EOF (a read error counts as EOF)."""
    buf = LineBuffer(max_line)
    read = ChunkReader(receive).receive  # one scheduler pass per chunk of a pipe (issue 34)
    while True:
        try:
            data = await read()
        except _GONE as exc:
            log.warning("stdin failed (%s); treating it as EOF", exc)
            data = b""
        for frame in (buf.feed(bytes(data)) if data else buf.close()):
            yield frame
        if not data:
            return


class LineWriter:
    """Whole lines to ``send`` in FIFO order (module doc)."""

    def __init__(self, send: trio.abc.SendStream, encode: Callable[[Any], bytes],
                 on_broken: Callable[[], None]) -> None:
        self._send = send
        self._encode = encode
        self._on_broken = on_broken
        self._lock = trio.Lock()
        self.broken = False
        self.lines_written = 0

    async def write(self, obj: Any) -> None:
        data = self._encode(obj)
        try:
            self._lock.acquire_nowait()  # free: no scheduler pass for it (``send_all`` has one)
        except trio.WouldBlock:
            await self._lock.acquire()  # FIFO behind the lines already waiting
        try:
            if self.broken:
                return
            try:
                await self._send.send_all(data)
                self.lines_written += 1
            except _GONE as exc:
                log.warning("stdout is gone (%s); stopping", exc)
                self.broken = True
                self._on_broken()
        finally:
            self._lock.release()
