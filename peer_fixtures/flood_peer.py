"""A fake ``codex app-server`` that floods: the benchmark and endurance peer (stdlib only, POSIX).

Why a separate peer: the scripted fake (``fake_app_server.py``) builds every notification with
``json.dumps`` as it goes, so at 200,000 deltas the *peer* would be the bottleneck and the
benchmark would measure it. This one answers the handshake, ``thread/start``/``thread/resume``
and ``turn/start`` like the real 0.169.0 server (same shapes, ``emittedAtMs`` on every
notification, no ``"jsonrpc"`` field), then writes the turn's ``item/agentMessage/delta``
lines from **pre-built bytes**: one block of :data:`BLOCK` distinct delta lines is encoded once
per turn and written again and again, so writing costs a ``write(2)`` per 64 KiB.

Usage::

    python -m peer_fixtures.flood_peer [--deltas N] [--burst] [--chatter-every K] [--probe-every M]
                                       [--idle-probes P --idle-gap-ms G] [--history-items N]

A turn's delta count can be set per turn by putting ``[[flood:N]]`` in the ``turn/start`` text
(``[[flood:N:K]]`` also sets ``--chatter-every``), so a benchmark can warm up with a tiny turn
and then time a big one on the same thread.

What the client receives for one turn (the real order, §4 of the research notes)::

    turn/start response, thread/status/changed active, turn/started,
    item/started userMessage, item/completed userMessage, item/started agentMessage,
    N × item/agentMessage/delta (+ one thread/tokenUsage/updated every K deltas when K > 0),
    item/completed agentMessage (full text), thread/tokenUsage/updated,
    thread/status/changed idle, turn/completed

The text of delta *i* is ``expected_delta(i)``; the whole text is :func:`expected_text` (so a
test can check that not one character was lost, duplicated or reordered).

**Probes** (latency): with ``--probe-every M`` every M-th delta's text is replaced by
``⟨<monotonic_ns>⟩`` stamped right before the block holding it is written (``CLOCK_MONOTONIC``
is system-wide on Linux, so the consumer subtracts it from its own ``time.monotonic_ns()``).
``--idle-probes P`` makes the turn emit only P probe deltas, ``--idle-gap-ms`` apart: latency
with an idle pipe.

**Burst** (``--burst``, the throughput rows): a plain flood (no probes, no chatter) is written
in one go — the turn's opening lines, the pre-built blocks and its closing lines, back to back
with blocking writes and no look at stdin in between — so the peer costs a ``write(2)`` per
pipe-full and is never what a client waits on. A burst turn cannot be interrupted (nothing
reads stdin until it is written); the interrupt and slow-consumer rows use the default mode.

**Interrupt while flooding** (default mode): between two writes the peer polls stdin (``select`` with timeout
0); a ``turn/interrupt`` is answered at once and the turn ends ``interrupted`` after the delta
being written. So a client whose reader keeps reading can stop a flood promptly, and a client
whose reader blocks cannot — which is what the slow-consumer test checks.

**History**: with ``--history-items N``, ``thread/read`` answers a (not loaded) thread and
``thread/items/list`` pages through N synthetic items (userMessage/agentMessage pairs, cursor =
offset) and ``thread/turns/list`` through the same items as turns of two, for the history
benchmarks.

stdin EOF exits 0 at once (like the real server); SIGTERM exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import sys
import time
import uuid
from typing import Any

from peer_fixtures.sigexit import exit_on_sigterm

__all__ = ["BLOCK", "expected_delta", "expected_text", "probe_text", "main", "argv"]

#: Distinct delta lines per pre-built block.
BLOCK = 1000
_WRITE_CHUNK = 65536
_FLOOD_RE = re.compile(r"\[\[flood:(\d+)(?::(\d+))?\]\]")


def expected_delta(i: int) -> str:
    """Text of delta ``i`` (ASCII words of varying length, one non-ASCII every 97)."""
    j = i % BLOCK
    word = "tok" + "x" * (j % 7) + str(j)
    if j % 97 == 0:
        word += "é"
    return word + " "


def expected_text(n: int) -> str:
    """The whole streamed text of a turn of ``n`` deltas (without probes)."""
    block = "".join(expected_delta(i) for i in range(BLOCK))
    q, r = divmod(n, BLOCK)
    return block * q + "".join(expected_delta(i) for i in range(r))


_MARK = "\u2063flood-text\u2063"
_MARK_JSON = json.dumps(_MARK, ensure_ascii=False).encode("utf-8")
_ENCODED: dict[Any, Any] = {}


def _encoded_deltas() -> list[bytes]:
    """``expected_delta(i)`` for the pre-built block, each as a JSON string (cached)."""
    if "deltas" not in _ENCODED:
        _ENCODED["deltas"] = [json.dumps(expected_delta(i), ensure_ascii=False).encode("utf-8") for i in range(BLOCK)]
    return _ENCODED["deltas"]


def _encoded_text(n: int) -> bytes:
    """``expected_text(n)`` as a JSON string (cached per ``n``)."""
    if n not in _ENCODED:
        _ENCODED[n] = json.dumps(expected_text(n), ensure_ascii=False).encode("utf-8")
    return _ENCODED[n]


def probe_text(stamp_ns: int) -> str:
    return f"\u27e8{stamp_ns}\u27e9"


PROBE_RE = re.compile("\u27e8(\\d+)\u27e9")


def argv(*extra: str) -> list[str]:
    """The command line that runs this peer with the current interpreter."""
    return [sys.executable, "-m", "peer_fixtures.flood_peer", *extra]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class FloodPeer:
    def __init__(self, deltas: int, chatter_every: int, probe_every: int, idle_probes: int, idle_gap_ms: float,
                 history_items: int = 0, burst: bool = False) -> None:
        self.history_items = history_items
        self.burst = burst
        self.deltas = deltas
        self.chatter_every = chatter_every
        self.probe_every = probe_every
        self.idle_probes = idle_probes
        self.idle_gap = idle_gap_ms / 1000.0
        self.initialized = False
        self.buf = b""
        self.threads: set[str] = set()
        self.interrupt: tuple[Any, str] | None = None  # (request id, turn id) during a flood
        self.flooding_turn: str | None = None

    # -- output ---------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(1, view)
            except BrokenPipeError:
                os._exit(0)
            view = view[n:]

    def notify(self, method: str, params: dict[str, Any]) -> bytes:
        return _dumps({"method": method, "params": params, "emittedAtMs": _now_ms()})

    def respond(self, rid: Any, result: Any) -> bytes:
        return _dumps({"id": rid, "result": result})

    def error(self, rid: Any, message: str) -> bytes:
        return _dumps({"error": {"code": -32600, "message": message}, "id": rid})

    # -- input ----------------------------------------------------------------------------

    def poll(self, timeout: float | None) -> None:
        """Read what stdin has (waiting at most ``timeout``; None = block) and handle lines."""
        r, _, _ = select.select([0], [], [], timeout)
        if not r:
            return
        chunk = os.read(0, 65536)
        if not chunk:
            os._exit(0)
        self.buf += chunk
        while (nl := self.buf.find(b"\n")) >= 0:
            line, self.buf = self.buf[:nl], self.buf[nl + 1:]
            if line.strip():
                self.on_line(line)

    def on_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            return  # notifications (initialized) and replies: nothing to say
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "initialize":
            self.initialized = True
            self.write(self.respond(rid, {"userAgent": "flood_peer/0.169.0", "codexHome": "/nonexistent",
                                          "platformFamily": "unix", "platformOs": "linux"}))
        elif not self.initialized:
            self.write(self.error(rid, "Not initialized"))
        elif method in ("thread/start", "thread/resume"):
            tid = params.get("threadId") or str(uuid.uuid4())
            self.threads.add(tid)
            thread = {"id": tid, "preview": "", "ephemeral": False, "modelProvider": "mock", "createdAt": int(time.time()),
                      "updatedAt": int(time.time()), "status": {"type": "idle"}, "path": None, "cwd": "/",
                      "cliVersion": "0.169.0", "source": "vscode", "agentNickname": None, "agentRole": None,
                      "gitInfo": None, "name": None, "turns": []}
            self.write(self.respond(rid, {"thread": thread, "model": "mock-model", "modelProvider": "mock",
                                          "cwd": "/", "approvalPolicy": "never", "sandbox": {"type": "readOnly"},
                                          "reasoningEffort": None}))
            if method == "thread/start":
                self.write(self.notify("thread/started", {"thread": thread}))
        elif method == "thread/read":
            tid = params.get("threadId")
            self.write(self.respond(rid, {"thread": {"id": tid, "preview": "", "ephemeral": False, "updatedAt": 1764500000,
                                                     "createdAt": 1764400000, "status": {"type": "notLoaded"},
                                                     "path": None, "cwd": "/", "turns": []}}))
        elif method == "thread/items/list":
            self.write(self.respond(rid, self.items_page(params)))
        elif method == "thread/turns/list":
            self.write(self.respond(rid, self.turns_page(params)))
        elif method == "turn/start":
            if self.flooding_turn is not None:
                self.write(self.error(rid, "a turn is already running"))
                return
            self.turn(rid, params)
        elif method == "turn/interrupt":
            if self.flooding_turn is not None and params.get("turnId") == self.flooding_turn:
                self.interrupt = (rid, self.flooding_turn)
            else:
                self.write(self.error(rid, "no active turn to interrupt"))
        else:
            self.write(self.error(rid, f"flood_peer does not implement {method}"))

    # -- history --------------------------------------------------------------------------

    @staticmethod
    def history_item(i: int) -> dict[str, Any]:
        """Item ``i`` of the synthetic thread: even a userMessage, odd an agentMessage."""
        if i % 2 == 0:
            return {"type": "userMessage", "id": f"u-{i}", "clientId": None,
                    "content": [{"type": "text", "text": f"question {i}", "text_elements": []}],
                    "startedAtMs": 1764400000000 + i, "completedAtMs": 1764400000000 + i}
        return {"type": "agentMessage", "id": f"m-{i}", "text": f"answer {i}", "phase": None,
                "moderation": None, "memoryCitation": None, "delivery": None, "questions": None,
                "startedAtMs": 1764400000000 + i, "completedAtMs": 1764400000000 + i}

    def items_page(self, params: dict[str, Any]) -> dict[str, Any]:
        """``thread/items/list`` over a synthetic thread of ``--history-items`` items: turns of
        a userMessage and an agentMessage, ascending, ``limit`` per page, cursor = offset."""
        limit = max(1, min(int(params.get("limit") or 50), 500))
        start = int(params.get("cursor") or 0)
        end = min(self.history_items, start + limit)
        data = []
        for i in range(start, end):
            item = self.history_item(i)
            data.append({"turnId": f"turn-{i // 2:08d}", "item": item, "startedAtMs": item["startedAtMs"],
                         "completedAtMs": item["completedAtMs"]})
        return {"data": data, "nextCursor": str(end) if end < self.history_items else None}

    def turns_page(self, params: dict[str, Any]) -> dict[str, Any]:
        """``thread/turns/list`` over the same thread: turn ``k`` holds items ``2k`` and
        ``2k+1``; ascending (``sortDirection`` ``asc``) or descending (the default), ``limit``
        turns per page, cursor = offset in that order; with ``itemsView: "notLoaded"`` the
        turns come without their items, as the real server's do."""
        turns = (self.history_items + 1) // 2
        limit = max(1, min(int(params.get("limit") or 50), 500))
        start = int(params.get("cursor") or 0)
        end = min(turns, start + limit)
        asc = params.get("sortDirection") == "asc"
        view = params.get("itemsView") or "summary"
        data = []
        for pos in range(start, end):
            k = pos if asc else turns - 1 - pos
            items = [] if view == "notLoaded" else [self.history_item(i) for i in (2 * k, 2 * k + 1)
                                                      if i < self.history_items]
            data.append({"id": f"turn-{k:08d}", "items": items, "itemsView": view, "status": "completed",
                         "error": None, "startedAt": 1764400000 + k, "completedAt": 1764400000 + k, "durationMs": 1})
        return {"data": data, "nextCursor": str(end) if end < turns else None}

    # -- a turn ---------------------------------------------------------------------------

    def turn(self, rid: Any, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        text = ""
        for part in params.get("input") or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                text += part["text"]
        n, chatter = self.deltas, self.chatter_every
        m = _FLOOD_RE.search(text)
        if m:
            n = int(m.group(1))
            if m.group(2) is not None:
                chatter = int(m.group(2))
        turn_id = str(uuid.uuid4())
        item_id = f"msg_{uuid.uuid4().hex[:16]}"
        started = int(time.time())
        turn = {"id": turn_id, "rootTurnId": turn_id, "items": [], "itemsView": "notLoaded", "status": "inProgress",
                "error": None, "startedAt": None, "completedAt": None, "durationMs": None}
        base = {"threadId": thread_id, "turnId": turn_id}
        user = {"type": "userMessage", "id": str(uuid.uuid4()), "clientId": params.get("clientUserMessageId"),
                "content": [{"type": "text", "text": text, "text_elements": []}], "startedAtMs": _now_ms(),
                "completedAtMs": None}
        agent = {"type": "agentMessage", "id": item_id, "text": "", "phase": None, "moderation": None,
                 "memoryCitation": None, "delivery": None, "questions": None, "startedAtMs": _now_ms(),
                 "completedAtMs": None}
        head = b"".join([
            self.respond(rid, {"turn": turn}),
            self.notify("thread/status/changed", {"threadId": thread_id, "status": {"type": "active", "activeFlags": []}}),
            self.notify("turn/started", {"threadId": thread_id, "turn": {**turn, "startedAt": started}}),
            self.notify("item/started", {"item": user, **base, "startedAtMs": _now_ms()}),
            self.notify("item/completed", {"item": {**user, "completedAtMs": _now_ms()}, **base,
                                           "contentTokenCount": None, "completedAtMs": _now_ms()}),
            self.notify("item/started", {"item": agent, **base, "startedAtMs": _now_ms()}),
        ])
        if self.burst and not self.idle_probes and not self.probe_every and not chatter:
            self.burst_turn(head, base, item_id, n, thread_id, turn, agent, started)
            return
        self.write(head)
        self.flooding_turn = turn_id
        if self.idle_probes:
            parts = self.idle_flood(base, item_id)
        else:
            parts = self.flood(base, item_id, n, chatter)
        self.flooding_turn = None
        status = "completed"
        if self.interrupt is not None:
            irid, _ = self.interrupt
            self.interrupt = None
            self.write(self.respond(irid, {}))
            status = "interrupted"
        self.write(self.closing(base, thread_id, turn, agent, started, n, "".join(parts), status))

    def closing(self, base: dict[str, Any], thread_id: Any, turn: dict[str, Any], agent: dict[str, Any],
                started: int, n: int, full: str, status: str) -> bytes:
        """The lines that end a turn: the agent message completed, usage, idle, terminal."""
        done = {**agent, "text": full, "completedAtMs": _now_ms()}
        usage = {"totalTokens": n, "inputTokens": 1, "cachedInputTokens": 0, "cacheWriteInputTokens": 0,
                 "outputTokens": n, "reasoningOutputTokens": 0}
        return b"".join([
            self.notify("item/completed", {"item": done, **base, "contentTokenCount": None, "completedAtMs": _now_ms()}),
            self.notify("thread/tokenUsage/updated", {**base, "tokenUsage": {"total": usage, "last": usage,
                                                                             "modelContextWindow": 258400}}),
            self.notify("thread/status/changed", {"threadId": thread_id, "status": {"type": "idle"}}),
            self.notify("turn/completed", {"threadId": thread_id, "turn": {
                **turn, "status": status, "items": [done] if status == "completed" else [],
                "itemsView": "summary" if status == "completed" else "notLoaded", "startedAt": started,
                "completedAt": int(time.time()), "durationMs": 0}}),
        ])

    def burst_turn(self, head: bytes, base: dict[str, Any], item_id: str, n: int, thread_id: Any,
                   turn: dict[str, Any], agent: dict[str, Any], started: int) -> None:
        """A plain turn in one go (``--burst``): every line is built before the first write,
        from templates (the delta texts and the whole text are JSON-encoded once per process),
        then written back to back; stdin is not looked at until the turn is out."""
        pre, post = self._delta_line(base, item_id, _MARK).split(_MARK_JSON)
        enc = _encoded_deltas()
        block = b"".join([pre + e + post for e in enc])
        q, r = divmod(n, BLOCK)
        rest = b"".join([pre + e + post for e in enc[:r]])
        tail = self.closing(base, thread_id, turn, agent, started, n, _MARK, "completed")
        tail = tail.replace(_MARK_JSON, _encoded_text(n))
        self.write(head)
        for _ in range(q):
            self.write(block)
        self.write(rest + tail)

    def _delta_line(self, base: dict[str, Any], item_id: str, text: str) -> bytes:
        return self.notify("item/agentMessage/delta", {**base, "itemId": item_id, "delta": text})

    def flood(self, base: dict[str, Any], item_id: str, n: int, chatter: int) -> list[str]:
        """Write ``n`` deltas from pre-built bytes; returns the text parts actually sent."""
        lines = [self._delta_line(base, item_id, expected_delta(i)) for i in range(BLOCK)]
        chatter_line = self.notify("thread/tokenUsage/updated", {**base, "tokenUsage": {"total": {}, "last": {},
                                                                                         "modelContextWindow": 258400}})
        texts = [expected_delta(i) for i in range(BLOCK)]
        plain = not self.probe_every and not chatter
        block = b"".join(lines)
        sent: list[str] = []
        i = 0
        while i < n and self.interrupt is None:
            end = min(n, i + BLOCK)
            if plain and end - i == BLOCK:
                data = block  # the common case: the pre-built block as is
                sent.extend(texts)
            else:
                out: list[bytes] = []
                for k in range(i, end):
                    j = k % BLOCK
                    if self.probe_every and k % self.probe_every == 0:
                        t = probe_text(time.monotonic_ns())
                        out.append(self._delta_line(base, item_id, t))
                        sent.append(t)
                    else:
                        out.append(lines[j])
                        sent.append(texts[j])
                    if chatter and (k + 1) % chatter == 0:
                        out.append(chatter_line)
                data = b"".join(out)
            for off in range(0, len(data), _WRITE_CHUNK):
                self.write(data[off:off + _WRITE_CHUNK])
                self.poll(0)
            i = end
        return sent

    def idle_flood(self, base: dict[str, Any], item_id: str) -> list[str]:
        sent: list[str] = []
        for _ in range(self.idle_probes):
            if self.interrupt is not None:
                break
            deadline = time.monotonic() + self.idle_gap
            while (left := deadline - time.monotonic()) > 0:
                self.poll(left)
            t = probe_text(time.monotonic_ns())
            self.write(self._delta_line(base, item_id, t))
            sent.append(t)
        return sent


def main(args: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m peer_fixtures.flood_peer",
                                 description="Fake `codex app-server` that floods item/agentMessage/delta.")
    ap.add_argument("--deltas", type=int, default=200_000, help="deltas per turn (default 200000)")
    ap.add_argument("--chatter-every", type=int, default=0, metavar="K",
                    help="one thread/tokenUsage/updated after every K deltas (default 0: none)")
    ap.add_argument("--probe-every", type=int, default=0, metavar="M",
                    help="every M-th delta carries a monotonic_ns timestamp (latency)")
    ap.add_argument("--idle-probes", type=int, default=0, metavar="P",
                    help="instead of a flood, P timestamped deltas --idle-gap-ms apart")
    ap.add_argument("--idle-gap-ms", type=float, default=2.0)
    ap.add_argument("--history-items", type=int, default=0, metavar="N",
                    help="thread/items/list pages over a synthetic thread of N items (thread/read too)")
    ap.add_argument("--burst", action="store_true",
                    help="write a plain turn in one go, without polling stdin between writes")
    ns, _unknown = ap.parse_known_args(args)  # ignore `app-server`, `--listen …`
    exit_on_sigterm(0)  # race-free, unlike a Python-level handler around select() (sigexit.py)
    if ns.burst:  # before anything is timed: the default turn's text, encoded once
        _encoded_deltas()
        _encoded_text(ns.deltas)
    peer = FloodPeer(ns.deltas, ns.chatter_every, ns.probe_every, ns.idle_probes, ns.idle_gap_ms, ns.history_items,
                     ns.burst)
    while True:
        peer.poll(None)


if __name__ == "__main__":
    raise SystemExit(main())
