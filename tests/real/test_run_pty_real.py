"""``codexrt run --loopback`` in a pseudo-terminal, against the real ``codex app-server`` (pinned)
and the loopback model: Ctrl+C typed at the terminal (R-OP-5, R-RT-7, R-INT-3; issue 17).

Why a pty: a terminal's Ctrl+C is a SIGINT to the terminal's whole *foreground process group*,
not to one pid. Before issue 17 the app-server shared codexrt's group, so Ctrl+C killed it and
the turn ended ``failed``; tests that signalled codexrt's pid alone could not see that. Here the
stdlib ``pty`` is enough (no pexpect): ``codexrt run`` is started as the leader of a new session
whose controlling terminal is the pty, and ``\\x03`` is written to the pty's master.

Every read of the terminal is bounded; the whole session is killed in ``finally``.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._support import ROOT, wait_until_blocking

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty + /proc (Linux)")

WAIT = 60.0  # bound of one wait for terminal output (a loaded 2-core machine)
STOP_BUDGET = 10.0  # RuntimeConfig.stop_budget's default: what `codexrt run` uses

# Runs as the new session's leader: opening the tty makes it the controlling terminal (and the
# session's group its foreground group), then becomes `python -m codexrt_cli …`.
_BOOT = ("import os, sys; os.close(os.open(os.ttyname(0), os.O_RDWR)); "
         "os.execv(sys.executable, [sys.executable, '-m', 'codexrt_cli', *sys.argv[1:]])")


class Terminal:
    """``codexrt`` on a pseudo-terminal: ``expect`` what it prints, ``type`` what a user types."""

    def __init__(self, *args: str, cwd: Path) -> None:
        master, slave = os.openpty()
        self.master = master
        self.output = b""
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, *args], stdin=slave, stdout=slave,
                                     stderr=slave, start_new_session=True, cwd=cwd)
        os.close(slave)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every writer of the slave side is gone
            data = b""
        if not data:
            raise AssertionError(f"terminal closed; output so far:\n{self.text()}")
        self.output += data
        return True

    def expect(self, pattern: bytes, timeout: float = WAIT, start: int = 0) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout
        while True:
            m = re.compile(pattern).search(self.output, start)
            if m:
                return m
            if not self._read(deadline - time.monotonic()) and time.monotonic() >= deadline:
                raise AssertionError(f"no {pattern!r} within {timeout:g}s; output:\n{self.text()}")

    def watch(self, seconds: float) -> None:
        """Collect output for ``seconds``: an observation window for something that must *not*
        appear (nothing is ordered by it)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._read(deadline - time.monotonic())

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, timeout: float) -> int:
        """The exit status, reading the terminal meanwhile (a full pty would block the writer)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                self._read(0.05)
            except AssertionError:  # closed: the process is exiting
                break
        return self.proc.wait(max(0.0, deadline - time.monotonic()))

    def text(self) -> str:
        return self.output.decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.master)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _app_server_of(parent: int) -> int:
    """The pid of the ``codex app-server`` child of ``parent`` (waits, bounded)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            fields = _stat(int(entry))
            if fields is None or int(fields[1]) != parent:
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if b"app-server" in f.read():
                        return int(entry)
            except OSError:
                continue
        time.sleep(0.05)  # polling /proc: no event says "a child was spawned"
    raise AssertionError("no app-server child appeared")


def _live_in_group(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry))
    return out


def _assert_gone(app_server: int) -> None:
    """No orphan: the app-server and everything left in its process group have exited."""
    # the reparented corpse is reaped by init asynchronously
    wait_until_blocking(lambda: not _live_in_group(app_server), "the app-server's process group to be gone", timeout=10)


@pytest.fixture
def terminal():
    opened: list[Terminal] = []

    def open_(*args: str, cwd: Path) -> Terminal:
        t = Terminal(*args, cwd=cwd)
        opened.append(t)
        return t

    yield open_
    for t in opened:
        t.close()


def test_r_op_5_ctrl_c_at_the_terminal_interrupts_the_turn_and_exits_130(codex_bin, terminal, tmp_path):
    """Ctrl+C mid-turn: ``turn/interrupt``, the native ``interrupted`` terminal, exit 130, and
    the app-server (its own session, so the terminal's SIGINT never reached it) reaped."""
    t = terminal("run", "--loopback", "--codex-bin", str(codex_bin), "--cwd", str(tmp_path),
                 "[[mock:deltas:60:500]]", cwd=ROOT)
    t.expect(rb"d3 ")  # mid-turn: 60 deltas 500 ms apart
    app_server = _app_server_of(t.proc.pid)
    assert os.getsid(app_server) == app_server and os.getpgid(app_server) != t.proc.pid
    t.type(b"\x03")
    t.expect(rb"interrupting the turn \(interruptSent\)")
    t.expect(rb"\[interrupted\] thread ")
    assert t.finish(STOP_BUDGET) == 130, t.text()
    assert b"d59" not in t.output  # the turn did not run to its end
    _assert_gone(app_server)


def test_r_op_5_second_ctrl_c_kills_a_hung_app_server_and_exits_130(codex_bin, terminal, tmp_path):
    """The app-server is stopped (SIGSTOP: a hung server that cannot answer the interrupt);
    the second Ctrl+C kills its group at once — not the stop-budget watchdog — and exits 130."""
    t = terminal("run", "--loopback", "--codex-bin", str(codex_bin), "--cwd", str(tmp_path),
                 "[[mock:deltas:60:500]]", cwd=ROOT)
    t.expect(rb"d3 ")
    app_server = _app_server_of(t.proc.pid)
    try:
        os.kill(app_server, signal.SIGSTOP)
        t.type(b"\x03")
        t.expect(rb"Ctrl\+C again to kill the app-server")
        t.type(b"\x03")
        t.expect(rb"killing the app-server")
        assert t.finish(STOP_BUDGET) == 130, t.text()
    finally:
        if _stat(app_server) is not None:  # never leave a stopped server behind
            os.kill(app_server, signal.SIGKILL)
    assert b"stop budget exhausted" not in t.output  # our kill, not the watchdog's
    assert b"(stopped by Ctrl+C)" in t.output
    _assert_gone(app_server)


def test_r_int_3_approval_prompt_answered_by_typing_runs_the_command(codex_bin, terminal, tmp_path):
    """An approval asked at the terminal stays on screen (the status ticker does not redraw
    over it) until the user types ``y``; then the command runs and the turn completes."""
    ws = tmp_path / "ws"
    ws.mkdir()
    t = terminal("run", "--loopback", "--codex-bin", str(codex_bin), "--cwd", str(ws),
                 "--approval-policy", "untrusted", "--sandbox", "workspace-write",
                 "[[mock:exec:touch marker]]", cwd=ROOT)
    prompt = t.expect(rb"Allow\? \[y\]es / \[n\]o / \[a\]lways for this session / \[c\]ancel the turn: ")
    assert not (ws / "marker").exists()  # approvals are never granted by default
    t.watch(2.5)  # the ticker redraws every 1 s while a tool runs: it must not while asking
    assert b"\x1b[2K" not in t.output[prompt.end():], t.text()
    t.type(b"y\n")
    t.expect(rb"\[completed\] thread ", start=prompt.end())
    assert t.finish(STOP_BUDGET) == 0, t.text()
    assert (ws / "marker").exists()


def test_ctrl_c_at_the_demo_approval_prompt_exits_130_without_a_traceback(codex_bin, terminal, tmp_path):
    """``codexrt demo`` asks at the terminal; Ctrl+C there stops the turn, reaps the app-server
    and exits 130 with one line, not a KeyboardInterrupt traceback."""
    t = terminal("demo", "--codex-bin", str(codex_bin), cwd=ROOT)
    t.expect(rb"Allow\? \[y\]es / \[n\]o / \[a\]lways for this session: ")
    app_server = _app_server_of(t.proc.pid)
    t.type(b"\x03")
    t.expect(rb"interrupted \(Ctrl\+C\)")
    assert t.finish(STOP_BUDGET + 5) == 130, t.text()
    assert b"Traceback" not in t.output, t.text()
    _assert_gone(app_server)
