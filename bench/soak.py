"""Soak through ``codexrt serve``: many turns in one sidecar, memory/fds/processes watched.

``python -m bench.soak fake N`` — N turns against the scripted fake app-server
(``peer_fixtures.fake_app_server handshake-ok``); ``python -m bench.soak real N`` — N turns
against the pinned real ``codex app-server`` with the loopback mock model (run it in a
loopback-only network namespace like CI: ``unshare -rn sh -c 'ip link set lo up && …'``).

The host is this process: it spawns ``codexrt serve`` (``--idle-timeout 0``, one channel),
sends ``codex.send`` one after another (a new thread every 10th turn, the others continue the
current thread; every 25th turn also a ``codex.listModels`` read; after every 100th a
``codex.resetRuntime``, so children come and go), decodes every stdout line and keeps none.
After turn 50 and at the end it reads serve's ``VmRSS`` and open fds (``/proc/PID``); every
app-server pid ever reported by ``status`` must be gone once serve has exited. Reports the
RSS growth between turn 50 and the last turn (target ≤ 5 MB), fds at both points (flat), the
leaked processes (none) and the turn statuses. One JSON object on the last stdout line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._common import ROOT, emit, env_with_root, now, proc_status_mb

CHECKPOINT = 50


_proc_status = proc_status_mb


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def fake_cli(tmp: str) -> str:
    script = Path(tmp) / "fake-codex"
    script.write_text(f"#!/bin/sh\ncd '{ROOT}'\nexec '{sys.executable}' -m peer_fixtures.fake_app_server handshake-ok\n")
    script.chmod(0o755)
    return str(script)


def soak(kind: str, turns: int) -> dict[str, Any]:
    import msgspec

    decode, enc = msgspec.json.decode, msgspec.json.encode
    tmp = tempfile.mkdtemp(prefix="codexrt-soak-")
    mock = None
    env = env_with_root()
    cwd = str(ROOT)
    if kind == "fake":
        cli = fake_cli(tmp)
    else:
        from peer_fixtures.codex_bin import native_binary
        from peer_fixtures.codex_home import codex_env, make_codex_home
        from peer_fixtures.mock_responses import MockResponsesServer

        binary = native_binary()
        if binary is None:
            raise RuntimeError("the pinned real codex binary is not installed (run .ci/setup)")
        mock = MockResponsesServer(log_path=Path(tmp) / "mock.jsonl")
        mock.__enter__()
        env = {**env, **codex_env(make_codex_home(Path(tmp) / "home", mock.base_url))}
        cli, cwd = str(binary), tmp
    cmd = [sys.executable, "-m", "codexrt_cli", "serve", "--codex-bin", cli, "--idle-timeout", "0", "--cwd", cwd]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=ROOT, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    lines = 0
    child_pids: set[int] = set()

    def send(obj: Any) -> None:
        proc.stdin.write(enc(obj) + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def until_reply(rid: str) -> Any:
        nonlocal lines
        for line in proc.stdout:  # type: ignore[union-attr]
            lines += 1
            msg = decode(line)
            if msg.get("type") == "response" and msg.get("id") == rid:
                return msg
        raise RuntimeError("serve ended")

    def note_children() -> None:
        send({"id": "st", "command": "status"})
        for ch in until_reply("st")["result"]["channels"]:
            if isinstance(ch.get("pid"), int):
                child_pids.add(ch["pid"])

    statuses: dict[str, int] = {}
    samples: list[tuple[int, float | None, int]] = []
    thread_id = None
    t0 = now()
    try:
        for i in range(1, turns + 1):
            params: dict[str, Any] = {"channelId": "soak", "message": f"soak turn {i}"}
            if i % 10 != 1 and thread_id is not None:
                params["threadId"] = thread_id
            send({"id": f"t{i}", "command": "codex.send", "params": params})
            reply = until_reply(f"t{i}")
            status = reply["result"]["status"] if reply["ok"] else reply["error"]["code"]
            statuses[status] = statuses.get(status, 0) + 1
            if reply["ok"]:
                thread_id = reply["result"]["threadId"]
            if i % 25 == 0:
                send({"id": f"m{i}", "command": "codex.listModels", "params": {"channelId": "soak"}})
                until_reply(f"m{i}")
            if i == CHECKPOINT or i == turns or i % 100 == 0:
                note_children()  # sampled with the child alive (before a reset), so fds compare
                samples.append((i, _proc_status(proc.pid, "VmRSS"), _fds(proc.pid)))
            if i % 100 == 0 and i != turns:
                send({"id": f"r{i}", "command": "codex.resetRuntime", "params": {"channelId": "soak"}})
                until_reply(f"r{i}")
        elapsed = now() - t0
        peak = _proc_status(proc.pid, "VmHWM")
        proc.stdin.close()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if mock is not None:
            mock.__exit__(None, None, None)
        shutil.rmtree(tmp, ignore_errors=True)
    at50 = next(s for s in samples if s[0] == min(CHECKPOINT, turns))
    last = samples[-1]
    leaked = sorted(p for p in child_pids if _alive(p))
    return {"kind": kind, "turns": turns, "seconds": elapsed, "turns_per_s": turns / elapsed,
            "statuses": statuses, "lines": lines, "exit": proc.returncode,
            "rss_at_50_mb": at50[1], "rss_last_mb": last[1],
            "rss_growth_mb": (last[1] - at50[1]) if at50[1] is not None and last[1] is not None else None,
            "peak_rss_mb": peak, "fds_at_50": at50[2], "fds_last": last[2],
            "samples": samples, "children_seen": len(child_pids), "leaked_processes": leaked}


if __name__ == "__main__":
    emit(soak(sys.argv[1], int(sys.argv[2])))
