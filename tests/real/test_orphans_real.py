"""R-RT-7 on the real ``codex app-server`` (pinned) with the loopback model: when the host is
SIGKILLed mid-turn, neither the app-server nor the command it is running survives.

What the real server does (0.169.0, Linux, checked by hand): it runs a command in a session
of its own (``setsid``: not in the app-server's process group), so codexrt's group signals do not
reach it; but the command dies with the server (SIGKILL of the app-server alone ends it). This
test checks the whole chain from the outside — host SIGKILLed → (reaper / stdin EOF) →
app-server gone → command gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests._support import ROOT, wait_until_blocking

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")

HOST = textwrap.dedent("""
    import os, sys, trio, codexrt
    from codexrt import RuntimeConfig, Settings
    codex_bin, cwd, command = sys.argv[1:4]
    async def main():
        cfg = RuntimeConfig(codex_bin=codex_bin, env=dict(os.environ), cwd=cwd,
                            settings=Settings(cwd=cwd, approval_policy="never", sandbox="danger-full-access"))
        async with codexrt.open_runtime(cfg) as rt:
            op = rt.send(f"[[mock:exec:{command}]]")
            async for ev in op.events():
                if ev.kind == "itemStarted" and ev.payload["item"].get("type") == "commandExecution":
                    print(rt.runtime_snapshot()["pid"], flush=True)
                    await trio.sleep_forever()
    trio.run(main)
""")


def _procs() -> dict[int, tuple[str, str, int]]:
    """pid → (cmdline, state, session id) of every process (Linux /proc)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(entry)] = (cmd, fields[0], int(fields[3]))
    return out


def _live(pids: set[int]) -> set[int]:
    procs = _procs()
    return {p for p in pids if p in procs and procs[p][1] != "Z"}


def test_r_rt_7_real_sigkilled_host_leaves_neither_app_server_nor_its_command(
        codex_bin, real_env, real_cwd, mock_model):
    command = f"sleep {300000 + os.getpid() % 100000}"  # unique: find exactly this command
    host = subprocess.Popen([sys.executable, "-c", HOST, str(codex_bin), str(real_cwd), command],
                            cwd=ROOT, env=real_env, stdout=subprocess.PIPE, text=True)
    started: set[int] = set()
    try:
        app_server = int(host.stdout.readline())
        wait_until_blocking(lambda: any(c == command for c, _, _ in _procs().values()), "the command to start",
                            timeout=20)
        procs = _procs()
        started = {p for p, (c, _, _) in procs.items() if c == command} | {app_server}
        assert _live(started) == started
        assert procs[app_server][2] == app_server  # the app-server leads its own session
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        wait_until_blocking(lambda: not _live(started), f"{sorted(started)} to die with the SIGKILLed host",
                            timeout=10)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for pid in _live(started):  # never leave one behind, even when the test fails
            os.kill(pid, signal.SIGKILL)
