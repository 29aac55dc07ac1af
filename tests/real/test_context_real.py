"""IDE context end to end through ``Runtime.send`` on the pinned real binary (R-CTX-1 … R-CTX-4).

Recorded answer: the pinned codex-cli 0.169.0 **supports** ``turn/start.additionalContext``
(the probe reads ``v2/TurnStartParams.json`` of ``generate-json-schema --experimental``). The
loopback model sees the fragments as developer messages ``<key>value</key>`` and the user text
untouched; with the decision forced to the fallback, it sees the text convention instead.
"""

from __future__ import annotations

import json

import trio

import codexrt
from codexrt import RuntimeConfig
from codexrt._sansio._context import ActiveFile, ContextDelivery, EditorState


class ForcedFallback:
    async def decide(self, fragments, *, cli, env, generation):
        return ContextDelivery.TEXT_CONVENTION if fragments else ContextDelivery.NONE


STATE = EditorState(active_file=ActiveFile("src/app.py", (3, 4)), open_tabs=["README.md"])


async def _send(cfg, *, fallback=False):
    async with codexrt.open_runtime(cfg) as rt:
        if fallback:
            rt.probe = ForcedFallback()
        acks = []
        op = rt.send("please look 🎉", editor_state=STATE)
        async for ev in op.events():
            if ev.kind == "operationAcked":
                acks.append(ev.payload.get("contextDelivery"))
        result = await op.wait()
        return rt, result, acks


async def test_r_ctx_2_r_ctx_3_real_send_context_travels_as_the_probe_decided(codex_bin, codex_home, real_env,
                                                                             real_cwd, mock_model):
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), env=real_env, cwd=str(real_cwd))
    with trio.fail_after(60):
        rt, result, acks = await _send(cfg)
    assert result.status == "completed"
    probe = rt.probe.statistics().cached
    assert probe is not None and probe.supported and probe.cli[0] == str(codex_bin)  # recorded: 0.169.0 supports it
    (req,) = mock_model.model_requests()
    dev = json.dumps([i for i in req.input if i.get("role") == "developer"], ensure_ascii=False)
    assert req.last_user_text == "please look 🎉"
    assert "<ide_context>Active file: src/app.py\\nSelected lines 3-4</ide_context>" in dev
    assert acks in ([], ["additionalContext"])  # the ack may come after a fast terminal (then none)


async def test_r_ctx_4_real_send_with_the_fallback_wraps_the_text(codex_bin, codex_home, real_env, real_cwd,
                                                                  mock_model):
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), env=real_env, cwd=str(real_cwd))
    with trio.fail_after(60):
        _, result, _ = await _send(cfg, fallback=True)
    assert result.status == "completed"
    (req,) = mock_model.model_requests()
    assert req.last_user_text.startswith("# Context from my IDE setup:\n\n## Active file: src/app.py")
    assert req.last_user_text.endswith("## My request for Codex:\nplease look 🎉")
