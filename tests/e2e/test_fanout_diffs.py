"""Workspace diffs are capped (issue 35): a fake ``git`` that blocks until released records how
many copies of itself run at once; 30 reads at once on one channel never run more than 2 gits
together, the queue holds 16 more, the rest are refused with ``QUEUE_FULL`` before any git
runs — through ``read_workspace_diff`` and through ``codex.readWorkspaceDiff`` of
``codexrt serve`` (in process).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trio
import trio.testing

from codexrt import QueueFull
from codexrt._io import _fanout
from codexrt._io._workspace import read_workspace_diff
from codexrt._serve._daemon import DaemonConfig, serve_daemon
from tests._support import wait_until

FAKE_GIT = r"""#!{python}
import os, sys, time
d = {dir!r}
me = os.path.join(d, "run-%d" % os.getpid())
open(me, "w").close()
with open(os.path.join(d, "log"), "a") as f:
    f.write("%d\n" % sum(1 for n in os.listdir(d) if n.startswith("run-")))
for _ in range(3000):  # bounded: 60 s at most
    if os.path.exists(os.path.join(d, "release")):
        break
    time.sleep(0.02)
os.unlink(me)
sys.stderr.write("fatal: not a git repository\n")
sys.exit(128)
"""


def _fake_git(tmp: Path) -> dict[str, str]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    git = bin_dir / "git"
    git.write_text(FAKE_GIT.format(python=sys.executable, dir=str(tmp)))
    git.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _peak(tmp: Path) -> int:
    log = tmp / "log"
    return max((int(x) for x in log.read_text().split()), default=0) if log.exists() else 0


async def test_issue_35_thirty_diffs_on_one_channel_run_two_gits_at_once(tmp_path: Path) -> None:
    env = _fake_git(tmp_path)
    outcomes: list[str] = []

    async def read() -> None:
        try:
            d = await read_workspace_diff(tmp_path, session_id="s", env=env, timeout=60, channel_id="ch")
            outcomes.append(d.status.value)
        except QueueFull as exc:
            outcomes.append(exc.code)

    async with trio.open_nursery() as n:
        for _ in range(30):
            n.start_soon(read)
        await wait_until(lambda: _fanout.WORKSPACE_DIFFS.statistics()["queued"] == 16
                         and len(list(tmp_path.glob("run-*"))) == 2, "2 gits running, 16 reads queued")
        assert outcomes.count("QUEUE_FULL") == 12
        (tmp_path / "release").touch()
    assert outcomes.count("notGit") == 18 and _peak(tmp_path) <= 2
    assert _fanout.WORKSPACE_DIFFS.statistics()["running"] == 0


async def test_issue_35_serve_refuses_diffs_past_the_queue_with_queue_full(tmp_path: Path, monkeypatch) -> None:
    env = _fake_git(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])  # serve's diffs use this process's PATH
    to_send, to_recv = trio.testing.memory_stream_one_way_pair()
    from_send, from_recv = trio.testing.memory_stream_one_way_pair()
    replies: dict[int, dict] = {}
    async with trio.open_nursery() as n:
        await n.start(serve_daemon, to_recv, from_send, DaemonConfig(inactive=True))
        lines = b"".join(json.dumps({"id": i, "command": "codex.readWorkspaceDiff",
                                     "params": {"cwd": str(tmp_path), "channelId": "c", "timeout": 60}}).encode()
                         + b"\n" for i in range(1, 31))
        await to_send.send_all(lines)
        buf = b""

        async def pump() -> None:
            nonlocal buf
            while len(replies) < 30:
                buf += await from_recv.receive_some()
                *done, buf = buf.split(b"\n")
                for raw in done:
                    obj = json.loads(raw)
                    if obj.get("type") == "response":
                        replies[obj["id"]] = obj

        n.start_soon(pump)
        await wait_until(lambda: len(replies) == 12 and len(list(tmp_path.glob("run-*"))) == 2,
                         "12 refusals while 2 gits run")
        (tmp_path / "release").touch()
        await wait_until(lambda: len(replies) == 30, "every diff answered")
        await to_send.aclose()
    refused = [r for r in replies.values() if not r["ok"]]
    assert len(refused) == 12 and {r["error"]["code"] for r in refused} == {"QUEUE_FULL"}
    assert refused[0]["error"]["details"]["resource"] == "workspace diff"
    assert sum(1 for r in replies.values() if r["ok"]) == 18 and _peak(tmp_path) <= 2
