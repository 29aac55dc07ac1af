"""A loopback mock of the OpenAI Responses API streaming endpoint, for the real ``codex``.

Why: the real ``codex app-server`` must be tested end to end without an account and without any
network but 127.0.0.1. Codex talks to a custom provider (``wire_api = "responses"``) with one
``POST {base_url}/responses`` per model request and reads a chunked HTTP/1.1 ``text/event-stream``
(research §1). This module answers those requests with scripted SSE streams and logs every
request, so tests can both steer the model and count how many model requests a turn made (the
"no turn is re-sent" proofs).

Stdlib only: it also runs as a child process (``python -m codexrt.loopback``; the old name
``python -m peer_fixtures.mock_responses`` still works) for out-of-process users.

How a response is chosen, per model request (first rule that applies):

1. the in-process queue: ``mock.enqueue(Script(...))`` — one script per request, FIFO;
2. the last input item is a ``function_call_output`` → a final text that quotes that output
   (so a test sees the command's real outcome), e.g. ``mock saw tool output: 42``;
3. directives in the text of the latest *user* message, ``[[mock:NAME]]`` or ``[[mock:NAME:ARG]]``:

   ======================================  ==================================================
   ``[[mock:text:<text>]]``                reply ``<text>`` (in a few deltas)
   ``[[mock:deltas:N]]`` / ``N:<ms>``      reply in exactly N deltas (optional pacing in ms)
   ``[[mock:reasoning]]`` / ``:<summary>`` stream a reasoning summary first
   ``[[mock:exec:<shell command>]]``       function call ``exec_command {"cmd": ...}``
   ``[[mock:patch:<path>:<content>]]``     ``apply_patch`` (add file) through ``exec_command``
   ``[[mock:mcp:<server>:<tool>]]`` /      an MCP tool call: a ``function_call`` named ``<tool>``
   ``…:<tool>:<json arguments>``           with ``namespace: "mcp__<server>"`` (how the real
                                           server offers MCP tools to the model)
   ``[[mock:spawn:<message>]]``            a sub-agent: ``spawn_agent {"message": <message>}`` in
                                           the ``multi_agent_v1`` namespace (the real server's
                                           multi-agent tool); ``<<``/``>>`` in ``<message>`` become
                                           ``[[``/``]]``, so the child can get its own directives
   ``[[mock:hang]]``                       ``response.created``, then keep-alives until the
                                           client goes away (or :data:`HANG_CAP_S`)
   ``[[mock:fail]]`` / ``:<message>``      ``response.failed``
   ``[[mock:http500]]``                    HTTP 500 with a JSON error body
   ======================================  ==================================================

   In ``<content>`` the two characters ``\\n`` mean a newline. Directives combine where that
   makes sense (``[[mock:reasoning]][[mock:deltas:50]]``);
4. default: :data:`DEFAULT_TEXT` in a few deltas.

Every loop is bounded: a hang ends when the client disconnects, the server stops, or after
:data:`HANG_CAP_S`; delta pacing is capped; stop() closes every open connection.

Long turns: codex's ``stream_idle_timeout_ms`` (default 300 s) is reset by SSE *events* only,
not by the ``: keep-alive`` comments a hang sends — so a hang longer than that timeout fails the
turn (``idle timeout waiting for SSE``), while paced deltas (``[[mock:deltas:90:1000]]``: one
event a second for 90 s) keep a turn streaming for as long as they last
(``tests/real/test_long_real.py``, docs/real-server-notes.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import http.server
import itertools
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from codexrt.loopback._http import read_body

__all__ = ["MockResponsesServer", "Script", "RecordedRequest", "DEFAULT_TEXT", "DEFAULT_REASONING", "HANG_CAP_S",
           "parse_directives", "patch_command", "main"]

DEFAULT_TEXT = "Hello from the mock model."
DEFAULT_REASONING = "**Thinking** about the request."
HANG_CAP_S = 120.0
KEEPALIVE_S = 0.5
MAX_DELTAS = 100_000
MAX_DELTA_INTERVAL_S = 1.0
MAX_BODY = 256 << 20  # bytes of one request body (codex sends the whole thread so far); more is a 400

_DIRECTIVE = re.compile(r"\[\[mock:([a-z0-9_]+)(?::(.*?))?\]\]", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Script:
    """What the mock model does for one request.

    ``kind`` is one of ``"text"``, ``"exec"``, ``"patch"``, ``"call"``, ``"hang"``, ``"fail"``, ``"http"``.
    Build them with the class methods; ``reasoning`` (a summary text) may prefix any kind that
    streams output (text, exec, patch).
    """

    kind: str = "text"
    text: str | None = None
    deltas: int | None = None
    delta_interval: float = 0.0
    reasoning: str | None = None
    cmd: str | None = None
    exec_extra: dict[str, Any] | None = None
    error_message: str = "mock failure"
    http_status: int = 500
    call_name: str | None = None
    call_namespace: str | None = None
    call_arguments: str | None = None

    @classmethod
    def reply(cls, text: str = DEFAULT_TEXT, *, deltas: int | None = None,
              delta_interval: float = 0.0, reasoning: str | None = None) -> "Script":
        """A final assistant message ``text``, split into ``deltas`` deltas (default: a few)."""
        return cls("text", text=text, deltas=deltas, delta_interval=delta_interval, reasoning=reasoning)

    @classmethod
    def many_deltas(cls, n: int, *, delta_interval: float = 0.0, reasoning: str | None = None) -> "Script":
        """Exactly ``n`` deltas ``"d0 "``, ``"d1 "``, …; the final text is their concatenation."""
        return cls("text", text=None, deltas=n, delta_interval=delta_interval, reasoning=reasoning)

    @classmethod
    def exec_command(cls, cmd: str, *, reasoning: str | None = None, **extra: Any) -> "Script":
        """A function call ``exec_command {"cmd": cmd, **extra}`` (e.g. ``sandbox_permissions``,
        ``justification``). Under ``approvalPolicy: "untrusted"`` this asks for approval."""
        return cls("exec", cmd=cmd, exec_extra=dict(extra) or None, reasoning=reasoning)

    @classmethod
    def apply_patch(cls, path: str, content: str, *, reasoning: str | None = None) -> "Script":
        """Add the file ``path`` with ``content`` via ``apply_patch`` inside ``exec_command``
        (this is how the real server reaches a ``fileChange`` item for an unknown model)."""
        return cls("patch", cmd=patch_command(path, content), reasoning=reasoning)

    @classmethod
    def mcp_tool(cls, server: str, tool: str, arguments: dict[str, Any] | None = None, *,
                 reasoning: str | None = None) -> "Script":
        """A call of MCP tool ``tool`` of ``server``: a ``function_call`` with ``name: tool`` and
        ``namespace: "mcp__<server>"`` (the flat ``mcp__<server>__<tool>`` is not recognised)."""
        return cls("call", call_name=tool, call_namespace=f"mcp__{server}",
                   call_arguments=json.dumps(arguments or {}), reasoning=reasoning)

    @classmethod
    def spawn_agent(cls, message: str, *, reasoning: str | None = None, **extra: Any) -> "Script":
        """Ask the server for a sub-agent: ``spawn_agent {"message": message, **extra}`` in the
        ``multi_agent_v1`` namespace, the tool the real server offers the model in every turn
        (docs/real-server-notes.md, "Sub-agents")."""
        return cls("call", call_name="spawn_agent", call_namespace="multi_agent_v1",
                   call_arguments=json.dumps({"message": message, **extra}), reasoning=reasoning)

    @classmethod
    def hang(cls) -> "Script":
        """``response.created``, then only keep-alive comments until the client goes away."""
        return cls("hang")

    @classmethod
    def fail(cls, message: str = "mock failure") -> "Script":
        """``response.created`` then ``response.failed`` with ``message``."""
        return cls("fail", error_message=message)

    @classmethod
    def http_error(cls, status: int = 500, message: str = "mock http error") -> "Script":
        """A plain HTTP error status with a JSON error body (no SSE)."""
        return cls("http", http_status=status, error_message=message)

    def describe(self) -> str:
        bits = [self.kind]
        if self.reasoning:
            bits.append("reasoning")
        if self.deltas is not None:
            bits.append(f"deltas={self.deltas}")
        if self.cmd is not None:
            bits.append(f"cmd={self.cmd[:60]!r}")
        if self.kind == "http":
            bits.append(str(self.http_status))
        if self.call_name is not None:
            bits.append(f"call={self.call_namespace}.{self.call_name}")
        return " ".join(bits)


def patch_command(path: str, content: str) -> str:
    """The ``exec_command`` ``cmd`` that makes codex apply an *Add File* patch."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join(f"+{line}\n" for line in lines)
    return f"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\nEOF\n"


def parse_directives(text: str) -> Script | None:
    """The :class:`Script` the ``[[mock:…]]`` directives in ``text`` ask for, or None."""
    found = [(m.group(1), m.group(2)) for m in _DIRECTIVE.finditer(text)]
    if not found:
        return None
    kind = "text"
    reply: str | None = None
    deltas: int | None = None
    interval = 0.0
    reasoning: str | None = None
    cmd: str | None = None
    message = "mock failure"
    status = 500
    call: Script | None = None
    for name, arg in found:
        if name == "text":
            reply = arg or ""
        elif name == "deltas":
            n, _, ms = (arg or "").partition(":")
            deltas = max(1, min(int(n), MAX_DELTAS)) if n.strip().isdigit() else None
            if ms.strip().isdigit():
                interval = min(int(ms) / 1000.0, MAX_DELTA_INTERVAL_S)
        elif name == "reasoning":
            reasoning = arg or DEFAULT_REASONING
        elif name == "exec":
            kind, cmd = "exec", arg or "true"
        elif name == "patch":
            path, _, content = (arg or "").partition(":")
            kind, cmd = "patch", patch_command(path or "mock-file.txt", content.replace("\\n", "\n"))
        elif name == "hang":
            kind = "hang"
        elif name == "fail":
            kind, message = "fail", arg or "mock failure"
        elif name == "http500":
            kind, status = "http", 500
        elif name == "mcp":
            server, _, rest = (arg or "").partition(":")
            tool, _, raw_args = rest.partition(":")
            call = Script.mcp_tool(server, tool, json.loads(raw_args) if raw_args.strip() else {})
            kind = "call"
        elif name == "spawn":
            call = Script.spawn_agent((arg or "").replace("<<", "[[").replace(">>", "]]") or "sub-agent task")
            kind = "call"
    if kind == "call" and call is not None:
        return dataclasses.replace(call, reasoning=reasoning)
    if kind == "text" and deltas is not None and reply is None:
        return Script("text", text=None, deltas=deltas, delta_interval=interval, reasoning=reasoning)
    return Script(kind, text=reply if reply is not None else (DEFAULT_TEXT if kind == "text" else None),
                  deltas=deltas, delta_interval=interval, reasoning=reasoning, cmd=cmd,
                  error_message=message, http_status=status)


@dataclasses.dataclass
class RecordedRequest:
    """One HTTP request the mock received (nothing secret: codex sends no credentials here)."""

    seq: int
    time: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    body_error: str | None = None
    script: str | None = None
    outcome: str | None = None

    @property
    def is_model_request(self) -> bool:
        return self.method == "POST" and self.path.rstrip("/").endswith("/responses")

    @property
    def input(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        items = body.get("input")
        return items if isinstance(items, list) else []

    @property
    def last_user_text(self) -> str:
        """Text of the latest ``role: user`` message in the input ('' if none)."""
        for item in reversed(self.input):
            if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == "user":
                return _content_text(item.get("content"))
        return ""

    @property
    def user_texts(self) -> list[str]:
        return [
            _content_text(i.get("content"))
            for i in self.input
            if isinstance(i, dict) and i.get("type", "message") == "message" and i.get("role") == "user"
        ]

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def bearer_sha256(self) -> str | None:
        """sha256 hex of the bearer credential the request carried (the value itself is not kept)."""
        return self.headers.get("authorization-sha256")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):  # older shape {"content": ..., "success": ...}
        return _output_text(output.get("content"))
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return json.dumps(output)


def _recorded_headers(headers: Any) -> dict[str, str]:
    """Request headers as recorded: lower-case names; ``authorization`` replaced by
    ``authorization-sha256`` (of its credential after ``Bearer ``), so a log file never holds a key."""
    out: dict[str, str] = {}
    for k, v in headers.items():
        if k.lower() == "authorization":
            cred = v[7:] if v[:7].lower() == "bearer " else v
            out["authorization-sha256"] = hashlib.sha256(cred.encode("utf-8", "surrogateescape")).hexdigest()
        else:
            out[k.lower()] = v
    return out


class _ClientGone(Exception):
    """The HTTP client closed the connection (codex interrupted or was stopped)."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the request log is the record; keep test output quiet

    def setup(self) -> None:
        super().setup()
        self.server.mock._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.mock._track(self.connection, False)

    def _answered(self, rec: RecordedRequest, outcome: str) -> str:
        """Record ``outcome`` and its log line *before* the answer's last bytes: a client that read a
        whole answer finds it recorded, the log in request order (one gone during them keeps it)."""
        self.server.mock._changed(rec, outcome)
        return outcome

    def do_GET(self) -> None:
        rec = self.server.mock._record(self, None, None)
        self._answered(rec, "404")
        self._send_json(404, {"error": {"message": f"mock: no GET {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            raw = read_body(self.rfile, self.headers, MAX_BODY)
        except ValueError as exc:  # a body it cannot read: a 400, recorded; the connection is closed
            rec, self.close_connection = self.server.mock._record(self, None, f"unreadable body: {exc}"[:200]), True
            self._answered(rec, "400")
            return self._send_json(400, {"error": {"message": f"mock: unreadable body: {exc}"[:300],
                                                   "type": "invalid_request_error"}})
        body: Any = None
        err: str | None = None
        enc = self.headers.get("content-encoding")
        if enc:
            err = f"unsupported content-encoding {enc!r}"
        else:
            try:
                body = json.loads(raw.decode("utf-8")) if raw else None
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                err = f"{type(exc).__name__}: {exc}"
        rec = self.server.mock._record(self, body, err)
        want = self.server.mock.require_bearer
        if want is not None and rec.is_model_request and self.headers.get("authorization") != f"Bearer {want}":
            # A provider that needs a key: 401 without the exact bearer (nothing is played).
            self._answered(rec, "401")
            self._send_json(401, {"error": {"message": "mock: missing or wrong bearer token",
                                            "type": "invalid_request_error", "code": "invalid_api_key"}})
            return
        if not rec.is_model_request:
            self._answered(rec, "404")
            self._send_json(404, {"error": {"message": f"mock: no POST {self.path}", "type": "not_found"}})
            return
        try:
            script = self.server.mock._choose(rec)
        except Exception as exc:  # a directive it cannot read: a 500 naming it, not a dropped connection
            self._answered(rec, f"bad script: {type(exc).__name__}")
            return self._send_json(500, {"error": {"message": f"mock: {exc!r}"[:500], "type": "server_error"}})
        rec.script = script.describe()
        try:
            outcome = self._play(script, rec)
        except (_ClientGone, BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            outcome = "client_disconnected"
            self.close_connection = True
        except Exception as exc:  # a defect of the mock's: said, recorded, the connection closed
            print(f"codexrt.loopback: request {rec.seq} failed: {exc!r}", file=sys.stderr)
            outcome, self.close_connection = f"mock error: {type(exc).__name__}", True
        if rec.outcome is None:  # not answered before its end (a hang the mock's stop ended, a client gone)
            self._answered(rec, outcome)

    def _send_json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:  # the 400 for a body it cannot read: the stream cannot go on
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, type_: str, **fields: Any) -> None:
        payload = {"type": type_, **fields}
        self._chunk(f"event: {type_}\ndata: {json.dumps(payload)}\n\n".encode())

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _client_gone(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the client to close its end; True if it did."""
        try:
            r, _, _ = select.select([self.connection], [], [], timeout)
            if not r:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _play(self, script: Script, rec: RecordedRequest) -> str:
        mock = self.server.mock
        if script.kind == "http":
            outcome = self._answered(rec, f"http {script.http_status}")
            self._send_json(script.http_status, {"error": {"message": script.error_message, "type": "server_error"}})
            return outcome
        resp_id = f"resp_mock_{rec.seq}"
        self._start_stream()
        self._event("response.created", response={"id": resp_id, "object": "response", "status": "in_progress"})
        if script.kind == "hang":
            deadline = time.monotonic() + mock.hang_cap
            while time.monotonic() < deadline:
                if mock._stopping.is_set():
                    return "hang_stopped"
                if self._client_gone(KEEPALIVE_S):
                    raise _ClientGone
                self._chunk(b": keep-alive\n\n")
            self._answered(rec, "hang_cap_reached")
            self._end_stream()
            self.close_connection = True
            return "hang_cap_reached"
        if script.kind == "fail":
            self._event("response.failed", response={
                "id": resp_id, "object": "response", "status": "failed",
                "error": {"code": "server_error", "message": script.error_message}})
            self._answered(rec, "failed")
            self._end_stream()
            return "failed"
        out_index = 0
        if script.reasoning:
            self._reasoning(rec.seq, out_index, script.reasoning)
            out_index += 1
        if script.kind in ("exec", "patch"):
            args = {"cmd": script.cmd, **(script.exec_extra or {})}
            self._function_call(rec.seq, out_index, "exec_command", json.dumps(args))
        elif script.kind == "call":
            self._function_call(rec.seq, out_index, script.call_name or "", script.call_arguments or "{}",
                                namespace=script.call_namespace)
        else:
            self._message(rec.seq, out_index, script)
        self._event("response.completed", response={
            "id": resp_id, "object": "response", "status": "completed",
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 15}})
        self._answered(rec, "completed")
        self._end_stream()
        return "completed"

    def _reasoning(self, seq: int, idx: int, summary: str) -> None:
        item_id = f"rs_mock_{seq}_{idx}"
        self._event("response.output_item.added", output_index=idx,
                    item={"type": "reasoning", "id": item_id, "summary": []})
        self._event("response.reasoning_summary_part.added", item_id=item_id, output_index=idx,
                    summary_index=0, part={"type": "summary_text", "text": ""})
        for piece in _split(summary, 4):
            self._event("response.reasoning_summary_text.delta", item_id=item_id, output_index=idx,
                        summary_index=0, delta=piece)
        self._event("response.reasoning_summary_text.done", item_id=item_id, output_index=idx,
                    summary_index=0, text=summary)
        self._event("response.output_item.done", output_index=idx, item={
            "type": "reasoning", "id": item_id,
            "summary": [{"type": "summary_text", "text": summary}]})

    def _message(self, seq: int, idx: int, script: Script) -> None:
        item_id = f"msg_mock_{seq}_{idx}"
        if script.text is None:
            pieces = [f"d{i} " for i in range(script.deltas or 3)]
        else:
            pieces = _split(script.text, script.deltas or 3)
        text = "".join(pieces)
        self._event("response.output_item.added", output_index=idx, item={
            "type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []})
        self._event("response.content_part.added", item_id=item_id, output_index=idx, content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []})
        stopping = self.server.mock._stopping
        for piece in pieces:
            self._event("response.output_text.delta", item_id=item_id, output_index=idx,
                        content_index=0, delta=piece)
            if script.delta_interval > 0:
                if stopping.wait(script.delta_interval):
                    raise _ClientGone
        self._event("response.output_text.done", item_id=item_id, output_index=idx, content_index=0, text=text)
        part = {"type": "output_text", "text": text, "annotations": []}
        self._event("response.content_part.done", item_id=item_id, output_index=idx, content_index=0, part=part)
        self._event("response.output_item.done", output_index=idx, item={
            "type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [part]})

    def _function_call(self, seq: int, idx: int, name: str, arguments: str, *, namespace: str | None = None) -> None:
        item_id = f"fc_mock_{seq}_{idx}"
        call_id = f"call_mock_{seq}_{idx}"
        ns = {"namespace": namespace} if namespace else {}
        self._event("response.output_item.added", output_index=idx, item={
            "type": "function_call", "id": item_id, "call_id": call_id, "name": name, **ns,
            "arguments": "", "status": "in_progress"})
        self._event("response.function_call_arguments.delta", item_id=item_id, output_index=idx, delta=arguments)
        self._event("response.function_call_arguments.done", item_id=item_id, output_index=idx, arguments=arguments)
        self._event("response.output_item.done", output_index=idx, item={
            "type": "function_call", "id": item_id, "call_id": call_id, "name": name, **ns,
            "arguments": arguments, "status": "completed"})


def _split(text: str, n: int) -> list[str]:
    """``text`` in ``n`` consecutive pieces (fewer if the text is shorter), never empty ones."""
    if not text:
        return [""]
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    bounds = [i * size + min(i, extra) for i in range(n + 1)]  # the first ``extra`` pieces one longer
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    mock: "MockResponsesServer"


class MockResponsesServer:
    """The loopback Responses API mock. Use as a context manager::

        with MockResponsesServer() as mock:
            mock.enqueue(Script.exec_command("echo hi"))
            ... mock.base_url ...   # "http://127.0.0.1:<port>/v1"
            assert len(mock.model_requests()) == 2

    ``log_path`` appends one JSON line per request, with its outcome, just before the answer's last
    bytes (after, if unanswered); a log it cannot write is said once on stderr (``log_failed``).
    ``keep_requests`` bounds the in-memory log to the most recent requests (each keeps its whole
    body: a long session would otherwise grow without end); ``None`` keeps every request, as tests
    that count them need; ``dropped_requests`` says how many were let go (each logged, unless the log failed).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, log_path: str | os.PathLike[str] | None = None,
                 hang_cap: float = HANG_CAP_S, require_bearer: str | None = None,
                 keep_requests: int | None = None) -> None:
        if keep_requests is not None and keep_requests < 1:
            raise ValueError("keep_requests must be at least 1 (or None: keep every request)")
        self.keep_requests = keep_requests
        self.dropped_requests = 0
        self.log_failed = False  # the request log could not be written (said once on stderr)
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the mock only binds to loopback")
        #: When set, a model request without ``Authorization: Bearer <require_bearer>`` gets 401
        #: (a provider that needs an API key). Recorded headers never keep the authorization value.
        self.require_bearer = require_bearer
        self.hang_cap = hang_cap
        self._host = host
        self._port = port
        self._log_path = Path(log_path) if log_path is not None else None
        self._lock = threading.Condition()
        self._queue: list[Script] = []
        self._requests: list[RecordedRequest] = []
        self._seq = itertools.count()
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "MockResponsesServer":
        if self._httpd is not None:
            raise RuntimeError("mock already started")
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.mock = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="mock-responses", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every open connection (bounded; idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "MockResponsesServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("mock not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The provider ``base_url`` for codex's config (codex appends ``/responses``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *scripts: Script) -> None:
        """Queue scripts; each is used by exactly one upcoming model request, in order."""
        with self._lock:
            self._queue.extend(scripts)

    def pending_scripts(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[RecordedRequest]:
        """Only the ``POST …/responses`` requests."""
        return [r for r in self.requests if r.is_model_request]

    def requests_with_user_text(self, needle: str) -> list[RecordedRequest]:
        """Model requests whose *latest* user message contains ``needle`` (a new turn's prompt)."""
        return [r for r in self.model_requests() if needle in r.last_user_text]

    def wait_for_model_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least ``n`` model requests were *answered*; raise TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                done = [r for r in self._requests if r.is_model_request and r.outcome is not None]
                if len(done) >= n:
                    return [r for r in self._requests if r.is_model_request]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"mock: {len(done)} of {n} model requests answered after {timeout}s")
                self._lock.wait(left)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._queue.clear()

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _record(self, h: _Handler, body: Any, err: str | None) -> RecordedRequest:
        rec = RecordedRequest(seq=next(self._seq), time=time.time(), method=h.command, path=h.path,
                              headers=_recorded_headers(h.headers), body=body, body_error=err)
        with self._lock:
            self._requests.append(rec)
            if self.keep_requests is not None and len(self._requests) > self.keep_requests:
                # Oldest first; one without its outcome yet stays (it is still to be recorded).
                gone = [r for r in self._requests[:len(self._requests) - self.keep_requests] if r.outcome is not None]
                if gone:
                    ids = {id(r) for r in gone}
                    self._requests = [r for r in self._requests if id(r) not in ids]
                    self.dropped_requests += len(gone)
            self._lock.notify_all()
        return rec

    def _choose(self, rec: RecordedRequest) -> Script:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        items = rec.input
        last = items[-1] if items else None
        if isinstance(last, dict) and last.get("type") in ("function_call_output", "custom_tool_call_output"):
            return Script.reply(f"mock saw tool output: {_output_text(last.get('output'))}")
        return parse_directives(rec.last_user_text) or Script.reply()

    def _changed(self, rec: RecordedRequest, outcome: str) -> None:
        with self._lock:  # the outcome is set under the lock that drops old records
            rec.outcome = outcome
            if self._log_path is not None:  # each line once it has its outcome, before waiters wake
                done = [r for r in self._requests if r.outcome is not None and not getattr(r, "_logged", False)]
                if not getattr(rec, "_logged", False) and all(r is not rec for r in self._requests):
                    done.append(rec)  # dropped by clear() while it was answered: still logged
                lines = "".join(json.dumps(r.to_json()) + "\n" for r in done)
                if lines:
                    try:
                        with self._log_path.open("a", encoding="utf-8") as f:
                            f.write(lines)
                    except OSError as exc:  # the answer goes out; lines kept are tried again
                        if not self.log_failed:
                            print(f"codexrt.loopback: cannot write the request log: {exc}", file=sys.stderr)
                        self.log_failed = True
                    else:
                        for r in done:
                            r._logged = True  # type: ignore[attr-defined]
            self._lock.notify_all()


def main(argv: list[str] | None = None) -> int:
    """``python -m codexrt.loopback --port-file F [--log F]``: serve until SIGTERM,
    SIGINT or EOF on stdin (so a parent that dies takes the mock with it)."""
    ap = argparse.ArgumentParser(prog="python -m codexrt.loopback", description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: ephemeral)")
    ap.add_argument("--port-file", help="write the port number here (atomically) once listening")
    ap.add_argument("--log", help="append one JSON line per request to this file")
    ap.add_argument("--no-stdin-watch", action="store_true", help="do not stop on stdin EOF")
    ap.add_argument("--hang-cap", type=float, default=HANG_CAP_S)
    ns = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with MockResponsesServer(port=ns.port, log_path=ns.log, hang_cap=ns.hang_cap) as mock:
        if ns.port_file:
            tmp = Path(ns.port_file + ".tmp")
            tmp.write_text(f"{mock.port}\n")
            tmp.replace(ns.port_file)
        print(mock.base_url, flush=True)
        if not ns.no_stdin_watch:
            def watch() -> None:
                try:  # raw fd reads: a daemon thread must not hold sys.stdin's buffer lock at exit
                    while os.read(0, 4096):
                        pass
                except (OSError, ValueError):
                    pass
                stop.set()
            threading.Thread(target=watch, name="stdin-watch", daemon=True).start()
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
