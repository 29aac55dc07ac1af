"""Split from ``tests/trio/test_history_privacy.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

from codexrt._sansio._projection import Projector


def test_r_priv_2_projector_mask_hook_sees_every_finished_record():
    seen = []

    def mask(r):
        seen.append(r.kind)
        return r

    p = Projector("th", mask=mask)
    p.add_native_turn({"id": "t1", "status": "completed", "items": [
        {"type": "userMessage", "id": "u1", "content": [{"type": "text", "text": "hi"}]},
        {"type": "agentMessage", "id": "a1", "text": "hello"}]})
    assert [r.kind for r in p.records()] == ["userMessage", "assistantMessage"]
    assert seen == ["userMessage", "assistantMessage"]
