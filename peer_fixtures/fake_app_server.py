"""Stdio runner of the scripted fake ``codex app-server`` (stdlib only, POSIX).

Usage::

    python -m peer_fixtures.fake_app_server SCENARIO [--log PATH]
    python peer_fixtures/fake_app_server.py SCENARIO [--log PATH]

``SCENARIO`` is a bundled name (``handshake-ok``) or a path to a scenario JSON file.  codexrt's
subprocess tests spawn this with ``sys.executable`` instead of the real binary.

Design (why a single thread and ``select``): a real app-server keeps reading stdin while a slow
request is in progress, so a ``Sleep`` in a scenario must not stop reading.  Instead of a reader
thread, the runner keeps an ``ActionQueue`` (timed batches, see ``scenario.py``) and waits in
``select`` on stdin with a timeout equal to the next due batch: input and timers are served by
one loop, ordering is deterministic, and there is no lock.  Writes are blocking, like a real
server's: when the client stops reading stdout or stderr, the fake blocks too, which is exactly
the condition the ``stderr-flood`` scenario checks a client against.  The fake itself cannot
deadlock on stderr because it never waits for the client while holding anything the client
needs; it only needs the client to drain both pipes.

Behaviour on the edges, mirroring the real server (``real-app-server-0.169.0.md`` §9): stdin EOF
ends the process with code 0 at once (pending timed batches are dropped, no ``turn/completed``);
SIGTERM exits 0 unless the scenario sets ``"sigterm": "ignore"`` (to test kill escalation); a
client that closes our stdout just makes later writes vanish.

``--log PATH`` appends every received line as one JSON object per line (the decoded message, or
``{"_invalid": text}``), flushed immediately, so a test can prove e.g. that exactly one
``turn/start`` was written even after the process is gone.  ``read_log(path)`` reads it back.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

if __package__ in (None, ""):  # run by path: make ``peer_fixtures`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from peer_fixtures.scenario import (  # noqa: E402
    ActionQueue,
    CloseStdout,
    Exit,
    ScenarioError,
    ScenarioPeer,
    Stderr,
    Write,
)
from peer_fixtures.sigexit import exit_on_sigterm  # noqa: E402

__all__ = ["main", "read_log"]

_CHUNK = 65536


def read_log(path: "str | os.PathLike[str]") -> list[Any]:
    """The messages a fake server received, as written by ``--log`` (missing file → [])."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_all(fd: int, data: bytes) -> bool:
    """Blocking write of all of ``data``; False when the reader is gone."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BrokenPipeError:
            return False
        except InterruptedError:  # pragma: no cover - PEP 475 retries already
            continue
        view = view[n:]
    return True


class _Runner:
    def __init__(self, peer: ScenarioPeer, log: BinaryIO | None) -> None:
        self.peer = peer
        self.log = log
        self.queue = ActionQueue()
        self.stdout_open = True
        self.stderr_open = True

    def finish(self, code: int) -> NoReturn:
        if self.log is not None:
            self.log.flush()
        os._exit(code)

    def run_due(self) -> None:
        for action in self.queue.pop_due(time.monotonic()):
            if isinstance(action, Write):
                if self.stdout_open and not _write_all(1, action.data):
                    self.stdout_open = False
            elif isinstance(action, Stderr):
                if self.stderr_open and not _write_all(2, action.data):
                    self.stderr_open = False
            elif isinstance(action, Exit):
                self.finish(action.code)
            elif isinstance(action, CloseStdout):
                if self.stdout_open:
                    os.close(1)
                    self.stdout_open = False

    def feed(self, line: bytes) -> None:
        actions = self.peer.on_line(line)
        if self.log is not None:
            self.log.write(json.dumps(self.peer.received[-1], ensure_ascii=False).encode("utf-8") + b"\n")
            self.log.flush()
        self.queue.add(time.monotonic(), actions)

    def loop(self) -> None:
        self.queue.add(time.monotonic(), self.peer.start())
        self.run_due()
        # stdin stays blocking (it may be a shared terminal): select() reports it readable and
        # os.read then returns what is there without waiting for a full chunk.
        sel = selectors.DefaultSelector()
        sel.register(0, selectors.EVENT_READ)
        buf = b""
        while True:
            due = self.queue.next_due()
            timeout = None if due is None else max(0.0, due - time.monotonic())
            if sel.select(timeout):
                try:
                    chunk = os.read(0, _CHUNK)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    self.finish(0)  # stdin EOF: exit 0 at once, like the real server
                if chunk:
                    buf += chunk
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            break
                        line, buf = buf[:nl], buf[nl + 1:]
                        if line.strip():
                            self.feed(line)
                            self.run_due()  # an Exit takes effect before the next line
            self.run_due()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m peer_fixtures.fake_app_server",
                                 description="Scripted fake `codex app-server` (stdio).")
    ap.add_argument("scenario", help="bundled scenario name or path to a scenario .json")
    ap.add_argument("--log", help="append every received line here, one JSON object per line")
    # Accept and ignore what a launcher appends for the real binary (`app-server`, `--listen`).
    ns, _unknown = ap.parse_known_args(argv)
    try:
        peer = ScenarioPeer(ns.scenario)
    except ScenarioError as exc:
        print(f"fake_app_server: {exc}", file=sys.stderr)
        return 2
    if peer.settings["sigterm"] == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        exit_on_sigterm(0)  # not a Python-level handler: that one can miss a SIGTERM (sigexit.py)
    log = open(ns.log, "ab") if ns.log else None  # noqa: SIM115 - closed by os._exit's flush
    _Runner(peer, log).loop()
    return 0  # pragma: no cover - loop() only ends through os._exit


if __name__ == "__main__":
    raise SystemExit(main())
