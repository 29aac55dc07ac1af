"""Every ```python block of README.md and docs/*.md runs (convention in docs/quickstart.md), and
docs/api.md matches the docstrings it is generated from.

Convention: a block runs unless the nearest non-blank line before its opening fence is
``<!-- not-run: reason -->``. Each block runs in a fresh interpreter (bounded), in an empty
temporary directory, with ``CODEX_BIN`` pointing at the scripted fake app-server
(``handshake-ok``: every turn completes with a canned answer) and no other ``CODEX_*`` variable —
so snippets that call ``codexrt.blocking.connect()`` or ``open_runtime()`` without a path really
drive an app-server, and nothing reaches a real model.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import ROOT
from tests.e2e.test_serve_e2e import fake_cli

NOT_RUN = re.compile(r"^<!--\s*not-run\b.*-->\s*$")
FENCE = re.compile(r"^```python\s*$")
TIMEOUT = 60
#: Fragments in other owners' docs that need context (``await`` at top level, a ledger from an
#: earlier block) and still lack their ``<!-- not-run: … -->`` marker. Skipped by file and
#: first line of the block, with this reason; the owners add the marker and the entry goes.
AWAITING_MARKER: set[str] = set()


def snippets(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, code, runnable)`` for every ```python block of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[tuple[int, str, bool]] = []
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            prev = next((l for l in reversed(lines[:i]) if l.strip()), "")
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append((start, "\n".join(lines[start:j]) + "\n", not NOT_RUN.match(prev.strip())))
            i = j
        i += 1
    return out


def _all() -> list:
    params = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line, code, runnable in snippets(path):
            rel = path.relative_to(ROOT)
            ident = f"{rel}:{line}"
            marks: tuple = ()
            if not runnable:
                marks = (pytest.mark.skip(reason=f"{ident} is marked not-run"),)
            elif ident in AWAITING_MARKER:
                marks = (pytest.mark.skip(reason=f"{ident} is a fragment awaiting its not-run marker"),)
            params.append(pytest.param(code, id=ident, marks=marks))
    return params


@pytest.mark.parametrize("code", _all())
def test_snippet_runs(code, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX")}
    env["CODEX_BIN"] = fake_cli(tmp_path, "handshake-ok")
    env["PYTHONPATH"] = str(ROOT)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"snippet failed:\n{code}\n--- stderr ---\n{proc.stderr[-3000:]}"
    # A snippet that prints a turn's status must show a turn that worked: a printed
    # "failed" would otherwise pass silently with exit status 0.
    words = [w.strip(".,:;()[]") for w in proc.stdout.split()]
    assert "failed" not in words, f"snippet printed a failed status:\n{code}\n--- stdout ---\n{proc.stdout[-2000:]}"


def test_snippets_say_why_when_no_cli_exists(tmp_path):
    """A new user without a Codex CLI sees the reason and the hint, never a bare status (issue 22)."""
    readme = ROOT / "README.md"
    code = next(c for _, c, run in snippets(readme) if run and "codexrt.blocking.connect" in c)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEX")}
    env.update(PATH=str(tmp_path / "empty-bin"), HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    (tmp_path / "empty-bin").mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert "no Codex CLI found" in out and "Hint:" in out and "CODEX_BIN" in out, out
