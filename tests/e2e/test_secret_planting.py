"""Secret planting (issue 18, R-WIRE-9, docs/security.md): secrets of many kinds are planted in
the places a hostile or careless app-server (or CLI) echoes them — its stderr, its JSON-RPC
error messages and ``data``, the stderr of ``--version`` — and every output codexrt produces is
searched for them: ``serve`` stdout, ``serve`` stderr at debug level, error details, every file
written under the temporary HOME / state / CODEX_HOME, and ``doctor`` (table and ``--json``).

Testing charter: each secret is fresh per run (``secrets.token_*``), so nothing can match by
accident; each planted line also carries a harmless marker (``mark-NN``), and the test asserts
the markers *did* come out — a planted secret that never reached an output would prove nothing.
A secret counts as leaked if its value, its first 10 characters (a cut before redaction) or its
JSON-escaped form appears anywhere.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
from pathlib import Path
from typing import Any

import trio

from tests.e2e.test_serve_e2e import ROOT, WAIT, ServeProcess
from tests.trio.test_transport_ws import WsPeerServer

REDACTED = "[REDACTED]"


def _hex(n: int = 20) -> str:
    return secrets.token_hex(n)


class Plant:
    """The secrets of one run, by kind."""

    def __init__(self) -> None:
        # values given to the child in its environment, echoed bare (without their name)
        self.env = {
            "PLANT_API_KEY": "pk" + _hex(),                 # *_KEY
            "PLANT_SERVICE_TOKEN": _hex(),                  # *TOKEN*
            "PLANT_CLIENT_SECRET": secrets.token_urlsafe(24).replace("-", "x"),  # *SECRET*
            "PLANT_DB_PASSWORD": "pw" + _hex(12),           # *PASSWORD*
            "PLANT_CREDENTIAL": "cr" + _hex(12),            # *CREDENTIAL*
            "PLANT_GH_PAT": "pat" + _hex(),                 # *_PAT, echoed at the end of a long line
        }
        # values nobody registered: caught by shape or by name
        self.bearer = "bt" + _hex()
        self.url_password = "up" + _hex(10)
        self.sk = "sk-proj-" + _hex()
        self.ghp = "ghp_" + _hex(18)
        self.jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI" + _hex(8) + ".sig" + _hex(8)
        self.akia = "AKIA" + secrets.token_hex(8).upper()
        self.json_secret = "js" + _hex()          # multi-line JSON: name on one line, value on the next
        self.json_inline = "ji" + _hex()          # pretty-printed JSON: "access_token": "…"
        self.ws_token = "ws" + _hex()             # an attached server's token, echoed back

    def all(self) -> dict[str, str]:
        out = {f"env:{k}": v for k, v in self.env.items()}
        out.update(bearer=self.bearer, url_password=self.url_password, sk=self.sk, ghp=self.ghp,
                   jwt=self.jwt, akia=self.akia, json_secret=self.json_secret, json_inline=self.json_inline,
                   ws_token=self.ws_token)
        return out


def _leaks(plant: Plant, text: str) -> list[str]:
    found = []
    for kind, value in plant.all().items():
        for form in {value, value[:10], json.dumps(value)[1:-1]}:
            if form in text:
                found.append(f"{kind} ({form!r})")
    return found


def _scenario(plant: Plant) -> dict[str, Any]:
    long_pad = "y" * 1980  # the value straddles the 2,000-character cut (12 characters before it)
    startup_stderr = [
        "mark-01 child env: $env.PLANT_API_KEY",
        "mark-02 token in use $env.PLANT_SERVICE_TOKEN (bare)",
        f"mark-03 {long_pad}$env.PLANT_GH_PAT",
        f"mark-04 {'z' * 2100} key={plant.sk}",
        f"mark-05 fetching https://bob:{plant.url_password}@git.example.invalid/repo.git",
        f"mark-06 request headers: Authorization: Bearer {plant.bearer}",
        f"mark-07 pushing with {plant.ghp}",
        "mark-08 {",
        '  "client_secret":',
        f'    "{plant.json_secret}",',
        f'  "access_token": "{plant.json_inline}",',
        '  "n": 1',
        "}",
        "mark-09 credential $env.PLANT_CREDENTIAL loaded",
        "mark-14 env PLANT_CLIENT_SECRET=$env.PLANT_CLIENT_SECRET (named)",
    ]
    error_message = (f"mark-10 upstream refused: Authorization: Bearer {plant.bearer}; "
                     "secret $env.PLANT_CLIENT_SECRET; aws " + plant.akia)
    error_data = {"mark": "mark-11", "password": "$env.PLANT_DB_PASSWORD", "jwt": plant.jwt,
                  "remote": f"https://bob:{plant.url_password}@git.example.invalid/",
                  "nested": ["$env.PLANT_API_KEY", {"apiKey": "unregistered-" + plant.json_secret}]}
    return {
        "name": "secret-echo",
        "description": "echoes secrets of the environment and planted ones on stderr and in errors",
        "on_start": [{"stderr": line} for line in startup_stderr],
        "rules": [
            {"match": {"method": "turn/start", "nth": 1},
             "actions": [{"error": {"code": -32600, "message": error_message, "data": error_data}}]},
            {"match": {"method": "turn/start", "nth": 2},
             "actions": [{"stderr": "mark-12 dying with $env.PLANT_SERVICE_TOKEN and $env.PLANT_GH_PAT"},
                         {"stderr": f"mark-13 Authorization: Basic {plant.bearer}"},
                         {"exit": 3}]},
        ],
    }


def _env(tmp_path: Path, plant: Plant) -> dict[str, str]:
    home = tmp_path / "home"
    for d in ("home", "home/.codex", "state"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HOME=str(home), XDG_STATE_HOME=str(tmp_path / "state"), CODEX_HOME=str(home / ".codex"),
               **plant.env)
    return env


def _written_files(tmp_path: Path) -> str:
    out = []
    for root in (tmp_path / "home", tmp_path / "state"):
        for path in root.rglob("*"):
            if path.is_file():
                out.append(f"== {path}\n" + path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


async def test_r_wire_9_planted_secrets_never_leave_serve_or_doctor(tmp_path: Path) -> None:
    plant = Plant()
    fixtures = tmp_path / "fixtures"  # holds the planted scenario: not an output, not searched
    fixtures.mkdir()
    scenario = fixtures / "secret-echo.json"
    scenario.write_text(json.dumps(_scenario(plant)))
    env = _env(tmp_path, plant)
    cli = fixtures / "fake-codex"
    cli.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\n"
                   f"exec {shlex.join([sys.executable, '-m', 'peer_fixtures.fake_app_server', str(scenario)])}\n")
    cli.chmod(0o755)

    # serve: an error reply carrying the server's error (message + data), then a crash whose
    # stderr tail travels in the second reply's details and in events; debug log on stderr
    async with ServeProcess.open(tmp_path, "--codex-bin", str(cli), "--idle-timeout", "0", "--log-level", "debug",
                                 env=env) as sp:
        first = await sp.request("codex.send", {"channelId": "c", "message": "one"})
        # the edit ledger opens its per-workspace store: a file codexrt writes, searched below
        edits = await sp.request("codex.listEdits", {"channelId": "c", "threadId": first["result"]["threadId"]})
        assert edits["ok"] is True, edits
        second = await sp.request("codex.send", {"channelId": "c", "message": "two"})
        assert await sp.finish(timeout=WAIT) == 0
    stdout = "\n".join(json.dumps(line) for line in sp.lines)
    stderr = sp.stderr()
    first_error = json.dumps(first)
    assert "mark-10" in first_error and "mark-11" in first_error, first  # the error did come back
    assert first_error.count(REDACTED) >= 6, first
    second_error = json.dumps(second)
    assert "stderrTail" in second_error and "mark-12" in second_error, second
    for mark in ("mark-01", "mark-02", "mark-03", "mark-04", "mark-05", "mark-06", "mark-07", "mark-08", "mark-09",
                 "mark-14"):
        assert mark in stderr, f"{mark} never reached the debug log"  # the planted lines did flow
    assert "mark-13" in stdout and "mark-13" in stderr
    assert "app-server stderr" in stderr and REDACTED in stderr

    # doctor: a CLI whose --version fails with secrets on stderr (its last line is shown)
    doctor_cli = fixtures / "codex"
    doctor_cli.write_text("#!/bin/sh\n"
                          f"echo {shlex.quote('mark-20 ' + plant.env['PLANT_SERVICE_TOKEN'])} >&2\n"
                          f"echo {shlex.quote('mark-21 ' + plant.env['PLANT_API_KEY'] + ' https://bob:' + plant.url_password + '@h.invalid/ Bearer ' + plant.bearer)} >&2\n"
                          "exit 1\n")
    doctor_cli.chmod(0o755)
    doctor_out = []
    for extra in ([], ["--json"]):
        with trio.fail_after(WAIT):
            proc = await trio.run_process([sys.executable, "-m", "codexrt_cli", "--log-level", "debug", "doctor",
                                           "--cli", str(doctor_cli), *extra],
                                          capture_stdout=True, capture_stderr=True, check=False, cwd=str(ROOT),
                                          env=env)
        text = proc.stdout.decode() + proc.stderr.decode()
        assert proc.returncode == 1 and "mark-21" in text, text  # the probe's stderr is shown…
        doctor_out.append(text)

    files = _written_files(tmp_path)
    assert files.count("== ") >= 1  # the edit store at least: the search below is not vacuous
    outputs = {"serve stdout": stdout, "serve stderr": stderr, "files": files,
               "doctor table": doctor_out[0], "doctor json": doctor_out[1]}
    leaks = {name: _leaks(plant, text) for name, text in outputs.items()}
    assert not any(leaks.values()), leaks  # …and nothing secret in any output


async def test_r_wire_9_echoed_websocket_token_is_masked(nursery, tmp_path: Path) -> None:
    """serve --connect: the attached server echoes the bearer token it received (message and
    data); the reply, the events and the debug log never show it."""
    plant = Plant()
    echo = {"name": "token-echo", "description": "echoes the bearer token",
            "rules": [{"match": {"method": "turn/start"},
                       "actions": [{"error": {"code": -32600,
                                              "message": f"mark-30 got Authorization: Bearer {plant.ws_token}; "
                                                         f"token was {plant.ws_token}",
                                              "data": {"echo": plant.ws_token}}}]}]}
    server = WsPeerServer(echo, token=plant.ws_token)
    url = await server.serve_tcp(nursery)
    token_file = tmp_path / "fixtures" / "token"
    token_file.parent.mkdir()
    token_file.write_text(plant.ws_token + "\n")
    env = _env(tmp_path, plant)
    async with ServeProcess.open(tmp_path, "--connect", url, "--token-file", str(token_file),
                                 "--idle-timeout", "0", "--log-level", "debug", env=env) as sp:
        reply = await sp.request("codex.send", {"channelId": "c", "message": "hi"})
        assert await sp.finish(timeout=WAIT) == 0
    assert server.auth_headers[0] == b"Bearer " + plant.ws_token.encode()  # the token was used
    text = json.dumps(reply)
    assert "mark-30" in text and REDACTED in text, reply
    outputs = {"stdout": "\n".join(json.dumps(line) for line in sp.lines), "stderr": sp.stderr(),
               "files": _written_files(tmp_path)}
    leaks = {name: _leaks(plant, text) for name, text in outputs.items()}
    assert not any(leaks.values()), leaks


async def test_r_wire_9_token_with_a_control_character_is_exit_2_and_never_printed(tmp_path: Path) -> None:
    """A token file whose token has an inner newline (or an ESC) is a configuration error: serve
    exits 2 with one line on stderr, no traceback, no part of the token."""
    for bad in ("tok" + _hex(8) + "\n" + _hex(8), _hex(8) + "\x1b[2J" + _hex(8)):
        token_file = tmp_path / "token"
        token_file.write_text(bad)
        with trio.fail_after(WAIT):
            proc = await trio.run_process(
                [sys.executable, "-m", "codexrt_cli", "--log-level", "debug", "serve",
                 "--connect", "ws://127.0.0.1:9", "--token-file", str(token_file)],
                stdin=b"", capture_stdout=True, capture_stderr=True, check=False, cwd=str(ROOT))
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 2, err
        assert proc.stdout == b""
        assert "control character" in err and "Traceback" not in err
        for part in bad.replace("\x1b[2J", "\n").split("\n"):
            assert part not in err
