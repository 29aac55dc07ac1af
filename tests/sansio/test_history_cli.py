"""Split from ``tests/trio/test_history_cli.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import json

from codexrt._features._history import load_rollout_transcript
from codexrt_cli._show import render_transcript
from tests.trio.test_history_cli import DATA


def test_r_h_5_show_keeps_an_unattributable_wrapper_whole_with_the_reason(tmp_path):
    # The same real transcript, but the calls run inside a loop over a variable: their
    # multiplicity is unknown statically, so the engine keeps the wrapper (and the native
    # receipts stay as they are). A loop over a literal array would be unrolled (issue 32).
    out = []
    for ln in (DATA / "wrappers" / "real-0.169.0-exec-promise-all.jsonl").read_text().splitlines():
        d = json.loads(ln)
        if d["payload"].get("type") == "custom_tool_call":
            d["payload"]["input"] = ('const cmds = ["echo a", "echo b"];\nfor (const c of cmds) '
                                     '{ text(JSON.stringify(await tools.exec_command({cmd: c}))); }')
        out.append(json.dumps(d))
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(out) + "\n")
    tr = load_rollout_transcript(path)
    kinds = [r.kind for r in tr.records()]
    assert kinds == ["userMessage", "dynamicToolCall", "commandExecution", "commandExecution", "assistantMessage"]
    (att,) = tr.wrappers.values()
    assert not att.replace
    text = render_transcript(tr)
    assert f"code-mode exec wrapper [completed] — kept whole ({att.reason.value}" in text and "Result 0:" in text
