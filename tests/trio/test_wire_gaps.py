"""Wire gaps a hostile app-server could use (issue 35; R-WIRE-5):

* a reply whose bytes are not valid UTF-8 fails its call **at once** as a ``PROTOCOL_ERROR``
  (its id is readable), never after the RPC timeout — proven on the autojump clock: the call
  fails with virtual time still at its start;
* invalid UTF-8 in a notification's params is a ``protocolError`` event and a warning, not an
  ERROR traceback ("connection sink raised"); reading goes on.

The memory peer writes ``raw`` lines with ``surrogateescape``: ``\\udcff`` is the byte 0xff.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

import codexrt
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._errors import RemoteProtocolError
from codexrt._sansio._states import RuntimeState
from tests.trio.test_hostile_peer import _drain


def _rt(peers, scenario, **kw):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(scenario)], **kw))


@pytest.mark.parametrize("reply", [
    '{"id":$id,"result":{"data":[],"nextCursor":"\udcff"}}\n',
    '{"id":$id,"error":{"code":-32600,"message":"bad \udcff"}}\n',
])
async def test_issue_35_a_non_utf8_reply_fails_its_call_at_once(peers, autojump_clock, reply: str) -> None:
    scenario = {"name": "bad-utf8-reply", "rules": [{"match": {"method": "thread/list"}, "actions": [{"raw": reply}]}]}
    async with _rt(peers, scenario, rpc_timeout=600.0) as rt:
        with rt.subscribe() as events:
            conn = await rt.ensure_started()
            start = trio.current_time()
            with pytest.raises(RemoteProtocolError) as info:
                await conn.call("thread/list", {})
            assert trio.current_time() - start < 1.0  # not the 600 s RPC timeout
            assert info.value.code == "PROTOCOL_ERROR" and "UTF-8" in info.value.message
            assert info.value.details["method"] == "thread/list"
            kinds = [e.kind for e in await _drain(events)]
            assert "protocolError" in kinds
            # the connection lives on: the next call is answered normally
            assert rt.state is RuntimeState.READY and not conn.closed.is_set()


async def test_issue_35_non_utf8_notification_params_are_a_protocol_error_not_a_traceback(peers, caplog) -> None:
    bad = '{"method":"thread/started","params":{"thread":{"id":"t\udcff"}}}\n'
    bad_delta = ('{"method":"item/agentMessage/delta","params":{"threadId":"t","turnId":"u","itemId":"i",'
                 '"delta":"x\udcff"}}\n')
    scenario = {"name": "bad-utf8-notify", "rules": [{"match": {"method": "thread/list"},
                                                      "actions": [{"raw": bad}, {"raw": bad_delta}, {"default": True}]}]}
    caplog.set_level(logging.WARNING, logger="codexrt.connection")
    async with _rt(peers, scenario) as rt:
        with rt.subscribe() as events:
            conn = await rt.ensure_started()
            result = await conn.call("thread/list", {})
            assert result["data"] == []
            errors = [e.payload["reason"] for e in await _drain(events) if e.kind == "protocolError"]
            assert len(errors) == 2 and all("unreadable params" in r for r in errors), errors
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if "sink raised" in r.getMessage()]


async def test_issue_35_oversized_native_ids_are_not_kept(peers) -> None:
    """A thread id of 1 MB from the app-server would be kept in the runtime's tables (capped by
    count only): such a notification is a ``protocolError`` and is not routed; normal ids are."""
    big = "t" * (1 << 20)
    lines = [
        '{"method":"thread/started","params":{"thread":{"id":"%s"}}}\n' % big,
        '{"method":"thread/status/changed","params":{"threadId":"%s","status":{"type":"idle"}}}\n' % big,
        '{"method":"thread/started","params":{"thread":{"id":"small-1"}}}\n',
    ]
    scenario = {"name": "big-ids", "rules": [{"match": {"method": "thread/list"},
                                              "actions": [*({"raw": line} for line in lines), {"default": True}]}]}
    async with _rt(peers, scenario) as rt:
        with rt.subscribe() as events:
            conn = await rt.ensure_started()
            await conn.call("thread/list", {})
            evs = await _drain(events)
            errors = [e.payload["reason"] for e in evs if e.kind == "protocolError"]
            assert len(errors) == 2 and all("1048576 characters" in r for r in errors), errors
            assert [e.thread_id for e in evs if e.kind == "threadStarted"] == ["small-1"]
            assert all(len(t) <= 1024 for t in rt.threads)
