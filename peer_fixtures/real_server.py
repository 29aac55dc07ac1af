"""Spawn the real native ``codex app-server`` over stdio for *raw* tests (no codexrt API).

Why a separate, thread-based helper: the raw harness tests must observe the server's verbatim
stdout lines, independent of codexrt's own connection layer (which they help to check). One
reader thread per pipe feeds a queue (stdout) and a bounded tail (stderr); every wait takes a
timeout; :meth:`RawAppServer.close` escalates stdin EOF → SIGTERM → SIGKILL and always reaps.

Usage::

    with spawn_app_server(codex_bin, env) as srv:
        srv.initialize()
        tid = srv.call("thread/start", {...})["thread"]["id"]
        note = srv.wait_for(lambda m: m.get("method") == "turn/completed", timeout=20)
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RawAppServer", "spawn_app_server", "RawServerError", "DEFAULT_TIMEOUT", "record_session",
           "record_mcp_session"]

DEFAULT_TIMEOUT = 20.0
STDERR_TAIL = 400


class RawServerError(AssertionError):
    """The raw harness did not see what it waited for (timeout, EOF, error response)."""


_EOF = object()


class RawAppServer:
    """A running ``codex app-server`` child with line-level access to its stdio."""

    def __init__(self, proc: subprocess.Popen[bytes], argv: Sequence[str]) -> None:
        self.proc = proc
        self.argv = list(argv)
        #: every stdout line, verbatim (bytes without the newline), in arrival order
        self.raw_lines: list[bytes] = []
        #: decoded messages already taken off the queue but not matched by a wait
        self.backlog: list[dict[str, Any]] = []
        #: every decoded message, in arrival order
        self.seen: list[dict[str, Any]] = []
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._q: queue.Queue[Any] = queue.Queue()
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._eof = False
        self._threads = [
            threading.Thread(target=self._read_stdout, name="raw-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name="raw-stderr", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # -- pipes -------------------------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip(b"\n")
            self.raw_lines.append(line)
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"__unparsed__": line.decode("utf-8", "replace")}
            self._q.put(msg)
        self._q.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip("\n"))

    def send(self, obj: Mapping[str, Any]) -> None:
        """Write one JSON object as one line."""
        self.send_raw(json.dumps(obj, separators=(",", ":")).encode())

    def send_raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        with self._write_lock:
            self.proc.stdin.write(line + b"\n")
            self.proc.stdin.flush()

    # -- waiting -----------------------------------------------------------------------------

    def _next(self, deadline: float) -> dict[str, Any]:
        if self._eof:
            raise RawServerError(self._explain("stdout EOF"))
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            item = self._q.get(timeout=left)
        except queue.Empty:
            raise TimeoutError from None
        if item is _EOF:
            self._eof = True
            raise RawServerError(self._explain("stdout EOF"))
        self.seen.append(item)
        return item

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float = DEFAULT_TIMEOUT,
                 what: str = "a matching message") -> dict[str, Any]:
        """The first message (backlog first, then new ones) matching ``pred``; others are kept."""
        for i, m in enumerate(self.backlog):
            if pred(m):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = self._next(deadline)
            except TimeoutError:
                raise RawServerError(self._explain(f"timed out after {timeout}s waiting for {what}")) from None
            if pred(m):
                return m
            self.backlog.append(m)

    def wait_method(self, method: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The next notification or server request with ``method``."""
        return self.wait_for(lambda m: m.get("method") == method, timeout, what=repr(method))

    def request(self, method: str, params: Any = None, *, id: Any = None) -> Any:
        """Send a client request; return its id (default: a fresh integer)."""
        rid = next(self._ids) if id is None else id
        self.send({"id": rid, "method": method, "params": {} if params is None else params})
        return rid

    def response(self, rid: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The response envelope for request id ``rid``."""
        return self.wait_for(lambda m: "method" not in m and m.get("id") == rid and ("result" in m or "error" in m),
                             timeout, what=f"response to id {rid!r}")

    def call(self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """Request + wait; return ``result`` or raise :class:`RawServerError` on an error response."""
        rid = self.request(method, params)
        resp = self.response(rid, timeout)
        if "error" in resp:
            raise RawServerError(f"{method} failed: {resp['error']}")
        return resp["result"]

    def initialize(self, *, name: str = "codexrt-tests", version: str = "0.0.1",
                   capabilities: Mapping[str, Any] | None = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The handshake: ``initialize`` → result, then the ``initialized`` notification."""
        caps = {"experimentalApi": True, **(capabilities or {})}
        result = self.call("initialize", {"clientInfo": {"name": name, "title": name, "version": version},
                                          "capabilities": caps}, timeout)
        self.send({"method": "initialized"})
        return result

    def _explain(self, why: str) -> str:
        tail = "\n".join(list(self.stderr_tail)[-30:])
        return f"{why}; rc={self.proc.poll()}; stderr tail:\n{tail}"

    # -- shutdown ----------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> int:
        """Close stdin, then SIGTERM, then SIGKILL, each bounded; reap; return the exit code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        for step in ("eof", "term", "kill"):
            try:
                rc = self.proc.wait(timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                if step == "eof":
                    self.proc.terminate()
                elif step == "term":
                    self.proc.kill()
        else:
            rc = self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=timeout)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        return rc

    def __enter__(self) -> "RawAppServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spawn_app_server(codex_bin: str | os.PathLike[str], env: Mapping[str, str], *,
                     cwd: str | os.PathLike[str] | None = None, args: Sequence[str] = ()) -> RawAppServer:
    """Start ``<codex_bin> app-server [args]`` with stdio pipes and ``env`` (see ``codex_home.codex_env``)."""
    argv = [os.fspath(codex_bin), "app-server", *args]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(env), cwd=os.fspath(cwd) if cwd is not None else None)
    return RawAppServer(proc, argv)


# -- recording a real session -------------------------------------------------------------------


def record_session(codex_bin: str | os.PathLike[str], workdir: str | os.PathLike[str]) -> list[bytes]:
    """Drive one real session through the shapes codexrt decodes; return the server's stdout
    lines verbatim.

    Client request ids are strings ``"<method>#<n>"`` (the server echoes ids exactly), so a
    reader of the recording knows which method each response answers. Steps: handshake; a plain
    streamed turn; a reasoning turn; a command approval (accept); a file-change approval (accept,
    workspace-write); a command approval declined; a hanging stream interrupted; an approval left
    pending and interrupted (closed by ``serverRequest/resolved``); a settings update; a failed
    turn (``response.failed``); then thread/read, thread/list, thread/turns/list, thread/items/list.
    """
    # imported here so the module stays importable without the sibling modules on sys.path
    from peer_fixtures.codex_home import codex_env, make_codex_home
    from peer_fixtures.mock_responses import MockResponsesServer

    work = Path(workdir)
    cwd = work / "workspace"
    cwd.mkdir(parents=True, exist_ok=True)
    counter = itertools.count(1)

    with MockResponsesServer() as mock:
        home = make_codex_home(work / "codex-home", mock.base_url)
        with spawn_app_server(codex_bin, codex_env(home), cwd=cwd) as srv:

            def call(method: str, params: Any, allow_error: bool = False) -> Any:
                rid = f"{method}#{next(counter)}"
                srv.request(method, params, id=rid)
                resp = srv.response(rid, 30)
                if "error" in resp and not allow_error:
                    raise RawServerError(f"{method}: {resp['error']}")
                return resp.get("result")

            def turn(tid: str, text: str, **extra: Any) -> str:
                return call("turn/start", {"threadId": tid, "input": [
                    {"type": "text", "text": text, "text_elements": []}], **extra})["turn"]["id"]

            def completed(turn_id: str) -> dict[str, Any]:
                return srv.wait_for(lambda m: m.get("method") == "turn/completed"
                                    and m["params"]["turn"]["id"] == turn_id, 30, what="turn/completed")

            call("initialize", {"clientInfo": {"name": "codexrt-record", "title": "codexrt recorder",
                                               "version": "0.0.1"}, "capabilities": {"experimentalApi": True}})
            srv.send({"method": "initialized"})
            tid = call("thread/start", {"cwd": str(cwd), "approvalPolicy": "untrusted",
                                        "sandbox": "workspace-write"})["thread"]["id"]
            srv.wait_method("thread/started")
            completed(turn(tid, "Say hello [[mock:deltas:5]]", clientUserMessageId="client-msg-1"))
            completed(turn(tid, "Think first [[mock:reasoning]][[mock:text:Thought about it.]]"))
            t = turn(tid, "Run it [[mock:exec:python3 -c 'print(6*7)']]")
            req = srv.wait_method("item/commandExecution/requestApproval", 30)
            srv.send({"id": req["id"], "result": {"decision": "accept"}})
            completed(t)
            t = turn(tid, "Write it [[mock:patch:hello.txt:hello world]]")
            req = srv.wait_method("item/fileChange/requestApproval", 30)
            srv.send({"id": req["id"], "result": {"decision": "accept"}})
            completed(t)
            t = turn(tid, "Try this [[mock:exec:touch declined.txt]]")
            req = srv.wait_method("item/commandExecution/requestApproval", 30)
            srv.send({"id": req["id"], "result": {"decision": "decline"}})
            completed(t)
            t = turn(tid, "Wait forever [[mock:hang]]")
            srv.wait_method("turn/started", 30)
            mock_deadline = time.monotonic() + 10
            while not any(r.outcome is None for r in mock.model_requests()) and time.monotonic() < mock_deadline:
                time.sleep(0.01)  # the hanging request must be in flight before the interrupt
            call("turn/interrupt", {"threadId": tid, "turnId": t})
            completed(t)
            t = turn(tid, "Pending [[mock:exec:touch pending.txt]]")
            srv.wait_method("item/commandExecution/requestApproval", 30)
            call("turn/interrupt", {"threadId": tid, "turnId": t})
            completed(t)
            srv.wait_method("serverRequest/resolved", 30)
            call("thread/settings/update", {"threadId": tid, "model": "mock-model-b", "approvalPolicy": "on-request"})
            srv.wait_method("thread/settings/updated", 30)
            completed(turn(tid, "Fail please [[mock:fail]]"))
            # history reads: an older server may refuse some (0.147: legacy threads, no items/list)
            call("thread/read", {"threadId": tid}, allow_error=True)
            call("thread/list", {"limit": 5}, allow_error=True)
            call("thread/turns/list", {"threadId": tid, "limit": 3}, allow_error=True)
            call("thread/items/list", {"threadId": tid, "limit": 5}, allow_error=True)
            srv.close()
            return list(srv.raw_lines)


def record_mcp_session(codex_bin: str | os.PathLike[str], workdir: str | os.PathLike[str]) -> list[bytes]:
    """Drive one real session through the MCP shapes codexrt decodes; return the server's stdout
    lines verbatim (client request ids ``"<method>#<n>"``, as in :func:`record_session`).

    The MCP server is ``peer_fixtures/mcp_server.py`` (needs the ``mcp`` SDK) as ``testsrv``.
    Steps: handshake; ``mcpServerStatus/list``; a thread (``untrusted``) whose server is waited
    for (``mcpServer/startupStatus/updated`` ready); ``ask_form`` (tool approval accepted, the
    form accepted with typed values); ``ask_url`` (approval accepted for the session, the URL
    cancelled); ``rich`` (image + structuredContent); ``fail``; ``ask_secret`` with ``echo``
    (declined); ``config/mcpServer/reload``; then ``thread/read`` with turns.
    """
    from peer_fixtures.codex_home import codex_env, make_codex_home
    from peer_fixtures.mcp_server import mcp_server_toml
    from peer_fixtures.mock_responses import MockResponsesServer

    work = Path(workdir)
    cwd = work / "workspace"
    cwd.mkdir(parents=True, exist_ok=True)
    counter = itertools.count(1)
    with MockResponsesServer() as mock:
        home = make_codex_home(work / "codex-home", mock.base_url, extra_toml=mcp_server_toml("testsrv"))
        with spawn_app_server(codex_bin, codex_env(home), cwd=cwd) as srv:

            def call(method: str, params: Any) -> Any:
                rid = f"{method}#{next(counter)}"
                srv.request(method, params, id=rid)
                resp = srv.response(rid, 30)
                if "error" in resp:
                    raise RawServerError(f"{method}: {resp['error']}")
                return resp.get("result")

            def turn(tid: str, text: str, replies: list[dict[str, Any]]) -> None:
                """One turn; each elicitation request gets the next reply in ``replies``."""
                t = call("turn/start", {"threadId": tid, "input": [{"type": "text", "text": text,
                                                                    "text_elements": []}]})["turn"]["id"]
                left = list(replies)
                while True:
                    m = srv.wait_for(lambda m: m.get("method") in ("mcpServer/elicitation/request", "turn/completed"),
                                     30, what="an elicitation or turn/completed")
                    if m["method"] == "turn/completed":
                        if m["params"]["turn"]["id"] == t:
                            break
                        continue
                    srv.send({"id": m["id"], "result": left.pop(0)})
                if left:
                    raise RawServerError(f"{len(left)} planned elicitation replies were not asked for")

            call("initialize", {"clientInfo": {"name": "codexrt-record", "title": "codexrt recorder",
                                               "version": "0.0.1"}, "capabilities": {"experimentalApi": True}})
            srv.send({"method": "initialized"})
            tid = call("thread/start", {"cwd": str(cwd), "approvalPolicy": "untrusted",
                                        "sandbox": "read-only"})["thread"]["id"]
            srv.wait_for(lambda m: m.get("method") == "mcpServer/startupStatus/updated"
                         and m["params"]["status"] == "ready", 60, what="the MCP server ready")
            call("mcpServerStatus/list", {})
            accept = {"action": "accept", "content": {}}
            turn(tid, "[[mock:mcp:testsrv:ask_form]]", [accept, {"action": "accept", "content": {
                "name": "Ann", "age": 42, "ratio": 0.5, "subscribe": True, "colors": ["red", "blue"]}}])
            turn(tid, "[[mock:mcp:testsrv:ask_url]]", [{**accept, "_meta": {"persist": "session"}},
                                                       {"action": "cancel", "content": None}])
            turn(tid, "[[mock:mcp:testsrv:rich]]", [accept])
            turn(tid, "[[mock:mcp:testsrv:fail]]", [accept])
            turn(tid, '[[mock:mcp:testsrv:ask_secret:{"echo": true}]]', [accept, {"action": "decline", "content": None}])
            call("config/mcpServer/reload", {})
            call("thread/read", {"threadId": tid, "includeTurns": True})
            srv.close()
            return list(srv.raw_lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m peer_fixtures.real_server --record OUT [--version V] [--mcp]``: record a real session."""
    import argparse
    import tempfile

    from peer_fixtures.codex_bin import native_binary

    ap = argparse.ArgumentParser(prog="python -m peer_fixtures.real_server")
    ap.add_argument("--record", required=True, help="write the server's stdout lines (JSONL) here")
    ap.add_argument("--version", default=None, help="codex version (default: the pinned one)")
    ap.add_argument("--mcp", action="store_true", help="record the MCP session (record_mcp_session) instead")
    ns = ap.parse_args(argv)
    binary = native_binary(ns.version)
    if binary is None:
        raise SystemExit("codex binary not found; run .ci/setup")
    with tempfile.TemporaryDirectory(prefix="codexrt-record-") as d:
        lines = (record_mcp_session if ns.mcp else record_session)(binary, d)
    Path(ns.record).write_bytes(b"".join(line + b"\n" for line in lines))
    print(f"{len(lines)} lines -> {ns.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
