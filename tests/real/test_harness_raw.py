"""The harness itself, proven against the real ``codex app-server`` with raw JSON lines.

Charter: these tests use no codexrt API. They show that the loopback model
(``peer_fixtures.mock_responses``) and the throw-away ``CODEX_HOME`` drive the *real* pinned
binary (and the old 0.147.0 one) through a handshake, a streamed turn, a command approval,
a file-change approval, an interrupt and failures — and that the mock's request log is an
exact count of model requests. Every wait is bounded (``RawAppServer.wait_for`` timeouts,
``MockResponsesServer.wait_for_model_requests``). The conformance suite through codexrt's public
API builds on the same fixtures.

The first group needs no codex at all: it checks the mock's own wire format and process mode.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from peer_fixtures.codex_home import SECRET_ENV_PATTERN, codex_env, config_toml
from peer_fixtures.mock_responses import (
    DEFAULT_REASONING,
    DEFAULT_TEXT,
    MockResponsesServer,
    Script,
    parse_directives,
    patch_command,
)
from peer_fixtures.real_server import RawAppServer
from peer_fixtures.codex_bin import pinned_version
from tests._support import pinned_schema_dir, wait_until_blocking

ROOT = Path(__file__).resolve().parents[2]
TURN_TIMEOUT = 30.0


# -- helpers -------------------------------------------------------------------------------


def text_input(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "text_elements": []}]


def start_thread(srv: RawAppServer, cwd: Path, **params: Any) -> str:
    result = srv.call("thread/start", {"cwd": str(cwd), **params})
    return result["thread"]["id"]


def run_turn(srv: RawAppServer, thread_id: str, text: str, **params: Any) -> dict[str, Any]:
    """Start a turn and return its turn/completed params (bounded)."""
    result = srv.call("turn/start", {"threadId": thread_id, "input": text_input(text), **params})
    turn_id = result["turn"]["id"]
    done = srv.wait_for(lambda m: m.get("method") == "turn/completed" and m["params"]["turn"]["id"] == turn_id,
                        TURN_TIMEOUT, what=f"turn/completed of {turn_id}")
    return done["params"]


def methods(srv: RawAppServer) -> list[str]:
    return [m["method"] for m in srv.seen if "method" in m]


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


def post_responses(mock: MockResponsesServer, user_text: str, extra_input: list[Any] | None = None,
                   ) -> tuple[int, dict[str, str], bytes]:
    body = {"model": "m", "stream": True,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": user_text}]},
                      *(extra_input or [])]}
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    try:
        conn.request("POST", "/v1/responses", body=json.dumps(body), headers={"content-type": "application/json"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# -- the mock alone ----------------------------------------------------------------------------


def test_directives_parse_to_scripts() -> None:
    assert parse_directives("no directive here") is None
    s = parse_directives("x [[mock:text:hello: world]] y")
    assert (s.kind, s.text) == ("text", "hello: world")
    s = parse_directives("[[mock:deltas:7:3]]")
    assert (s.kind, s.text, s.deltas, s.delta_interval) == ("text", None, 7, 0.003)
    s = parse_directives("[[mock:reasoning]][[mock:text:hi]]")
    assert (s.reasoning, s.text) == (DEFAULT_REASONING, "hi")
    s = parse_directives("[[mock:exec:python3 -c 'print(1)']]")
    assert (s.kind, s.cmd) == ("exec", "python3 -c 'print(1)'")
    s = parse_directives("[[mock:patch:a/b.txt:one\\ntwo]]")
    assert s.kind == "patch" and s.cmd == patch_command("a/b.txt", "one\ntwo")
    assert "*** Add File: a/b.txt\n+one\n+two\n*** End Patch" in s.cmd
    assert parse_directives("[[mock:hang]]").kind == "hang"
    s = parse_directives("[[mock:fail:boom]]")
    assert (s.kind, s.error_message) == ("fail", "boom")
    s = parse_directives("[[mock:http500]]")
    assert (s.kind, s.http_status) == ("http", 500)
    s = parse_directives('[[mock:reasoning]][[mock:mcp:testsrv:echo:{"text": "a:b"}]]')
    assert (s.kind, s.call_namespace, s.call_name, s.reasoning) == ("call", "mcp__testsrv", "echo", DEFAULT_REASONING)
    assert json.loads(s.call_arguments) == {"text": "a:b"}
    assert parse_directives("[[mock:mcp:testsrv:rich]]") == Script.mcp_tool("testsrv", "rich")


def test_mock_records_each_request_before_its_last_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that has read a whole response finds the request recorded, outcome and log line
    included, and the log lists requests sent one after another in their order — even when the
    handler's thread is slow after its last write (it recorded the outcome after the answer, so a
    quick next request was sometimes logged first: a flaky order in the test below)."""
    import time

    import peer_fixtures.mock_responses as model

    def slowly(write: Any) -> Any:
        def slow(self: Any, *args: Any) -> None:
            write(self, *args)
            time.sleep(0.2)  # the client has every byte of the answer by now
        return slow

    monkeypatch.setattr(model._Handler, "_end_stream", slowly(model._Handler._end_stream))
    monkeypatch.setattr(model._Handler, "_send_json", slowly(model._Handler._send_json))
    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        mock.enqueue(Script.reply("one"), Script.fail("nope"))
        outcomes = []
        for text in ("first", "second", "third", "[[mock:http500]]"):
            post_responses(mock, text)
            outcomes.append(mock.requests[-1].outcome)  # no wait: recorded before the last bytes
            assert outcomes[-1] is not None and log.exists(), outcomes
            assert len(log.read_text().splitlines()) == len(outcomes)
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
        conn.request("GET", "/v1/models")
        assert conn.getresponse().read() and mock.requests[-1].outcome == "404"
        conn.close()
    assert outcomes == ["completed", "failed", "completed", "http 500"]
    assert [json.loads(x)["seq"] for x in log.read_text().splitlines()] == [0, 1, 2, 3, 4]


def test_mock_answers_when_its_log_cannot_be_written(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A request log that cannot be written (its directory is missing) is said once on stderr
    and never cuts an answer."""
    log = tmp_path / "missing" / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        for _ in range(2):
            status, _, raw = post_responses(mock, "[[mock:deltas:3]]")
            assert status == 200 and sse_events(raw)[-1]["type"] == "response.completed"
        assert mock.log_failed and [r.outcome for r in mock.requests] == ["completed", "completed"]
    assert capfd.readouterr().err.count("cannot write the request log") == 1


def test_mock_answers_a_directive_it_cannot_read(tmp_path: Path) -> None:
    """A directive the mock cannot read (bad JSON arguments) gets a 500 that names it, recorded
    and logged; before, the handler died, the connection dropped and the outcome stayed None."""
    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        status, _, body = post_responses(mock, "[[mock:mcp:s:t:{bad]]")
        assert status == 500 and "mock:" in json.loads(body)["error"]["message"]
        assert post_responses(mock, "fine")[0] == 200  # the mock goes on
        assert [r.outcome for r in mock.requests] == ["bad script: JSONDecodeError", "completed"]
    assert [json.loads(x)["outcome"] for x in log.read_text().splitlines()] == ["bad script: JSONDecodeError",
                                                                             "completed"]


def test_mock_records_a_defect_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    """An unexpected exception while a script plays (a defect of the mock's, faked here) is said on
    stderr and recorded with its log line, the connection closed; before, the outcome stayed None
    and no line was written. The mock goes on."""
    import peer_fixtures.mock_responses as model

    def broken(self: Any, *args: Any) -> None:
        raise RuntimeError("mock defect")

    monkeypatch.setattr(model._Handler, "_message", broken)
    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        with pytest.raises(http.client.HTTPException):
            post_responses(mock, "hello")
        wait_until_blocking(lambda: mock.requests[-1].outcome is not None, "the outcome")
        assert mock.requests[-1].outcome == "mock error: RuntimeError"
        monkeypatch.undo()
        assert post_responses(mock, "fine")[0] == 200
    assert [json.loads(x)["outcome"] for x in log.read_text().splitlines()] == ["mock error: RuntimeError",
                                                                             "completed"]
    assert "request 0 failed: RuntimeError('mock defect')" in capfd.readouterr().err


def test_mock_never_drops_an_unlogged_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``keep_requests`` and ``log_path`` both set, a request that comes while an older one
    is between its outcome and its log line no longer drops the older one unlogged: the outcome is
    set under the lock that drops records (here the first request's handler is held just after it
    sets its outcome, and a second request comes meanwhile)."""
    import threading
    import time

    import peer_fixtures.mock_responses as model

    class HeldAtOutcome(model.RecordedRequest):
        def __setattr__(self, name: str, value: Any) -> None:
            super().__setattr__(name, value)
            if name == "outcome" and value is not None and self.seq == 0:
                time.sleep(0.3)

    monkeypatch.setattr(model, "RecordedRequest", HeldAtOutcome)
    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log, keep_requests=1) as mock:
        answers: list[int] = []
        first = threading.Thread(target=lambda: answers.append(post_responses(mock, "first")[0]))
        first.start()
        wait_until_blocking(lambda: mock._requests and mock._requests[0].outcome is not None, "the first outcome")
        assert post_responses(mock, "second")[0] == 200
        first.join(10)
        assert not first.is_alive() and answers == [200]
        assert mock.dropped_requests == 1
    assert [json.loads(x)["seq"] for x in log.read_text().splitlines()] == [0, 1]


@pytest.mark.parametrize("head, body", [
    (b"Transfer-Encoding: chunked", b"zz\r\nabc\r\n0\r\n\r\n"),  # a chunk size that is not hex
    (b"Transfer-Encoding: chunked", b"-5\r\nabc\r\n0\r\n\r\n"),  # a negative chunk size
    (b"Transfer-Encoding: chunked", b"%x\r\n" % (300 << 20)),  # a chunk over MAX_BODY
    (b"Content-Length: -5", b"{}"),
    (b"Content-Length: abc", b"{}"),
    (b"Content-Length: 4000000000", b"{}"),  # over MAX_BODY: never allocated nor waited for
    (b"Transfer-Encoding: chunked", b"2;" + b"e" * 70000 + b"\r\n{}\r\n0\r\n\r\n"),  # a size line over 64 KiB
    (b"Transfer-Encoding: chunked", b"2\r\n{}XX\r\n0\r\n\r\n"),  # chunk data longer than its size
    (b"Transfer-Encoding: chunked", b"0x2\r\n{}\r\n0\r\n\r\n"),  # int(.., 16) takes these three
    (b"Transfer-Encoding: chunked", b"+2\r\n{}\r\n0\r\n\r\n"),
    (b"Transfer-Encoding: chunked", b"0_2\r\n{}\r\n0\r\n\r\n"),
    (b"Transfer-Encoding: gzip, chunked", b"2\r\n{}\r\n0\r\n\r\n"),  # a coding the mock cannot undo
    (b"Transfer-Encoding: gzip\r\nContent-Length: 2", b"{}"),  # was read by its Content-Length
    (b"Content-Length: 2\r\nContent-Length: 3", b"{}"),  # two lengths: which one frames the body?
    (b"Content-Length: 2, 3", b"{}"),
    (b"Content-Length: +2", b"{}"),
])
def test_mock_answers_a_body_it_cannot_read_with_400(tmp_path: Path, head: bytes, body: bytes) -> None:
    """A request body the mock cannot read (a bad or out-of-range length or chunk size, a framing
    line over 64 KiB, chunk data longer than its size) gets a 400 that says why, recorded
    (``body_error``) and logged; before, the handler died with a traceback and dropped the
    connection, recording nothing, waited for a length over the cap, misread a long line or
    dropped the extra data. The mock goes on."""
    import socket

    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        with socket.create_connection(("127.0.0.1", mock.port), timeout=10) as s:
            s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n\r\n" + body)
            answer = b""
            try:
                while chunk := s.recv(65536):  # the mock closes the connection after its answer
                    answer += chunk
            except ConnectionResetError:  # closed with the unread body still queued: a reset may end it
                pass
        assert answer.startswith(b"HTTP/1.1 400 ") and b"unreadable body" in answer
        assert b"\r\nconnection: close\r\n" in answer.lower()  # it closes the connection, and says so
        rec = mock.requests[-1]
        assert rec.outcome == "400" and rec.body_error and rec.body_error.startswith("unreadable body: ")
        assert post_responses(mock, "fine")[0] == 200
    assert [json.loads(x)["outcome"] for x in log.read_text().splitlines()] == ["400", "completed"]


def test_mock_reads_a_repeated_equal_content_length() -> None:
    """The same Content-Length twice (a proxy may repeat it) frames the body as once."""
    import socket

    body = json.dumps({"model": "m", "stream": True, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "twice"}]}]}).encode()
    with MockResponsesServer() as mock, socket.create_connection(("127.0.0.1", mock.port), timeout=10) as s:
        s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), len(body), body))
        wait_until_blocking(lambda: len(mock.requests) == 1 and mock.requests[0].outcome is not None, "the answer")
        assert (mock.requests[0].body_error, mock.requests[0].outcome) == (None, "completed")


def test_mock_logs_a_request_cleared_while_it_was_answered(tmp_path: Path) -> None:
    """``clear()`` drops the records, also one still being answered; its log line is still
    written once it has its outcome (before, it was lost)."""
    import types

    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        handler = types.SimpleNamespace(command="POST", path="/v1/responses", headers={})
        rec = mock._record(handler, None, None)  # type: ignore[arg-type]
        mock.clear()
        mock._changed(rec, "completed")
        assert post_responses(mock, "next")[0] == 200
    assert [json.loads(x)["outcome"] for x in log.read_text().splitlines()] == ["completed", "completed"]


def test_mock_reads_a_chunked_body() -> None:
    """A chunked request body is read whole: chunk extensions (one of 2,000 bytes), upper-case hex,
    blanks around the size, trailers — then the same connection serves the next request."""
    import socket

    body = json.dumps({"model": "m", "stream": True, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "chunked hello"}]}]}).encode()
    a, b = len(body) // 3, 2 * len(body) // 3
    framed = (b"%x;ext=1\r\n%s\r\n" % (a, body[:a]) + b" %X \r\n%s\r\n" % (b - a, body[a:b])
              + b"%x;%s\r\n%s\r\n" % (len(body) - b, b"e" * 2000, body[b:]) + b"0\r\nX-Trailer: 1\r\n\r\n")
    head = b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n"
    with MockResponsesServer() as mock, socket.create_connection(("127.0.0.1", mock.port), timeout=10) as s:
        s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + framed)
        wait_until_blocking(lambda: len(mock.requests) == 1 and mock.requests[0].outcome is not None, "the answer")
        s.sendall(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until_blocking(lambda: len(mock.requests) == 2 and mock.requests[1].outcome is not None, "the 2nd")
        assert [(r.body, r.body_error, r.outcome) for r in mock.requests] == [(json.loads(body), None, "completed")] * 2
        assert mock.requests[0].last_user_text == "chunked hello"


def test_mock_streams_chunked_sse_and_logs_requests(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with MockResponsesServer(log_path=log) as mock:
        status, headers, raw = post_responses(mock, "[[mock:deltas:5]]")
        assert status == 200
        assert headers["content-type"] == "text/event-stream"
        assert headers["transfer-encoding"] == "chunked"
        evs = sse_events(raw)
        types = [e["type"] for e in evs]
        assert types[0] == "response.created" and types[-1] == "response.completed"
        assert [e["delta"] for e in evs if e["type"] == "response.output_text.delta"] == [f"d{i} " for i in range(5)]
        done = [e for e in evs if e["type"] == "response.output_item.done"][0]
        assert done["item"]["content"][0]["text"] == "d0 d1 d2 d3 d4 "
        # the queue wins over directives, and is consumed one script per request
        mock.enqueue(Script.reply("queued"), Script.fail("nope"))
        evs = sse_events(post_responses(mock, "[[mock:deltas:5]]")[2])
        assert "".join(e["delta"] for e in evs if e["type"] == "response.output_text.delta") == "queued"
        evs = sse_events(post_responses(mock, "")[2])
        assert evs[-1]["type"] == "response.failed" and evs[-1]["response"]["error"]["message"] == "nope"
        # default, and the function_call_output rule
        evs = sse_events(post_responses(mock, "plain")[2])
        assert "".join(e["delta"] for e in evs if e["type"] == "response.output_text.delta") == DEFAULT_TEXT
        out = {"type": "function_call_output", "call_id": "c1", "output": "42\n"}
        evs = sse_events(post_responses(mock, "[[mock:exec:echo 42]]", [out])[2])
        assert "".join(e["delta"] for e in evs if e["type"] == "response.output_text.delta") == (
            "mock saw tool output: 42\n")
        status, _, body = post_responses(mock, "[[mock:http500]]")
        assert status == 500 and json.loads(body)["error"]["type"] == "server_error"
        reqs = mock.wait_for_model_requests(6, timeout=5)
        assert [r.outcome for r in reqs] == ["completed", "completed", "failed", "completed", "completed", "http 500"]
        assert reqs[0].last_user_text == "[[mock:deltas:5]]"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["seq"] for x in lines] == [0, 1, 2, 3, 4, 5]
    assert lines[0]["body"]["input"][0]["role"] == "user"


def test_mock_hang_ends_when_the_client_goes_away() -> None:
    with MockResponsesServer() as mock:
        mock.enqueue(Script.hang())
        conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
        conn.request("POST", "/v1/responses", body=json.dumps({"input": []}))
        resp = conn.getresponse()
        assert resp.status == 200
        first = resp.fp.readline()  # chunk size line of response.created
        assert first.strip()
        conn.close()
        [rec] = mock.wait_for_model_requests(1, timeout=10)
        assert rec.outcome == "client_disconnected"


def test_mock_hang_is_capped() -> None:
    with MockResponsesServer(hang_cap=0.6) as mock:
        mock.enqueue(Script.hang())
        status, _, raw = post_responses(mock, "")
        assert status == 200 and b"keep-alive" in raw
        # The outcome is recorded just before the stream's terminator; the wait is bounded anyway.
        [rec] = mock.wait_for_model_requests(1, timeout=10)
        assert rec.outcome == "hang_cap_reached"


@pytest.mark.parametrize("how", ["sigterm", "stdin-eof"])
def test_mock_runs_as_a_process(tmp_path: Path, how: str) -> None:
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "peer_fixtures.mock_responses", "--port-file", str(port_file),
                             "--log", str(log)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().decode().strip()  # printed once listening
        port = int(port_file.read_text())
        assert base_url == f"http://127.0.0.1:{port}/v1"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/responses", body=json.dumps({"input": []}))
        assert conn.getresponse().read().count(b"response.completed") == 2  # event: line + data type
        conn.close()
        if how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(timeout=10) == 0
        assert json.loads(log.read_text().splitlines()[0])["outcome"] == "completed"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_codex_env_strips_credentials_and_proxies(tmp_path: Path) -> None:
    env = codex_env(tmp_path, base={"PATH": "/bin", "OPENAI_API_KEY": "sk-x", "CODEX_API_KEY": "k",
                                    "GITHUB_TOKEN": "t", "HTTPS_PROXY": "http://p", "MY_SECRET": "s",
                                    "HOME": "/root", "CODEX_HOME": "/elsewhere"})
    assert env["PATH"] == "/bin" and env["HOME"] == "/root"
    assert env["CODEX_HOME"] == str(tmp_path.resolve())
    assert not {"OPENAI_API_KEY", "CODEX_API_KEY", "GITHUB_TOKEN", "HTTPS_PROXY", "MY_SECRET"} & env.keys()
    assert SECRET_ENV_PATTERN.search("AZURE_OPENAI_API_KEY")
    # codexrt's "which CLI" variables stay, so discovery honours (and names) them
    kept = codex_env(tmp_path, base={"CODEX_BIN": "/opt/codex", "CODEX_PATH": "/p", "CODEX_SANDBOX": "x"})
    assert kept["CODEX_BIN"] == "/opt/codex" and kept["CODEX_PATH"] == "/p" and "CODEX_SANDBOX" not in kept
    with pytest.raises(ValueError):
        config_toml("https://api.openai.com/v1")


# -- the real pinned binary -----------------------------------------------------------------------


def test_handshake_then_thread_start(spawn_raw: Any, real_cwd: Path, codex_home: Path) -> None:
    srv = spawn_raw()
    early = srv.request("thread/start", {"cwd": str(real_cwd)})
    err = srv.response(early)["error"]
    assert err["code"] == -32600 and err["message"] == "Not initialized"
    result = srv.initialize(name="harness-raw")
    assert result["userAgent"].startswith(f"harness-raw/{pinned_version()} ")
    assert Path(result["codexHome"]).resolve() == codex_home.resolve()
    assert start_thread(srv, real_cwd)
    assert all("jsonrpc" not in m for m in srv.seen)  # research §2: the server never sends it


def test_streamed_turn_all_deltas_arrive(spawn_raw: Any, real_cwd: Path, mock_model: MockResponsesServer) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd)
    done = run_turn(srv, tid, "count please [[mock:deltas:300]]")
    assert done["turn"]["status"] == "completed"
    deltas = [m["params"]["delta"] for m in srv.seen if m.get("method") == "item/agentMessage/delta"]
    assert deltas == [f"d{i} " for i in range(300)]
    [agent] = [i for i in done["turn"]["items"] if i["type"] == "agentMessage"]
    assert agent["text"] == "".join(deltas)
    assert len(mock_model.model_requests()) == 1


def test_reasoning_summary_streams(spawn_raw: Any, real_cwd: Path) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd)
    done = run_turn(srv, tid, "[[mock:reasoning]][[mock:text:answer]]")
    assert done["turn"]["status"] == "completed"
    pieces = [m["params"]["delta"] for m in srv.seen if m.get("method") == "item/reasoning/summaryTextDelta"]
    assert "".join(pieces) == DEFAULT_REASONING
    [rs] = [m["params"]["item"] for m in srv.seen
            if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "reasoning"]
    assert rs["summary"] == [DEFAULT_REASONING]


def test_command_approval_under_untrusted(spawn_raw: Any, real_cwd: Path, mock_model: MockResponsesServer) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd, approvalPolicy="untrusted", sandbox="read-only")
    srv.call("turn/start", {"threadId": tid, "input": text_input("[[mock:exec:python3 -c 'print(6*7)']]")})
    req = srv.wait_method("item/commandExecution/requestApproval", TURN_TIMEOUT)
    assert isinstance(req["id"], int) and "emittedAtMs" not in req
    assert "python3 -c 'print(6*7)'" in req["params"]["command"]
    assert "accept" in req["params"]["availableDecisions"]
    srv.send({"id": req["id"], "result": {"decision": "accept"}})
    resolved = srv.wait_method("serverRequest/resolved")
    assert resolved["params"]["requestId"] == req["id"]
    done = srv.wait_method("turn/completed", TURN_TIMEOUT)["params"]
    assert done["turn"]["status"] == "completed"
    [cmd] = [m["params"]["item"] for m in srv.seen
             if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "commandExecution"]
    assert cmd["status"] == "completed" and cmd["exitCode"] == 0 and "42" in cmd["aggregatedOutput"]
    reqs = mock_model.model_requests()
    assert len(reqs) == 2  # the call, then the follow-up carrying its output
    assert reqs[1].input[-1]["type"] == "function_call_output"
    [agent] = [i for i in done["turn"]["items"] if i["type"] == "agentMessage"]
    assert agent["text"].startswith("mock saw tool output:") and "42" in agent["text"]


def test_file_change_approval_via_apply_patch(spawn_raw: Any, real_cwd: Path) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd, approvalPolicy="untrusted", sandbox="workspace-write")
    srv.call("turn/start", {"threadId": tid, "input": text_input("[[mock:patch:hello.txt:hello world]]")})
    req = srv.wait_method("item/fileChange/requestApproval", TURN_TIMEOUT)
    srv.send({"id": req["id"], "result": {"decision": "accept"}})
    done = srv.wait_method("turn/completed", TURN_TIMEOUT)["params"]
    assert done["turn"]["status"] == "completed"
    assert (real_cwd / "hello.txt").read_text() == "hello world\n"
    [fc] = [m["params"]["item"] for m in srv.seen
            if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "fileChange"]
    assert fc["status"] == "completed" and fc["changes"][0]["kind"]["type"] == "add"


def test_interrupt_a_hanging_stream(spawn_raw: Any, real_cwd: Path, mock_model: MockResponsesServer) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd)
    turn = srv.call("turn/start", {"threadId": tid, "input": text_input("[[mock:hang]]")})["turn"]
    srv.wait_method("turn/started")
    # the model request must be in flight before the interrupt
    wait_until_blocking(mock_model.model_requests, "the model request", timeout=10)
    assert srv.call("turn/interrupt", {"threadId": tid, "turnId": turn["id"]}) == {}
    done = srv.wait_method("turn/completed", TURN_TIMEOUT)["params"]
    assert done["turn"]["status"] == "interrupted" and done["turn"]["error"] is None
    [rec] = mock_model.wait_for_model_requests(1, timeout=10)
    assert rec.outcome == "client_disconnected"  # codex dropped the stream; the mock stopped


@pytest.mark.parametrize(("directive", "info"), [("[[mock:fail]]", "other"),
                                                 ("[[mock:http500]]", "internalServerError")])
def test_model_failures_fail_the_turn(spawn_raw: Any, real_cwd: Path, mock_model: MockResponsesServer,
                                      directive: str, info: str) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd)
    done = run_turn(srv, tid, directive)
    assert done["turn"]["status"] == "failed"
    assert done["turn"]["error"]["codexErrorInfo"] == info
    err = [m for m in srv.seen if m.get("method") == "error"][0]["params"]
    assert err["willRetry"] is False and err["error"] == done["turn"]["error"]
    assert len(mock_model.model_requests()) == 1  # retries are off: one request, no re-send


def test_request_log_counts_one_model_request_per_turn(spawn_raw: Any, real_cwd: Path,
                                                       mock_model: MockResponsesServer) -> None:
    srv = spawn_raw()
    srv.initialize(name="harness-count")
    tid = start_thread(srv, real_cwd)
    for i in range(3):
        assert run_turn(srv, tid, f"turn number {i}")["turn"]["status"] == "completed"
    reqs = mock_model.model_requests()
    assert [r.last_user_text for r in reqs] == ["turn number 0", "turn number 1", "turn number 2"]
    assert len(mock_model.requests_with_user_text("turn number 1")) == 1
    assert reqs[2].user_texts[-3:] == ["turn number 0", "turn number 1", "turn number 2"]  # full history re-sent
    for r in reqs:
        assert r.headers["originator"] == "harness-count"
        assert "authorization" not in r.headers
        assert r.body["stream"] is True and r.model == "mock-model"
    assert {r.path for r in mock_model.requests} == {"/v1/responses"}


# -- the old official release (0.147.0) ------------------------------------------------------------


def test_old_binary_handshake_and_turn(spawn_raw: Any, codex_bin_old: Path, real_cwd: Path,
                                       mock_model: MockResponsesServer) -> None:
    srv = spawn_raw(codex_bin_old)
    result = srv.initialize(name="harness-old")
    assert result["userAgent"].startswith("harness-old/0.147.0 ")
    tid = start_thread(srv, real_cwd)
    done = run_turn(srv, tid, "[[mock:deltas:20]]")
    assert done["turn"]["status"] == "completed"
    deltas = [m["params"]["delta"] for m in srv.seen if m.get("method") == "item/agentMessage/delta"]
    assert deltas == [f"d{i} " for i in range(20)]
    assert len(mock_model.model_requests()) == 1


def test_old_binary_command_approval(spawn_raw: Any, codex_bin_old: Path, real_cwd: Path,
                                     mock_model: MockResponsesServer) -> None:
    srv = spawn_raw(codex_bin_old)
    srv.initialize()
    tid = start_thread(srv, real_cwd, approvalPolicy="untrusted", sandbox="read-only")
    srv.call("turn/start", {"threadId": tid, "input": text_input("[[mock:exec:echo old-$((6*7))]]")})
    req = srv.wait_method("item/commandExecution/requestApproval", TURN_TIMEOUT)
    srv.send({"id": req["id"], "result": {"decision": "accept"}})
    done = srv.wait_method("turn/completed", TURN_TIMEOUT)["params"]
    assert done["turn"]["status"] == "completed"
    assert len(mock_model.model_requests()) == 2
    assert "old-42" in mock_model.model_requests()[1].input[-1]["output"]


def test_env_has_no_credentials(real_env: dict[str, str]) -> None:
    assert not [k for k in real_env if SECRET_ENV_PATTERN.search(k) and k not in ("CODEX_HOME", "NO_PROXY", "no_proxy")]
    assert os.path.isfile(Path(real_env["CODEX_HOME"]) / "config.toml")


# -- facts docs/real-server-notes.md relies on ---------------------------------------------------


def test_error_shapes_and_silent_drops(spawn_raw: Any) -> None:
    """Unknown method and missing params are -32600 (not -32601); a bad JSON line and a float id
    get no reply at all, and the connection keeps answering."""
    srv = spawn_raw()
    srv.initialize()
    err = srv.response(srv.request("nonexistent/method", {}))["error"]
    assert err["code"] == -32600 and "unknown variant `nonexistent/method`" in err["message"]
    srv.send({"id": 77, "method": "model/list"})  # no params
    err = srv.response(77)["error"]
    assert err["code"] == -32600 and "missing field `params`" in err["message"]
    srv.send_raw(b'{"id": 5, "method": "model/list", "params": {')  # truncated JSON
    srv.send_raw(b'{"id": 1.5, "method": "model/list", "params": {}}')
    for _ in range(2):  # two full round trips after the bad lines
        assert "data" in srv.call("model/list", {})
    assert not [m for m in srv.seen if m.get("id") in (5, 1.5)]


def test_decline_is_accepted_although_not_listed(spawn_raw: Any, real_cwd: Path,
                                                 mock_model: MockResponsesServer) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd, approvalPolicy="untrusted", sandbox="read-only")
    srv.call("turn/start", {"threadId": tid, "input": text_input("[[mock:exec:touch nope.txt]]")})
    req = srv.wait_method("item/commandExecution/requestApproval", TURN_TIMEOUT)
    assert "decline" not in req["params"]["availableDecisions"]
    srv.send({"id": req["id"], "result": {"decision": "decline"}})
    done = srv.wait_method("turn/completed", TURN_TIMEOUT)["params"]
    assert done["turn"]["status"] == "completed"
    [cmd] = [m["params"]["item"] for m in srv.seen
             if m.get("method") == "item/completed" and m["params"]["item"]["type"] == "commandExecution"]
    assert cmd["status"] == "declined" and not (real_cwd / "nope.txt").exists()
    assert "rejected by user" in mock_model.model_requests()[1].input[-1]["output"]


def test_interrupt_with_pending_approval_resolves_without_reply(spawn_raw: Any, real_cwd: Path) -> None:
    srv = spawn_raw()
    srv.initialize()
    tid = start_thread(srv, real_cwd, approvalPolicy="untrusted", sandbox="read-only")
    turn = srv.call("turn/start", {"threadId": tid, "input": text_input("[[mock:exec:touch later.txt]]")})["turn"]
    req = srv.wait_method("item/commandExecution/requestApproval", TURN_TIMEOUT)
    assert srv.call("turn/interrupt", {"threadId": tid, "turnId": turn["id"]}) == {}
    done = srv.wait_method("turn/completed", TURN_TIMEOUT)["params"]
    assert done["turn"]["status"] == "interrupted"
    resolved = srv.wait_method("serverRequest/resolved", TURN_TIMEOUT)["params"]
    assert resolved["requestId"] == req["id"]
    item_id = req["params"]["itemId"]
    assert not [m for m in srv.seen if m.get("method") == "item/completed" and m["params"]["item"]["id"] == item_id]
    assert run_turn(srv, tid, "next")["turn"]["status"] == "completed"


def test_default_history_mode_is_paginated_though_schema_says_legacy(spawn_raw: Any, real_cwd: Path) -> None:
    srv = spawn_raw()
    srv.initialize()
    thread = srv.call("thread/start", {"cwd": str(real_cwd)})["thread"]
    assert thread["historyMode"] == "paginated"
    bundle = json.loads((pinned_schema_dir() / "codex_app_server_protocol.schemas.json").read_text())
    assert bundle["definitions"]["v2"]["Thread"]["properties"]["historyMode"]["default"] == "legacy"


def test_old_binary_runs_echo_without_approval_under_untrusted(spawn_raw: Any, codex_bin_old: Path,
                                                               real_cwd: Path) -> None:
    """0.147 treats `echo` as known-safe under `untrusted` (0.169 asks): approval tests that must
    run on both versions use a command such as `touch`."""
    srv = spawn_raw(codex_bin_old)
    srv.initialize()
    tid = start_thread(srv, real_cwd, approvalPolicy="untrusted", sandbox="read-only")
    done = run_turn(srv, tid, "[[mock:exec:echo safe]]")
    assert done["turn"]["status"] == "completed"
    assert not [m for m in srv.seen if m.get("method") == "item/commandExecution/requestApproval"]
