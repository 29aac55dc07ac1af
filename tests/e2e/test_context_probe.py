"""The ``additionalContext`` capability probe (R-CTX-2, R-CTX-6), against fake CLIs (Python
scripts standing in for ``codex``) and against the pinned real binary.

Recorded answer: the pinned codex-cli **0.169.0 supports** ``additionalContext`` (it appears
in ``v2/TurnStartParams.json`` only with ``--experimental``); so does the older 0.147.0.

Fake CLIs run as real child processes, so no autojump clock here; limits are small real
bounds and nothing sleeps to order events.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import trio

from codexrt._io._context_probe import ContextCapabilityProbe, ProbeOutcome
from codexrt._sansio._context import ActiveFile, ContextDelivery, EditorState, build_context, prepare_input
from peer_fixtures.codex_bin import old_version, pinned_version
from tests._support import wait_until

FRAGS = build_context(EditorState(active_file=ActiveFile("src/app.py", (1, 2))))

_SCHEMA_WITH = {"properties": {"additionalContext": {"type": ["object", "null"]}, "input": {}}}
_SCHEMA_WITHOUT = {"properties": {"input": {}}}


def fake_cli(tmp_path: Path, name: str, body: str) -> tuple[Path, Path]:
    """A fake ``codex`` that logs each call (argv + PROBE_MARK env) then runs ``body``.
    ``out`` is the value after ``--out``. Returns (script, log)."""
    log = tmp_path / f"{name}.log"
    script = tmp_path / name
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps({'argv': sys.argv[1:], 'mark': os.environ.get('PROBE_MARK'), 'pid': os.getpid()}) + '\\n')\n"
        "out = sys.argv[sys.argv.index('--out') + 1]\n"
        "def write_schema(obj):\n"
        "    os.makedirs(os.path.join(out, 'v2'), exist_ok=True)\n"
        "    with open(os.path.join(out, 'v2', 'TurnStartParams.json'), 'w') as f:\n"
        "        f.write(obj if isinstance(obj, str) else json.dumps(obj))\n"
        f"{body}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def calls(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def assert_reaped(pid: int) -> None:
    with pytest.raises(ProcessLookupError):  # a zombie would still answer signal 0
        os.kill(pid, 0)


@pytest.fixture
def temp_root(tmp_path: Path) -> Path:
    d = tmp_path / "temp-root"
    d.mkdir()
    return d


ENV = {**os.environ, "PROBE_MARK": "same-env"}


async def test_r_ctx_2_supported_uses_same_cli_and_env_and_removes_temp(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", f"write_schema({_SCHEMA_WITH!r})")
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.fail_after(20):
        got = await probe.decide(FRAGS, cli=[sys.executable, str(cli)], env=ENV, generation=1)
    assert got is ContextDelivery.ADDITIONAL_CONTEXT
    (call,) = calls(log)
    assert call["mark"] == "same-env"
    out = call["argv"][call["argv"].index("--out") + 1]
    assert call["argv"] == ["app-server", "generate-json-schema", "--out", out, "--experimental"]
    assert Path(out).parent == temp_root
    assert list(temp_root.iterdir()) == []  # temp schema dir deleted
    cached = probe.cached([sys.executable, str(cli)], 1)
    assert cached is not None and cached.supported and cached.outcome is ProbeOutcome.SUPPORTED


async def test_r_ctx_2_cache_per_cli_and_generation(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", f"write_schema({_SCHEMA_WITH!r})")
    other, other_log = fake_cli(tmp_path, "codex2", f"write_schema({_SCHEMA_WITHOUT!r})")
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.fail_after(30):
        for _ in range(3):
            assert await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=1) is ContextDelivery.ADDITIONAL_CONTEXT
        assert len(calls(log)) == 1 and probe.statistics().cache_hits == 2
        # restarted child → new generation → probe again
        await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=2)
        assert len(calls(log)) == 2 and probe.cached([str(cli)], 1) is None
        # new CLI → probe again, and its own answer
        assert await probe.decide(FRAGS, cli=[str(other)], env=ENV, generation=2) is ContextDelivery.TEXT_CONVENTION
        assert len(calls(other_log)) == 1
        # explicit invalidation
        await probe.decide(FRAGS, cli=[str(other)], env=ENV, generation=2)
        assert len(calls(other_log)) == 1
        probe.invalidate()
        await probe.decide(FRAGS, cli=[str(other)], env=ENV, generation=2)
        assert len(calls(other_log)) == 2
    assert probe.statistics().runs == 4


async def test_r_ctx_2_concurrent_sends_share_one_probe(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", f"write_schema({_SCHEMA_WITH!r})")
    probe = ContextCapabilityProbe(temp_root=temp_root)
    answers: list[ContextDelivery] = []

    async def one() -> None:
        answers.append(await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=7))

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(one)
    assert answers == [ContextDelivery.ADDITIONAL_CONTEXT] * 4
    assert len(calls(log)) == 1


async def test_r_ctx_2_field_missing_falls_back(tmp_path: Path, temp_root: Path) -> None:
    cli, _ = fake_cli(tmp_path, "codex", f"write_schema({_SCHEMA_WITHOUT!r})")
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.fail_after(20):
        got = await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=1)
    assert got is ContextDelivery.TEXT_CONVENTION
    res = probe.cached([str(cli)], 1)
    assert res is not None and res.outcome is ProbeOutcome.FIELD_MISSING and not res.supported
    assert list(temp_root.iterdir()) == []


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        ("sys.stderr.write('error: unknown subcommand OPENAI_API_KEY=sk-abcdef1234567890\\n'); sys.exit(2)", ProbeOutcome.EXIT_CODE),
        ("pass", ProbeOutcome.SCHEMA_MISSING),
        ("write_schema('{not json')", ProbeOutcome.SCHEMA_UNREADABLE),
    ],
)
async def test_r_ctx_2_failures_fall_back(tmp_path: Path, temp_root: Path, body: str, outcome: ProbeOutcome) -> None:
    cli, _ = fake_cli(tmp_path, "codex", body)
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.fail_after(20):
        got = await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=1)
    assert got is ContextDelivery.TEXT_CONVENTION
    res = probe.cached([str(cli)], 1)
    assert res is not None and res.outcome is outcome
    assert "sk-abcdef1234567890" not in (res.detail or "")
    assert list(temp_root.iterdir()) == []


async def test_r_ctx_2_missing_cli_falls_back(tmp_path: Path, temp_root: Path) -> None:
    probe = ContextCapabilityProbe(temp_root=temp_root)
    got = await probe.decide(FRAGS, cli=[str(tmp_path / "no-such-codex")], env=ENV, generation=1)
    assert got is ContextDelivery.TEXT_CONVENTION
    res = probe.statistics().cached
    assert res is not None and res.outcome is ProbeOutcome.SPAWN_FAILED
    assert list(temp_root.iterdir()) == []


async def test_r_ctx_2_slow_cli_times_out_killed_reaped_temp_removed(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", "os.execvp('sleep', ['sleep', '60'])")
    probe = ContextCapabilityProbe(timeout=0.5, temp_root=temp_root)
    start = trio.current_time()
    with trio.fail_after(20):
        got = await probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=1)
    assert got is ContextDelivery.TEXT_CONVENTION
    assert 0.5 <= trio.current_time() - start < 10
    res = probe.cached([str(cli)], 1)
    assert res is not None and res.outcome is ProbeOutcome.TIMEOUT
    assert_reaped(calls(log)[0]["pid"])
    assert list(temp_root.iterdir()) == []


async def test_r_ctx_6_cancel_during_probe_kills_reaps_and_caches_nothing(tmp_path: Path, temp_root: Path) -> None:
    cli, log = fake_cli(tmp_path, "codex", "os.execvp('sleep', ['sleep', '60'])")
    probe = ContextCapabilityProbe(timeout=60, temp_root=temp_root)
    with trio.fail_after(20):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: probe.decide(FRAGS, cli=[str(cli)], env=ENV, generation=1))
                await wait_until(lambda: calls(log), "the probe's child to be up")
                scope.cancel()
    assert scope.cancelled_caught
    assert_reaped(calls(log)[0]["pid"])
    assert list(temp_root.iterdir()) == []
    assert probe.cached([str(cli)], 1) is None and probe.statistics().runs == 0


# --------------------------------------------------------------------------- real binary


def _real(version: str | None) -> Path:
    from tests._support import require_real_binary

    return require_real_binary(version, label=version or "pinned")


@pytest.mark.real
async def test_r_ctx_2_real_pinned_binary_supports_additional_context(tmp_path: Path, temp_root: Path) -> None:
    codex = _real(pinned_version())
    home = tmp_path / "codex-home"
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CODEX_HOME": str(home)}
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.fail_after(30):
        got = await probe.decide(FRAGS, cli=[str(codex)], env=env, generation=1)
    res = probe.cached([str(codex)], 1)
    assert res is not None, probe
    assert got is ContextDelivery.ADDITIONAL_CONTEXT, res.to_dict()
    assert res.outcome is ProbeOutcome.SUPPORTED and res.elapsed < 5
    assert list(temp_root.iterdir()) == []
    # never a thread or a turn: nothing was written under CODEX_HOME/sessions
    assert not (home / "sessions").exists()


@pytest.mark.real
async def test_r_ctx_2_real_old_binary_answer_is_recorded(temp_root: Path) -> None:
    codex = _real(old_version())
    probe = ContextCapabilityProbe(temp_root=temp_root)
    with trio.fail_after(30):
        res = await probe.probe(cli=[str(codex)], env=dict(os.environ), generation=1)
    assert res.supported, res.to_dict()  # 0.147.0 already has the experimental field


@pytest.mark.real
@pytest.mark.parametrize("force_fallback", [False, True])
def test_r_ctx_3_r_ctx_4_real_send_carries_context_the_way_the_probe_decided(
    tmp_path: Path, force_fallback: bool
) -> None:
    """End to end on the pinned binary: probe → prepare_input → raw ``turn/start``; the
    loopback model sees the fragments as developer context (supported) or inside the user
    text (fallback), and the visible user message keeps only the user's input when supported."""
    from peer_fixtures.codex_home import codex_env, make_codex_home
    from peer_fixtures.mock_responses import MockResponsesServer
    from peer_fixtures.real_server import spawn_app_server

    codex = _real(pinned_version())
    temp_root = tmp_path / "t"
    temp_root.mkdir()
    frags = build_context(
        EditorState(active_file=ActiveFile("src/app.py", (3, 4)), open_tabs=["README.md"])
    )
    probe = ContextCapabilityProbe(temp_root=temp_root)
    decided = trio.run(lambda: probe.decide(frags, cli=[str(codex)], env=dict(os.environ), generation=1))
    assert decided is ContextDelivery.ADDITIONAL_CONTEXT
    delivery = ContextDelivery.TEXT_CONVENTION if force_fallback else decided
    prepared = prepare_input("please look 🎉", frags, delivery)

    workspace = tmp_path / "ws"
    workspace.mkdir()
    with MockResponsesServer(log_path=tmp_path / "mock.jsonl") as mock:
        home = make_codex_home(tmp_path / "home", mock.base_url)
        with spawn_app_server(codex, codex_env(home), cwd=workspace) as srv:
            srv.initialize()
            thread = srv.call("thread/start", {"cwd": str(workspace)})["thread"]["id"]
            params = {"threadId": thread, "input": prepared.input_items()}
            if prepared.additional_context is not None:
                params["additionalContext"] = prepared.additional_context
            turn = srv.call("turn/start", params)["turn"]["id"]
            srv.wait_for(
                lambda m: m.get("method") == "turn/completed" and m["params"]["turn"]["id"] == turn,
                30.0,
                what="turn/completed",
            )
            (req,) = mock.wait_for_model_requests(1, timeout=10.0)
    dev_text = json.dumps([i for i in req.input if i.get("role") == "developer"], ensure_ascii=False)
    if force_fallback:
        assert req.last_user_text.startswith("# Context from my IDE setup:\n\n## Active file: src/app.py")
        assert req.last_user_text.endswith("## My request for Codex:\nplease look 🎉")
        assert "<ide_context>" not in dev_text
    else:
        assert req.last_user_text == "please look 🎉"
        assert "<ide_context>Active file: src/app.py\\nSelected lines 3-4</ide_context>" in dev_text
        assert "<open_tabs>Open tabs:\\n- README.md</open_tabs>" in dev_text
