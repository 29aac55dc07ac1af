"""Catalogs and slash commands against the scripted fake peer (R-CAT-1, R-CAT-2).

Proofs are the fake peer's received log (what was asked, how many pages) and the typed errors
that come back: a refused or looping catalog never turns into an empty answer.
"""

from __future__ import annotations

import pytest
import trio

import codexrt
from codexrt import CodexError, ConfigError, RemoteProtocolError, RpcError, RuntimeConfig
from codexrt._features._catalog import (
    list_models,
    list_skills,
    mcp_status,
    reload_mcp,
    run_catalog_command,
    start_slash_command,
)


def _model(slug, hidden=False, efforts=("low", "high")):
    return {"id": slug, "model": slug, "displayName": slug.upper(), "description": "", "hidden": hidden,
            "isDefault": False, "defaultReasoningEffort": efforts[0],
            "supportedReasoningEfforts": [{"reasoningEffort": e, "description": e} for e in efforts]}


def _pages(*pages):
    """model/list answered with these (data, nextCursor) pages in order."""
    return {"name": "model-pages", "defaults": True, "rules": [
        {"match": {"method": "model/list", "nth": i + 1}, "actions": [{"respond": {"data": data, "nextCursor": nxt}}]}
        for i, (data, nxt) in enumerate(pages)]}


def _rt(peers, scenario="handshake-ok", **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(scenario)], **kw))


async def test_r_cat_1_models_walk_every_page_with_slug_hidden_and_efforts(peers):
    scenario = _pages(([_model("a")], "c1"), ([_model("b", hidden=True, efforts=("medium",))], "c2"), ([], None))
    async with _rt(peers, scenario) as rt:
        cat = await list_models(rt, include_hidden=True, page_size=1)
    assert [(m.slug, m.hidden, m.reasoning_efforts) for m in cat.models] == [
        ("a", False, ("low", "high")), ("b", True, ("medium",))]
    assert cat.pages == 3 and [m.slug for m in cat.visible()] == ["a"]
    sent = [m["params"] for m in peers.received(0, "model/list")]
    assert sent == [{"includeHidden": True, "limit": 1}, {"includeHidden": True, "limit": 1, "cursor": "c1"},
                    {"includeHidden": True, "limit": 1, "cursor": "c2"}]
    assert cat.to_wire()["models"][1] == {"slug": "b", "id": "b", "displayName": "B", "hidden": True,
                                          "isDefault": False, "defaultReasoningEffort": "medium",
                                          "reasoningEfforts": ["medium"]}


async def test_r_cat_1_a_repeated_cursor_stops_with_an_error(peers):
    scenario = _pages(([_model("a")], "c1"), ([_model("b")], "c2"), ([_model("c")], "c1"))
    async with _rt(peers, scenario) as rt:
        with pytest.raises(RemoteProtocolError) as info:
            await list_models(rt)
    assert info.value.code == "CATALOG_CURSOR_REPEATED"
    assert len(peers.received(0, "model/list")) == 3


async def test_r_cat_1_past_the_page_limit_stops_with_an_error(peers):
    scenario = _pages(*[([_model(f"m{i}")], f"c{i}") for i in range(5)])
    async with _rt(peers, scenario) as rt:
        with pytest.raises(CodexError) as info:
            await list_models(rt, max_pages=3)
    assert info.value.code == "CATALOG_PAGE_LIMIT" and info.value.details["maxPages"] == 3
    assert len(peers.received(0, "model/list")) == 3


async def test_r_cat_1_native_errors_are_returned_not_swallowed(peers):
    refuse = {"name": "refuse", "defaults": True, "rules": [
        {"match": {"method": m}, "actions": [{"error": {"code": -32600, "message": f"no {m}"}}]}
        for m in ("model/list", "skills/list", "mcpServerStatus/list", "config/mcpServer/reload")]}
    async with _rt(peers, refuse) as rt:
        for call in (list_models(rt), list_skills(rt), mcp_status(rt), reload_mcp(rt)):
            with pytest.raises(RpcError):
                await call


async def test_r_cat_1_skills_by_cwd_keep_same_name_at_different_paths(peers):
    skills = {"name": "skills", "defaults": True, "rules": [{"match": {"method": "skills/list"}, "actions": [
        {"respond": {"data": [
            {"cwd": "/a", "errors": [], "skills": [
                {"name": "lint", "path": "/a/.codex/skills/lint/SKILL.md", "scope": "repo", "enabled": True,
                 "description": "x"},
                {"name": "lint", "path": "/home/u/.codex/skills/lint/SKILL.md", "scope": "user", "enabled": False,
                 "description": "y"}]},
            {"cwd": "/b", "errors": [{"path": "/b/bad", "message": "bad skill"}], "skills": []}]}}]}]}
    async with _rt(peers, skills) as rt:
        cat = await list_skills(rt, ["/a", "/b"], force_reload=True)
    assert [(s.name, s.path, s.enabled) for s in cat.by_cwd("/a")] == [
        ("lint", "/a/.codex/skills/lint/SKILL.md", True), ("lint", "/home/u/.codex/skills/lint/SKILL.md", False)]
    assert cat.errors == ({"cwd": "/b", "path": "/b/bad", "message": "bad skill"},)
    (sent,) = peers.received(0, "skills/list")
    assert sent["params"] == {"cwds": ["/a", "/b"], "forceReload": True}
    methods = {m.get("method") for m in peers.received(0)}
    assert "model/list" not in methods and "mcpServerStatus/list" not in methods  # skills load nothing else


async def test_r_cat_1_mcp_status_and_explicit_reload(peers):
    reload_ok = {"name": "reload", "defaults": True, "rules": [
        {"match": {"method": "config/mcpServer/reload"}, "actions": [{"respond": {}}]}]}
    async with _rt(peers, reload_ok) as rt:
        st = await mcp_status(rt)
        assert await reload_mcp(rt) == {}
        wire = await run_catalog_command(rt, "codex.getMcpStatus", {})
    assert st.pages == 1 and wire["nextCursor"] is None
    (sent,) = peers.received(0, "config/mcpServer/reload")
    assert sent["params"] == {}  # accepted by the real 0.169.0 (tests/real/test_helpers_real.py)


async def test_r_cat_1_inactive_access_spawns_nothing(peers):
    async with _rt(peers, access_mode="inactive") as rt:
        for call in (list_models(rt), list_skills(rt), mcp_status(rt), reload_mcp(rt)):
            with pytest.raises(ConfigError) as info:
                await call
            assert info.value.code == "ACCESS_INACTIVE"
    assert peers.peers == []


async def test_r_rt_2_a_catalog_walk_never_mixes_two_children(peers, nursery):
    """A restart between two pages fails the walk (CATALOG_STALE) instead of publishing an old
    client's answer into the new generation."""
    slow = {"name": "slow-pages", "defaults": True, "rules": [
        {"match": {"method": "model/list", "nth": 1}, "actions": [{"respond": {"data": [_model("a")], "nextCursor": "c1"}}]},
        {"match": {"method": "model/list", "nth": 2},
         "actions": [{"sleep": 5}, {"respond": {"data": [_model("b")], "nextCursor": None}}]}]}
    async with codexrt.open_runtime(RuntimeConfig(transports=[peers.sequence(slow, "handshake-ok")])) as rt:
        await rt.ensure_started()
        errors = []

        async def walk():
            try:
                await list_models(rt)
            except CodexError as exc:
                errors.append(exc)

        async with trio.open_nursery() as n:
            n.start_soon(walk)
            await peers.wait_received(0, "model/list", count=2, timeout=10)  # the second page is asked
            await rt.reset()
            await rt.ensure_started()
    assert len(errors) == 1 and errors[0].code in ("CATALOG_STALE", "CHILD_EXITED", "CLOSED")


# --------------------------------------------------------------------------- R-CAT-2

async def test_r_cat_2_compact_refused_is_an_error_never_started(peers):
    async with _rt(peers) as rt:
        first = rt.send("x")
        await first.wait()
        with pytest.raises(CodexError) as info:
            await start_slash_command(rt, "/compact", thread_id=first.thread_id)
    assert info.value.code == "RPC_ERROR"  # the fake has no thread/compact/start


async def test_r_cat_2_review_acknowledged_is_started(peers, autojump_clock):
    review_ok = {"name": "review-ok", "defaults": True, "rules": [
        {"match": {"method": "review/start"}, "actions": [
            {"respond": {"turn": {"id": "rv-1", "status": "inProgress", "items": []}, "reviewThreadId": "$thread_id"}}]}]}
    async with _rt(peers, review_ok) as rt:
        first = rt.send("x")
        await first.wait()
        res = await start_slash_command(rt, "/review", thread_id=first.thread_id)
        assert res.status == "started" and res.operation is not None
        rt.abort(res.operation)


SKILLS_TWO_LINTS = {"name": "skills", "defaults": True, "rules": [{"match": {"method": "skills/list"}, "actions": [
    {"respond": {"data": [{"cwd": "/a", "errors": [], "skills": [
        {"name": "lint", "path": "/a/.codex/skills/lint/SKILL.md", "scope": "repo", "enabled": True, "description": ""},
        {"name": "lint", "path": "/home/u/.codex/skills/lint/SKILL.md", "scope": "user", "enabled": True,
         "description": ""},
        {"name": "fmt", "path": "/a/.codex/skills/fmt/SKILL.md", "scope": "repo", "enabled": False,
         "description": ""}]}]}}]}]}


async def test_r_cat_1_a_refresh_clears_stale_selections_and_keeps_the_rest(peers):
    repo_lint = {"name": "lint", "path": "/a/.codex/skills/lint/SKILL.md", "cwd": "/a"}
    user_lint = {"name": "lint", "path": "/home/u/.codex/skills/lint/SKILL.md"}
    gone = {"name": "lint", "path": "/old/skills/lint/SKILL.md"}  # same name, a path no longer listed
    disabled = {"name": "fmt", "path": "/a/.codex/skills/fmt/SKILL.md"}
    other_cwd = {"name": "lint", "path": "/a/.codex/skills/lint/SKILL.md", "cwd": "/b"}
    async with _rt(peers, SKILLS_TWO_LINTS) as rt:
        wire = await run_catalog_command(rt, "codex.listSkills", {
            "cwds": ["/a"], "selected": [repo_lint, user_lint, gone, disabled, other_cwd]})
        plain = await run_catalog_command(rt, "codex.listSkills", {"cwds": ["/a"]})
        with pytest.raises(ConfigError) as info:
            await run_catalog_command(rt, "codex.listSkills", {"selected": [{"name": "x"}]})
    assert wire["selected"] == [repo_lint, {**user_lint, "cwd": None}]
    assert wire["stale"] == [{**gone, "cwd": None}, {**disabled, "cwd": None}, other_cwd]
    assert plain["selected"] == plain["stale"] == []
    assert info.value.code == "INVALID_PARAMS"
    sent = [m["params"] for m in peers.received(0, "skills/list")]
    assert all("selected" not in p for p in sent)  # the selection is ours, never sent to skills/list


async def test_r_cat_1_selected_skills_travel_as_native_skill_input(peers):
    from codexrt._features._catalog import SkillRef

    async with _rt(peers) as rt:
        res = await rt.send("use them", skills=[SkillRef("lint", "/a/.codex/skills/lint/SKILL.md", "/a"),
                                                {"name": "fmt", "path": "/a/fmt/SKILL.md"}]).wait()
        with pytest.raises(ConfigError):
            rt.send("bad", skills=[{"name": "x"}])
    assert res.status == "completed"
    (tt,) = peers.received(0, "turn/start")
    assert tt["params"]["input"] == [
        {"type": "text", "text": "use them", "text_elements": []},
        {"type": "skill", "name": "lint", "path": "/a/.codex/skills/lint/SKILL.md"},
        {"type": "skill", "name": "fmt", "path": "/a/fmt/SKILL.md"}]
