"""Split from ``tests/trio/test_edits_cli.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

from codexrt_cli._main import build_parser
from tests.trio.test_edits_live import TID


def test_commands_are_registered():
    parser = build_parser()
    args = parser.parse_args(["edits", TID, "--json", "--codex-home", "/h"])
    assert args.json and args.codex_home == "/h" and args.thread_id == TID
    args = parser.parse_args(["undo", TID, "src/a.py", "--dry-run"])
    assert args.dry_run and args.path == "src/a.py"
