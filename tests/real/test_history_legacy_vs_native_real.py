"""The same work recorded by the old release in its legacy rollout and by the pinned release
natively shows the same records (R-H-3, R-H-4, R-H-5).

The older official release (0.147.0) writes a legacy-mode rollout (no ``item_completed``
snapshots, commands only as ``exec_command`` calls and their receipts); the pinned release
(``.ci/codex-version``) runs the same prompts against the same loopback model and is read through its paged
native history. Both projections must show the same records: kinds, statuses, texts, commands
with their exit codes and output, file changes. Ids differ (two threads) and are not compared;
neither is the display of a command's shell wrapper (see ``_command``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import trio

import codexrt
from codexrt._features._history import load_rollout_transcript, open_history_reader
from codexrt._io._history_files import find_rollout
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._settings import Settings
from peer_fixtures.codex_home import codex_env, make_codex_home

PROMPTS = [
    "[[mock:reasoning:**Planning** a reply.]][[mock:text:Hi! I am the mock model.]] say hi",
    "list the files [[mock:exec:printf 'a.txt\\nb.txt\\n']]",
    "add a notes file [[mock:patch:notes.txt:first line\\nsecond line]]",
    "fail once [[mock:exec:sh -c 'echo broken >&2; exit 3']]",
    "thanks [[mock:text:You are welcome.]]",
]


async def _record(codex_bin: Path, home: Path, cwd: Path) -> str:
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(home), env=codex_env(home), cwd=str(cwd))
    settings = Settings(approval_policy="never", sandbox="danger-full-access", cwd=str(cwd))
    tid = None
    async with codexrt.open_runtime(cfg) as rt:
        for prompt in PROMPTS:
            with trio.fail_after(60):
                res = await rt.send(prompt, thread_id=tid, settings=settings).wait()
            assert res.status == "completed", res
            tid = res.thread_id
    assert tid is not None
    return tid


def _command(cmd: str) -> str:
    """The command as run: the native display wraps it in the login shell's argv
    (``/bin/bash -lc '…'``), the legacy call records the script itself."""
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return cmd
    if len(argv) == 3 and argv[0].startswith("/") and argv[0].endswith("sh") and argv[1] == "-lc":
        return argv[2]
    return cmd


def _view(records: list[Any], cwd: Path) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for r in records:
        if r.kind == "userMessage":
            out.append((r.kind, r.status, r.text))
        elif r.kind == "assistantMessage":
            # the mock model echoes the tool receipt, whose chunk id and wall time vary per run
            text = re.sub(r"(Chunk ID: )\S+|(Wall time:? )[^\n]*", lambda m: m.group(1) or m.group(2), r.text)
            out.append((r.kind, r.status, text))
        elif r.kind == "reasoning":
            out.append((r.kind, r.state, r.summary, r.content))
        elif r.kind == "commandExecution":
            out.append((r.kind, r.status, _command(r.command), r.exit_code, r.output))
        elif r.kind == "fileChange":
            out.append((r.kind, r.status, tuple((Path(c.path).name, c.kind, c.added, c.removed) for c in r.changes)))
        else:
            out.append((r.kind, r.status))
    return out


async def test_r_h_3_old_legacy_rollout_and_pinned_native_history_show_the_same_records(
        codex_bin, codex_bin_old, mock_model, tmp_path):
    old_home = make_codex_home(tmp_path / "home-old", mock_model.base_url)
    new_home = make_codex_home(tmp_path / "home-new", mock_model.base_url)
    old_cwd, new_cwd = tmp_path / "work-old", tmp_path / "work-new"
    old_cwd.mkdir()
    new_cwd.mkdir()
    old_tid = await _record(codex_bin_old, old_home, old_cwd)
    new_tid = await _record(codex_bin, new_home, new_cwd)

    info = find_rollout(old_home, old_tid)
    assert info is not None
    legacy = await trio.to_thread.run_sync(lambda: load_rollout_transcript(info.path, thread_id=old_tid))
    assert legacy.source == "legacy"

    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(new_home), env=codex_env(new_home),
                        cwd=str(new_cwd))
    async with codexrt.open_runtime(cfg) as rt, open_history_reader(rt) as reader:
        with trio.fail_after(60):
            native = await reader.read_thread(new_tid)
    assert (native.source, native.pagination, native.complete) == ("native", "paged", True)

    lv, nv = _view(legacy.records(), old_cwd), _view(native.records(), new_cwd)
    assert lv == nv
    kinds = [v[0] for v in nv]
    assert kinds.count("userMessage") == len(PROMPTS) and kinds.count("commandExecution") == 2
    cmds = [v for v in nv if v[0] == "commandExecution"]
    assert cmds[0][1:4] == ("completed", "printf 'a.txt\\nb.txt\\n'", 0) and cmds[0][4] == "a.txt\nb.txt\n"
    assert cmds[1][1] == "failed" and cmds[1][3] == 3 and "broken" in cmds[1][4]
    assert [v[1:] for v in nv if v[0] == "fileChange"] == [("completed", (("notes.txt", "add", 2, 0),))]
    assert [len(g.records) for g in legacy.turns] == [len(g.records) for g in native.turns]
    assert [g.status for g in legacy.turns] == [g.status for g in native.turns] == ["completed"] * len(PROMPTS)
