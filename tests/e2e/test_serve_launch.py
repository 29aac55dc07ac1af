"""``codexrt serve`` launch configuration end to end with the fake app-server (R-LC-1..3):
``codex.configureLaunch`` and ``--access-mode managed``. The fake CLI is a shell wrapper that
records its arguments and checks (in the child, without writing it) that the key arrived under
the provider's envKey; every stdout line is schema-checked by :class:`ServeProcess`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.e2e.test_serve_e2e import ROOT, ServeProcess, pid_alive

SECRET = "sk-serve-managed-0123456789"


def recording_cli(tmp_path: Path, scenario: str = "handshake-ok") -> tuple[str, Path]:
    log = tmp_path / "launches.log"
    script = tmp_path / "fake-codex"
    cmd = shlex.join([sys.executable, "-m", "peer_fixtures.fake_app_server", scenario])
    script.write_text(
        "#!/bin/sh\n"
        f'printf "argv:%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        # the key is compared here, in the child: only the verdict is written
        f'if [ "${{CORP_KEY:-}}" = {shlex.quote(SECRET)} ]; then echo key:CORP_KEY >> {shlex.quote(str(log))}; '
        f'else echo key:absent >> {shlex.quote(str(log))}; fi\n'
        f"cd {shlex.quote(str(ROOT))}\nexec {cmd}\n")
    script.chmod(0o755)
    return str(script), log


PROVIDER = {"id": "corp", "name": "Corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "CORP_KEY",
            "headers": {"X-Org": "org-header-value-77"}}


async def test_r_lc_2_configure_launch_rebuilds_idle_channel_and_cold_resumes(tmp_path):
    cli, log = recording_cli(tmp_path)
    async with ServeProcess.open(tmp_path, "--codex-bin", cli) as sp:
        first = await sp.request("codex.send", {"channelId": "c", "message": "one"})
        thread = first["result"]["threadId"]
        assert log.read_text().splitlines()[-1] == "key:absent"
        reply = await sp.request("codex.configureLaunch", {"accessMode": "managed", "provider": PROVIDER,
                                                           "apiKey": SECRET, "model": "mock-model"})
        assert reply["ok"], reply
        assert reply["result"]["rebuild"] == "immediate" and reply["result"]["channels"] == {"c": "immediate"}
        fingerprint = reply["result"]["fingerprint"]
        await sp.event("runtimeReset", lambda l: l["channelId"] == "c")
        resumed = await sp.event("threadResumed", lambda l: l["channelId"] == "c")
        assert resumed["payload"]["cold"] is True and resumed["threadId"] == thread
        await sp.event("sessionGrantsReset", lambda l: l["channelId"] == "c")
        second = await sp.request("codex.send", {"channelId": "c", "threadId": thread, "message": "two"})
        assert second["result"]["status"] == "completed"
        assert second["result"]["threadId"] == thread
        # the same configuration again: nothing to do
        again = await sp.request("codex.configureLaunch", {"accessMode": "managed", "provider": PROVIDER,
                                                           "apiKey": SECRET})
        assert again["result"] == {"fingerprint": fingerprint, "rebuild": "unchanged", "channels": {"c": "unchanged"}}
        # invalid: managed without a provider → an error reply, nothing changed
        bad = await sp.request("codex.configureLaunch", {"accessMode": "managed"})
        assert bad["ok"] is False
        status = await sp.request("status", {"channelId": "c"})
        pid = status["result"]["channels"][0]["pid"]
        assert await sp.finish() == 0
        stderr = sp.stderr()
    assert not pid_alive(pid)
    launches = log.read_text().splitlines()
    argvs = [l for l in launches if l.startswith("argv:")]
    assert len(argvs) == 2
    assert "model_providers.corp" not in argvs[0]
    assert 'model_provider="corp"' in argvs[1] and 'env_key="CORP_KEY"' in argvs[1]
    assert launches[-1] == "key:CORP_KEY"  # the key reached the child under envKey only
    everything = "\n".join(str(l) for l in sp.lines) + stderr + log.read_text()
    assert SECRET not in everything and "org-header-value-77" not in everything


async def test_r_lc_2_configure_launch_for_a_channel_with_no_child_is_immediate(tmp_path):
    cli, log = recording_cli(tmp_path)
    async with ServeProcess.open(tmp_path, "--codex-bin", cli) as sp:
        reply = await sp.request("codex.configureLaunch", {"channelId": "x", "accessMode": "cli_login",
                                                           "codexHome": str(tmp_path / "home")})
        assert reply["result"]["rebuild"] == "immediate" and reply["result"]["channels"] == {"x": "immediate"}
        off = await sp.request("codex.configureLaunch", {"channelId": "x", "accessMode": "inactive"})
        assert off["result"]["rebuild"] == "immediate"
        refused = await sp.request("codex.send", {"channelId": "x", "message": "hi"})
        assert refused["result"]["status"] == "failed"
        assert refused["result"]["error"]["code"] == "ACCESS_INACTIVE"
        assert await sp.finish() == 0
    assert not log.exists()  # nothing was ever spawned


async def test_r_lc_3_serve_access_mode_managed_flags(tmp_path):
    cli, log = recording_cli(tmp_path)
    import os

    env = {**os.environ, "MY_PROVIDER_KEY": SECRET, "ORG_HEADER": "org-header-value-77"}
    async with ServeProcess.open(tmp_path, "--codex-bin", cli, "--access-mode", "managed", "--provider-id", "corp",
                                 "--base-url", "http://127.0.0.1:9/v1", "--env-key", "CORP_KEY",
                                 "--api-key-env", "MY_PROVIDER_KEY", "--provider-header", "X-Org=ORG_HEADER",
                                 "--query-param", "api-version=7", env=env) as sp:
        done = await sp.request("codex.send", {"channelId": "c", "message": "one"})
        assert done["result"]["status"] == "completed"
        assert await sp.finish() == 0
        stderr = sp.stderr()
    launches = log.read_text().splitlines()
    assert 'query_params={ "api-version" = "7" }' in launches[0]
    assert 'env_http_headers={ "X-Org" = "CODEXRT_HTTP_HEADER_0" }' in launches[0]
    assert launches[1] == "key:CORP_KEY"
    assert SECRET not in "\n".join(map(str, sp.lines)) + stderr + log.read_text()


async def test_r_lc_2_configure_launch_during_a_turn_is_deferred_to_its_terminal(tmp_path):
    cli, log = recording_cli(tmp_path, "hang-turn")
    async with ServeProcess.open(tmp_path, "--codex-bin", cli) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "long"})
        started = await sp.event("turnStarted", lambda l: l["channelId"] == "c")
        reply = await sp.request("codex.configureLaunch", {"channelId": "c", "accessMode": "managed",
                                                           "provider": PROVIDER, "apiKey": SECRET})
        assert reply["result"]["rebuild"] == "deferred"
        assert not any(l["type"] == "daemon" and l["kind"] == "runtimeReset" for l in sp.lines)
        await sp.request("codex.abortTurn", {"channelId": "c"})
        done = await sp.response(rid)
        assert done["result"]["status"] == "interrupted"
        await sp.event("runtimeReset", lambda l: l["channelId"] == "c")
        resumed = await sp.event("threadResumed", lambda l: l["channelId"] == "c")
        assert resumed["threadId"] == started["threadId"] and resumed["payload"]["cold"] is True
        assert await sp.finish() == 0
    launches = log.read_text().splitlines()
    assert launches[-1] == "key:CORP_KEY" and 'model_provider="corp"' in launches[-2]
