"""Fixtures shared by every test layer (``tests/sansio|trio|e2e|real``).

Defined once here instead of copied into each module:

* ``peers``: a :class:`tests._support.MemoryPeers` on the test's nursery (in-memory scenario
  peers as transports; ``await peers.wait_received(i, method)`` waits for what peer ``i`` got);
* ``privacy_store``: a fresh :class:`codexrt._runtime._interactions.PrivacyStore` under the
  test's ``tmp_path`` (fingerprint ``fp0123456789abcd``);
* ``state_dir``: a state directory path (``str``, not created) under ``tmp_path``.

``tests/real/conftest.py`` adds the real-binary fixtures.

Layer guard: a test under ``tests/sansio/`` or ``tests/trio/`` fails if it starts a process
(``subprocess``, ``os.fork``, ``os.posix_spawn*``), one under ``tests/sansio/`` also if it runs
Trio (``trio.run``); such tests belong in ``tests/e2e/`` (``tests/sansio/test_test_layers.py``
checks the sansio modules' imports too).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests._support import MemoryPeers


@pytest.fixture(autouse=True)
def _codexrt_state_in_a_temp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test writes codexrt's state — the privacy index, ``codexrt acp``'s session index,
    review checkpoints — into the developer's real ``~/.local/state/codexrt``: each test gets
    its own ``XDG_STATE_HOME`` (inherited by the processes it starts), and the shell's
    ``CODEXRT_STATE_DIR`` / ``CODEXRT_PRIVACY_DIR`` are unset. (Before, ACP tests left their
    sessions in the real session index, which ``session/list`` shows an editor.)"""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
    monkeypatch.delenv("CODEXRT_STATE_DIR", raising=False)
    monkeypatch.delenv("CODEXRT_PRIVACY_DIR", raising=False)


@pytest.fixture
async def peers(nursery) -> MemoryPeers:
    return MemoryPeers(nursery)


@pytest.fixture
def privacy_store(tmp_path: Path):
    from codexrt._runtime._interactions import PrivacyStore

    return PrivacyStore(str(tmp_path / "privacy"), "fp0123456789abcd")


@pytest.fixture
def state_dir(tmp_path: Path) -> str:
    return str(tmp_path / "state")


_TESTS = Path(__file__).resolve().parent
_NO_PROCESS = {"sansio": "tests/trio or tests/e2e", "trio": "tests/e2e"}  # layer -> where such a test belongs


@contextlib.contextmanager
def _recording_process_starts(started: list[str], layer: str = "sansio", *, trio_run: bool = True) -> Iterator[None]:
    """While open, every way to start a process (and ``trio.run`` if ``trio_run``) raises and is
    recorded in ``started``."""
    patched = [(subprocess.Popen, "_execute_child"), (os, "fork"), (os, "posix_spawn"), (os, "posix_spawnp")]
    if trio_run:
        patched.append((trio, "run"))
    saved = [(obj, name, getattr(obj, name)) for obj, name in patched if hasattr(obj, name)]

    def forbid(name: str):
        def forbidden(*args: object, **kwargs: object) -> None:
            started.append(name)
            raise AssertionError(f"a tests/{layer} test called {name}: it belongs in {_NO_PROCESS[layer]}")
        return forbidden

    for obj, name, _ in saved:
        setattr(obj, name, forbid(name))
    try:
        yield
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


def _layer(item: pytest.Item) -> str | None:
    try:
        parts = Path(str(item.path)).resolve().relative_to(_TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    layer = _layer(item)
    if layer not in _NO_PROCESS:
        return (yield)
    started: list[str] = []
    with _recording_process_starts(started, layer, trio_run=layer == "sansio"):
        result = yield
    if started:  # also when the test swallowed the AssertionError
        raise AssertionError(f"{item.nodeid} called {', '.join(started)}: tests/{layer} starts no process"
                             + (" and runs no event loop" if layer == "sansio" else ""))
    return result
