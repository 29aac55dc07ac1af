"""Host-death guard (R-RT-7): a tiny per-host-process reaper that outlives a SIGKILLed host.

Theory of operation. Every app-server child runs in its own session, so its process-group id
is its pid (``start_new_session=True``; no ``preexec_fn``, which is unsafe in threaded parents
and whose ``PR_SET_PDEATHSIG`` fired when the *thread* that forked exited, killing children
after Trio retired its idle worker thread). The first spawn lazily starts one reaper process per
host process: ``python -I -S codexrt/_io/_reaper.py`` (stdlib only, so it starts in milliseconds),
in its own session, stdout/stderr on ``/dev/null`` and stdin a pipe whose write end only the
host holds (close-on-exec, and closed in a forked child of the host). The host writes ``+PGID``
when a child is spawned and ``-PGID`` once it has reaped it. When the reaper reads EOF — the
host is gone, however it died — it sends SIGTERM to every group still registered, waits at
most :data:`TERM_GRACE` seconds, SIGKILLs the survivors and exits. A host that exits cleanly has
unregistered every group, so its reaper just exits.

Limits (also in docs/runtime.md): POSIX only (Linux, macOS); on Windows nothing is
registered and a child is left to exit on stdin EOF. A command that an app-server moved into
another session or group of its own is not covered by the group signal. If the reaper cannot be
started (no ``sys.executable``, or one that is not a Python interpreter — a frozen app, an
embedding host —, or a failed exec) children rely on stdin EOF alone, and a debug line says so.
A host SIGKILLed in the instant between a spawn and its ``+PGID`` line leaves that one child to
stdin EOF.
"""

from __future__ import annotations

import os
import signal
import sys
import time

TERM_GRACE = 2.0  # seconds between SIGTERM and SIGKILL once the host is gone

# The host side is only defined when imported as part of the package (not when run as the
# reaper script itself, which must import nothing but the stdlib to start fast).
if __name__ != "__main__":
    import logging
    import subprocess
    import threading

    log = logging.getLogger("codexrt.reaper")

    class _HostSide:
        """The host's handle on its reaper. Thread-safe: the blocking facade and notebooks
        spawn from several threads."""

        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.proc: subprocess.Popen[bytes] | None = None
            self.fd: int | None = None
            self.groups: set[int] = set()
            self.unavailable = False  # a start failed: don't retry on every spawn

        def _start_locked(self) -> bool:
            if self.fd is not None:
                return True
            if self.unavailable:
                return False
            exe = sys.executable
            if not _is_python(exe):
                # Frozen apps and embedding hosts (uwsgi, …) may name themselves here: never run
                # a program that is not a Python interpreter.
                self.unavailable = True
                log.debug("sys.executable %r is not a Python interpreter: no host-death reaper; "
                          "children rely on stdin EOF only", exe)
                return False
            here = os.path.abspath(__file__)
            argv = [exe, "-I", "-S", here] if os.path.isfile(here) else [exe, "-m", "codexrt._io._reaper"]
            try:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True, close_fds=True, cwd="/",
                )
            except OSError as exc:
                self.unavailable = True
                log.debug("host-death reaper could not start (%s): children rely on stdin EOF only", exc)
                return False
            assert proc.stdin is not None
            self.proc = proc
            self.fd = proc.stdin.fileno()  # os.pipe() fds are close-on-exec
            return True

        def _write_locked(self, line: bytes) -> bool:
            assert self.fd is not None
            try:
                os.write(self.fd, line)  # < PIPE_BUF: atomic, and the reaper drains promptly
                return True
            except OSError as exc:  # the reaper died (EPIPE): forget it, start another
                log.debug("host-death reaper gone (%s); starting another", exc)
                self._drop_locked()
                return False

        def _drop_locked(self) -> None:
            if self.proc is not None and self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
                try:
                    self.proc.wait(timeout=0)  # reap it if it already exited
                except subprocess.TimeoutExpired:
                    pass
            self.proc = None
            self.fd = None

        def register(self, pgid: int) -> None:
            with self.lock:
                self.groups.add(pgid)
                for _attempt in range(2):
                    if not self._start_locked():
                        return
                    # A fresh reaper learns every live group, not only this one.
                    lines = b"".join(b"+%d\n" % g for g in sorted(self.groups)) if _attempt else b"+%d\n" % pgid
                    if self._write_locked(lines):
                        return

        def unregister(self, pgid: int) -> None:
            with self.lock:
                if pgid not in self.groups:
                    return
                self.groups.discard(pgid)
                if self.fd is not None and not self._write_locked(b"-%d\n" % pgid) and self.groups:
                    # The reaper died: start another at once and tell it every live group, so
                    # the children still running stay covered until the next spawn.
                    if self._start_locked():
                        self._write_locked(b"".join(b"+%d\n" % g for g in sorted(self.groups)))

        def after_fork_in_child(self) -> None:
            # The forked child must not hold the write end (the reaper would never see EOF) and
            # does not own its parent's children or reaper; the lock may have been held mid-fork.
            self.lock = threading.Lock()
            proc = self.proc
            if proc is not None:
                if proc.stdin is not None:
                    try:
                        proc.stdin.close()
                    except OSError:
                        pass
                # Not this process's child: mark it done so nothing here ever waits for it
                # or warns about it when the object is collected.
                proc.returncode = 0
            self.proc = None
            self.fd = None
            self.groups = set()
            self.unavailable = False

        def close(self) -> None:
            """At interpreter exit: EOF to the reaper (it signals any group still registered)
            and reap it briefly so it is not left a zombie of a long-lived embedding host."""
            with self.lock:
                proc = self.proc
                self._drop_locked()
            if proc is not None:
                try:
                    proc.wait(timeout=0.2 if not self.groups else TERM_GRACE + 0.5)
                except subprocess.TimeoutExpired:
                    pass

    def _is_python(exe: str | None) -> bool:
        if not exe or getattr(sys, "frozen", False):
            return False
        name = os.path.basename(exe).lower()
        return name.startswith(("python", "pypy")) and os.access(exe, os.X_OK)

    _host = _HostSide()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_host.after_fork_in_child)
    import atexit

    atexit.register(_host.close)

    def register_group(pgid: int) -> None:
        """Tell the reaper to kill group ``pgid`` if this process dies before it unregisters it."""
        _host.register(pgid)

    def unregister_group(pgid: int) -> None:
        """The group's leader was reaped: the reaper must not signal that id any more."""
        _host.unregister(pgid)

    def reaper_pid() -> int | None:
        """The current reaper's pid (tests and diagnostics); ``None`` when none runs."""
        with _host.lock:
            return _host.proc.pid if _host.proc is not None else None


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_groups(groups: set[int], sig: int) -> set[int]:
    live = set()
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
            live.add(pgid)
        except ProcessLookupError:
            pass
        except PermissionError:  # not ours any more (the id was reused): leave it alone
            pass
    return live


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only the host's EOF ends us
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            data = os.read(0, 4096)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        except OSError:
            break
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            try:
                pgid = int(line[1:])
            except ValueError:
                continue
            if pgid <= 1:
                continue  # never signal init's group or "every process"
            if line[:1] == b"+":
                groups.add(pgid)
            elif line[:1] == b"-":
                groups.discard(pgid)
    live = _signal_groups(groups, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE
    while live and time.monotonic() < deadline:
        time.sleep(0.05)  # polling other processes' groups: no event exists for "group empty"
        live = {g for g in live if _group_exists(g)}
    _signal_groups(live, signal.SIGKILL)


if __name__ == "__main__":
    main()
