"""Split from ``tests/trio/test_interactions.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import codexrt
from codexrt._runtime._interactions import PrivacyStore
from tests.trio.test_interactions import INPUT, _next, _replies, _rt, kind_scenario


@pytest.mark.parametrize("blocker", ["read-only-dir", "dir-is-a-file"])
async def test_r_priv_1_index_write_failure_blocks_the_forward(peers, tmp_path, blocker):
    ro = tmp_path / "ro"
    immutable = False
    if blocker == "read-only-dir":
        ro.mkdir()
        ro.chmod(0o500)
        if os.geteuid() == 0:  # root ignores permission bits: make the directory immutable instead
            immutable = shutil.which("chattr") is not None and subprocess.run(
                ["chattr", "+i", str(ro)], capture_output=True).returncode == 0
            if not immutable:
                pytest.skip("running as root without chattr: cannot make a read-only directory")
        target = ro
    else:
        ro.write_text("not a directory")
        target = ro / "privacy"
    try:
        async with _rt(peers, kind_scenario(INPUT)) as rt:
            rt.set_privacy_store(PrivacyStore(str(target), "fp"))
            with rt.subscribe() as events:
                op = rt.send("go")
                ev = await _next(events, "interactionRequested")
                with pytest.raises(codexrt.InteractionError) as info:
                    await rt.respond_interaction(ev.payload["interactionKey"], ev.payload["dialogToken"],
                                                 {"answers": {"token": {"answers": ["s3cr3t"]}}})
                assert info.value.code == "PRIVACY_INDEX_WRITE_FAILED"
                failed = await _next(events, "privacyIndexWriteFailed")
                assert failed.payload["forwarded"] is False
                await op.wait()
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(ro)], check=True)
        if ro.is_dir():
            ro.chmod(0o700)
    replies = _replies(peers)
    assert len(replies) == 1 and "result" not in replies[0] and replies[0]["error"]["code"] == -32000
    assert "s3cr3t" not in repr(peers.received(0))
