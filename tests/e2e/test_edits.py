"""Split from ``tests/trio/test_edits.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from codexrt._io._edits import EditLedger, EditStore
from tests.trio.test_edits import Codex, NEW, OLD, check_real_recording, item, run_real_patch_session, tree


_CRASH_SCRIPT = r"""
import json, os, signal, sys
import codexrt._io._edits as edits
args = json.loads(sys.argv[1])
real = os.replace
def crash(src, dst, **kw):
    if args["when"] == "after":
        real(src, dst, **kw)
    os.kill(os.getpid(), signal.SIGKILL)
edits._replace = crash
led = edits.EditLedger(session_id="s", store=edits.EditStore(args["store"]))
led.record_item(args["item"], thread_id="th", turn_id="t", cwd=args["cwd"])
led.undo_file_sync(("th", args["path"]))
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_r_edit_3_kill_mid_undo_leaves_old_or_new_never_partial(tree: Path, tmp_path: Path, when: str):
    big = tree / "src" / "big.txt"
    cx = Codex(tree)
    ch = cx.update("src/big.txt", NEW)
    args = {
        "when": when,
        "store": str(tmp_path / "crash.sqlite3"),
        "item": item("i", ch),
        "cwd": str(tree),
        "path": "src/big.txt",
    }
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH_SCRIPT, json.dumps(args)],
        capture_output=True,
        timeout=60,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert big.read_text() == (NEW if when == "before" else OLD)
    # and a fresh ledger sees the record as not undone (the crash beat the bookkeeping)
    led = EditLedger(session_id="s", store=EditStore(args["store"]))
    assert led.store.undone_keys() == set()
    led.close()
    led.store.close()


@pytest.mark.real
def test_r_edit_3_real_app_server_apply_patch_then_undo_restores_tree(tmp_path: Path):
    from tests._support import require_real_binary

    codex_bin = require_real_binary()
    rec = run_real_patch_session(codex_bin, tmp_path)
    check_real_recording(rec, Path(rec["cwd"]))
