"""History reader on Trio against the scripted fake app-server (R-H-1 … R-H-8).

Every native answer here comes from a dict scenario (``docs/fake-peer.md``) whose rules play
one situation: overlapping item pages, a server that does not paginate a thread, auth errors,
slow/big/failing threads for the counting rules. Timing rules run on ``autojump_clock``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import codexrt
from codexrt._sansio._errors import CodexError, RpcError
from codexrt._sansio._paging import plain_data
from codexrt._features._history import MASKING_NOTICE, MessageCounter, open_history_reader
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._privacy import PrivacyIndex
from tests._support import MemoryPeers

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"
T1 = "11111111-1111-4111-8111-111111111111"
T2 = "22222222-2222-4222-8222-222222222222"
T3 = "33333333-3333-4333-8333-333333333333"
TURN = "aaaaaaaa-0000-4000-8000-000000000001"


def thread(tid: Any = "$params.threadId", **kw: Any) -> dict[str, Any]:
    base = {"id": tid, "name": None, "preview": "", "updatedAt": 100, "createdAt": 50,
            "status": {"type": "notLoaded"}, "parentThreadId": None, "path": None, "historyMode": "paginated",
            "turns": []}
    base.update(kw)
    return base


def user(iid: str, text: str) -> dict[str, Any]:
    return {"type": "userMessage", "id": iid, "clientId": None, "content": [{"type": "text", "text": text}]}


def agent(iid: str, text: str) -> dict[str, Any]:
    return {"type": "agentMessage", "id": iid, "text": text}


def cmd(iid: str, command: str) -> dict[str, Any]:
    return {"type": "commandExecution", "id": iid, "command": command, "cwd": "/w", "status": "completed",
            "exitCode": 0, "aggregatedOutput": "ok\n", "commandActions": []}


def entry(item: dict[str, Any], turn: str = TURN) -> dict[str, Any]:
    return {"turnId": turn, "item": item, "startedAtMs": None, "completedAtMs": None}


def turn(tid: str = TURN, status: str = "completed", items: list[Any] | None = None, view: str = "notLoaded") -> dict[str, Any]:
    return {"id": tid, "rootTurnId": tid, "items": items or [], "itemsView": view, "status": status, "error": None,
            "startedAt": 1000, "completedAt": 1001, "durationMs": 1000}


def rule(method: str, actions: list[Any], params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    match: dict[str, Any] = {"method": method}
    if params is not None:
        match["params"] = params
    return {"match": match, "actions": actions, **kw}


def respond(result: Any, sleep: float | None = None) -> list[Any]:
    return ([{"sleep": sleep}] if sleep else []) + [{"respond": result}]


def page(data: list[Any], nxt: Any = None) -> dict[str, Any]:
    return {"data": data, "nextCursor": nxt, "backwardsCursor": None}


def scenario(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"name": "history", "rules": list(rules)}


def methods(peers: MemoryPeers, name: str | None = None) -> list[dict[str, Any]]:
    return [m for p in peers.peers for m in p.received if "method" in m and (name is None or m["method"] == name)]


def rt_for(peers: MemoryPeers, sc: dict[str, Any], **kw: Any):
    return codexrt.open_runtime(RuntimeConfig(transports=[peers.factory(sc)], **kw))


def install_rollout(home: Path, name: str) -> tuple[str, Path]:
    """Copy a golden rollout into ``home/sessions`` under its real file-name pattern."""
    nat = json.loads((DATA / f"{name}.native.json").read_text())
    tid = nat["threadId"]
    day = home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-11-30T10-00-00-{tid}.jsonl"
    shutil.copy(DATA / f"{name}.rollout.jsonl", path)
    return tid, path


# Cursors are opaque: odd strings prove they are passed back verbatim.
CUR_T = '{"scope":{"kind":"turns"},"rolloutOrdinal":7}'
CUR_I = '{"scope":"itemsByCreatedAtOrdinal","n":2, "é":true}'


def paged_thread_scenario(loaded: bool = True) -> dict[str, Any]:
    """``loaded``: the turns come with a summary of their items (a server that ignores
    ``itemsView: "notLoaded"``); else without, as the real server sends them."""
    def items(*its: Any) -> dict[str, Any]:
        return {"items": list(its), "view": "summary"} if loaded else {"items": [], "view": "notLoaded"}

    return scenario(
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/turns/list", respond(page([turn("t2", **items(user("u2", "second")))])),
             params={"cursor": CUR_T}),
        rule("thread/turns/list", respond(page([turn("t1", **items(user("u1", "first")))], CUR_T))),
        rule("thread/items/list", respond(page([entry(cmd("c1", "ls"), "t1"), entry(agent("a1", "done"), "t1"),
                                                entry(user("u2", "second"), "t2"), entry(agent("a2", "bye"), "t2")])),
             params={"cursor": CUR_I}),
        # page 1 overlaps page 2 (c1, a1 appear in both)
        rule("thread/items/list", respond(page([entry(user("u1", "first"), "t1"), entry(cmd("c1", "ls"), "t1"),
                                                entry(agent("a1", "done"), "t1")], CUR_I))),
    )


# -- R-H-1: native paging -------------------------------------------------------------------


@pytest.mark.parametrize("loaded", [True, False], ids=["turns-with-items", "turns-without-items"])
async def test_r_h_1_pages_cursors_verbatim_overlap_upserted_never_resumes(peers, loaded):
    async with rt_for(peers, paged_thread_scenario(loaded)) as rt, open_history_reader(rt) as reader:
        tr = await reader.read_thread(T1)
    assert (tr.source, tr.pagination, tr.complete) == ("native", "paged", True)
    assert [(r.kind, r.id) for r in tr.records()] == [
        ("userMessage", "u1"), ("commandExecution", "c1"), ("assistantMessage", "a1"),
        ("userMessage", "u2"), ("assistantMessage", "a2")]
    assert [g.turn_id for g in tr.turns] == ["t1", "t2"]
    assert tr.message_count == 4
    sent = {m["method"]: [] for m in methods(peers)}
    for m in methods(peers):
        sent[m["method"]].append(m.get("params", {}).get("cursor"))
    assert sent["thread/turns/list"] == [None, CUR_T]
    assert sent["thread/items/list"] == [None, CUR_I]
    # issue 34: the turns walk asks for no items; the items walk brings them all
    assert all(m["params"]["itemsView"] == "notLoaded" for m in methods(peers, "thread/turns/list"))
    assert not {"thread/resume", "turn/start", "thread/start"} & set(sent)
    assert all("includeTurns" not in m["params"] for m in methods(peers, "thread/read"))


async def test_issue_34_read_thread_asks_for_the_items_walks_first_page_as_the_turns_walks_last_comes(
        peers, monkeypatch):
    """The items walk's first page is asked for as soon as the turns walk's last page came,
    before that page is projected (the server reads it meanwhile), and it is the page the items
    walk reads: every page asked for once, the same transcript."""
    import codexrt._features._history_count as history
    from codexrt._sansio._projection import Projector

    seen: list[Any] = []
    early, add_turns = history._early, Projector.add_native_turns

    def spy_early(stack: Any, conn: Any, method: str, params: Any, **kw: Any) -> Any:
        pending = early(stack, conn, method, params, **kw)
        seen.append(("asked", method, params.get("cursor"), pending is not None))
        return pending

    def spy_turns(self: Any, turns: Any, **kw: Any) -> None:
        seen.append(("projected", [t["id"] for t in plain_data(turns)]))
        add_turns(self, turns, **kw)

    monkeypatch.setattr(history, "_early", spy_early)
    monkeypatch.setattr(Projector, "add_native_turns", spy_turns)
    async with rt_for(peers, paged_thread_scenario()) as rt, open_history_reader(rt) as reader:
        tr = await reader.read_thread(T1)
    assert seen == [("projected", ["t1"]), ("asked", "thread/items/list", None, True), ("projected", ["t2"])]
    assert [(r.kind, r.id) for r in tr.records()] == [
        ("userMessage", "u1"), ("commandExecution", "c1"), ("assistantMessage", "a1"),
        ("userMessage", "u2"), ("assistantMessage", "a2")]
    assert [m["params"] for m in methods(peers, "thread/items/list")] == [  # what the walk itself asks
        {"threadId": T1, "limit": 100}, {"threadId": T1, "limit": 100, "cursor": CUR_I}]


async def test_issue_34_a_failed_turns_walk_withdraws_the_items_page_asked_for_early(peers, monkeypatch):
    """The turns walk's last page cannot be projected: the error is the caller's, typed, and
    the items page asked for early is withdrawn — here before it was written, so never sent."""
    from codexrt._sansio._projection import Projector

    add_turns = Projector.add_native_turns

    def failing(self: Any, turns: Any, **kw: Any) -> None:
        if any(t["id"] == "t2" for t in plain_data(turns)):
            raise KeyError("status")
        add_turns(self, turns, **kw)

    monkeypatch.setattr(Projector, "add_native_turns", failing)
    async with rt_for(peers, paged_thread_scenario()) as rt, open_history_reader(rt) as reader:
        with pytest.raises(CodexError) as err:
            await reader.read_thread(T1, allow_legacy=False)
        await trio.testing.wait_all_tasks_blocked()  # whatever was still to be written, was
        assert rt.state.value == "READY"  # the connection goes on
    assert err.value.code == "PROTOCOL_ERROR" and "history data" in err.value.message
    # withdrawn before this in-memory transport's writer wrote it: never sent (over a pipe it is
    # written at once, and its answer is a late response: test_history_read_ahead.py)
    assert methods(peers, "thread/items/list") == []


async def test_issue_34_read_thread_decodes_a_pages_entries_after_asking_for_the_next(peers, monkeypatch):
    """Both walks of ``read_thread`` read a page's cursor first (``peek_page``) and decode its
    entries only once the next page is asked for, so the server works on that page meanwhile:
    every decode comes after the request that follows its page (the last turns page: after the
    items walk's first request)."""
    import codexrt._sansio._projection._native_feed as feed
    from codexrt._connection import Connection
    from codexrt._sansio._paging import RawPageData

    seen: list[Any] = []
    send, dicts, turns = Connection.send_request, RawPageData.dicts, feed._decode_item_less_turns

    def spy_send(self: Any, method: str, params: Any, **kw: Any) -> Any:
        seen.append(("asked", method, params.get("cursor"), kw.get("raw")))
        return send(self, method, params, **kw)

    def spy_dicts(self: Any) -> list[Any]:
        out = dicts(self)
        seen.append(("decoded", [e.get("id") or e["item"]["id"] for e in out]))
        return out

    def spy_turns(raw: Any) -> Any:  # a turns page without items: decoded into structs
        out = turns(raw)
        if out is not None:
            seen.append(("decoded", [t.id for t in out]))
        return out

    monkeypatch.setattr(Connection, "send_request", spy_send)
    monkeypatch.setattr(RawPageData, "dicts", spy_dicts)
    monkeypatch.setattr(feed, "_decode_item_less_turns", spy_turns)
    async with rt_for(peers, paged_thread_scenario(loaded=False)) as rt, open_history_reader(rt) as reader:
        tr = await reader.read_thread(T1)
    assert seen == [
        ("asked", "thread/turns/list", CUR_T, True), ("decoded", ["t1"]),
        ("asked", "thread/items/list", None, True), ("decoded", ["t2"]),
        ("asked", "thread/items/list", CUR_I, True), ("decoded", ["u1", "c1", "a1"]),
        ("decoded", ["c1", "a1", "u2", "a2"])]
    assert [(r.kind, r.id) for r in tr.records()] == [
        ("userMessage", "u1"), ("commandExecution", "c1"), ("assistantMessage", "a1"),
        ("userMessage", "u2"), ("assistantMessage", "a2")]


async def test_issue_34_read_thread_appends_pages_of_messages_from_structs_after_asking_for_the_next(
        peers, monkeypatch):
    """Items pages that hold only messages new to the transcript take the struct path
    (``NativeFeed._append_plain``), each after the next page was asked for; the transcript is
    the one the dict path makes of the same pages."""
    from codexrt._connection import Connection
    from codexrt._sansio._projection._native_feed import NativeFeed

    seen: list[Any] = []
    send, plain = Connection.send_request, NativeFeed._append_plain

    def spy_send(self: Any, method: str, params: Any, **kw: Any) -> Any:
        seen.append(("asked", method, params.get("cursor")))
        return send(self, method, params, **kw)

    def spy_plain(self: Any, raw: Any) -> bool:
        ok = plain(self, raw)
        seen.append(("structs", ok))
        return ok

    sc = scenario(
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/turns/list", respond(page([turn("t1"), turn("t2", status="interrupted")]))),
        rule("thread/items/list", respond(page([entry(user("u2", "second"), "t2"), entry(agent("a2", "bye"), "t2")])),
             params={"cursor": CUR_I}),
        rule("thread/items/list", respond(page([entry(user("u1", "first"), "t1"), entry(agent("a1", "done"), "t1")],
                                               CUR_I))),
    )
    monkeypatch.setattr(Connection, "send_request", spy_send)
    monkeypatch.setattr(NativeFeed, "_append_plain", spy_plain)
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        tr = await reader.read_thread(T1)
    assert seen == [("asked", "thread/items/list", None), ("asked", "thread/items/list", CUR_I), ("structs", True),
                    ("structs", True)]
    assert [(r.kind, r.id, r.text, r.status) for r in tr.records()] == [
        ("userMessage", "u1", "first", "completed"), ("assistantMessage", "a1", "done", "completed"),
        ("userMessage", "u2", "second", "completed"), ("assistantMessage", "a2", "bye", "completed")]
    assert [(g.turn_id, g.status) for g in tr.turns] == [("t1", "completed"), ("t2", "interrupted")]


@pytest.mark.parametrize(("where", "fails"), [("data", True), ("skipped", False)])
async def test_issue_34_a_number_out_of_range_fails_read_thread_only_in_what_it_reads(peers, where, fails):
    """``1e400`` (which ``serde_json`` never writes; msgspec refuses it) in an entry of ``data``
    fails the read as ``RemoteProtocolError``, never a bare decode error; in a field of the page
    the walk does not read (``backwardsCursor``) it is skipped and the read goes on."""
    bad = "1e400" if where == "data" else "1"
    skipped = "1e400" if where == "skipped" else "null"
    line = ('{"id":$id,"result":{"data":[{"turnId":"t1","item":{"type":"agentMessage","id":"a1","text":"hi",'
            '"startedAtMs":' + bad + '}}],"nextCursor":null,"backwardsCursor":' + skipped + '}}\n')
    sc = scenario(
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/turns/list", respond(page([turn("t1")]))),
        rule("thread/items/list", [{"raw": line}]),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        if fails:
            with pytest.raises(codexrt.RemoteProtocolError, match="malformed history data: ValidationError"):
                await reader.read_thread(T1, allow_legacy=False)
        else:
            tr = await reader.read_thread(T1, allow_legacy=False)
            assert [(r.id, r.text) for r in tr.records()] == [("a1", "hi")] and tr.complete


def test_issue_34_a_page_is_asked_for_early_only_on_a_connection_that_can_take_it():
    """``_early`` asks nothing of a connection whose handshake is not done, nor of one that
    refuses the request: the walk's own call then meets what it would have met."""
    import contextlib

    from codexrt._features._history_count import _early
    from codexrt._sansio._errors import ClosedError

    class Conn:
        def __init__(self, ready: bool, refuse: bool) -> None:
            self.ready, self.refuse, self.sent = ready, refuse, 0

        def send_request(self, method: str, params: Any, *, raw: bool = False) -> Any:
            self.sent += 1
            if self.refuse:
                raise ClosedError("the connection ended")
            return contextlib.nullcontext(("pending", raw))

    with contextlib.ExitStack() as stack:
        for ready, refuse, raw, want in [(False, False, False, None), (True, True, False, None),
                                         (True, False, False, ("pending", False)),
                                         (True, False, True, ("pending", True))]:
            conn = Conn(ready, refuse)
            assert _early(stack, conn, "thread/items/list", {}, raw=raw) == want  # type: ignore[arg-type]
            assert conn.sent == (1 if ready else 0)


async def test_r_h_1_full_read_only_when_pagination_unsupported(peers):
    full = thread(turns=[turn("t1", items=[user("u1", "hi"), agent("a1", "yo")], view="full")])
    sc = scenario(
        rule("thread/read", respond({"thread": full, "readState": None}), params={"includeTurns": True}),
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/turns/list", respond(page([turn("t1", items=[user("item-1", "hi")], view="summary")]))),
        rule("thread/items/list", [{"error": {"code": -32601, "message": "thread/items/list is not supported yet"}}]),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        tr = await reader.read_thread(T1)
    assert (tr.source, tr.pagination, tr.complete) == ("native", "fullRead", True)
    assert [r.id for r in tr.records()] == ["u1", "a1"]  # the full read alone, no summary copy spliced in
    assert [m["params"].get("includeTurns") for m in methods(peers, "thread/read")] == [None, True]


async def test_r_h_3_a_runtime_whose_env_names_codex_home_has_its_rollouts_read_there(peers, tmp_path, monkeypatch):
    """A runtime whose ``env`` sets ``CODEX_HOME`` (and whose config names no home) runs its
    child there: its reader reads rollout files there too, not under this process's
    ``CODEX_HOME`` (before, the legacy fallback and rollout counts looked in the wrong home)."""
    tid, _ = install_rollout(tmp_path / "child", "paginated")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "elsewhere"))
    env = {"CODEX_HOME": str(tmp_path / "child")}
    async with rt_for(peers, scenario(), env=env, access_mode="inactive") as rt, open_history_reader(rt) as reader:
        assert reader.codex_home == tmp_path / "child"
        tr = await reader.read_thread(tid)  # from the rollout file (inactive: nothing is spawned)
        # serve's history commands read the same home (codex.readThread, display form)
        from codexrt._features._history_commands import run_history_command

        async with trio.open_nursery() as n:
            got = await run_history_command(rt, "codex.readThread", {"threadId": tid, "display": True},
                                            counter=MessageCounter(n), nursery=n)
    assert tr.source == "legacy" and tr.message_count
    assert got["transcript"]["source"] == "legacy" and got["transcript"]["messageCount"] == tr.message_count
    reader.codex_home = tmp_path / "other"  # still assignable, as when it was a plain attribute
    assert reader.codex_home == tmp_path / "other"


async def test_r_h_2_other_pagination_errors_stay_visible_no_full_read(peers, tmp_path):
    sc = scenario(
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/turns/list", respond(page([]))),
        rule("thread/items/list", [{"error": {"code": -32600, "message": "permission denied by policy"}}]),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt, codex_home=tmp_path) as reader:
        with pytest.raises(RpcError, match="permission denied by policy"):
            await reader.read_thread(T1)
    assert [m["params"].get("includeTurns") for m in methods(peers, "thread/read")] == [None]


async def test_r_h_2_an_error_leaving_the_reader_block_is_itself_not_a_group(peers, tmp_path):
    """The reader's nursery does not wrap a reader call's error in an ``ExceptionGroup`` (a
    host's ``except RpcError`` around the whole ``async with`` must catch it)."""
    sc = scenario(rule("thread/read", [{"error": {"code": -32600, "message": "thread not found: nope"}}]))
    async with rt_for(peers, sc) as rt:
        with pytest.raises(RpcError, match="thread not found") as info:
            async with open_history_reader(rt, codex_home=tmp_path) as reader:
                await reader.read_thread(T1)
    assert type(info.value) is RpcError


async def test_r_h_2_auth_error_is_raised_even_when_a_rollout_exists(peers, tmp_path):
    tid, _ = install_rollout(tmp_path, "paginated")
    sc = scenario(rule("thread/read", [{"error": {"code": -32600, "message": "401 Unauthorized: sign in again"}}]))
    async with rt_for(peers, sc) as rt, open_history_reader(rt, codex_home=tmp_path) as reader:
        with pytest.raises(RpcError, match="401 Unauthorized"):
            await reader.read_thread(tid)
        # counting too: unknown with the error, never 0, never the rollout
        c = await reader.count_messages(tid)
    assert c.count is None and c.reason == "error" and "401" in c.error["message"]


async def test_r_h_1_reads_do_not_wait_behind_a_running_send(peers):
    sc = paged_thread_scenario()
    sc["rules"].insert(0, rule("turn/start", [{"hang_turn": True}]))
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        op = rt.send("hang please")
        async for ev in op.events():
            if ev.kind == "turnStarted":
                break
        with trio.fail_after(5):
            tr = await reader.read_thread(T1)
        assert tr.message_count == 4 and not op.terminal
        rt.abort(op)
        await op.wait()
    assert len(methods(peers, "turn/start")) == 1 and not methods(peers, "thread/resume")


# -- R-H-3: legacy as a whole source --------------------------------------------------------


async def test_r_h_3_exit_error_with_suffix_falls_back_to_the_whole_rollout(tmp_path):
    tid, _ = install_rollout(tmp_path, "paginated")

    async def gone():
        raise CodexError("codex app-server exited (code=101, signal=null) — stderr: thread 'main' panicked")

    async with open_history_reader(gone, codex_home=tmp_path) as reader:
        tr = await reader.read_thread(tid)
    assert tr.source == "legacy" and {r.source for r in tr.records()} == {"legacy"}
    assert MASKING_NOTICE in tr.notices and tr.fallback_reason.startswith("the app-server is unavailable")
    assert [r.kind for r in tr.records()].count("commandExecution") == 1


async def test_r_h_3_masking_applied_to_legacy_and_notice_dropped_when_an_index_exists(tmp_path):
    tid, _ = install_rollout(tmp_path, "paginated")
    async with open_history_reader(None, codex_home=tmp_path, redact=lambda s: s.replace("mock", "****")) as reader:
        tr = await reader.read_thread(tid)
    # a text hook is applied, but it is no privacy index: the notice stays (R-H-3)
    assert MASKING_NOTICE in tr.notices
    assert all("mock" not in r.text for r in tr.records() if r.kind == "assistantMessage")
    async with open_history_reader(None, codex_home=tmp_path, privacy=PrivacyIndex("fp")) as reader:
        tr = await reader.read_thread(tid)
    assert MASKING_NOTICE not in tr.notices


async def test_r_h_3_legacy_thread_lacking_tools_natively_is_read_whole_from_its_rollout(peers, tmp_path):
    tid, path = install_rollout(tmp_path, "legacy")
    nat = json.loads((DATA / "legacy.native.json").read_text())
    meta = thread(tid, historyMode="legacy", path=str(path))
    sc = scenario(
        rule("thread/read", respond({"thread": {**meta, "turns": nat["readTurns"]}, "readState": None}),
             params={"includeTurns": True}),
        rule("thread/read", respond({"thread": meta, "readState": None})),
        rule("thread/turns/list", respond(page(nat["turnsFull"]))),
        rule("thread/items/list", [{"error": {"code": -32601, "message": "thread/items/list is not supported yet"}}]),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt, codex_home=tmp_path) as reader:
        tr = await reader.read_thread(tid)
        native_only = await reader.read_thread(tid, allow_legacy=False)
    assert tr.source == "legacy" and {r.source for r in tr.records()} == {"legacy"}  # never spliced
    assert "commandExecution" in [r.kind for r in tr.records()]
    assert "commandExecution" not in [r.kind for r in native_only.records()]
    assert any("lacks records" in n for n in tr.notices)


async def test_r_h_3_inactive_reads_rollouts_and_lists_them(tmp_path):
    tid, _ = install_rollout(tmp_path, "paginated")
    (tmp_path / "session_index.jsonl").write_text(json.dumps({"id": tid, "thread_name": "golden", "updated_at": "x"}) + "\n")
    async with open_history_reader(None, codex_home=tmp_path) as reader:
        page_ = await reader.list_threads()
        tr = await reader.read_thread(tid)
        c = await reader.count_messages(tid)
    assert page_.source == "legacy" and [(t.thread_id, t.name) for t in page_.threads] == [(tid, "golden")]
    assert tr.source == "legacy" and c.count == tr.message_count == 8


# -- R-H-6: thread list ---------------------------------------------------------------------


async def test_r_h_6_list_pages_keep_cursor_partial_source_and_empty_pages_clear_nothing(peers):
    sc = scenario(
        rule("thread/list", respond(page([])), params={"cursor": "p3"}),
        rule("thread/list", respond(page([thread(T2, updatedAt=90)], "p3")), params={"cursor": "p2"}),
        rule("thread/list", respond(page([thread(T1, updatedAt=100)], "p2"))),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        p1 = await reader.list_threads(limit=1)
        assert (p1.source, p1.next_cursor, p1.partial) == ("native", "p2", True)
        p2 = await reader.list_threads(cursor=p1.next_cursor, limit=1)
        p3 = await reader.list_threads(cursor=p2.next_cursor, limit=1)
        assert (p3.threads, p3.next_cursor, p3.partial) == ((), None, False)
        assert [t.thread_id for t in reader.index.threads()] == [T1, T2]  # the empty page cleared nothing
        everything = await reader.list_all_threads()
    assert [t.thread_id for t in everything.threads] == [T1, T2] and not everything.partial
    assert [m["params"].get("cursor") for m in methods(peers, "thread/list")][:3] == [None, "p2", "p3"]


async def test_r_h_6_native_list_is_refused_errors_visible_not_legacy(tmp_path):
    install_rollout(tmp_path, "paginated")

    async def auth_fail():
        raise RpcError("401 Unauthorized", rpc_code=-32600)

    async with open_history_reader(auth_fail, codex_home=tmp_path) as reader:
        with pytest.raises(RpcError):
            await reader.list_threads()


# -- R-H-7: message counting ----------------------------------------------------------------


def counting_scenario(delay: float = 0.0, *, items_page: dict[str, Any] | None = None, extra=()) -> dict[str, Any]:
    items = items_page or page([entry(user("u1", "a")), entry(cmd("c1", "ls")), entry(agent("a1", "b"))])
    return scenario(
        *extra,
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/items/list", respond(items, sleep=delay)),
    )


async def test_r_h_7_count_walks_the_display_projection_and_is_cached(peers, autojump_clock):
    async with rt_for(peers, counting_scenario()) as rt, open_history_reader(rt) as reader:
        c = await reader.count_messages(T1)
        assert (c.count, c.known, c.cached, c.version) == (2, True, False, "100")
        assert (await reader.count_messages(T1)).cached
        await trio.sleep(30)
        assert (await reader.count_messages(T1)).cached
        await trio.sleep(31)  # past the 60 s TTL
        again = await reader.count_messages(T1)
        assert not again.cached and again.count == 2
    assert len(methods(peers, "thread/items/list")) == 2


async def test_r_h_7_at_most_four_counts_in_flight(peers, autojump_clock):
    ids = [f"{i:08d}-0000-4000-8000-000000000000" for i in range(6)]
    async with rt_for(peers, counting_scenario(delay=10)) as rt, open_history_reader(rt) as reader:
        await rt.ensure_started()
        t0 = trio.current_time()
        counts, total = await reader.count_many(ids)
        elapsed = trio.current_time() - t0
    assert total == 12 and all(c.count == 2 for c in counts.values())
    assert elapsed == pytest.approx(20, abs=0.5)  # 4 at once, then 2: two rounds of 10 s


async def test_r_h_7_identical_requests_share_one_count(peers, autojump_clock):
    results = []
    async with rt_for(peers, counting_scenario(delay=5)) as rt, open_history_reader(rt) as reader:
        async def one():
            results.append(await reader.count_messages(T1, expected_version="100"))

        async with trio.open_nursery() as n:
            for _ in range(3):
                n.start_soon(one)
    assert [c.count for c in results] == [2, 2, 2]
    assert len(methods(peers, "thread/items/list")) == 1 and reader.counter.started == 1


async def test_r_h_7_budget_110s_then_unknown_and_a_retry_starts_afresh(peers, autojump_clock):
    # A big thread: 30 pages of 10 s each (every call within the RPC timeout), a fresh cursor each.
    pages = [rule("thread/items/list", respond(page([entry(user(f"u{i}", "a"))], f"c{i}"), sleep=10), times=1)
             for i in range(30)]
    async with rt_for(peers, counting_scenario(extra=pages)) as rt, open_history_reader(rt) as reader:
        await rt.ensure_started()
        t0 = trio.current_time()
        c = await reader.count_messages(T1)
        assert trio.current_time() - t0 == pytest.approx(110, abs=0.5)
        assert (c.count, c.reason, c.error["code"]) == (None, "budget", "COUNT_BUDGET")
        assert reader.counter.cached(T1) is None  # nothing recorded
        n_before = len(methods(peers, "thread/items/list"))
        assert n_before == 11
        with trio.move_on_after(1):
            await reader.count_messages(T1)
    assert len(methods(peers, "thread/items/list")) == n_before + 1  # the retry started a new walk


async def test_r_h_7_incomplete_page_without_cursor_is_unknown_never_zero(peers):
    no_cursor = {"data": []}  # no nextCursor field at all: cannot tell whether more exists
    async with rt_for(peers, counting_scenario(items_page=no_cursor)) as rt, open_history_reader(rt) as reader:
        c = await reader.count_messages(T1)
        assert (c.count, c.reason) == (None, "incomplete")
        assert reader.counter.cached(T1) is None


async def test_r_h_7_summary_only_full_read_is_unknown(peers):
    full = thread(turns=[turn("t1", items=[user("u1", "hi")], view="summary")])
    sc = scenario(
        rule("thread/read", respond({"thread": full, "readState": None}), params={"includeTurns": True}),
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/items/list", [{"error": {"code": -32601, "message": "thread/items/list is not supported yet"}}]),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        c = await reader.count_messages(T1)
    assert (c.count, c.reason) == (None, "incomplete")


async def test_r_h_7_full_read_count_when_pagination_unsupported(peers):
    full = thread(turns=[turn("t1", items=[user("u1", "hi"), agent("a1", "yo"), agent("a2", "more")], view="full")])
    sc = scenario(
        rule("thread/read", respond({"thread": full, "readState": None}), params={"includeTurns": True}),
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/items/list", [{"error": {"code": -32601, "message": "thread/items/list is not supported yet"}}]),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        c = await reader.count_messages(T1)
    assert c.count == 3


async def test_r_h_7_failures_unknown_total_only_when_all_known_no_jsonl(peers, tmp_path):
    tid, _ = install_rollout(tmp_path, "paginated")
    bad = rule("thread/items/list", [{"error": {"code": -32603, "message": "database is locked"}}],
               params={"threadId": tid})
    async with rt_for(peers, counting_scenario(extra=[bad])) as rt, \
            open_history_reader(rt, codex_home=tmp_path) as reader:
        counts, total = await reader.count_many([T1, tid])
    assert counts[T1].count == 2 and counts[tid].count is None and counts[tid].error["code"] == "RPC_ERROR"
    assert total is None


async def test_r_h_7_cache_bounded_and_invalidated_by_metadata_and_activity(peers):
    sc = counting_scenario(extra=[
        rule("thread/read", respond({"thread": thread(status={"type": "active", "activeFlags": []}), "readState": None}),
             params={"threadId": T3}),
        rule("thread/list", respond(page([thread(T1, updatedAt=200)]))),
    ])
    async with rt_for(peers, sc) as rt:
        async with MessageCounter.open(cache_size=2) as counter:
            async with open_history_reader(rt, counter=counter) as reader:
                for t in (T1, T2):
                    await reader.count_messages(t)
                assert counter.cached(T1) == 2 and counter.cached(T2) == 2
                active = await reader.count_messages(T3)
                assert active.count == 2 and active.active and counter.cached(T3) is None  # active: never cached
                await reader.count_messages("44444444-4444-4444-8444-444444444444")
                assert counter.cached(T1) is None  # LRU bound evicted the oldest
                await reader.count_messages(T1)
                assert counter.cached(T1) == 2
                await reader.list_threads()  # T1's metadata changed (updatedAt 200)
                assert counter.cached(T1) is None
                stale = await reader.count_messages(T1, expected_version="200")
                assert stale.stale and stale.version == "100"  # checked against the list's version


# -- R-H-8: sub-agents ----------------------------------------------------------------------


async def test_r_h_8_ancestry_verified_and_child_status_is_its_own(peers):
    sc = scenario(
        rule("thread/read", respond({"thread": thread(T3, parentThreadId=T2, status={"type": "active", "activeFlags": []}),
                                     "readState": None}), params={"threadId": T3}),
        rule("thread/read", respond({"thread": thread(T2, parentThreadId=T1), "readState": None}),
             params={"threadId": T2}),
        rule("thread/read", respond({"thread": thread(T1, status={"type": "idle"}), "readState": None}),
             params={"threadId": T1}),
        rule("thread/turns/list", respond(page([turn("t9", status="inProgress")])), params={"threadId": T2}),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        grandchild = await reader.read_subagent(T3, T1)
        assert grandchild.relation_verified and grandchild.ancestry == (T2, T1)
        assert grandchild.status == "inProgress"  # active child, although the root is idle
        child = await reader.read_subagent(T2, T1)
        assert child.status == "inProgress" and child.relation_verified
        unverified = await reader.read_subagent(T2)
        assert not unverified.relation_verified
        with pytest.raises(CodexError) as ei:
            await reader.read_subagent(T1, T3)
        assert ei.value.code == "RELATION_UNVERIFIED"
    assert not methods(peers, "thread/resume")


async def test_r_h_1_a_repeated_cursor_stops_the_walk_as_incomplete(peers):
    loop = page([entry(user("u1", "a")), entry(agent("a1", "b"))], "same")
    async with rt_for(peers, counting_scenario(items_page=loop)) as rt, open_history_reader(rt) as reader:
        c = await reader.count_messages(T1)
    assert (c.count, c.reason) == (None, "incomplete")  # never loops, never guesses
    assert [m["params"].get("cursor") for m in methods(peers, "thread/items/list")] == [None, "same"]


async def test_r_h_7_the_count_reads_thread_read_typed_and_a_misfit_is_a_failed_count(peers):
    """R-H-7 with the typed wire: the count decodes ``thread/read`` into its msgspec model
    (``ThreadReadResult``); an answer that does not fit (a status that is not an object, an
    ``updatedAt`` that is not a number) is a failed count naming where — never 0, never a guess —
    and the pages are not even asked for."""
    for bad in ({"status": "active"}, {"updatedAt": "yesterday"}):
        sc = scenario(rule("thread/read", respond({"thread": thread(**bad), "readState": None})),
                      rule("thread/items/list", respond(page([entry(user("u1", "a"))]))))
        async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
            c = await reader.count_messages(T1)
        assert (c.count, c.reason, c.error["code"]) == (None, "error", "PROTOCOL_ERROR")
        assert "thread/read answered with an unexpected shape" in c.error["message"] and "$.thread." in c.error["message"]
        assert not methods(peers, "thread/items/list")
