"""Helper requests and catalogs against the real ``codex app-server`` (pinned 0.169.0) and the
loopback model (R-HLP-1, R-HLP-2, R-HLP-3, R-CAT-1).

The loopback model answers the title request through a ``[[mock:text:…]]`` directive carried
in the first user message (the helper quotes that message in its own prompt). The proofs are
the real server's answers (``thread/name/set`` shows up in ``thread/read``), the model requests
the mock saw, and ``CODEX_HOME`` on disk (an ephemeral helper thread writes no rollout).
"""

from __future__ import annotations

import trio

import codexrt
from codexrt import RuntimeConfig
from codexrt._features._catalog import list_models, list_skills, mcp_status, reload_mcp
from codexrt._features._helpers import generate_title, open_title_manager


def _cfg(codex_bin, codex_home, real_env, real_cwd):
    return RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), env=real_env, cwd=str(real_cwd))


def _rollouts(codex_home):
    return sorted(p.name for p in (codex_home / "sessions").rglob("*.jsonl")) if (codex_home / "sessions").exists() else []


async def test_r_hlp_3_real_title_for_a_new_thread_through_a_helper_child(codex_bin, codex_home, real_env, real_cwd,
                                                                         mock_model):
    cfg = _cfg(codex_bin, codex_home, real_env, real_cwd)
    with trio.fail_after(90):
        async with codexrt.open_runtime(cfg) as rt:
            async with open_title_manager(rt, timeout=60) as titles:
                op = rt.send("[[mock:text:Loopback title]] please look at the login bug")
                result = await op.wait()
                out = await titles.wait_outcome(op.thread_id)
            assert result.status == "completed"
            assert out.status == "saved" and out.title == "Loopback title", out
            read = await rt.conn.call("thread/read", {"threadId": op.thread_id})
            assert read["thread"]["name"] == "Loopback title"
            main_pid = rt.conn.pid
    # two model requests: the main turn and the helper's; the helper's carries its own instructions
    helper_reqs = [r for r in mock_model.model_requests() if "Title for a conversation" in r.last_user_text]
    assert len(helper_reqs) == 1 and "please look at the login bug" in helper_reqs[0].last_user_text
    assert main_pid is not None
    assert len(_rollouts(codex_home)) == 1  # the helper's thread was ephemeral: no rollout of its own


async def test_r_hlp_2_real_helper_timeout_reaps_its_child(codex_bin, codex_home, real_env, real_cwd, mock_model):
    cfg = _cfg(codex_bin, codex_home, real_env, real_cwd)
    with trio.fail_after(60):
        try:
            await generate_title(cfg, "[[mock:hang]] never answers", timeout=3.0)
        except codexrt.OperationFailed as exc:
            assert exc.code == "HELPER_TIMEOUT"
        else:  # pragma: no cover - the hang directive never answers
            raise AssertionError("a hanging helper must time out")


async def test_r_cat_1_real_model_list_skills_mcp_and_reload(codex_bin, codex_home, real_env, real_cwd, mock_model):
    cfg = _cfg(codex_bin, codex_home, real_env, real_cwd)
    with trio.fail_after(60):
        async with codexrt.open_runtime(cfg) as rt:
            cat = await list_models(rt, page_size=2)  # several pages on 0.169.0 (9 bundled models)
            hidden = await list_models(rt, include_hidden=True)
            skills = await list_skills(rt, [str(real_cwd)])
            mcp = await mcp_status(rt)
            reloaded = await reload_mcp(rt)  # params {} accepted (schema says params: null)
    assert cat.pages >= 2 and len(cat.models) >= 2
    assert all(m.slug and m.reasoning_efforts for m in cat.models)
    default = [m for m in cat.models if m.is_default]
    assert len(default) == 1 and default[0].default_reasoning_effort in default[0].reasoning_efforts
    assert {m.slug for m in cat.models} <= {m.slug for m in hidden.models}
    assert skills.skills and all(s.cwd == str(real_cwd) and s.path for s in skills.skills)
    assert mcp.servers == () and reloaded == {}
    assert mock_model.model_requests() == []  # catalogs never start a model turn
