"""A real code-mode wrapper read back through the projector (R-H-5), with the pinned server.

The loopback model has no code-mode directive, so for this test the mock's function-call
emitter is patched in process to send the ``exec`` custom tool call (the same SSE events with
``type: "custom_tool_call"`` and ``input``), as ``tests/data/wrappers/README.md`` recorded the
golden file. Turn 1: a cell starts a slow command (still running when the cell ends, so its
printed value carries a ``session_id``) and a quick one. Turn 2: the model polls that session
with a direct ``write_stdin``. The rollout the real server wrote must show two commands in
the server's own order (the one that ended first first) — the slow one finished by the poll
(status, exit code, output), the quick one with its own output — and no card for the poll.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio

import codexrt
from codexrt._features._history import load_rollout_transcript, open_history_reader
from codexrt._io._history_files import find_rollout
from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._settings import Settings
from codexrt.loopback import _model
from peer_fixtures.codex_home import codex_env, make_codex_home

JS = ('const r = await Promise.all([tools.exec_command({cmd: "sleep 2; echo late", yield_time_ms: 300}), '
      'tools.exec_command({cmd: "echo now"})]);\n'
      "r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));")


def _patch_custom_exec(monkeypatch) -> None:
    orig = _model._Handler._function_call

    def function_call(self, seq, idx, name, arguments, *, namespace=None):
        if name != "exec":
            return orig(self, seq, idx, name, arguments, namespace=namespace)
        item = {"type": "custom_tool_call", "id": f"ctc_mock_{seq}_{idx}", "call_id": f"call_mock_{seq}_{idx}",
                "name": "exec", "input": "", "status": "in_progress"}
        self._event("response.output_item.added", output_index=idx, item=item)
        self._event("response.output_item.done", output_index=idx, item={**item, "input": arguments,
                                                                          "status": "completed"})

    monkeypatch.setattr(_model._Handler, "_function_call", function_call)


async def test_r_h_5_real_wrapper_command_finished_by_a_later_direct_poll(codex_bin, mock_model, tmp_path,
                                                                          monkeypatch):
    _patch_custom_exec(monkeypatch)
    home = make_codex_home(tmp_path / "home", mock_model.base_url, extra_toml="code_mode = true")
    cwd = tmp_path / "work"
    cwd.mkdir()
    cfg = RuntimeConfig(codex_bin=str(codex_bin), codex_home=str(home), env=codex_env(home), cwd=str(cwd))
    settings = Settings(approval_policy="never", sandbox="danger-full-access", cwd=str(cwd))
    async with codexrt.open_runtime(cfg) as rt:
        mock_model.enqueue(_model.Script("call", call_name="exec", call_arguments=JS))
        with trio.fail_after(60):
            first = await rt.send("run the cell", settings=settings).wait()
        assert first.status == "completed", first
        tid = first.thread_id
        info = find_rollout(home, tid)
        assert info is not None
        text = info.path.read_text()
        m = re.search(r'Result 0: \{[^\n]*?\\"session_id\\":(\d+)', text) or re.search(
            r'"session_id\\?"\s*:\s*(\d+)', text)
        assert m is not None, "the slow command should still run when the cell ends"
        sid = int(m.group(1))
        mock_model.enqueue(_model.Script("call", call_name="write_stdin", call_arguments=json.dumps(
            {"session_id": sid, "chars": "", "yield_time_ms": 10000})))
        with trio.fail_after(60):
            second = await rt.send("poll it", thread_id=tid, settings=settings).wait()
        assert second.status == "completed", second
        async with open_history_reader(rt) as reader:
            native = await reader.read_thread(tid, allow_legacy=False)

    tr = await trio.to_thread.run_sync(lambda: load_rollout_transcript(info.path, thread_id=tid))
    (att,) = tr.wrappers.values()
    assert att.replace, (att.reason, att.detail)
    cmds = [r for r in tr.records() if r.kind == "commandExecution"]
    # in the server's order: the command that ended first first (issue 32)
    assert [c.id for c in cmds] == [c.id for c in native.records() if c.kind == "commandExecution"]
    assert [c.command.endswith(("sleep 2; echo late", "sleep 2; echo late'")) for c in cmds] == [False, True], cmds
    quick, slow = cmds
    assert (slow.status, slow.exit_code, slow.output) == ("completed", 0, "late\n"), slow  # not the poll again
    assert (quick.status, quick.output) == ("completed", "now\n"), quick
    assert not any(r.kind == "dynamicToolCall" for r in tr.records())  # no card for the wrapper or the poll
    assert Path(info.path).exists()
