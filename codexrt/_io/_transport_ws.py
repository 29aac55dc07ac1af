"""WebSocket transports: attach to an app-server on ``ws://IP:PORT`` or ``unix://PATH`` (R-WIRE-10).

The real ``codex app-server --listen ws://IP:PORT`` and ``--listen unix://PATH`` speak WebSocket
(on 0.169.0 the Unix socket also starts with an HTTP upgrade), one JSON-RPC message per text
message, with ``/readyz`` and ``/healthz`` on the TCP listener and optional auth by a bearer
token in the upgrade request (``--ws-auth capability-token --ws-token-file PATH``).

How it plugs in
---------------
The connection layer (``codexrt._connection``) reads and writes *JSON lines* on a
:class:`~codexrt._io._transport.Transport`. :class:`WebSocketTransport` adapts messages to lines
here, so the connection is untouched: every received message becomes one line (a raw newline
inside a message can only be JSON whitespace, so it becomes a space), and every line written is
sent as one text message.

Why wsproto, driven inline, and not trio-websocket's connection object
----------------------------------------------------------------------
trio-websocket runs a background reader task in a nursery lent by the caller, but a transport
is created by a factory that has no nursery, and it is then read by the connection's own reader
task. So the sans-IO WebSocket engine (``wsproto``, the python-hyper library trio-websocket is
built on — no hand-written framing) is driven *from the connection's tasks*: ``receive_some``
reads the socket and feeds wsproto, answering pings and the closing handshake on the way;
``send_all`` frames lines. One lock serialises socket writes (the writer's messages and the
reader's pongs). No task is started, so none can outlive its owner, and reading is pull-based:
nothing is buffered beyond one socket read when nobody reads.

Ownership and close
-------------------
codexrt did not start the server, so it never signals or kills it: :meth:`aclose` sends a
close frame, waits a bounded time for the peer's answer and closes the socket — nothing more.
``wait_exit`` reports ``ExitStatus(None)``: the exit status of a process we do not own is
unknown. A lost connection looks to the runtime exactly like a child exit (R-RT-4: fail once,
never re-send a turn, reconnect and resume on the next operation).

Security
--------
The token is read from a file or an environment variable (:func:`read_token`) at each connect,
held in a :class:`Secret` whose ``repr``/``str`` hide it, sent only in the upgrade request's
``Authorization`` header, and never logged or put in errors, events or descriptions. Endpoints
carrying credentials in the URL are refused. A ``ws://`` host that is not loopback needs an
explicit opt-in *and* a token (:func:`check_endpoint_policy`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import random
import socket
import struct
import unicodedata
import urllib.parse
from typing import Any, Awaitable, Callable, Mapping

import attrs
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError as WsLocalProtocolError
from wsproto.utilities import RemoteProtocolError as WsRemoteProtocolError

from codexrt._sansio._errors import (
    BadEndpoint,
    BadToken,
    ConfigError,
    EndpointRejected,
    EndpointUnavailable,
    RemoteNotAllowed,
    TokenUnavailable,
)
from codexrt._io._retry import Backoff
from codexrt._sansio._redact import register_process_secrets
from codexrt._io._transport import ExitStatus, Transport

__all__ = [
    "Endpoint",
    "Secret",
    "WebSocketTransport",
    "EndpointUnavailable",
    "EndpointRejected",
    "read_token",
    "check_endpoint_policy",
    "check_ready",
    "connect_endpoint",
    "endpoint_factory",
    "DEFAULT_RECONNECT_BACKOFF",
]

log = logging.getLogger("codexrt.transport.ws")

DEFAULT_RECONNECT_BACKOFF = Backoff(initial=0.25, factor=2.0, maximum=4.0, attempts=6, jitter=0.5)
_READ_SIZE = 65536
_CLOSE_WAIT = 2.0


# -- endpoints and secrets ---------------------------------------------------------------------


@attrs.frozen
class Endpoint:
    """A parsed ``ws://HOST:PORT[/path]`` or ``unix:///abs/path`` endpoint."""

    scheme: str  # "ws" | "unix"
    host: str | None = None
    port: int | None = None
    path: str = "/"  # ws: the request target; unix: the socket path

    @classmethod
    def parse(cls, text: str) -> "Endpoint":
        """Parse an endpoint; raises :class:`ConfigError` (``BAD_ENDPOINT``) with the reason."""
        if not isinstance(text, str) or "://" not in text:
            raise BadEndpoint(f"endpoint must look like ws://127.0.0.1:PORT or unix:///path, got {text!r}")
        scheme, _, rest = text.partition("://")
        scheme = scheme.lower()
        if scheme == "unix":
            path = urllib.parse.unquote(rest)
            if not path.startswith("/"):
                raise BadEndpoint("unix:// endpoints need an absolute socket path (unix:///run/codex.sock)")
            return cls("unix", None, None, path)
        if scheme != "ws":
            hint = " (the app-server speaks plain ws; tunnel it, e.g. over SSH)" if scheme == "wss" else ""
            raise BadEndpoint(f"unsupported endpoint scheme {scheme!r}{hint}")
        parts = urllib.parse.urlsplit(text)
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            # never accept credentials in a URL: it ends up in logs, ps and shell history
            raise BadEndpoint("endpoint URLs must not carry credentials, a query or a fragment; "
                              "give the token with a token file or environment variable")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise BadEndpoint("ws:// endpoints need a host and a port (ws://127.0.0.1:4500)")
        return cls("ws", parts.hostname, port, parts.path or "/")

    @property
    def url(self) -> str:
        if self.scheme == "unix":
            return f"unix://{self.path}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"ws://{host}:{self.port}{self.path if self.path != '/' else ''}"

    @property
    def is_loopback(self) -> bool:
        """True for Unix sockets and loopback hosts (``localhost``, ``127.0.0.0/8``, ``::1``)."""
        if self.scheme == "unix":
            return True
        assert self.host is not None
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a name other than localhost: it may resolve anywhere

    def __str__(self) -> str:
        return self.url


class Secret:
    """A string that never shows itself in ``repr``/``str``/logs; ``reveal()`` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> object:  # never pickle a token into a file by accident
        raise TypeError("a Secret cannot be pickled")


def read_token(*, token_file: str | os.PathLike[str] | None = None, token_env: str | None = None,
               env: Mapping[str, str] | None = None) -> Secret | None:
    """The bearer token from a file (surrounding whitespace trimmed, as the server trims its
    own copy) or from the environment variable named ``token_env``. None when neither is given.
    Raises :class:`ConfigError` (``TOKEN_UNAVAILABLE``) — naming the file or variable, never
    the value — when the source is missing or empty, and (``BAD_TOKEN``) when the token holds
    whitespace or a control character inside it (a stray newline in a file, say): a token is one
    line of printable characters. A token read is registered as a secret of this process, so
    every redactor and the log filter mask it (``docs/security.md``)."""
    if token_file is not None and token_env is not None:
        raise TokenUnavailable("give the token either as a file or as an environment variable, not both")
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as fh:
                value = fh.read().strip()
        except OSError as exc:
            raise TokenUnavailable(f"cannot read token file {os.fspath(token_file)!r}: {exc.strerror or exc}") from None
        if not value:
            raise TokenUnavailable(f"token file {os.fspath(token_file)!r} is empty")
        return _checked_token(value, f"token file {os.fspath(token_file)!r}")
    if token_env is not None:
        value = (os.environ if env is None else env).get(token_env, "").strip()
        if not value:
            raise TokenUnavailable(f"environment variable {token_env} (the token) is not set or empty")
        return _checked_token(value, f"environment variable {token_env}")
    return None


def _checked_token(value: str, source: str) -> Secret:
    register_process_secrets([value])  # even a bad one: it must not show up anywhere
    if any(c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in value):
        raise BadToken(f"{source} holds whitespace or a control character inside the token "
                       "(a token is one line of printable characters; the value is not shown)",
                       details={"source": source})
    return Secret(value)


def check_endpoint_policy(endpoint: Endpoint, *, has_token: bool, allow_remote: bool) -> None:
    """A ``ws://`` endpoint that is not loopback needs ``allow_remote`` *and* a token: the
    app-server can run commands on its machine, so it is never driven in the clear by accident."""
    if endpoint.is_loopback:
        return
    if not allow_remote:
        raise RemoteNotAllowed(f"{endpoint.url} is not a loopback address; attaching to a remote app-server "
                               "needs an explicit opt-in (allow_remote / --allow-remote) and a token")
    if not has_token:
        raise RemoteNotAllowed(f"{endpoint.url} is remote: a token is required (token file or environment variable)")


# -- the message <-> line adapter ----------------------------------------------------------------


def _as_line(data: str | bytes | bytearray) -> bytes:
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    # A raw newline inside valid JSON can only be whitespace between tokens.
    return raw.replace(b"\n", b" ")


class _WsLink:
    """One WebSocket on one byte stream, driven by whichever task reads or writes."""

    def __init__(self, stream: trio.abc.Stream, ws: WSConnection) -> None:
        self.stream = stream
        self.ws = ws
        self.write_lock = trio.Lock()
        self.closed = trio.Event()  # no more data will come: peer closed, EOF, or we closed
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.local_closed = False
        self.reading = False  # a task is inside receive_some (it will see the peer's close answer)

    async def write(self, data: bytes) -> None:
        if not data:
            return
        async with self.write_lock:
            await self.stream.send_all(data)

    def mark_closed(self, code: int | None, reason: str | None) -> None:
        if not self.closed.is_set():
            self.close_code, self.close_reason = code, reason
            self.closed.set()


class _LineReceiveStream(trio.abc.ReceiveStream):
    """Received messages as JSON lines (``b"...\\n"``); ``b""`` once the WebSocket is closed."""

    def __init__(self, link: _WsLink) -> None:
        self._link = link
        self._pending = bytearray()
        self._eof = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        self._link.reading = True
        try:
            return await self._receive_some(max_bytes)
        finally:
            self._link.reading = False

    async def _receive_some(self, max_bytes: int | None) -> bytes:
        link = self._link
        while not self._pending and not self._eof:
            progressed = await self._pump_events()
            if self._pending or self._eof or progressed:
                continue
            if link.local_closed and link.closed.is_set():
                self._eof = True
                break
            try:
                data = await link.stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                log.debug("websocket read ended: %r", exc)
                data = b""
            if not data:
                link.mark_closed(None, "connection lost")
                self._eof = True
                break
            try:
                link.ws.receive_data(data)
            except WsRemoteProtocolError as exc:
                log.warning("websocket protocol error from the app-server: %s", exc)
                await self._abort(1002)
        if not self._pending:
            await trio.lowlevel.checkpoint()
            return b""
        n = len(self._pending) if max_bytes is None else max(1, min(max_bytes, len(self._pending)))
        out = bytes(self._pending[:n])
        del self._pending[:n]
        return out

    async def _pump_events(self) -> bool:
        """File pending wsproto events; answer pings and a peer's close. True if any event."""
        link = self._link
        any_event = False
        for event in link.ws.events():
            any_event = True
            if isinstance(event, (TextMessage, BytesMessage)):
                self._pending += _as_line(event.data)
                if event.message_finished:
                    self._pending += b"\n"
            elif isinstance(event, Ping):
                try:
                    await link.write(link.ws.send(event.response()))
                except (trio.BrokenResourceError, trio.ClosedResourceError, WsLocalProtocolError, OSError):
                    pass
            elif isinstance(event, CloseConnection):
                log.debug("app-server closed the websocket: code=%s", event.code)
                if link.ws.state is ConnectionState.REMOTE_CLOSING:
                    try:
                        await link.write(link.ws.send(event.response()))
                    except (trio.BrokenResourceError, trio.ClosedResourceError, WsLocalProtocolError, OSError):
                        pass
                link.mark_closed(event.code, event.reason)
                self._eof = True
                return True
        return any_event

    async def _abort(self, code: int) -> None:
        link = self._link
        try:
            await link.write(link.ws.send(CloseConnection(code=code)))
        except (trio.BrokenResourceError, trio.ClosedResourceError, WsLocalProtocolError, OSError):
            pass
        link.mark_closed(code, "protocol error")
        self._eof = True

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _LineSendStream(trio.abc.SendStream):
    """Lines written become text messages (one complete line = one message)."""

    def __init__(self, link: _WsLink) -> None:
        self._link = link
        self._partial = bytearray()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        link = self._link
        if link.local_closed:
            raise trio.ClosedResourceError("websocket transport was closed")
        if link.closed.is_set() or link.ws.state is not ConnectionState.OPEN:
            raise trio.BrokenResourceError("the app-server closed the websocket")
        self._partial += bytes(data)
        while (cut := self._partial.find(b"\n")) >= 0:
            line = bytes(self._partial[:cut]).rstrip(b"\r")
            del self._partial[: cut + 1]
            if not line.strip():
                continue
            try:
                frame = link.ws.send(TextMessage(data=line.decode("utf-8")))
                await link.write(frame)
            except WsLocalProtocolError as exc:  # the peer's close raced our write
                raise trio.BrokenResourceError(f"websocket is closing: {exc}") from None
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from None

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@attrs.define(eq=False)
class WebSocketTransport:
    """A :class:`~codexrt._io._transport.Transport` over an established WebSocket. Create it with
    :func:`connect_endpoint` (or :func:`wrap_websocket` over a stream you upgraded yourself)."""

    _link: _WsLink
    description: str
    send_stream: trio.abc.SendStream
    receive_stream: trio.abc.ReceiveStream
    stderr_stream: trio.abc.ReceiveStream | None = None
    pid: int | None = None  # not our process: nothing to signal, ever
    close_wait: float = _CLOSE_WAIT
    _status: ExitStatus | None = None

    def __repr__(self) -> str:
        state = "closed" if self._link.closed.is_set() else "open"
        return f"<WebSocketTransport {self.description} {state}>"

    @property
    def close_code(self) -> int | None:
        return self._link.close_code

    async def wait_exit(self) -> ExitStatus:
        """Wait until the WebSocket is closed. The exit status of a server we did not start is
        unknown: always ``ExitStatus(None)``. Unbounded by itself: callers bound it."""
        await self._link.closed.wait()
        self._status = ExitStatus(None)
        return self._status

    async def aclose(self) -> ExitStatus:
        """Close the WebSocket (close frame, bounded wait for the peer's answer) and the socket.
        Never touches the server process. Idempotent; shielded."""
        link = self._link
        with trio.CancelScope(shield=True):
            if not link.local_closed:
                link.local_closed = True
                if not link.closed.is_set() and link.ws.state is ConnectionState.OPEN:
                    try:
                        with trio.move_on_after(self.close_wait):
                            await link.write(link.ws.send(CloseConnection(code=1000)))
                    except (trio.BrokenResourceError, trio.ClosedResourceError, WsLocalProtocolError, OSError):
                        pass
                    # the connection's reader sees the peer's close answer and sets `closed`;
                    # when nobody reads, read (and drop) until it comes ourselves
                    with trio.move_on_after(self.close_wait):
                        while not link.closed.is_set():
                            if link.reading:
                                await link.closed.wait()
                            elif not await self.receive_stream.receive_some():
                                break
                link.mark_closed(link.close_code or 1000, "closed by codexrt")
                try:
                    await link.stream.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
            self._status = ExitStatus(None)
            return self._status


def wrap_websocket(stream: trio.abc.Stream, ws: WSConnection, description: str) -> WebSocketTransport:
    """A transport over ``stream`` whose WebSocket handshake ``ws`` has already completed."""
    link = _WsLink(stream, ws)
    return WebSocketTransport(link, description, _LineSendStream(link), _LineReceiveStream(link))


# -- connecting --------------------------------------------------------------------------------


async def _open_stream(endpoint: Endpoint) -> trio.abc.Stream:
    try:
        if endpoint.scheme == "unix":
            return await trio.open_unix_socket(endpoint.path)
        assert endpoint.host is not None and endpoint.port is not None
        return await trio.open_tcp_stream(endpoint.host, endpoint.port)
    except OSError as exc:
        raise EndpointUnavailable(f"cannot connect to {endpoint.url}: {exc.strerror or exc}") from None


async def check_ready(endpoint: Endpoint, *, timeout: float = 5.0) -> bool:
    """``GET /readyz`` on a ``ws://`` endpoint: True on HTTP 200. (Unix sockets offer no
    probe: for them a completed upgrade is the readiness signal, and this returns True.)
    Raises :class:`EndpointUnavailable` when nothing listens or the answer is not HTTP."""
    if endpoint.scheme != "ws":
        return True
    with trio.move_on_after(timeout) as cs:
        stream = await _open_stream(endpoint)
        async with stream:
            host = f"[{endpoint.host}]" if endpoint.host and ":" in endpoint.host else endpoint.host
            await stream.send_all(
                f"GET /readyz HTTP/1.1\r\nHost: {host}:{endpoint.port}\r\nConnection: close\r\n\r\n".encode("ascii"))
            head = b""
            while b"\r\n" not in head and len(head) < 4096:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                head += chunk
    if cs.cancelled_caught:
        raise EndpointUnavailable(f"{endpoint.url}/readyz did not answer within {timeout:g}s")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/"):
        raise EndpointUnavailable(f"{endpoint.url}/readyz did not answer HTTP")
    return status_line[1] == b"200"


def _socket_owner_uid(endpoint: Endpoint, stream: trio.abc.Stream) -> int | None:
    """Who runs the server behind a connected Unix socket: the peer's uid (``SO_PEERCRED``,
    Linux), else the socket file's owner; None when neither can be read (a non-POSIX system)."""
    sock = getattr(stream, "socket", None)
    peercred = getattr(socket, "SO_PEERCRED", None)
    if sock is not None and peercred is not None:
        try:
            _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, peercred, struct.calcsize("3i")))
            return int(uid)
        except OSError:
            pass
    try:
        return os.stat(endpoint.path).st_uid
    except OSError:
        return None


def _check_socket_owner(endpoint: Endpoint, stream: trio.abc.Stream) -> None:
    """The token goes only to a Unix socket served by this user (issue 35): another user's
    socket at the configured path could collect it. Raises :class:`EndpointRejected` (not
    retried) naming both uids; nothing was sent."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return  # no POSIX users (Windows): nothing to compare
    owner, me = _socket_owner_uid(endpoint, stream), getuid()
    if owner is not None and owner != me:
        raise EndpointRejected(
            f"{endpoint.url} is served by another user (uid {owner}, this process runs as uid {me}); "
            "the token was not sent", details={"reason": "socketOwner", "ownerUid": owner, "uid": me})


async def connect_endpoint(endpoint: Endpoint, *, token: Secret | None = None, timeout: float = 10.0,
                           probe_ready: bool = True) -> WebSocketTransport:
    """Connect and upgrade to a WebSocket (one try). ``probe_ready`` first asks ``/readyz``
    (ws only). With a token, a ``unix://`` socket must be served by this user (else
    :class:`EndpointRejected`, before anything is sent). Raises :class:`EndpointRejected` when
    the server refuses the upgrade (401/403),
    :class:`EndpointUnavailable` for everything else (refused, not ready, timeout, bad HTTP).
    Cancelling it closes the half-open socket."""
    if probe_ready and not await check_ready(endpoint, timeout=timeout):
        raise EndpointUnavailable(f"{endpoint.url} is not ready (/readyz)")
    stream = await _open_stream(endpoint)
    ok = False
    try:
        if token is not None and endpoint.scheme == "unix":
            _check_socket_owner(endpoint, stream)
        with trio.move_on_after(timeout) as cs:
            ws = WSConnection(ConnectionType.CLIENT)
            headers: list[tuple[bytes, bytes]] = []
            if token is not None:
                headers.append((b"authorization", b"Bearer " + token.reveal().encode("utf-8")))
            host = "localhost" if endpoint.scheme == "unix" else (
                f"[{endpoint.host}]:{endpoint.port}" if endpoint.host and ":" in endpoint.host
                else f"{endpoint.host}:{endpoint.port}")
            target = "/" if endpoint.scheme == "unix" else endpoint.path
            await stream.send_all(ws.send(Request(host=host, target=target, extra_headers=headers)))
            await _await_accept(stream, ws, endpoint)
            ok = True
        if cs.cancelled_caught:
            raise EndpointUnavailable(f"{endpoint.url}: WebSocket handshake not done within {timeout:g}s")
    finally:
        if not ok:
            with trio.CancelScope(shield=True):
                await stream.aclose()
    return wrap_websocket(stream, ws, endpoint.url)


async def _await_accept(stream: trio.abc.Stream, ws: WSConnection, endpoint: Endpoint) -> None:
    while True:
        try:
            data = await stream.receive_some(_READ_SIZE)
        except (trio.BrokenResourceError, OSError) as exc:
            raise EndpointUnavailable(f"{endpoint.url}: connection lost during the handshake: {exc}") from None
        try:
            ws.receive_data(data or None)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    return  # later events stay queued in wsproto for the reader
                if isinstance(event, RejectConnection):
                    # the body is not read: it is not ours to log and may echo the request
                    if event.status_code in (401, 403):
                        raise EndpointRejected(
                            f"{endpoint.url} refused the WebSocket upgrade: HTTP {event.status_code} "
                                  "(missing or wrong token)")
                    raise EndpointUnavailable(f"{endpoint.url} refused the WebSocket upgrade: "
                                                    f"HTTP {event.status_code}")
                if isinstance(event, RejectData):  # pragma: no cover - only after RejectConnection
                    continue
        except WsRemoteProtocolError as exc:
            raise EndpointUnavailable(f"{endpoint.url}: bad WebSocket handshake: {exc}") from None
        if not data:
            raise EndpointUnavailable(f"{endpoint.url} closed the connection during the handshake")


TokenSource = Callable[[], "Secret | None"]


def endpoint_factory(endpoint: Endpoint, *, token_source: TokenSource = lambda: None,
                     backoff: Backoff = DEFAULT_RECONNECT_BACKOFF, timeout: float = 10.0,
                     rng: Callable[[], float] = random.random) -> Callable[[], Awaitable[Transport]]:
    """A runtime transport factory: connect with bounded exponential backoff + jitter
    (``backoff.attempts`` tries). The token is re-read at each try (a rotated token file is
    picked up). A refused upgrade is not retried. Raises ``OSError`` subclasses only, which the
    runtime reports as a startup failure."""

    async def factory() -> Transport:
        last: OSError | None = None
        for attempt in range(backoff.attempts):
            if attempt:
                delay = backoff.delay(attempt - 1, rng)
                log.info("reconnecting to %s in %.2fs (attempt %d/%d): %s",
                         endpoint.url, delay, attempt + 1, backoff.attempts, last)
                await trio.sleep(delay)
            try:
                token = token_source()
            except ConfigError as exc:
                raise EndpointRejected(exc.message) from None
            try:
                return await connect_endpoint(endpoint, token=token, timeout=timeout)
            except EndpointRejected:
                raise
            except OSError as exc:
                last = exc
        raise EndpointUnavailable(f"{endpoint.url}: no connection after {backoff.attempts} attempts "
                                        f"(last: {last})")

    return factory
