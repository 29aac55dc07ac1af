"""Edit ledgers fed from a runtime: live ``fileChange`` events and native history (R-EDIT-1..3).

The runtime talks to the scripted fake app-server in memory (``tests/_support.py``). The test
plays Codex's disk side: it puts the tree in its "after" state itself, and the fake sends the
native ``fileChange`` items that describe the change (shapes of the pinned 0.169.0 schema).
Undo then runs against the real files of a tmp dir. ``serve``'s edit commands are exercised
through :func:`run_edit_command`, the function the daemon calls.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from codexrt._io._edits import EditConflict, EditKey
from codexrt._features._edits_live import (
    ThreadMeta,
    entry_view,
    load_thread_edits,
    open_live_edits,
    read_thread_turns,
    run_edit_command,
)
from codexrt._sansio._errors import ClosedError, CodexError, ReviewError, RpcError, UndoError
from codexrt._runtime._runtime import RuntimeConfig, open_runtime
from codexrt._sansio._settings import Settings
from tests._support import MemoryPeers

TID = "0199a000-0000-7000-8000-000000000001"
V1 = "".join(f"line {i}\n" for i in range(1, 11))
V2 = V1.replace("line 3\n", "line three\n")
V3 = V2.replace("line 8\n", "line eight\n")


def upd(path: Path | str, old_no: int, old: str, new: str) -> dict:
    """A one-line native update change at line ``old_no`` (context radius 1 like codex)."""
    before = f"line {old_no - 1}\n"
    after = f"line {old_no + 1}\n"
    diff = f"@@ -{old_no - 1},3 +{old_no - 1},3 @@\n {before}-{old}\n+{new}\n {after}"
    return {"path": str(path), "kind": {"type": "update", "move_path": None}, "diff": diff}


def add(path: Path | str, text: str) -> dict:
    return {"path": str(path), "kind": {"type": "add"}, "diff": text}


def fc(item_id: str, changes: list[dict], status: str) -> dict:
    return {"type": "fileChange", "id": item_id, "changes": changes, "status": status}


def turn_rule(item_id: str, changes: list[dict], *, nth: int | None = None) -> dict:
    """turn/start → the change as item/started (inProgress) and item/completed (completed)."""
    match: dict[str, Any] = {"method": "turn/start"}
    if nth is not None:
        match["nth"] = nth
    ids = {"threadId": "$thread_id", "turnId": "$turn_id"}
    return {"match": match, "actions": [
        {"turn_response": True}, {"turn_started": True}, {"user_message": True},
        {"notify": "item/started", "params": {**ids, "item": fc(item_id, changes, "inProgress")}},
        {"notify": "item/completed", "params": {**ids, "item": fc(item_id, changes, "completed")}},
        {"agent_message": "done"}, {"end_turn": "completed"}]}


def thread_obj(cwd: Path, *, tid: str = TID, session: str = "sess-root", ephemeral: bool = False) -> dict:
    return {"id": tid, "sessionId": session, "cwd": str(cwd), "modelProvider": "mock",
            "ephemeral": ephemeral, "turns": [], "status": {"type": "notLoaded"}}


def history_rules(cwd: Path, turns: list[dict], *, read_times: int | None = None) -> list[dict]:
    read = {"match": {"method": "thread/read"},
            "actions": [{"respond": {"thread": thread_obj(cwd), "readState": None}}]}
    if read_times is not None:
        read["times"] = read_times
    return [read, {"match": {"method": "thread/turns/list"},
                   "actions": [{"respond": {"data": turns, "nextCursor": None, "backwardsCursor": None}}]}]


def scenario(cwd: Path, *rules: dict) -> dict:
    return {"name": "edits", "description": "fileChange items for the edit ledger",
            "rules": list(rules), "settings": {"cwd": str(cwd)}}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def test_r_edit_1_live_items_feed_a_ledger_and_undo_restores_tree(nursery, tree: Path, state_dir: str):
    (tree / "a.txt").write_text(V2)          # codex's write of the update
    (tree / "new.txt").write_text("hi\n")    # and of the add
    peers = MemoryPeers(nursery)
    sc = scenario(tree, turn_rule("fc-1", [upd(tree / "a.txt", 3, "line 3", "line three"),
                                            add(tree / "new.txt", "hi\n")]))
    async with open_runtime(RuntimeConfig(transports=[peers.factory(sc)])) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            op = rt.send("edit please")
            res = await op.wait()
            await settle()
            te = live.get(res.thread_id)
            assert te is not None and te.history_loaded
            # the fake's thread: sessionId == thread id, provider "mock", cwd = the tree
            assert te.meta == ThreadMeta(res.thread_id, str(tree), res.thread_id, "mock")
            entries = te.ledger.by_thread(res.thread_id)
            assert [(e.key.item_id, os.path.basename(e.target), e.kind.value, e.status, e.origin)
                    for e in entries] == [("fc-1", "a.txt", "update", "completed", "live"),
                                          ("fc-1", "new.txt", "add", "completed", "live")]
            assert live.recorded == 4  # started + completed, two files each
            assert entries[0].key.turn_id == res.turn_id
            assert [entry_view(te.ledger, e)["state"] for e in entries] == ["pending", "pending"]
            # the history read went through thread/read + thread/turns/list, never a resume
            methods = peers.peers[0].received_methods()
            assert "thread/turns/list" in methods and "thread/resume" not in methods
            await te.ledger.undo_file((res.thread_id, "a.txt"))
            await te.ledger.undo_file((res.thread_id, "new.txt"))
    assert (tree / "a.txt").read_text() == V1 and not (tree / "new.txt").exists()
    assert live.closed


async def test_r_edit_1_history_first_then_live_keeps_chronological_order(nursery, tree: Path, state_dir: str):
    """An older change read from history is recorded before the live one, so undoing the file
    reverses the live change first, then the historical one."""
    (tree / "a.txt").write_text(V3)
    history = [{"id": "turn-old", "status": "completed", "itemsView": "full",
                "items": [{"type": "userMessage", "id": "u1", "content": []},
                          fc("fc-old", [upd(tree / "a.txt", 3, "line 3", "line three")], "completed")]}]
    peers = MemoryPeers(nursery)
    sc = scenario(tree, *history_rules(tree, history),
                  turn_rule("fc-new", [upd(tree / "a.txt", 8, "line 8", "line eight")]))
    async with open_runtime(RuntimeConfig(transports=[peers.factory(sc)])) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            res = await rt.send("second edit", thread_id=TID).wait()
            assert res.status == "completed"
            await settle()
            te = live.get(TID)
            assert te.meta.session_id == "sess-root"
            got = [(e.key.turn_id, e.origin, e.status) for e in te.ledger.by_thread(TID)]
            assert got == [("turn-old", "history", "completed"), (res.turn_id, "live", "completed")]
            receipt = await te.ledger.undo_file((TID, str(tree / "a.txt")))
            assert [k.item_id for k in receipt.keys] == ["fc-new", "fc-old"]
    assert (tree / "a.txt").read_text() == V1


async def test_r_edit_3_live_item_is_fixed_to_the_submission_cwd(nursery, tmp_path: Path, state_dir: str):
    """A relative native path resolves against the cwd of the submission (the op's cwd
    setting), not the thread's recorded cwd, and never against a later process cwd."""
    sub = tmp_path / "submitted"
    other = tmp_path / "thread-cwd"
    sub.mkdir()
    other.mkdir()
    (sub / "rel.txt").write_text(V2)
    (other / "rel.txt").write_text(V2)  # a decoy with the same content
    peers = MemoryPeers(nursery)
    sc = scenario(other, *history_rules(other, []), turn_rule("fc-1", [upd("rel.txt", 3, "line 3", "line three")]))
    async with open_runtime(RuntimeConfig(transports=[peers.factory(sc)])) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            res = await rt.send("edit", thread_id=TID, settings=Settings(cwd=str(sub))).wait()
            assert res.status == "completed"
            await settle()
            te = live.get(TID)
            assert te.meta.cwd == str(other)  # the thread's recorded cwd differs
            (entry,) = te.ledger.by_thread(TID)
            assert entry.cwd == str(sub) and entry.target == str(sub / "rel.txt")
            cwd_before = os.getcwd()
            os.chdir(other)
            try:
                await te.ledger.undo_file(entry.key)
            finally:
                os.chdir(cwd_before)
    assert (sub / "rel.txt").read_text() == V1
    assert (other / "rel.txt").read_text() == V2


async def test_failed_history_read_falls_back_to_live_then_rebuilds_in_order(nursery, tree: Path, state_dir: str):
    (tree / "a.txt").write_text(V3)
    history = [{"id": "turn-old", "items": [fc("fc-old", [upd(tree / "a.txt", 3, "line 3", "line three")],
                                               "completed")]}]
    peers = MemoryPeers(nursery)
    refuse = {"match": {"method": "thread/read"}, "times": 1,
              "actions": [{"error": {"code": -32600, "message": "history temporarily unavailable"}}]}
    sc = scenario(tree, refuse, *history_rules(tree, history),
                  turn_rule("fc-new", [upd(tree / "a.txt", 8, "line 8", "line eight")]))
    async with open_runtime(RuntimeConfig(transports=[peers.factory(sc)], cwd=str(tree))) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            res = await rt.send("edit", thread_id=TID).wait()
            await settle()
            te = live.get(TID)
            assert not te.history_loaded and te.history_error.code == "HISTORY_READ_FAILED"
            assert [e.key.item_id for e in te.ledger.by_thread(TID)] == ["fc-new"]
            assert te.meta.cwd == str(tree)  # the runtime's cwd stood in for the thread's
            # a request rebuilds it: history first, then the live items again
            te2 = await live.ledger(TID)
            assert te2.history_loaded and te2 is live.get(TID)
            assert [(e.key.item_id, e.origin) for e in te2.ledger.by_thread(TID)] == [
                ("fc-old", "history"), ("fc-new", "live")]
            assert (await live.ledger(TID)) is te2  # loaded once
            await te2.ledger.undo_file((TID, "a.txt"))
    assert (tree / "a.txt").read_text() == V1
    assert res.status == "completed"


async def test_serve_commands_list_review_undo(nursery, tree: Path, state_dir: str):
    (tree / "a.txt").write_text(V2)
    (tree / "b.txt").write_text(V2)
    history = [{"id": "t1", "items": [fc("fc-1", [upd(tree / "a.txt", 3, "line 3", "line three"),
                                                  upd(tree / "b.txt", 3, "line 3", "line three")], "completed")]}]
    peers = MemoryPeers(nursery)
    sc = scenario(tree, *history_rules(tree, history))
    async with open_runtime(RuntimeConfig(transports=[peers.factory(sc)])) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            listed = await run_edit_command(live, "codex.listEdits", {"threadId": TID})
            assert listed["cwd"] == str(tree) and listed["sessionId"] == "sess-root"
            assert [(e["path"], e["state"], e["added"], e["removed"]) for e in listed["entries"]] == [
                ("a.txt", "pending", 1, 1), ("b.txt", "pending", 1, 1)]
            # R-EDIT-2: a review is frozen to the session it was opened in
            ticket = await run_edit_command(live, "codex.openReview", {"threadId": TID, "path": "a.txt"})
            assert ticket["sessionId"] == "sess-root" and ticket["target"] == str(tree / "a.txt")
            decided = await run_edit_command(live, "codex.acceptReview", {"threadId": TID,
                                                                          "ticketId": ticket["ticketId"]})
            assert decided["decision"] == "accepted" and len(decided["keys"]) == 1
            pending = await run_edit_command(live, "codex.listEdits", {"threadId": TID, "pendingOnly": True})
            assert [e["path"] for e in pending["entries"]] == ["b.txt"]
            # an explicit null session never borrows the current one: the decision records nothing
            null = await run_edit_command(live, "codex.openReview", {"threadId": TID, "path": "b.txt",
                                                                     "sessionId": None})
            assert null["sessionId"] is None
            with pytest.raises(ReviewError) as exc:
                await run_edit_command(live, "codex.rejectReview", {"threadId": TID, "ticketId": null["ticketId"]})
            assert exc.value.code == "REVIEW_NO_SESSION"
            other = await run_edit_command(live, "codex.openReview", {"threadId": TID, "path": "b.txt",
                                                                      "sessionId": "host-7", "provider": "p"})
            await run_edit_command(live, "codex.rejectReview", {"threadId": TID, "ticketId": other["ticketId"]})
            te = live.get(TID)
            assert te.ledger.session_id == "sess-root"  # the ledger's own session is untouched
            key_b = EditKey(TID, "t1", "fc-1", str(tree / "b.txt"))
            assert te.ledger.review_state(key_b) is None
            assert te.ledger.review_state(key_b, session_id="host-7").decision == "rejected"
            # undo: a dry run writes nothing; a user edit is a conflict with a diff; then a real undo
            dry = await run_edit_command(live, "codex.undoFile", {"threadId": TID, "path": "a.txt", "dryRun": True})
            assert dry["dryRun"] and "-line three" in dry["reverseDiff"] and (tree / "a.txt").read_text() == V2
            (tree / "b.txt").write_text(V2.replace("line three", "user edit"))
            with pytest.raises(EditConflict) as conflict:
                await run_edit_command(live, "codex.undoFile", {"threadId": TID, "path": "b.txt"})
            assert "user edit" in conflict.value.details["diff"]
            assert (tree / "b.txt").read_text() == V2.replace("line three", "user edit")
            done = await run_edit_command(live, "codex.undoFile", {
                "threadId": TID, "key": {"turnId": "t1", "itemId": "fc-1", "path": str(tree / "a.txt")}})
            assert done["ops"] == [{"path": str(tree / "a.txt"), "action": "write"}]
            after = await run_edit_command(live, "codex.listEdits", {"threadId": TID, "path": "a.txt"})
            assert [e["state"] for e in after["entries"]] == ["undone"]
            with pytest.raises(UndoError) as again:
                await run_edit_command(live, "codex.undoFile", {"threadId": TID, "path": "a.txt"})
            assert again.value.code == "EDIT_NOT_FOUND"
            with pytest.raises(ReviewError):
                await run_edit_command(live, "codex.openReview", {"threadId": TID, "path": "nope.txt"})
    assert (tree / "a.txt").read_text() == V1
    with pytest.raises(ClosedError):
        await live.ledger(TID)


async def test_unknown_thread_is_a_typed_error_and_creates_nothing(nursery, tree: Path, state_dir: str):
    """0.169.0's wording for an id without a rollout (the CLI test uses the older one)."""
    peers = MemoryPeers(nursery)
    sc = scenario(tree, {"match": {"method": "thread/read"}, "actions": [
        {"error": {"code": -32600, "message": f"thread not loaded: {TID}"}}]})
    async with open_runtime(RuntimeConfig(transports=[peers.factory(sc)])) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            with pytest.raises(CodexError) as exc:
                await run_edit_command(live, "codex.listEdits", {"threadId": TID})
            assert exc.value.code == "THREAD_NOT_FOUND" and TID in exc.value.message
            assert live.get(TID) is None
    assert not os.path.exists(state_dir)  # no store was created for a thread that isn't there


# ------------------------------------------------------------------------------ history reads


class FakeConn:
    """Answers ``call`` from a table; records every call."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        self.calls.append((method, params))
        ans = self.answers[method]
        if callable(ans):
            ans = ans(params)
        if isinstance(ans, Exception):
            raise ans
        return ans


async def test_turns_are_read_oldest_first_across_pages(tree: Path, state_dir: str):
    pages = {None: {"data": [{"id": "t1", "items": []}], "nextCursor": "c1"},
             "c1": {"data": [{"id": "t2", "items": [fc("f", [add(tree / "n.txt", "x\n")], "completed")]}],
                    "nextCursor": None}}
    conn = FakeConn({"thread/read": {"thread": thread_obj(tree)},
                     "thread/turns/list": lambda p: pages[p.get("cursor")]})
    te = await load_thread_edits(conn, TID, state_dir=state_dir)
    try:
        assert [c[1].get("cursor") for c in conn.calls if c[0] == "thread/turns/list"] == [None, "c1"]
        first = conn.calls[1][1]
        assert first["itemsView"] == "full" and first["sortDirection"] == "asc"
        assert [e.key.turn_id for e in te.ledger.by_thread(TID)] == ["t2"]
        assert te.ledger.store.path.startswith(state_dir)
        assert all(m in ("thread/read", "thread/turns/list") for m, _ in conn.calls)  # never a resume
    finally:
        te.ledger.store.close()
    endless = FakeConn({"thread/turns/list": lambda p: {"data": [], "nextCursor": f"{p.get('cursor', '')}+"}})
    with pytest.raises(CodexError) as exc:
        await read_thread_turns(endless, TID, max_pages=3)
    assert exc.value.code == "HISTORY_READ_FAILED" and len(endless.calls) == 3
    looping = FakeConn({"thread/turns/list": {"data": [], "nextCursor": "again"}})
    with pytest.raises(CodexError) as exc:
        await read_thread_turns(looping, TID, max_pages=3)
    assert exc.value.code == "CURSOR_REPEATED" and len(looping.calls) == 2  # the loop guard, no third call
    no_field = FakeConn({"thread/turns/list": {"data": [{"id": "t1", "items": []}]}})
    with pytest.raises(CodexError) as exc:
        await read_thread_turns(no_field, TID)
    assert exc.value.code == "HISTORY_READ_FAILED" and "nextCursor" in exc.value.message


async def test_turns_fall_back_to_thread_read_include_turns(tree: Path):
    old = RpcError("Invalid request: unknown variant `thread/turns/list`", rpc_code=-32600)
    conn = FakeConn({"thread/turns/list": old,
                     "thread/read": {"thread": {**thread_obj(tree), "turns": [{"id": "t9", "items": []}]}}})
    assert await read_thread_turns(conn, TID) == [{"id": "t9", "items": []}]
    assert conn.calls[-1] == ("thread/read", {"threadId": TID, "includeTurns": True})
    other = FakeConn({"thread/turns/list": RpcError("boom", rpc_code=-32603)})
    with pytest.raises(CodexError) as exc:
        await read_thread_turns(other, TID)
    assert exc.value.code == "HISTORY_READ_FAILED" and "boom" in exc.value.message


async def test_ephemeral_thread_reads_no_history_and_bad_meta_is_typed(tree: Path, state_dir: str):
    conn = FakeConn({"thread/read": {"thread": thread_obj(tree, ephemeral=True)}})
    te = await load_thread_edits(conn, TID, state_dir=state_dir)
    te.ledger.store.close()
    assert [m for m, _ in conn.calls] == ["thread/read"] and te.meta.ephemeral
    with pytest.raises(CodexError) as exc:
        ThreadMeta.from_thread({"id": TID, "cwd": "relative/dir"})
    assert exc.value.code == "HISTORY_READ_FAILED"
    meta = ThreadMeta.from_thread({"id": TID, "cwd": str(tree)})
    assert meta.session_id == TID and meta.provider is None  # no sessionId: the thread is its session


async def test_feeder_ignores_other_events_and_survives_a_bad_item(nursery, tree: Path, state_dir: str):
    peers = MemoryPeers(nursery)
    bad = {"type": "fileChange", "id": "bad", "status": "completed",
           "changes": [{"path": str(tree / "x"), "kind": {"type": "weird"}, "diff": ""}]}
    ids = {"threadId": "$thread_id", "turnId": "$turn_id"}
    rule = {"match": {"method": "turn/start"}, "actions": [
        {"turn_response": True}, {"turn_started": True},
        {"notify": "item/completed", "params": {**ids, "item": bad}},
        {"agent_message": "ok"}, {"end_turn": "completed"}]}
    async with open_runtime(RuntimeConfig(transports=[peers.factory(scenario(tree, rule))])) as rt:
        async with open_live_edits(rt, state_dir=state_dir) as live:
            res = await rt.send("x").wait()
            await settle()
            (entry,) = live.get(res.thread_id).ledger.by_thread(res.thread_id)
            assert entry.patch is None and entry.parse_error  # listed, not undoable
            assert live.threads() == [res.thread_id]
            assert repr(live).startswith("<LiveEdits threads=1")


# ------------------------------------------------------------------------------ codexrt serve


class Wire:
    """``serve_daemon`` in process over memory streams; every output line is checked against
    the shipped schema (and each reply's result against its command's result schema)."""

    def __init__(self, config) -> None:
        self.to_daemon_send, self.to_daemon_recv = trio.testing.memory_stream_one_way_pair()
        self.from_daemon_send, self.from_daemon_recv = trio.testing.memory_stream_one_way_pair()
        self.buf = b""
        self.lines: list[dict] = []
        self.commands: dict[Any, str] = {}
        self.n = 0
        self.config = config

    async def start(self, nursery) -> "Wire":
        from codexrt._serve._daemon import DaemonConfig, serve_daemon

        self.daemon = await nursery.start(serve_daemon, self.to_daemon_recv, self.from_daemon_send,
                                          DaemonConfig(runtime=self.config, idle_timeout=None))
        return self

    async def send(self, command: str, params: dict) -> int:
        import json

        self.n += 1
        self.commands[self.n] = command
        line = json.dumps({"id": self.n, "command": command, "params": {"channelId": "c", **params}})
        await self.to_daemon_send.send_all(line.encode() + b"\n")
        return self.n

    async def response(self, rid: int, timeout: float = 10) -> dict:
        return await self.wait_for(lambda l: l.get("type") == "response" and l["id"] == rid, timeout)

    async def wait_for(self, pred, timeout: float = 10) -> dict:
        """The first output line (seen before or arriving within ``timeout``) matching ``pred``."""
        import json

        from tests._support import schema_problem

        with trio.fail_after(timeout):
            while True:
                for line in self.lines:
                    if pred(line):
                        return line
                chunk = await self.from_daemon_recv.receive_some()
                self.buf += chunk
                *done, self.buf = self.buf.split(b"\n")
                for raw in done:
                    obj = json.loads(raw)
                    assert schema_problem(obj, "outputLine") is None, obj
                    if obj.get("type") == "response" and obj.get("ok"):
                        name = self.commands[obj["id"]]
                        problem = schema_problem(obj["result"], f"commandResult/{name}")
                        assert problem is None, (name, problem)
                    self.lines.append(obj)

    async def request(self, command: str, params: dict) -> dict:
        return await self.response(await self.send(command, params))

    async def close(self) -> None:
        """EOF on stdin: the daemon drains (channels closed, children reaped) and returns."""
        await self.to_daemon_send.aclose()
        with trio.fail_after(10):  # stdout is an unbounded memory stream: nothing to drain
            await self.daemon.finished.wait()


async def test_r_edit_serve_commands_end_to_end(nursery, tree: Path, tmp_path: Path, monkeypatch):
    """The five serve commands: list (JSON schema-valid), review open/accept/reject, parallel
    undos of two files, a conflict reply that writes nothing, and params refused by the schema."""
    monkeypatch.setenv("CODEXRT_STATE_DIR", str(tmp_path / "state"))
    for name in ("a.txt", "b.txt", "c.txt"):
        (tree / name).write_text(V2)
    history = [{"id": "t1", "items": [fc("fc-1", [upd(tree / n, 3, "line 3", "line three")
                                                  for n in ("a.txt", "b.txt", "c.txt")], "completed")]}]
    peers = MemoryPeers(nursery)
    wire = await Wire(RuntimeConfig(transports=[peers.factory(scenario(tree, *history_rules(tree, history)))])).start(nursery)
    listed = await wire.request("codex.listEdits", {"threadId": TID})
    assert listed["ok"] and [e["path"] for e in listed["result"]["entries"]] == ["a.txt", "b.txt", "c.txt"]
    opened = await wire.request("codex.openReview", {"threadId": TID, "path": "c.txt"})
    ticket = opened["result"]["ticketId"]
    accepted = await wire.request("codex.acceptReview", {"threadId": TID, "ticketId": ticket})
    assert accepted["result"]["decision"] == "accepted" and accepted["result"]["sessionId"] == "sess-root"
    stale = await wire.request("codex.rejectReview", {"threadId": TID, "ticketId": ticket})
    assert not stale["ok"] and stale["error"]["code"] == "REVIEW_STALE"
    # two undos of different files, sent back to back, both done (each in its own task)
    r1 = await wire.send("codex.undoFile", {"threadId": TID, "path": "a.txt"})
    r2 = await wire.send("codex.undoFile", {"threadId": TID, "path": str(tree / "b.txt")})
    assert (await wire.response(r1))["ok"] and (await wire.response(r2))["ok"]
    assert (tree / "a.txt").read_text() == V1 and (tree / "b.txt").read_text() == V1
    mine = V2.replace("line three", "mine")
    (tree / "c.txt").write_text(mine)
    conflict = await wire.request("codex.undoFile", {"threadId": TID, "path": "c.txt"})
    assert not conflict["ok"] and conflict["error"]["code"] == "EDIT_CONFLICT"
    assert "+mine" in conflict["error"]["details"]["diff"] and (tree / "c.txt").read_text() == mine
    both = await wire.request("codex.undoFile", {"threadId": TID, "path": "a.txt",
                                                 "key": {"turnId": "t1", "itemId": "fc-1", "path": "a.txt"}})
    assert not both["ok"] and both["error"]["code"] == "INVALID_PARAMS"
    states = await wire.request("codex.listEdits", {"threadId": TID})
    assert [(e["state"], e["undoFailure"] and e["undoFailure"]["code"]) for e in states["result"]["entries"]] == [
        ("undone", None), ("undone", None), ("accepted", "EDIT_CONFLICT")]
    methods = peers.peers[0].received_methods()
    assert "thread/resume" not in methods and "turn/start" not in methods  # read-only
    await wire.close()
