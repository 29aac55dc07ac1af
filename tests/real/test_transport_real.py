"""Attached runtimes against the real ``codex app-server`` (pinned 0.169.0) listening on
``ws://127.0.0.1:<free port>`` (with and without ``--ws-auth capability-token``) and on
``unix://<tmp path>`` (issue 13, R-WIRE-10, R-RT-4, R-OP-5, R-OP-7).

The test starts the server itself (codexrt only attaches), drives one runtime through the
handshake, a streamed turn, an approval and an interrupt, then kills the server mid-turn and
starts a new one on the same endpoint: the lost turn fails once, the next send reconnects and
resumes the thread, and the loopback model's request log proves the lost prompt was sent once.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import trio

import codexrt
from codexrt import RuntimeConfig, RuntimeState, Settings
from codexrt._sansio._errors import ChildExited
from codexrt._io._retry import Backoff, call_read_only
from codexrt._io._transport_ws import Endpoint, EndpointUnavailable, check_ready, connect_endpoint
from tests._support import wait_until

WAIT = 60
TOKEN = "cap-token-0169-d41d8cd98f00b204"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ListeningServer:
    """``codex app-server --listen URL`` as a child of the test (never of codexrt)."""

    def __init__(self, codex_bin: Path, env: dict[str, str], cwd: Path, url: str, extra: list[str],
                 log: Path) -> None:
        self.argv = [str(codex_bin), "app-server", "--listen", url, *extra]
        self.env, self.cwd, self.url, self.log = env, cwd, url, log
        self.proc: trio.Process | None = None

    async def start(self) -> None:
        with open(self.log, "ab") as err:
            self.proc = await trio.lowlevel.open_process(self.argv, env=self.env, cwd=str(self.cwd),
                                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        endpoint = Endpoint.parse(self.url)
        with trio.fail_after(WAIT):
            while True:
                assert self.proc.returncode is None, self.log.read_text(errors="replace")[-2000:]
                try:
                    if endpoint.scheme == "ws":
                        if await check_ready(endpoint, timeout=2):
                            return
                    else:
                        transport = await connect_endpoint(endpoint, timeout=2)
                        await transport.aclose()
                        return
                except EndpointUnavailable:
                    pass
                await trio.sleep(0.05)

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        with trio.fail_after(WAIT):
            await self.proc.wait()


@pytest.fixture
async def servers():
    started: list[ListeningServer] = []
    yield started
    with trio.CancelScope(shield=True):
        for srv in started:
            if srv.proc is not None and srv.proc.returncode is None:
                await srv.kill()


@pytest.mark.parametrize("mode", ["ws", "ws-token", "unix"])
async def test_r_wire_10_real_attached_turn_approval_interrupt_and_restart(
        mode, servers, tmp_path, codex_bin, real_env, real_cwd, mock_model):
    extra: list[str] = []
    cfg_kw: dict = {}
    if mode == "unix":
        url = f"unix://{tmp_path}/app.sock"
    else:
        url = f"ws://127.0.0.1:{_free_port()}"
    if mode == "ws-token":
        token_file = tmp_path / "ws-token"
        token_file.write_text(TOKEN + "\n")
        os.chmod(token_file, 0o600)
        extra = ["--ws-auth", "capability-token", "--ws-token-file", str(token_file)]
        cfg_kw = {"token_file": str(token_file)}
    server = ListeningServer(codex_bin, real_env, real_cwd, url, extra, tmp_path / "server.log")
    servers.append(server)
    await server.start()

    if mode == "ws-token":  # without the token the upgrade is refused, and nothing retries it
        no_token = RuntimeConfig(connect=url, cwd=str(real_cwd))
        async with codexrt.open_runtime(no_token) as rt:
            with pytest.raises(ChildExited) as info:
                await rt.ensure_started()
            assert "401" in info.value.details["error"] and TOKEN not in repr(info.value.to_dict())

    cfg = RuntimeConfig(connect=url, cwd=str(real_cwd), reconnect_backoff=Backoff(initial=0.05, attempts=8),
                        **cfg_kw)
    async with codexrt.open_runtime(cfg) as rt:
        # handshake + a read through the overload-retrying path
        conn = await rt.ensure_started()
        assert conn.initialize_result and conn.pid is None
        models = await call_read_only(conn, "model/list", {})
        assert isinstance(models.get("data"), list)

        # a streamed turn
        op = rt.send("[[mock:deltas:5]] say hi")
        with trio.fail_after(WAIT):
            deltas = [ev.payload["delta"] async for ev in op.events() if ev.kind == "itemUpdated"
                      and ev.payload.get("stream") == "item/agentMessage/delta"]
            result = await op.wait()
        assert result.status == "completed" and "".join(deltas) == result.final_text
        tid = result.thread_id

        # an approval
        op = rt.send("[[mock:exec:python3 -c 'print(6*7)']]", thread_id=tid,
                     settings=Settings(approval_policy="untrusted", sandbox="read-only"))
        with trio.fail_after(WAIT):
            async for ev in op.events():
                if ev.kind == "interactionRequested":
                    assert ev.payload["method"] == "item/commandExecution/requestApproval"
                    await rt.interactions[ev.payload["interactionKey"]].accept()
            result = await op.wait()
        assert result.status == "completed" and "42" in (result.final_text or "")

        # an interrupt mid-stream
        op = rt.send("[[mock:deltas:400:20]] stream slowly", thread_id=tid)
        with trio.fail_after(WAIT):
            async for ev in op.events():
                if ev.kind == "itemUpdated":
                    assert rt.abort(op) == "interruptSent"
                    break
            assert (await op.wait()).status == "interrupted"

        # the server dies mid-turn: fail once, never re-send, resume on the next send
        lost = rt.send("lost-turn-9c2e [[mock:hang]]", thread_id=tid)
        with trio.fail_after(WAIT):
            async for ev in lost.events():
                if ev.kind == "turnStarted":
                    break
            await wait_until(lambda: mock_model.requests_with_user_text("lost-turn-9c2e"), "the lost turn to reach the model")
        await server.kill()
        with trio.fail_after(WAIT):
            failed = await lost.wait()
        assert failed.status == "failed" and failed.error is not None and failed.error.code == "CHILD_EXITED"
        assert rt.state is RuntimeState.FAILED
        await server.start()  # a new server on the same endpoint
        with trio.fail_after(WAIT):
            nxt = await rt.send("after the restart", thread_id=tid).wait()
        assert nxt.status == "completed" and nxt.thread_id == tid
    assert len(mock_model.requests_with_user_text("lost-turn-9c2e")) == 1  # only before the crash
    after = mock_model.requests_with_user_text("after the restart")
    assert after and all(r.last_user_text.startswith("after the restart") for r in after)
    assert sum("lost-turn-9c2e" in t for t in after[0].user_texts) == 1  # as history, once
    if mode == "ws-token":
        assert TOKEN not in server.log.read_text(errors="replace")
