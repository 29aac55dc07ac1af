"""Split from ``tests/trio/test_helpers.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import pytest

from codexrt import RuntimeConfig
from codexrt._features._helpers import clean_title, helper_config, refusal_for


def test_r_hlp_1_refusals_cover_every_interactive_method():
    for method in ("item/permissions/requestApproval", "item/tool/call", "item/tool/requestUserInput"):
        assert refusal_for(method)[0] == "error"
    # Result refusals are the one table's safe negative replies, which the reply validator accepts
    # (an earlier copy sent {"decision": "denied"}, which the schema does not allow).
    from codexrt._runtime._interactions import validate_reply

    for method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval",
                   "applyPatchApproval", "execCommandApproval", "mcpServer/elicitation/request"):
        how, value = refusal_for(method, {})
        assert how == "result"
        validate_reply(method, value, {})
        assert "accept" not in str(value) and "approved" not in str(value)


def test_helper_config_keeps_cli_env_and_home():
    main = RuntimeConfig(codex_bin="/x/codex", codex_home="/h", env={"A": "1"}, channel_id="c", idle_timeout=5.0)
    cfg = helper_config(main)
    assert (cfg.codex_bin, cfg.codex_home, cfg.env, cfg.idle_timeout) == ("/x/codex", "/h", {"A": "1"}, None)
    assert cfg.channel_id == "c#helper"


@pytest.mark.parametrize("raw,title", [
    ("# Fix the login bug.", "Fix the login bug"),
    ('Title: "Refactor parser"\nmore text', "Refactor parser"),
    ("**Speed up CI**", "Speed up CI"),
    ("  \n\n  plain   spaced   words ", "plain spaced words"),
])
def test_r_hlp_3_clean_title(raw, title):
    assert clean_title(raw) == title


def test_r_hlp_3_clean_title_is_bounded():
    t = clean_title("word " * 100)
    assert len(t) <= 80 and t.endswith("…")
