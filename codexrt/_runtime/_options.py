"""``RuntimeOptions``: the keyword arguments ``open_runtime(**options)``,
``codexrt.aio.open_runtime(**options)`` and ``codexrt.blocking.connect(**options)`` accept — the
fields of :class:`codexrt.RuntimeConfig`, typed, so a checker catches an unknown or mistyped
keyword (``tests/e2e/test_typing.py`` keeps the two in step)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Sequence, TypedDict

if TYPE_CHECKING:
    from codexrt._connection import ClientInfo
    from codexrt._sansio._settings import Settings
    from codexrt._io._transport import Transport

__all__ = ["RuntimeOptions"]


class RuntimeOptions(TypedDict, total=False):
    """See :class:`codexrt.RuntimeConfig` for what each field means."""

    codex_bin: str | None
    access_mode: Literal["cli_login", "managed", "inactive"]
    app_server_args: Sequence[str]
    codex_home: str | None
    env: dict[str, str] | None
    cwd: str | None
    channel_id: str
    client_info: ClientInfo
    opt_out_notification_methods: Sequence[str]
    rpc_timeout: float
    handshake_timeout: float
    stop_budget: float
    settings_confirm_timeout: float
    idle_timeout: float | None
    settings: Settings
    transports: Sequence[Callable[[], Awaitable[Transport]]] | None
    secrets: Sequence[str]
    connect: str | None
    token_file: str | None
    token_env: str | None
    allow_remote: bool
    connect_timeout: float
    reconnect_backoff: Any
    provider: dict[str, Any] | None
    api_key: str | None
