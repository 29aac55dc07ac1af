"""``codexrt serve``: the NDJSON daemon on stdin/stdout (R-D-1 … R-D-4).

The loop itself is :mod:`codexrt._serve._daemon`; this module turns command-line options into a
:class:`~codexrt._serve._daemon.DaemonConfig` and wires the process's standard streams.

stdio, and why it is done this way:

* stdout belongs to the protocol. At start the real fd 1 is duplicated for the daemon's own
  use and fd 1 is then pointed at stderr, so a stray ``print`` from any library — or a child
  that inherits fd 1 — can never corrupt the protocol stream. stdin is duplicated the same way
  and fd 0 pointed at ``/dev/null``.
* A pipe or socket that is not shared with another standard stream becomes a
  ``trio.lowlevel.FdStream`` (non-blocking, cancellable). Anything else — a regular file
  (``serve < commands.ndjson > out.ndjson``), a TTY, or a pipe shared with stderr (``2>&1``) —
  is read and written from a worker thread instead, because epoll cannot watch regular files
  and non-blocking mode would leak onto the shared stream (trio issue #174).
* Each protocol line is one ``send_all`` of the whole encoded line; the streams are
  unbuffered, so every line is flushed as it is written.
* stdin EOF finishes the work already accepted (at most ``--drain-timeout`` seconds, default
  300), then drains and exits 0: ``printf '<command>' | codexrt serve`` runs the command to its
  reply. SIGTERM and SIGINT drain at once: stop reading, abort running operations within the
  stop budget, cancel queued ones, reply to every pending command, reap every child, exit 0
  (also when the signal arrives during an EOF drain).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import attrs
import trio

from codexrt._serve._daemon import DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CHANNELS, DaemonConfig, serve_daemon
from codexrt import ConfigError, RuntimeConfig

__all__ = ["add_parser", "add_runtime_options", "add_loopback_and_log_options", "runtime_config_from_args",
           "check_token", "loopback_runtime", "main_on_stdio", "missing_cwd", "run_on_stdio", "run_serve", "open_stdio"]

log = logging.getLogger("codexrt.serve")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve",
        help="run the NDJSON daemon on stdin/stdout (for IDE plugins and other hosts)",
        description=(
            "Read one JSON command per line on stdin, write replies and events as JSON lines on "
            "stdout (protocol lines only; logs go to stderr). One app-server child per channelId, "
            "started on first use. EOF on stdin finishes the accepted commands (at most --drain-timeout "
            "seconds), then exits 0; SIGTERM/SIGINT abort the running work, reply to every pending command, "
            "reap every child and exit 0. The wire's JSON Schema ships in the package "
            "(codexrt/_serve/daemon-protocol.schema.json); docs/daemon-protocol.md in the source explains it."
        ),
    )
    add_runtime_options(p)
    p.add_argument("--idle-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="retire a channel's child after this long with no session and no work "
                        "(default 600; 0 = never)")
    p.add_argument("--auto-title", action="store_true",
                   help="give every thread a channel creates an automatic title, generated on a separate "
                        "helper child when the thread starts and saved with thread/name/set; a manual name "
                        "wins; outcomes are threadTitle events (default off)")
    p.add_argument("--drain-timeout", type=float, default=DEFAULT_DRAIN_TIMEOUT, metavar="SECONDS",
                   help="on stdin EOF, how long the commands already accepted may take to finish before what "
                        f"is left is aborted as on SIGTERM (default {DEFAULT_DRAIN_TIMEOUT:g}; 0 = abort at once)")
    p.add_argument("--max-channels", type=int, default=DEFAULT_MAX_CHANNELS, metavar="N",
                   help="most channels (each may hold one app-server child); past it an idle channel without a "
                        f"child is forgotten, else TOO_MANY_CHANNELS (default {DEFAULT_MAX_CHANNELS})")
    p.add_argument("--max-line-bytes", type=int, default=16 * 1024 * 1024, metavar="N",
                   help="longest accepted command line; longer ones get a LINE_TOO_LONG reply (default 16 MiB)")
    add_loopback_and_log_options(p, "channel")
    p.set_defaults(func=_main)
    return p


def add_loopback_and_log_options(p: argparse.ArgumentParser, unit: str) -> None:
    """``--loopback`` (every ``unit``'s app-server on the bundled loopback model) and
    ``--log-level`` after the sub-command."""
    p.add_argument("--loopback", action="store_true",
                   help=f"try it offline: every {unit}'s app-server talks to the bundled loopback model "
                        "on 127.0.0.1 with a throw-away CODEX_HOME (no account, no internet)")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default=argparse.SUPPRESS,
                   help="log level on stderr (same as `codexrt --log-level`)")


def add_runtime_options(p: argparse.ArgumentParser) -> None:
    """The options that say how the app-server children start and are talked to (shared by
    ``serve`` and ``acp``)."""
    p.add_argument("--codex-bin", metavar="PATH",
                   help="the Codex CLI (or any executable speaking the app-server protocol); "
                        "default: $CODEX_BIN, else `codex` on PATH")
    p.add_argument("--app-server-arg", metavar="ARG", action="append", dest="app_server_args",
                   help="argument passed to the CLI instead of the default `app-server` (repeatable)")
    p.add_argument("--codex-home", metavar="DIR", help="CODEX_HOME of the children (default: inherited)")
    p.add_argument("--cwd", metavar="DIR", help="working directory of the children (default: ours)")
    p.add_argument("--access-mode", choices=["cli_login", "managed", "inactive"], default="cli_login",
                   help="cli_login (default): the CLI's own auth under CODEX_HOME; managed: the provider "
                        "given by the --provider-* flags and the key from --api-key-env/--api-key-file; "
                        "inactive: never spawn a process, refuse commands that need one")
    p.add_argument("--provider-id", metavar="ID", help="managed: the model provider's id")
    p.add_argument("--provider-name", metavar="NAME", help="managed: its display name (default: the id)")
    p.add_argument("--base-url", metavar="URL", help="managed: the provider's base URL")
    p.add_argument("--env-key", metavar="NAME", default="CODEXRT_API_KEY",
                   help="managed: the variable the child reads the key from (default: CODEXRT_API_KEY)")
    p.add_argument("--wire-api", metavar="API", help="managed: the provider's wire API (default: responses)")
    p.add_argument("--provider-header", metavar="NAME=ENVVAR", action="append", default=[],
                   help="managed: send header NAME with the value of our environment variable ENVVAR "
                        "(repeatable; values never on a command line)")
    p.add_argument("--query-param", metavar="KEY=VALUE", action="append", default=[],
                   help="managed: URL query parameter (repeatable; not secret)")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="managed: our environment variable holding the API key (never printed)")
    p.add_argument("--api-key-file", metavar="PATH", help="managed: file holding the API key (never printed)")
    p.add_argument("--connect", metavar="ENDPOINT",
                   help="attach to a running app-server (ws://127.0.0.1:PORT or unix:///path) instead of "
                        "spawning one; codexrt never stops a server it did not start")
    p.add_argument("--token-file", metavar="PATH",
                   help="file holding the bearer token for --connect (never printed or logged)")
    p.add_argument("--token-env", metavar="NAME",
                   help="environment variable holding the bearer token for --connect")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --connect to a non-loopback ws:// host (a token is then required)")
    p.add_argument("--rpc-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="budget of each short JSON-RPC request (default 30)")
    p.add_argument("--handshake-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="budget of the initialize handshake (default 30)")
    p.add_argument("--stop-budget", type=float, default=10.0, metavar="SECONDS",
                   help="time an abort may take before the child is killed (default 10)")


def runtime_config_from_args(args: argparse.Namespace) -> RuntimeConfig:
    """The :class:`RuntimeConfig` of :func:`add_runtime_options`' options (``--access-mode
    inactive`` is left to the command). Raises :class:`ConfigError`."""
    runtime = RuntimeConfig(
        codex_bin=args.codex_bin,
        app_server_args=tuple(args.app_server_args or ("app-server",)),
        codex_home=args.codex_home,
        cwd=args.cwd,
        rpc_timeout=args.rpc_timeout,
        handshake_timeout=args.handshake_timeout,
        stop_budget=args.stop_budget,
        connect=getattr(args, "connect", None),
        token_file=getattr(args, "token_file", None),
        token_env=getattr(args, "token_env", None),
        allow_remote=getattr(args, "allow_remote", False),
        access_mode="managed" if args.access_mode == "managed" else "cli_login",
        **_managed_from_args(args),
    )
    if runtime.access_mode == "managed":
        runtime.launch_config()  # a bad provider is a configuration error now, not at the first turn
    return runtime


def config_from_args(args: argparse.Namespace) -> DaemonConfig:
    runtime = runtime_config_from_args(args)
    return DaemonConfig(runtime=runtime, inactive=args.access_mode == "inactive",
                        idle_timeout=args.idle_timeout if args.idle_timeout > 0 else None,
                        max_line=args.max_line_bytes, auto_title=getattr(args, "auto_title", False),
                        drain_timeout=max(0.0, getattr(args, "drain_timeout", DEFAULT_DRAIN_TIMEOUT)),
                        max_channels=max(1, getattr(args, "max_channels", DEFAULT_MAX_CHANNELS)))


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"{flag} takes NAME=VALUE, got {name or item!r}")
        out[name] = value
    return out


def _managed_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``provider`` and ``api_key`` for ``--access-mode managed`` (the key and header values
    are read from our environment or a file: they are never on serve's own command line)."""
    if getattr(args, "access_mode", None) != "managed":
        return {}
    if not args.provider_id or not args.base_url:
        raise ConfigError("--access-mode managed needs --provider-id and --base-url")
    headers = {}
    for name, var in _pairs(args.provider_header, "--provider-header").items():
        if var not in os.environ:
            raise ConfigError(f"--provider-header {name}: environment variable {var} is not set")
        headers[name] = os.environ[var]
    key: str | None = None
    if args.api_key_env and args.api_key_file:
        raise ConfigError("give the API key either with --api-key-env or with --api-key-file")
    if args.api_key_env:
        key = os.environ.get(args.api_key_env) or None
        if key is None:
            raise ConfigError(f"environment variable {args.api_key_env} (the API key) is not set or empty")
    elif args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as fh:
                key = fh.read().strip() or None
        except OSError as exc:
            raise ConfigError(f"cannot read API key file {args.api_key_file!r}: {exc.strerror or exc}") from None
        if key is None:
            raise ConfigError(f"API key file {args.api_key_file!r} is empty")
    provider: dict[str, Any] = {"id": args.provider_id, "baseUrl": args.base_url, "envKey": args.env_key}
    if args.provider_name:
        provider["name"] = args.provider_name
    if args.wire_api:
        provider["wireApi"] = args.wire_api
    if headers:
        provider["headers"] = headers
    if args.query_param:
        provider["queryParams"] = _pairs(args.query_param, "--query-param")
    return {"provider": provider, "api_key": key}


def _main(args: argparse.Namespace) -> int:
    return main_on_stdio(args, "serve", config_from_args, run_serve,
                         loopback_refused=lambda c: c.inactive, refused_modes="--connect, --access-mode managed or inactive")


def main_on_stdio(args: argparse.Namespace, name: str, make_config: Callable[[argparse.Namespace], Any],
                  run: Callable[[Any], Awaitable[int]], *, loopback_refused: Callable[[Any], bool] = lambda c: False,
                  refused_modes: str = "--connect or --access-mode managed") -> int:
    """The shared body of ``codexrt serve`` and ``codexrt acp``: the log level, the config (a
    :class:`ConfigError` is ``codexrt NAME: why`` on stderr and exit 2), ``--loopback``'s checks
    and its throw-away model, then ``trio.run(run, config)``. ``make_config`` returns a config
    with a ``runtime`` (:class:`RuntimeConfig`); ``loopback_refused`` names what else
    ``--loopback`` cannot be combined with."""
    if getattr(args, "log_level", None):
        logging.getLogger().setLevel(getattr(logging, args.log_level.upper()))
    try:
        config = make_config(args)
        check_token(config.runtime)
    except ConfigError as exc:
        print(f"codexrt {name}: {exc.message}", file=sys.stderr)
        return 2
    if getattr(args, "loopback", False):
        if loopback_refused(config) or config.runtime.connect or config.runtime.access_mode == "managed":
            print(f"codexrt {name}: --loopback cannot be combined with {refused_modes}", file=sys.stderr)
            return 2
        if missing_cwd(args, name):
            return 2
        with loopback_runtime(args, config.runtime, name) as runtime:
            return trio.run(run, attrs.evolve(config, runtime=runtime))
    return trio.run(run, config)


class _ThreadFdStream(trio.abc.Stream):
    """Blocking fd I/O in worker threads, for fds epoll cannot watch or must not make
    non-blocking. Reads are abandoned on cancel (the thread finishes on its own); a write is
    not (its thread may still write the rest), so ``LineWriter.give_up_when_stuck`` leaves
    this stream alone."""

    writes_in_thread = True

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("stream closed")
        return await trio.to_thread.run_sync(os.read, self.fd, max_bytes or 65536, abandon_on_cancel=True)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError("stream closed")

        def write_all() -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]

        try:
            await trio.to_thread.run_sync(write_all)
        except BrokenPipeError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.fd)
        await trio.lowlevel.checkpoint()


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _stream_for(fd: int, others: list[int]) -> trio.abc.Stream:
    st = os.fstat(fd)
    shared = False
    for other in others:
        try:
            shared = shared or _same_file(st, os.fstat(other))
        except OSError:
            pass
    if (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)) and not shared:
        return trio.lowlevel.FdStream(fd)
    return _ThreadFdStream(fd)


def open_stdio() -> tuple[trio.abc.Stream, trio.abc.Stream]:
    """The protocol's (stdin, stdout) streams; see the module doc. Repoints fds 0 and 1."""
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    stdin = _stream_for(in_fd, [1, 2])
    stdout = _stream_for(out_fd, [0, 2])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)  # fd 1 now goes to stderr: nothing else can write protocol lines
    sys.stdout = sys.stderr
    return stdin, stdout


async def run_serve(config: DaemonConfig) -> int:
    return await run_on_stdio(serve_daemon, config, lambda daemon: daemon.abort(),
                              "aborting the running work and draining")


def check_token(runtime: RuntimeConfig) -> None:
    """A bad token (unreadable, empty, a control character inside) is a configuration error:
    said once on stderr, exit 2, the value never shown (docs/security.md). Raises
    :class:`ConfigError`."""
    if runtime.token_file is not None or runtime.token_env is not None:
        from codexrt._serve._cli_support import read_token

        read_token(token_file=runtime.token_file, token_env=runtime.token_env)


def missing_cwd(args: argparse.Namespace, command: str) -> bool:
    """``--cwd`` names no directory: say so on stderr (the caller exits 2). Never created: a typo
    leaves no directory behind (``--loopback`` would otherwise make it)."""
    if args.cwd and not os.path.isdir(args.cwd):
        print(f"codexrt {command}: --cwd {args.cwd!r} does not exist or is not a directory", file=sys.stderr)
        return True
    return False


@contextlib.contextmanager
def loopback_runtime(args: argparse.Namespace, runtime: RuntimeConfig, command: str) -> Iterator[RuntimeConfig]:
    """``--loopback``: ``runtime`` pointed at the bundled loopback model with a throw-away
    ``CODEX_HOME`` (both gone when the block ends)."""
    from codexrt_cli._demo import loopback_environment

    with loopback_environment(codex_bin=args.codex_bin, cwd=args.cwd) as lb:
        print(f"codexrt {command}: loopback model at {lb.model.base_url}, throw-away CODEX_HOME {lb.codex_home}",
              file=sys.stderr)
        yield attrs.evolve(runtime, codex_bin=lb.codex_bin, codex_home=str(lb.codex_home), env=lb.config.env,
                           cwd=lb.config.cwd)


async def run_on_stdio(runner: Callable[..., Awaitable[None]], config: Any, on_signal: Callable[[Any], None],
                       doing: str) -> int:
    """Run a stdio service (``runner(stdin, stdout, config, task_status=...)`` reporting an object
    with a ``finished`` event) on the process's standard streams (:func:`open_stdio`) until it
    finishes; SIGTERM/SIGINT call ``on_signal(service)``."""
    # The signal receiver is installed before anything else, so a SIGINT/SIGTERM that comes
    # early still shuts down instead of killing the process (and its children) mid-step.
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        stdin, stdout = open_stdio()
        async with stdin, stdout:
            async with trio.open_nursery() as nursery:
                service = await nursery.start(runner, stdin, stdout, config)
                signal_scope = trio.CancelScope()

                async def watch_signals() -> None:
                    with signal_scope:
                        async for signum in signals:
                            log.info("signal %s: %s", signal.Signals(signum).name, doing)
                            on_signal(service)

                nursery.start_soon(watch_signals)
                await service.finished.wait()
                signal_scope.cancel()
    return 0
