"""``codexrt serve`` answers its first ``status`` without loading the runtime (issue 34).

The start path is what an IDE pays on every (re)start of the sidecar, so ``status`` must not
wait for the runtime, the connection, the command handlers or cattrs: they load with the first
command that needs them. These tests run ``codexrt serve`` in a fresh interpreter (stdin a
regular file of commands, R-D-4's "EOF finishes the accepted work") and read back which
modules it had loaded when it exited. The speed itself is measured in ``bench/``
(``bench/startup.py serve_first``), never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests._support import ROOT

#: Loaded only when a command needs them (the first ``status`` does not).
DEFERRED = ("codexrt._connection", "codexrt._runtime._runtime", "codexrt._serve._handlers_control",
            "codexrt._serve._handlers_ops", "codexrt._serve._handlers_reads", "codexrt._features._history",
            "codexrt._sansio._context", "cattrs")

PROBE = """
import sys
from codexrt_cli._main import main
try:
    main(["serve", "--access-mode", "inactive"])
except SystemExit:
    pass
loaded = sorted(m for m in {deferred!r} if m in sys.modules)
print("LOADED=" + ",".join(loaded), file=sys.stderr)
"""


def _serve_with(commands: list[dict[str, object]], tmp_path: Path) -> tuple[list[str], list[dict[str, object]]]:
    stdin = tmp_path / "commands.ndjson"
    stdin.write_text("".join(json.dumps(c) + "\n" for c in commands), encoding="utf-8")
    with open(stdin, "rb") as fh:
        proc = subprocess.run([sys.executable, "-c", PROBE.format(deferred=DEFERRED)], cwd=ROOT, stdin=fh,
                              capture_output=True, timeout=120)
    marker = [ln for ln in proc.stderr.decode().splitlines() if ln.startswith("LOADED=")]
    assert marker, proc.stderr.decode()[-2000:]
    loaded = [m for m in marker[-1].removeprefix("LOADED=").split(",") if m]
    replies = [json.loads(ln) for ln in proc.stdout.decode().splitlines() if ln.strip()]
    return loaded, replies


def test_status_is_answered_without_the_runtime(tmp_path: Path) -> None:
    loaded, replies = _serve_with([{"id": 1, "command": "status"}], tmp_path)
    assert [r["id"] for r in replies if r.get("type") == "response"] == [1]
    assert replies[0]["ok"] is True and replies[0]["result"]["channels"] == []
    assert loaded == []  # nothing of DEFERRED: not the runtime, the handlers, the features or cattrs


def test_a_command_after_status_loads_what_it_needs_and_is_answered(tmp_path: Path) -> None:
    """The lazy import happens on the reader's path: the command after ``status`` is answered
    exactly once, as it was when everything loaded at start (R-D-4)."""
    loaded, replies = _serve_with([
        {"id": 1, "command": "status"},
        {"id": 2, "command": "codex.respondInteraction",
         "params": {"interactionKey": "no-such-key", "dialogToken": "t", "result": {"decision": "decline"}}},
        {"id": 3, "command": "status"},
    ], tmp_path)
    responses = [r for r in replies if r.get("type") == "response"]
    assert [r["id"] for r in responses] == [1, 2, 3]
    assert responses[0]["ok"] and responses[2]["ok"]
    assert responses[1]["ok"] is False
    assert responses[1]["error"]["code"] == "INTERACTION_UNKNOWN"  # the handler's typed answer, not a crash
    assert "codexrt._serve._handlers_control" in loaded
