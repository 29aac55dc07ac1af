"""``--connect unix://`` sends the token only to a socket served by this user (issue 35). The
listener here is ours, so the check is shown both ways: as ourselves the upgrade carries the
token; pretending to be another uid (``os.getuid`` patched) the connection is refused with
``ENDPOINT_REJECTED`` before a byte is written — the server saw no request at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from codexrt._io import _transport_ws
from codexrt._io._transport_ws import Endpoint, EndpointRejected, Secret, connect_endpoint
from tests.trio.test_transport_ws import TOKEN, WsPeerServer

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX users only")


async def test_issue_35_token_goes_to_our_own_socket(nursery, tmp_path: Path) -> None:
    server = WsPeerServer(token=TOKEN)
    url = await server.serve_unix(nursery, tmp_path / "app.sock")
    transport = await connect_endpoint(Endpoint.parse(url), token=Secret(TOKEN), probe_ready=False)
    await transport.aclose()
    assert server.auth_headers == [b"Bearer " + TOKEN.encode()]


async def test_issue_35_token_is_not_sent_to_another_users_socket(nursery, tmp_path: Path, monkeypatch) -> None:
    server = WsPeerServer(token=TOKEN)
    url = await server.serve_unix(nursery, tmp_path / "app.sock")
    me = os.getuid()
    monkeypatch.setattr(_transport_ws.os, "getuid", lambda: me + 1)
    with pytest.raises(EndpointRejected) as info:
        await connect_endpoint(Endpoint.parse(url), token=Secret(TOKEN), probe_ready=False)
    assert info.value.details["reason"] == "socketOwner" and info.value.details["ownerUid"] == me
    assert TOKEN not in str(info.value)
    await trio.testing.wait_all_tasks_blocked()
    assert server.auth_headers == []  # no upgrade request reached the server


async def test_issue_35_without_a_token_there_is_nothing_to_protect(nursery, tmp_path: Path, monkeypatch) -> None:
    server = WsPeerServer()
    url = await server.serve_unix(nursery, tmp_path / "app.sock")
    monkeypatch.setattr(_transport_ws.os, "getuid", lambda: os.geteuid() + 1)
    transport = await connect_endpoint(Endpoint.parse(url), probe_ready=False)
    await transport.aclose()
    assert server.auth_headers == [None]
