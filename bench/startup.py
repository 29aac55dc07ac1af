"""Startup costs, and the real server's own numbers.

* ``import`` — ``python -c "import codexrt"`` vs ``python -c "import trio, msgspec, attrs"``
  (codexrt's dependency floor), wall time of fresh interpreters, median of several.
* ``help`` / ``version`` — ``codexrt --help`` / ``--version`` (as ``python -m codexrt_cli``) vs
  ``python -c pass``, with ``python -c "import trio, msgspec"`` beside it.
* ``serve_first`` — spawn ``codexrt serve`` and get the reply to one ``status`` command, vs
  ``python -c "import trio, msgspec"`` (issue 34's target: ≤ 1.3×), alternated pair by pair,
  the ratio the median of the per-pair ratios; ``python -c pass`` beside it.

Every interpreter these rows start has bytecode caching on, in a temporary
``PYTHONPYCACHEPREFIX`` warmed by one untimed run of each command (an installed package has its
``.pyc`` files; with ``PYTHONDONTWRITEBYTECODE=1``, as some shells here set, every start would
compile codexrt's sources again and the row would measure the compiler).
* ``discovery`` — ``discover_cli`` over 50 candidates (25 ``PATH`` directories, each with a
  ``codex``, plus 25 more in the common install places) vs a plain ``shutil.which``-style scan
  of the same 50 paths.
* ``ready`` — spawn the pinned real ``codex app-server`` and reach READY (``open_runtime`` +
  ``ensure_started``) vs a raw script that spawns it, writes ``initialize`` and reads the reply.
* ``real_turn`` — issue 4's table: start to READY, first-delta latency and a short turn against
  the real binary and the loopback mock model, medians over a few runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from bench._common import ROOT, emit, env_with_root, now

REPEAT = 5
_PYC: str | None = None  # this process's bytecode cache for its workers: made on first use, removed at exit


def _env() -> dict[str, str]:
    """The workers' environment with bytecode caching on, in this run's own cache directory. (It
    was made at import, and only ``python -m bench.startup`` removed it: every process that
    imported this module for ``_real_setup`` — the ACP rows' — left one behind in the temp dir.)"""
    global _PYC
    if _PYC is None:
        _PYC = tempfile.mkdtemp(prefix="codexrt-bench-pyc-")
        atexit.register(shutil.rmtree, _PYC, True)
    env = env_with_root()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = _PYC
    return env


def _once(cmd: list[str]) -> float:
    """Wall time of ``cmd`` from spawn to exit, with a blocking wait. (``subprocess.run(...,
    timeout=60)`` polled the child with sleeps doubling from 0.5 ms to 50 ms, so every time was
    rounded up to 31.5, 63.5, 113.5, 163.5 ms …: a 33 ms ``--version`` read 64 ms.) A timer kills
    a child still running after 60 s."""
    t0 = now()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    timer = threading.Timer(60, proc.kill)
    timer.start()
    try:
        rc = proc.wait()
    finally:
        timer.cancel()
    elapsed = now() - t0
    if rc != 0:
        raise subprocess.CalledProcessError(rc, cmd)
    return elapsed


def _wall(cmd: list[str], repeat: int = REPEAT) -> float:
    _once(cmd)  # warm the bytecode cache
    return statistics.median(_once(cmd) for _ in range(repeat))


def imports() -> dict[str, Any]:
    py = sys.executable
    return {
        "codexrt_s": _wall([py, "-c", "import codexrt"]),
        "baseline_s": _wall([py, "-c", "import trio, msgspec, attrs"]),
        "bare_s": _wall([py, "-c", "pass"]),
    }


def help_() -> dict[str, Any]:
    py = sys.executable
    return {"codexrt_s": _wall([py, "-m", "codexrt_cli", "--help"]), "baseline_s": _wall([py, "-c", "pass"]),
            "deps_s": _wall([py, "-c", "import trio, msgspec"])}


def version() -> dict[str, Any]:
    py = sys.executable
    return {"codexrt_s": _wall([py, "-m", "codexrt_cli", "--version"]), "baseline_s": _wall([py, "-c", "pass"]),
            "deps_s": _wall([py, "-c", "import trio, msgspec"])}


def _serve_first_reply() -> float:
    """Spawn ``codexrt serve``, write one ``status`` command, time until its reply line."""
    env = _env()
    t0 = now()
    proc = subprocess.Popen([sys.executable, "-m", "codexrt_cli", "serve"], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(b'{"id": 1, "command": "status"}\n')
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("codexrt serve exited before replying")
            if b'"id":1,' in line.replace(b" ", b""):  # the reply to our command (events have no id)
                return now() - t0
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _first_line(cmd: list[str]) -> float:
    """Spawn ``cmd`` and time until its first stdout line (what the baseline pays before it
    could answer anything; its exit is not timed, as serve's is not)."""
    env = _env()
    t0 = now()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout
    line = proc.stdout.readline()
    elapsed = now() - t0
    proc.wait(timeout=30)
    if not line:
        raise RuntimeError(f"{cmd} printed nothing")
    return elapsed


def serve_first(repeat: int = 2 * REPEAT) -> dict[str, Any]:
    """``codexrt serve`` → first reply to ``status`` vs ``import trio, msgspec`` → a printed
    line, alternated pair by pair (neither side's exit is timed)."""
    py = sys.executable
    deps = [py, "-c", "import trio, msgspec; print('ready', flush=True)"]
    _serve_first_reply()  # warm the bytecode cache (and the page cache) of both sides
    _first_line(deps)
    serve_t, deps_t = [], []
    for _ in range(repeat):
        serve_t.append(_serve_first_reply())
        deps_t.append(_first_line(deps))
    return {"codexrt_s": statistics.median(serve_t), "deps_s": statistics.median(deps_t),
            "ratio": statistics.median(a / b for a, b in zip(serve_t, deps_t)), "pairs": repeat,
            "baseline_s": _wall([py, "-c", "pass"])}


def discovery() -> dict[str, Any]:
    from codexrt._io._discovery import discover_cli

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-disc-"))
    try:
        dirs = []
        for i in range(50):
            d = tmp / f"d{i}"
            d.mkdir()
            exe = d / "codex"
            exe.write_text("#!/bin/sh\nexit 0\n")
            exe.chmod(0o755)
            dirs.append(d)
        path_dirs, common = dirs[:25], dirs[25:]
        env = {"PATH": os.pathsep.join(map(str, path_dirs)), "HOME": str(tmp)}
        found = 0
        t_lib = []
        for _ in range(REPEAT):
            t0 = now()
            res = discover_cli(env=env, home=tmp, login_shell_path=lambda: None, common_dirs=common)
            t_lib.append(now() - t0)
            found = len(res.candidates)
        t_base = []
        for _ in range(REPEAT):
            t0 = now()
            hits = [str(d / "codex") for d in dirs if os.access(d / "codex", os.X_OK)]
            t_base.append(now() - t0)
        return {"codexrt_s": statistics.median(t_lib), "baseline_s": statistics.median(t_base),
                "candidates": found, "baseline_hits": len(hits)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _real_setup(tmp: Path) -> tuple[Path, Any, dict[str, str]]:
    from peer_fixtures.codex_bin import native_binary
    from peer_fixtures.codex_home import codex_env, make_codex_home
    from peer_fixtures.mock_responses import MockResponsesServer

    binary = native_binary()
    if binary is None:
        raise RuntimeError("the pinned real codex binary is not installed (run .ci/setup)")
    mock = MockResponsesServer(log_path=tmp / "mock.jsonl")
    mock.__enter__()
    home = make_codex_home(tmp / "home", mock.base_url)
    return binary, mock, codex_env(home)


def ready(repeat: int = 3) -> dict[str, Any]:
    import msgspec
    import trio

    from codexrt import RuntimeConfig, open_runtime

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-ready-"))
    binary, mock, env = _real_setup(tmp)
    try:
        raw_t = []
        for _ in range(repeat):
            t0 = now()
            proc = subprocess.Popen([str(binary), "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env, cwd=tmp)
            assert proc.stdin and proc.stdout
            proc.stdin.write(msgspec.json.encode({"id": 1, "method": "initialize", "params": {
                "clientInfo": {"name": "raw", "version": "0"}, "capabilities": {"experimentalApi": True}}}) + b"\n")
            proc.stdin.flush()
            for line in proc.stdout:
                if msgspec.json.decode(line).get("id") == 1:
                    break
            raw_t.append(now() - t0)
            proc.stdin.close()
            proc.wait(10)

        lib_t: list[float] = []

        async def one() -> None:
            t0 = now()
            async with open_runtime(RuntimeConfig(codex_bin=str(binary), env=env, cwd=str(tmp))) as rt:
                await rt.ensure_started()
                lib_t.append(now() - t0)

        for _ in range(repeat):
            trio.run(one)
        return {"codexrt_s": statistics.median(lib_t), "baseline_s": statistics.median(raw_t)}
    finally:
        mock.__exit__(None, None, None)
        shutil.rmtree(tmp, ignore_errors=True)


def real_turn(repeat: int = 3) -> dict[str, Any]:
    """Issue 4: start→READY, first delta, a short turn (200 mock deltas), medians."""
    import trio

    from codexrt import RuntimeConfig, open_runtime

    tmp = Path(tempfile.mkdtemp(prefix="codexrt-turn-"))
    binary, mock, env = _real_setup(tmp)
    rows: dict[str, list[float]] = {"ready_s": [], "first_delta_s": [], "turn_s": [], "warm_turn_s": []}
    try:
        async def one() -> None:
            t0 = now()
            async with open_runtime(RuntimeConfig(codex_bin=str(binary), env=env, cwd=str(tmp))) as rt:
                await rt.ensure_started()
                rows["ready_s"].append(now() - t0)
                t1 = now()
                op = rt.send("count [[mock:deltas:200]]")
                first = None
                async for ev in op.events():
                    if ev.kind == "itemUpdated" and first is None:
                        first = now() - t1
                res = await op.wait()
                assert res.status == "completed", res
                rows["turn_s"].append(now() - t1)
                rows["first_delta_s"].append(first or float("nan"))
                t2 = now()
                op = rt.send("again [[mock:deltas:200]]", thread_id=res.thread_id)
                async for _ev in op.events():
                    pass
                assert (await op.wait()).status == "completed"
                rows["warm_turn_s"].append(now() - t2)

        for _ in range(repeat):
            trio.run(one)
        return {k: statistics.median(v) for k, v in rows.items()} | {"runs": repeat}
    finally:
        mock.__exit__(None, None, None)
        shutil.rmtree(tmp, ignore_errors=True)


WORKERS = {"import": imports, "help": help_, "version": version, "serve_first": serve_first, "discovery": discovery,
           "ready": ready, "real_turn": real_turn}

if __name__ == "__main__":
    emit(WORKERS[sys.argv[1]]())
