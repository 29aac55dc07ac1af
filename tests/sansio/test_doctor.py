"""Split from ``tests/e2e/test_doctor.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import argparse
import io
from pathlib import Path


from codexrt_cli import _doctor
from tests.e2e.test_doctor import isolated


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    _doctor.add_parser(sub)
    return parser.parse_args(["doctor", *argv])


def test_parser_registers_doctor_with_func() -> None:
    args = parse(["--json", "--codex-bin", "/x", "--timeout", "2"])
    assert parse(["--cli", "/x"]).cli == "/x"  # the old name still works
    assert args.json and args.cli == "/x" and args.timeout == 2 and callable(args.func)


def test_nothing_found(isolated: dict[str, str]) -> None:
    out = io.StringIO()
    assert _doctor.run_doctor(env=isolated, out=out) == 1
    assert "No Codex CLI candidate found." in out.getvalue()
    assert "npm install -g @openai/codex" in out.getvalue()


def test_r_cli_7_tested_range_constants_match_ci() -> None:
    """The installed wheel carries the tested range as constants; they must match .ci."""
    from codexrt._io._discovery import NEWEST_TESTED_CLI, OLDEST_TESTED_CLI

    ci = Path(__file__).resolve().parents[2] / ".ci"
    assert (ci / "codex-version").read_text().strip() == NEWEST_TESTED_CLI
    assert (ci / "codex-version-old").read_text().strip() == OLDEST_TESTED_CLI
