"""``codexrt serve`` never dies of its input (issue 18; R-D-4).

Parse level (no I/O): a line nested past :data:`MAX_COMMAND_DEPTH` gets ``LINE_TOO_DEEP`` with
its id when the top level shows one; schema-valid but out-of-range numbers are
``INVALID_PARAMS`` naming where. Loop level (``serve_daemon`` in process over memory streams): a
handler that raises something unexpected is answered once with ``INTERNAL_ERROR`` — its
traceback only in the log, redacted — and the loop goes on.
"""

from __future__ import annotations

import json

import pytest

from codexrt._serve._codec import MAX_COMMAND_DEPTH, BadCommand, Command, parse_command


def _nested(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize("line,rid", [
    ('{"id":"a","command":"status","params":{"x":' + _nested(5000) + '}}', "a"),
    ('{"command":"status","params":{"x":' + _nested(5000) + '},"id":7}', 7),
    ('{"command":"status","params":{"x":' + _nested(MAX_COMMAND_DEPTH) + '},"id":7.5}', 7.5),
    ('{"params":{"id":"inner","x":' + _nested(5000) + '}}', None),  # only a top-level id counts
    ('{"id":true,"x":' + _nested(5000) + '}', None),  # not a usable id
    ('[{"id":1},' + _nested(5000) + ']', None),
    ('{"id":"' + "x" * 2000 + '","x":' + _nested(3000) + '}', "x" * 2000),  # too long an id: echoed whole
    ('{"x":"\\"{[","id":"s\\"q","y":' + _nested(2000) + '}', 's"q'),  # brackets and quotes in strings
])
def test_r_d_4_too_deep_line_gets_line_too_deep_with_its_id(line, rid):
    bad = parse_command(line.encode())
    assert isinstance(bad, BadCommand) and bad.code == "LINE_TOO_DEEP", bad
    assert bad.id == rid and type(bad.id) is type(rid)


def test_r_d_4_depth_limit_is_exact():
    ok = parse_command(json.dumps({"id": 1, "command": "status", "params": {}}).encode())
    assert isinstance(ok, Command)
    # the line itself is depth 1, params 2: MAX_COMMAND_DEPTH - 2 more levels fit
    fits = '{"id":1,"command":"codex.respondInteraction","params":{"interactionKey":"k","dialogToken":"t",' \
           '"result":' + _nested(MAX_COMMAND_DEPTH - 2) + '}}'
    assert isinstance(parse_command(fits), Command)
    deeper = fits.replace(_nested(MAX_COMMAND_DEPTH - 2), _nested(MAX_COMMAND_DEPTH - 1))
    assert parse_command(deeper).code == "LINE_TOO_DEEP"


@pytest.mark.parametrize("command,params,path", [
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "timeout": 0}, "$.params.timeout"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "timeout": -5}, "$.params.timeout"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "timeout": 1e300}, "$.params.timeout"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "maxBytes": 0}, "$.params.maxBytes"),
    ("codex.readWorkspaceDiff", {"cwd": "/tmp", "maxBytes": 10 ** 30}, "$.params.maxBytes"),
    ("codex.generateTitle", {"channelId": "c", "message": "m", "timeout": 0}, "$.params.timeout"),
    ("codex.enhancePrompt", {"channelId": "c", "prompt": "p", "timeout": -1}, "$.params.timeout"),
    ("codex.generateCommitMessage", {"channelId": "c", "diff": "d", "timeout": 99999}, "$.params.timeout"),
    ("codex.respondInteractionError", {"interactionKey": "k", "dialogToken": "t",
                                       "error": {"code": 2 ** 70, "message": "m"}}, "$.params.error.code"),
    ("codex.listThreads", {"channelId": "c", "limit": 0}, "$.params.limit"),
    ("codex.readHistoryPage", {"channelId": "c", "threadId": "t", "limit": 10 ** 9}, "$.params.limit"),
    ("codex.listModels", {"channelId": "c", "maxPages": 0}, "$.params.maxPages"),
    ("codex.listModels", {"channelId": "c", "maxPages": "x"}, "$.params.maxPages"),
    ("codex.listSkills", {"channelId": "c", "cwds": "abc"}, "$.params.cwds"),
    ("codex.getMcpStatus", {"channelId": "c", "limit": -1}, "$.params.limit"),
    ("codex.readThread", {"channelId": "c", "threadId": "t", "display": "yes"}, "$.params.display"),
])
def test_r_d_4_out_of_range_numbers_are_invalid_params(command, params, path):
    bad = parse_command(json.dumps({"id": "r", "command": command, "params": params}).encode())
    assert isinstance(bad, BadCommand) and bad.code == "INVALID_PARAMS", bad
    assert bad.id == "r" and bad.details["path"] == path and path in bad.message


def test_r_d_4_in_range_numbers_pass():
    cmd = parse_command(json.dumps({"id": "r", "command": "codex.readWorkspaceDiff",
                                    "params": {"cwd": "/tmp", "timeout": 0.5, "maxBytes": 1}}).encode())
    assert isinstance(cmd, Command)
