"""Split from ``tests/e2e/test_blocking.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

import pytest

import codexrt
import codexrt.blocking


def test_start_errors_surface_at_connect(tmp_path):
    with pytest.raises(codexrt.CliUnavailable):
        codexrt.blocking.connect(codex_bin=str(tmp_path / "missing-codex"), start=True)
