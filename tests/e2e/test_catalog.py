"""Split from ``tests/trio/test_catalog.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import pytest

from codexrt import ConfigError
from codexrt._features._catalog import start_slash_command
from tests.trio.test_catalog import _rt


async def test_r_cat_2_slash_commands_that_cannot_be_dispatched(peers, tmp_path):
    async with _rt(peers) as rt:
        with pytest.raises(ConfigError) as a:
            await start_slash_command(rt, "/review")  # no thread
        with pytest.raises(ConfigError) as b:
            await start_slash_command(rt, "/frobnicate")
        with pytest.raises(ConfigError):
            await start_slash_command(rt, "/diff")  # no cwd
        res = await start_slash_command(rt, "/diff", cwd=tmp_path, session_id="s1")
    assert a.value.code == "SLASH_NOT_DISPATCHED" and b.value.code == "UNKNOWN_SLASH_COMMAND"
    assert res.status == "completed" and res.diff.status.value == "notGit" and res.diff.session_id == "s1"
    assert peers.peers == []  # none of this started a model turn (or even a child)
