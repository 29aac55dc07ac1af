"""Split from ``tests/sansio/test_history_local.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

import trio

from codexrt._features._history import LocalSubmission, local_submissions, open_history_reader
from tests.trio.test_history import page, respond, rt_for, rule, scenario, thread, turn
from tests.sansio.test_history_local import umsg


async def test_r_h_1_reader_reconciles_the_runtimes_unconfirmed_sends(peers):
    tid = "11111111-1111-4111-8111-111111111111"
    sc = scenario(
        rule("thread/read", respond({"thread": thread(), "readState": None})),
        rule("thread/turns/list", respond(page([turn("t1", items=[umsg("u1", "first", "cm-1")], view="full")]))),
        rule("thread/items/list", respond(page([{"turnId": "t1", "item": umsg("u1", "first", "cm-1"),
                                                  "startedAtMs": None, "completedAtMs": None}]))),
    )
    async with rt_for(peers, sc) as rt, open_history_reader(rt) as reader:
        with trio.fail_after(10):
            tr = await reader.read_thread(tid, local=[LocalSubmission("cm-1", "first"),
                                                      LocalSubmission("cm-2", "not yet")])
        assert local_submissions(rt, tid) == [] and reader.local_source is not None  # the runtime is the default
    assert [(r.id, r.text, r.status) for r in tr.records()] == [("u1", "first", "completed"),
                                                                ("local:cm-2", "not yet", "inProgress")]
