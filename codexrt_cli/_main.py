"""``codexrt`` entry point: argparse with one sub-command per module.

Each sub-command lives in its own module exposing ``add_parser(subparsers)`` which registers
a parser whose ``func`` default takes the parsed ``args`` and returns an exit status. Add a
module to :data:`COMMAND_MODULES` to add a command. Logs go to stderr; stdout belongs to the
command's own output (for ``serve``: protocol lines only).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

import codexrt

#: Sub-command modules, in the order ``--help`` lists them.
COMMAND_MODULES: list[str] = [
    "codexrt_cli._serve",
    "codexrt_cli._doctor",
    "codexrt_cli._diff",
    "codexrt_cli._run",
    "codexrt_cli._demo",
    "codexrt_cli._edits_cli",
    "codexrt_cli._threads",
    "codexrt_cli._show",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codexrt",
        description="Run and supervise the OpenAI Codex CLI's `codex app-server` from Python.",
    )
    parser.add_argument("--version", action="version", version=f"codexrt {codexrt.__version__}")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="log level of the messages written to stderr (default: warning)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a command still being written must not break the rest
            if exc.name != name:
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return int(func(args) or 0)
