"""Interop: the official ACP Python SDK's client (``agent-client-protocol`` 0.12.1, asyncio) drives
``codexrt acp`` against the fake app-server through initialize → new → prompt → permission
(allow once) → prompt → permission left open → cancel → load (issue 30 "Done when"; research
``acp.md`` §7.1: "the SDK 0.12.1 client completes … with no error").

The SDK runs asyncio only, so it runs in a subprocess (this module run as a script:
``python -m tests.e2e.test_acp_sdk_interop FAKE_CODEX FAKE_LOG WORKSPACE``) — never inside
pytest-trio's loop. The script prints one JSON summary line; the test checks it, so a failure
names the step and what the SDK saw.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STEP_BOUND = 30.0  # per SDK call: reaching it means a hang, not slowness


# -- the SDK client (runs in the subprocess) ----------------------------------------------------


def _client_main(fake_codex: str, fake_log: str, workspace: str, stderr_path: str) -> dict[str, Any]:
    import asyncio

    import acp
    from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

    summary: dict[str, Any] = {"steps": [], "updates": [], "permissions": []}

    class Client:
        """The reference client: allows the first permission once, holds the second until the
        turn is cancelled and answers it ``cancelled`` (as ACP requires)."""

        def __init__(self) -> None:
            self.cancelled = asyncio.Event()

        async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kw: Any) -> Any:
            kinds = [o.kind for o in options]
            summary["permissions"].append({"sessionId": session_id, "toolCallId": tool_call.tool_call_id,
                                           "kinds": kinds})
            if len(summary["permissions"]) == 1:
                [once] = [o for o in options if o.kind == "allow_once"]
                return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=once.option_id))
            await self.cancelled.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

        async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
            summary["updates"].append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

        def on_connect(self, conn: Any) -> None:
            pass

    def log_turn_starts() -> int:
        p = Path(fake_log)
        if not p.exists():
            return 0
        return sum(1 for line in p.read_text().splitlines() if '"turn/start"' in line)

    async def main() -> None:
        client = Client()
        with open(stderr_path, "wb") as err:
            async with acp.spawn_agent_process(
                    client, sys.executable, "-m", "codexrt_cli", "--log-level", "info", "acp", "--codex-bin", fake_codex,
                    # this process's environment (agent_env: state under the test's tmp_path); the
                    # SDK's default is a safe subset without it, and the agent wrote its session
                    # index into the real ~/.local/state
                    env=dict(os.environ), cwd=str(ROOT), transport_kwargs={"stderr": err}) as (conn, proc):
                step = summary["steps"].append
                init = await asyncio.wait_for(conn.initialize(protocol_version=1), STEP_BOUND)
                step({"initialize": init.protocol_version, "loadSession": init.agent_capabilities.load_session})
                new = await asyncio.wait_for(conn.new_session(cwd=workspace, mcp_servers=[]), STEP_BOUND)
                sid = new.session_id
                step({"new": sid})
                first = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[acp.text_block("run it")]),
                                               STEP_BOUND)
                step({"prompt": first.stop_reason})
                second = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("run it again")]))
                for _ in range(int(STEP_BOUND / 0.02)):  # the second permission is open (or the turn is)
                    if len(summary["permissions"]) >= 2:
                        break
                    await asyncio.sleep(0.02)
                step({"open_permissions": len(summary["permissions"]), "turn_starts": log_turn_starts()})
                await conn.cancel(session_id=sid)
                client.cancelled.set()
                cancelled = await asyncio.wait_for(second, STEP_BOUND)
                step({"cancel": cancelled.stop_reason})
                n = len(summary["updates"])
                await asyncio.wait_for(conn.load_session(cwd=workspace, session_id=sid, mcp_servers=[]), STEP_BOUND)
                replay = summary["updates"][n:]
                step({"load": True, "replayed": [u.get("sessionUpdate") for u in replay]})
            summary["exit"] = proc.returncode

    asyncio.run(main())
    return summary


# -- the test (pytest-trio) ---------------------------------------------------------------------


async def test_acp_python_sdk_client_completes_the_whole_flow(tmp_path):
    import trio

    from peer_fixtures.fake_app_server import read_log
    from tests.acp_support import agent_env, fake_codex, require_acp_schema

    require_acp_schema()
    log = tmp_path / "fake.log"
    cli = fake_codex(tmp_path, "reverse-approval", log=log)
    ws = tmp_path / "ws"
    ws.mkdir()
    stderr = tmp_path / "agent.stderr"
    argv = [sys.executable, "-m", "tests.e2e.test_acp_sdk_interop", cli, str(log), str(ws), str(stderr)]
    with trio.fail_after(STEP_BOUND * 6):
        done = await trio.run_process(argv, cwd=str(ROOT), env=agent_env(tmp_path), capture_stdout=True,
                                      capture_stderr=True, check=False)
    agent_stderr = stderr.read_text(errors="replace")[-3000:] if stderr.exists() else ""
    assert done.returncode == 0, (f"the SDK client failed:\n{done.stderr.decode(errors='replace')[-4000:]}\n"
                                  f"agent stderr:\n{agent_stderr}")
    summary = json.loads(done.stdout.decode().strip().splitlines()[-1])
    steps = {k: v for s in summary["steps"] for k, v in s.items()}
    assert steps["initialize"] == 1 and steps["loadSession"] is True
    assert steps["prompt"] == "end_turn"
    assert steps["open_permissions"] == 2, summary
    assert steps["cancel"] == "cancelled"
    assert steps["load"] is True and "user_message_chunk" in steps["replayed"]  # load replays before answering
    first, second = summary["permissions"]
    assert {"allow_once", "allow_always", "reject_once"} <= set(first["kinds"])
    text = "".join(u["content"]["text"] for u in summary["updates"]
                   if u.get("sessionUpdate") == "agent_message_chunk" and u["content"].get("type") == "text")
    assert "The command printed 42." in text
    decisions = [m["result"]["decision"] for m in read_log(log) if "method" not in m and "result" in m
                 and isinstance(m.get("result"), dict) and "decision" in m["result"]]
    assert decisions[0] == "accept" and "accept" not in decisions[1:], decisions  # the held one never granted
    assert summary["exit"] == 0, agent_stderr


if __name__ == "__main__":
    out = _client_main(*sys.argv[1:5])
    sys.stdout.write(json.dumps(out) + "\n")
