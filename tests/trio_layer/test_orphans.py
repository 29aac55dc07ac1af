"""R-RT-7: no orphans — when the host dies, even by SIGKILL, its app-server child exits too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests._support import ROOT

HOST = textwrap.dedent("""
    import sys, trio, codexrt
    async def peer():
        return await codexrt.spawn_process_transport(
            [sys.executable, "-m", "peer_fixtures.fake_app_server", "hang-turn"])
    async def main():
        async with codexrt.open_runtime(transports=[peer]) as rt:
            op = rt.send("hang")
            async for ev in op.events():
                if ev.kind == "turnStarted":
                    print(rt.runtime_snapshot()["pid"], flush=True)
                    await trio.sleep_forever()
    trio.run(main)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return False
    return "Z" not in state.split()[1]  # a zombie has exited


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")
def test_r_rt_7_sigkilled_host_leaves_no_app_server_behind():
    host = subprocess.Popen([sys.executable, "-c", HOST], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = host.stdout.readline()
        child = int(line)
        assert _alive(child)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)  # bounded poll of another process's state
        assert not _alive(child), "the app-server child outlived its SIGKILLed host"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


GUARD_HOST = textwrap.dedent("""
    import trio, codexrt
    async def main():
        t = await codexrt.spawn_process_transport(["sleep", "300"])  # ignores stdin EOF
        print(t.pid, flush=True)
        await trio.sleep_forever()
    trio.run(main)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and PR_SET_PDEATHSIG")
def test_r_rt_7_parent_death_guard_covers_children_that_ignore_stdin():
    host = subprocess.Popen([sys.executable, "-c", GUARD_HOST], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(host.stdout.readline())
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
