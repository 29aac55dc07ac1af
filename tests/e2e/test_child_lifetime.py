"""R-RT-7 / issue 17: an app-server child lives exactly as long as its runtime generation.

The child used to get ``PR_SET_PDEATHSIG`` from a ``preexec_fn``; that signal fires when the
*thread* that forked exits, and ``trio.lowlevel.open_process`` forks from a worker thread that
Trio retires after 10 s idle, so every child died ~10 s after its spawn. These tests run the
fake app-server as a real child process."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import trio

import codexrt
from codexrt._io import _reaper
from codexrt._io._transport import spawn_process_transport
from tests._support import ROOT, fake_server_factory, process_alive, wait_until

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")

TRIO_THREAD_IDLE_TIMEOUT = 10.0  # trio._core._thread_cache: an idle worker thread exits after this



def _live_members(pgid: int) -> list[int]:
    """Pids of the non-zombie processes in group ``pgid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry))
    return out


async def test_r_rt_7_idle_child_outlives_the_worker_thread_that_forked_it():
    """A runtime idle for longer than Trio's worker-thread idle timeout keeps its child: the
    next send runs on the same generation and the same pid (no FAILED state, no respawn)."""
    async with codexrt.open_runtime(transports=[fake_server_factory("handshake-ok")]) as rt:
        with trio.fail_after(60):  # bounds, not timing: a loaded machine is slow
            first = await rt.send("before the idle period").wait()
        assert first.status == "completed", first
        snap = rt.runtime_snapshot()
        # The duration is what is under test (not an ordering device): past the 10 s idle
        # timeout the thread that forked the child has exited.
        await trio.sleep(TRIO_THREAD_IDLE_TIMEOUT + 2.5)
        assert rt.runtime_snapshot()["state"] == "READY"
        assert os.kill(snap["pid"], 0) is None  # still alive
        with trio.fail_after(60):
            second = await rt.send("after the idle period").wait()
        assert second.status == "completed", second
        after = rt.runtime_snapshot()
        assert (after["runtimeGeneration"], after["pid"]) == (snap["runtimeGeneration"], snap["pid"])


@posix_only
async def test_r_rt_7_child_runs_in_its_own_session_and_group():
    """The child leads its own session and group, so a terminal's Ctrl+C (sent to the host's
    foreground group) never reaches it; it is registered with this process's reaper."""
    t = await spawn_process_transport([sys.executable, "-m", "peer_fixtures.fake_app_server", "handshake-ok"],
                                      cwd=str(ROOT))
    try:
        assert t.pgid == t.pid
        assert os.getpgid(t.pid) == t.pid != os.getpgrp()
        assert os.getsid(t.pid) == t.pid
        assert t.pgid in _reaper._host.groups
        reaper = _reaper.reaper_pid()
        assert reaper is not None and os.getpgid(reaper) == reaper  # its own session too
    finally:
        status = await t.aclose()
    assert status.returncode == 0  # the fake exits on stdin EOF
    assert t.pgid not in _reaper._host.groups


@posix_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
async def test_r_rt_7_close_takes_what_the_child_left_in_its_group():
    """Closing a child also ends what it started in its group, even when the leader itself
    exits politely on stdin EOF and leaves a process behind."""
    script = "sleep 300 & echo $!; exec cat >/dev/null"  # cat exits on EOF; sleep ignores it
    t = await spawn_process_transport(["sh", "-c", script])
    line = b""
    while not line.endswith(b"\n"):
        line += await t.receive_stream.receive_some(64)
    grandchild = int(line)
    assert process_alive(grandchild) and os.getpgid(grandchild) == t.pgid
    with trio.fail_after(10):
        status = await t.aclose()
    assert status.returncode == 0
    # SIGKILLed; its new parent reaps it asynchronously
    await wait_until(lambda: not process_alive(grandchild), "the killed grandchild to be reaped", timeout=10)


@posix_only
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
async def test_r_rt_5_close_escalates_to_the_group_when_the_child_ignores_eof_and_sigterm():
    """stdin EOF ignored, SIGTERM ignored: the group gets SIGKILL and the leader is reaped."""
    t = await spawn_process_transport(["sh", "-c", "trap '' TERM; exec 0<&-; while :; do sleep 1; done"])
    t.close_grace = 0.2
    t.terminate_grace = 0.2
    with trio.fail_after(10):
        status = await t.aclose()
    assert status.signal == signal.SIGKILL
    # the killed `sleep` is reaped by its new parent
    await wait_until(lambda: not _live_members(t.pid), "the killed group's members to be reaped", timeout=10)


@pytest.mark.parametrize("exe", ["", "/usr/bin/uwsgi", "/opt/app/frozen-app"])
def test_r_rt_7_no_reaper_from_an_executable_that_is_not_python(monkeypatch, caplog, exe):
    """Nothing but a Python interpreter is ever run as the reaper (embedding hosts and frozen
    apps name themselves in ``sys.executable``); children then rely on stdin EOF, and a debug
    line says so."""
    import logging
    import subprocess

    monkeypatch.setattr(sys, "executable", exe)
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    host = _reaper._HostSide()
    with caplog.at_level(logging.DEBUG, logger="codexrt.reaper"):
        host.register(12345)
    assert started == [] and host.unavailable and host.proc is None
    assert "children rely on stdin EOF only" in caplog.text


@posix_only
def test_r_rt_7_a_dead_reaper_is_replaced_and_learns_every_live_group():
    """If the reaper died (EPIPE on the next line), the next registration starts a new one and
    tells it every group still registered: when that one sees EOF it ends both groups."""
    import subprocess

    sleepers = [subprocess.Popen(["sleep", "300"], start_new_session=True) for _ in range(2)]
    host = _reaper._HostSide()
    try:
        host.register(sleepers[0].pid)
        first = host.proc
        assert first is not None
        first.kill()
        first.wait()
        host.register(sleepers[1].pid)  # the write to the dead reaper fails: a fresh one starts
        assert host.proc is not None and host.proc is not first
        host.close()  # EOF, as when the host dies: the new reaper SIGTERMs both groups
        for p in sleepers:
            assert p.wait(timeout=10) == -signal.SIGTERM
    finally:
        for p in sleepers:
            if p.poll() is None:
                p.kill()
                p.wait()
