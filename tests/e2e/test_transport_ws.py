"""Split from ``tests/trio/test_transport_ws.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import json

import trio
import trio.testing

from tests.trio.test_transport_ws import TOKEN, WAIT, WsPeerServer


async def _cli(*args: str, env: dict | None = None) -> tuple[int, str]:
    import os
    import sys

    from tests._support import ROOT

    with trio.fail_after(WAIT):
        proc = await trio.run_process([sys.executable, "-m", "codexrt_cli", *args], capture_stdout=True,
                                      capture_stderr=True, check=False, cwd=str(ROOT),
                                      env={**os.environ, **(env or {})})
    return proc.returncode, (proc.stdout + proc.stderr).decode()


async def test_doctor_connect_reports_handshake_without_showing_the_token(nursery):
    server = WsPeerServer(token=TOKEN)
    url = await server.serve_tcp(nursery)
    rc, out = await _cli("doctor", "--connect", url, "--token-env", "CX_DOCTOR_TOKEN", "--json",
                         env={"CX_DOCTOR_TOKEN": TOKEN})
    report = json.loads(out)
    assert rc == 0 and report["ok"] and report["ready"] is True and report["auth"] is True
    assert TOKEN not in out
    rc, out = await _cli("doctor", "--connect", url)
    assert rc == 1 and "401" in out
    rc, out = await _cli("doctor", "--connect", "ws://10.9.9.9:1")
    assert rc == 1 and "loopback" in out


async def test_serve_connect_runs_a_turn_on_the_attached_server(nursery, tmp_path):
    from tests.e2e.test_serve_e2e import ServeProcess

    server = WsPeerServer("handshake-ok")
    url = await server.serve_tcp(nursery)
    async with ServeProcess.open(tmp_path, "--connect", url, "--idle-timeout", "0") as sp:
        reply = await sp.request("codex.send", {"channelId": "c", "message": "hi over ws"})
        assert reply["result"]["status"] == "completed"
        assert await sp.finish(timeout=WAIT) == 0
    assert [m["params"]["input"][0]["text"] for m in server.received(0, "turn/start")] == ["hi over ws"]
    with trio.fail_after(WAIT):
        await server.peers[0].finished.wait()
    assert server.peers[0].exit_code == 0  # serve closed the websocket; the server was never signalled
