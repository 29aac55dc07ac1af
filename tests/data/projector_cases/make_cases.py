"""Build the projector case files (``*.rollout.jsonl``) of this directory.

Each case is a small legacy rollout in the shapes the real server writes, read by
``tests/test_projector_cases.py`` through the same path as ``codexrt show --offline --json``.
Regenerate (and commit) with::

    .venv/bin/python tests/data/projector_cases/make_cases.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rollout import Rollout, unified  # noqa: E402

HERE = Path(__file__).resolve().parent
TID = "0190aaaa-0000-7000-8000-0000000000"
CASES: dict[str, Callable[[], Rollout]] = {}


def case(fn: Callable[[], Rollout]) -> Callable[[], Rollout]:
    CASES[fn.__name__] = fn
    return fn


def new(n: int) -> Rollout:
    return Rollout(f"{TID}{n:02d}")


def lbl(n: int) -> str:
    """A wrapper printing each slot of ``r`` under a ``Result i:`` label (forEach)."""
    return f"r.forEach((x, i) => text(`Result ${{i}}: ${{JSON.stringify(x)}}`));"


def batch(*cmds: str, var: str = "r") -> str:
    calls = ", ".join(f"tools.exec_command({{cmd: {json.dumps(c)}}})" for c in cmds)
    return f"const {var} = await Promise.all([{calls}]);\n"


def stdin(sid: int, chars: str) -> str:
    """A wrapper sending ``chars`` to process ``sid`` and printing the result under its label."""
    return (f"const r = await Promise.all([tools.write_stdin({{session_id: {sid}, chars: {json.dumps(chars)}}})]);\n"
            + lbl(1))


def slots(*values: object) -> list[str]:
    return [f"Result {i}: {json.dumps(v, separators=(',', ':'))}" for i, v in enumerate(values)]


# --- polls: a poll updates the command it polls, never a card of its own -------------------

@case
def poll_finishes_direct_command() -> Rollout:
    r = new(1).start("t1").user("run the build")
    r.call("c1", "exec_command", {"cmd": "make"}).out("c1", unified("building\n", pid=7))
    r.call("p1", "write_stdin", {"session_id": 7, "chars": ""}).out("p1", unified("done\n", code=0))
    return r.say("built", "m1").end()


@case
def poll_two_chunks_in_order_then_failure() -> Rollout:
    r = new(2).start("t1").user("test")
    r.call("c1", "exec_command", {"cmd": "pytest"}).out("c1", unified("collecting\n", pid=11))
    r.call("p1", "write_stdin", {"session_id": 11, "chars": ""}).out("p1", unified("1 passed\n", pid=11))
    r.call("p2", "write_stdin", {"session_id": 11, "chars": ""}).out("p2", unified("1 failed\n", code=1))
    return r.end()


@case
def poll_still_running_appends_output_only() -> Rollout:
    r = new(3).start("t1").user("serve")
    r.call("c1", "exec_command", {"cmd": "npm start"}).out("c1", unified("listening\n", pid=21))
    r.call("p1", "write_stdin", {"session_id": 21, "chars": ""}).out("p1", unified("GET /\n", pid=21))
    return r.end()


@case
def poll_of_unknown_process_makes_no_card() -> Rollout:
    r = new(4).start("t1").user("poll")
    r.call("c1", "exec_command", {"cmd": "ls"}).out("c1", unified("a\n", code=0))
    r.call("p1", "write_stdin", {"session_id": 99, "chars": ""}).out("p1", unified("", code=0))
    return r.end()


@case
def poll_in_a_later_turn_updates_the_first_turn() -> Rollout:
    r = new(5).start("t1").user("start it")
    r.call("c1", "exec_command", {"cmd": "sleep 30; echo ok"}).out("c1", unified("", pid=31))
    r.end().start("t2").user("is it done?")
    r.call("p1", "write_stdin", {"session_id": 31, "chars": ""}).out("p1", unified("ok\n", code=0))
    return r.say("yes", "m2").end()


@case
def poll_reused_process_id_goes_to_the_latest_start() -> Rollout:
    r = new(6).start("t1").user("twice")
    r.call("c1", "exec_command", {"cmd": "job one"}).out("c1", unified("", pid=7))
    r.call("p1", "write_stdin", {"session_id": 7, "chars": ""}).out("p1", unified("one\n", code=0))
    r.call("c2", "exec_command", {"cmd": "job two"}).out("c2", unified("", pid=7))
    r.call("p2", "write_stdin", {"session_id": 7, "chars": ""}).out("p2", unified("two\n", code=3))
    return r.end()


# --- Ctrl+C across calls --------------------------------------------------------------------

@case
def ctrl_c_direct_on_direct_command() -> Rollout:
    r = new(7).start("t1").user("stop it")
    r.call("c1", "exec_command", {"cmd": "tail -f log"}).out("c1", unified("line\n", pid=41))
    r.call("c2", "exec_command", {"cmd": "echo other"}).out("c2", unified("other\n", code=0))
    r.call("p1", "write_stdin", {"session_id": 41, "chars": "\u0003"}).out("p1", unified("^C\n", code=130))
    return r.end()


@case
def ctrl_c_from_wrapper_on_direct_command() -> Rollout:
    r = new(8).start("t1").user("stop the server")
    r.call("c1", "exec_command", {"cmd": "python -m http.server"}).out("c1", unified("Serving\n", pid=51))
    r.wrapper("w1", stdin(51, "\u0003"))
    r.wrapper_out("w1", slots({"output": "^C\n", "exit_code": 130}))
    return r.end()


@case
def ctrl_c_direct_on_wrapper_command() -> Rollout:
    r = new(9).start("t1").user("start both")
    src = batch("npm run dev", "echo ready") + lbl(2)
    r.wrapper("w1", src)
    r.item_cmd("exec-b", "echo ready", output="ready\n", code=0, pid=62)
    r.wrapper_out("w1", slots({"session_id": 61, "output": "compiling\n"}, {"exit_code": 0, "output": "ready\n"}))
    r.call("p1", "write_stdin", {"session_id": 61, "chars": "\u0003"}).out("p1", unified("stopped\n", code=130))
    return r.end()


@case
def ctrl_c_from_wrapper_only_ends_its_target() -> Rollout:
    r = new(10).start("t1").user("two servers")
    r.call("c1", "exec_command", {"cmd": "serve a"}).out("c1", unified("a up\n", pid=71))
    r.call("c2", "exec_command", {"cmd": "serve b"}).out("c2", unified("b up\n", pid=72))
    r.wrapper("w1", stdin(71, "\u0003"))
    r.wrapper_out("w1", slots({"output": "bye a\n"}))
    return r.end()


# --- known processes: the process id, not the command text --------------------------------

@case
def known_process_poll_from_wrapper_data_sets_no_status() -> Rollout:
    r = new(11).start("t1").user("watch")
    r.call("c1", "exec_command", {"cmd": "watch make"}).out("c1", unified("watching\n", pid=81))
    r.wrapper("w1", stdin(81, ""))
    r.wrapper_out("w1", slots({"exit_code": 0, "output": "rebuilt\n"}))
    return r.end()


@case
def known_process_id_beats_same_command_text() -> Rollout:
    r = new(12).start("t1").user("two tails")
    r.call("c1", "exec_command", {"cmd": "tail -f app.log"}).out("c1", unified("one\n", pid=91))
    r.call("c2", "exec_command", {"cmd": "tail -f app.log"}).out("c2", unified("two\n", pid=92))
    r.wrapper("w1", stdin(92, "\u0003"))
    r.wrapper_out("w1", slots({"output": ""}))
    return r.end()


@case
def unknown_process_keeps_the_wrapper() -> Rollout:
    r = new(13).start("t1").user("poll nothing")
    r.wrapper("w1", stdin(4242, ""))
    r.wrapper_out("w1", slots({"output": "?"}))
    return r.end()


@case
def process_started_by_an_earlier_wrapper_is_known_to_a_later_one() -> Rollout:
    r = new(14).start("t1").user("start then stop")
    r.wrapper("w1", batch("npm run dev", "echo hi") + lbl(2))
    r.item_cmd("exec-h", "echo hi", output="hi\n", code=0, pid=102)
    r.wrapper_out("w1", slots({"session_id": 101, "output": "starting\n"}, {"exit_code": 0, "output": "hi\n"}))
    r.wrapper("w2", stdin(101, "\u0003"))
    r.wrapper_out("w2", slots({"output": "stopped\n"}))
    return r.end()


# --- later direct calls are never the wrapper's receipts -----------------------------------

@case
def later_direct_call_of_the_same_command_is_not_a_receipt() -> Rollout:
    r = new(15).start("t1").user("echo twice")
    r.wrapper("w1", batch("echo a", "echo b") + lbl(2))
    r.wrapper_out("w1", slots({"output": "a\n"}, {"output": "b\n"}))
    r.call("c1", "exec_command", {"cmd": "echo a"}).out("c1", unified("a again\n", code=0))
    return r.end()


@case
def later_direct_call_never_fills_a_missing_result() -> Rollout:
    r = new(16).start("t1").user("spread")
    src = batch("echo a") + "r.map((x, i) => text(JSON.stringify({i, ...x})));"
    r.wrapper("w1", src).wrapper_out("w1", ['{"i":0,"output":"a\\n"}'])
    r.call("c1", "exec_command", {"cmd": "echo a"}).out("c1", unified("a\n", code=0))
    return r.end()


@case
def parallel_direct_call_inside_the_wrapper_window_is_not_a_receipt() -> Rollout:
    r = new(17).start("t1").user("parallel")
    r.wrapper("w1", batch("echo a") + lbl(1))
    r.call("c1", "exec_command", {"cmd": "echo a"})
    r.out("c1", unified("direct a\n", code=0))
    r.wrapper_out("w1", slots({"output": "a\n"}))
    return r.end()


@case
def later_direct_snapshot_of_the_same_command_is_not_a_receipt() -> Rollout:
    r = new(18).start("t1").user("again")
    r.wrapper("w1", batch("date") + lbl(1))
    r.item_cmd("exec-d1", "date", output="Mon\n", code=0, pid=111)
    r.wrapper_out("w1", slots({"exit_code": 0, "output": "Mon\n"}))
    r.call("c1", "exec_command", {"cmd": "date"})
    r.item_cmd("c1", "date", output="Tue\n", code=0, pid=112)
    r.out("c1", unified("Tue\n", code=0))
    return r.end()


# --- arrays mutated or re-bound before the labelled print keep the wrapper -----------------

def _mutated(n: int, stmt: str) -> Rollout:
    r = new(n).start("t1").user("batch")
    r.wrapper("w1", batch("echo a", "echo b") + stmt + "\n" + lbl(2))
    # printed after the mutation: slot 0 now holds b's value
    r.wrapper_out("w1", slots({"output": "b\n"}, {"output": "a\n"}))
    return r.end()


@case
def array_reversed_before_print() -> Rollout:
    return _mutated(19, "r.reverse();")


@case
def array_sorted_before_print() -> Rollout:
    return _mutated(20, "r.sort((x, y) => (x.output < y.output ? 1 : -1));")


@case
def array_reassigned_before_print() -> Rollout:
    r = new(21).start("t1").user("batch")
    src = "let r = await Promise.all([tools.exec_command({cmd: \"echo a\"}), tools.exec_command({cmd: \"echo b\"})]);\n"
    src += "r = [r[1], r[0]];\n" + lbl(2)
    r.wrapper("w1", src).wrapper_out("w1", slots({"output": "b\n"}, {"output": "a\n"}))
    return r.end()


@case
def array_elements_swapped_by_destructuring() -> Rollout:
    return _mutated(22, "[r[0], r[1]] = [r[1], r[0]];")


@case
def array_aliased_then_mutated() -> Rollout:
    return _mutated(23, "const s = r; s.reverse();")


@case
def array_read_only_is_still_replaced() -> Rollout:
    r = new(24).start("t1").user("batch")
    r.wrapper("w1", batch("echo a", "echo b") + "text(`n=${r.length}`);\n"
              + "for (let i = 0; i < r.length; i++) text(`Result ${i}: ${JSON.stringify(r[i])}`);")
    r.wrapper_out("w1", ["n=2", *slots({"output": "a\n"}, {"output": "b\n"})])
    return r.end()


# --- error envelopes ---------------------------------------------------------------------

@case
def script_failed_envelope_survives_replacement() -> Rollout:
    r = new(25).start("t1").user("then fail")
    r.wrapper("w1", batch("echo a") + lbl(1) + "\nthrow new Error(\"boom\");")
    r.item_cmd("exec-a", "echo a", output="a\n", code=0, pid=121)
    r.wrapper_out("w1", slots({"exit_code": 0, "output": "a\n"}), status="failed", error="Error: boom")
    return r.end()


@case
def script_failed_envelope_kept_with_the_wrapper() -> Rollout:
    r = new(26).start("t1").user("loop and fail")
    src = "for (const c of [\"a\", \"b\"]) { await tools.exec_command({cmd: `echo ${c}`}); }\nthrow new Error(\"late\");"
    r.wrapper("w1", src).wrapper_out("w1", [], status="failed", error="Error: late")
    return r.end()


@case
def crlf_wrapper_output_pairs_by_slot() -> Rollout:
    r = new(27).start("t1").user("crlf")
    r.wrapper("w1", (batch("echo a", "echo b") + lbl(2)).replace("\n", "\r\n"))
    r.wrapper_out("w1", [s + "\r\n" for s in slots({"output": "a\r\n"}, {"output": "b\r\n"})])
    return r.end()


# --- patches -------------------------------------------------------------------------------

PATCH_A = "*** Begin Patch\n*** Add File: notes.txt\n+first\n+second\n*** End Patch"
PATCH_B = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 2\n*** End Patch"


@case
def literal_patch_without_result_keeps_wrapper_and_grey_preview() -> Rollout:
    r = new(28).start("t1").user("patch")
    src = f"const r = await tools.apply_patch({json.dumps(PATCH_A)});\ntext(JSON.stringify(r));"
    r.wrapper("w1", src).wrapper_out("w1", ['"Success. Updated the following files:\\nA notes.txt\\n"'])
    return r.end()


@case
def two_literal_patches_sharing_one_result_are_not_split() -> Rollout:
    r = new(29).start("t1").user("two patches")
    src = (f"await tools.apply_patch({json.dumps(PATCH_A)});\nawait tools.apply_patch({json.dumps(PATCH_B)});\n"
           "text(\"both applied\");")
    r.wrapper("w1", src).wrapper_out("w1", ["both applied"])
    return r.end()


@case
def mixed_call_with_its_own_file_change_shows_one_card() -> Rollout:
    r = new(30).start("t1").user("mixed")
    src = (f"const r = await Promise.all([tools.exec_command({{cmd: \"ls\"}}), tools.apply_patch({json.dumps(PATCH_A)})]);\n"
           + lbl(2))
    r.wrapper("w1", src)
    r.item_cmd("exec-ls", "ls", output="app.py\n", code=0, pid=131)
    r.item_file_change("exec-fc", {"/w/notes.txt": {"type": "add", "content": "first\nsecond\n"}},
                       stdout="Success. Updated the following files:\nA notes.txt\n")
    r.wrapper_out("w1", slots({"exit_code": 0, "output": "app.py\n"}, "Success."))
    return r.end()


@case
def mixed_call_with_failed_patch_end_shows_the_real_failure() -> Rollout:
    r = new(31).start("t1").user("mixed fail")
    src = (f"const r = await Promise.all([tools.exec_command({{cmd: \"ls\"}}), tools.apply_patch({json.dumps(PATCH_B)})]);\n"
           + lbl(2))
    r.wrapper("w1", src)
    r.item_cmd("exec-ls", "ls", output="app.py\n", code=0, pid=141)
    r.patch_end("exec-pe", {"/w/app.py": {"type": "update", "unified_diff": "@@\n-x = 1\n+x = 2\n"}}, False,
                stdout="")
    r.wrapper_out("w1", slots({"exit_code": 0, "output": "app.py\n"}, "failed"))
    return r.end()


# --- status only from receipts and native fields -------------------------------------------

@case
def exit_zero_whose_body_says_exit_code_one() -> Rollout:
    r = new(32).start("t1").user("print it")
    r.call("c1", "exec_command", {"cmd": "cat status.txt"})
    r.out("c1", unified("Exit code: 1\nOutput:\nnot really\n", code=0))
    return r.end()


@case
def body_with_an_output_line_is_not_truncated() -> Rollout:
    r = new(33).start("t1").user("show log")
    r.call("c1", "exec_command", {"cmd": "cat run.log"})
    r.out("c1", unified("step 1\nOutput:\nstep 2\n", code=0))
    return r.end()


@case
def aggregated_output_is_never_read_for_a_header() -> Rollout:
    r = new(34).start("t1").user("nested")
    r.wrapper("w1", batch("cat report") + lbl(1))
    r.item_cmd("exec-r", "cat report", output="Exit code: 1\nOutput:\nall good\n", code=0, pid=151)
    r.wrapper_out("w1", slots({"exit_code": 0, "output": "Exit code: 1\nOutput:\nall good\n"}))
    return r.end()


@case
def exit_code_in_printed_data_is_not_a_status() -> Rollout:
    r = new(35).start("t1").user("legacy mode, no receipts")
    r.wrapper("w1", batch("false") + lbl(1))
    r.wrapper_out("w1", slots({"exit_code": 1, "output": ""}))
    return r.end()


@case
def status_field_inside_promise_all_value_is_data() -> Rollout:
    r = new(36).start("t1").user("status data")
    r.wrapper("w1", batch("cat state.json") + lbl(1))
    r.item_cmd("exec-s", "cat state.json", output='{"status":"rejected"}\n', code=0, pid=161)
    r.wrapper_out("w1", slots({"status": "rejected", "output": '{"status":"rejected"}\n'}))
    return r.end()


@case
def intercepted_apply_patch_nested_header_still_read() -> Rollout:
    r = new(37).start("t1").user("patch through exec")
    r.call("c1", "exec_command", {"cmd": "echo hi > x"})
    r.out("c1", "Wall time: 0.0000 seconds\nOutput:\nExit code: 0\nWall time: 0 seconds\nOutput:\nwritten\n")
    return r.end()


@case
def running_words_in_a_body_start_no_process() -> Rollout:
    r = new(38).start("t1").user("print words")
    r.call("c1", "exec_command", {"cmd": "cat notes"})
    r.out("c1", unified("Process running with session ID 9\n", code=0))
    r.call("c2", "exec_command", {"cmd": "sleep 9"}).out("c2", unified("", pid=9))
    r.call("p1", "write_stdin", {"session_id": 9, "chars": ""}).out("p1", unified("slept\n", code=0))
    return r.end()


# --- compaction boundaries -----------------------------------------------------------------

@case
def compactions_at_different_times_stay_separate() -> Rollout:
    r = new(39).start("t1").user("long work").say("part one", "m1")
    r.compacted("summary one", "2026-11-30T10:00:00.000Z").context_compacted("2026-11-30T11:00:00.000Z")
    return r.say("part two", "m2").end()


@case
def facets_of_one_compaction_at_one_time_are_one_boundary() -> Rollout:
    r = new(40).start("t1").user("long work").say("part one", "m1")
    r.compacted("summary", "2026-11-30T10:00:00.000Z").context_compacted("2026-11-30T10:00:00.000Z")
    return r.say("part two", "m2").end()


@case
def compaction_without_summary_stays_in_place() -> Rollout:
    r = new(41).start("t1").user("work").say("before", "m1")
    r.compacted("", "2026-11-30T10:05:00.000Z")
    return r.say("after", "m2").end()


# --- late completions tied by identity -----------------------------------------------------

@case
def late_completion_tied_by_process_id_updates_the_command() -> Rollout:
    r = new(42).start("t1").user("slow")
    r.wrapper("w1", batch("sleep 2; echo late") + lbl(1))
    r.wrapper_out("w1", slots({"session_id": 171, "output": ""}))
    r.item_cmd("exec-late", "sleep 2; echo late", output="late\n", code=0, pid=171)
    return r.end()


@case
def later_item_of_another_process_is_not_tied() -> Rollout:
    r = new(43).start("t1").user("slow")
    r.wrapper("w1", batch("sleep 2; echo late") + lbl(1))
    r.wrapper_out("w1", slots({"session_id": 181, "output": ""}))
    r.item_cmd("exec-other", "sleep 2; echo late", output="other\n", code=0, pid=182)
    return r.end()


@case
def reversed_completion_order_pairs_by_process_identity() -> Rollout:
    r = new(44).start("t1").user("same command twice")
    r.wrapper("w1", batch("make", "make") + lbl(2))
    r.item_cmd("exec-2", "make", output="second\n", code=2, pid=192)
    r.item_cmd("exec-1", "make", output="first\n", code=0, pid=191)
    r.wrapper_out("w1", slots({"session_id": 191, "output": "first\n"}, {"session_id": 192, "output": "second\n"}))
    return r.end()


@case
def late_item_after_a_direct_poll_is_the_whole_output() -> Rollout:
    # the shape the real server writes (tests/real/test_history_code_mode_real.py): the cell's slow
    # command ends during a later turn's poll; its item (with the first turn's id) holds all output
    r = new(45).start("t1").user("run the cell")
    r.wrapper("w1", batch("sleep 2; echo late", "echo now") + lbl(2))
    r.item_cmd("exec-now", "echo now", output="now\n", code=0, pid=202)
    r.wrapper_out("w1", slots({"session_id": 201, "output": ""}, {"exit_code": 0, "output": "now\n"}))
    r.end().start("t2").user("poll it")
    r.call("p1", "write_stdin", {"session_id": 201, "chars": "", "yield_time_ms": 10000})
    r.item_cmd("exec-late", "sleep 2; echo late", output="late\n", code=0, pid=201, turn="t1")
    r.out("p1", unified("late\n", code=0))
    return r.end()


@case
def direct_command_snapshot_after_its_polls_is_the_whole_output() -> Rollout:
    r = new(46).start("t1").user("paginated direct")
    r.call("c1", "exec_command", {"cmd": "build"}).out("c1", unified("a\n", pid=7))
    r.call("p1", "write_stdin", {"session_id": 7, "chars": ""})
    r.item_cmd("c1", "build", output="a\nb\n", code=0, pid=7)
    r.out("p1", unified("b\n", code=0))
    return r.end()


def main() -> None:
    for name, fn in CASES.items():
        (HERE / f"{name}.rollout.jsonl").write_text(fn().text())
    print(f"{len(CASES)} case files written to {HERE}")


if __name__ == "__main__":
    main()
