"""Split from ``tests/sansio/test_serve_hostile.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

def _vm_hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def test_r_d_4_serve_survives_a_hostile_app_server_with_bounded_memory(tmp_path):
    """R-D-4, R-WIRE-5: a real ``codexrt serve`` whose app-server is the ``hostile`` fake
    (garbage, a 100,000-deep line, a 100 MB line, 10,000 approval requests at once): the send
    completes, the approvals past the cap are reported (interactionOverflow), serve's peak RSS
    stays far below what keeping the input would take, and serve drains to exit 0."""
    from tests.e2e.test_serve_e2e import ServeProcess, fake_cli

    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hostile")) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hi"})
        reply = await sp.response(rid, timeout=120)
        assert reply["ok"] and reply["result"]["status"] == "completed", reply
        overflow = [l for l in sp.lines if l.get("kind") == "interactionOverflow"]
        assert 1 <= len(overflow) <= 16  # coalesced: the first refusal, then powers of two
        assert all(l["payload"]["reply"] == {"decision": "decline"} for l in overflow)
        requested = [l for l in sp.lines if l.get("kind") == "interactionRequested"]
        assert len(requested) <= 256
        peak = _vm_hwm_mib(sp.proc.pid)
        assert peak < 300, f"serve peaked at {peak:.0f} MiB"
        status = await sp.request("status", {"channelId": "c"})
        assert status["result"]["channels"][0]["state"] == "READY"
        assert await sp.finish() == 0
