"""Split from ``tests/trio/test_edits.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from codexrt._io._edits import EditKey, EditLedger, EditStore, ReviewError, default_store_path
from codexrt._sansio._patch import ChangeKind
from tests.trio.test_edits import Codex, OLD, _load_recording, change, item, ledger, record, tree


def test_r_edit_1_live_notifications_and_history(tree: Path, ledger: EditLedger):
    p = str(tree / "n.txt")
    started = {"threadId": "th-9", "turnId": "tu", "item": item("c", change(p, "add", "x\n"), status="inProgress")}
    e, = ledger.record_notification("item/started", started, cwd=str(tree))
    assert e.status == "inProgress" and ledger.pending_review() == []
    done = dict(started, item=item("c", change(p, "add", "x\n")))
    e2, = ledger.record_notification("item/completed", done, cwd=str(tree))
    assert e2.key == e.key and e2.status == "completed" and e2.seq == e.seq
    assert ledger.record_notification("item/agentMessage/delta", {}, cwd=str(tree)) == []
    assert ledger.record_item({"type": "agentMessage", "id": "m"}, thread_id="x", turn_id="y", cwd=str(tree)) == []
    hist = ledger.record_history(
        "th-h",
        [
            {"id": "t1", "items": [{"type": "userMessage", "id": "u"}, item("h1", change("a.txt", "add", "a\n"))]},
            {"id": "t2", "items": [{"type": "fileChange", "id": "h2", "status": "completed",
                                    "changes": {"a.txt": {"type": "update", "unified_diff": "@@ -1 +1 @@\n-a\n+b\n", "move_path": None}}}]},
        ],
        cwd=str(tree),
    )
    assert [(h.key.turn_id, h.kind, h.origin) for h in hist] == [
        ("t1", ChangeKind.ADD, "history"), ("t2", ChangeKind.UPDATE, "history"),
    ]
    assert [x.key.item_id for x in ledger.by_file("a.txt")] == ["h1", "h2"]
    assert [x.key.item_id for x in ledger.by_thread("th-9")] == ["c"]
    d = hist[1].to_dict()
    assert d["kind"] == "update" and d["added"] == 1 and d["removed"] == 1 and d["target"] == str(tree / "a.txt")


class FailingDb:
    """A sqlite connection whose N-th checkpoint INSERT fails, mid-transaction."""

    def __init__(self, db, *, fail_on_insert: int) -> None:
        self.db = db
        self.left = fail_on_insert

    def cursor(self):
        outer = self
        cur = self.db.cursor()

        class Cursor:
            @property
            def rowcount(self):
                return cur.rowcount

            def execute(self, sql, *args):
                if sql.startswith("INSERT OR REPLACE INTO checkpoints"):
                    outer.left -= 1
                    if outer.left == 0:
                        raise sqlite3.OperationalError("disk I/O error")
                return cur.execute(sql, *args)

        return Cursor()

    def execute(self, *args):
        return self.db.execute(*args)


def test_r_edit_2_checkpoint_persists_across_reopen(tree: Path, tmp_path: Path):
    path = default_store_path(str(tree), state_dir=str(tmp_path / "state"))
    assert str(tree) not in path and path.startswith(str(tmp_path / "state"))
    cx = Codex(tree)
    ch = [cx.add("a.txt", "A\n"), cx.update("old_name.py", "print('z')\n", move_to="renamed.py")]
    with EditStore(path) as store:
        led = EditLedger(session_id="s1", provider="openai", store=store)
        a, mv = led.record_item(item("i", *ch), thread_id="th", turn_id="t", cwd=str(tree))
        t = led.open_review(mv.key)
        assert (t.target, t.rename_source) == (str(tree / "renamed.py"), str(tree / "old_name.py"))
        assert (t.session_id, t.provider) == ("s1", "openai")
        cps = led.accept(t)
        assert [c.decision for c in cps] == ["accepted"]
        assert [e.key for e in led.pending_review()] == [a.key]
    with EditStore(path) as store:  # a restart
        led = EditLedger(session_id="s1", store=store)
        led.record_item(item("i", *ch), thread_id="th", turn_id="t", cwd=str(tree))
        cp = led.review_state(mv.key)
        assert cp is not None and cp.decision == "accepted" and cp.rename_source == str(tree / "old_name.py")
        assert [e.key for e in led.pending_review()] == [a.key]
        # an open ticket survives too and can be decided after the restart
        t2 = led.open_review(a.key)
    with EditStore(path) as store:
        led = EditLedger(session_id="s1", store=store)
        led.record_item(item("i", *ch), thread_id="th", turn_id="t", cwd=str(tree))
        assert led.reject(t2.ticket_id)[0].decision == "rejected"
        assert led.pending_review() == []


def test_r_edit_2_decision_goes_to_frozen_session_only(tree: Path, ledger: EditLedger):
    cx = Codex(tree)
    e, = record(ledger, tree, cx.add("a.txt", "A\n"))
    t = ledger.open_review(e.key)
    ledger.rebind_session("sess-2", "other")
    ledger.accept(t)
    assert ledger.review_state(e.key) is None  # the current session is untouched
    assert ledger.review_state(e.key, session_id="sess-1").decision == "accepted"
    assert ledger.review_state(e.key, session_id="sess-1").provider == "openai"
    assert [x.key for x in ledger.pending_review()] == [e.key]  # still pending for sess-2


def test_r_edit_2_later_edits_stay_pending(tree: Path, ledger: EditLedger):
    cx = Codex(tree)
    e1, = record(ledger, tree, cx.update("src/big.txt", OLD.replace("line 1\n", "one\n")), turn="t1", item_id="i1")
    t = ledger.open_review(e1.key)
    e2, = record(ledger, tree, cx.update("src/big.txt", OLD.replace("line 1\n", "ONE\n")), turn="t2", item_id="i2")
    ledger.accept(t)
    assert [x.key for x in ledger.pending_review()] == [e2.key]


def test_r_edit_2_null_session_and_failures_record_nothing(tree: Path, ledger: EditLedger, monkeypatch):
    cx = Codex(tree)
    e, = record(ledger, tree, cx.add("a.txt", "A\n"))
    ledger.rebind_session(None)
    t = ledger.open_review(e.key)
    ledger.rebind_session("sess-1", "openai")
    with pytest.raises(ReviewError) as ei:
        ledger.accept(t)
    assert ei.value.code == "REVIEW_NO_SESSION"
    assert ledger.review_state(e.key) is None
    # double decision: the second fails and changes nothing
    t2 = ledger.open_review(e.key)
    ledger.reject(t2)
    with pytest.raises(ReviewError) as ei:
        ledger.accept(t2)
    assert ei.value.code == "REVIEW_STALE"
    assert ledger.review_state(e.key).decision == "rejected"
    # a store failure mid-transaction leaves neither ticket state nor checkpoints
    (tree / "b.txt").write_text("B\n")
    e3, = record(ledger, tree, change(str(tree / "b.txt"), "add", "B\n"), item_id="i3")
    e4 = ledger.record_item(item("i4", change(str(tree / "b.txt"), "update", "")), thread_id="th-1", turn_id="turn-1", cwd=str(tree))[0]
    t3 = ledger.open_review([e3.key, e4.key])
    # the second checkpoint insert of this ticket fails (disk I/O error)
    monkeypatch.setattr(ledger.store, "_db", FailingDb(ledger.store._db, fail_on_insert=2))
    with pytest.raises(ReviewError):
        ledger.accept(t3)
    monkeypatch.undo()
    assert ledger.review_state(e3.key) is None and ledger.review_state(e4.key) is None
    assert ledger.store.get_ticket(t3.ticket_id)[1] == "open"
    ledger.accept(t3)  # the ticket is still open and can be decided
    assert ledger.review_state(e3.key).decision == "accepted"


def test_review_refuses_unknown_keys_and_mixed_files(tree: Path, ledger: EditLedger):
    cx = Codex(tree)
    a, b = record(ledger, tree, cx.add("a.txt", "A\n"), cx.add("b.txt", "B\n"))
    with pytest.raises(ReviewError):
        ledger.open_review([a.key, b.key])
    with pytest.raises(ReviewError):
        ledger.open_review(EditKey("no", "such", "key", "x"))
    with pytest.raises(ReviewError):
        ledger.accept("not-a-ticket")


def test_r_edit_1_projected_history_records_feed_the_ledger(tmp_path: Path):
    from codexrt._sansio._projection import project_native_item

    cwd = tmp_path / "ws"
    rec = _load_recording(cwd)
    led = EditLedger(session_id="s")
    for turn in rec["history"]:
        for it in turn["items"]:
            r = project_native_item(it, thread_id=rec["threadId"], turn_id=turn["id"])
            led.record_projected(r, cwd=str(cwd))
    direct = EditLedger(session_id="s")
    direct.record_history(rec["threadId"], rec["history"], cwd=str(cwd))
    assert [(e.key, e.patch, e.status) for e in led.entries()] == [
        (e.key, e.patch, e.status) for e in direct.entries()
    ]
    assert {e.kind for e in led.entries()} == set(ChangeKind)
    assert led.record_projected(object(), cwd=str(cwd)) == []
