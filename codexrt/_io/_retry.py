"""Overload retry: ``-32001 "Server overloaded; retry later."`` and bounded backoff.

Why this module exists
----------------------
The app-server's request ingress is a bounded queue. When it is full the server answers
``{"error": {"code": -32001, "message": "Server overloaded; retry later."}}`` and its README asks
clients to retry with exponential backoff plus jitter. Retrying is only safe when sending the
request twice cannot change anything: the request was *refused*, but a client cannot always tell a
refusal from a lost reply (openai/codex#19366: the server may even drop the overload reply when
its outbound queue is full). So codexrt retries **only the read-only methods listed in**
:data:`READ_ONLY_RETRY_TABLE` and never anything that starts, stops or changes something —
``turn/start``, ``turn/interrupt``, ``thread/start``/``resume``, settings updates, replies to
server requests… Those surface a typed :class:`~codexrt._sansio._errors.ServerOverloaded` (code
``SERVER_OVERLOADED``) and the host decides. The table is documented in ``docs/transports.md``.

An overload is recognised by its JSON-RPC code (``-32001``) *or* by the message as the real
server words it (some proxies re-code errors, and peer clients that only look at ``data`` miss the
native reply — openai/codex#46878): the ``overloaded`` row of
:data:`~codexrt._sansio._errors.RPC_ERROR_TABLE`.

:class:`Backoff` is plain arithmetic (no Trio): the ``n``-th delay is
``min(maximum, initial * factor**n)`` scaled down by up to ``jitter`` (a fraction), so with the
default ``jitter=0.5`` every delay lies in ``[d/2, d]`` — exponential growth stays provable while
clients that were refused together do not come back together. ``attempts`` bounds the total number
of tries, so every retry loop ends. The same policy drives reconnects to an attached app-server
(``codexrt._io._transport_ws``).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterator, Mapping, Protocol

import attrs
import trio

from codexrt._sansio._errors import OVERLOAD_CODE, LocalProtocolError, RpcError, ServerOverloaded, from_rpc_error

__all__ = [
    "Backoff",
    "DEFAULT_OVERLOAD_BACKOFF",
    "OVERLOAD_CODE",
    "OVERLOAD_MESSAGE",
    "READ_ONLY_RETRY_TABLE",
    "NEVER_RETRIED",
    "is_overloaded",
    "as_overloaded",
    "call_read_only",
    "call_read",
]

OVERLOAD_MESSAGE = "Server overloaded; retry later."

#: Methods retried on overload, with why a repeat is harmless. Everything else is never retried.
READ_ONLY_RETRY_TABLE: Mapping[str, str] = {
    # history and thread metadata: reads of rollouts and in-memory state
    "thread/list": "lists stored threads (cursor paging)",
    "thread/read": "reads one thread (optionally its turns); loads nothing",
    "thread/turns/list": "pages a thread's turns",
    "thread/items/list": "pages a thread's items",
    "thread/items/read": "reads items by id",
    "thread/loaded/list": "lists threads loaded in this server",
    "thread/search": "searches stored threads",
    "thread/goal/get": "reads a thread's goal",
    "thread/queue/list": "reads a thread's queued inputs",
    "thread/attachment/list": "lists a thread's attachments",
    "thread/backgroundTerminals/list": "lists background terminals",
    "thread/timeline/list": "pages a thread's timeline",
    # catalogs and configuration reads
    "model/list": "model catalog",
    "modelProvider/list": "model provider catalog",
    "collaborationMode/list": "collaboration mode catalog",
    "experimentalFeature/list": "feature flags",
    "permissionProfile/list": "permission profiles",
    "skills/list": "skills catalog",
    "hooks/list": "hooks catalog",
    "plugin/list": "plugin catalog",
    "plugin/read": "one plugin",
    "plugin/installed": "installed plugins",
    "app/list": "apps catalog",
    "app/read": "one app",
    "app/installed": "installed apps",
    "mcpServerStatus/list": "MCP server status",
    "config/read": "effective configuration",
    "configRequirements/read": "configuration requirements",
    "account/read": "account status",
    "account/rateLimits/read": "rate limits",
    "project/list": "projects",
    "project/read": "one project",
    "threadSection/list": "thread sections",
    "memory/status": "memory status",
    "fs/readFile": "reads a file",
    "fs/getMetadata": "stats a path",
    "fs/readDirectory": "lists a directory",
}

#: Methods that are *never* retried on overload, and why (documentation; the rule is "not in
#: the table above"). Replies to server requests are never retried either: they are not calls.
NEVER_RETRIED: Mapping[str, str] = {
    "turn/start": "starts a turn: a repeat could run the prompt twice (R-RT-4, R-OP-7)",
    "turn/steer": "adds input to a running turn",
    "turn/interrupt": "stops a turn; the caller's stop budget decides what happens next (R-OP-5)",
    "thread/start": "creates a thread",
    "thread/resume": "loads a thread and takes its writer lock",
    "thread/fork": "creates a thread",
    "thread/compact/start": "starts a compaction turn",
    "review/start": "starts a review turn",
    "thread/settings/update": "changes settings (R-SET-2 waits for the server's confirmation)",
    "thread/unsubscribe": "changes the server's subscriptions",
    "config/mcpServer/reload": "reloads MCP servers (restarts processes)",
}


@attrs.frozen
class Backoff:
    """Bounded exponential backoff with jitter.

    ``attempts`` is the total number of tries (the first one included), so there are at most
    ``attempts - 1`` delays. Delay ``n`` (0-based) is ``d = min(maximum, initial * factor**n)``
    reduced by ``d * jitter * u`` for a uniform ``u`` in ``[0, 1)``.
    """

    initial: float = attrs.field(default=0.25, validator=attrs.validators.gt(0))
    factor: float = attrs.field(default=2.0, validator=attrs.validators.ge(1))
    maximum: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))
    attempts: int = attrs.field(default=5, validator=attrs.validators.ge(1))
    jitter: float = attrs.field(default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)])

    def ceiling(self, n: int) -> float:
        """The un-jittered ``n``-th delay."""
        return min(self.maximum, self.initial * self.factor ** n)

    def delay(self, n: int, rng: Callable[[], float] = random.random) -> float:
        d = self.ceiling(n)
        return d - d * self.jitter * rng()

    def delays(self, rng: Callable[[], float] = random.random) -> Iterator[float]:
        """The ``attempts - 1`` delays between tries."""
        for n in range(self.attempts - 1):
            yield self.delay(n, rng)

    def max_total(self) -> float:
        """Upper bound of the time spent sleeping by one retry loop."""
        return sum(self.ceiling(n) for n in range(self.attempts - 1))


DEFAULT_OVERLOAD_BACKOFF = Backoff()


def is_overloaded(exc: BaseException) -> bool:
    """True for the server's overload answer, recognised by code or by its wording
    (:data:`~codexrt._sansio._errors.RPC_ERROR_TABLE`)."""
    return from_rpc_error(exc) is ServerOverloaded


def as_overloaded(exc: RpcError, *, attempts: int | None = None) -> ServerOverloaded:
    """The typed error for an overload answer (a new object; ``details`` keep the method)."""
    err = ServerOverloaded(exc.message, rpc_code=exc.rpc_code, method=exc.method, data=exc.data,
                           phase=exc.phase)
    if attempts is not None:
        err.details["attempts"] = attempts
    return err


class _Caller(Protocol):
    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any: ...


class _Sent(Protocol):
    """A request already sent (``codexrt._connection.PendingCall``)."""

    async def result(self) -> Any: ...


async def call_read_only(
    conn: _Caller,
    method: str,
    params: Any = None,
    *,
    timeout: float | None = None,
    backoff: Backoff = DEFAULT_OVERLOAD_BACKOFF,
    rng: Callable[[], float] = random.random,
    on_retry: Callable[[int, float, ServerOverloaded], None] | None = None,
    on_written: Callable[[], None] | None = None,
    typed: bool = False,
    raw: bool = False,
    sent: _Sent | None = None,
) -> Any:
    """``conn.call(method, params)``, retried on overload for the read-only methods of
    :data:`READ_ONLY_RETRY_TABLE` (bounded by ``backoff.attempts``).

    ``timeout`` bounds each try (the connection's default when None); the whole call is bounded
    by ``attempts * timeout + backoff.max_total()``. ``on_retry(attempt, delay, error)`` is
    called before each sleep (for logging/metrics; it must not raise); ``on_written`` (called once
    each try's request is written), ``typed`` (the result decoded into its wire model) and ``raw``
    (its JSON text undecoded) are given to ``conn.call`` (see ``Connection.call``). ``sent``: the
    first try is a request already sent (``Connection.send_request``, with the same
    ``typed``/``raw``): its answer is awaited instead of a new call, and an overload answer to it
    counts as the first try. When the last try is refused the error is :class:`ServerOverloaded` with ``details["attempts"]``; any other
    error propagates at once. A method outside the table raises :class:`LocalProtocolError`
    before anything is written — use ``conn.call`` for those, which never retries.
    Cancelling the caller cancels the current try or sleep; nothing is left running.
    """
    if method not in READ_ONLY_RETRY_TABLE:
        raise LocalProtocolError(
            f"{method} is not a read-only method codexrt may retry on overload; "
            "call it once with Connection.call", details={"method": method})
    kw = _call_kw(on_written, typed, raw)
    attempt = 0
    while True:
        attempt += 1
        try:
            if sent is not None and attempt == 1:
                return await sent.result()
            return await conn.call(method, params, timeout=timeout, **kw)
        except RpcError as exc:
            if not is_overloaded(exc):
                raise
            err = as_overloaded(exc, attempts=attempt)
            if attempt >= backoff.attempts:
                raise err from None
            delay = backoff.delay(attempt - 1, rng)
            if on_retry is not None:
                on_retry(attempt, delay, err)
            await trio.sleep(delay)


def _call_kw(on_written: Callable[[], None] | None, typed: bool, raw: bool) -> dict[str, Any]:
    # Only what is asked for reaches ``conn.call`` (a bare caller need not know these keywords).
    kw: dict[str, Any] = {}
    if on_written is not None:
        kw["on_written"] = on_written
    if typed:
        kw["typed"] = True
    if raw:
        kw["raw"] = True
    return kw


async def call_read(conn: _Caller, method: str, params: Any = None, *, timeout: float | None = None,
                    on_written: Callable[[], None] | None = None, typed: bool = False, raw: bool = False,
                    sent: _Sent | None = None) -> Any:
    """The call codexrt's read paths use (history, catalogs, ``serve``'s read-only commands):
    retried on overload when ``method`` is in :data:`READ_ONLY_RETRY_TABLE`, a single
    ``conn.call`` otherwise (so nothing that changes state is ever repeated). ``on_written``,
    ``typed``, ``raw``, ``sent``: see :func:`call_read_only`."""
    if method in READ_ONLY_RETRY_TABLE:
        return await call_read_only(conn, method, params, timeout=timeout, on_written=on_written, typed=typed,
                                    raw=raw, sent=sent)
    if sent is not None:
        return await sent.result()
    return await conn.call(method, params, timeout=timeout, **_call_kw(on_written, typed, raw))
