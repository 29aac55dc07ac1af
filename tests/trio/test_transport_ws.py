"""WebSocket transports and attached runtimes (issue 13, R-WIRE-10, R-RT-4).

Testing charter: the peer is the scripted fake app-server (``peer_fixtures``) served over a real
WebSocket by :class:`WsPeerServer` — the server side is the same wsproto engine, with the HTTP
upgrade, ``/readyz`` and bearer-token check the real server has — on loopback TCP or a Unix
socket in ``tmp_path``. Each accepted connection gets a fresh :class:`MemoryPeer`, whose
``received`` log proves what was written (e.g. a lost ``turn/start`` never re-sent). Timing of
the reconnect backoff is proven on ``autojump_clock`` against a port where nothing listens; the
other tests use the real clock with bounded waits (real sockets).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Ping, Pong, RejectConnection, Request, TextMessage

import codexrt
from codexrt import RuntimeConfig, RuntimeState
from codexrt._connection import open_connection
from codexrt._sansio._errors import ChildExited
from codexrt._io._retry import Backoff
from codexrt._io._transport_ws import (
    Endpoint,
    EndpointRejected,
    EndpointUnavailable,
    Secret,
    check_ready,
    connect_endpoint,
    endpoint_factory,
    wrap_websocket,
)
from peer_fixtures.memory import MemoryPeer

WAIT = 20
TOKEN = "tok-5b1e-never-print-me"


class WsPeerServer:
    """Scenario peers behind a WebSocket listener (TCP or Unix). ``peers`` lists one
    :class:`MemoryPeer` per accepted WebSocket, in order; ``scenarios`` are used in turn (the
    last repeats). ``token`` makes the upgrade require ``Authorization: Bearer <token>``;
    ``ready=False`` makes ``/readyz`` answer 503. ``drop()`` cuts every live socket without a
    close frame (a server crash, as the client sees it)."""

    def __init__(self, *scenarios: Any, token: str | None = None) -> None:
        self.scenarios = scenarios or ("handshake-ok",)
        self.token = token
        self.ready = True
        self.peers: list[MemoryPeer] = []
        self.auth_headers: list[bytes | None] = []
        self.readyz_hits = 0
        self._scopes: list[trio.CancelScope] = []
        self.url = ""

    async def serve_tcp(self, nursery: trio.Nursery) -> str:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}"
        return self.url

    async def serve_unix(self, nursery: trio.Nursery, path: Path) -> str:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(str(path))
        sock.listen(16)
        listener = trio.SocketListener(sock)
        await nursery.start(trio.serve_listeners, self._handle, [listener])
        self.url = f"unix://{path}"
        return self.url

    def drop(self) -> None:
        for scope in self._scopes:
            scope.cancel()

    async def _handle(self, stream: trio.abc.Stream) -> None:
        scope = trio.CancelScope()
        self._scopes.append(scope)
        with scope:
            async with stream:
                await self._serve_one(stream, scope)

    async def _serve_one(self, stream: trio.abc.Stream, scope: trio.CancelScope) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            head += chunk
        if head.startswith(b"GET /readyz "):
            self.readyz_hits += 1
            status = b"200 OK" if self.ready else b"503 Service Unavailable"
            await stream.send_all(b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            return
        ws = WSConnection(ConnectionType.SERVER)
        ws.receive_data(head)
        request = next((e for e in ws.events() if isinstance(e, Request)), None)
        assert request is not None
        auth = dict(request.extra_headers).get(b"authorization")
        self.auth_headers.append(auth)
        if self.token is not None and auth != b"Bearer " + self.token.encode():
            await stream.send_all(ws.send(RejectConnection(status_code=401)))
            return
        await stream.send_all(ws.send(AcceptConnection()))
        transport = wrap_websocket(stream, ws, "test-server")
        peer = MemoryPeer(self.scenarios[min(len(self.peers), len(self.scenarios) - 1)])
        self.peers.append(peer)
        try:
            await peer.run(transport.receive_stream, transport.send_stream)
        finally:
            if not scope.cancel_called:  # dropped = a crash: the socket just goes away, no close frame
                await transport.aclose()

    def received(self, index: int = -1, method: str | None = None) -> list[dict]:
        return [m for m in self.peers[index].received if method is None or m.get("method") == method]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- endpoints, tokens, policy (no I/O) -----------------------------------------------------------


# -- the message <-> line adapter over memory streams ------------------------------------------------


async def _memory_pair():
    """A client and a server WebSocket transport joined by an in-memory stream pair."""
    a, b = trio.testing.memory_stream_pair()
    client, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    server.receive_data(client.send(Request(host="localhost", target="/")))
    assert any(isinstance(e, Request) for e in server.events())
    client.receive_data(server.send(AcceptConnection()))
    assert any(isinstance(e, AcceptConnection) for e in client.events())
    return wrap_websocket(a, client, "client"), wrap_websocket(b, server, "server")


async def _read_lines(stream, n):
    buf = b""
    with trio.fail_after(5):
        while buf.count(b"\n") < n:
            chunk = await stream.receive_some(7)  # small reads: the adapter must split and keep order
            assert chunk, "unexpected EOF"
            buf += chunk
    return buf.split(b"\n")[:n]


async def test_lines_become_messages_and_messages_become_lines():
    client, server = await _memory_pair()
    # one send_all with two lines and a partial third, then the rest of the third
    await client.send_stream.send_all(b'{"id":1,"method":"a"}\n{"method":"b"}\n{"id":2,')
    await client.send_stream.send_all(b'"method":"c"}\n')
    assert await _read_lines(server.receive_stream, 3) == [b'{"id":1,"method":"a"}', b'{"method":"b"}',
                                                            b'{"id":2,"method":"c"}']
    # a pretty-printed message (raw newlines are JSON whitespace) stays one line
    link = server._link
    await link.write(link.ws.send(TextMessage(data='{\n "id": 1,\n "x": "\\n"\n}')))
    [line] = await _read_lines(client.receive_stream, 1)
    assert json.loads(line) == {"id": 1, "x": "\n"}
    async with trio.open_nursery() as nursery:  # each side reads the other's close answer
        nursery.start_soon(client.aclose)
        nursery.start_soon(server.aclose)
    assert client.close_code == server.close_code == 1000


async def test_peer_close_is_eof_and_send_after_is_broken():
    client, server = await _memory_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.aclose)
        with trio.fail_after(5):
            assert await client.receive_stream.receive_some() == b""  # the close frame, answered
    assert client.close_code == 1000
    with pytest.raises(trio.BrokenResourceError):
        await client.send_stream.send_all(b'{"method":"x"}\n')
    assert (await client.wait_exit()).returncode is None  # a process we do not own: status unknown
    await client.aclose()
    with pytest.raises(trio.ClosedResourceError):
        await client.send_stream.send_all(b'{"method":"x"}\n')


async def test_pings_are_answered_by_the_reader():
    client, server = await _memory_pair()
    link = server._link
    await link.write(link.ws.send(Ping(payload=b"hi")))
    await link.write(link.ws.send(TextMessage(data='{"method":"n"}')))
    [line] = await _read_lines(client.receive_stream, 1)
    assert line == b'{"method":"n"}'
    data = await server._link.stream.receive_some(100)
    server._link.ws.receive_data(data)
    assert [type(e) for e in server._link.ws.events()] == [Pong]


# -- connecting over real sockets -------------------------------------------------------------------


async def test_connect_tcp_with_readyz_and_token(nursery):
    server = WsPeerServer(token=TOKEN)
    url = await server.serve_tcp(nursery)
    ep = Endpoint.parse(url)
    assert await check_ready(ep)
    with pytest.raises(EndpointRejected) as info:
        await connect_endpoint(ep, token=None)
    assert "401" in str(info.value) and TOKEN not in str(info.value)
    with pytest.raises(EndpointRejected):
        await connect_endpoint(ep, token=Secret("wrong"))
    transport = await connect_endpoint(ep, token=Secret(TOKEN))
    assert server.auth_headers[-1] == b"Bearer " + TOKEN.encode()
    assert transport.pid is None and transport.description == url and TOKEN not in repr(transport)
    async with open_connection(transport, sink=lambda ev: None) as conn:
        with trio.fail_after(WAIT):
            result = await conn.initialize()
    assert "userAgent" in result
    assert server.readyz_hits == 4


async def test_not_ready_and_nothing_listening_are_unavailable(nursery):
    server = WsPeerServer()
    server.ready = False
    ep = Endpoint.parse(await server.serve_tcp(nursery))
    with pytest.raises(EndpointUnavailable, match="not ready"):
        await connect_endpoint(ep)
    with pytest.raises(EndpointUnavailable, match="cannot connect"):
        await connect_endpoint(Endpoint.parse(f"ws://127.0.0.1:{_free_port()}"))


async def test_reconnect_backoff_is_bounded_exponential_on_the_clock(autojump_clock):
    ep = Endpoint.parse(f"ws://127.0.0.1:{_free_port()}")  # nothing listens: refused at once
    b = Backoff(initial=0.5, factor=2, maximum=1.5, attempts=5, jitter=0.0)
    factory = endpoint_factory(ep, backoff=b)
    t0 = trio.current_time()
    with pytest.raises(EndpointUnavailable, match="after 5 attempts"):
        await factory()
    assert trio.current_time() - t0 == pytest.approx(0.5 + 1.0 + 1.5 + 1.5)


async def test_refused_token_is_not_retried(nursery, autojump_clock):
    server = WsPeerServer(token=TOKEN)
    ep = Endpoint.parse(await server.serve_tcp(nursery))
    t0 = trio.current_time()
    with pytest.raises(EndpointRejected):
        await endpoint_factory(ep, token_source=lambda: Secret("wrong"), backoff=Backoff(jitter=0))()
    assert trio.current_time() == t0 and len(server.auth_headers) == 1


# -- attached runtimes ------------------------------------------------------------------------------


@pytest.fixture(params=["tcp", "unix"])
async def attach(request, nursery, tmp_path):
    async def start(*scenarios, token=None):
        server = WsPeerServer(*scenarios, token=token)
        if request.param == "tcp":
            url = await server.serve_tcp(nursery)
        else:
            url = await server.serve_unix(nursery, tmp_path / "app.sock")
        return server, url

    return start


async def test_attached_runtime_streams_a_turn_and_answers_an_approval(attach, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    server, url = await attach("reverse-approval", token=TOKEN)
    (tmp_path / "tok").write_text(TOKEN)
    async with codexrt.open_runtime(RuntimeConfig(connect=url, token_file=str(tmp_path / "tok"))) as rt:
        with rt.subscribe() as events:
            op = rt.send("run it")
            with trio.fail_after(WAIT):
                async for ev in op.events():
                    if ev.kind == "interactionRequested":
                        inter = rt.interactions[ev.payload["interactionKey"]]
                        await inter.accept()
                result = await op.wait()
            assert result.status == "completed"
            assert rt.runtime_snapshot()["pid"] is None and rt.cli_path == url
            seen = []
            while (ev := events.get_nowait()) is not None:
                seen.append(ev)
    replies = [m for m in server.received() if "result" in m and "id" in m]
    assert replies and replies[0]["result"] == {"decision": "accept"}
    assert TOKEN not in caplog.text and all(TOKEN not in repr(ev) for ev in seen)


async def test_connection_loss_mid_turn_fails_once_and_next_send_reconnects_and_resumes(attach):
    hang = {"name": "hang", "rules": [{"match": {"method": "turn/start"}, "actions": [{"hang_turn": True}]}]}
    server, url = await attach(hang, "handshake-ok")
    cfg = RuntimeConfig(connect=url, reconnect_backoff=Backoff(initial=0.01, attempts=3))
    async with codexrt.open_runtime(cfg) as rt:
        first = rt.send("warm up then hang")
        with trio.fail_after(WAIT):
            async for ev in first.events():
                if ev.kind == "turnStarted":
                    break
        tid = first.thread_id
        server.drop()  # the server goes away mid-turn (no close frame)
        with trio.fail_after(WAIT):
            lost = await first.wait()
        assert lost.status == "failed" and isinstance(lost.error, ChildExited)
        assert lost.error.code == "CHILD_EXITED"
        assert rt.state is RuntimeState.FAILED
        nxt = rt.send("after the loss", thread_id=tid)
        with trio.fail_after(WAIT):
            result = await nxt.wait()
        assert result.status == "completed" and result.thread_id == tid
    assert len(server.peers) == 2
    assert [m["method"] for m in server.received(0, "turn/start")] == ["turn/start"]
    second = server.received(1)
    assert [m["method"] for m in second if m.get("method") in ("thread/resume", "turn/start")] == [
        "thread/resume", "turn/start"]  # resumed, and only the new message was sent
    [again] = [m for m in second if m.get("method") == "turn/start"]
    assert again["params"]["input"][0]["text"] == "after the loss"


async def test_attached_close_never_kills_and_sends_a_close_frame(attach):
    server, url = await attach("handshake-ok")
    async with codexrt.open_runtime(RuntimeConfig(connect=url)) as rt:
        conn = await rt.ensure_started()
        assert not hasattr(conn.transport, "kill") and conn.pid is None
    with trio.fail_after(WAIT):
        await server.peers[0].finished.wait()
    assert server.peers[0].exit_code == 0  # the peer saw a clean end of input, not a kill


async def test_startup_failure_when_nothing_listens_is_a_typed_error(tmp_path):
    cfg = RuntimeConfig(connect=f"unix://{tmp_path}/absent.sock", reconnect_backoff=Backoff(initial=0.01, attempts=2))
    async with codexrt.open_runtime(cfg) as rt:
        with pytest.raises(ChildExited) as info:
            await rt.ensure_started()
        assert "cannot connect" in info.value.details["error"] and rt.state is RuntimeState.FAILED


# -- the CLI: serve --connect, doctor --connect ---------------------------------------------------
