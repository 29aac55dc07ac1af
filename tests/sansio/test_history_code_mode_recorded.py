"""One rule set for both sources (issue 32; R-H-3, R-H-4, R-H-5, R-H-7): real 0.171.0 code-mode
threads read from their rollout file agree with what the server itself reports.

``tests/data/rollouts/code-*.rollout.jsonl`` / ``code-*.native.json`` were recorded with the pinned
real ``codex app-server`` 0.171.0 on the loopback model (``tests/data/rollouts/record_code_mode.py``;
the native side is ``thread/turns/list`` of a *fresh* server after each situation, so a turn cut by
a kill shows what the server reports after a restart). Every recorded thread must give the same
turns, turn statuses, message counts and commands from both sources.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from codexrt._features._history_legacy import load_rollout_transcript
from codexrt._sansio._projection import (
    AssistantMessage,
    CompactionBoundary,
    DynamicToolCall,
    Projector,
    count_messages,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "rollouts"
NAMES = sorted(p.name[len("code-"):-len(".native.json")] for p in DATA.glob("code-*.native.json"))


def _native(name: str) -> Any:
    nat = json.loads((DATA / f"code-{name}.native.json").read_text())
    p = Projector(nat["threadId"])
    for t in nat["turnsFull"]:
        p.add_native_turn(t)
    return nat, p.turns()


def _legacy(name: str, path: Path | None = None) -> Any:
    return load_rollout_transcript(path or DATA / f"code-{name}.rollout.jsonl", mask=lambda r: r)


def _commands(records: Any) -> Counter[tuple[Any, ...]]:
    return Counter((r.command, r.status, r.exit_code) for r in records if r.kind == "commandExecution")


#: issue 32's attribution situations (several calls per cell, several cells per turn)
ATTRIBUTION = {"two-printed", "two-silent", "two-cells", "two-cells-two-each", "same-twice", "same-two-cells",
               "all-in-order", "all-reversed", "all-labelled", "loop", "nonzero", "extra-text", "stringify-done",
               "stringify-running", "stringify-yield", "poll-second-cell", "empty-output", "print-only",
               "notify-print", "notify-loop", "two-cells-running", "ctrl-c-second-cell", "direct-and-cell",
               "bad-workdir", "patch-cell", "stdin-same-cell", "stdin-tty-same-cell", "all-settled-failing"}

#: What the file shows beyond the server's records, on purpose (docs/history.md, "Known
#: differences"): a cell's own outcome — a cell kept whole (``exec``), its ``Script failed``
#: envelope (``error``), the image it returned (``exec`` ``#images``) — per turn, as (kind, status).
#: Everything else must be the server's records, in the server's order.
CELL_EXTRAS: dict[str, list[list[tuple[str, str]]]] = {
    "image": [[("dynamicToolCall", "completed")]],  # image(): no call made it
    "print-only": [[("dynamicToolCall", "completed")]],  # no tool call: only what it printed
    "notify-print": [[("dynamicToolCall", "completed")]],
    "bad-workdir": [[("error", "failed")]],  # the call could not start: Script failed
    "patch-cell": [[("dynamicToolCall", "failed")]],  # tools.apply_patch is not a function (0.171.0)
    "stdin-same-cell": [[("error", "failed")]],  # write_stdin failed: stdin is closed (no tty)
    "restart": [[("dynamicToolCall", "interrupted")], [], []],  # cut by the kill before any call ended
    "throw": [[("error", "failed")], [("dynamicToolCall", "failed")]],  # threw / not JavaScript
}


def _cell_own(r: Any) -> bool:
    """A record of the cell itself, not of a call it made."""
    return (isinstance(r, DynamicToolCall) and r.tool == "exec") or (r.kind == "error" and r.id.endswith("#script"))


def _shown(r: Any) -> tuple[Any, ...]:
    return (r.kind, r.status, getattr(r, "command", None), getattr(r, "exit_code", None),
            r.output if r.kind == "commandExecution" else None,
            r.text if r.kind in ("userMessage", "assistantMessage") else None)


def test_the_recordings_are_there() -> None:
    assert {"compaction", "autocompact", "throw", "abort", "restart", "yield", "notify", "image"} <= set(NAMES)
    assert ATTRIBUTION <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_r_h_5_file_shows_the_servers_records_in_its_order_beside_only_a_cells_own_outcome(name: str) -> None:
    """Issue 32: no cell kept whole where every call is attributable, none dropped that must
    stay (its outcome), each command where and as the server shows it (order, status, exit code,
    output), each message with its text."""
    _, native = _native(name)
    legacy = _legacy(name)
    extras = [[(r.kind, r.status) for r in g.records if _cell_own(r)] for g in legacy.turns]
    assert extras == CELL_EXTRAS.get(name, [[] for _ in legacy.turns])
    assert [[_shown(r) for r in g.records if not _cell_own(r)] for g in legacy.turns] == \
        [[_shown(r) for r in g.records] for g in native]


@pytest.mark.parametrize("name", NAMES)
def test_r_h_3_file_and_server_agree_on_turns_statuses_messages_and_commands(name: str) -> None:
    nat, native = _native(name)
    legacy = _legacy(name)
    assert legacy.thread_id == nat["threadId"]
    assert [g.turn_id for g in legacy.turns] == [g.turn_id for g in native]
    assert [g.status for g in legacy.turns] == [g.status for g in native] == [t["status"] for t in nat["readTurns"]]
    for lg, ng in zip(legacy.turns, native):
        assert count_messages(list(lg.records)) == count_messages(list(ng.records)), lg.turn_id
        assert _commands(lg.records) == _commands(ng.records), lg.turn_id
        assert sum(isinstance(r, CompactionBoundary) for r in lg.records) == \
            sum(isinstance(r, CompactionBoundary) for r in ng.records)
    assert legacy.message_count == count_messages([r for g in native for r in g.records])
    # nothing the file shows is live once the server has none running
    assert not [r for r in legacy.records() if r.status == "inProgress"]


def test_r_h_4_a_compaction_is_one_boundary_and_its_summary_is_not_a_message() -> None:
    """0.171.0 writes the summarizer's answer as an assistant response item, then a `compacted`
    line (message = preamble + that answer) and a ContextCompaction item_completed."""
    legacy = _legacy("compaction")
    (turn,) = [g for g in legacy.turns if any(isinstance(r, CompactionBoundary) for r in g.records)]
    assert [r.kind for r in turn.records] == ["compaction"]
    assert turn.records[0].summary.endswith("SUMMARY: the user said hello and ran echo one.")
    assert not [r for r in legacy.records() if isinstance(r, AssistantMessage) and "SUMMARY:" in r.text]
    assert legacy.message_count == 6


def test_r_h_4_a_turn_cut_by_a_kill_is_interrupted_once_a_later_turn_started() -> None:
    legacy = _legacy("restart")
    cut = legacy.turns[0]
    assert cut.status == "interrupted"
    assert [(r.kind, r.status) for r in cut.records] == [("userMessage", "completed"),
                                                         ("dynamicToolCall", "interrupted")]


def test_r_h_4_a_file_ending_inside_a_turn_is_unknown_never_live(tmp_path: Path) -> None:
    """The restart recording cut where the kill left it (before the restart wrote more): the
    file alone cannot tell a killed writer from one still writing."""
    lines = (DATA / "code-restart.rollout.jsonl").read_text().splitlines(True)
    cut = next(i for i, line in enumerate(lines) if '"custom_tool_call"' in line)
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[: cut + 1]))
    (turn,) = _legacy("restart", path).turns
    assert turn.status == "unknown"
    assert [(r.kind, r.status) for r in turn.records] == [("userMessage", "completed"), ("dynamicToolCall", "unknown")]


def test_r_h_5_a_cell_follows_its_receipt_failed_or_aborted() -> None:
    throw = _legacy("throw")
    (broken,) = [r for r in throw.records() if isinstance(r, DynamicToolCall)]  # kept whole: not JS
    assert broken.status == "failed" and "SyntaxError" in broken.content[-1].text
    # the throwing cell's command is shown (replaced wrapper) with the script error after it
    first = [(r.kind, r.status) for r in throw.turns[0].records]
    assert first == [("userMessage", "completed"), ("commandExecution", "completed"), ("error", "failed"),
                     ("assistantMessage", "completed")]
    # the aborted cell: its command's item (written when the abort killed it, after the cell's
    # `aborted by user` output) is the cell's only call, so the cell gives way to it, as on the
    # server: an interrupted turn holding the failed command (issue 32)
    abort = _legacy("abort")
    assert abort.turns[0].status == "interrupted"
    assert [(r.kind, r.status, getattr(r, "exit_code", None)) for r in abort.turns[0].records] == [
        ("userMessage", "completed", None), ("commandExecution", "failed", -1)]
    assert abort.wrappers["call_mock_0_0"].replace


def test_r_h_5_an_image_a_cell_returns_is_kept_beside_its_commands() -> None:
    """The cell ran `echo drawing` and returned a PNG with `image()`: the wrapper is replaced by
    its command, and the image stays as a record of the cell (it was lost before)."""
    legacy = _legacy("image")
    recs = [r for r in legacy.records() if r.kind in ("commandExecution", "dynamicToolCall")]
    assert [r.kind for r in recs] == ["commandExecution", "dynamicToolCall"]
    assert recs[0].output == "drawing\n"
    (block,) = recs[1].content
    assert block.image is not None and block.image.mime_type == "image/png" and block.image.value.startswith("iVBOR")


def test_r_h_5_a_poll_after_a_restart_that_reused_the_process_id_updates_the_new_command(tmp_path: Path) -> None:
    """The recorded restart (a new cell's command after the restart, then a direct `write_stdin`
    poll that finishes it; the server writes the command's completed item between the poll and
    its output) with a turn before the restart whose direct command got the *same* process id.
    0.171.0 uses real process ids, so the reuse (certain with the old sequential session ids) is
    made here by that prepended turn, in the real shapes of a direct `exec_command` still running."""
    src = (DATA / "code-restart.rollout.jsonl").read_text().splitlines()
    pid = json.loads(next(line for line in src if '"CommandExecution"' in line))["payload"]["item"]["process_id"]
    ta = "01a235e2-4000-7000-8000-00000000000a"

    def line(ts: str, t: str, p: dict[str, Any]) -> str:
        return json.dumps({"timestamp": f"2026-12-02T08:32:30.{ts}Z", "type": t, "payload": p})

    meta = {"internal_chat_message_metadata_passthrough": {"turn_id": ta}}
    before = [
        line("000", "event_msg", {"type": "task_started", "turn_id": ta, "started_at": 1796200350}),
        line("001", "event_msg", {"type": "user_message", "message": "start the old command", "turn_id": ta}),
        line("100", "response_item", {"type": "function_call", "name": "exec_command", "call_id": "call_old", **meta,
                                      "arguments": json.dumps({"cmd": "sleep 40; echo old", "yield_time_ms": 300})}),
        line("500", "response_item", {"type": "function_call_output", "call_id": "call_old", **meta, "output":
                                      f"Chunk ID: 1a2b3c\nWall time: 0.3003 seconds\nProcess running with session ID "
                                      f"{pid}\nOriginal token count: 0\nOutput:\n"}),
        line("600", "event_msg", {"type": "task_complete", "turn_id": ta, "last_agent_message": None}),
    ]
    after = src[next(i for i, x in enumerate(src) if '"task_started"' in x and i > 2):]  # the turns after the restart
    path = tmp_path / "reused.jsonl"
    path.write_text("\n".join(src[:1] + before + after) + "\n")
    tr = _legacy("restart", path)
    cmds = {r.command: r for r in tr.records() if r.kind == "commandExecution"}
    old = cmds["sleep 40; echo old"]
    new = next(r for c, r in cmds.items() if c.endswith("echo new'"))
    assert (new.status, new.exit_code, new.output) == ("completed", 0, "new\n")
    assert old.status != "completed" and old.exit_code is None and "new" not in (old.output or "")


def _with_second_cell(name: str, after_line: int, tmp_path: Path) -> Path:
    """The recording with a copy of its first cell (another call id and cell id, the same script
    and output) inserted after 1-based line ``after_line``, in the same turn: the real shapes, a second cell
    that could have started the same command."""
    lines = (DATA / f"code-{name}.rollout.jsonl").read_text().splitlines()
    cell = [ln for ln in lines if '"custom_tool_call"' in ln or '"custom_tool_call_output"' in ln][:2]
    twin = [ln.replace("call_mock_0_0", "call_twin").replace("cell ID 1", "cell ID 2") for ln in cell]
    path = tmp_path / f"{name}-twin.jsonl"
    path.write_text("\n".join(lines[:after_line] + twin + lines[after_line:]) + "\n")
    return path


def test_r_h_5_a_late_item_joins_a_cell_only_when_no_other_cell_of_its_turn_could_claim_it(tmp_path: Path) -> None:
    """code-autocompact: the command's item is written after the cell ended; with a second cell
    of the same command in that turn either could have started it — both stay whole, the item
    is shown once, as itself. (code-two-cells-running: two cells of one turn each leave another
    command running; each late item can be only one cell's — both cells give way.)"""
    assert _legacy("autocompact").wrappers["call_mock_0_0"].replace  # alone in its turn: attributed
    tr = _legacy("autocompact", _with_second_cell("autocompact", 12, tmp_path))
    assert {k: a.replace for k, a in tr.wrappers.items()} == {"call_mock_0_0": False, "call_twin": False}
    cmds = [r for r in tr.records() if r.kind == "commandExecution"]
    assert [(r.status, r.exit_code) for r in cmds] == [("failed", -1)]
    assert all(a.replace for a in _legacy("two-cells-running").wrappers.values())


def test_r_h_5_a_wait_finishes_its_cell_only_when_no_other_cell_started_in_between(tmp_path: Path) -> None:
    """code-yield: the cell yields, `wait` returns its end — attributed, no card for the wait.
    With another cell started between them, the receipts in that window could be either's: the
    cell stays whole and the wait stays a card."""
    plain = _legacy("yield")
    assert plain.wrappers["call_mock_0_0"].replace
    assert not [r for r in plain.records() if isinstance(r, DynamicToolCall)]
    tr = _legacy("yield", _with_second_cell("yield", 12, tmp_path))
    assert not tr.wrappers["call_mock_0_0"].replace
    assert [r.tool for r in tr.records() if isinstance(r, DynamicToolCall)] == ["exec", "exec", "wait"]


def test_r_h_5_a_kept_cell_shows_what_it_printed_not_its_last_notification() -> None:
    """0.171.0 writes each `notify()` message as one more output with the cell's call id, after
    the script's own output: a cell kept whole showed only its last notification and lost what
    it printed (issue 32: "drops a wrapper that must be kept whole with its output")."""
    for name, printed in (("notify-print", "just words"),):
        (cell,) = [r for r in _legacy(name).records() if isinstance(r, DynamicToolCall)]
        assert cell.content[0].text.startswith("Script completed") and cell.content[-1].text == printed, name
    # an attributed cell reads its script's output too (its header: completed)
    assert _legacy("notify").wrappers["call_mock_0_0"].script_status == "completed"
    assert _legacy("notify-loop").wrappers["call_mock_0_0"].script_status == "completed"


def test_r_h_5_ctrl_c_from_a_later_cell_leaves_the_servers_outcome() -> None:
    """code-ctrl-c-second-cell: a cell sends Ctrl+C to a command another cell left running; the
    server's item for it says `failed`, exit 130 — the file said `interrupted` (a poll's Ctrl+C
    overrode the server's completed item)."""
    (cmd,) = [r for r in _legacy("ctrl-c-second-cell").records() if r.kind == "commandExecution"]
    assert (cmd.status, cmd.exit_code) == ("failed", 130)


def test_r_h_5_a_patch_whose_tool_does_not_exist_is_no_preview() -> None:
    """code-patch-cell: 0.171.0 has no `tools.apply_patch` in code mode; the script fails with
    `TypeError: tools.apply_patch is not a function` — no patch ran, so no grey preview of one
    (there was one, `unknown`); the cell stays whole, `failed`, with its error."""
    tr = _legacy("patch-cell")
    assert [(r.kind, r.status) for r in tr.records()] == [("userMessage", "completed"), ("dynamicToolCall", "failed"),
                                                          ("assistantMessage", "completed")]


def test_r_h_5_what_counts_as_a_cells_notification() -> None:
    """Only a headerless output after the script's own (headered) output is a `notify()`
    message; the script's end — a header, or the user's abort of a yielded cell — always wins."""
    from codexrt._sansio._projection._replay import is_notification

    running = {"output": "Script running with cell ID 1\nWall time 0.3 seconds\nOutput:\n"}
    done = {"output": [{"type": "input_text", "text": "Script completed\nWall time 1.0 seconds\nOutput:\n"}]}
    assert is_notification(done, {"output": "halfway"}) and is_notification(running, {"output": "n1\n"})
    assert not is_notification(running, {"output": "aborted by user after 2.2s"})
    assert not is_notification(running, done)
    assert not is_notification(None, {"output": "halfway"})
    assert not is_notification({"output": "halfway"}, done)


def test_r_h_5_a_poll_of_the_cells_own_command_by_its_result_is_attributed() -> None:
    """code-stdin-tty-same-cell: `const r = await tools.exec_command({cmd: "head -n1", tty:
    true})` then `tools.write_stdin({session_id: r.session_id, chars: "hello\\n"})` — the poll
    targets call 0's process (r is bound once); its record is the server's completed item, so
    the poll needs no result of its own. The cell was kept (`unknown_process`)."""
    tr = _legacy("stdin-tty-same-cell")
    assert tr.wrappers["call_mock_0_0"].replace
    (cmd,) = [r for r in tr.records() if r.kind == "commandExecution"]
    assert (cmd.status, cmd.exit_code) == ("completed", 0) and "hello" in (cmd.output or "")
