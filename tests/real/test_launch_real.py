"""Managed access and launch rebuilds against the real ``codex app-server`` (pinned) and the
loopback model, which here **requires** ``Authorization: Bearer <key>`` (401 otherwise)
(issue 19, R-LC-1..3, R-SET-3).

* a turn completes in managed mode: the key reached the provider (the mock saw its hash) and
  is in no event, no file under the home/workspace/tmp dir and not on the child's command line
  (``/proc/<pid>/cmdline``);
* a provider header change while idle rebuilds at once: the next turn runs on a new generation
  after a cold resume of the same thread, with the new header;
* a change during an active turn is applied right after it, before the queued next turn.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig, RuntimeState
from peer_fixtures.codex_home import codex_env
from peer_fixtures.mock_responses import MockResponsesServer

WAIT = 90
KEY = "sk-managed-real-7f3a9c21e8b44d0f"
KEY_SHA = hashlib.sha256(KEY.encode()).hexdigest()


@pytest.fixture
def bearer_model(mock_model: MockResponsesServer) -> MockResponsesServer:
    mock_model.require_bearer = KEY
    return mock_model


def _config(codex_bin: Path, home: Path, cwd: Path, model: MockResponsesServer, **provider: object) -> RuntimeConfig:
    prov = {"id": "corp", "name": "Corp", "baseUrl": model.base_url, "envKey": "CORP_API_KEY", **provider}
    return RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(home), cwd=str(cwd), env=codex_env(home),
                         access_mode="managed", provider=prov, api_key=KEY)


def _files_with(root: Path, needle: bytes) -> list[Path]:
    hits = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes():
                hits.append(p)
        except OSError:
            pass
    return hits


async def _settled(rt, generation: int) -> None:
    with trio.fail_after(WAIT):
        while rt.generation < generation or rt.busy or rt.state is not RuntimeState.READY:
            await rt.wait_state(RuntimeState.READY, RuntimeState.STOPPED)
            await trio.testing.wait_all_tasks_blocked()


async def test_r_lc_3_managed_turn_key_only_in_the_env(codex_bin, codex_home, real_cwd, bearer_model, tmp_path):
    cfg = _config(codex_bin, codex_home, real_cwd, bearer_model)
    events = []
    async with codexrt.open_runtime(cfg) as rt:
        with rt.subscribe() as stream:
            with trio.fail_after(WAIT):
                result = await rt.send("hello [[mock:text:managed ok]]").wait()
            assert result.status == "completed", result
            assert result.final_text == "managed ok"
            cmdline = Path(f"/proc/{rt.conn.pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{rt.conn.pid}/environ").read_bytes().split(b"\0")
            while (ev := stream.get_nowait()) is not None:
                events.append(ev)
    reqs = bearer_model.model_requests()
    assert reqs and all(r.bearer_sha256 == KEY_SHA and r.outcome != "401" for r in reqs)
    assert b"model_providers.corp" in cmdline and KEY.encode() not in cmdline
    assert f"CORP_API_KEY={KEY}".encode() in environ  # the key's one way in
    assert not [e for e in environ if KEY.encode() in e and not e.startswith(b"CORP_API_KEY=")]
    assert KEY not in "\n".join(repr(e.to_wire()) for e in events)
    assert _files_with(tmp_path, KEY.encode()) == []
    assert "[REDACTED]" in rt._redactor(f"key={KEY}") and KEY not in rt._redactor(f"x {KEY} y")


async def test_r_lc_3_managed_wrong_key_is_refused_by_the_model(codex_bin, codex_home, real_cwd, bearer_model):
    """The mock really requires the key: with another one the turn fails (401), not completes."""
    cfg = _config(codex_bin, codex_home, real_cwd, bearer_model)
    import attrs

    cfg = attrs.evolve(cfg, api_key="sk-wrong-key-000000000000")
    async with codexrt.open_runtime(cfg) as rt:
        with trio.fail_after(WAIT):
            result = await rt.send("hello").wait()
    assert result.status == "failed"
    assert {r.outcome for r in bearer_model.model_requests()} == {"401"}


async def test_r_lc_2_header_change_idle_rebuilds_and_resumes_the_thread(codex_bin, codex_home, real_cwd,
                                                                         bearer_model):
    cfg = _config(codex_bin, codex_home, real_cwd, bearer_model, headers={"X-Org": "org-one"})
    async with codexrt.open_runtime(cfg) as rt:
        with trio.fail_after(WAIT):
            first = await rt.send("one [[mock:text:first]]").wait()
        assert first.status == "completed", first
        gen = rt.generation
        old_pid = rt.conn.pid
        with rt.subscribe() as stream:
            assert rt.update_launch(provider={**cfg.provider, "headers": {"X-Org": "org-two"}}) == "immediate"
            await _settled(rt, gen + 1)
            kinds = []
            while (ev := stream.get_nowait()) is not None:
                kinds.append((ev.kind, ev.payload))
        assert ("threadResumed", {"cold": True, "thread": first.thread_id}) in kinds
        assert any(k == "runtimeReset" for k, _ in kinds) and any(k == "sessionGrantsReset" for k, _ in kinds)
        assert rt.conn.pid != old_pid
        with trio.fail_after(WAIT):
            op = rt.send("two [[mock:text:second]]", thread_id=first.thread_id)
            second = await op.wait()
        assert second.status == "completed" and second.thread_id == first.thread_id
        assert op.generation == gen + 1
    headers = [r.headers.get("x-org") for r in bearer_model.model_requests()]
    assert headers[0] == "org-one" and headers[-1] == "org-two"


async def test_r_lc_2_change_during_a_turn_applies_before_the_next_queued(codex_bin, codex_home, real_cwd,
                                                                        bearer_model):
    cfg = _config(codex_bin, codex_home, real_cwd, bearer_model, headers={"X-Org": "org-a"})
    async with codexrt.open_runtime(cfg) as rt:
        with trio.fail_after(WAIT):
            first = rt.send("long [[mock:deltas:20:100]]")
            async for ev in first.events():
                if ev.kind == "turnStarted":
                    break
            queued = rt.send("next [[mock:text:after]]", thread_id=first.thread_id)
            gen = rt.generation
            assert rt.update_launch(provider={**cfg.provider, "headers": {"X-Org": "org-b"}}) == "deferred"
            r1 = await first.wait()
            r2 = await queued.wait()
        assert r1.status == "completed" and first.generation == gen
        assert r2.status == "completed", r2
        assert queued.generation == gen + 1 and r2.thread_id == r1.thread_id
    reqs = bearer_model.model_requests()
    assert [r.headers.get("x-org") for r in reqs] == ["org-a", "org-b"]
    assert "after" not in reqs[0].last_user_text and "next" in reqs[1].last_user_text


async def test_r_lc_4_cli_login_env_key_from_the_login_shell(codex_bin, codex_home, real_cwd, bearer_model,
                                                             tmp_path):
    """cli_login: the provider's env_key (in the real CODEX_HOME/config.toml) names a variable
    only a (fake) login shell exports; the runtime fetches it before spawning and the turn
    authenticates with it."""
    toml = (codex_home / "config.toml").read_text()
    (codex_home / "config.toml").write_text(
        toml.replace("[model_providers.mock]\n", '[model_providers.mock]\nenv_key = "LOOPBACK_SHELL_KEY"\n', 1))
    shell = tmp_path / "fake-login-shell"
    shell.write_text(f'#!/bin/sh\nexport LOOPBACK_SHELL_KEY={KEY}\n[ "$1" = -l ] && [ "$2" = -c ] && eval "$3"\n')
    shell.chmod(0o755)
    env = {**codex_env(codex_home), "SHELL": str(shell)}
    assert "LOOPBACK_SHELL_KEY" not in env
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(codex_home), cwd=str(real_cwd), env=env)
    async with codexrt.open_runtime(cfg) as rt:
        with trio.fail_after(WAIT):
            result = await rt.send("hi [[mock:text:shell key ok]]").wait()
    assert result.status == "completed", result
    assert [r.bearer_sha256 for r in bearer_model.model_requests()] == [KEY_SHA]
