"""Record real 0.171.0 code-mode threads: the rollout file and the server's own history of each.

Run from the repo root, inside a loopback-only network namespace (the real binary is started)::

    unshare -rn sh -c 'ip link set lo up && exec "$0" "$@"' .venv/bin/python tests/data/rollouts/record_code_mode.py

Each situation is one thread on the pinned real ``codex app-server`` (``[features] code_mode``,
approval ``never``, sandbox ``danger-full-access``) talking to the in-process loopback model, whose
function-call emitter is patched to send the ``exec`` custom tool call (as
``tests/data/wrappers/README.md`` describes; everything in the files is written by the server).
For each it writes ``code-<name>.rollout.jsonl`` (tmp paths → ``/TMP``) and
``code-<name>.native.json`` = ``{"threadId", "turnsFull": [Turn…] (thread/turns/list, itemsView
full, ascending), "readTurns": [Turn…] (thread/read includeTurns)}`` — read by a *fresh* server
after the situation, so a turn cut by a kill shows what the server reports after a restart.

Situations: ``compaction`` (two turns, ``thread/compact/start``, one more turn), ``throw`` (a cell
whose script throws after a command, then one that is not JavaScript), ``abort`` (a cell running
a slow command, interrupted by the user), ``restart`` (a cell running a slow command when the
server is killed; after the restart a new cell starts a command that a later turn polls with
``write_stdin`` — 0.171.0 uses real process ids, so the id is not reused), ``yield`` (a cell that
yields early through the ``@exec`` pragma, finished by ``wait``), ``notify`` (a cell calling
``notify()`` between two commands), ``image`` (a cell whose ``image()`` helper returns an image),
``autocompact`` (``model_auto_compact_token_limit`` below the mock's usage: the server compacts in
the middle of the turn, after the cell).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from generate import Peer, _pages  # noqa: E402

from codexrt.loopback import _model  # noqa: E402
from peer_fixtures.codex_bin import native_binary  # noqa: E402
from peer_fixtures.codex_home import codex_env, make_codex_home  # noqa: E402
from peer_fixtures.mock_responses import MockResponsesServer  # noqa: E402
from tests.real.test_history_code_mode_real import _patch_custom_exec  # noqa: E402  (the same in-process patch)

OUT = Path(__file__).resolve().parent
#: a 1x1 PNG, as a code-mode cell's ``image()`` helper takes it
PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
       "RU5ErkJggg==")
TIMEOUT = 60.0


#: situations of one turn running one cell: (script, prompt)
ONE_CELL = {
    "notify": ('await tools.exec_command({cmd: "echo first"});\nnotify("halfway");\n'
               'const r = await tools.exec_command({cmd: "echo second"});\ntext(r.output);', "run a cell that notifies"),
    "image": ('await tools.exec_command({cmd: "echo drawing"});\nimage("' + PNG + '");',
              "run a cell that returns an image"),
    "autocompact": ('const r = await tools.exec_command({cmd: "echo before the compaction"});\ntext(r.output);',
                    "run a cell; the context fills up"),
}

#: attribution situations (issue 32, the "second wrapper"): several calls per cell, several cells
#: per turn. name -> turns, each ``(prompt, [cell source | Script, ...])``, every step one model
#: request in order (after the last one the mock answers with text quoting the last output).
#: ``{SID}`` in a cell is the newest process id the rollout holds when that turn starts.
#: a step that waits (a command left running ends meanwhile) before its turn starts
PAUSE = ("pause", 4.0)
_RUNNING = 'const r = await tools.exec_command({cmd: "sleep 3; echo late", yield_time_ms: 300});\n'
CELLS: dict[str, list[tuple[str, list[Any]]]] = {
    "two-printed": [("two commands, both printed", [
        'const a = await tools.exec_command({cmd: "echo alpha"});\n'
        'const b = await tools.exec_command({cmd: "echo beta"});\ntext(a.output);\ntext(b.output);'])],
    "two-silent": [("two commands, nothing printed", [
        'await tools.exec_command({cmd: "echo alpha"});\nawait tools.exec_command({cmd: "echo beta"});'])],
    "two-cells": [("two cells, one command each", [
        'const r = await tools.exec_command({cmd: "echo one"});\ntext(r.output);',
        'const r = await tools.exec_command({cmd: "echo two"});\ntext(r.output);'])],
    "two-cells-two-each": [("two cells, two commands each", [
        'const a = await tools.exec_command({cmd: "echo one-a"});\n'
        'const b = await tools.exec_command({cmd: "echo one-b"});\ntext(a.output);\ntext(b.output);',
        'const a = await tools.exec_command({cmd: "echo two-a"});\n'
        'const b = await tools.exec_command({cmd: "echo two-b"});\ntext(a.output);\ntext(b.output);'])],
    "same-twice": [("the same command twice in one cell", [
        'const a = await tools.exec_command({cmd: "echo same"});\n'
        'const b = await tools.exec_command({cmd: "echo same"});\ntext(a.output);\ntext(b.output);'])],
    "same-two-cells": [("the same command in two cells", [
        'const r = await tools.exec_command({cmd: "echo same"});\ntext(r.output);',
        'const r = await tools.exec_command({cmd: "echo same"});\ntext(r.output);'])],
    "all-in-order": [("Promise.all printed in order", [
        'const r = await Promise.all([tools.exec_command({cmd: "echo left"}), '
        'tools.exec_command({cmd: "echo right"})]);\ntext(r[0].output);\ntext(r[1].output);'])],
    "all-reversed": [("Promise.all printed reversed", [
        'const r = await Promise.all([tools.exec_command({cmd: "echo left"}), '
        'tools.exec_command({cmd: "echo right"})]);\ntext(r[1].output);\ntext(r[0].output);'])],
    "all-labelled": [("Promise.all printed with labels", [
        'const r = await Promise.all([tools.exec_command({cmd: "echo left"}), '
        'tools.exec_command({cmd: "echo right"})]);\n'
        'r.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));'])],
    "loop": [("a loop over commands", [
        'for (const c of ["echo a1", "echo a2", "echo a3"]) {\n'
        '  const r = await tools.exec_command({cmd: c});\n  text(r.output);\n}'])],
    "nonzero": [("a failing command, then another", [
        'const a = await tools.exec_command({cmd: "echo bad; exit 3"});\n'
        'const b = await tools.exec_command({cmd: "echo after"});\ntext(a.output);\ntext(b.output);'])],
    "extra-text": [("a command printed between words", [
        'const r = await tools.exec_command({cmd: "echo payload"});\n'
        'text("before the output");\ntext(r.output);\ntext("after the output");'])],
    "stringify-done": [("a finished command printed whole", [
        'const r = await tools.exec_command({cmd: "echo done"});\ntext(JSON.stringify(r));'])],
    "stringify-running": [
        ("a running command printed whole", [_RUNNING + 'text(JSON.stringify(r));']),
        ("poll it from a cell", ['const p = await tools.write_stdin({session_id: {SID}, chars: "", '
                                 'yield_time_ms: 10000});\ntext(JSON.stringify(p));'])],
    "stringify-yield": [("a cell that yields while its command runs, then wait", [
        '// @exec: {"yield_time_ms": 300}\n'
        'const r = await tools.exec_command({cmd: "sleep 2; echo late", yield_time_ms: 600});\n'
        'text(JSON.stringify(r));',
        _model.Script("call", call_name="wait", call_arguments=json.dumps({"cell_id": "1", "yield_time_ms": 10000}))])],
    "poll-second-cell": [
        ("start a command in one cell", [_RUNNING + 'text(JSON.stringify({session_id: r.session_id}));']),
        ("poll it from another cell", ['const p = await tools.write_stdin({session_id: {SID}, chars: "", '
                                       'yield_time_ms: 10000});\ntext(p.output);'])],
    "empty-output": [("a command with no output", [
        'const r = await tools.exec_command({cmd: "true"});\ntext(r.output);'])],
    "print-only": [("a cell that only prints", ['text("just words");'])],
    "two-cells-running": [
        ("two cells, each leaves a command running", [
            'const r = await tools.exec_command({cmd: "sleep 2; echo one-late", yield_time_ms: 300});\ntext(r.output);',
            'const r = await tools.exec_command({cmd: "sleep 2; echo two-late", yield_time_ms: 300});\ntext(r.output);']),
        ("later [[mock:text:Later.]]", [PAUSE])],
    "ctrl-c-second-cell": [
        ("start a long command", ['const r = await tools.exec_command({cmd: "sleep 30; echo never", '
                                  'yield_time_ms: 300});\ntext(JSON.stringify(r));']),
        ("stop it from another cell", ['const p = await tools.write_stdin({session_id: {SID}, chars: "\\u0003", '
                                       'yield_time_ms: 2000});\ntext(JSON.stringify(p));'])],
    "direct-and-cell": [("a direct command, then a cell running the same", [
        _model.Script.exec_command("echo same"),
        'const r = await tools.exec_command({cmd: "echo same"});\ntext(r.output);'])],
    "bad-workdir": [("a command in a directory that does not exist", [
        'const r = await tools.exec_command({cmd: "echo x", workdir: "/nonexistent/dir"});\n'
        'text(JSON.stringify(r));'])],
    "patch-cell": [("a patch from a cell", [
        'const r = await tools.apply_patch("*** Begin Patch\\n*** Add File: notes.txt\\n+hello\\n'
        '*** End Patch\\n");\ntext(JSON.stringify(r));'])],
    "stdin-same-cell": [("feed a command's stdin from the same cell", [
        'const r = await tools.exec_command({cmd: "head -n1", yield_time_ms: 300});\n'
        'const p = await tools.write_stdin({session_id: r.session_id, chars: "hello\\n", yield_time_ms: 2000});\n'
        'text(p.output);'])],
    "stdin-tty-same-cell": [("feed a tty command's stdin from the same cell", [
        'const r = await tools.exec_command({cmd: "head -n1", tty: true, yield_time_ms: 300});\n'
        'const p = await tools.write_stdin({session_id: r.session_id, chars: "hello\\n", yield_time_ms: 2000});\n'
        'text(p.output);'])],
    "all-settled-failing": [("Promise.allSettled with a failing command", [
        'const r = await Promise.allSettled([tools.exec_command({cmd: "exit 4"}), '
        'tools.exec_command({cmd: "echo fine"})]);\nr.forEach((x, i) => text(`Result ${i}: ${JSON.stringify(x)}`));'])],
    "notify-print": [("a cell that notifies and prints, no tool", ['notify("halfway");\ntext("just words");'])],
    "notify-loop": [("a loop that notifies", [
        'for (const c of ["echo n1", "echo n2"]) {\n  const r = await tools.exec_command({cmd: c});\n'
        '  notify(r.output);\n}\ntext("done");'])],
}


def newest_process_id(text: str) -> str:
    """The newest process id a rollout's text holds (a cell's printed ``session_id`` or an item's
    ``process_id``)."""
    found = re.findall(r'\\"session_id\\":(\d+)|"process_id":"(\d+)"', text)
    assert found, "no process id in the rollout"
    a, b = found[-1]
    return a or b


def cell(js: str) -> _model.Script:
    return _model.Script("call", call_name="exec", call_arguments=js)


class Run:
    def __init__(self, binary: Path, home: Path, work: Path, mock: MockResponsesServer) -> None:
        self.binary, self.home, self.work, self.mock = binary, home, work, mock
        self.peer: Peer | None = None

    def start(self) -> Peer:
        peer = Peer(self.binary, codex_env(self.home), self.work)
        peer.call("initialize", {"clientInfo": {"name": "codexrt-golden", "title": None, "version": "0"},
                                 "capabilities": {"experimentalApi": True}})
        peer.send({"method": "initialized"})
        self.peer = peer
        return peer

    def new_thread(self) -> str:
        assert self.peer is not None
        th = self.peer.call("thread/start", {"cwd": str(self.work), "approvalPolicy": "never",
                                             "sandbox": "danger-full-access"})
        return str(th["thread"]["id"])

    def turn(self, tid: str, text: str, *, wait: bool = True) -> str:
        assert self.peer is not None
        res = self.peer.call("turn/start", {"threadId": tid, "input": [{"type": "text", "text": text,
                                                                         "text_elements": []}]})
        turn_id = str(res["turn"]["id"])
        if wait:
            self.peer.wait_note("turn/completed", lambda p, t=turn_id: p["turn"]["id"] == t)
        return turn_id

    def wait_new(self, method: str, since: int) -> dict[str, Any]:
        """The first ``method`` notification after the ``since``-th one seen."""
        assert self.peer is not None
        for n in self.peer.notes[since:]:
            if n["method"] == method:
                return dict(n["params"])
        deadline = time.monotonic() + TIMEOUT
        while True:
            msg = self.peer._next(deadline)
            if msg.get("method") == method and "id" not in msg:
                return dict(msg["params"])

    def wait_command_started(self, needle: str) -> None:
        assert self.peer is not None
        self.peer.wait_note("item/started", lambda p: p["item"].get("type") == "commandExecution"
                            and needle in json.dumps(p["item"].get("command")))


def _native(peer: Peer, tid: str) -> dict[str, Any]:
    turns = _pages(peer, "thread/turns/list", {"threadId": tid, "itemsView": "full", "sortDirection": "asc",
                                               "limit": 3})
    read = peer.call("thread/read", {"threadId": tid, "includeTurns": True})
    return {"threadId": tid, "turnsFull": turns, "readTurns": read["thread"].get("turns", []),
            "path": read["thread"]["path"]}


def situation(name: str, binary: Path, tmp: Path) -> None:
    home, work = tmp / f"home-{name}", tmp / f"work-{name}"
    work.mkdir(parents=True)
    with MockResponsesServer() as mock:
        make_codex_home(home, mock.base_url, extra_toml="code_mode = true")
        if name == "autocompact":  # a top-level key: before the first table of config.toml
            cfg = home / "config.toml"
            cfg.write_text("model_auto_compact_token_limit = 12\n" + cfg.read_text())
        run = Run(binary, home, work, mock)
        peer = run.start()
        try:
            tid = run.new_thread()
            if name == "compaction":
                run.turn(tid, "hello [[mock:text:Hello there.]]")
                mock.enqueue(cell('const r = await tools.exec_command({cmd: "echo one"});\ntext(JSON.stringify(r));'))
                run.turn(tid, "run a cell")
                mock.enqueue(_model.Script.reply("SUMMARY: the user said hello and ran echo one."))
                since = len(peer.notes)
                peer.call("thread/compact/start", {"threadId": tid})
                run.wait_new("turn/completed", since)
                run.turn(tid, "after the compaction [[mock:text:Still here.]]")
            elif name == "throw":
                mock.enqueue(cell('await tools.exec_command({cmd: "echo before"});\ntext("about to throw");\n'
                                  'throw new Error("boom");'))
                run.turn(tid, "run a throwing cell")
                mock.enqueue(cell('this is not javascript ((('))
                run.turn(tid, "run a broken cell")
            elif name == "abort":
                mock.enqueue(cell('const r = await tools.exec_command({cmd: "sleep 30; echo never", '
                                  'yield_time_ms: 60000});\ntext(JSON.stringify(r));'))
                turn_id = run.turn(tid, "run a slow cell", wait=False)
                run.wait_command_started("sleep 30")
                time.sleep(2.0)
                peer.call("turn/interrupt", {"threadId": tid, "turnId": turn_id})
                peer.wait_note("turn/completed", lambda p: p["turn"]["id"] == turn_id)
                run.turn(tid, "after the abort [[mock:text:Stopped.]]")
            elif name == "yield":
                mock.enqueue(cell('// @exec: {"yield_time_ms": 300}\n'
                                  'const r = await tools.exec_command({cmd: "sleep 2; echo late", yield_time_ms: 10000});'
                                  '\ntext(JSON.stringify(r));'))
                mock.enqueue(_model.Script("call", call_name="wait", call_arguments=json.dumps(
                    {"cell_id": "1", "yield_time_ms": 10000})))
                run.turn(tid, "run a cell that yields, then wait for it")
            elif name in CELLS:
                for prompt, steps in CELLS[name]:
                    for step in steps:
                        if step == PAUSE:
                            time.sleep(PAUSE[1])
                            continue
                        if isinstance(step, str) and "{SID}" in step:
                            rollout = Path(_native(peer, tid)["path"]).read_text()
                            step = step.replace("{SID}", newest_process_id(rollout))
                        mock.enqueue(cell(step) if isinstance(step, str) else step)
                    run.turn(tid, prompt)
            elif name in ONE_CELL:
                js, prompt = ONE_CELL[name]
                mock.enqueue(cell(js))
                run.turn(tid, prompt)
            elif name == "restart":
                mock.enqueue(cell('const r = await tools.exec_command({cmd: "sleep 40; echo old", '
                                  'yield_time_ms: 60000});\ntext(JSON.stringify(r));'))
                run.turn(tid, "run a slow cell", wait=False)
                run.wait_command_started("sleep 40")
                time.sleep(1.0)
                peer.proc.kill()  # a crash: the turn never ends in the file
                peer.proc.wait(timeout=10)
                peer = run.start()
                peer.call("thread/resume", {"threadId": tid, "cwd": str(work), "approvalPolicy": "never",
                                            "sandbox": "danger-full-access"})
                mock.enqueue(cell('const r = await tools.exec_command({cmd: "sleep 2; echo new", '
                                  'yield_time_ms: 300});\ntext(JSON.stringify(r));'))
                run.turn(tid, "start a new slow command")
                text = Path(_native(peer, tid)["path"]).read_text()
                m = re.search(r'\\"session_id\\":(\d+)', text)
                sid = int(m.group(1)) if m else 1000
                mock.enqueue(_model.Script("call", call_name="write_stdin", call_arguments=json.dumps(
                    {"session_id": sid, "chars": "", "yield_time_ms": 10000})))
                run.turn(tid, "poll it")
            peer.close()
            peer = run.start()  # the server's view after a restart
            native = _native(peer, tid)
        finally:
            peer.close()
    path = Path(native.pop("path"))

    def scrub(s: str) -> str:
        s = s.replace(str(tmp.resolve()), "/TMP").replace(str(tmp), "/TMP")
        return re.sub(r"/tmp/[A-Za-z0-9_.-]*/", "/TMP/", s)

    (OUT / f"code-{name}.rollout.jsonl").write_text(scrub(path.read_text(encoding="utf-8")), encoding="utf-8")
    (OUT / f"code-{name}.native.json").write_text(scrub(json.dumps(native, indent=1, ensure_ascii=False)) + "\n",
                                                  encoding="utf-8")
    print(name, native["threadId"], [t["status"] for t in native["turnsFull"]])


def main(argv: list[str]) -> int:
    binary = native_binary()
    if binary is None:
        print("pinned codex binary not installed", file=sys.stderr)
        return 1
    _patch_custom_exec(pytest.MonkeyPatch())  # for this process's lifetime
    known = ["compaction", "throw", "abort", "restart", "yield", *ONE_CELL, *CELLS]
    if argv in (["--list"], ["-l"]):
        print("\n".join(known))
        return 0
    unknown = [n for n in argv if n not in known]
    if unknown:
        print(f"unknown situation(s) {unknown}; known: {known}", file=sys.stderr)
        return 2
    names = argv or known
    tmp = Path(tempfile.mkdtemp(prefix="codexrt-code-"))
    try:
        for name in names:
            situation(name, binary, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
