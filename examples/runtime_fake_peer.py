"""The README's Trio loop against the scripted fake app-server: no Codex install needed.

    .venv/bin/python examples/runtime_fake_peer.py [SCENARIO]

SCENARIO is a bundled fake-peer scenario (default ``reverse-approval``: the turn asks for a
command approval, which this example declines — codexrt never approves by default).
"""

from __future__ import annotations

import sys

import trio

import codexrt


def fake_app_server(scenario: str):
    """A startup candidate that spawns the scripted fake app-server instead of ``codex``."""
    async def spawn() -> codexrt.ProcessTransport:
        return await codexrt.spawn_process_transport(
            [sys.executable, "-m", "peer_fixtures.fake_app_server", scenario])

    return spawn


async def main(scenario: str) -> int:
    config = codexrt.RuntimeConfig(transports=[fake_app_server(scenario)])
    async with codexrt.open_runtime(config) as rt:
        op = rt.send("Summarise this repository")
        async for ev in op.events():
            if ev.is_delta:
                print(ev.payload["delta"], end="", flush=True)
            elif ev.kind == "interactionRequested":
                print(f"[approval requested: {ev.payload['method']} → declining]")
                await rt.interactions[ev.payload["interactionKey"]].decline()
        result = await op.wait()
    print(f"\n[{result.status}] {result.final_text!r}")
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "reverse-approval"))
