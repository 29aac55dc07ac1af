"""The one CODEX_HOME resolver (``codexrt._io._codex_home``): explicit → ``CODEX_HOME`` →
``~/.codex`` (R-LC-3: the launch, env_key discovery, the privacy scope and the legacy history
read the same home)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codexrt._io._codex_home import resolve_codex_home


def test_r_lc_3_explicit_then_env_then_the_default(tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path / "env-home")}
    assert resolve_codex_home(tmp_path / "given", env) == tmp_path / "given"
    assert resolve_codex_home(str(tmp_path / "given"), env) == tmp_path / "given"
    assert resolve_codex_home(None, env) == tmp_path / "env-home"
    assert resolve_codex_home("", env) == tmp_path / "env-home"  # empty = unset
    assert resolve_codex_home(None, {"CODEX_HOME": ""}, home=tmp_path) == tmp_path / ".codex"
    assert resolve_codex_home(None, {}, home=tmp_path) == tmp_path / ".codex"


def test_r_lc_3_tilde_is_expanded_and_os_environ_is_the_default_env(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_codex_home("~/x") == tmp_path / "x"
    assert resolve_codex_home(None, {"CODEX_HOME": "~/y"}) == tmp_path / "y"
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "from-os"))
    assert resolve_codex_home() == tmp_path / "from-os"
    assert resolve_codex_home(None, {}) == tmp_path / ".codex"  # a given env is the whole env
    monkeypatch.delenv("CODEX_HOME")
    assert resolve_codex_home() == tmp_path / ".codex"
