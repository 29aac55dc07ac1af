"""JSON-RPC bookkeeping of one app-server connection, without I/O (R-WIRE-1 … R-WIRE-8).

Theory of operation
-------------------
The core is fed complete lines (:meth:`RpcCore.receive_line`) and returns *events*; it is asked
to start requests (:meth:`RpcCore.start_request`) and to answer server requests
(:meth:`RpcCore.reply` / :meth:`RpcCore.reply_error`) and returns the bytes to write. Bytes the
core must send on its own (the ``-32601`` answer to an unknown server request, R-WIRE-7) wait
in :meth:`RpcCore.data_to_send`, h11-style. The Trio driver (``codexrt._connection``) owns the
pipes.

Two registries, never shared (R-WIRE-2; pygls's single dict is the counter-example):

* ``outbound`` — our requests, keyed by the id we chose (always an ``int``), each with its
  dispatch phase ``notWritten → writtenUnconfirmed`` (R-OP-2 at the RPC level);
* ``inbound`` — the server's requests awaiting our reply, keyed by the server's id exactly as
  received (``3`` and ``"3"`` are different keys; Python's ``3 == 3.0`` cannot arise because
  float ids are violations).

A request that timed out on our side moves to a bounded *late* table: if its response still
arrives it becomes a :class:`LateResponse` event (R-WIRE-4), never a result for someone else.
A response to an id we never sent is a protocol violation (reported, reading continues).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Container, Union

import attrs
from msgspec import Raw

from codexrt._sansio._errors import LocalProtocolError
from codexrt._sansio._framing import OversizedLine
from codexrt._sansio._states import Phase  # how far a request got (R-WIRE-4): the one phase enum
from codexrt._sansio._wire import (
    BadReply,
    Envelope,
    ErrorObject,
    ErrorResponse,
    Notification,
    RequestId,
    Response,
    ServerRequest,
    Violation,
    decode_envelope,
    encode_json,
)

__all__ = [
    "Phase",
    "OutboundCall",
    "CallSucceeded",
    "CallFailed",
    "CallBroken",
    "LateResponse",
    "ProtocolViolation",
    "UnsupportedServerRequest",
    "RpcCore",
    "METHOD_NOT_FOUND",
    "SERVER_OVERLOADED",
]

METHOD_NOT_FOUND = -32601
SERVER_OVERLOADED = -32001


@attrs.define(eq=False)
class OutboundCall:
    """One of our requests. ``data`` is the line to write (with its newline)."""

    id: int
    method: str
    data: bytes = attrs.field(repr=False)
    phase: Phase = Phase.NOT_WRITTEN


@attrs.frozen
class CallSucceeded:
    call: OutboundCall
    result_raw: Raw = attrs.field(repr=False)


@attrs.frozen
class CallFailed:
    call: OutboundCall
    error: ErrorObject


@attrs.frozen
class CallBroken:
    """The peer answered ``call`` with a reply that cannot be read (bytes that are not UTF-8):
    the call fails at once as a protocol error instead of waiting for its timeout (issue 35)."""

    call: OutboundCall
    reason: str


@attrs.frozen
class LateResponse:
    """A response to a request we had given up on (R-WIRE-4); ``phase`` is the phase the
    request had when its wait failed."""

    id: int
    method: str
    phase: Phase
    result_raw: Raw | None = attrs.field(repr=False, default=None)
    error: ErrorObject | None = None


@attrs.frozen
class ProtocolViolation:
    """A bad line from the peer (R-WIRE-5): reported, reading continues."""

    reason: str
    excerpt: bytes = attrs.field(repr=False, default=b"")


@attrs.frozen
class UnsupportedServerRequest:
    """A server request we do not handle; the core already queued the ``-32601`` reply."""

    id: RequestId
    method: str


Event = Union[
    Notification,
    ServerRequest,
    CallSucceeded,
    CallFailed,
    CallBroken,
    LateResponse,
    ProtocolViolation,
    UnsupportedServerRequest,
]


def _line(obj: dict[str, Any]) -> bytes:
    return encode_json(obj) + b"\n"


class RpcCore:
    """The sans-IO JSON-RPC state of one connection.

    ``supported_server_requests`` decides which server requests are passed up; every other one
    is answered ``{id, error: {code: -32601, message: "unsupported server request: <m>"}}``
    (R-WIRE-7) — never auto-approved.
    """

    def __init__(
        self,
        supported_server_requests: Container[str] | Callable[[str], bool] = frozenset(),
        *,
        max_late: int = 1024,
    ) -> None:
        if callable(supported_server_requests):
            self._supports: Callable[[str], bool] = supported_server_requests
        else:
            container = supported_server_requests
            self._supports = lambda m: m in container
        self._next_id = 1
        self.outbound: dict[int, OutboundCall] = {}
        self.inbound: dict[RequestId, ServerRequest] = {}
        self._late: OrderedDict[int, OutboundCall] = OrderedDict()
        self._max_late = max_late
        self._outbox: list[bytes] = []
        self.closed = False

    def __repr__(self) -> str:
        return (
            f"<RpcCore outbound={len(self.outbound)} inbound={len(self.inbound)} "
            f"late={len(self._late)} closed={self.closed}>"
        )

    # -- our requests -------------------------------------------------------------------

    def start_request(self, method: str, params: Any) -> OutboundCall:
        """Register a request (phase ``notWritten``) and return it with its encoded line.
        The real server requires ``params`` even when empty, so ``None`` becomes ``{}``."""
        if self.closed:
            raise LocalProtocolError("connection is closed")
        call_id = self._next_id
        self._next_id += 1
        data = _line({"id": call_id, "method": method, "params": {} if params is None else params})
        call = OutboundCall(call_id, method, data)
        self.outbound[call_id] = call
        return call

    def mark_written(self, call: OutboundCall) -> None:
        if call.phase is Phase.NOT_WRITTEN:
            call.phase = Phase.WRITTEN_UNCONFIRMED

    def abandon(self, call: OutboundCall) -> Phase:
        """Our wait for ``call`` failed (timeout/cancel). Remember it so a late answer is
        recognised. Returns the phase it had."""
        phase = call.phase
        if self.outbound.pop(call.id, None) is not None and phase is Phase.WRITTEN_UNCONFIRMED:
            self._late[call.id] = call
            while len(self._late) > self._max_late:
                self._late.popitem(last=False)
        return phase

    @staticmethod
    def encode_notification(method: str, params: Any = None) -> bytes:
        obj: dict[str, Any] = {"method": method}
        if params is not None:
            obj["params"] = params
        return _line(obj)

    # -- server requests ----------------------------------------------------------------

    def reply(self, request_id: RequestId, result: Any) -> bytes:
        """The line answering server request ``request_id`` (R-WIRE-8: id echoed as is)."""
        self._take_inbound(request_id)
        return _line({"id": request_id, "result": result})

    def reply_error(
        self, request_id: RequestId, code: int, message: str, data: Any = None
    ) -> bytes:
        self._take_inbound(request_id)
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        return _line({"id": request_id, "error": err})

    def _take_inbound(self, request_id: RequestId) -> ServerRequest:
        # Look up by (type, value) so 3 and "3" never alias.
        req = self.inbound.get(request_id)
        if req is None or type(req.id) is not type(request_id):
            raise LocalProtocolError(
                f"no pending server request with id {request_id!r} (already answered?)"
            )
        del self.inbound[request_id]
        return req

    def forget_inbound(self, request_id: RequestId) -> ServerRequest | None:
        """The server resolved a request itself (``serverRequest/resolved``): stop expecting
        our reply. Returns the request if it was pending."""
        req = self.inbound.get(request_id)
        if req is not None and type(req.id) is type(request_id):
            del self.inbound[request_id]
            return req
        return None

    # -- incoming -----------------------------------------------------------------------

    def receive_line(self, line: bytes | OversizedLine, *, try_delta: bool = True) -> list[Event]:
        """The events one line from the peer means. ``try_delta=False``: the caller already
        knows the line is not an exact streaming-delta line (see
        :func:`~codexrt._sansio._wire.decode_envelope`)."""
        if type(line) is OversizedLine:
            return [
                ProtocolViolation(f"line of {line.size} bytes exceeds the {line.limit}-byte limit")
            ]
        if not line or line.isspace():  # type: ignore[union-attr]
            return []
        return self.receive_envelope(decode_envelope(line, try_delta), line)  # type: ignore[arg-type]

    def receive_envelope(self, env: Envelope, line: bytes) -> list[Event]:
        """The events of ``env``, the :func:`~codexrt._sansio._wire.decode_envelope` of the
        non-blank ``line`` (second half of :meth:`receive_line`, for a driver that decoded the
        line itself to hand a plain notification on without building a list, issue 34)."""
        if type(env) is Notification:
            return [env]
        if isinstance(env, ServerRequest):
            return self._on_server_request(env)
        if isinstance(env, Response):
            return self._on_response(env.id, env.result_raw, None, line)
        if isinstance(env, ErrorResponse):
            return self._on_response(env.id, None, env.error, line)
        if isinstance(env, BadReply):
            call = self.outbound.pop(env.id, None) if type(env.id) is int else None  # type: ignore[arg-type]
            if call is not None:
                call.phase = Phase.ANSWERED
                return [CallBroken(call, env.reason), ProtocolViolation(env.reason, env.excerpt)]
            if type(env.id) is int:
                self._late.pop(env.id, None)  # type: ignore[arg-type]
            return [ProtocolViolation(env.reason, env.excerpt)]
        assert isinstance(env, Violation)
        return [ProtocolViolation(env.reason, env.excerpt)]

    def _on_server_request(self, req: ServerRequest) -> list[Event]:
        if not self._supports(req.method):
            self._outbox.append(
                _line(
                    {
                        "id": req.id,
                        "error": {
                            "code": METHOD_NOT_FOUND,
                            "message": f"unsupported server request: {req.method}",
                        },
                    }
                )
            )
            return [UnsupportedServerRequest(req.id, req.method)]
        events: list[Event] = []
        old = self.inbound.get(req.id)
        if old is not None and type(old.id) is type(req.id):
            events.append(
                ProtocolViolation(
                    f"server request id {req.id!r} reused while still pending ({old.method})"
                )
            )
        self.inbound[req.id] = req
        events.append(req)
        return events

    def _on_response(
        self,
        rid: RequestId | None,
        result_raw: Raw | None,
        error: ErrorObject | None,
        line: bytes,
    ) -> list[Event]:
        # Our ids are ints; a string id can never answer one of ours (R-WIRE-2).
        call = self.outbound.pop(rid, None) if type(rid) is int else None  # type: ignore[arg-type]
        if call is not None:
            call.phase = Phase.ANSWERED
            if error is not None:
                return [CallFailed(call, error)]
            return [CallSucceeded(call, result_raw)]  # type: ignore[arg-type]
        late = self._late.pop(rid, None) if type(rid) is int else None  # type: ignore[arg-type]
        if late is not None:
            return [LateResponse(late.id, late.method, late.phase, result_raw, error)]
        if rid is None and error is not None:
            return [ProtocolViolation(f"error without id: {error.code} {error.message}", line[:200])]
        return [ProtocolViolation(f"response to unknown request id {rid!r}", line[:200])]

    def data_to_send(self) -> list[bytes]:
        """Lines the core queued on its own (``-32601`` replies); the driver writes them."""
        if not self._outbox:
            return []
        out, self._outbox = self._outbox, []
        return out

    @property
    def has_data_to_send(self) -> bool:
        return bool(self._outbox)

    # -- end ----------------------------------------------------------------------------

    def close(self) -> tuple[list[OutboundCall], list[ServerRequest]]:
        """The connection ended: return (and forget) every pending request in both
        directions so the driver can settle each exactly once (R-WIRE-6)."""
        self.closed = True
        calls = list(self.outbound.values())
        reqs = list(self.inbound.values())
        self.outbound.clear()
        self.inbound.clear()
        self._late.clear()
        return calls, reqs
