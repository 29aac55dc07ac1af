"""The reader's direct path for a plain notification line (issue 34) gives exactly what the
general path gives: ``Connection._on_frame`` decodes a line that starts with ``{`` itself and
hands a plain notification straight to the sink; everything else goes through
``RpcCore.receive_envelope``. The reference here is the general path of every line —
``RpcCore.receive_line`` then ``Connection._handle_events`` — on a second connection fed the
same lines. What the sinks got, the RPC state and the queued replies must be equal.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from codexrt._connection import Connection
from codexrt._io._transport import StreamTransport
from codexrt._sansio._framing import OversizedLine
from codexrt._sansio._rpc import ProtocolViolation, UnsupportedServerRequest
from codexrt._sansio._wire import MAX_JSON_DEPTH, Notification, ServerRequest

SUPPORTED = {"item/commandExecution/requestApproval"}
T = '"threadId":"t-1"'
DELTA = b'{"method":"item/agentMessage/delta","params":{' + T.encode() + b',"turnId":"u-1","itemId":"i-1","delta":"a"}}'

LINES: list[bytes | OversizedLine] = [
    b'{"method":"warning","params":{' + T.encode() + b',"message":"m"},"emittedAtMs":1796233480801}',
    b'{"method":"thread/status/changed","params":{' + T.encode() + b',"status":{"type":"active"}},"emittedAtMs":1}',
    b'{"method":"turn/started","params":{' + T.encode() + b',"turn":{"id":"u-1","items":[],"status":"inProgress"}}}',
    b'{"method":"item/started","params":{"item":{"type":"agentMessage","id":"i-1","text":""},' + T.encode()
    + b',"turnId":"u-1"},"emittedAtMs":2.5}',
    DELTA,
    b'{"params":{"x":1},"method":"late/keys","emittedAtMs":null}',
    b'{"method":"no/params"}',
    b'{"method":"null/params","params":null}',
    b'{"method":"list/params","params":[1,2]}',
    b'{"method":"bad/utf8","params":{"text":"\xff\xfe"}}',
    b'{"method":"bad/inner","params":{"a":tru}}',
    b'{"method":"x","params":{"s":"' + b"[" * 300 + b'"}}',  # brackets in a string: not deep
    b'{"method":"x","params":' + b"[" * (MAX_JSON_DEPTH - 1) + b"]" * (MAX_JSON_DEPTH - 1) + b"}",  # the limit
    b'{"method":"x","params":' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}",  # one more: too deep
    b'{"method":"x","params":' + b'{"a":' * 70 + b"[" * 70 + b"1" + b"]" * 70 + b"}" * 70 + b"}",  # mixed: too deep
    b'{"id":7,"method":"item/commandExecution/requestApproval","params":{' + T.encode() + b"}}",
    b'{"id":7,"method":"item/commandExecution/requestApproval","params":{}}',  # id reused while pending
    b'{"id":"7","method":"item/commandExecution/requestApproval","params":{}}',
    b'{"id":8,"method":"some/unsupported","params":{}}',
    b'{"method":"serverRequest/resolved","params":{"requestId":7}}',
    b'{"method":"serverRequest/resolved","params":{"requestId":99}}',
    b'{"method":"serverRequest/resolved","params":{"requestId":true}}',
    b'{"id":null,"method":"x","params":{}}',
    b'{"id":12345,"result":{}}',
    b'{"id":null,"error":{"code":-32600,"message":"bad"}}',
    b'{"id":1,"result":{},"error":{"code":1}}',
    b'{"id":1}',
    b'{"id":1.5,"result":{}}',
    b"{}",
    b"{not json",
    b'{"method":"x"} trailing',
    b'{"method":"x"}{"method":"y"}',
    b"[1]",
    b' {"method":"leading/space"}',
    b"",
    b"   ",
    OversizedLine(10_000, 4096, b'{"method":"big"'),
]


class _Sink:
    """Records what a runtime sink would see; reads a notification's params as routing does
    (so unreadable params raise there, as in the runtime)."""

    def __init__(self) -> None:
        self.seen: list[tuple[object, ...]] = []

    def __call__(self, ev: object) -> None:
        if type(ev) is Notification:
            params = ev.params  # may raise msgspec.DecodeError: the connection reports it
            self.seen.append(("notification", ev.method, params, ev.emitted_at_ms, ev.delta, ev.delta_count))
        elif isinstance(ev, ServerRequest):
            self.seen.append(("request", type(ev.id), ev.id, ev.method, ev.params))
        elif isinstance(ev, (ProtocolViolation, UnsupportedServerRequest)):
            self.seen.append(("event", ev))
        else:  # pragma: no cover - nothing else comes from these lines
            self.seen.append(("other", repr(ev)))


def _connection() -> tuple[Connection, _Sink]:
    a, _b = trio.testing.memory_stream_pair()
    sink = _Sink()
    return Connection(StreamTransport(a, a), sink=sink, supported_server_requests=SUPPORTED), sink


def _state(conn: Connection, sink: _Sink) -> object:
    core = conn.core
    return (sink.seen, [(type(k), k, r.method) for k, r in core.inbound.items()], sorted(core.outbound),
            [f.data for f in conn._replies], [f.data for f in conn._queue])


@pytest.mark.parametrize("try_delta", [True, False])
async def test_direct_notification_path_equals_the_general_path(try_delta):
    fast, fast_sink = _connection()
    general, general_sink = _connection()
    for line in LINES:
        if not try_delta and line is DELTA:
            continue  # try_delta=False promises that the line is not an exact delta line
        fast._on_frame(line, try_delta)
        general._handle_events(general.core.receive_line(line, try_delta=try_delta))
        assert _state(fast, fast_sink) == _state(general, general_sink), line
    # the lines above exercise both paths and every outcome the sink can see
    kinds = {s[0] for s in fast_sink.seen}
    assert kinds == {"notification", "request", "event"}
    assert any(type(s[1]) is ProtocolViolation and "unreadable params" in s[1].reason for s in fast_sink.seen
               if s[0] == "event")
    assert any(type(s[1]) is ProtocolViolation and "nested deeper" in s[1].reason for s in fast_sink.seen
               if s[0] == "event")
    assert fast._replies  # the -32601 answer to the unsupported request is queued on both
