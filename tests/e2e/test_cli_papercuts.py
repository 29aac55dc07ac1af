"""The CLI as a new user meets it (issue 33): a missing ``--cwd`` is never created, a closed
stdout pipe ends quietly, the quickstart's claims about ``run --json`` and ``serve`` hold,
the loopback model keeps bounded memory, and the wheel installs no ``peer_fixtures``.

Each test runs the real command line in a subprocess (or builds the real wheel).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests._support import ROOT
from tests.e2e.test_serve_e2e import fake_cli

WAIT = 60.0
DATA = ROOT / "tests" / "data"
WHEELHOUSE = ROOT / ".cache" / "wheelhouse"


def _codexrt(*args: str, env: dict[str, str] | None = None, stdout: int | None = subprocess.PIPE,
             input: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codexrt_cli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=WAIT, cwd=cwd, env=env, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_missing_cwd_is_named_and_never_created(tmp_path, command):
    missing = tmp_path / "no" / "such" / "dir"
    args = ["run", "--loopback", "--cwd", str(missing), "hello"] if command == "run" else \
        ["serve", "--loopback", "--cwd", str(missing)]
    proc = _codexrt(*args, input="" if command == "serve" else None)
    assert proc.returncode == 2, proc.stderr
    assert str(missing) in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "no").exists()


def _history_home(tmp_path: Path) -> tuple[Path, str]:
    tid = json.loads((DATA / "rollouts" / "paginated.native.json").read_text())["threadId"]
    day = tmp_path / "home" / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    shutil.copy(DATA / "rollouts" / "paginated.rollout.jsonl", day / f"rollout-2026-11-30T10-00-00-{tid}.jsonl")
    return tmp_path / "home", tid


@pytest.mark.parametrize("command", ["threads", "show"])
def test_stdout_closed_by_its_reader_ends_quietly(tmp_path, command):
    """``codexrt threads --json | head -1``: the reader is gone before (or while) the command
    writes. Made deterministic by handing it a pipe whose read end is already closed."""
    home, tid = _history_home(tmp_path)
    args = [command, "--offline", "--json", "--codex-home", str(home)] + ([tid] if command == "show" else [])
    ok = _codexrt(*args)
    assert ok.returncode == 0 and ok.stdout.startswith(("[", "{")), ok.stderr
    r, w = os.pipe()
    os.close(r)
    try:
        proc = _codexrt(*args, stdout=w)
    finally:
        os.close(w)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr
    assert proc.returncode == 141  # 128 + SIGPIPE, as a pipeline's producer ends


def test_quickstart_run_json_kind_or_type_names_every_line(tmp_path):
    """The quickstart pipes ``run --json`` into ``jq -r '.kind // .type'``: every event line has
    a kind, and the last line is the result (no kind, ``type: result``)."""
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert "jq -r '.kind // .type'" in text and "| jq .kind" not in text
    proc = _codexrt("run", "--codex-bin", fake_cli(tmp_path, "handshake-ok"), "--json", "hello")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    names = [line.get("kind") or line.get("type") for line in lines]
    assert all(names) and names[-1] == "result" and "kind" not in lines[-1]
    assert all(line.get("kind") for line in lines[:-1])


def test_quickstart_serve_prints_events_the_reply_then_its_shutdown(tmp_path):
    """What the quickstart says ``serve`` prints for one ``codex.send`` at stdin EOF."""
    text = " ".join((ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8").split())
    assert "then the events of its own shutdown (`runtimeStateChanged` to `DRAINING`, `runtimeReset`," in text
    env = {**os.environ, "CODEX_BIN": fake_cli(tmp_path, "handshake-ok")}
    cmd = json.dumps({"id": 1, "command": "codex.send", "params": {"channelId": "c", "message": "hello"}})
    proc = _codexrt("serve", env=env, input=cmd + "\n")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    at = next(i for i, line in enumerate(lines) if line.get("type") == "response")
    assert lines[at]["id"] == 1 and lines[at]["result"]["status"] == "completed"
    assert all(line.get("type") == "daemon" for line in lines[:at])
    after = [(line["kind"], line["payload"].get("to")) for line in lines[at + 1:]]
    assert after == [("runtimeStateChanged", "DRAINING"), ("runtimeReset", None), ("runtimeStateChanged", "STOPPED")]


def test_the_loopback_model_keeps_bounded_memory():
    """``keep_requests`` keeps only the recent requests (each holds a whole request body), and
    ``open_loopback`` — what ``serve --loopback``, ``run --loopback`` and the demo use — sets it."""
    from codexrt.loopback import KEEP_REQUESTS, MockResponsesServer, open_loopback

    body = json.dumps({"model": "m", "stream": True,
                       "input": [{"role": "user", "content": [{"type": "input_text", "text": "x" * 50_000}]}]}).encode()
    with MockResponsesServer(keep_requests=4) as mock:
        for _ in range(20):
            req = urllib.request.Request(mock.base_url + "/responses", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=WAIT) as resp:
                resp.read()
        # A request still being answered is never dropped: at most one more than the bound here
        # (they are sent one after another).
        assert len(mock.requests) <= 5 and mock.dropped_requests >= 15
    with open_loopback(cwd=str(ROOT)) as lb:
        assert lb.model.keep_requests == KEEP_REQUESTS


def test_the_wheel_installs_no_peer_fixtures(tmp_path):
    """The built wheel has ``codexrt`` and ``codexrt_cli`` only: the test helpers stay in the
    checkout (``.ci/setup`` puts the checkout on the dev venv's path)."""
    if not any(WHEELHOUSE.glob("setuptools-*.whl")):
        pytest.skip(f"{WHEELHOUSE} has no setuptools wheel: run .ci/setup --tests")
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--find-links",
                    str(WHEELHOUSE), "--wheel-dir", str(tmp_path), str(ROOT)],
                   check=True, timeout=300, env=pip_env, capture_output=True)
    wheel = next(tmp_path.glob("codexrt-*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert "peer_fixtures" not in tops and "tests" not in tops
    assert {"codexrt", "codexrt_cli"} <= tops
