"""``codexrt run`` as a subprocess against the scripted fake app-server (R-OP-5, R-INT-3).

Testing charter: each test runs the real command line (``python -m codexrt_cli run …``) with a
bounded ``timeout``; stdout/stderr/exit status are the observable contract. The real-binary
SIGINT test lives in ``tests/real/test_demo_real.py``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

from peer_fixtures.fake_app_server import read_log
from tests._support import ROOT
from tests.e2e.test_serve_e2e import fake_cli, pid_alive

WAIT = 30.0


def _run(tmp_path, scenario, *args, log=None, stdin=subprocess.DEVNULL):
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--codex-bin", fake_cli(tmp_path, scenario, log), *args]
    return subprocess.run(argv, stdin=stdin, capture_output=True, text=True, timeout=WAIT, cwd=ROOT)


def test_streams_text_and_exits_0_on_completed(tmp_path):
    proc = _run(tmp_path, "handshake-ok", "hello")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from the fake peer.\n"
    assert "[completed] thread " in proc.stderr and "--thread" in proc.stderr


def test_json_mode_writes_only_ndjson_and_ends_with_the_result(tmp_path):
    proc = _run(tmp_path, "handshake-ok", "--json", "hello")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(l) for l in proc.stdout.splitlines()]
    assert all(l["type"] == "daemon" for l in lines[:-1])
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == "completed"
    kinds = [l["kind"] for l in lines[:-1]]
    assert "operationQueued" in kinds and "operationDone" in kinds and "runtimeStateChanged" in kinds


def test_prompt_from_stdin_and_thread_continues(tmp_path):
    first = _run(tmp_path, "handshake-ok", "--json", "-", stdin=None)  # stdin: /dev/null → no prompt
    assert first.returncode == 2 and "no prompt" in first.stderr
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--codex-bin", fake_cli(tmp_path, "handshake-ok"), "--json"]
    proc = subprocess.run(argv, input="piped prompt\n", capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    log = tmp_path / "peer.log"
    cont = _run(tmp_path, "handshake-ok", "--thread", "thr-given", "again", log=log)
    sent = [m for m in read_log(log) if m.get("method") in ("thread/start", "thread/resume", "turn/start")]
    assert sent[0]["method"] == "thread/resume" and sent[0]["params"]["threadId"] == "thr-given"
    # the fake knows no such thread: a typed resume error, exit 1, and no turn was started
    assert cont.returncode == 1 and "thread/resume failed" in cont.stderr
    assert [m["method"] for m in sent] == ["thread/resume"]


def test_r_int_3_non_tty_default_declines_and_says_so(tmp_path):
    log = tmp_path / "peer.log"
    proc = _run(tmp_path, "reverse-approval", "run it", log=log)
    assert proc.returncode == 0, proc.stderr
    assert "The command was not run." in proc.stdout
    assert "→ decline" in proc.stderr and "default when stdin is not a terminal" in proc.stderr
    assert [m["result"] for m in read_log(log) if m.get("id") == 0 and "result" in m] == [{"decision": "decline"}]


def test_approve_accept_is_an_explicit_opt_in(tmp_path):
    proc = _run(tmp_path, "reverse-approval", "--approve", "accept", "run it")
    assert proc.returncode == 0 and "The command printed 42." in proc.stdout
    assert "running:" in proc.stderr  # the tool status line


def test_approve_cancel_interrupts_the_turn_and_exits_130(tmp_path):
    proc = _run(tmp_path, "reverse-approval", "--approve", "cancel", "run it")
    assert proc.returncode == 130, proc.stderr
    assert "[interrupted]" in proc.stderr


def test_failed_start_exits_1_with_the_reason(tmp_path):
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--codex-bin", str(tmp_path / "missing"), "hi"]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert proc.returncode == 1 and "[failed]" in proc.stderr and "does not exist" in proc.stderr
    assert "continue with" not in proc.stderr  # nothing to continue: no turn ever ran


def test_continue_hint_only_for_a_thread_that_ran_a_turn(tmp_path):
    failed = _run(tmp_path, "turn-start-error", "hello")
    assert failed.returncode == 1, failed.stderr
    assert "[failed]" in failed.stderr and "continue with" not in failed.stderr
    done = _run(tmp_path, "handshake-ok", "hello")
    assert done.returncode == 0 and "continue with: codexrt run --thread " in done.stderr


def test_tty_prompt_always_for_session(tmp_path):
    """stdin a terminal: the request is shown and asked; ``a`` answers acceptForSession."""
    log = tmp_path / "peer.log"
    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--codex-bin", fake_cli(tmp_path, "reverse-approval", log),
            "run it"]
    proc = subprocess.Popen(argv, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    os.close(slave)
    try:
        err = b""
        deadline = time.monotonic() + WAIT
        while b"Allow?" not in err:
            assert time.monotonic() < deadline, err
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                assert chunk, err
                err += chunk
        os.write(master, b"a\n")
        out, rest = proc.communicate(timeout=WAIT)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err + rest
    assert b"run command:" in err and b"print(6*7)" in err
    assert [m["result"] for m in read_log(log) if m.get("id") == 0 and "result" in m] == [
        {"decision": "acceptForSession"}]


def test_r_op_5_sigint_interrupts_the_turn_exits_130_and_reaps_the_child(tmp_path):
    log = tmp_path / "peer.log"
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--json", "--codex-bin",
            fake_cli(tmp_path, "hang-turn", log), "never ends"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    pid = None
    lines = []
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:  # bounded: the fake turn hangs only until interrupted
            line = json.loads(raw)
            lines.append(line)
            if line.get("kind") == "runtimeStateChanged" and line["payload"].get("to") == "READY":
                pid = line["payload"]["pid"]
            if line.get("kind") == "turnStarted":
                proc.send_signal(signal.SIGINT)
        rc = proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 130, proc.stderr.read() if proc.stderr else ""
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == "interrupted"
    assert any(m.get("method") == "turn/interrupt" for m in read_log(log))
    assert pid is not None and not pid_alive(pid)


def test_r_cat_1_skills_are_sent_as_native_skill_input(tmp_path):
    log = tmp_path / "fake.log"
    proc = _run(tmp_path, "handshake-ok", "--skill", "lint=/a/.codex/skills/lint/SKILL.md", "--skill",
                "fmt=/a/fmt/SKILL.md", "hello", log=log)
    assert proc.returncode == 0, proc.stderr
    (start,) = [m for m in read_log(log) if m.get("method") == "turn/start"]
    assert start["params"]["input"][1:] == [{"type": "skill", "name": "lint", "path": "/a/.codex/skills/lint/SKILL.md"},
                                            {"type": "skill", "name": "fmt", "path": "/a/fmt/SKILL.md"}]
    bad = _run(tmp_path, "handshake-ok", "--skill", "lint", "hello")
    assert bad.returncode == 2 and "NAME=PATH" in bad.stderr


def test_demo_without_a_usable_cli_says_why_and_shows_no_empty_turns(tmp_path):
    """No "(failed · thread None)" twice and no "pid None": the reason and a hint (issue 22)."""
    argv = [sys.executable, "-m", "codexrt_cli", "demo", "--yes", "--codex-bin", str(tmp_path / "missing")]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert proc.returncode == 1
    assert "does not exist" in proc.stderr and "codexrt[cli]" in proc.stderr
    assert "thread None" not in proc.stdout and "pid None" not in proc.stdout and "[1/2]" not in proc.stdout


def test_stdout_closed_by_its_reader_ends_quietly_with_sigpipe_status(tmp_path):
    """``codexrt run … | head``: the reader goes away; no traceback, exit 141 (128 + SIGPIPE),
    and the app-server is stopped on the way out."""
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--codex-bin", fake_cli(tmp_path, "handshake-ok"), "hello"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    proc.stdout.close()  # the reader is gone before the first line is written
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 141, err.decode()
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()
