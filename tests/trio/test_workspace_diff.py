"""Split from ``tests/e2e/test_workspace_diff.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

from pathlib import Path


from codexrt._io._workspace import DiffStatus, read_workspace_diff


async def test_r_diff_1_missing_cwd_is_an_error(tmp_path: Path) -> None:
    diff = await read_workspace_diff(tmp_path / "nope", session_id="s")
    assert diff.status is DiffStatus.ERROR and "not a directory" in (diff.message or "")
