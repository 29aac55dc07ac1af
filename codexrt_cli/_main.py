"""``codexrt`` entry point: argparse with one sub-command per module.

Each sub-command lives in its own module exposing ``add_parser(subparsers)`` which registers
a parser whose ``func`` default takes the parsed ``args`` and returns an exit status. Add the
command to :data:`COMMANDS` to add it. Logs go to stderr; stdout belongs to the
command's own output (for ``serve``: protocol lines only).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback

#: Sub-commands, in the order ``--help`` lists them: name → (module, one-line help). Only the
#: module of the command being run is imported, so ``--help`` and ``--version`` stay quick; a
#: test checks each module registers its command with the same help line.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("codexrt_cli._serve", "run the NDJSON daemon on stdin/stdout (for IDE plugins and other hosts)"),
    "acp": ("codexrt_cli._acp",
            "run an Agent Client Protocol agent on stdin/stdout (Zed, JetBrains IDEs, Neovim, Emacs)"),
    "doctor": ("codexrt_cli._doctor", "show the Codex CLI candidates codexrt finds, their versions, and which one it uses"),
    "diff": ("codexrt_cli._diff", "show the staged, unstaged and untracked changes of a directory (Git, no model turn)"),
    "run": ("codexrt_cli._run", "run one turn: stream the answer, ask for approvals, exit with the turn's status"),
    "demo": ("codexrt_cli._demo",
             "two real turns against the bundled loopback model: streaming and one approval (no account)"),
    "edits": ("codexrt_cli._edits_cli", "list the file changes Codex made in a thread, with +/- and review state"),
    "undo": ("codexrt_cli._edits_cli",
             "take back one file's changes from a thread (checks for your later edits first)"),
    "threads": ("codexrt_cli._threads", "list Codex threads with their message counts"),
    "show": ("codexrt_cli._show", "print one thread's transcript"),
}

#: Kept for callers that list the command modules.
COMMAND_MODULES: list[str] = list(dict.fromkeys(module for module, _ in COMMANDS.values()))

_LOG_LEVELS = ["debug", "info", "warning", "error"]


def _version() -> str:
    """codexrt's version, read from ``codexrt/_version.py`` without importing the library
    (``--version`` must be quick; ``importlib.metadata`` alone costs more than the rest)."""
    import importlib.util
    import os
    import re

    spec = importlib.util.find_spec("codexrt")  # finds the package without running it
    if spec is not None and spec.origin:
        try:
            with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), encoding="utf-8") as f:
                m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
            if m:
                return m.group(1)
        except OSError:
            pass
    from codexrt._version import __version__

    return __version__


def _command_in(argv: list[str]) -> str | None:
    """The sub-command named in ``argv`` (the first word that is not an option or the value
    of ``--log-level``), or None."""
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--log-level":
            skip = True
            continue
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser. Only ``command``'s module is imported (None: all of them, for tools that
    need every sub-parser); the other commands get a placeholder with their help line (the
    order of ``--help`` is kept: with no command, no module is imported at all)."""
    parser = argparse.ArgumentParser(
        prog="codexrt",
        description="Run and supervise the OpenAI Codex CLI's `codex app-server` from Python.",
    )
    parser.add_argument("--version", action="version", version=f"codexrt {_version()}")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=_LOG_LEVELS,
        help="log level of the messages written to stderr (default: warning)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = list(COMMANDS) if command is None else [command] if command in COMMANDS else []
    for module_name in dict.fromkeys(COMMANDS[name][0] for name in wanted):
        importlib.import_module(module_name).add_parser(sub)
    for name, (_module, help_line) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=help_line, add_help=False)
    for name, p in sub.choices.items():
        if (command is None or name == command) and "--log-level" not in p._option_string_actions:
            # Global flags work after the sub-command too (``codexrt run --log-level debug …``).
            p.add_argument("--log-level", default=argparse.SUPPRESS, choices=_LOG_LEVELS,
                           help="log level of the messages written to stderr (default: warning)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(argv)
    parser = build_parser(command if command in COMMANDS else "")  # "": no module at all
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
    # Every record on stderr is redacted, a library's or a traceback included (docs/security.md).
    from codexrt._serve._cli_support import install_log_filter, process_redactor

    for handler in logging.getLogger().handlers:
        install_log_filter(handler)
    try:
        status = int(func(args) or 0)
        sys.stdout.flush()  # a closed pipe surfaces here, not in an "Exception ignored" at exit
        return status
    except Exception as exc:
        if _only_broken_pipe(exc):
            return _quiet_broken_pipe()
        # A bug: the traceback still goes to stderr (exit 1, like Python's own), but redacted.
        sys.stderr.write(process_redactor()(traceback.format_exc()))
        return 1


def _only_broken_pipe(exc: BaseException) -> bool:
    """stdout's reader went away (``codexrt threads --json | head -1``), possibly wrapped in a
    Trio exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_broken_pipe(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def _quiet_broken_pipe() -> int:
    """End as a pipeline's producer does when its reader left: no traceback, no second error
    when Python flushes stdout at exit, status 128 + SIGPIPE."""
    import os
    import signal

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE
