"""History readers against the real ``codex app-server`` (pinned 0.169.0) and the loopback model
(R-H-1, R-H-3, R-H-4, R-H-7).

One thread with several turns — text with reasoning, a command, a file change through
``apply_patch``, plain text — is written by the real server; then:

* the paged native read (``thread/read`` + ``thread/turns/list`` + ``thread/items/list``) and
  the rollout file the server wrote give the same display records;
* ``codexrt threads --json`` and ``codexrt show`` run as a user would (subprocess, ``CODEX_BIN``
  and ``CODEX_HOME`` from the fixtures) and agree with the library.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trio

import codexrt
from codexrt._features._history import load_rollout_transcript, open_history_reader
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [
    "[[mock:reasoning:**Planning** a reply.]][[mock:text:Hi! I am the mock model.]] say hi",
    "list the files [[mock:exec:printf 'a.txt\\nb.txt\\n']]",
    "add a notes file [[mock:patch:notes.txt:first line\\nsecond line]]",
    "thanks [[mock:text:You are welcome.]]",
]


async def _make_thread(codex_bin: Path, codex_home: Path, real_env: dict[str, str], real_cwd: Path) -> str:
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), env=real_env, cwd=str(real_cwd))
    settings = Settings(approval_policy="never", sandbox="danger-full-access", cwd=str(real_cwd))
    tid = None
    async with codexrt.open_runtime(cfg) as rt:
        for prompt in PROMPTS:
            with trio.fail_after(60):
                res = await rt.send(prompt, thread_id=tid, settings=settings).wait()
            assert res.status == "completed", res
            tid = res.thread_id
    assert tid is not None
    return tid


async def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    with trio.fail_after(90):
        proc = await trio.run_process([sys.executable, "-m", "codexrt_cli", *args], cwd=str(ROOT), env=env,
                                      capture_stdout=True, capture_stderr=True, check=False)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


async def test_r_h_4_real_native_pages_and_rollout_give_the_same_records_and_cli_agrees(
        codex_bin, codex_home, real_env, real_cwd, mock_model):
    tid = await _make_thread(codex_bin, codex_home, real_env, real_cwd)

    # A fresh runtime: the thread is not loaded; reading must not load (resume) it.
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), env=real_env, cwd=str(real_cwd))
    async with codexrt.open_runtime(cfg) as rt, open_history_reader(rt) as reader:
        with trio.fail_after(60):
            native = await reader.read_thread(tid)
            count = await reader.count_messages(tid)
            page = await reader.list_threads(limit=10)
            loaded = await (await rt.ensure_started()).call("thread/loaded/list", {})
    assert (native.source, native.pagination, native.complete) == ("native", "paged", True)
    assert loaded["data"] == []  # reading never resumed the thread (R-H-1)
    assert native.thread is not None and native.thread["path"]
    legacy = await trio.to_thread.run_sync(lambda: load_rollout_transcript(native.thread["path"], thread_id=tid))
    assert legacy.records() == native.records()  # one projection, two sources (``source`` is not compared)
    kinds = [r.kind for r in native.records()]
    assert kinds.count("userMessage") == 4 and "commandExecution" in kinds and "fileChange" in kinds
    assert "reasoning" in kinds
    cmd = next(r for r in native.records() if r.kind == "commandExecution")
    assert (cmd.status, cmd.exit_code, cmd.output) == ("completed", 0, "a.txt\nb.txt\n")
    fc = next(r for r in native.records() if r.kind == "fileChange")
    assert [(c.kind, c.added, c.removed) for c in fc.changes] == [("add", 2, 0)]
    assert count.count == native.message_count == 8
    assert page.source == "native" and tid in [t.thread_id for t in page.threads]

    env = {**real_env, "CODEX_BIN": str(codex_bin), "CODEX_HOME": str(codex_home)}
    rc, out, err = await _cli("threads", "--json", env=env)
    assert rc == 0, err
    rows = json.loads(out)
    row = next(r for r in rows if r["threadId"] == tid)
    assert {"threadId", "name", "updatedAt", "messageCount"} <= set(row) and row["messageCount"] == 8

    rc, out, err = await _cli("show", tid, env=env)
    assert rc == 0, err
    assert "source: native" in out and "You:" in out and "Codex:" in out and "Hi! I am the mock model." in out
    assert "printf" in out and "| a.txt" in out and "notes.txt (+2 −0)" in out, out

    offline_env = {k: v for k, v in env.items() if k != "CODEX_BIN"}
    offline_env["CODEXRT_PRIVACY_DIR"] = str(codex_home.parent / "privacy")
    rc, out, err = await _cli("show", tid, "--offline", env=offline_env)
    assert rc == 0, err
    # the runtime's privacy index masks the rollout transcript, so no "not guaranteed" notice (R-H-3)
    assert "source: legacy" in out and "| a.txt" in out and "masking is not guaranteed" not in out
    assert os.path.exists(native.thread["path"])
