"""``codexrt serve`` as a sidecar on the real ``codex app-server`` (pinned) and the loopback
model: the quickstart's pipe example exactly as documented, and SIGTERM with pending commands
(issue 17; R-D-1, R-OP-5).
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import trio

from tests.e2e.test_serve_e2e import WAIT, ServeProcess, child_pid, pid_alive
from tests._support import schema_problem

ROOT = Path(__file__).resolve().parents[2]


def quickstart_serve_command() -> str:
    """The ``sh`` block of docs/quickstart.md's section 4, verbatim."""
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    section = text.split("## 4. As a sidecar", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "docs/quickstart.md section 4 lost its sh block"
    return block.group(1)


async def test_r_d_1_quickstart_printf_pipe_serve_real(codex_bin, codex_home, real_env, mock_model):
    """``printf '…' | .venv/bin/codexrt serve`` from docs/quickstart.md, run by ``sh`` from the
    repository root with ``CODEX_BIN`` set: the send's reply is ``completed`` (not
    ``cancelled``: stdin EOF finishes the accepted work), the streamed text equals the final
    text, serve exits 0 and its app-server is gone."""
    command = quickstart_serve_command()
    assert "codexrt serve" in command and "printf" in command
    env = {**real_env, "CODEX_BIN": str(codex_bin)}
    with trio.fail_after(120):
        proc = await trio.run_process(["sh", "-c", command], cwd=str(ROOT), env=env, capture_stdout=True,
                                      capture_stderr=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    lines = [json.loads(raw) for raw in proc.stdout.splitlines()]
    for line in lines:
        assert schema_problem(line, "outputLine") is None, line
    [reply] = [l for l in lines if l["type"] == "response"]
    assert reply["ok"] is True and reply["id"] == 1, reply
    result = reply["result"]
    assert result["status"] == "completed" and result["finalText"], result
    deltas = "".join(l["payload"]["delta"] for l in lines if l["type"] == "daemon" and l["kind"] == "itemUpdated"
                     and l["payload"]["stream"] == "item/agentMessage/delta")
    assert deltas == result["finalText"]
    pids = [l["payload"]["pid"] for l in lines if l["type"] == "daemon" and l["kind"] == "runtimeStateChanged"
            and l["payload"].get("to") == "READY"]
    assert len(pids) == 1 and not pid_alive(pids[0])


async def test_r_op_5_sigterm_real_replies_to_every_pending_command(tmp_path, codex_bin, codex_home, real_env,
                                                                     real_cwd, mock_model):
    """SIGTERM mid-stream with a queued send behind it: the running turn ``interrupted``, the
    queued one ``cancelled``, one reply each, the real app-server reaped, exit 0."""
    args = ("--codex-bin", str(codex_bin), "--codex-home", str(codex_home), "--cwd", str(real_cwd))
    async with ServeProcess.open(tmp_path, *args, env=real_env) as sp:
        running = await sp.send("codex.send", {"channelId": "c", "message": "[[mock:deltas:400:20]] stream slowly"})
        await sp.event("itemUpdated", timeout=60)
        queued = await sp.send("codex.send", {"channelId": "c", "message": "never runs"})
        await sp.event("operationQueued", lambda l: l["payload"]["requestId"] == queued)
        pid = await child_pid(sp)
        sp.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(WAIT + 15):
            while await sp._read_line() is not None:
                pass
            assert await sp.proc.wait() == 0
        by_id = {l["id"]: l for l in sp.lines if l["type"] == "response"}
        assert by_id[running]["result"]["status"] == "interrupted"
        assert by_id[queued]["result"]["status"] == "cancelled"
    assert not pid_alive(pid)
