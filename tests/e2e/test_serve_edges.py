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


# -- events and docs agree (issue 31) ---------------------------------------------------------


async def test_r_d_2_operation_done_is_the_reply_result(tmp_path):
    """``operationDone`` has the same fields as the reply's result (clientMessageId included)."""
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hi", "clientMessageId": "cm-7"})
        reply = await sp.response(rid)
        done = await sp.event("operationDone")
        assert done["payload"] == reply["result"] and done["payload"]["clientMessageId"] == "cm-7"
        assert await sp.finish() == 0


async def test_r_rt_5_reset_and_release_reply_after_their_events(tmp_path):
    """``resetRuntime`` / ``releaseThread`` reply after the ``runtimeReset`` and the
    ``runtimeStateChanged`` to ``STOPPED`` they cause (docs/daemon-protocol.md)."""
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok")) as sp:
        for command in ("codex.resetRuntime", "codex.releaseThread"):
            sent = await sp.request("codex.send", {"channelId": "c", "message": "hi"})
            params = {"channelId": "c"}
            if command == "codex.releaseThread":
                params["threadId"] = sent["result"]["threadId"]
            reply = await sp.request(command, params)
            assert reply["ok"] is True
            at = sp.lines.index(reply)
            reset = [i for i, l in enumerate(sp.lines) if l["type"] == "daemon" and l["kind"] == "runtimeReset"]
            stopped = [i for i, l in enumerate(sp.lines) if l["type"] == "daemon" and l["kind"] == "runtimeStateChanged"
                       and l["payload"]["to"] == "STOPPED"]
            assert reset and reset[-1] < at and stopped and stopped[-1] < at, command
            sp.lines.clear()
        assert await sp.finish() == 0


async def test_r_op_5_every_abort_shows_turn_aborted_before_the_terminal(tmp_path):
    """``turnAborted`` is sent with every interrupt, before the operation's ``operationDone``
    (it came only when the interrupt's answer beat the turn's terminal: 1 of 11 aborts)."""
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "hang-turn")) as sp:
        thread_id = None
        for _ in range(3):
            rid = await sp.send("codex.send", {"channelId": "c", "message": "hang", "threadId": thread_id})
            started = await sp.event("turnStarted")
            abort = await sp.request("codex.abortTurn", {"channelId": "c"})
            assert abort["result"]["stopPath"] == "interruptSent"
            reply = await sp.response(rid)
            thread_id = reply["result"]["threadId"]
            assert reply["result"]["status"] == "interrupted"
            op = started["clientOperationId"]
            kinds = [l["kind"] for l in sp.lines if l["type"] == "daemon" and l["clientOperationId"] == op]
            assert kinds.count("turnAborted") == 1 and kinds.index("turnAborted") < kinds.index("operationDone")
        assert await sp.finish() == 0


async def test_r_op_5_a_failed_interrupt_is_an_error_event_of_the_documented_shape(tmp_path):
    scenario = tmp_path / "interrupt-refused.json"
    scenario.write_text(json.dumps({
        "name": "interrupt-refused", "description": "the turn hangs; turn/interrupt is refused", "defaults": True,
        "rules": [{"match": {"method": "turn/start"}, "actions": [{"hang_turn": True}]},
                  {"match": {"method": "turn/interrupt"},
                   "actions": [{"error": {"code": -32600, "message": "no active turn to interrupt"}}]}]}))
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, str(scenario)),
                                 "--stop-budget", "1") as sp:
        rid = await sp.send("codex.send", {"channelId": "c", "message": "hang"})
        started = await sp.event("turnStarted")
        await sp.request("codex.abortTurn", {"channelId": "c"})
        error = await sp.event("error", lambda l: l["clientOperationId"] == started["clientOperationId"])
        payload = error["payload"]
        assert set(payload) == {"message", "code", "method"}
        assert payload["code"] == "RPC_ERROR" and payload["method"] == "turn/interrupt"
        assert payload["message"].startswith("turn/interrupt failed: ")
        reply = await sp.response(rid)  # the stop budget ends it (R-OP-5)
        assert reply["result"]["status"] == "failed"
        assert await sp.finish() == 0


async def test_r_int_1_wrong_channel_and_answering_twice_have_one_stable_code(tmp_path):
    """A live key answered with another channel's id is ``INTERACTION_WRONG_CHANNEL`` (was
    ``INTERACTION_UNKNOWN``); a second answer is ``INTERACTION_DUPLICATE`` both before and after
    the server resolved the dialog (was ``INTERACTION_EXPIRED`` after). Nothing reaches the peer."""
    log = tmp_path / "peer.log"
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "reverse-approval", log)) as sp:
        await sp.request("codex.updateSettings", {"channelId": "other", "settings": {"model": "m"}})
        send = await sp.send("codex.send", {"channelId": "c", "message": "run it"})
        p = (await sp.event("interactionRequested"))["payload"]
        answer = {"interactionKey": p["interactionKey"], "dialogToken": p["dialogToken"],
                  "result": {"decision": "decline"}}
        for wrong in ("other", "no-such-channel"):
            bad = await sp.request("codex.respondInteraction", {**answer, "channelId": wrong})
            assert bad["error"]["code"] == "INTERACTION_WRONG_CHANNEL", bad
            assert bad["error"]["details"] == {"interactionKey": p["interactionKey"], "channelId": wrong,
                                               "keyChannelId": "c"}
        ok = await sp.request("codex.respondInteraction", {**answer, "channelId": "c"})
        assert ok["ok"] is True
        again = await sp.request("codex.respondInteraction", answer)
        assert again["error"]["code"] == "INTERACTION_DUPLICATE"
        await sp.event("interactionResolved")  # the server closed the dialog
        await sp.response(send)
        for _ in range(2):
            late = await sp.request("codex.respondInteraction", answer)
            assert late["error"]["code"] == "INTERACTION_DUPLICATE", late
        assert await sp.finish() == 0
    replies = [m for m in read_log(log) if "result" in m and "method" not in m]
    assert [r["result"] for r in replies] == [{"decision": "decline"}]  # exactly one answer reached it


async def test_r_d_4_a_line_too_long_is_refused_with_its_id(tmp_path):
    async with ServeProcess.open(tmp_path, "--codex-bin", fake_cli(tmp_path, "handshake-ok"),
                                 "--max-line-bytes", "4096") as sp:
        line = json.dumps({"id": "big", "command": "codex.send", "params": {"channelId": "c", "message": "x" * 200_000}})
        await sp.send_raw(line.encode() + b"\n")
        reply = await sp.response("big")
        assert reply["error"]["code"] == "LINE_TOO_LONG"
        assert (await sp.request("status"))["result"]["channels"] == []  # nothing was run
        assert await sp.finish() == 0
