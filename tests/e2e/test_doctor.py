"""Tests of ``codexrt doctor`` (R-CLI-1…7): the table, ``--json``, exit status, ``CODEX_BIN``.

Fake CLIs are ``#!/bin/sh`` scripts answering ``--version``; ``HOME`` and ``PATH`` point into
``tmp_path`` so this machine's own installs do not leak into the report.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from codexrt_cli import _doctor
from tests._support import require_real_binary


def real_binary() -> Path:
    """The pinned real binary; skipped when absent, failed when CODEXRT_REQUIRE_REAL=1 (CI)."""
    return require_real_binary()


def fake_cli(path: Path, version_output: str, exit_code: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{version_output}'\nexit {exit_code}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    # Common bin dirs of this machine are out of the test's control: none of them.
    monkeypatch.setattr(_doctor, "discover_cli", _with_no_common_dirs(_doctor.discover_cli))
    return {"HOME": str(home), "PATH": ""}


def _with_no_common_dirs(fn):  # type: ignore[no-untyped-def]
    def wrapper(**kw):  # type: ignore[no-untyped-def]
        kw.setdefault("common_dirs", [])
        kw.setdefault("home", Path(kw["env"]["HOME"]))
        return fn(**kw)

    return wrapper


def test_r_cli_7_table_marks_first_working_candidate_chosen(tmp_path: Path, isolated: dict[str, str]) -> None:
    broken = fake_cli(tmp_path / "a" / "codex", "boom", exit_code=3)
    good = fake_cli(tmp_path / "b" / "codex", "codex-cli 7.8.9")
    env = {**isolated, "CODEX_BIN": str(broken), "PATH": str(good.parent)}
    out = io.StringIO()
    status = _doctor.run_doctor(env=env, out=out, timeout=10)
    text = out.getvalue()
    assert status == 0
    header, row1, row2 = text.splitlines()[:3]
    assert header.split() == ["CANDIDATE", "SOURCE", "KIND", "CONFIRMED", "VERSION", "CHOSEN"]
    assert str(broken) in row1 and "(exitNonZero)" in row1 and not row1.rstrip().endswith("*")
    assert str(good) in row2 and "7.8.9" in row2 and row2.rstrip().endswith("*")
    assert "--version exited with status 3: boom" in text
    assert f"Using {good} (codex-cli 7.8.9, from PATH)." in text


def test_r_cli_7_json_report(tmp_path: Path, isolated: dict[str, str]) -> None:
    good = fake_cli(tmp_path / "b" / "codex", "codex-cli 1.0.0")
    out = io.StringIO()
    status = _doctor.run_doctor(env={**isolated, "PATH": str(good.parent)}, as_json=True, out=out)
    report = json.loads(out.getvalue())
    assert status == 0 and report["ok"] is True
    assert report["chosen"]["path"] == str(good) and report["chosen"]["version"] == "1.0.0"
    assert report["candidates"][0]["chosen"] is True and report["rejected"] == []


def test_r_cli_6_no_usable_cli_exits_nonzero_with_hint(tmp_path: Path, isolated: dict[str, str]) -> None:
    bad = fake_cli(tmp_path / "b" / "codex", "codex 1.0.0")  # no `codex-cli` line
    out = io.StringIO()
    status = _doctor.run_doctor(env={**isolated, "PATH": str(bad.parent)}, as_json=True, out=out)
    report = json.loads(out.getvalue())
    assert status == 1 and report["chosen"] is None
    assert report["error"]["code"] == "CODEX_CLI_UNAVAILABLE"
    assert "CODEX_BIN" in report["error"]["message"]
    diag = report["error"]["details"]["codexCliUnavailable"]
    assert diag["candidates"][0]["outcome"].startswith("--version:")


def test_r_cli_3_stale_codex_bin_is_reported_and_fails(tmp_path: Path, isolated: dict[str, str]) -> None:
    good = fake_cli(tmp_path / "b" / "codex", "codex-cli 1.0.0")
    out = io.StringIO()
    env = {**isolated, "CODEX_BIN": str(tmp_path / "gone"), "PATH": str(good.parent)}
    status = _doctor.run_doctor(env=env, out=out)
    text = out.getvalue()
    assert status == 1
    assert "CODEX_BIN names" in text and "does not exist" in text
    assert str(good) in text  # what else exists is still shown, but not chosen
    assert "Using " not in text


@pytest.mark.real
def test_r_cli_7_real_binary_chosen_with_version(isolated: dict[str, str]) -> None:
    from peer_fixtures.codex_bin import pinned_version

    binary = real_binary()
    out = io.StringIO()
    status = _doctor.run_doctor(env={**isolated, "CODEX_BIN": str(binary)}, as_json=True, out=out)
    report = json.loads(out.getvalue())
    assert status == 0
    assert report["chosen"]["path"] == str(binary)
    assert report["chosen"]["version"] == pinned_version()
    assert report["chosen"]["kind"] == "native" and report["chosen"]["source"] == "env:CODEX_BIN"


def test_doctor_through_codexrt_main(
    tmp_path: Path, isolated: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from codexrt_cli import _main

    assert "codexrt_cli._doctor" in _main.COMMAND_MODULES
    good = fake_cli(tmp_path / "b" / "codex", "codex-cli 2.0.0")
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("CODEX_BIN", str(good))
    assert _main.main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["chosen"]["version"] == "2.0.0" and report["chosen"]["source"] == "env:CODEX_BIN"


# ---------------------------------------------- issue 19: tested range, login, broken candidates


@pytest.mark.parametrize("version, warned", [("0.100.0", "older"), ("99.0.0", "newer"), (None, None)])
def test_r_cli_7_warns_outside_the_tested_range(tmp_path: Path, isolated: dict[str, str], version: str | None,
                                                warned: str | None) -> None:
    from codexrt._io._discovery import NEWEST_TESTED_CLI, OLDEST_TESTED_CLI

    version = version or OLDEST_TESTED_CLI  # the oldest tested one itself: no warning
    good = fake_cli(tmp_path / "b" / "codex", f"codex-cli {version}")
    out = io.StringIO()
    assert _doctor.run_doctor(env={**isolated, "PATH": str(good.parent)}, out=out, timeout=10) == 0
    text = out.getvalue()
    warnings = [l for l in text.splitlines() if l.startswith("warning:")]
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and f"is {warned} than" in warnings[0]
        assert (OLDEST_TESTED_CLI if warned == "older" else NEWEST_TESTED_CLI) in warnings[0]


def test_r_cli_7_login_state_without_printing_credentials(tmp_path: Path, isolated: dict[str, str]) -> None:
    good = fake_cli(tmp_path / "b" / "codex", "codex-cli 0.171.0")
    home = tmp_path / "codex-home"
    home.mkdir()
    env = {**isolated, "PATH": str(good.parent), "CODEX_HOME": str(home)}
    out = io.StringIO()
    _doctor.run_doctor(env=env, out=out, as_json=True)
    assert json.loads(out.getvalue())["login"]["loggedIn"] is False
    secret = "sk-doctor-login-secret-42424242"
    (home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": secret, "tokens": None}))
    for as_json in (True, False):
        out = io.StringIO()
        _doctor.run_doctor(env=env, out=out, as_json=as_json)
        text = out.getvalue()
        assert secret not in text
        if as_json:
            login = json.loads(text)["login"]
            assert login["loggedIn"] is True and login["method"] == "apiKey" and login["source"] == "auth.json"
        else:
            assert "Logged in: yes with an API key (auth.json)" in text
    (home / "auth.json").write_text(json.dumps({"tokens": {"access_token": "eyJ.secret.token", "id_token": "x"}}))
    out = io.StringIO()
    _doctor.run_doctor(env=env, out=out)
    assert "Logged in: yes with ChatGPT (auth.json)" in out.getvalue() and "eyJ.secret" not in out.getvalue()


@pytest.mark.parametrize("count", [1, 2])
def test_r_cli_6_each_broken_candidate_attempt_is_reported(tmp_path: Path, isolated: dict[str, str],
                                                           count: int) -> None:
    """One and two planted broken candidates: the doctor reports each one's --version attempt, no
    'exited' prefix (no app-server ran), a hint and the codexCliUnavailable diagnostic."""
    dirs = []
    for i in range(count):
        fake_cli(tmp_path / f"d{i}" / "codex", f"broken-{i}", exit_code=3 + i)
        dirs.append(str(tmp_path / f"d{i}"))
    out = io.StringIO()
    assert _doctor.run_doctor(env={**isolated, "PATH": ":".join(dirs)}, out=out, as_json=True, timeout=10) == 1
    report = json.loads(out.getvalue())
    message = report["error"]["message"]
    assert not message.startswith("codex app-server exited") and "Hint:" in message
    rows = report["error"]["details"]["codexCliUnavailable"]["candidates"]
    assert len(rows) == count
    for i, row in enumerate(rows):
        assert row["path"] == str(tmp_path / f"d{i}" / "codex")
        assert f"--version exited with status {3 + i}: broken-{i}" in row["outcome"]
        assert f"d{i}/codex" in message


@pytest.mark.parametrize("count", [1, 2])
def test_r_cli_6_runtime_startup_reports_each_candidate(tmp_path: Path, count: int) -> None:
    """The runtime, one and two planted broken CLIs (each exits before READY): one
    CliUnavailable with each candidate's attempt (exit code), a hint and the diagnostic."""
    import trio

    import codexrt

    dirs = []
    for i in range(count):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "codex").write_text(f"#!/bin/sh\necho 'broken {i}' >&2\nexit {5 + i}\n")
        (d / "codex").chmod(0o755)
        dirs.append(str(d))
    env = {"PATH": ":".join(dirs), "HOME": str(tmp_path / "home")}

    async def main() -> codexrt.OperationResult:
        async with codexrt.open_runtime(env=env, handshake_timeout=20) as rt:
            return await rt.send("hi").wait()

    result = trio.run(main)
    err = result.error
    assert result.status == "failed" and err is not None and err.code == "CODEX_CLI_UNAVAILABLE"
    assert err.message.startswith(f"codex app-server exited (code={5 + count - 1}")
    assert "Hint:" in err.message and err.details["cause"]["code"] == "CHILD_EXITED"
    diag = err.details["codexCliUnavailable"]
    attempts = diag["attempts"]
    assert [a["exitCode"] for a in attempts[:count]] == [5 + i for i in range(count)]
    for i in range(count):
        assert f"r{i}/codex" in err.message
