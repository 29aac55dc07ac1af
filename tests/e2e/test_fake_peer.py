"""Split from ``tests/trio/test_fake_peer.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from peer_fixtures.fake_app_server import read_log
from tests.trio.test_fake_peer import Client, INIT, method_is


ROOT = Path(__file__).resolve().parents[2]


async def spawn(*args: str, cwd: Path = ROOT) -> trio.Process:
    return await trio.lowlevel.open_process(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)


async def reap(proc: trio.Process) -> int:
    with trio.fail_after(10):
        return await proc.wait()


async def test_stdio_handshake_turn_log_and_eof_exit_0(tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    proc = await spawn("-m", "peer_fixtures.fake_app_server", "handshake-ok", "--log", str(log))
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            await c.handshake()
            tid = await c.thread()
            await c.request("turn/start", {"threadId": tid, "input": [{"type": "text", "text": "hi"}]})
            got = await c.until(method_is("turn/completed"))
        assert "".join(m["params"]["delta"] for m in got if m.get("method") == "item/agentMessage/delta") == "Hello from the fake peer."
        await proc.stdin.aclose()
        assert await reap(proc) == 0
    finally:
        proc.kill()
        await reap(proc)
    entries = read_log(log)
    assert [e.get("method") for e in entries] == ["initialize", "initialized", "thread/start", "turn/start"]
    assert entries[0]["params"] == INIT


async def test_stdio_runnable_by_path_and_sleep_does_not_block_reading(tmp_path: Path) -> None:
    scenario = tmp_path / "slow.json"
    scenario.write_text(json.dumps({"name": "slow", "rules": [
        {"match": {"method": "model/list"}, "actions": [{"sleep": 0.5}, {"default": True}]}]}))
    proc = await spawn(str(ROOT / "peer_fixtures" / "fake_app_server.py"), str(scenario), cwd=tmp_path)
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            await c.handshake()
            slow = await c.request("model/list")
            fast = await c.request("skills/list")
            order = [(await c.recv())["id"], (await c.recv())["id"]]
        assert order == [fast, slow]
    finally:
        proc.kill()
        await reap(proc)


@pytest.mark.parametrize(("scenario", "code", "secret"), [("disconnect-mid-turn", 1, b"panicked"),
                                                          ("crash-before-ready", 3, b"sk-test-SECRET123")])
async def test_stdio_exit_codes(scenario: str, code: int, secret: bytes) -> None:
    proc = await spawn("-m", "peer_fixtures.fake_app_server", scenario)
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            if scenario == "crash-before-ready":
                await c.request("initialize", INIT)
            else:
                await c.handshake()
                tid = await c.thread()
                await c.request("turn/start", {"threadId": tid, "input": []})
            rest = await c.rest()
        assert "turn/completed" not in [m.get("method") for m in rest]
        assert await reap(proc) == code
        assert secret in await proc.stderr.receive_some(1 << 20)
    finally:
        proc.kill()
        await reap(proc)


async def test_r_wire_9_stdio_stderr_flood_read_concurrently() -> None:
    proc = await spawn("-m", "peer_fixtures.fake_app_server", "stderr-flood")
    drained = 0

    async def drain() -> None:
        nonlocal drained
        while chunk := await proc.stderr.receive_some(1 << 16):
            drained += len(chunk)

    try:
        with trio.fail_after(20):
            async with trio.open_nursery() as inner:
                inner.start_soon(drain)
                c = Client(proc.stdin, proc.stdout)
                await c.handshake()
                tid = await c.thread()
                await c.request("turn/start", {"threadId": tid, "input": []})
                await c.until(method_is("turn/completed"))
                await proc.stdin.aclose()
        assert drained == (256 + 32) * 4096
        assert await reap(proc) == 0
    finally:
        proc.kill()
        await reap(proc)


@pytest.mark.parametrize(("sigterm", "expect"), [("exit", 0), ("ignore", -signal.SIGKILL)])
async def test_stdio_sigterm_behaviour(tmp_path: Path, sigterm: str, expect: int) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"name": "s", "settings": {"sigterm": sigterm}}))
    proc = await spawn("-m", "peer_fixtures.fake_app_server", str(scenario))
    try:
        c = Client(proc.stdin, proc.stdout)
        with trio.fail_after(10):
            await c.handshake()  # the handler is installed before the first answer
        proc.terminate()
        with trio.move_on_after(1 if sigterm == "ignore" else 10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
        assert await reap(proc) == expect
    finally:
        proc.kill()
        await reap(proc)


def test_sigexit_blocks_sigterm_and_exits_from_select_none() -> None:
    """The fake peers' SIGTERM exit does not depend on a Python-level handler: SIGTERM is blocked
    in the main thread (so a signal landing just before ``epoll_wait`` cannot be lost — the race
    that hung ``test_stdio_sigterm_behaviour[exit-0]`` about once in 80 runs) and ``sigwait`` in a
    thread ends the process with the given code while the main thread waits without a timeout."""
    code = ("import select, sys; from peer_fixtures.sigexit import exit_on_sigterm; exit_on_sigterm(7); "
            "blk = [l for l in open('/proc/self/status') if l.startswith('SigBlk')][0].split()[1]; "
            "print(int(blk, 16) >> 14 & 1, flush=True); select.select([0], [], [])")
    with subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as p:
        assert p.stdout is not None and p.stdout.readline() == b"1\n"  # SIGTERM (bit 15) blocked
        p.terminate()
        assert p.wait(timeout=10) == 7


def test_stdio_bad_scenario_exits_2() -> None:
    done = subprocess.run([sys.executable, "-m", "peer_fixtures.fake_app_server", "no-such-scenario"],
                          cwd=ROOT, capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and b"no such scenario" in done.stderr


def test_stdio_module_has_no_third_party_imports() -> None:
    code = ("import sys; import peer_fixtures.fake_app_server, peer_fixtures.scenario; "
            "bad = [m for m in ('trio', 'msgspec', 'attrs', 'cattrs', 'codexrt') if m in sys.modules]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=20,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
