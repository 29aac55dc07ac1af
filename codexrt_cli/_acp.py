"""``codexrt acp``: the Agent Client Protocol agent on stdin/stdout (``docs/acp.md``).

The agent itself is :mod:`codexrt._acp._agent`; this module turns command-line options into an
:class:`~codexrt._acp._agent.AcpConfig` and wires the process's standard streams the way
``codexrt serve`` does (:func:`codexrt_cli._serve.open_stdio`: stdout carries protocol lines
only, a stray ``print`` goes to stderr). stdin EOF — how an editor ends its agent — cancels
what runs, reaps every child and exits 0; so do SIGTERM and SIGINT.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from codexrt import ConfigError
from codexrt._acp._agent import AcpConfig, run_acp_agent
from codexrt_cli._serve import (add_loopback_and_log_options, add_runtime_options, main_on_stdio, run_on_stdio,
                                runtime_config_from_args)

__all__ = ["add_parser", "run_acp"]

log = logging.getLogger("codexrt.acp")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "acp",
        help="run an Agent Client Protocol agent on stdin/stdout (Zed, JetBrains IDEs, Neovim, Emacs)",
        description=(
            "Speak the Agent Client Protocol (ACP v1: JSON-RPC 2.0, one message per line) on stdin/stdout "
            "and run Codex through codexrt's supervised runtime: one app-server child per active session, "
            "every command and edit asks the editor (approval mode 'ask' by default), stdin EOF cancels "
            "what runs, reaps every child and exits. stdout carries protocol lines only; logs go to "
            "stderr. docs/acp.md in the source explains how to register it in an editor."
        ),
    )
    add_runtime_options(p)
    p.add_argument("--idle-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="retire a session's app-server after this long with no prompt and no open question "
                        "(default 600; 0 = never); the next prompt resumes the thread")
    p.add_argument("--max-line-bytes", type=int, default=16 * 1024 * 1024, metavar="N",
                   help="longest accepted message line (default 16 MiB)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="where the session index lives (default: $CODEXRT_STATE_DIR, else "
                        "$XDG_STATE_HOME/codexrt, else ~/.local/state/codexrt)")
    add_loopback_and_log_options(p, "session")
    p.set_defaults(func=_main)
    return p


def config_from_args(args: argparse.Namespace) -> AcpConfig:
    if args.access_mode == "inactive":
        raise ConfigError("--access-mode inactive starts no Codex process; an ACP agent needs one")
    import os

    index_path = os.path.join(args.state_dir, "acp", "sessions.json") if args.state_dir else None
    return AcpConfig(runtime=runtime_config_from_args(args),
                     idle_timeout=args.idle_timeout if args.idle_timeout > 0 else None,
                     max_line=args.max_line_bytes, index_path=index_path)


def _main(args: argparse.Namespace) -> int:
    return main_on_stdio(args, "acp", config_from_args, run_acp)


async def run_acp(config: AcpConfig) -> int:
    return await run_on_stdio(run_acp_agent, config, lambda agent: agent.stop_reading(),
                              "cancelling what runs and exiting")
