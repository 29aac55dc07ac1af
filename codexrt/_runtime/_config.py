"""Runtime configuration: :class:`RuntimeConfig` (how to launch and talk to the app-server,
its startup candidates, R-CLI-1 … R-CLI-5, R-LC-1 … R-LC-3) and :func:`resolved_cli`."""

from __future__ import annotations

import os
import secrets
from typing import Any, Awaitable, Callable, Sequence

import attrs
import trio

from codexrt._sansio._errors import DEFAULT_RPC_TIMEOUT, AccessInactive, BadEndpoint, BadProvider, CodexError, ConfigError
from codexrt._sansio._redact import looks_secret_name, secret_env_values
from codexrt._sansio._settings import Settings
from codexrt._sansio._wire import ClientInfo
from codexrt._io._transport import Transport, spawn_process_transport


TransportFactory = Callable[[], Awaitable[Transport]]


@attrs.define
class RuntimeConfig:
    """How to launch and talk to the app-server.

    ``codex_bin`` is an explicit CLI path, the only one tried when given (an unusable one is a
    :class:`~codexrt.CliOverrideInvalid` naming it); else ``CODEX_BIN`` / ``CODEX_PATH`` /
    ``CODEX_CLI_PATH``, then ``PATH`` and the usual install places — see
    ``docs/discovery.md`` — and every candidate found is a startup fallback (R-CLI-5).
    ``transports`` overrides launching entirely (in-memory peers, sockets): each factory is
    one startup candidate, tried in order. ``access_mode="inactive"`` never spawns (R-LC-3).
    """

    codex_bin: str | None = None
    access_mode: str = attrs.field(default="cli_login", validator=attrs.validators.in_(
        ("cli_login", "managed", "inactive")))
    app_server_args: Sequence[str] = ("app-server",)
    codex_home: str | None = None
    env: dict[str, str] | None = attrs.field(default=None, repr=False)
    cwd: str | None = None
    channel_id: str = "default"
    client_info: ClientInfo = attrs.field(factory=ClientInfo)
    opt_out_notification_methods: Sequence[str] = ()
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT
    handshake_timeout: float = DEFAULT_RPC_TIMEOUT
    stop_budget: float = 10.0
    settings_confirm_timeout: float = DEFAULT_RPC_TIMEOUT
    idle_timeout: float | None = None
    settings: Settings = attrs.field(factory=Settings)
    transports: Sequence[TransportFactory] | None = attrs.field(default=None, repr=False)
    secrets: Sequence[str] = attrs.field(default=(), repr=False)
    # Attach to a running app-server instead of spawning one (R-WIRE-10, docs/transports.md):
    # ``connect`` is ``ws://IP:PORT`` or ``unix:///path``; the bearer token comes from
    # ``token_file`` or the environment variable named ``token_env`` (never from the URL); a
    # non-loopback ``ws://`` host needs ``allow_remote=True`` and a token. Reconnects after a
    # connection loss use ``reconnect_backoff`` (bounded exponential backoff + jitter).
    connect: str | None = None
    token_file: str | None = None
    token_env: str | None = None
    allow_remote: bool = False
    connect_timeout: float = 10.0
    reconnect_backoff: Any = attrs.field(default=None, repr=False)  # codexrt.Backoff | None
    # access_mode="managed" (R-LC-3, docs/runtime.md): the provider
    # ``{id, name?, baseUrl, envKey, wireApi?, headers?, queryParams?}`` and its API key. The key
    # reaches the child only as the variable named by envKey; the provider as ``-c`` overrides.
    provider: dict[str, Any] | None = attrs.field(default=None, repr=False)
    api_key: str | None = attrs.field(default=None, repr=False)

    def secret_values(self) -> list[str]:
        """What this runtime masks wherever it occurs (R-WIRE-9, ``docs/security.md``):
        ``secrets``, a managed provider's API key and header values, plus the values of the
        child's environment variables whose names look secret (``looks_secret_name``:
        ``OPENAI_API_KEY``, ``GH_TOKEN``, ``*SECRET``, ``*PASSWORD*``, ``*CREDENTIAL*``,
        ``*_PAT``, an ``AUTH`` word). An attached runtime's token is added when it is read."""
        env = self.env if self.env is not None else os.environ
        managed = [self.api_key] if self.api_key else []
        if isinstance(self.provider, dict) and isinstance(self.provider.get("headers"), dict):
            managed += [v for v in self.provider["headers"].values() if isinstance(v, str) and v]
        return [*self.secrets, *managed, *secret_env_values(env)]

    def launch_config(self, *, discovery: Any = None) -> Any:
        """The one :class:`~codexrt._runtime._launch.LaunchConfig` this runtime launches with (R-LC-1,
        R-LC-3): access mode, the managed provider and key, ``CODEX_HOME``, the CLI discovery
        would start first (resolved path and version stamp, filesystem only — nothing runs),
        the ``connect`` endpoint and token source, and the inherited credential variables.
        Raises :class:`ConfigError` for an invalid managed provider."""
        from codexrt._runtime._launch import LaunchConfig, cli_version_stamp

        env = dict(self.env if self.env is not None else os.environ)
        kw: dict[str, Any] = {"access": self.access_mode, "codex_home": self.codex_home or env.get("CODEX_HOME")}
        if self.access_mode == "managed":
            p = self.provider if isinstance(self.provider, dict) else {}
            if not p:
                raise BadProvider("managed access needs a provider {id, baseUrl, envKey, ...}",
                                  details={"field": "provider"})
            unknown = set(p) - {"id", "name", "baseUrl", "envKey", "wireApi", "headers", "queryParams"}
            if unknown:
                raise BadProvider(f"unknown provider fields: {', '.join(sorted(unknown))}",
                                  details={"fields": sorted(unknown)})
            kw.update(provider=p.get("id"), provider_name=p.get("name"), endpoint=p.get("baseUrl"),
                      headers=p.get("headers") or {}, query_params=p.get("queryParams") or {},
                      credential=self.api_key)
            if p.get("envKey") is not None:
                kw["env_key"] = p["envKey"]
            if p.get("wireApi") is not None:
                kw["wire_api"] = p["wireApi"]
        args = list(self.app_server_args)
        kw["extra_args"] = tuple(args[1:] if args[:1] == ["app-server"] else args)
        if self.connect is not None:
            kw["connect"] = self.connect
            kw["token_source"] = (f"file:{self.token_file}" if self.token_file is not None
                                  else f"env:{self.token_env}" if self.token_env is not None else None)
            token: str | None = None
            if self.token_file is not None:
                try:
                    with open(self.token_file, encoding="utf-8") as fh:
                        token = fh.read().strip()
                except OSError:
                    token = None
            elif self.token_env is not None:
                token = env.get(self.token_env)
            kw["token"] = token
        elif self.transports is not None:
            kw["cli_source"] = "transports:" + ",".join(str(id(t)) for t in self.transports)
        else:
            from codexrt._io._discovery import discover_cli

            kw["cli_path"] = self.codex_bin
            try:
                result = discovery if discovery is not None else discover_cli(explicit=self.codex_bin, env=env)
            except CodexError:
                result = None
            first = result.first if result is not None else None
            if first is not None:
                kw["cli_source"] = str(first.real_path)
                kw["cli_version"] = cli_version_stamp(first.real_path)
        kw["env_credentials"] = {k: v for k, v in env.items() if isinstance(v, str) and looks_secret_name(k)}
        return LaunchConfig(**kw)

    def candidate_factories(self) -> list[tuple[str, TransportFactory]]:
        """Startup candidates in order (R-CLI-1, R-CLI-5): the given transports, else every
        CLI that discovery finds on the filesystem (no process is spawned to find them).
        Raises :class:`CliUnavailable` when there is none or an explicit override is stale,
        and :class:`ConfigError` (``ACCESS_INACTIVE``) in inactive mode, which never spawns."""
        return self._startup_candidates()[0]

    def _startup_candidates(self, *, login_shell_path: Callable[[], str | None] | None = None,
                            ) -> tuple[list[tuple[str, TransportFactory]], Any]:
        """:meth:`candidate_factories` and the discovery result behind them (None for given
        transports or ``connect``), for the startup diagnostic (R-CLI-6). ``login_shell_path``
        is discovery's last step (R-CLI-1), used only when nothing else is found."""
        if self.access_mode == "inactive":
            raise AccessInactive("access mode is inactive: codexrt starts no app-server")
        if self.connect is not None:
            if self.transports is not None:
                raise BadEndpoint("give either transports or connect, not both")
            return [self._attached_candidate()], None
        if self.transports is not None:
            return [(f"transport#{i}", f) for i, f in enumerate(self.transports)], None
        from codexrt._io._discovery import discover_cli, spawn_command, unavailable_error
        from codexrt._runtime._launch import prepare_launch_env, provider_overrides

        if self.cwd is not None and not os.path.isdir(self.cwd):
            # Said before anything is spawned: a missing directory is not the CLI's fault.
            raise ConfigError(
                f"the working directory {self.cwd!r} does not exist or is not a directory: the app-server "
                "is started there (give an existing directory as cwd)",
                details={"field": "cwd", "path": self.cwd})
        base_env = dict(self.env if self.env is not None else os.environ)
        result = discover_cli(explicit=self.codex_bin, env=base_env, login_shell_path=login_shell_path)
        if self.codex_bin:
            # A CLI chosen explicitly is the only one tried: when it cannot start, the error
            # names it (CliOverrideInvalid) instead of quietly running another one. Fallback
            # stays among discovered candidates (R-CLI-5).
            result = attrs.evolve(result, candidates=[c for c in result.candidates if c.source == "explicit"])
        if not result.candidates:
            raise unavailable_error(result)
        launch = self.launch_config(discovery=result)
        # The managed provider as -c overrides right after the subcommand (no secret in them).
        args = list(self.app_server_args)
        args[1:1] = provider_overrides(launch)
        env_once: list[dict[str, str]] = []

        async def child_env() -> dict[str, str]:
            # One environment per start, prepared before the first child is created: managed
            # puts the key under envKey; cli_login adds the env_key variables found in the
            # effective CODEX_HOME/config.toml that are not inherited, from the login shell.
            if not env_once:
                env_once.append(await prepare_launch_env(launch, base_env))
            return env_once[0]

        def make(command: list[str] | str) -> TransportFactory:
            async def factory() -> Transport:
                env = await child_env()
                # R-RT-2: a preparation that finished after a reset/release cancelled this start
                # (a lookup that ignored the cancellation) never starts a child.
                await trio.lowlevel.checkpoint_if_cancelled()
                return await spawn_process_transport(command, env=env, cwd=self.cwd)

            return factory

        out = []
        for cand in result.candidates:
            # Windows .cmd/.bat shims: one command line quoted for cmd.exe (R-CLI-8).
            out.append((str(cand.path), make(spawn_command(cand, args))))
        return out, result

    def _attached_candidate(self) -> tuple[str, TransportFactory]:
        """The single candidate of an attached runtime. The endpoint, the token source and the
        remote policy are checked here, before anything connects (``ConfigError``); the token is
        re-read at each (re)connect and never appears in the label, events or errors."""
        from codexrt._io._transport_ws import (
            DEFAULT_RECONNECT_BACKOFF, Endpoint, check_endpoint_policy, endpoint_factory, read_token)

        assert self.connect is not None
        endpoint = Endpoint.parse(self.connect)
        env = dict(self.env if self.env is not None else os.environ)

        def token_source() -> Any:
            return read_token(token_file=self.token_file, token_env=self.token_env, env=env)

        check_endpoint_policy(endpoint, has_token=token_source() is not None, allow_remote=self.allow_remote)
        return endpoint.url, endpoint_factory(endpoint, token_source=token_source,
                                              backoff=self.reconnect_backoff or DEFAULT_RECONNECT_BACKOFF,
                                              timeout=self.connect_timeout)


def resolved_cli(config: RuntimeConfig, cli_path: str | None) -> tuple[list[str] | None, dict[str, str]]:
    """The argv prefix that runs the CLI the runtime launched (``cli_path`` is its startup
    label) and the environment its child got. ``(None, env)`` when the runtime was started
    from ``transports`` (no CLI to ask) or the CLI is no longer where it was."""
    env = dict(config.env if config.env is not None else os.environ)
    if config.codex_home:
        env["CODEX_HOME"] = config.codex_home
    if config.transports is not None or cli_path is None:
        return None, env
    from codexrt._io._discovery import discover_cli, launch_argv

    try:
        result = discover_cli(explicit=config.codex_bin, env=env)
    except CodexError:
        return None, env
    for cand in result.candidates:
        if str(cand.path) == cli_path:
            return launch_argv(cand, []), env
    return None, env
