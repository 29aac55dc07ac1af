"""``codexrt demo``, ``codexrt run`` and the blocking facade against the real ``codex
app-server`` (pinned 0.169.0) and the loopback model (R-OP-5, R-INT-3, R-RT-7).

Every test is a bounded subprocess (or bounded facade waits); the SIGINT test proves the
issue's "Done when": ``codexrt run`` interrupted mid-turn ends ``interrupted``, exits 130, and
leaves no app-server child behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import codexrt.blocking
from codexrt import RuntimeConfig, Settings
from tests._support import ROOT, wait_until_blocking
from tests.e2e.test_serve_e2e import pid_alive

WAIT = 60.0


def test_demo_runs_two_real_turns_and_one_approval_without_a_terminal():
    proc = subprocess.run([sys.executable, "-m", "codexrt_cli", "demo"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=WAIT * 2, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "no account" in out and "[1/2]" in out and "[2/2]" in out
    assert "approval requested: run command:" in out
    assert "decided: accept (stdin is not a terminal)" in out
    assert "│ 42" in out  # the command really ran in the app-server's sandbox
    assert out.count("(completed · thread") == 2 and "demo OK" in out


def test_demo_yes_flag_accepts_and_says_why():
    proc = subprocess.run([sys.executable, "-m", "codexrt_cli", "demo", "--yes"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=WAIT * 2, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "decided: accept (--yes)" in proc.stdout


def test_r_op_5_sigint_to_codexrt_run_mid_turn(codex_bin, codex_home, real_env, real_cwd, mock_model):
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--json", "--codex-bin", str(codex_bin),
            "--codex-home", str(codex_home), "--cwd", str(real_cwd), "sigint-7c1 [[mock:hang]]"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env=real_env)
    pid = None
    lines = []
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:  # bounded: the mock hangs at most HANG_CAP_S, and we interrupt
            line = json.loads(raw)
            lines.append(line)
            if line.get("kind") == "runtimeStateChanged" and line["payload"].get("to") == "READY":
                pid = line["payload"]["pid"]
            if line.get("kind") == "turnStarted":
                # mid-turn: the model request is in flight
                wait_until_blocking(lambda: mock_model.requests_with_user_text("sigint-7c1"),
                                    "the turn to reach the model", timeout=WAIT)
                proc.send_signal(signal.SIGINT)
        rc = proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read() if proc.stderr else ""
    assert rc == 130, err
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == "interrupted", lines[-3:]
    assert "[interrupted]" in err
    assert pid is not None and not pid_alive(pid)  # no child remains


def test_run_streams_real_text_and_declines_by_default(codex_bin, codex_home, real_env, real_cwd):
    argv = [sys.executable, "-m", "codexrt_cli", "run", "--codex-bin", str(codex_bin), "--codex-home",
            str(codex_home), "--cwd", str(real_cwd), "--approval-policy", "untrusted", "--sandbox", "read-only",
            "[[mock:exec:python3 -c 'print(6*7)']]"]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT,
                          cwd=ROOT, env=real_env)
    assert proc.returncode == 0, proc.stderr
    assert "→ decline" in proc.stderr and "rejected" in proc.stdout  # the model saw the refusal


def test_blocking_facade_with_the_real_binary(codex_bin, codex_home, real_env, real_cwd):
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), env=real_env, cwd=str(real_cwd))
    with codexrt.blocking.connect(cfg, approvals="accept",
                                  settings=Settings(approval_policy="untrusted", sandbox="read-only")) as rt:
        first = rt.send("[[mock:deltas:5]] hi", timeout=WAIT)
        op = rt.stream("[[mock:exec:python3 -c 'print(6*7)']]", thread_id=first.thread_id)
        kinds = [ev.kind for ev in op]
        second = op.wait(WAIT)
        pid = rt.snapshot()["pid"]
    assert first.status == "completed" and first.final_text
    assert "interactionRequested" in kinds and second.status == "completed" and "42" in second.final_text
    assert not pid_alive(pid)
    assert os.environ.get("CODEX_HOME") != str(codex_home)  # the caller's environment was not touched


def test_examples_blocking_script_runs_as_a_user_runs_it(codex_bin, tmp_path):
    """``examples/blocking_script.py`` exactly as copied, with the Codex CLI on PATH (found by
    discovery, as a user's would be) and the loopback model it starts itself."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").symlink_to(codex_bin)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX")}
    env.update(PATH=os.pathsep.join([str(bindir), "/usr/bin", "/bin"]), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "blocking_script.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "completed: d0 d1 d2 d3 d4 d5" in proc.stdout
    assert "[approval requested: run command:" in proc.stdout and "[completed] turns so far: 2" in proc.stdout
