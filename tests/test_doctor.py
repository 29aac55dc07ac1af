"""Tests of ``codexrt doctor`` (R-CLI-1…7): the table, ``--json``, exit status, ``CODEX_BIN``.

Fake CLIs are ``#!/bin/sh`` scripts answering ``--version``; ``HOME`` and ``PATH`` point into
``tmp_path`` so this machine's own installs do not leak into the report.
"""

from __future__ import annotations

import argparse
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


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    _doctor.add_parser(sub)
    return parser.parse_args(["doctor", *argv])


def test_parser_registers_doctor_with_func() -> None:
    args = parse(["--json", "--codex-bin", "/x", "--timeout", "2"])
    assert parse(["--cli", "/x"]).cli == "/x"  # the old name still works
    assert args.json and args.cli == "/x" and args.timeout == 2 and callable(args.func)


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


def test_nothing_found(isolated: dict[str, str]) -> None:
    out = io.StringIO()
    assert _doctor.run_doctor(env=isolated, out=out) == 1
    assert "No Codex CLI candidate found." in out.getvalue()
    assert "npm install -g @openai/codex" in out.getvalue()


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
