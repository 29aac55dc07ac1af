"""``codexrt diff``: the workspace diff of a directory, read from Git (R-DIFF-1).

What ``/diff`` shows in a chat host, on the command line: staged, unstaged and untracked
changes of the repository that holds ``--cwd``, with the same size and time limits as the
library (``codexrt._io._workspace.read_workspace_diff``). No Codex process and no model turn are
involved, so it works in any access mode.

Output: the three sections as a patch (``--json`` prints the whole result object instead, the
same one ``codex.readWorkspaceDiff`` returns). Exit status 0 for ``ok``, 3 when the result is
incomplete (``truncated`` / ``timeout``), 4 for a directory outside Git (``notGit``), 1 for
``gitMissing``/``error``; 2 for usage errors (argparse).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

import trio

from codexrt import DiffStatus, WorkspaceDiff, read_workspace_diff
from codexrt._serve._cli_support import DIFF_DEFAULT_MAX_BYTES, DIFF_DEFAULT_TIMEOUT

__all__ = ["add_parser", "render", "exit_status"]

_EXIT = {DiffStatus.OK: 0, DiffStatus.TRUNCATED: 3, DiffStatus.TIMEOUT: 3, DiffStatus.NOT_GIT: 4,
         DiffStatus.GIT_MISSING: 1, DiffStatus.ERROR: 1}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "diff",
        help="show the staged, unstaged and untracked changes of a directory (Git, no model turn)",
        description="Read the staged, unstaged and untracked changes of --cwd from Git, within size and time "
                    "limits. No program named by the repository (filters, diff drivers, hooks) is run.",
    )
    p.add_argument("--cwd", default=None, metavar="DIR", help="directory to read (default: the current one)")
    p.add_argument("--session-id", default="", metavar="ID", help="session the result is tied to (echoed)")
    p.add_argument("--max-bytes", type=int, default=DIFF_DEFAULT_MAX_BYTES, metavar="N",
                   help=f"stdout budget for all of Git's output (default {DIFF_DEFAULT_MAX_BYTES})")
    p.add_argument("--timeout", type=float, default=DIFF_DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"time budget of the whole read (default {DIFF_DEFAULT_TIMEOUT:g})")
    p.add_argument("--json", action="store_true", help="print the result object as JSON")
    p.set_defaults(func=_main)
    return p


def exit_status(diff: WorkspaceDiff) -> int:
    return _EXIT.get(diff.status, 1)


def render(diff: WorkspaceDiff, out: TextIO) -> None:
    """The human form: a status line on stderr-worthy cases, then the sections."""
    for title, body in (("staged", diff.staged), ("unstaged", diff.unstaged), ("untracked", diff.untracked)):
        if body:
            out.write(f"# --- {title} ---\n{body}")
            if not body.endswith("\n"):
                out.write("\n")


def _main(args: argparse.Namespace) -> int:
    cwd = args.cwd or os.getcwd()
    if args.max_bytes < 1 or args.timeout <= 0:
        print("codexrt diff: --max-bytes and --timeout must be positive", file=sys.stderr)
        return 2
    diff = trio.run(lambda: read_workspace_diff(cwd, session_id=args.session_id, max_bytes=args.max_bytes,
                                                timeout=args.timeout))
    if args.json:
        sys.stdout.write(json.dumps(diff.to_dict(), ensure_ascii=False) + "\n")
        return exit_status(diff)
    render(diff, sys.stdout)
    if diff.status is not DiffStatus.OK:
        note = f"codexrt diff: {diff.status.value}"
        if diff.message:
            note += f": {diff.message}"
        print(note, file=sys.stderr)
    if diff.omitted_files:
        print(f"codexrt diff: {len(diff.omitted_files)} untracked file(s) left out (size limit)", file=sys.stderr)
    if diff.is_empty and diff.status is DiffStatus.OK:
        print("codexrt diff: no changes", file=sys.stderr)
    return exit_status(diff)
