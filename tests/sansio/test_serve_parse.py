"""``codexrt serve`` command parsing, replies and the wire schema — no I/O (R-D-1, R-D-4).

Every class of bad input gets an ``ok: false`` reply (``"id": null`` when no id could
be read) and never an exception; a hypothesis test throws arbitrary lines at the parser. The
shipped JSON Schema's command part is generated from the command Structs and checked to be
current; its checker (``jsonschema``) is checked to actually reject what it should (so the e2e
"every line fits the schema" check can fail).
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._serve._codec import (
    MAX_ID_LENGTH,
    BadCommand,
    Command,
    encode_line,
    parse_command,
    response_error,
    response_ok,
)
from codexrt._serve._commands import ALL_COMMANDS, COMMANDS, Lane
from codexrt._serve._schema import REGENERATE, SCHEMA_PATH, build_schema, load_schema, render_schema
from tests._support import schema_problem as _check

SCHEMA = load_schema()
DEFS = SCHEMA["$defs"]


def _line(obj) -> bytes:
    return json.dumps(obj).encode()


def _bad(line) -> BadCommand:
    out = parse_command(line)
    assert isinstance(out, BadCommand), out
    assert _check(out.reply(), "responseError") is None
    return out


# -- schema ---------------------------------------------------------------------------------


def test_schema_lists_every_command_with_params_and_result():
    assert set(DEFS["commandParams"]) == set(ALL_COMMANDS)
    assert set(DEFS["commandResult"]) == set(ALL_COMMANDS)
    assert set(DEFS["command"]["properties"]["command"]["enum"]) == set(ALL_COMMANDS)
    for name in ALL_COMMANDS:  # each names its own Struct's schema
        assert DEFS["commandParams"][name] == {"$ref": f"#/$defs/{COMMANDS[name].params.__name__}"}


def test_r_d_1_command_lanes_agree_with_the_feature_modules():
    """The COMMANDS table's lanes name exactly the commands the feature modules answer."""
    from codexrt._features._edits_live import EDIT_COMMANDS
    from codexrt._features._history_commands import HISTORY_COMMANDS, LEGACY_HISTORY_COMMANDS
    from codexrt._runtime._interactions import INTERACTION_COMMANDS

    def lane(which):
        return {name for name, spec in COMMANDS.items() if spec.lane is which}

    assert lane(Lane.EDIT) == EDIT_COMMANDS
    assert lane(Lane.INTERACTION) == INTERACTION_COMMANDS
    assert HISTORY_COMMANDS | LEGACY_HISTORY_COMMANDS <= lane(Lane.READ)
    # every read but the count (answered by the history module alone) names its native method
    assert {name for name in lane(Lane.READ) if not COMMANDS[name].method} == {"codex.countThreadMessages"}


def test_schema_checked_in_is_generated_from_the_command_structs():
    """The shipped schema's command part is generated (``codexrt/_serve/_schema.py``); a Struct
    changed without regenerating fails here, naming the command to run."""
    text = SCHEMA_PATH.read_text(encoding="utf-8")
    fresh = render_schema(build_schema(json.loads(text)))
    assert fresh == text, f"{SCHEMA_PATH.name} is stale: run `{REGENERATE}` and commit the result"


def test_schema_generation_is_not_a_copy():
    """The generator really derives the params from the Structs: dropping them from the file and
    regenerating restores exactly the checked-in text."""
    current = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    stripped = json.loads(json.dumps(current))
    for name in stripped["x-generated"]["defs"]:
        del stripped["$defs"][name]
    stripped["$defs"]["commandParams"] = {}
    stripped["$defs"]["command"]["properties"]["command"] = {"enum": []}
    assert render_schema(build_schema(stripped)) == render_schema(current)


def test_schema_and_decoder_agree_on_examples():
    """What the Structs accept the generated schema accepts, and what they refuse it refuses."""
    good = [("codex.send", {"channelId": "c", "message": "hi", "settings": {"sandbox": "read-only"},
                            "context": {"ide": {"kind": "application", "value": "v"}}}),
            ("codex.send", {"channelId": "c", "message": "hi", "context": {"activeFile": {"path": "a.py"}}}),
            ("codex.readWorkspaceDiff", {"cwd": "/w", "timeout": 3600}),
            ("codex.listThreads", {"channelId": "c", "limit": 2, "cursor": "x"}),
            ("codex.undoFile", {"channelId": "c", "threadId": "t", "path": "a"}),
            ("codex.configureLaunch", {"accessMode": "managed", "apiKey": "k",
                                       "provider": {"id": "p", "baseUrl": "http://127.0.0.1", "envKey": "K"}})]
    bad = [("codex.send", {"channelId": "", "message": "hi"}),
           ("codex.readWorkspaceDiff", {"cwd": "/w", "timeout": 0}),
           ("codex.readWorkspaceDiff", {"cwd": "/w", "timeout": 3601}),
           ("codex.listThreads", {"channelId": "c", "limit": 0}),
           ("codex.undoFile", {"channelId": "c", "threadId": "t", "path": "a",
                               "key": {"turnId": "u", "itemId": "i", "path": "a"}}),
           ("codex.undoFile", {"channelId": "c", "threadId": "t"}),
           ("codex.configureLaunch", {"accessMode": "managed", "provider": {"id": "a b", "baseUrl": "u", "envKey": "K"}})]
    for name, params in good:
        assert isinstance(parse_command(_line({"id": 1, "command": name, "params": params})), Command), params
        assert _check(params, f"commandParams/{name}") is None, params
    for name, params in bad:
        assert isinstance(parse_command(_line({"id": 1, "command": name, "params": params})), BadCommand), params
        assert _check(params, f"commandParams/{name}") is not None, params


def test_schema_is_shipped_as_package_data():
    import importlib.resources

    text = importlib.resources.files("codexrt._serve").joinpath("daemon-protocol.schema.json").read_text()
    assert json.loads(text)["x-protocolVersion"] == 1


def test_validator_rejects_what_it_should():
    ok = response_ok(1, {"x": 1})
    assert _check(ok, "outputLine") is None
    assert _check({**ok, "extra": 1}, "outputLine") is not None
    assert _check({**ok, "id": None}, "outputLine") is not None  # ok replies always have an id
    assert _check({**ok, "ok": 1}, "outputLine") is not None  # 1 is not true
    assert _check(response_error(None, "BAD_THING", "m"), "outputLine") is None
    assert _check(response_error(None, "lower", "m"), "outputLine") is not None
    ev = {"type": "daemon", "event": "codex_event", "provider": "codex", "runtimeGeneration": 1,
          "channelId": "c", "sessionEpoch": "e", "clientOperationId": None, "rootThreadId": None,
          "threadId": None, "turnId": None, "itemId": None, "kind": "turnStarted", "payload": {}}
    assert _check(ev, "outputLine") is None
    missing = dict(ev)
    del missing["sessionEpoch"]
    assert _check(missing, "outputLine") is not None
    assert "sessionEpoch" in _check(missing, "event")
    assert _check({**ev, "payload": []}, "outputLine") is not None


# -- good commands --------------------------------------------------------------------------


@pytest.mark.parametrize("rid", ["a-1", 7, -3, 2**70, 1.5, ""])
def test_r_d_1_ids_keep_their_type(rid):
    cmd = parse_command(_line({"id": rid, "command": "status"}))
    assert isinstance(cmd, Command)
    assert cmd.id == rid and type(cmd.id) is type(rid)
    assert json.loads(encode_line(response_ok(cmd.id, {})))["id"] == rid


def test_r_d_1_send_params():
    cmd = parse_command(_line({"id": "s1", "command": "codex.send", "params": {
        "channelId": "c", "threadId": None, "clientMessageId": "m1", "message": "hi", "images": ["/a.png"],
        "cwd": "/w", "settings": {"model": "m", "sandbox": "workspace-write", "approvalPolicy": "untrusted",
                                  "collaborationMode": {"mode": "plan", "settings": {}}},
        "context": {"ide_context": {"kind": "application", "value": "Active file: a.py"}}}}))
    assert isinstance(cmd, Command) and cmd.name == "codex.send" and cmd.params["message"] == "hi"


def test_status_params_are_optional():
    assert isinstance(parse_command(b'{"id":1,"command":"status"}'), Command)
    assert isinstance(parse_command(b'  {"id":1,"command":"status","params":{}}\r'), Command)


def test_read_only_commands_pass_native_params_through():
    cmd = parse_command(_line({"id": 1, "command": "codex.listThreads",
                               "params": {"channelId": "c", "limit": 2, "cursor": "x"}}))
    assert isinstance(cmd, Command) and cmd.params["limit"] == 2


# -- bad input, one test per class (R-D-4) ------------------------------------------------


@pytest.mark.parametrize("line", [b"not json", b"{", b'{"command":"status"', b"\xff\xfe", b'"\\ud800"',
                                  b'{"id":1e999,"command":"status"}', b'{"params":{"id":3},"x":1e999}',
                                  b'{"id":12'])  # a number at the cut may be cut short: not read
def test_r_d_4_not_json_without_a_readable_id_gets_null_id(line):
    bad = _bad(line)
    assert bad.id is None and bad.code == "INVALID_JSON"


@pytest.mark.parametrize("line,rid", [
    (b'{"id":"t1","command":"codex.readWorkspaceDiff","params":{"cwd":"/tmp","timeout":1e999}}', "t1"),  # issue 31
    (b'{"command":"status","params":{"x":-1e999},"id":7}', 7),
    (b'{"id":1,"command":"status"', 1),  # cut short
    (b'{"id":"ab"', "ab"),  # cut right after a whole string id
    (b'{"id":"u","command":"status","params":{"x":"\xff"}}', "u"),  # invalid UTF-8 elsewhere
    (b'{"id":"s","command":"status","params":{"x":"\\ud800"}}', "s"),  # a lone surrogate escape
    (b'{"id":2.5,"command":"codex.send","params":{"channelId":"c","message":"hi","x":1e400}}', 2.5),
])
def test_r_d_4_a_line_that_does_not_decode_keeps_its_id(line, rid):
    """R-D-4, issue 31: a host waits on the id of every line it sent; a line that holds one
    at its top level is answered with it, even when the rest does not decode."""
    bad = _bad(line)
    assert bad.code == "INVALID_JSON" and bad.id == rid and type(bad.id) is type(rid)
    assert _check(bad.reply(), "responseError") is None


def test_r_d_4_an_over_long_id_is_refused_and_echoed_whole():
    """An id over MAX_ID_LENGTH is not accepted, but the refusal carries it whole: the host
    waiting on it gets its answer (decided in issue 31; bounded by the line limit)."""
    rid = "x" * (MAX_ID_LENGTH + 1)
    for line in (_line({"id": rid, "command": "status"}), _line({"id": rid, "command": "status", "params": {"n": 1}})
                 .replace(b'"n":1', b'"n":1e999')):
        bad = _bad(line)
        assert bad.id == rid
        assert _check(bad.reply(), "responseError") is None
    bad = _bad(_line({"id": rid, "command": "status"}))
    assert bad.code == "INVALID_REQUEST" and bad.details == {"idLength": MAX_ID_LENGTH + 1,
                                                             "maxIdLength": MAX_ID_LENGTH}
    assert isinstance(parse_command(_line({"id": "x" * MAX_ID_LENGTH, "command": "status"})), Command)


@pytest.mark.parametrize("line", [b"[]", b"42", b'"status"', b"null", b'[{"id":1,"command":"status"}]'])
def test_r_d_4_not_an_object(line):
    bad = _bad(line)
    assert bad.id is None and bad.code == "INVALID_REQUEST"


@pytest.mark.parametrize("obj", [
    {"command": "status"},  # no id: not a notification here
    {"id": None, "command": "status"},
    {"id": True, "command": "status"},
    {"id": {"a": 1}, "command": "status"},
    {"id": [1], "command": "status"},
])
def test_r_d_4_missing_or_unusable_id_gets_null_id(obj):
    bad = _bad(_line(obj))
    assert bad.id is None and bad.code == "INVALID_REQUEST"
    assert "id" in bad.message


@pytest.mark.parametrize("obj", [{"id": 3}, {"id": 3, "command": 5}, {"id": 3, "command": None}])
def test_r_d_4_missing_command_keeps_the_id(obj):
    bad = _bad(_line(obj))
    assert bad.id == 3 and bad.code == "INVALID_REQUEST"


def test_r_d_4_unknown_top_level_field():
    bad = _bad(_line({"id": "a", "command": "status", "jsonrpc": "2.0"}))
    assert bad.id == "a" and bad.code == "INVALID_REQUEST" and bad.details == {"fields": ["jsonrpc"]}


def test_r_d_4_unknown_command():
    bad = _bad(_line({"id": "a", "command": "codex.fly", "params": {}}))
    assert bad.id == "a" and bad.code == "UNKNOWN_COMMAND"
    assert "codex.send" in bad.details["known"]


@pytest.mark.parametrize("params,fragment", [
    ([], "params must be an object"),
    ("x", "params must be an object"),
    ({"message": "hi"}, "missing required field `channelId` - at $.params"),
    ({"channelId": "c"}, "missing required field `message` - at $.params"),
    ({"channelId": "", "message": "hi"}, "Expected `str` of length >= 1 - at $.params.channelId"),
    ({"channelId": 5, "message": "hi"}, "Expected `str`, got `int` - at $.params.channelId"),
    ({"channelId": "c", "message": 5}, "Expected `str`, got `int` - at $.params.message"),
    ({"channelId": "c", "message": "hi", "threadId": 7}, "Expected `str | null`, got `int` - at $.params.threadId"),
    ({"channelId": "c", "message": "hi", "images": "a.png"}, "Expected `array`, got `str` - at $.params.images"),
    ({"channelId": "c", "message": "hi", "images": [1]}, "Expected `str`, got `int` - at $.params.images[0]"),
    ({"channelId": "c", "message": "hi", "settings": {"sandbox": "yolo"}},
     "Invalid enum value 'yolo' - at $.params.settings.sandbox"),
    ({"channelId": "c", "message": "hi", "settings": {"colour": "red"}},
     "unknown field `colour` - at $.params.settings"),
    ({"channelId": "c", "message": "hi", "context": {"k": {"kind": "application"}}},
     "missing required field `value` - at $.params.context[...]"),
    ({"channelId": "c", "message": "hi", "mesage": "typo"}, "unknown field `mesage` - at $.params"),
])
def test_r_d_4_missing_or_wrong_typed_params(params, fragment):
    bad = _bad(_line({"id": 9, "command": "codex.send", "params": params}))
    assert bad.id == 9 and bad.code == "INVALID_PARAMS"
    assert fragment in bad.message
    if " - at " in fragment:  # the reply says where, in the message and in details.path
        assert bad.message.startswith("codex.send: ") and bad.details["path"] == fragment.rsplit(" - at ", 1)[1]


@pytest.mark.parametrize("command,params", [
    ("codex.respondInteraction", {"interactionKey": "k", "dialogToken": "t"}),  # result missing
    ("codex.respondInteractionError", {"interactionKey": "k", "dialogToken": "t", "error": {"code": "x", "message": "m"}}),
    ("codex.abortTurn", {"channelId": "c", "clientOperationId": 3}),
    ("codex.readHistoryPage", {"channelId": "c", "threadId": "t", "scope": "pages"}),
    ("codex.compact", {"channelId": "c"}),
    ("codex.updateSettings", {"channelId": "c", "settings": {"approvalPolicy": "sometimes"}}),
])
def test_r_d_4_bad_params_of_other_commands(command, params):
    bad = _bad(_line({"id": "z", "command": command, "params": params}))
    assert bad.id == "z" and bad.code == "INVALID_PARAMS"


# -- arbitrary lines ------------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_command_like = st.fixed_dictionaries(
    {},
    optional={
        "id": _json_values,
        "command": st.sampled_from(sorted(ALL_COMMANDS)) | st.text(max_size=15),
        "params": st.dictionaries(st.sampled_from(["channelId", "threadId", "message", "settings", "x"]),
                                  _json_values, max_size=4) | _json_values,
    },
)


def _assert_well_formed(out, source):
    if isinstance(out, Command):
        assert out.name in ALL_COMMANDS
        assert isinstance(source, dict) and source["id"] == out.id
        return
    reply = out.reply()
    assert _check(reply, "responseError") is None, reply
    json.loads(encode_line(reply))  # always encodable
    echoable = (isinstance(source, dict) and "id" in source and not isinstance(source["id"], bool)
                and isinstance(source["id"], (str, int, float)))
    if not echoable:
        assert out.id is None


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_r_d_4_arbitrary_bytes_never_raise(data):
    out = parse_command(data)
    try:
        source = msgspec.json.decode(data)
    except msgspec.MsgspecError:
        source = None
        assert isinstance(out, BadCommand) and (out.id is None or b'"id"' in data)  # recovered only from an id
    _assert_well_formed(out, source)


@settings(max_examples=200, deadline=None)
@given(_command_like | _json_values)
def test_r_d_4_arbitrary_json_lines_never_raise(value):
    out = parse_command(json.dumps(value).encode())
    _assert_well_formed(out, value)
    if isinstance(out, BadCommand) and out.id is not None:
        assert out.id == value["id"]


@pytest.mark.parametrize("chunk", [7, 64, 10_000])
def test_r_d_4_a_line_too_long_keeps_the_id_it_starts_with(chunk):
    """Issue 31: a command over ``--max-line-bytes`` is discarded unread, but its first bytes
    are kept, so the ``LINE_TOO_LONG`` refusal carries its id when the line names it first —
    whether the line came in one read or many (every path of the line buffer)."""
    from codexrt._sansio._framing import LineBuffer, OversizedLine
    from codexrt._serve._codec import line_head_id

    big = b'{"id":"big-1","command":"codex.send","params":{"channelId":"c","message":"' + b"x" * 3000 + b'"}}'
    late = b'{"command":"codex.send","params":{"message":"' + b"x" * 5000 + b'"},"id":7}'
    data = big + b"\n" + late + b"\n" + b'{"id":2,"command":"status"}\n'
    buf = LineBuffer(1000)
    frames = [f for i in range(0, len(data), chunk) for f in buf.feed(data[i:i + chunk])]
    assert [type(f) for f in frames] == [OversizedLine, OversizedLine, bytes]
    assert [f.size for f in frames[:2]] == [len(big), len(late)]
    assert line_head_id(frames[0].head) == "big-1"
    assert line_head_id(frames[1].head) is None  # its id comes after the cut: not readable
    assert line_head_id(b"") is None
