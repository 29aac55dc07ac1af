"""Run one turn through codexrt against the scripted fake app-server, printing its events.

    .venv/bin/python examples/runtime_fake_peer.py

No Codex install is needed: the transport is the stdio fake peer from ``peer_fixtures``.
Swap ``transports=[...]`` for ``codex_bin="/path/to/codex"`` to talk to a real app-server.
"""

import sys

import trio

import codexrt


async def fake_peer() -> codexrt.ProcessTransport:
    return await codexrt.spawn_process_transport(
        [sys.executable, "-m", "peer_fixtures.fake_app_server", "handshake-ok"])


async def main() -> int:
    async with codexrt.open_runtime(transports=[fake_peer]) as rt:
        op = rt.send("Say hello", client_message_id="example-1")
        async for ev in op.events():
            if ev.kind == "itemUpdated":
                print(ev.payload["delta"], end="", flush=True)
            else:
                print(f"\n[{ev.kind}]", end="")
        result = await op.wait()
        print(f"\nstatus={result.status} thread={result.thread_id}")
        return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(trio.run(main))
