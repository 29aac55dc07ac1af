"""Split from ``tests/e2e/test_context_probe.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import pytest

from codexrt._io._context_probe import ContextCapabilityProbe, schema_supports_additional_context
from codexrt._sansio._context import ContextDelivery, ContextFragments, prepare_input
from tests.e2e.test_context_probe import FRAGS, _SCHEMA_WITH, _SCHEMA_WITHOUT


def test_r_ctx_2_default_timeout_is_5s() -> None:
    assert ContextCapabilityProbe().timeout == 5.0
    with pytest.raises(ValueError):
        ContextCapabilityProbe(timeout=0)


def test_schema_check_is_strict_about_shape() -> None:
    assert schema_supports_additional_context(_SCHEMA_WITH)
    assert not schema_supports_additional_context(_SCHEMA_WITHOUT)
    assert not schema_supports_additional_context({"properties": {"additionalContext": True}})
    assert not schema_supports_additional_context([])


def test_r_ctx_3_r_ctx_4_prepare_input_follows_the_decision() -> None:
    el = [{"byteRange": {"start": 0, "end": 3}, "placeholder": "@ab"}]
    imgs = [{"type": "localImage", "path": "/1.png"}, {"type": "image", "url": "u2"}]
    sup = prepare_input("@ab hi", FRAGS, ContextDelivery.ADDITIONAL_CONTEXT, images=imgs, text_elements=el)
    assert sup.text == "@ab hi" and list(sup.text_elements) == el
    assert sup.additional_context == FRAGS.to_additional_context()
    items = sup.input_items()
    assert items[0] == {"type": "text", "text": "@ab hi", "text_elements": el} and items[1:] == imgs
    fb = prepare_input("@ab hi", FRAGS, ContextDelivery.TEXT_CONVENTION, images=imgs, text_elements=el)
    assert fb.additional_context is None and fb.text.startswith("# Context from my IDE setup:")
    r = fb.text_elements[0]["byteRange"]
    assert fb.text.encode()[r["start"] : r["end"]] == b"@ab"
    none = prepare_input("hi", ContextFragments(), ContextDelivery.NONE)
    assert (none.text, none.additional_context) == ("hi", None)
