"""Split from ``tests/trio/test_soak.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import os
import random
from typing import Any

import trio

from codexrt import RuntimeConfig, open_runtime
from codexrt._io import _reaper
from tests._support import fake_server_factory
from tests.trio.test_soak import SEED, Soak


CHILD_TURNS = int(os.environ.get("CODEXRT_SOAK_CHILD_TURNS", "8"))


def children_of(pid: int) -> list[int]:
    """Live (non-zombie) child processes of ``pid`` (Linux /proc), except this process's
    host-death reaper (``codexrt._io._reaper``), which lives as long as the process by design."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z" and int(entry) != _reaper.reaper_pid():
            out.append(int(entry))
    return out


def open_fds() -> int:
    """Open fds of this process, except the write end of the pipe to the reaper (one per process)."""
    return len([fd for fd in os.listdir("/proc/self/fd") if int(fd) != _reaper._host.fd])


async def test_soak_real_children_no_leaked_process_or_fd() -> None:
    """Real child processes (the stdio fake): crashes, aborts and approvals over several
    generations; afterwards no child is alive and no file descriptor is left open."""
    rng = random.Random(SEED + 1)
    soak = Soak(rng)
    fds_before = open_fds()
    names = ["handshake-ok", "reverse-approval", "hang-turn", "disconnect-mid-turn"]

    async def make() -> Any:
        soak.current = rng.choice(names)
        soak.launches.append(soak.current)
        return await fake_server_factory(soak.current)()

    async with open_runtime(RuntimeConfig(transports=[make], stop_budget=5.0)) as rt:
        for i in range(CHILD_TURNS):
            op = rt.send(f"child turn {i}")
            with trio.fail_after(30):
                await soak.consume(rt, op)
            if rng.random() < 0.5 or soak.current == "reverse-approval":
                await rt.reset(reason="soak")
    ctx = f"seed={SEED + 1} statuses={soak.statuses} launches={soak.launches}"
    assert not soak.problems, (ctx, soak.problems)
    assert sum(soak.statuses.values()) == CHILD_TURNS, ctx
    assert children_of(os.getpid()) == [], ctx
    assert open_fds() <= fds_before, (ctx, fds_before, open_fds())
