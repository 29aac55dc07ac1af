"""Review of ``codexrt acp`` (issue 30) from an editor author's side: regressions for what a
client driving it only from ``docs/acp.md`` and the ACP spec found wrong. Black-box, against the
scripted fake app-server, every line checked against the pinned official schema
(``tests/acp_support.AcpAgent``)."""

from __future__ import annotations

from pathlib import Path

from tests.acp_support import AcpAgent, fake_codex


async def _started(tmp_path: Path, agent: AcpAgent) -> Path:
    await agent.initialize()
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


async def test_load_of_an_unknown_session_is_a_typed_error_not_an_internal_one(tmp_path):
    """``session/load`` of an id that names no session and no thread: the app-server's refusal
    reaches the editor as codexrt's typed error (its ``code`` in ``data``), like
    ``session/resume`` of the same id — never ``-32603`` "internal error ...: ExceptionGroup"
    (the history reader's nursery wrapped the error in a group)."""
    async with AcpAgent.open(tmp_path, "--codex-bin", fake_codex(tmp_path, "handshake-ok")) as agent:
        ws = await _started(tmp_path, agent)
        params = {"sessionId": "no-such-session", "cwd": str(ws), "mcpServers": []}
        load = await agent.request("session/load", params)
        resume = await agent.request("session/resume", {"sessionId": "no-such-session", "cwd": str(ws)})
        assert "error" in load and "error" in resume, (load, resume)
        assert load["error"]["code"] != -32603, load
        assert "ExceptionGroup" not in load["error"]["message"], load
        assert load["error"]["data"]["code"] == resume["error"]["data"]["code"], (load, resume)
        assert "internal error" not in agent.stderr(), agent.stderr()
        # the failed load left no session behind: a prompt on it is refused as unknown
        nosuch = await agent.request("session/prompt", {"sessionId": "no-such-session",
                                                        "prompt": [{"type": "text", "text": "hi"}]})
        assert nosuch["error"]["code"] == resume["error"]["code"] or "no such session" in nosuch["error"]["message"]
        assert await agent.finish() == 0
