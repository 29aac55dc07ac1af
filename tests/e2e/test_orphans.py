"""R-RT-7: no orphans — when the host dies, even by SIGKILL, its app-server child exits too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests._support import ROOT, process_alive, wait_until_blocking

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



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_r_rt_7_sigkilled_host_leaves_no_app_server_behind():
    host = subprocess.Popen([sys.executable, "-c", HOST], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = host.stdout.readline()
        child = int(line)
        assert process_alive(child)
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        wait_until_blocking(lambda: not process_alive(child), "the app-server child to die with its SIGKILLed host",
                            timeout=10)
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_r_rt_7_parent_death_guard_covers_children_that_ignore_stdin():
    host = subprocess.Popen([sys.executable, "-c", GUARD_HOST], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(host.stdout.readline())
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        wait_until_blocking(lambda: not process_alive(child), "the child that ignores stdin to die with its host",
                            timeout=10)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


FORK_HOST = textwrap.dedent("""
    import os, time, trio, codexrt
    async def main():
        t = await codexrt.spawn_process_transport(["sleep", "300"])  # ignores stdin EOF
        forked = os.fork()  # a forked copy of the host must not keep the host's reaper waiting
        if forked == 0:
            time.sleep(300)
            os._exit(0)
        print(t.pid, forked, flush=True)
        await trio.sleep_forever()
    trio.run(main)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_r_rt_7_a_forked_copy_of_the_host_does_not_keep_its_children_alive():
    """``os.fork`` of the host: the child closes its inherited end of the reaper pipe, so the
    reaper still sees EOF when the host dies and kills the host's app-server."""
    host = subprocess.Popen([sys.executable, "-c", FORK_HOST], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    forked = None
    try:
        child, forked = map(int, host.stdout.readline().split())
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=10)
        wait_until_blocking(lambda: not process_alive(child),
                            "the app-server child to die (a forked host copy must not keep the reaper from seeing EOF)",
                            timeout=10)
        assert process_alive(forked)  # still holding its copy of everything else
    finally:
        if forked is not None:
            try:
                os.kill(forked, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if host.poll() is None:
            host.kill()
            host.wait()
