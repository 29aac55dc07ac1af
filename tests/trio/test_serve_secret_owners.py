"""``serve``'s secrets leave the redaction registry when nothing holds them (issue 35,
R-WIRE-9): a replaced default configuration's key, a channel's key once its runtime starts a
child with a newer one, and a retired channel's key. While held, each is masked everywhere.
In process (memory peers); "masked" is asked of the process redactor, the one every output uses.
"""

from __future__ import annotations

import secrets
from typing import Any

from codexrt import RuntimeConfig
from codexrt._sansio._redact import process_redactor
from codexrt._serve._daemon import DaemonConfig
from tests._support import MemoryPeers
from tests.trio.test_serve_bounds import Wire


def _key(tag: str) -> str:
    return f"{tag}-" + secrets.token_hex(12)


def _masked(value: str) -> bool:
    return value not in process_redactor()(f"x {value} y")


def _managed(key: str, **extra: Any) -> dict[str, Any]:
    return {"accessMode": "managed", "apiKey": key,
            "provider": {"id": "corp", "baseUrl": "http://127.0.0.1:9/v1", "envKey": "CORP_API_KEY"}, **extra}


async def test_issue_35_replaced_and_retired_keys_leave_the_registry(nursery: Any) -> None:
    peers = MemoryPeers(nursery)
    wire = await Wire(DaemonConfig(runtime=RuntimeConfig(transports=[peers.factory("handshake-ok")]),
                                   idle_timeout=None, max_channels=1)).start(nursery)
    k1, k2, k3, k4, k5 = (_key(t) for t in ("one", "two", "three", "four", "five"))

    assert (await wire.request("codex.configureLaunch", _managed(k1)))["ok"]
    assert _masked(k1)
    assert (await wire.request("codex.configureLaunch", _managed(k2)))["ok"]
    assert _masked(k2) and not _masked(k1)  # the default was replaced: k1 is held by nothing

    # A channel's own key: held by its runtime; a newer one replaces it once a child starts.
    assert (await wire.request("codex.configureLaunch", _managed(k3, channelId="c")))["ok"]
    assert (await wire.request("codex.configureLaunch", _managed(k4, channelId="c")))["ok"]
    assert _masked(k3) and _masked(k4)  # no child yet started with k4: k3 still held
    assert (await wire.request("codex.listModels", {"channelId": "c"}))["ok"]  # a child starts with k4
    assert not _masked(k3) and _masked(k4)

    # Retire channel c (reset, then a new channel evicts it: max_channels=1) and replace the
    # last configureLaunch: nothing holds k4 any more.
    assert (await wire.request("codex.resetRuntime", {"channelId": "c"}))["ok"]
    assert (await wire.request("codex.configureLaunch", _managed(k5, channelId="d")))["ok"]
    assert "c" not in wire.daemon.channels
    assert not _masked(k4) and _masked(k5) and _masked(k2)
    await wire.to_send.aclose()
    await wire.read_to_end()
