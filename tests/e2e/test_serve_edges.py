"""``codexrt serve``: every reply carries its id (issue 31, R-D-4) — against the fake app-server.

* a line that does not decode whole (a number a double cannot hold) is answered with the id
  read from its top level; an over-long id is refused and echoed whole;
* an id whose command has no reply yet is refused (``DUPLICATE_REQUEST_ID``) and the pending
  command still gets its one reply; once replied, the id may be used again;
* the app-server's input limit (1,048,576 characters) is checked before anything is created.
"""

from __future__ import annotations

import json

from codexrt._sansio._context import MAX_INPUT_CHARS
from codexrt._serve._codec import MAX_ID_LENGTH
from peer_fixtures.fake_app_server import read_log
from tests.e2e.test_serve_e2e import ServeProcess, fake_cli


async def test_r_d_4_a_line_that_does_not_decode_is_answered_with_its_id(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        await sp.send_raw(b'{"id":"w1","command":"codex.readWorkspaceDiff","params":{"cwd":"/tmp","timeout":1e999}}\n')
        reply = await sp.response("w1")
        assert reply["ok"] is False and reply["error"]["code"] == "INVALID_JSON"
        long_id = "k" * (MAX_ID_LENGTH + 1)
        await sp.send_raw(json.dumps({"id": long_id, "command": "status"}).encode() + b"\n")
        refused = await sp.response(long_id)
        assert refused["error"]["code"] == "INVALID_REQUEST" and refused["error"]["details"]["idLength"] == len(long_id)
        await sp.send_raw(b'{"id":1e999,"command":"status"}\n')  # no id a host could wait on: null
        assert (await sp.response(None))["error"]["code"] == "INVALID_JSON"
        assert await sp.finish() == 0


async def test_r_d_4_a_pending_id_is_refused_and_free_again_after_its_reply(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn", log)) as sp:
        await sp.send("codex.send", {"channelId": "c", "message": "runs until aborted"}, id="dup")
        await sp.event("turnStarted")
        # the same id again — on a long command, a control command and with another JSON type
        # (raw lines: the harness keeps the first command's name for the id, to check its result)
        await sp.send_raw(b'{"id":"dup","command":"codex.send","params":{"channelId":"c","message":"second"}}\n')
        second = await sp.next(lambda l: l["type"] == "response" and l["id"] == "dup")
        assert second["ok"] is False and second["error"]["code"] == "DUPLICATE_REQUEST_ID"
        assert second["error"]["details"] == {"command": "codex.send"}
        await sp.send_raw(b'{"id":"dup","command":"status"}\n')
        third = await sp.next(lambda l: l["type"] == "response" and l["id"] == "dup")
        assert third["error"]["code"] == "DUPLICATE_REQUEST_ID"
        assert (await sp.request("status"))["ok"] is True  # other ids are unaffected
        abort = await sp.request("codex.abortTurn", {"channelId": "c"})
        assert abort["result"]["stopPath"] == "interruptSent"
        first = await sp.next(lambda l: l["type"] == "response" and l["id"] == "dup")
        assert first["ok"] is True and first["result"]["status"] == "interrupted"  # its one reply
        again = await sp.request("codex.abortTurn", {"channelId": "c"}, id="dup")  # replied: free again
        assert again["ok"] is True and again["result"]["stopPath"] == "noOperation"
        assert await sp.finish() == 0
    turn_starts = [m for m in read_log(log) if m.get("method") == "turn/start"]
    assert len(turn_starts) == 1  # the refused send was never run


async def test_r_d_4_input_over_the_limit_is_refused_before_anything_is_created(tmp_path):
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok", log)) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "x" * (MAX_INPUT_CHARS + 1)})
        reply = await sp.response(rid)
        assert reply["ok"] is False and reply["error"]["code"] == "INVALID_PARAMS"
        assert reply["error"]["details"]["path"] == "$.params.message"
        status = (await sp.request("status"))["result"]
        assert status["channels"] == []  # no channel, no child, no thread
        assert await sp.finish() == 0
    assert read_log(log) == []


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_settled_operations_keep_no_answer_text_serve_rss_flat_over_30_big_turns(tmp_path):
    """Issue 31: the runtime's table of the last 256 settled operations kept each final text,
    so serve grew by ~1 MB per 1 MB answer. Settled records keep ids, status and error only:
    over 30 turns of 1 MB answers, serve's RSS after the warm-up grows far less than the 25 MB
    the answers of turns 6…30 would hold (a generous bound, not a timing)."""
    answer = "0123456789abcdef" * (1_000_000 // 16)  # 1 MB
    scenario = tmp_path / "big-answers.json"
    scenario.write_text(json.dumps({"name": "big-answers", "description": "1 MB answers in 8 deltas",
                                    "defaults": True, "settings": {"text": answer, "deltas": 8}}))
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, str(scenario))) as sp:
        pid = sp.proc.pid
        thread_id = None
        rss = {}
        for turn in range(1, 31):
            rid = await sp.send("codex.send", {"channelId": "c", "threadId": thread_id, "message": f"turn {turn}"})
            reply = await sp.response(rid)
            assert reply["result"]["status"] == "completed" and reply["result"]["finalText"] == answer
            thread_id = reply["result"]["threadId"]
            sp.lines.clear(), sp._unconsumed.clear(), sp.transcript.clear()  # keep the test's own memory flat
            if turn in (5, 30):
                rss[turn] = _rss_kib(pid)
        growth_mb = (rss[30] - rss[5]) / 1024
        assert growth_mb < 10, rss  # the old table: >= 25 MB here
        assert await sp.finish() == 0
