"""``codexrt doctor``: which Codex CLI would codexrt use, and why (R-CLI-1…7).

Discovery itself is filesystem-only; the doctor then makes the one explicit, bounded
``--version`` probe per candidate (R-CLI-7) — that is the point of asking for a report. The
chosen CLI is the first candidate, in discovery order, whose probe succeeds: the same order the
runtime tries them in (R-CLI-5). Exit status 0 when one is usable, 1 otherwise (2 for usage
errors, from argparse). ``--json`` prints one JSON object instead of the table.

Nothing secret is printed: discovery and the probe read no config or auth, the login shell is
only asked for its ``PATH`` (``--login-shell``) and its stderr is discarded, and everything the
doctor prints (table and ``--json``) is redacted — a CLI's ``--version`` output included — with
the values of the environment's secret-looking variables registered first (docs/security.md).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import trio

from codexrt import Candidate, CliUnavailable, DiscoveryResult, discover_cli
from codexrt._serve._cli_support import (
    NEWEST_TESTED_CLI,
    OLDEST_TESTED_CLI,
    OVERRIDE_ENV_VARS,
    Attempt,
    ProbeResult,
    format_unavailable,
    probe_version_detailed,
    process_redactor,
    read_login_shell_path,
    register_process_secrets,
    secret_env_values,
    tested_range_warning,
)

__all__ = ["add_parser", "run_doctor", "run_doctor_connect"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "doctor",
        help="show the Codex CLI candidates codexrt finds, their versions, and which one it uses",
        description=(
            "List every Codex CLI candidate (explicit path, CODEX_BIN/CODEX_PATH/CODEX_CLI_PATH, PATH, "
            "home and common install dirs), probe each with `--version`, and show which one codexrt "
            "would use. Exit status 1 when none is usable."
        ),
    )
    p.add_argument("--codex-bin", "--cli", dest="cli", metavar="PATH",
                   help="explicit CLI path to check first (like CODEX_BIN; --cli is the old name)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument(
        "--timeout", type=float, default=5.0, metavar="SECONDS", help="budget of each `--version` probe (default 5)"
    )
    p.add_argument(
        "--login-shell",
        action="store_true",
        help="if nothing else is found, also search the PATH of your login shell (runs `$SHELL -l` once)",
    )
    p.add_argument("--connect", metavar="ENDPOINT",
                   help="check a running app-server instead (ws://127.0.0.1:PORT or unix:///path): "
                        "/readyz, WebSocket upgrade, initialize")
    p.add_argument("--token-file", metavar="PATH", help="bearer token file for --connect (never printed)")
    p.add_argument("--token-env", metavar="NAME", help="environment variable holding the token for --connect")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback ws:// --connect endpoint")
    p.set_defaults(func=_main)
    return p


def _main(args: argparse.Namespace) -> int:
    if getattr(args, "connect", None):
        return run_doctor_connect(args.connect, token_file=args.token_file, token_env=args.token_env,
                                  allow_remote=args.allow_remote, as_json=args.json, timeout=args.timeout,
                                  out=sys.stdout)
    return run_doctor(
        explicit=args.cli, as_json=args.json, timeout=args.timeout, login_shell=args.login_shell, out=sys.stdout
    )


async def _probe_all(cands: list[Candidate], timeout: float) -> list[ProbeResult]:
    results: list[ProbeResult | None] = [None] * len(cands)

    async def one(i: int, c: Candidate) -> None:
        results[i] = await probe_version_detailed(c, timeout=timeout)

    limiter = trio.CapacityLimiter(4)

    async def limited(i: int, c: Candidate) -> None:
        async with limiter:
            await one(i, c)

    async with trio.open_nursery() as nursery:
        for i, c in enumerate(cands):
            nursery.start_soon(limited, i, c)
    return [r for r in results if r is not None]


async def _shell_path(timeout: float) -> str | None:
    return await read_login_shell_path(timeout=timeout)


def run_doctor(
    *,
    explicit: str | None = None,
    as_json: bool = False,
    timeout: float = 5.0,
    login_shell: bool = False,
    env: dict[str, str] | None = None,
    out: TextIO | None = None,
) -> int:
    """Discover, probe, report. Returns the exit status (0 usable CLI found, 1 none)."""
    out = sys.stdout if out is None else out
    env = dict(os.environ) if env is None else env
    register_process_secrets(secret_env_values(env))
    override_error: CliUnavailable | None = None
    search_explicit, search_env = explicit, env
    try:
        result = discover_cli(explicit=explicit, env=env)
    except CliUnavailable as exc:
        # A stale override is an error (R-CLI-3); still show what else exists, for context.
        override_error = exc
        search_explicit = None
        search_env = {k: v for k, v in env.items() if k.upper() not in OVERRIDE_ENV_VARS}
        result = discover_cli(env=search_env)
    if login_shell and not result.candidates:
        shell_path = trio.run(_shell_path, 3.0)
        if shell_path:
            result = discover_cli(explicit=search_explicit, env=search_env, login_shell_path=lambda: shell_path)
    probes = trio.run(_probe_all, result.candidates, timeout) if result.candidates else []
    chosen = None
    if override_error is None:
        chosen = next((i for i, p in enumerate(probes) if p.version is not None), None)
    report = _report(result, probes, chosen, override_error)
    _add_range_and_login(report, env)
    _emit(report, as_json, _print_table, out)
    return 0 if chosen is not None else 1


def _emit(report: dict[str, Any], as_json: bool, table: Any, out: TextIO) -> None:
    """Write the report (JSON or ``table(report, buffer)``), redacted as a whole."""
    redact = process_redactor()
    if as_json:
        out.write(json.dumps(redact.redact_obj(report), indent=2) + "\n")
        return
    buf = io.StringIO()
    table(report, buf)
    out.write(redact(buf.getvalue()))


def run_doctor_connect(endpoint: str, *, token_file: str | None = None, token_env: str | None = None,
                       allow_remote: bool = False, as_json: bool = False, timeout: float = 5.0,
                       env: dict[str, str] | None = None, out: TextIO | None = None) -> int:
    """``doctor --connect``: check an attached app-server (R-WIRE-10). Exit 0 when the handshake
    succeeds, 2 when the token holds whitespace or a control character (``BAD_TOKEN``), 1 otherwise.
    The token is read like the runtime reads it and never printed."""
    from codexrt import ConfigError
    from codexrt._serve._cli_support import Endpoint, check_endpoint_policy, probe_endpoint, read_token

    out = sys.stdout if out is None else out
    env = os.environ if env is None else env
    register_process_secrets(secret_env_values(env))
    status = 1
    try:
        ep = Endpoint.parse(endpoint)
        token = read_token(token_file=token_file, token_env=token_env, env=env)
        check_endpoint_policy(ep, has_token=token is not None, allow_remote=allow_remote)
        report = trio.run(lambda: probe_endpoint(ep, token=token, timeout=timeout))
    except ConfigError as exc:
        report = {"ok": False, "endpoint": endpoint, "error": exc.to_dict()}
        if exc.code == "BAD_TOKEN":
            status = 2  # a configuration error of the caller, like a usage error

    def table(report: dict[str, Any], buf: TextIO) -> None:
        if report["ok"]:
            ready = {True: "ready", False: "not ready", None: "no probe"}[report.get("ready")]
            buf.write(f"Attached to {report['endpoint']} ({ready}; {report['userAgent']}).\n")
        else:
            buf.write(f"Cannot use {report['endpoint']}: {report['error']['message']}\n")

    _emit(report, as_json, table, out)
    return 0 if report["ok"] else status


def login_state(env: dict[str, str]) -> dict[str, Any]:
    """Whether the user looks logged in, from the filesystem and the environment only (no CLI is
    run, no credential is read out): ``CODEX_HOME/auth.json`` holding ChatGPT tokens or an API
    key, or an ``OPENAI_API_KEY`` / ``CODEX_API_KEY`` variable. Only the kind is reported."""
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex")
    state: dict[str, Any] = {"loggedIn": False, "method": None, "source": None, "codexHome": str(home)}
    try:
        with open(home / "auth.json", "rb") as fh:
            auth = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        auth = None
    if isinstance(auth, dict):
        if isinstance(auth.get("tokens"), dict) and auth["tokens"]:
            state.update(loggedIn=True, method="chatgpt", source="auth.json")
        elif isinstance(auth.get("OPENAI_API_KEY"), str) and auth["OPENAI_API_KEY"]:
            state.update(loggedIn=True, method="apiKey", source="auth.json")
    if not state["loggedIn"]:
        for name in ("CODEX_API_KEY", "OPENAI_API_KEY"):
            if env.get(name):
                state.update(loggedIn=True, method="apiKey", source=f"env:{name}")
                break
    return state


def _add_range_and_login(report: dict[str, Any], env: dict[str, str]) -> None:
    """Warnings for a chosen CLI outside the tested range, and the login state (R-CLI-7)."""
    warnings = []
    chosen = report.get("chosen")
    if chosen is not None:
        w = tested_range_warning(chosen.get("version"))
        if w:
            warnings.append(w)
    report["testedRange"] = {"oldest": OLDEST_TESTED_CLI, "newest": NEWEST_TESTED_CLI}
    report["warnings"] = warnings
    report["login"] = login_state(env)


def _report(
    result: DiscoveryResult, probes: list[ProbeResult], chosen: int | None, override_error: CliUnavailable | None
) -> dict[str, Any]:
    rows = []
    for i, (c, p) in enumerate(zip(result.candidates, probes, strict=True)):
        row = c.to_dict()
        row.update(
            version=p.version.version if p.version else None,
            probe=p.outcome,
            probeDetail=p.detail,
            chosen=i == chosen,
        )
        rows.append(row)
    report: dict[str, Any] = {
        "ok": chosen is not None,
        "chosen": rows[chosen] if chosen is not None else None,
        "candidates": rows,
        "rejected": [r.to_dict() for r in result.rejected],
    }
    if override_error is not None:
        report["error"] = override_error.to_dict()
    elif chosen is None:
        attempts = [Attempt(c, f"--version: {p.detail}") for c, p in zip(result.candidates, probes, strict=True)]
        message, diag = format_unavailable(result, attempts)
        report["error"] = {"code": "CODEX_CLI_UNAVAILABLE", "message": message, "details": diag}
    return report


def _print_table(report: dict[str, Any], out: TextIO) -> None:
    headers = ["", "CANDIDATE", "SOURCE", "KIND", "CONFIRMED", "VERSION", "CHOSEN"]
    rows = []
    for i, r in enumerate(report["candidates"], 1):
        rows.append(
            [
                str(i),
                r["path"],
                r["source"],
                r["kind"],
                "yes" if r["confirmed"] else "no",
                r["version"] or f"({r['probe']})",
                "*" if r["chosen"] else "",
            ]
        )
    if rows:
        widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(headers)]
        out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
        for row in rows:
            out.write("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() + "\n")
        notes = [(i, r) for i, r in enumerate(report["candidates"], 1) if r["note"] or r["probe"] != "ok" or r["alsoFound"]]
        for i, r in notes:
            if r["note"]:
                out.write(f"  {i}: {r['note']}\n")
            if r["probe"] != "ok":
                out.write(f"  {i}: {r['probeDetail']}\n")
            for s in r["alsoFound"]:
                out.write(f"  {i}: also found at {s['path']} ({s['source']})\n")
    else:
        out.write("No Codex CLI candidate found.\n")
    if report["rejected"]:
        out.write("Rejected:\n")
        for r in report["rejected"]:
            out.write(f"  {r['path']} [{r['source']}]: {r['reason']}\n")
    if report["chosen"] is not None:
        c = report["chosen"]
        out.write(f"Using {c['path']} (codex-cli {c['version']}, from {c['source']}).\n")
    elif "error" in report:
        out.write(report["error"]["message"] + "\n")
    for w in report.get("warnings", []):
        out.write(f"warning: {w}\n")
    login = report.get("login")
    if login is not None:
        how = {"chatgpt": "with ChatGPT", "apiKey": "with an API key"}.get(login["method"] or "", "")
        out.write(f"Logged in: {'yes ' + how + ' (' + login['source'] + ')' if login['loggedIn'] else 'no'}"
                  f" — CODEX_HOME {login['codexHome']}\n")
