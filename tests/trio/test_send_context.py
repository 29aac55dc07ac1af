"""IDE context through ``Runtime.send`` against the scripted fake peer (R-CTX-1 … R-CTX-4, R-CTX-6).

The capability probe is replaced by a recording stub (the real probe has its own tests in
``tests/e2e/test_context_probe.py``; the real binary end to end is ``tests/real/test_context_real.py``).
Proofs are what the fake peer received: exactly what ``turn/start`` carried, and that a cancelled
send wrote no ``turn/start``.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import codexrt
from codexrt import RuntimeConfig
from codexrt._sansio._context import (
    CONTEXT_HEADER,
    REQUEST_HEADER,
    ActiveFile,
    ContextDelivery,
    EditorState,
    FileReference,
)


class StubProbe:
    """Answers ``decide`` with a fixed delivery; optionally blocks until released."""

    def __init__(self, delivery: ContextDelivery, *, block: bool = False) -> None:
        self.delivery = delivery
        self.calls: list[dict] = []
        self.block = block
        self.entered = trio.Event()
        self.release = trio.Event()

    async def decide(self, fragments, *, cli, env, generation):
        self.calls.append({"keys": fragments.keys(), "cli": tuple(cli), "generation": generation})
        self.entered.set()
        if self.block:
            await self.release.wait()
        return self.delivery if fragments else ContextDelivery.NONE


STATE = EditorState(active_file=ActiveFile("src/app.py", (3, 4)), open_tabs=["README.md", "src/app.py"],
                    referenced_files=[FileReference("src/b.py")])


def _rt(peers, scenario="handshake-ok"):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(scenario)]))


def _turn_start(peers):
    return [m["params"] for m in peers.received(0, "turn/start")]


async def test_r_ctx_1_r_ctx_3_supported_context_travels_beside_the_raw_text(peers):
    async with _rt(peers) as rt:
        rt.probe = probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT)
        op = rt.send("fix it 🎉", editor_state=STATE,
                     text_elements=[{"byteRange": {"start": 0, "end": 3}, "placeholder": "fix"}])
        acked = [ev async for ev in op.events() if ev.kind == "operationAcked"]
        assert (await op.wait()).status == "completed"
    (params,) = _turn_start(peers)
    assert params["input"] == [{"type": "text", "text": "fix it 🎉",
                                "text_elements": [{"byteRange": {"start": 0, "end": 3}, "placeholder": "fix"}]}]
    assert params["additionalContext"] == {
        "ide_context": {"kind": "application", "value": "Active file: src/app.py\nSelected lines 3-4"},
        "open_tabs": {"kind": "application", "value": "Open tabs:\n- README.md"},
        "referenced_files_0": {"kind": "application", "value": "Referenced file: src/b.py"},
    }
    assert probe.calls[0]["keys"] == ("ide_context", "open_tabs", "referenced_files_0")
    assert probe.calls[0]["generation"] == 1 and probe.calls[0]["cli"] == ()  # memory transport: no CLI argv
    assert acked and acked[0].payload["contextDelivery"] == "additionalContext"


async def test_r_ctx_4_fallback_wraps_text_keeps_image_order_and_shifts_utf8_offsets(peers):
    async with _rt(peers) as rt:
        rt.probe = StubProbe(ContextDelivery.TEXT_CONVENTION)
        op = rt.send("é🎉 x", editor_state=STATE, images=["/tmp/a.png", "https://x/b.png"],
                     text_elements=[{"byteRange": {"start": 7, "end": 8}}])
        assert (await op.wait()).status == "completed"
    (params,) = _turn_start(peers)
    text_item, img1, img2 = params["input"]
    assert "additionalContext" not in params
    assert text_item["text"].startswith(CONTEXT_HEADER + "\n\n## Active file: src/app.py")
    assert text_item["text"].endswith(REQUEST_HEADER + "\n" + "é🎉 x")
    rng = text_item["text_elements"][0]["byteRange"]
    assert text_item["text"].encode("utf-8")[rng["start"]:rng["end"]] == b"x"
    assert (img1, img2) == ({"type": "localImage", "path": "/tmp/a.png"}, {"type": "image", "url": "https://x/b.png"})


async def test_r_ctx_1_fragments_are_frozen_at_submit_time(peers):
    """Editor state changes after the submit never reach the queued send."""
    async with _rt(peers) as rt:
        rt.probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT)
        tabs = ["one.py"]
        state = EditorState(open_tabs=tabs)
        op = rt.send("hi", editor_state=state)
        tabs.append("two.py")  # the host's list changes; EditorState copied it into a tuple
        assert (await op.wait()).status == "completed"
    (params,) = _turn_start(peers)
    assert params["additionalContext"]["open_tabs"]["value"] == "Open tabs:\n- one.py"


async def test_r_ctx_2_empty_context_is_never_probed(peers):
    async with _rt(peers) as rt:
        rt.probe = probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT)
        op = rt.send("plain", editor_state=EditorState())
        assert (await op.wait()).status == "completed"
    assert probe.calls == []
    (params,) = _turn_start(peers)
    assert "additionalContext" not in params and params["input"][0]["text"] == "plain"


async def test_r_ctx_6_cancelled_before_the_probe_never_probes_nor_starts(peers):
    async with _rt(peers) as rt:
        rt.probe = probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT)
        first = rt.send("first")
        queued = rt.send("second", editor_state=STATE)
        assert rt.abort(queued) == "cancelledQueued"
        await first.wait()
        assert (await queued.wait()).status == "cancelled"
    assert probe.calls == []
    assert [p["input"][0]["text"] for p in _turn_start(peers)] == ["first"]


async def test_r_ctx_6_cancel_during_the_probe_writes_no_turn(peers):
    async with _rt(peers) as rt:
        rt.probe = probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT, block=True)
        first = rt.send("warm up")
        await first.wait()
        op = rt.send("with context", thread_id=first.thread_id, editor_state=STATE)
        await probe.entered.wait()
        assert rt.abort(op) == "cancelIntent"
        probe.release.set()
        result = await op.wait()
    assert result.status == "cancelled" and "probe" in result.error.message
    assert len(_turn_start(peers)) == 1  # only the warm-up turn


async def test_r_ctx_1_ready_fragments_travel_verbatim_or_as_sections(peers):
    ready = {"my-app/colour": {"kind": "application", "value": "Teal is the colour."}}
    async with _rt(peers) as rt:
        rt.probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT)
        a = rt.send("one", additional_context=ready)
        await a.wait()
        rt.probe = StubProbe(ContextDelivery.TEXT_CONVENTION)
        b = rt.send("two", thread_id=a.thread_id, additional_context=ready)
        await b.wait()
    first, second = _turn_start(peers)
    assert first["additionalContext"] == ready and first["input"][0]["text"] == "one"
    assert "additionalContext" not in second
    assert second["input"][0]["text"] == f"{CONTEXT_HEADER}\n\n## Teal is the colour.\n\n{REQUEST_HEADER}\ntwo"


async def test_r_ctx_4_untrusted_context_without_support_fails_without_a_turn(peers):
    async with _rt(peers) as rt:
        rt.probe = StubProbe(ContextDelivery.TEXT_CONVENTION)
        op = rt.send("x", additional_context={"web/1": {"kind": "untrusted", "name": "page", "value": "IGNORE"}})
        result = await op.wait()
    assert result.status == "failed" and result.error.code == "CONTEXT_NOT_DELIVERABLE"
    assert _turn_start(peers) == []


async def test_r_ctx_1_malformed_context_is_refused_at_submit(peers):
    async with _rt(peers) as rt:
        with pytest.raises(codexrt.ConfigError):
            rt.send("x", additional_context={"k": {"kind": "weird", "value": "v"}})
        with pytest.raises(codexrt.ConfigError):
            rt.send("x", editor_state=STATE, context=object())  # type: ignore[arg-type]
        with pytest.raises(codexrt.ConfigError):
            rt.send("x", editor_state=STATE, additional_context={"ide_context": {"kind": "application", "value": "v"}})
    assert peers.peers == []  # nothing was even started


async def test_r_ctx_4_text_elements_outside_the_text_fail_the_send_without_a_turn(peers):
    async with _rt(peers) as rt:
        rt.probe = StubProbe(ContextDelivery.TEXT_CONVENTION)
        op = rt.send("ab", editor_state=STATE, text_elements=[{"byteRange": {"start": 0, "end": 9}}])
        result = await op.wait()
    assert result.status == "failed" and result.error.code == "INVALID_TEXT_ELEMENTS"
    assert _turn_start(peers) == []


async def test_r_ctx_2_real_probe_without_a_cli_falls_back_to_the_text_convention(peers):
    """A runtime started from transports has no CLI to ask: the default probe is not run and
    the context travels in the text (never a failed or re-sent turn/start)."""
    async with _rt(peers) as rt:
        op = rt.send("q", editor_state=STATE)
        assert (await op.wait()).status == "completed"
        assert rt.probe.statistics().runs == 0
    (params,) = _turn_start(peers)
    assert params["input"][0]["text"].startswith(CONTEXT_HEADER) and "additionalContext" not in params


async def test_input_limit_is_checked_before_a_thread_is_created(peers):
    """The app-server refuses more than MAX_INPUT_CHARS characters of input only at
    ``turn/start`` — after a new thread exists (issue 31). codexrt measures the text the server
    would get, context included when it travels in the text convention, before anything."""
    from codexrt import InvalidParams
    from codexrt._sansio._context import MAX_INPUT_CHARS

    async with _rt(peers) as rt:
        with pytest.raises(InvalidParams):  # the text alone: refused at submit, nothing queued
            rt.send("x" * (MAX_INPUT_CHARS + 1))
        rt.probe = StubProbe(ContextDelivery.TEXT_CONVENTION)
        op = rt.send("x" * MAX_INPUT_CHARS, editor_state=STATE)  # fits alone, not with its context
        result = await op.wait()
        assert result.status == "failed" and isinstance(result.error, InvalidParams)
        assert result.error.details["maxChars"] == MAX_INPUT_CHARS < result.error.details["actualChars"]
        rt.probe = StubProbe(ContextDelivery.ADDITIONAL_CONTEXT)  # beside the text: it fits
        assert (await rt.send("x" * MAX_INPUT_CHARS, editor_state=STATE).wait()).status == "completed"
    assert [m.get("method") for m in peers.received(0) if m.get("method") in ("thread/start", "turn/start")] == [
        "thread/start", "turn/start"]  # only the send that fits created anything
