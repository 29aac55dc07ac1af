"""Launch configuration: access modes, the child's environment, env_key discovery, fingerprint.

Why
---
The app-server child needs credentials, and where they come from depends on the *access mode*
(R-LC-3):

* ``managed`` — codexrt was given a provider (id, endpoint, optional headers, a credential).
  The provider is declared to the CLI with ``-c model_providers.<id>.…`` overrides
  (:func:`app_server_args`); the credential and every header value travel only in the child's
  environment, named by ``env_key`` / ``env_http_headers`` — never in argv, where any local
  user can read them in ``/proc``.
* ``cli_login`` — the user's own native auth under ``CODEX_HOME``. The one thing codexrt adds:
  GUI-launched hosts often lack the variables a login shell would export, so the variables named
  by the effective provider's ``env_key`` in ``CODEX_HOME/config.toml`` (:func:`discover_env_keys`)
  that are *missing* from the inherited environment are fetched from the login shell — only
  those names, never the whole shell environment; inherited values, even empty ones, win.
  On Windows there is no POSIX shell probe: only case aliases of the inherited variables.
* ``inactive`` — nothing is ever spawned: :func:`build_launch_env` raises
  :class:`~codexrt._sansio._errors.AccessInactive` (a ``ConfigError``, ``ACCESS_INACTIVE``) so a code path that would
  spawn fails loudly instead.

:func:`launch_fingerprint` (R-LC-1) is what the runtime compares to decide a rebuild (R-LC-2):
a sha256 over auth mode, credential hash, endpoint, provider, headers (names + value hashes),
``CODEX_HOME``, CLI source and extra args. Model and effort are not part of a
:class:`LaunchConfig` at all — they travel by RPC.

Secrets (credential, header values, values read from the shell) are never in a ``repr``, a log
line or an error message; the shell's stderr is discarded.
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from codexrt._io._cli_find import _norm_platform
from codexrt._io._cli_spawn import _run_bounded
from codexrt._io._codex_home import resolve_codex_home
from codexrt._sansio._errors import AccessInactive, ConfigError
from codexrt._sansio._redact import hold_process_secrets_while

__all__ = [
    "AccessMode",
    "LaunchConfig",
    "app_server_args",
    "build_launch_env",
    "cli_version_stamp",
    "discover_env_keys",
    "launch_fingerprint",
    "missing_env_keys",
    "prepare_launch_env",
    "provider_overrides",
    "read_login_shell_env",
]

log = logging.getLogger("codexrt.launch")

# \Z, not $: "$" also matches before a final newline ("FOO\n" was a valid name; issue 35).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PROVIDER_ID = re.compile(r"[A-Za-z0-9_-]+\Z")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_FINGERPRINT_VERSION = 2


class AccessMode(str, enum.Enum):
    """How the child authenticates (R-LC-3)."""

    MANAGED = "managed"
    CLI_LOGIN = "cli_login"
    INACTIVE = "inactive"


def _valid_env_name(name: object) -> bool:
    return isinstance(name, str) and bool(_ENV_NAME.match(name))


def _check_env_key(inst: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not _valid_env_name(value):
        raise ConfigError(f"{attribute.name} must be a variable name ([A-Za-z_][A-Za-z0-9_]*), got {value!r}")


def _headers(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


@attrs.frozen
class LaunchConfig:
    """Everything that decides how the app-server child is launched.

    ``cli_path`` is an explicit CLI override (else discovery decides); ``cli_source`` is a
    label of where the chosen CLI came from (its real path, say) — both enter the fingerprint.
    ``provider``/``endpoint``/``headers``/``credential``/``env_key``/``wire_api`` are for
    ``managed`` only. ``credential`` and ``headers`` never appear in ``repr``.
    """

    access: AccessMode = attrs.field(converter=AccessMode)
    cli_path: str | None = None
    cli_source: str | None = None
    codex_home: str | None = None
    provider: str | None = None
    endpoint: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict, converter=_headers, repr=False)
    credential: str | None = attrs.field(default=None, repr=False)
    env_key: str = attrs.field(default="CODEXRT_API_KEY", validator=_check_env_key)
    wire_api: str = "responses"
    extra_args: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    #: managed: the provider's display name (default: its id) and URL query parameters (not
    #: secret: they travel as ``-c`` overrides on the command line).
    provider_name: str | None = None
    query_params: dict[str, str] = attrs.field(factory=dict, converter=_headers)
    #: The CLI's version (or, when it is not known without running it, a stamp of the resolved
    #: file: size and mtime), so an in-place update of the CLI changes the fingerprint.
    cli_version: str | None = None
    #: Attached runtimes (``RuntimeConfig.connect``): the endpoint, where the token comes from
    #: (``file:<path>`` / ``env:<NAME>``) and the token itself (hashed, never shown).
    connect: str | None = None
    token_source: str | None = None
    token: str | None = attrs.field(default=None, repr=False)
    #: cli_login: the inherited environment's credential-looking variables (name → value),
    #: hashed into the fingerprint so a new key in the environment is a new launch.
    env_credentials: dict[str, str] = attrs.field(factory=dict, converter=_headers, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.access is AccessMode.MANAGED:
            if not self.provider or not _PROVIDER_ID.match(self.provider):
                raise ConfigError(
                    "managed access needs a provider id made of letters, digits, '_' or '-'",
                    details={"field": "provider"},
                )
            if not self.endpoint:
                raise ConfigError("managed access needs an endpoint (the provider's base_url)", details={"field": "endpoint"})
        for name, value in self.headers.items():
            if not isinstance(name, str) or not _HEADER_NAME.match(name):
                raise ConfigError(f"invalid HTTP header name {name!r}", details={"field": "headers"})
            if not isinstance(value, str) or "\n" in value or "\r" in value or "\0" in value:
                # the value itself is never shown: it may be a credential
                raise ConfigError(f"HTTP header {name} needs a one-line string value", details={"field": "headers"})
        for name, value in (("endpoint", self.endpoint), ("wire_api", self.wire_api),
                            ("provider_name", self.provider_name)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{name} must be a string", details={"field": name})
        for name, value in self.query_params.items():
            if not isinstance(name, str) or not isinstance(value, str) or not name:
                raise ConfigError("query parameters must be non-empty string names with string values",
                                  details={"field": "queryParams"})

    @property
    def header_names(self) -> list[str]:
        return sorted(self.headers)


# ----------------------------------------------------------------------------------------
# env_key discovery (R-LC-4)


def discover_env_keys(
    codex_home: str | os.PathLike[str],
    *,
    provider: str | None = None,
    all_providers: bool = False,
) -> list[str]:
    """Names of the variables the effective model provider reads its key from (R-LC-4).

    Reads ``<codex_home>/config.toml`` read-only with ``tomllib`` (so plain tables, inline
    tables, dotted and quoted keys all work, and free text such as ``instructions`` or
    ``env_key_instructions`` is never mistaken for a setting). The effective provider is
    ``provider`` if given, else the active ``profile``'s ``model_provider``, else the top-level
    ``model_provider``; a built-in provider with no ``[model_providers.<id>]`` entry has no
    ``env_key`` here. ``all_providers=True`` returns every provider's ``env_key``. Only
    string values that are valid variable names are returned. Any failure (missing file,
    bad TOML) yields ``[]`` — native auth reports the problem, not codexrt.
    """
    path = Path(codex_home) / "config.toml"
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        return []
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        log.debug("env_key discovery: cannot read %s (%s)", path, type(exc).__name__)
        return []
    providers = doc.get("model_providers")
    if not isinstance(providers, dict):
        return []
    if all_providers:
        chosen = [v for v in providers.values() if isinstance(v, dict)]
    else:
        pid = provider
        if pid is None:
            profile = doc.get("profile")
            profiles = doc.get("profiles")
            if isinstance(profile, str) and isinstance(profiles, dict):
                prof = profiles.get(profile)
                if isinstance(prof, dict) and isinstance(prof.get("model_provider"), str):
                    pid = prof["model_provider"]
        if pid is None and isinstance(doc.get("model_provider"), str):
            pid = doc["model_provider"]
        entry = providers.get(pid) if pid is not None else None
        chosen = [entry] if isinstance(entry, dict) else []
    out: list[str] = []
    for entry in chosen:
        key = entry.get("env_key")
        if _valid_env_name(key) and key not in out:
            out.append(key)
    return out


def missing_env_keys(
    config: LaunchConfig,
    base_env: Mapping[str, str],
    *,
    home: Path | None = None,
    platform: str | None = None,
) -> list[str]:
    """The ``env_key`` names (cli_login only) that the inherited environment lacks.

    A variable set to the empty string counts as present (the user said so). On Windows,
    names compare case-insensitively. ``[]`` for managed and inactive: they never use
    env_key discovery.
    """
    if config.access is not AccessMode.CLI_LOGIN:
        return []
    win = _norm_platform(platform) == "win32"
    names = discover_env_keys(resolve_codex_home(config.codex_home, base_env, home=home))
    present = {k.lower() for k in base_env} if win else set(base_env)
    return [n for n in names if (n.lower() if win else n) not in present]


_ENV_BEGIN = "__CODEXRT_ENV_BEGIN__"


async def read_login_shell_env(
    names: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    timeout: float = 3.0,
) -> dict[str, str]:
    """Values of ``names`` as the user's login shell (``$SHELL -l -c``) would export them.

    Only valid variable names are ever put in the shell script (others are dropped), only
    variables that are set are returned, the shell's stderr is discarded and nothing is
    logged about values. Bounded by ``timeout``: then the shell's process group is killed and
    reaped and ``{}`` is returned. Never on Windows. Cancelling it kills and reaps the shell.
    """
    names = [n for n in names if _valid_env_name(n)]
    if not names or _norm_platform(platform) == "win32":
        return {}
    env = os.environ if env is None else env
    shell = env.get("SHELL") or "/bin/sh"
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK):
        return {}
    # NUL-separated "NAME=value" records after a marker; names are validated, so safe to embed.
    parts = [f"printf '%s\\0' '{_ENV_BEGIN}'"]
    for n in names:
        parts.append(f"if [ \"${{{n}+x}}\" = x ]; then printf '%s=%s\\0' '{n}' \"${n}\"; fi")
    try:
        run = await _run_bounded([shell, "-l", "-c", "; ".join(parts)], env=env, timeout=timeout, new_session=True)
    except OSError:
        return {}
    if run.timed_out or run.returncode != 0:
        log.debug("login-shell env lookup gave nothing (timed out=%s)", run.timed_out)
        return {}
    records = run.stdout.split(b"\0")
    try:
        start = records.index(_ENV_BEGIN.encode()) + 1
    except ValueError:
        # Profile noise may share the first record: find the marker at its end.
        start = next((i + 1 for i, r in enumerate(records) if r.endswith(_ENV_BEGIN.encode())), len(records))
    wanted = set(names)
    out: dict[str, str] = {}
    for rec in records[start:]:
        name, sep, value = rec.decode("utf-8", "surrogateescape").partition("=")
        if sep and name in wanted and name not in out:
            out[name] = value
    return out


# ----------------------------------------------------------------------------------------
# environment and argv of the child


def _header_env_var(index: int) -> str:
    return f"CODEXRT_HTTP_HEADER_{index}"


def _inactive_error() -> ConfigError:
    return AccessInactive(
        "runtime access is inactive: codexrt starts no Codex process in this mode (R-LC-3)",
    )


def build_launch_env(
    config: LaunchConfig,
    base_env: Mapping[str, str],
    *,
    login_shell_lookup: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> dict[str, str]:
    """The environment of the app-server child for ``config`` (R-LC-3).

    * managed: ``base_env`` plus ``CODEX_HOME`` (if configured), the credential under
      ``config.env_key`` and each header value under ``CODEXRT_HTTP_HEADER_<i>`` (named by
      :func:`app_server_args`' ``env_http_headers``). No env_key discovery, no shell.
    * cli_login: ``base_env`` plus ``CODEX_HOME`` (if configured) plus, for each name from
      :func:`missing_env_keys`, the value ``login_shell_lookup(names)`` returns (a sync
      callable; see :func:`prepare_launch_env` for the async real-shell path). Inherited values,
      even empty ones, are kept. On Windows a missing name takes the value of a differently
      cased inherited variable, and the lookup is never called. A failing lookup is not fatal.
    * inactive: raises :class:`ConfigError` ``ACCESS_INACTIVE``.
    """
    if config.access is AccessMode.INACTIVE:
        raise _inactive_error()
    win = _norm_platform(platform) == "win32"
    env = dict(base_env)
    if config.codex_home:
        env["CODEX_HOME"] = str(Path(os.path.expanduser(config.codex_home)))
    if config.access is AccessMode.MANAGED:
        # The credential and header values are secrets of this process while this configuration
        # exists (R-WIRE-9; issue 35: a replaced configuration's secrets leave the registry).
        hold_process_secrets_while(config, [config.credential, *config.headers.values()])
        if config.credential is not None:
            env[config.env_key] = config.credential
        for i, name in enumerate(config.header_names):
            env[_header_env_var(i)] = config.headers[name]
        return env
    # cli_login
    missing = missing_env_keys(config, base_env, home=home, platform=platform)
    if not missing:
        return env
    if win:
        lowered: dict[str, str] = {}
        for k, v in base_env.items():
            lowered.setdefault(k.lower(), v)
        for n in missing:
            if n.lower() in lowered:
                env[n] = lowered[n.lower()]
        return env
    if login_shell_lookup is None:
        return env
    try:
        found = login_shell_lookup(list(missing))
    except Exception as exc:  # not fatal: native auth reports a missing key itself
        log.debug("login-shell env lookup failed: %s", type(exc).__name__)
        return env
    for n in missing:
        value = found.get(n) if found else None
        if isinstance(value, str):
            env[n] = value
    return env


async def prepare_launch_env(
    config: LaunchConfig,
    base_env: Mapping[str, str],
    *,
    shell_timeout: float = 3.0,
    platform: str | None = None,
    home: Path | None = None,
) -> dict[str, str]:
    """:func:`build_launch_env` with the real login shell for cli_login (one bounded lookup,
    only if some env_key is missing). Raises ``ACCESS_INACTIVE`` before spawning anything.

    The runtime must discard the result if its generation changed meanwhile (R-RT-2).
    """
    if config.access is AccessMode.INACTIVE:
        raise _inactive_error()
    missing = missing_env_keys(config, base_env, home=home, platform=platform)
    values: Mapping[str, str] = {}
    if missing and _norm_platform(platform) != "win32":
        values = await read_login_shell_env(missing, env=base_env, platform=platform, timeout=shell_timeout)
    return build_launch_env(config, base_env, login_shell_lookup=lambda _names: values, platform=platform, home=home)


def _toml_str(value: str) -> str:
    # A JSON string with ASCII escapes is a valid TOML basic string.
    return json.dumps(value, ensure_ascii=True)


def app_server_args(config: LaunchConfig) -> list[str]:
    """The CLI arguments after the executable: ``app-server``, the managed provider's ``-c``
    overrides (no secret: values go by environment), then ``config.extra_args``.

    Raises ``ACCESS_INACTIVE`` for inactive access.
    """
    if config.access is AccessMode.INACTIVE:
        raise _inactive_error()
    return ["app-server", *provider_overrides(config), *config.extra_args]


def provider_overrides(config: LaunchConfig) -> list[str]:
    """The managed provider as ``-c key=value`` overrides (``[]`` for other modes): selects
    ``model_provider=<id>`` and defines ``model_providers.<id>`` inline — name, base_url,
    env_key, wire_api, ``query_params`` and, for headers, ``env_http_headers`` naming the
    ``CODEXRT_HTTP_HEADER_<i>`` variables that carry the values (a header value is often a
    credential, so it never goes on the command line). Nothing is written to ``config.toml``."""
    if config.access is not AccessMode.MANAGED:
        return []
    assert config.provider is not None and config.endpoint is not None
    pid = config.provider
    fields = [
        f"name={_toml_str(config.provider_name or pid)}",
        f"base_url={_toml_str(config.endpoint)}",
        f"env_key={_toml_str(config.env_key)}",
        f"wire_api={_toml_str(config.wire_api)}",
    ]
    if config.headers:
        pairs = ", ".join(
            f"{_toml_str(name)} = {_toml_str(_header_env_var(i))}" for i, name in enumerate(config.header_names)
        )
        fields.append(f"env_http_headers={{ {pairs} }}")
    if config.query_params:
        qp = ", ".join(f"{_toml_str(k)} = {_toml_str(v)}" for k, v in sorted(config.query_params.items()))
        fields.append(f"query_params={{ {qp} }}")
    return ["-c", f"model_provider={_toml_str(pid)}", "-c", f"model_providers.{pid}={{ {', '.join(fields)} }}"]


# ----------------------------------------------------------------------------------------
# fingerprint (R-LC-1)


def _secret_hash(value: str | None) -> str | None:
    if value is None:
        return None
    return hashlib.sha256(b"codexrt-secret\0" + value.encode("utf-8", "surrogatepass")).hexdigest()


def launch_fingerprint(config: LaunchConfig) -> str:
    """sha256 hex over what decides the child's launch (R-LC-1): access (auth) mode,
    credential hash, endpoint, provider (id, name, env_key, wire_api, query parameters), header
    names and value hashes, ``CODEX_HOME``, the CLI's path, source and version, the ``connect``
    endpoint, token source and token hash, the inherited credential variables (hashes) and
    extra args. Secrets enter only as hashes; model, effort, sandbox and every other per-turn
    setting are not part of the launch configuration (they travel by RPC). Equal configs give
    equal fingerprints in any process."""
    payload = {
        "v": _FINGERPRINT_VERSION,
        "access": config.access.value,
        "credential": _secret_hash(config.credential),
        "endpoint": config.endpoint,
        "provider": config.provider,
        "envKey": config.env_key if config.access is AccessMode.MANAGED else None,
        "wireApi": config.wire_api if config.access is AccessMode.MANAGED else None,
        "headers": [[name, _secret_hash(config.headers[name])] for name in config.header_names],
        "codexHome": config.codex_home,
        "cliPath": config.cli_path,
        "cliSource": config.cli_source,
        "extraArgs": [_secret_hash(a) for a in config.extra_args],
        "providerName": config.provider_name,
        "queryParams": sorted(config.query_params.items()),
        "cliVersion": config.cli_version,
        "connect": config.connect,
        "tokenSource": config.token_source,
        "token": _secret_hash(config.token),
        "envCredentials": [[k, _secret_hash(v)] for k, v in sorted(config.env_credentials.items())],
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()



def cli_version_stamp(path: str | os.PathLike[str]) -> str | None:
    """What stands for the CLI's version in the fingerprint without running it (R-CLI-7 keeps
    the version probe a separate, explicit call): the ``version`` of the ``@openai/codex``
    ``package.json`` above an npm launcher, else ``file:<size>:<mtime_ns>`` of the resolved
    file — an in-place update changes either. None when the file cannot be read."""
    real = Path(os.path.realpath(os.fspath(path)))
    for parent in list(real.parents)[:3]:
        pkg = parent / "package.json"
        try:
            with open(pkg, "rb") as f:
                meta = json.loads(f.read(65536))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("name") == "@openai/codex" and isinstance(meta.get("version"), str):
            return f"npm:{meta['version']}"
    try:
        st = real.stat()
    except OSError:
        return None
    return f"file:{st.st_size}:{st.st_mtime_ns}"
