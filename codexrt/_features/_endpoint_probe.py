"""``codexrt doctor --connect``: one bounded check of an attached app-server endpoint (its
``/readyz``, the WebSocket upgrade and the ``initialize`` handshake). Lives above the connection
layer because it opens a :class:`~codexrt._connection.Connection` over an ``_io`` transport."""

from __future__ import annotations

from typing import Any

from codexrt._connection import ClientInfo, open_connection
from codexrt._io._transport_ws import Endpoint, Secret, check_ready, connect_endpoint
from codexrt._sansio._errors import CodexError

__all__ = ["probe_endpoint"]


async def probe_endpoint(endpoint: Endpoint, *, token: Secret | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """One bounded check of an attached app-server for ``codexrt doctor --connect``: ``/readyz``
    (ws), the WebSocket upgrade and the ``initialize`` handshake. Returns a JSON-able report
    (``ok``, ``endpoint``, ``ready``, ``userAgent``, ``error``) that never contains the token.
    The connection is closed afterwards; the server is left running."""
    report: dict[str, Any] = {"ok": False, "endpoint": endpoint.url, "loopback": endpoint.is_loopback,
                              "auth": token is not None, "ready": None, "userAgent": None}
    try:
        report["ready"] = await check_ready(endpoint, timeout=timeout) if endpoint.scheme == "ws" else None
        transport = await connect_endpoint(endpoint, token=token, timeout=timeout, probe_ready=False)
        async with open_connection(transport, sink=lambda ev: None, handshake_timeout=timeout,
                                   client_info=ClientInfo(name="codexrt-doctor")) as conn:
            result = await conn.initialize()
        report["userAgent"] = result.get("userAgent")
        report["ok"] = True
    except OSError as exc:
        report["error"] = {"code": "ENDPOINT_UNAVAILABLE", "message": str(exc)}
    except CodexError as exc:
        report["error"] = exc.to_dict()
    return report
