"""Host-supplied strings are bounded at the edge (issue 35, R-D-4): what ``serve`` would keep in
its tables (thread, operation, session and channel ids, edit keys, paths, secrets) is refused by
length when it is decoded, before any table sees it — 400 ``codex.compact`` with 1 MB thread
ids cannot hold 400 MB because none of them is accepted. Names that reach an environment or an
HTTP header must be names to their last character (``"FOO\\n"`` is not one). Every refusal is an
``INVALID_PARAMS`` reply that fits the shipped schema, and the schema says the same.
"""

from __future__ import annotations

import json

import pytest

from codexrt._runtime._launch import AccessMode, LaunchConfig
from codexrt._sansio._errors import ConfigError
from codexrt._serve._codec import BadCommand, Command, parse_command
from codexrt._serve._commands import MAX_ID_CHARS, MAX_PATH_CHARS
from tests._support import schema_problem

MB = "t" * (1 << 20)


def _parse(command: str, params: dict) -> BadCommand | Command:
    out = parse_command(json.dumps({"id": 7, "command": command, "params": params}).encode())
    if isinstance(out, BadCommand):
        assert schema_problem(out.reply(), "responseError") is None
    return out


def _refused(command: str, params: dict) -> BadCommand:
    out = _parse(command, params)
    assert isinstance(out, BadCommand), (command, {k: str(v)[:40] for k, v in params.items()})
    assert out.code == "INVALID_PARAMS" and out.id == 7
    assert schema_problem(params, f"commandParams/{command}") is not None  # the schema says the same
    return out


@pytest.mark.parametrize("command, params", [
    ("codex.compact", {"channelId": "c", "threadId": MB}),
    ("codex.send", {"channelId": "c", "message": "hi", "threadId": MB}),
    ("codex.send", {"channelId": "c", "message": "hi", "clientMessageId": MB}),
    ("codex.abortTurn", {"channelId": "c", "clientOperationId": MB}),
    ("codex.releaseThread", {"channelId": "c", "threadId": MB}),
    ("codex.listEdits", {"channelId": "c", "threadId": MB}),
    ("codex.readThread", {"channelId": MB, "threadId": "t"}),
    ("codex.undoFile", {"channelId": "c", "threadId": "t", "key": {"turnId": MB, "itemId": "i", "path": "/a"}}),
    ("codex.openReview", {"channelId": "c", "threadId": "t", "path": "p" * (MAX_PATH_CHARS + 1)}),
    ("codex.acceptReview", {"channelId": "c", "threadId": "t", "ticketId": MB}),
    ("codex.respondInteraction", {"interactionKey": MB, "dialogToken": "d", "result": {}}),
    ("codex.readWorkspaceDiff", {"cwd": "/w", "sessionId": MB}),
])
def test_issue_35_huge_ids_are_refused_at_the_edge(command: str, params: dict) -> None:
    bad = _refused(command, params)
    assert len(json.dumps(bad.reply())) < 4096  # the refusal does not echo the megabyte


def test_issue_35_ids_up_to_the_limit_are_accepted() -> None:
    ok = _parse("codex.compact", {"channelId": "c" * MAX_ID_CHARS, "threadId": "t" * MAX_ID_CHARS})
    assert isinstance(ok, Command)


def test_issue_35_four_hundred_compacts_with_1_mb_thread_ids_keep_nothing() -> None:
    """The issue's case: every one is refused when decoded, so no table ever holds one."""
    outs = [_parse("codex.compact", {"channelId": "c", "threadId": f"{i}-" + MB}) for i in range(400)]
    assert all(isinstance(o, BadCommand) and o.code == "INVALID_PARAMS" for o in outs)


def test_issue_35_open_review_with_no_keys_and_a_huge_codex_bin_are_validation_errors() -> None:
    _refused("codex.openReview", {"channelId": "c", "threadId": "t", "keys": []})
    _refused("codex.configureLaunch", {"accessMode": "cli_login", "codexBin": "x" * 70_000})
    _refused("codex.configureLaunch", {"accessMode": "cli_login", "codexHome": "x" * 70_000})
    _refused("codex.configureLaunch", {"accessMode": "managed", "apiKey": "k" * (16 * 1024 + 1)})


@pytest.mark.parametrize("provider", [
    {"id": "p", "baseUrl": "http://127.0.0.1:9", "envKey": "FOO\n"},
    {"id": "p\n", "baseUrl": "http://127.0.0.1:9", "envKey": "FOO"},
    {"id": "p", "baseUrl": "http://127.0.0.1:9", "envKey": "FOO", "headers": {"X-A\n": "v"}},
    {"id": "p", "baseUrl": "http://127.0.0.1:9", "envKey": "FOO", "headers": {"X-A": "v" * (16 * 1024 + 1)}},
])
def test_issue_35_env_and_header_names_with_a_trailing_newline_are_refused(provider: dict) -> None:
    _refused("codex.configureLaunch", {"accessMode": "managed", "apiKey": "k" * 20, "provider": provider})


def test_issue_35_launch_config_refuses_a_trailing_newline_in_names() -> None:
    base = dict(access=AccessMode.MANAGED, provider="p", endpoint="http://127.0.0.1:9", credential="k" * 20)
    LaunchConfig(**base, env_key="FOO")  # the control: a plain name is fine
    with pytest.raises(ConfigError):
        LaunchConfig(**base, env_key="FOO\n")
    with pytest.raises(ConfigError):
        LaunchConfig(**base, env_key="FOO", headers={"X-A\n": "v"})
    with pytest.raises(ConfigError):
        LaunchConfig(**{**base, "provider": "p\n"}, env_key="FOO")


@pytest.mark.parametrize("value", ["/tmp/" + "a" * 300, "x" * 4000])
def test_issue_35_an_unusable_override_path_is_a_typed_error(value: str) -> None:
    """A ``codexBin`` within the length limit but too long for the filesystem (a 300-character
    name) was an ``OSError`` out of discovery (``INTERNAL_ERROR`` in serve); it is the override's
    own typed error."""
    from codexrt._io._discovery import discover_cli
    from codexrt._sansio._errors import CliUnavailable

    with pytest.raises(CliUnavailable) as info:
        discover_cli(explicit=value, env={})
    assert info.value.code == "CODEX_CLI_OVERRIDE_INVALID"
