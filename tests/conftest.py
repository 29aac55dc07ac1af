"""Fixtures shared by every test layer (``tests/sansio|trio|e2e|real``).

Defined once here instead of copied into each module:

* ``peers``: a :class:`tests._support.MemoryPeers` on the test's nursery (in-memory scenario
  peers as transports; ``await peers.wait_received(i, method)`` waits for what peer ``i`` got);
* ``privacy_store``: a fresh :class:`codexrt._runtime._interactions.PrivacyStore` under the
  test's ``tmp_path`` (fingerprint ``fp0123456789abcd``);
* ``state_dir``: a state directory path (``str``, not created) under ``tmp_path``.

``tests/real/conftest.py`` adds the real-binary fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
