"""Every example of ``docs/daemon-protocol.md`` is sent to ``codexrt serve`` on the real
``codex app-server`` and each reply checked against the shipped schema and the example's shape
(issue 31: 17 of 28 examples did not match what the server returns when sent verbatim).

How the examples run (``docs/daemon-protocol.md``, "Examples"): each ```json block is a
self-contained conversation in a fresh ``serve`` (real binary, loopback model, throw-away
``CODEX_HOME``). Its lines are, in order: a command (sent), a reply (waited for by its id,
then compared), an event (the next event of that kind, waited for, then compared). Ids the
server makes — thread ids, interaction keys, dialog tokens, operation ids — are learnt from
the replies and events of the block as shown in the doc and substituted in the commands that
follow, so a block names only threads and keys it created itself. A block preceded by
``<!-- not-run: reason -->`` is skipped with that reason.

Comparing: a reply's ``ok`` and error ``code`` must be the example's; its result must fit
``#/$defs/commandResult/<command>`` (every line also fits ``#/$defs/outputLine``: the harness
checks it) and have the example's shape — the same keys at every level (an object holding the
key ``"…"`` may have more), the same JSON types where neither side is null; the value ``"…"``
matches anything, a list is compared by its first elements.

The model is scripted: a few example messages stand for a directive of the loopback model
(:data:`DIRECTIVES`). ``CODEXRT_DOC_EXAMPLES_RECORD=DIR`` writes each block's actual lines to
``DIR`` (to refresh the doc from a real run).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests._doc_examples import blocks, item_kind, learn, shape_problems, substitute
from tests.e2e.test_serve_e2e import ServeProcess

WAIT = 90.0

#: Example messages that stand for a loopback-model directive (the real model is not scripted).
DIRECTIVES = {
    "write a long answer": "[[mock:deltas:400:25]] write a long answer",
    "run python3 -c 'print(6*7)'": "[[mock:exec:python3 -c 'print(6*7)']]",
    "add a.txt": "[[mock:patch:a.txt:line 1\\nline 2\\n]]",
}


def _params() -> list:
    out = []
    for line, items, reason in blocks():
        marks = ()
        if reason is not None:
            marks = (pytest.mark.skip(reason=f"daemon-protocol.md:{line}: {reason}"),)
        elif not any(item_kind(i) == "command" for i in items):
            marks = (pytest.mark.skip(reason=f"daemon-protocol.md:{line}: no command (checked statically)"),)
        out.append(pytest.param(items, id=f"daemon-protocol.md:{line}", marks=marks))
    return out


def test_every_example_block_is_run_or_says_why() -> None:
    """The doc holds examples and this test sees them all (a block it cannot parse fails)."""
    found = blocks()
    assert len([b for b in found if b[2] is None and any(item_kind(i) == "command" for i in b[1])]) >= 15
    for line, _items_, reason in found:
        assert reason is None or reason, f"daemon-protocol.md:{line}: a not-run marker needs its reason"


@pytest.mark.parametrize("items", _params())
async def test_doc_example_runs_on_the_real_server(items, request, tmp_path, codex_bin, codex_home, real_env,
                                                   real_cwd, mock_model):
    not_a_repo = tmp_path / "not-a-repo"
    not_a_repo.mkdir()
    subs: dict[str, Any] = {"/tmp/not-a-repo": str(not_a_repo), "/home/me/proj": str(real_cwd)}
    problems: list[str] = []
    record: list[dict[str, Any]] = []
    async with ServeProcess.open(tmp_path, "--codex-bin", str(codex_bin), "--codex-home", str(codex_home),
                                 "--cwd", str(real_cwd), env=real_env) as sp:
        try:
            await _run(sp, items, subs, problems, record)
        finally:
            target = os.environ.get("CODEXRT_DOC_EXAMPLES_RECORD")
            if target:
                Path(target).mkdir(parents=True, exist_ok=True)
                name = request.node.callspec.id.replace("/", "_").replace(":", "_")
                (Path(target) / f"{name}.ndjson").write_text("".join(json.dumps(l) + "\n" for l in record))
        assert await sp.finish(timeout=WAIT) == 0
    assert not problems, "\n".join(problems)


async def _run(sp: ServeProcess, items: list[dict[str, Any]], subs: dict[str, Any], problems: list[str],
               record: list[dict[str, Any]]) -> None:
    for n, item in enumerate(items):
        kind = item_kind(item)
        if kind == "command":
            cmd = substitute(item, subs)
            params = cmd.get("params")
            if isinstance(params, dict) and params.get("message") in DIRECTIVES:
                params = {**params, "message": DIRECTIVES[params["message"]]}
            await sp.send(cmd["command"], params, id=cmd["id"])
            continue
        where = f"line {n} ({kind} {item.get('id', item.get('kind'))!r})"
        try:
            if kind == "reply":
                actual = await sp.response(item["id"], timeout=WAIT)
            else:
                actual = await sp.event(item["kind"], timeout=WAIT)
        except trio.TooSlowError:
            seen = [(l.get("kind") or l.get("id")) for l in sp.lines[-30:]]
            raise AssertionError(f"{where}: nothing within {WAIT}s; last lines {seen}; problems {problems}") from None
        if kind == "reply":
            if actual["ok"] != item["ok"]:
                problems.append(f"{where}: ok {actual['ok']} (doc {item['ok']}): {json.dumps(actual)[:300]}")
            elif not actual["ok"] and actual["error"]["code"] != item["error"]["code"]:
                problems.append(f"{where}: code {actual['error']['code']} (doc {item['error']['code']})")
            else:
                body = "result" if actual["ok"] else "error"
                problems += [f"{where}: {p}" for p in shape_problems(item[body], actual[body], f"$.{body}")]
        else:
            problems += [f"{where}: {p}" for p in shape_problems(item["payload"], actual["payload"], "$.payload")]
        record.append(actual)
        learn(item, actual, subs)
