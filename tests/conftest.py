"""Fixtures shared by every test layer (``tests/sansio|trio|e2e|real``).

Defined once here instead of copied into each module:

* ``peers``: a :class:`tests._support.MemoryPeers` on the test's nursery (in-memory scenario
  peers as transports; ``await peers.wait_received(i, method)`` waits for what peer ``i`` got);
* ``privacy_store``: a fresh :class:`codexrt._runtime._interactions.PrivacyStore` under the
  test's ``tmp_path`` (fingerprint ``fp0123456789abcd``);
* ``state_dir``: a state directory path (``str``, not created) under ``tmp_path``.

``tests/real/conftest.py`` adds the real-binary fixtures.

Layer guard: a test under ``tests/sansio/`` fails if it starts a process (``subprocess``,
``os.fork``, ``os.posix_spawn*``) or runs Trio (``trio.run``) - the folder holds only tests
that need neither (``tests/sansio/test_test_layers.py`` checks the same on their imports).
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


_SANSIO = Path(__file__).resolve().parent / "sansio"


@contextlib.contextmanager
def _recording_process_starts(started: list[str]) -> Iterator[None]:
    """While open, every way to start a process (and ``trio.run``) raises and is recorded."""
    patched = [(subprocess.Popen, "_execute_child"), (os, "fork"), (os, "posix_spawn"), (os, "posix_spawnp"),
               (trio, "run")]
    saved = [(obj, name, getattr(obj, name)) for obj, name in patched if hasattr(obj, name)]

    def forbid(name: str):
        def forbidden(*args: object, **kwargs: object) -> None:
            started.append(name)
            raise AssertionError(f"a tests/sansio test called {name}: it belongs in tests/trio or tests/e2e")
        return forbidden

    for obj, name, _ in saved:
        setattr(obj, name, forbid(name))
    try:
        yield
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if _SANSIO not in Path(str(item.path)).resolve().parents:
        return (yield)
    started: list[str] = []
    with _recording_process_starts(started):
        result = yield
    if started:  # also when the test swallowed the AssertionError
        raise AssertionError(f"{item.nodeid} called {', '.join(started)}: tests/sansio starts no process "
                             "and runs no event loop")
    return result
