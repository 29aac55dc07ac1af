"""Regenerate the golden rollout data with the pinned real ``codex`` and the loopback mock model.

Run from the repo root::

    .venv/bin/python tests/data/rollouts/generate.py

For each history mode (``paginated``, ``legacy``) it starts ``codex app-server`` on a throw-away
``CODEX_HOME`` pointing at :mod:`peer_fixtures.mock_responses`, runs one thread with several
turns (reasoning + text, a user message in the IDE text convention, a command, a file change
through ``apply_patch``), then records what the server says about that thread:

* ``<mode>.rollout.jsonl`` — the rollout file codex wrote (absolute tmp paths replaced by
  ``/TMP``);
* ``<mode>.native.json`` — ``{"threadId", "liveCompleted": [item/completed params…],
  "turnsFull": [Turn…] (thread/turns/list, itemsView full, ascending, every page),
  "itemsList": [ThreadItemEntry…] (thread/items/list, every page; paginated only),
  "readTurns": [Turn…] (thread/read includeTurns)}``.

Only loopback traffic: the mock binds 127.0.0.1 and the config disables plugins/analytics.
Every wait is bounded and the child is always reaped.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from peer_fixtures.codex_bin import native_binary  # noqa: E402
from peer_fixtures.codex_home import codex_env, make_codex_home  # noqa: E402
from peer_fixtures.mock_responses import MockResponsesServer  # noqa: E402

OUT = Path(__file__).resolve().parent
TIMEOUT = 30.0

PROMPTS = [
    "[[mock:reasoning:**Planning** a friendly reply.]][[mock:text:Hi! I am the mock model.]] say hi",
    "# Context from my IDE setup:\n\n## Active file: src/app.py\n\n## My request for Codex:\n"
    "list the files [[mock:exec:printf 'a.txt\\nb.txt\\n']]",
    "add a notes file [[mock:patch:notes.txt:first line\\nsecond line]]",
    "thanks [[mock:text:You are welcome.]]",
]


class Peer:
    def __init__(self, binary: Path, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [str(binary), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, cwd=str(cwd),
        )
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 1
        self.notes: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.q.put(json.loads(line))
        self.q.put(None)

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def _next(self, deadline: float) -> dict[str, Any]:
        msg = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
        if msg is None:
            raise RuntimeError("codex app-server exited")
        if "method" in msg and "id" in msg:  # a server request: we never expect one (policy never)
            self.send({"id": msg["id"], "error": {"code": -32601, "message": "not handled"}})
        elif "method" in msg:
            self.notes.append(msg)
        return msg

    def call(self, method: str, params: dict[str, Any]) -> Any:
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = self._next(deadline)
            if msg.get("id") == rid and "method" not in msg:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def wait_note(self, method: str, pred: Any = lambda p: True) -> dict[str, Any]:
        for n in self.notes:
            if n["method"] == method and pred(n["params"]):
                return n["params"]
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = self._next(deadline)
            if msg.get("method") == method and "id" not in msg and pred(msg["params"]):
                return msg["params"]

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _pages(peer: Peer, method: str, params: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    cursor = None
    for _ in range(100):
        res = peer.call(method, {**params, "cursor": cursor})
        out.extend(res["data"])
        cursor = res.get("nextCursor")
        if not cursor:
            return out
    raise RuntimeError("too many pages")


def run(mode: str, binary: Path, tmp: Path) -> None:
    home = tmp / f"home-{mode}"
    work = tmp / f"work-{mode}"
    work.mkdir(parents=True)
    with MockResponsesServer() as mock:
        make_codex_home(home, mock.base_url)
        peer = Peer(binary, codex_env(home), work)
        try:
            peer.call("initialize", {"clientInfo": {"name": "codexrt-golden", "title": None, "version": "0"},
                                     "capabilities": {"experimentalApi": True}})
            peer.send({"method": "initialized"})
            th = peer.call("thread/start", {"cwd": str(work), "approvalPolicy": "never",
                                            "sandbox": "danger-full-access", "historyMode": mode})
            tid = th["thread"]["id"]
            for text in PROMPTS:
                res = peer.call("turn/start", {"threadId": tid,
                                               "input": [{"type": "text", "text": text, "text_elements": []}]})
                turn_id = res["turn"]["id"]
                peer.wait_note("turn/completed", lambda p, t=turn_id: p["turn"]["id"] == t)
            live = [n["params"] for n in peer.notes if n["method"] == "item/completed"]
            turns = _pages(peer, "thread/turns/list", {"threadId": tid, "itemsView": "full",
                                                       "sortDirection": "asc", "limit": 2})
            items: list[Any] = []
            if mode == "paginated":
                items = _pages(peer, "thread/items/list", {"threadId": tid, "limit": 5})
            read = peer.call("thread/read", {"threadId": tid, "includeTurns": True})
            path = Path(read["thread"]["path"])
        finally:
            peer.close()
    def scrub(s: str) -> str:
        s = s.replace(str(tmp.resolve()), "/TMP").replace(str(tmp), "/TMP")
        return re.sub(r"/tmp/[A-Za-z0-9_.-]*/", "/TMP/", s)

    (OUT / f"{mode}.rollout.jsonl").write_text(scrub(path.read_text(encoding="utf-8")), encoding="utf-8")
    native = {"threadId": tid, "liveCompleted": live, "turnsFull": turns, "itemsList": items,
              "readTurns": read["thread"].get("turns", [])}
    (OUT / f"{mode}.native.json").write_text(scrub(json.dumps(native, indent=1, ensure_ascii=False)) + "\n",
                                             encoding="utf-8")
    print(mode, tid, path.name)


def main() -> int:
    binary = native_binary()
    if binary is None:
        print("pinned codex binary not installed", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="codexrt-golden-"))
    try:
        for mode in ("paginated", "legacy"):
            run(mode, binary, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
