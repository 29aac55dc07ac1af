"""Split from ``tests/e2e/test_context_probe.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from codexrt._io._context_probe import ContextCapabilityProbe
from codexrt._sansio._context import ContextDelivery, ContextFragments
from tests.e2e.test_context_probe import ENV, FRAGS, _SCHEMA_WITH, calls, fake_cli, temp_root


async def test_r_ctx_2_empty_context_never_probes(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", f"write_schema({_SCHEMA_WITH!r})")
    probe = ContextCapabilityProbe(temp_root=temp_root)
    assert await probe.decide(ContextFragments(), cli=[str(cli)], env=ENV, generation=1) is ContextDelivery.NONE
    assert calls(log) == [] and probe.statistics().runs == 0


async def test_r_ctx_6_cancelled_operation_leaves_before_the_probe(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", f"write_schema({_SCHEMA_WITH!r})")
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.CancelScope() as scope:
        scope.cancel()
        await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=1)
        pytest.fail("decide returned in a cancelled scope")  # pragma: no cover
    assert scope.cancelled_caught
    assert calls(log) == [] and list(temp_root.iterdir()) == []
    assert probe.statistics().runs == 0 and probe.cached([str(cli)], 1) is None
