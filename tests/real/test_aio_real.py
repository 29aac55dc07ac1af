"""``codexrt.aio`` against the real ``codex app-server`` and the loopback model: an asyncio
program with no Trio code of its own (issue 22; R-OP-4, R-OP-5, R-RT-7).

Each test is a plain function around ``asyncio.run``, as an asyncio user writes it; every wait
is bounded by ``asyncio.timeout``. The mock's request log proves the turn was sent once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import codexrt.aio
from codexrt import RuntimeConfig, Settings
from tests._support import process_exists

WAIT = 60


def _config(codex_bin: Path, env: dict[str, str], cwd: Path) -> RuntimeConfig:
    return RuntimeConfig(codex_bin=str(codex_bin), env=env, cwd=str(cwd), settings=Settings(cwd=str(cwd)))



def test_aio_real_turn_streams_while_a_ticker_keeps_ticking(codex_bin, real_env, real_cwd, mock_model):
    async def main():
        ticks_during_turn = 0
        streaming = False

        async def ticker():
            nonlocal ticks_during_turn
            while True:
                await asyncio.sleep(0.01)
                if streaming:
                    ticks_during_turn += 1

        tick = asyncio.create_task(ticker())
        async with asyncio.timeout(WAIT), codexrt.aio.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
            op = rt.send("count [[mock:deltas:40:25]]")  # ~1 s of streaming
            text = []
            async for ev in op.events():
                if ev.kind == "turnStarted":
                    streaming = True
                if ev.is_delta and ev.payload.get("stream") == "item/agentMessage/delta":
                    text.append(ev.payload["delta"])
            streaming = False
            result = await op.wait()
            pid = (await rt.snapshot())["pid"]
        tick.cancel()
        return "".join(text), result, pid, ticks_during_turn

    text, result, pid, ticks = asyncio.run(main())
    assert result.status == "completed", result
    assert text == "".join(f"d{i} " for i in range(40)) == result.final_text
    assert ticks >= 10, f"the asyncio ticker ticked only {ticks} times while the turn streamed"
    assert not process_exists(pid), "leaving the block reaps the app-server"
    assert len(mock_model.requests_with_user_text("count")) == 1


def test_aio_real_timeout_around_the_block_stops_a_hanging_turn_and_leaves_no_child(
        codex_bin, real_env, real_cwd, mock_model):
    seen: dict[str, object] = {}

    async def main():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(8):
                async with codexrt.aio.open_runtime(_config(codex_bin, real_env, real_cwd)) as rt:
                    op = rt.send("hang please [[mock:hang]]")
                    async for ev in op.events():
                        if ev.kind == "turnStarted":
                            seen["pid"] = (await rt.snapshot())["pid"]
                        seen["last"] = ev.kind
                    seen["result"] = await op.wait()

    asyncio.run(main())
    assert seen.get("pid"), "the turn never started"
    assert "result" not in seen, "the hanging turn ended by itself"
    assert not process_exists(seen["pid"]), "the app-server outlived the cancelled block"
    assert len(mock_model.requests_with_user_text("hang please")) == 1
