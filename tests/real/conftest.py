"""Fixtures for tests against the real ``codex app-server`` (pinned 0.169.0, and 0.147.0).

Every test collected under ``tests/real/`` gets the ``real`` marker. A missing binary skips the
test with the reason and the fix — unless ``CODEXRT_REQUIRE_REAL=1`` (CI sets it), where it fails:
real-server tests are mandatory in CI.

Fixtures (function scope unless noted):

* ``codex_bin`` (session) / ``codex_bin_old`` (session): ``Path`` of the native binary;
* ``mock_model``: a running :class:`peer_fixtures.mock_responses.MockResponsesServer`;
* ``codex_home``: a fresh ``CODEX_HOME`` (``Path``) whose config points at ``mock_model``;
* ``real_env``: the child environment (``CODEX_HOME`` set, credentials and proxies stripped);
* ``real_cwd``: an empty working directory for threads (``Path``);
* ``spawn_raw``: ``spawn_raw(codex_bin=None, **kw) -> RawAppServer`` (raw JSON over stdio),
  every child closed and reaped at teardown.

Network: CI runs the whole pytest inside a loopback-only network namespace
(``unshare -rn sh -c 'ip link set lo up && exec "$0" "$@"' .venv/bin/python -m pytest …``); the
mock only binds 127.0.0.1 and ``config.toml`` turns off plugin sync and analytics.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from peer_fixtures.codex_bin import old_version, pinned_version
from peer_fixtures.codex_home import codex_env, make_codex_home
from peer_fixtures.mock_responses import MockResponsesServer
from peer_fixtures.real_server import RawAppServer, spawn_app_server
from tests._support import require_real_binary

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.real)


def _require(version: str | None, label: str) -> Path:
    if version is None:  # no old version pinned in .ci/codex-version-old
        return require_real_binary("unpinned", label)
    return require_real_binary(version, label)


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """The pinned native ``codex`` (``.ci/codex-version``)."""
    return _require(pinned_version(), "pinned")


@pytest.fixture(scope="session")
def codex_bin_old() -> Path:
    """The older official release (``.ci/codex-version-old``, 0.147.0)."""
    return _require(old_version(), "old")


@pytest.fixture(scope="session")
def _quiet_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME with no shell profile, for the real codex and the commands it runs."""
    home = tmp_path_factory.mktemp("home")
    gitconfig = Path.home() / ".gitconfig"
    if gitconfig.is_file():  # tests that commit keep the machine's git identity
        shutil.copyfile(gitconfig, home / ".gitconfig")
    return home


@pytest.fixture(autouse=True)
def _hermetic_home(_quiet_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every real test runs with ``HOME`` set to an empty directory. codex runs each command
    (and its shell snapshot) through the user's *login* shell, which sources the machine's
    profile: here ``pyenv init`` runs ``pyenv rehash``, and a rehash killed mid-way (a test that
    SIGKILLs a process group) leaves a lock that makes every later login shell wait 60 s —
    turning unrelated real tests into timeouts. The tests are about codexrt and codex, not the
    machine's shell profile."""
    monkeypatch.setenv("HOME", str(_quiet_home))


@pytest.fixture
def mock_model(tmp_path: Path) -> Iterator[MockResponsesServer]:
    with MockResponsesServer(log_path=tmp_path / "mock-requests.jsonl") as mock:
        yield mock


@pytest.fixture
def codex_home(tmp_path: Path, mock_model: MockResponsesServer) -> Path:
    return make_codex_home(tmp_path / "codex-home", mock_model.base_url)


@pytest.fixture
def real_env(codex_home: Path) -> dict[str, str]:
    return codex_env(codex_home)


@pytest.fixture
def real_cwd(tmp_path: Path) -> Path:
    d = tmp_path / "workspace"
    d.mkdir()
    return d


@pytest.fixture
def spawn_raw(request: pytest.FixtureRequest, real_env: dict[str, str],
              real_cwd: Path) -> Iterator[Callable[..., RawAppServer]]:
    started: list[RawAppServer] = []

    def spawn(bin_path: Path | None = None, **kw: Any) -> RawAppServer:
        kw.setdefault("cwd", real_cwd)
        srv = spawn_app_server(bin_path or request.getfixturevalue("codex_bin"), real_env, **kw)
        started.append(srv)
        return srv

    yield spawn
    for srv in started:
        srv.close()
