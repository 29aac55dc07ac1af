"""Shared helpers for codexrt's own tests: scripted fake peers as transports."""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import trio

from codexrt._serve._schema import load_schema
from codexrt._io._transport import ExitStatus, StreamTransport, spawn_process_transport
from peer_fixtures.memory import open_memory_peer

ROOT = Path(__file__).resolve().parent.parent

WAIT = 30.0
"""Default bound (seconds) of :func:`wait_until` and :meth:`MemoryPeers.wait_received`: far
above what any of them takes on a loaded machine, so reaching it means a failure, not slowness."""


def _poll_deadline(timeout: float, what: str) -> Callable[[], None]:
    deadline = time.monotonic() + timeout

    def check() -> None:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")

    return check


async def wait_until(predicate: Callable[[], Any], what: str, *, timeout: float = WAIT,
                     interval: float = 0.02) -> None:
    """Poll ``predicate`` until it is true, at most ``timeout`` seconds of real time; then fail
    naming ``what``. Only for state that has no event to wait on - another process's (exit,
    reaping, a file it writes) or another thread's; never to order events of this Trio run."""
    check = _poll_deadline(timeout, what)
    while not predicate():
        check()
        await trio.sleep(interval)


def wait_until_blocking(predicate: Callable[[], Any], what: str, *, timeout: float = WAIT,
                        interval: float = 0.02) -> None:
    """:func:`wait_until` for synchronous tests (no Trio run in this thread)."""
    check = _poll_deadline(timeout, what)
    while not predicate():
        check()
        time.sleep(interval)


def process_alive(pid: int | None) -> bool:
    """Whether process ``pid`` still runs (a zombie has exited; None is not a process). One
    rule for every test that checks a child was reaped or killed."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
        return "Z" not in state.split()[1]
    except (FileNotFoundError, StopIteration):
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def process_exists(pid: int | None) -> bool:
    """Whether ``pid`` is still in the process table — running *or* an unreaped zombie. For this
    process's own children, ``not process_exists(pid)`` proves the child was reaped."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pinned_schema_dir() -> Path:
    """``tests/data/schema-<pinned version>/``: the checked-in protocol schema of the pinned
    binary (the bundle ``codex_app_server_protocol.schemas.json`` and a ``SHA256SUMS`` of the
    whole generated tree). One place, so a pin bump moves every schema check at once."""
    from peer_fixtures.codex_bin import pinned_version

    return ROOT / "tests" / "data" / f"schema-{pinned_version()}"


class MemoryPeers:
    """Transport factories backed by in-memory scenario peers (one per startup). ``peers``
    lists every peer started, in order, so tests can read what each one received
    (``received``) or wait for it (``await wait_received``)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.peers: list[Any] = []
        self._added = trio.Event()  # set (and replaced) whenever a peer starts

    def factory(self, scenario: Any):
        async def make() -> StreamTransport:
            streams = open_memory_peer(self.nursery, scenario)
            self.peers.append(streams.peer)
            self._added.set()
            self._added = trio.Event()

            async def exit_status() -> ExitStatus:
                await streams.peer.finished.wait()
                return ExitStatus(streams.peer.exit_code)

            return StreamTransport(streams.send, streams.receive, streams.stderr,
                                   description=f"memory:{streams.peer.scenario.name}", exit_status=exit_status)

        return make

    def sequence(self, *scenarios: Any):
        """One startup candidate whose successive launches (restarts after a crash or reset)
        use the given scenarios in turn; the last one repeats."""
        factories = [self.factory(s) for s in scenarios]
        calls = {"n": 0}

        async def make() -> StreamTransport:
            f = factories[min(calls["n"], len(factories) - 1)]
            calls["n"] += 1
            return await f()

        return make

    def received(self, index: int = -1, method: str | None = None) -> list[dict]:
        return self.peers[index].received_of(method)

    async def wait_received(self, index: int = -1, method: str | None = None, count: int = 1, *,
                            timeout: float = WAIT) -> list[dict]:
        """Wait until peer ``index`` (started or not yet) has received at least ``count``
        messages of ``method`` and return them all. No polling: it wakes when a peer starts and
        when the peer's reader takes in lines. Fails naming what arrived when that peer ends
        first, or after ``timeout`` seconds (Trio's clock: virtual under ``autojump_clock``)."""
        try:
            with trio.fail_after(timeout):
                while not -len(self.peers) <= index < len(self.peers):
                    await self._added.wait()
                return await self.peers[index].wait_received(method, count)
        except trio.TooSlowError:
            got = [p.received_methods() for p in self.peers]
            raise AssertionError(f"timed out after {timeout:g} s waiting for {count} {method or 'message'}(s) "
                                 f"at peer {index}; the peers received {got}") from None


def fake_server_factory(scenario: str, log: Path | None = None, extra: tuple[str, ...] = ()):
    """A transport factory spawning the stdio fake app-server as a real child process."""
    async def make():
        argv = [sys.executable, "-m", "peer_fixtures.fake_app_server", scenario, *extra]
        if log is not None:
            argv += ["--log", str(log)]
        return await spawn_process_transport(argv, cwd=str(ROOT))

    return make


def require_real_binary(version: str | None = None, label: str = "pinned"):
    """The real ``codex`` native binary of ``version`` (default: the pinned one). Missing, it
    skips the test with the fix in the reason — unless ``CODEXRT_REQUIRE_REAL=1`` (CI sets it),
    where it fails: real-server tests are mandatory in CI."""
    import os

    import pytest

    from peer_fixtures.codex_bin import native_binary, pinned_version

    version = version or pinned_version()
    path = native_binary(version)
    if path is not None:
        return path
    why = (f"the {label} real codex binary ({version}) is not installed; "
           "run `bash .ci/setup` (needs npm and the npm registry)")
    if os.environ.get("CODEXRT_REQUIRE_REAL") == "1":
        pytest.fail(why + " — CODEXRT_REQUIRE_REAL=1, so this is a failure, not a skip", pytrace=False)
    pytest.skip(why)


@functools.lru_cache(maxsize=None)
def _schema_validator(ref: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = load_schema()
    return Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{ref}"})


def schema_problem(instance: Any, ref: str) -> str | None:
    """None when ``instance`` fits ``#/$defs/<ref>`` of the shipped serve schema, else its first
    problem (``"<json path>: <message>"``). Checked by ``jsonschema`` (the reference
    implementation), not by codexrt itself."""
    error = next(iter(_schema_validator(ref).iter_errors(instance)), None)
    if error is None:
        return None
    return f"{error.json_path}: {error.message}"


class StepCounter(trio.abc.Instrument):
    """Counts the steps of the tasks whose name ends with ``name`` (add it with
    ``trio.lowlevel.add_instrument``): how many scheduler passes some work costs, without timing."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith(self.name):
            self.steps += 1
