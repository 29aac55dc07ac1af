"""A raw NDJSON ACP client for black-box tests of ``codexrt acp`` (issue 30), and the pinned
official ACP schema it checks every agent line against.

The schema is ``schema/v1/schema.json`` of the npm package ``@agentclientprotocol/sdk`` at the
version pinned in ``.ci/acp-sdk-version``, installed by ``.ci/setup`` into
``.cache/acp-sdk-<version>/``. Missing, a test that needs it skips with the fix in the reason —
unless ``CODEXRT_REQUIRE_REAL=1`` (CI), where it fails (as the real-binary tests do).

:class:`AcpAgent` drives ``python -m codexrt_cli --log-level info acp ...`` over stdin/stdout,
knowing only the ACP spec and ``docs/acp.md``:

* every line the agent writes must be one JSON object (stdout carries protocol lines only), fit
  the official schema as an agent message, and fit the definition of what it is: a response to
  one of our requests (``InitializeResponse``, ``PromptResponse``, … or ``Error``), an agent
  request the client side has (``RequestPermissionRequest``, ``CreateElicitationRequest``; the
  ``fs/*`` and ``terminal/*`` methods are never offered, so one fails the test) or a
  notification (``SessionNotification``, ``CancelRequestNotification``);
* every request we send is answered exactly once, with its id of the same JSON type
  (``1`` ≠ ``"1"``); a second answer or one for an id we never sent fails at once, a missing
  one fails :meth:`AcpAgent.finish`;
* the agent's requests are answered by ``handlers`` (method → callable returning the result, or
  ``None`` to hold the request open for the test to answer with :meth:`AcpAgent.answer`);
* at the end, stdin EOF: the agent must exit (within ``TEARDOWN_BOUND``; ``EXIT_BOUND``, the
  issue's "exits ≤ 2 s", in the tests about ending) and no process it started may still be
  alive (its descendants seen in ``/proc`` while it ran, each known by pid and start time, so a
  reused pid is never mistaken for it).

Reading is lazy, like ``tests/e2e/test_serve_e2e.py``'s ``ServeProcess``: lines are read while
a test waits for something, so a test that waits for nothing is a client that stops reading.
``CODEXRT_ACP_TRANSCRIPTS=DIR`` writes each conversation to ``DIR/<test>.ndjson``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import trio

from tests._support import process_alive

ROOT = Path(__file__).resolve().parent.parent
WAIT = 20.0
"""Upper bound of any single wait for a line (a loaded 2-core machine): reaching it is a failure."""
EXIT_BOUND = 2.0
"""stdin EOF → the agent and every child gone (issue 30: "exits ≤ 2 s, no child left"): the
bound of the tests that are about ending (``finish(bound=EXIT_BOUND)``)."""
TEARDOWN_BOUND = 10.0
"""The same check at the end of every other test: still far below a hang (an agent waiting on a
stop budget, an orphan "still running 30 s later"), but not failed by a machine so loaded that
an interpreter takes seconds to exit."""

ACP_SDK_VERSION = (ROOT / ".ci" / "acp-sdk-version").read_text().strip()

# the response definition of each agent method we may call (schema ``x-method``)
RESPONSE_DEFS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
}
# what the agent may send us: codexrt offers neither fs/* nor terminal/* (issue 30)
AGENT_REQUEST_DEFS = {
    "session/request_permission": "RequestPermissionRequest",
    "elicitation/create": "CreateElicitationRequest",
}
AGENT_NOTIFICATION_DEFS = {
    "session/update": "SessionNotification",
    "$/cancel_request": "CancelRequestNotification",
    "elicitation/complete": "CompleteElicitationNotification",
}


# -- the pinned schema ---------------------------------------------------------------------------


def acp_schema_path() -> Path:
    return (ROOT / ".cache" / f"acp-sdk-{ACP_SDK_VERSION}" / "node_modules" / "@agentclientprotocol"
            / "sdk" / "schema" / "v1" / "schema.json")


def require_acp_schema() -> dict[str, Any]:
    """The pinned official ACP v1 schema. Missing, it skips the test with the fix in the reason —
    unless ``CODEXRT_REQUIRE_REAL=1`` (CI sets it), where it fails."""
    import pytest

    path = acp_schema_path()
    if path.is_file():
        return _load_schema(str(path))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    why = (f"the pinned ACP schema (@agentclientprotocol/sdk {ACP_SDK_VERSION}) is not installed at "
           f"{shown}; run `bash .ci/setup` (needs npm and the npm registry)")
    if os.environ.get("CODEXRT_REQUIRE_REAL") == "1":
        pytest.fail(why + " — CODEXRT_REQUIRE_REAL=1, so this is a failure, not a skip", pytrace=False)
    pytest.skip(why)


@functools.lru_cache(maxsize=None)
def _load_schema(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _validator(ref: str | None) -> Any:
    """``ref`` None: "an agent message" (the schema's ``Agent`` and ``ProtocolLevel`` branches)."""
    from jsonschema import Draft202012Validator

    schema = require_acp_schema()
    if ref is None:
        branches = [b for b in schema["anyOf"] if b.get("title") in ("Agent", "ProtocolLevel")]
        assert len(branches) == 2, "the pinned schema no longer has Agent/ProtocolLevel branches"
        root: dict[str, Any] = {"anyOf": branches}
    else:
        assert ref in schema["$defs"], f"no #/$defs/{ref} in the pinned ACP schema"
        root = {"$ref": f"#/$defs/{ref}"}
    return Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], **root})


def acp_problem(instance: Any, ref: str | None = None) -> str | None:
    """None when ``instance`` fits ``#/$defs/<ref>`` of the pinned ACP schema (``ref`` None: is a
    valid agent→client message), else its best-matching problem. Checked by ``jsonschema``."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(ref).iter_errors(instance))
    if error is None:
        return None
    return f"{error.json_path}: {error.message[:500]}"


# -- processes -----------------------------------------------------------------------------------


def descendants(pid: int) -> set[int]:
    """The live processes ``pid`` is answerable for now (from ``/proc``; empty where there is
    none): its children, and their descendants still in a child's process group. A process a
    child moved into a session of its own (``setsid``: codex's login-shell snapshot, and what a
    user's shell profile starts from it) is the child's business, not the agent's."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().decode(errors="replace").rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), int(fields[2])))  # ppid → (pid, pgid)
    direct = children.get(pid, [])
    groups = {pgid for _, pgid in direct}
    found = {child for child, _ in direct}
    todo = list(found)
    while todo:
        for child, pgid in children.get(todo.pop(), []):
            if child not in found and pgid in groups:
                found.add(child)
                todo.append(child)
    return found


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22), None when it is gone:
    with the pid, it names one process, so a pid the system reused is never taken for it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().decode(errors="replace").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def still_running(pid: int, started: str | None) -> bool:
    """Whether the process ``(pid, started)`` (see :func:`start_time`) still runs."""
    return process_alive(pid) and (started is None or start_time(pid) == started)


def fake_codex(tmp_path: Path, *scenarios: str, log: Path | None = None, name: str = "fake-codex") -> str:
    """An executable standing in for ``codex``: it runs the stdio fake app-server (ignoring the
    ``app-server`` arguments) with ``scenarios[k]`` on its k-th launch (the last one repeats), so
    "crash on the first launch, behave after the restart" is two names. Each launch appends its
    pid to ``<tmp_path>/<name>.pids`` (see :func:`fake_pids`) and, with ``log``, every line it
    received to ``log`` (``peer_fixtures.fake_app_server.read_log``)."""
    script = tmp_path / name
    counter = tmp_path / f"{name}.count"
    pids = tmp_path / f"{name}.pids"
    cases = []
    for k, scenario in enumerate(scenarios):
        cmd = [sys.executable, "-m", "peer_fixtures.fake_app_server", scenario]
        if log is not None:
            cmd += ["--log", str(log)]
        pattern = str(k) if k < len(scenarios) - 1 else "*"
        cases.append(f"  {pattern}) exec {shlex.join(cmd)} ;;")
    script.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {shlex.quote(str(counter))} 2>/dev/null || echo 0)\n"
        f"echo $((n + 1)) > {shlex.quote(str(counter))}\n"
        f"echo $$ >> {shlex.quote(str(pids))}\n"
        f"cd {shlex.quote(str(ROOT))}\n"
        'case "$n" in\n' + "\n".join(cases) + "\nesac\n")
    script.chmod(0o755)
    return str(script)


def fake_pids(tmp_path: Path, name: str = "fake-codex") -> list[int]:
    p = tmp_path / f"{name}.pids"
    return [int(x) for x in p.read_text().split()] if p.exists() else []


def fake_launches(tmp_path: Path, name: str = "fake-codex") -> int:
    return len(fake_pids(tmp_path, name))


def agent_env(tmp_path: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The agent's environment: state under ``tmp_path`` (nothing written outside the test's
    directory), the rest inherited (or ``base``)."""
    env = dict(os.environ if base is None else base)
    env["CODEXRT_STATE_DIR"] = str(tmp_path / "codexrt-state")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _key(rid: Any) -> tuple[str, Any]:
    return (type(rid).__name__, rid)  # 1 and "1" (and True) are different ids


class AcpAgent:
    """A running ``codexrt acp`` with a schema-checking, answer-counting line reader."""

    def __init__(self, proc: trio.Process, name: str, stderr_path: Path) -> None:
        self.proc = proc
        self.name = name
        self.stderr_path = stderr_path
        self.lines: list[dict[str, Any]] = []  # every stdout message, in order
        self.transcript: list[tuple[str, str]] = []
        self.handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.held: list[dict[str, Any]] = []  # agent requests left open (handler returned None)
        self.answered_agent: dict[tuple[str, Any], Any] = {}  # our answers to agent requests
        self.expect_null_id_errors = 0  # -32700/-32600 replies we provoked (their id is null)
        self._maybe: set[tuple[str, Any]] = set()  # ids of lines we broke: answered once at most
        self.kids: dict[int, str | None] = {}  # processes the agent started, seen while it ran → start time
        self._unconsumed: list[dict[str, Any]] = []
        self._buf = b""
        self._eof = False
        self._pending: dict[tuple[str, Any], str] = {}  # our request id → method
        self._answered: dict[tuple[str, Any], dict[str, Any]] = {}
        self._agent_open: set[tuple[str, Any]] = set()
        self._ids = 0
        self.finished = False

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, tmp_path: Path, *args: str, env: dict[str, str] | None = None, name: str = "acp",
                   cwd: Path | None = None, check_exit: bool = True) -> AsyncIterator["AcpAgent"]:
        """Start ``python -m codexrt_cli --log-level info acp *args``. On leaving: unless the test
        already did, :meth:`finish` (stdin EOF, drain, exit and children checks) — skipped when
        the body raised, or when ``check_exit`` is False (then the agent is killed if alive)."""
        require_acp_schema()
        stderr_path = tmp_path / f"{name}.stderr"
        argv = [sys.executable, "-m", "codexrt_cli", "--log-level", "info", "acp", *args]
        with open(stderr_path, "wb") as err:
            proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                    stderr=err, cwd=str(cwd or ROOT),
                                                    env=env if env is not None else agent_env(tmp_path))
        agent = cls(proc, name, stderr_path)
        ok = False
        try:
            yield agent
            ok = True
        finally:
            with trio.CancelScope(shield=True):
                try:
                    if ok and check_exit and not agent.finished:
                        await agent.finish()
                finally:
                    if proc.returncode is None:
                        agent.note_children()
                        with trio.move_on_after(WAIT):
                            await agent.close_stdin()
                            await proc.wait()
                        if proc.returncode is None:
                            proc.kill()
                            await proc.wait()
                    agent.kill_children()  # never leave a process behind, even on failure
                    agent._write_transcript()

    def _write_transcript(self) -> None:
        target = os.environ.get("CODEXRT_ACP_TRANSCRIPTS")
        if not target:
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", self.name).split(" ")[0].split("::")[-1]
        Path(target).mkdir(parents=True, exist_ok=True)
        with open(Path(target) / f"{test}-{self.name}.ndjson", "w", encoding="utf-8") as fh:
            for direction, line in self.transcript:
                fh.write(f"{direction} {line}\n")

    def note_children(self) -> set[int]:
        """Record the agent's live descendants now; returns the pids of all recorded so far."""
        if self.proc.returncode is None:
            for pid in descendants(self.proc.pid):
                self.kids.setdefault(pid, start_time(pid))
        return set(self.kids)

    def children_alive(self) -> list[int]:
        """The recorded descendants that still run (the very processes, not reused pids)."""
        return [pid for pid, started in self.kids.items() if still_running(pid, started)]

    def kill_children(self) -> None:
        """SIGKILL the recorded descendants still running (only those very processes)."""
        for pid in self.children_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    # -- stdin -----------------------------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data)
        self.transcript.append((">", data.decode("utf-8", "replace").rstrip("\n")))

    async def send_msg(self, msg: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(msg, ensure_ascii=False).encode() + b"\n")

    async def send(self, method: str, params: Any = None, *, id: Any = ...) -> Any:
        """Send a request; returns its id (``id`` may be any JSON value; default 1, 2, 3, ...)."""
        if id is ...:
            self._ids += 1
            id = self._ids
        key = _key(id)
        assert key not in self._pending, f"test bug: id {id!r} is still pending"
        self._answered.pop(key, None)  # JSON-RPC lets a settled id be used again: a new request
        self._pending[key] = method
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send_msg(msg)
        return id

    def may_answer(self, rid: Any) -> None:
        """A line we sent broken carries the id ``rid``: the agent may answer it (an error, once,
        with that id — or with id null) but need not."""
        self._answered.pop(_key(rid), None)
        self._maybe.add(_key(rid))
        self.expect_null_id_errors += 1

    async def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send_msg(msg)

    async def request(self, method: str, params: Any = None, *, id: Any = ..., timeout: float = WAIT) -> dict[str, Any]:
        """Send a request and return the whole response message."""
        rid = await self.send(method, params, id=id)
        return await self.response(rid, timeout=timeout)

    async def call(self, method: str, params: Any = None, *, timeout: float = WAIT) -> Any:
        """Send a request that must succeed; return its ``result``."""
        resp = await self.request(method, params, timeout=timeout)
        assert "error" not in resp, f"{method} failed: {resp['error']}\nstderr:\n{self.stderr()[-3000:]}"
        return resp["result"]

    async def answer(self, req: dict[str, Any], result: Any = None, *, error: dict[str, Any] | None = None) -> None:
        """Answer the agent's request ``req`` (once)."""
        key = _key(req["id"])
        assert key in self._agent_open, f"test bug: agent request {req['id']!r} is not open"
        self._agent_open.discard(key)
        self.held = [r for r in self.held if _key(r["id"]) != key]
        self.answered_agent[key] = result if error is None else {"error": error}
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": req["id"]}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send_msg(msg)

    async def close_stdin(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await self.proc.stdin.aclose()

    # -- stdout ----------------------------------------------------------------------------------

    def _check(self, msg: Any, raw: bytes) -> None:
        assert isinstance(msg, dict), f"stdout line is not a JSON object: {raw[:300]!r}"
        problem = acp_problem(msg)
        assert problem is None, f"agent line does not fit the ACP schema: {problem}\n{raw[:2000]!r}"
        if "method" in msg:
            method = msg["method"]
            if "id" in msg:
                assert method in AGENT_REQUEST_DEFS, f"agent sent an unoffered request {method!r}: {msg}"
                ref = AGENT_REQUEST_DEFS[method]
                key = _key(msg["id"])
                assert key not in self._agent_open, f"agent reused an open request id {msg['id']!r}: {msg}"
            else:
                assert method in AGENT_NOTIFICATION_DEFS, f"agent sent an undocumented notification: {msg}"
                ref = AGENT_NOTIFICATION_DEFS[method]
            problem = acp_problem(msg.get("params"), ref)
            assert problem is None, f"{method} params do not fit {ref}: {problem}\n{msg}"
            return
        assert "id" in msg and ("result" in msg) != ("error" in msg), f"not a JSON-RPC response: {msg}"
        if msg["id"] is None and "error" in msg and self.expect_null_id_errors:
            self.expect_null_id_errors -= 1
            self._answered.setdefault(("null-error", len(self._answered)), msg)
            return
        key = _key(msg["id"])
        assert key not in self._answered, f"request {msg['id']!r} answered twice:\n{self._answered[key]}\n{msg}"
        if key in self._maybe and key not in self._pending:
            self._maybe.discard(key)
            self._answered[key] = msg
            problem = acp_problem(msg.get("error"), "Error")
            assert "error" in msg and problem is None, f"a broken line answered without a proper error: {msg}"
            return
        assert key in self._pending, f"a response to an id we never sent (or of another JSON type): {msg}"
        method = self._pending.pop(key)
        self._answered[key] = msg
        if "error" in msg:
            problem = acp_problem(msg["error"], "Error")
        else:
            problem = acp_problem(msg["result"], RESPONSE_DEFS[method]) if method in RESPONSE_DEFS else None
        assert problem is None, f"{method} answer does not fit the schema: {problem}\n{msg}"

    async def _dispatch(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            self._agent_open.add(_key(msg["id"]))
            handler = self.handlers.get(msg["method"])
            result = handler(msg) if handler is not None else None
            if result is None:
                self.held.append(msg)
            else:
                await self.answer(msg, result)

    async def _read_line(self) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        while b"\n" not in self._buf:
            if self._eof:
                assert not self._buf, f"unterminated stdout tail: {self._buf[:300]!r}"
                return None
            chunk = await self.proc.stdout.receive_some(65536)
            if not chunk:
                self._eof = True
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(raw.decode("utf-8"))  # stdout carries protocol lines only
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise AssertionError(f"stdout carried a non-protocol line ({exc}): {raw[:300]!r}") from None
        self._check(msg, raw)
        self.lines.append(msg)
        self.transcript.append(("<", raw.decode()))
        await self._dispatch(msg)
        return msg

    async def next(self, pred: Callable[[dict[str, Any]], bool], *, timeout: float = WAIT,
                   what: str = "a line") -> dict[str, Any]:
        """The first not yet consumed message matching ``pred`` (earlier ones stay available)."""
        for i, msg in enumerate(self._unconsumed):
            if pred(msg):
                return self._unconsumed.pop(i)
        try:
            with trio.fail_after(timeout):
                while True:
                    msg = await self._read_line()
                    if msg is None:
                        raise AssertionError(f"stdout ended while waiting for {what}; stderr:\n"
                                             f"{self.stderr()[-3000:]}")
                    if pred(msg):
                        return msg
                    self._unconsumed.append(msg)
        except trio.TooSlowError:
            raise AssertionError(f"no {what} within {timeout:g} s; stderr:\n{self.stderr()[-3000:]}") from None

    async def read_one(self) -> dict[str, Any] | None:
        """Read (and check) the next line; None at EOF."""
        msg = await self._read_line()
        if msg is not None:
            self._unconsumed.append(msg)
        return msg

    async def read_for(self, seconds: float) -> None:
        """Keep reading (checking, answering by ``handlers``) for ``seconds``: a client that is
        attentive but waits, e.g. on a user who does not answer a permission."""
        with trio.move_on_after(seconds):
            while True:
                msg = await self._read_line()
                if msg is None:
                    return
                self._unconsumed.append(msg)

    async def response(self, rid: Any, *, timeout: float = WAIT) -> dict[str, Any]:
        key = _key(rid)
        if key in self._answered:
            msg = self._answered[key]
            with contextlib.suppress(ValueError):
                self._unconsumed.remove(msg)
            return msg
        return await self.next(lambda m: "method" not in m and _key(m.get("id")) == key and key in self._answered,
                               timeout=timeout, what=f"the answer to {rid!r}")

    async def agent_request(self, method: str, pred: Callable[[dict[str, Any]], bool] | None = None, *,
                            timeout: float = WAIT) -> dict[str, Any]:
        """Wait for a (held) request of the agent."""
        return await self.next(lambda m: m.get("method") == method and "id" in m and (pred is None or pred(m)),
                               timeout=timeout, what=f"an agent request {method}")

    async def notification(self, method: str, pred: Callable[[dict[str, Any]], bool] | None = None, *,
                           timeout: float = WAIT) -> dict[str, Any]:
        return await self.next(lambda m: m.get("method") == method and "id" not in m and (pred is None or pred(m)),
                               timeout=timeout, what=f"a {method} notification")

    async def update(self, kind: str, session_id: str | None = None,
                     pred: Callable[[dict[str, Any]], bool] | None = None, *, timeout: float = WAIT) -> dict[str, Any]:
        """Wait for a ``session/update`` of ``kind``; returns its ``update`` object."""
        msg = await self.next(
            lambda m: (m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
                       and (session_id is None or m["params"]["sessionId"] == session_id)
                       and (pred is None or pred(m["params"]["update"]))),
            timeout=timeout, what=f"a session/update {kind}")
        return msg["params"]["update"]

    def updates(self, session_id: str | None = None, kind: str | None = None, *, since: int = 0) -> list[dict[str, Any]]:
        """The ``update`` objects read so far (from line index ``since``)."""
        return [m["params"]["update"] for m in self.lines[since:]
                if m.get("method") == "session/update"
                and (session_id is None or m["params"]["sessionId"] == session_id)
                and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)]

    def text(self, session_id: str | None = None, kind: str = "agent_message_chunk", *, since: int = 0) -> str:
        """The concatenated text of the ``kind`` chunks read so far."""
        out = []
        for u in self.updates(session_id, kind, since=since):
            assert u["content"]["type"] == "text", f"non-text {kind}: {u}"
            out.append(u["content"]["text"])
        return "".join(out)

    def pending(self) -> list[Any]:
        """Our requests not answered yet (ids)."""
        return [k[1] for k in self._pending]

    # -- the usual steps -------------------------------------------------------------------------

    async def initialize(self, *, client_capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.call("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": client_capabilities if client_capabilities is not None else {
                "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "codexrt-tests", "version": "0"}})

    async def new_session(self, cwd: Path) -> str:
        result = await self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        return result["sessionId"]

    async def prompt(self, session_id: str, text: str, *, id: Any = ...) -> Any:
        """Send ``session/prompt`` with one text block; returns the request id (not the answer)."""
        return await self.send("session/prompt", {"sessionId": session_id,
                                                  "prompt": [{"type": "text", "text": text}]}, id=id)

    async def finish(self, *, bound: float = TEARDOWN_BOUND, allow_unanswered: bool = False) -> int:
        """stdin EOF → read (and check) every remaining line → the exit status, within ``bound``
        seconds; then every request we sent was answered (unless ``allow_unanswered``) and no
        process the agent started is alive."""
        self.finished = True
        self.note_children()
        await self.close_stdin()
        try:
            with trio.fail_after(bound):
                while await self._read_line() is not None:
                    pass
                code = await self.proc.wait()
                while self.children_alive():  # another process's state: nothing to wait on but a poll
                    await trio.sleep(0.01)
        except trio.TooSlowError:
            alive = self.children_alive()
            raise AssertionError(f"stdin EOF: agent exit={self.proc.returncode}, children alive {alive} "
                                 f"after {bound:g} s; stderr:\n{self.stderr()[-3000:]}") from None
        if not allow_unanswered:
            assert not self._pending, f"requests never answered: {self._pending}"
        return code
