"""The hand-written wire models (``codexrt/_sansio/_models.py``) against the pinned schema and a
recorded real session.

* every field of every model exists (by its wire name) in the checked-in 0.169.0 schema definition
  the model names — a misspelt or mis-cased field fails here;
* every method in the tables exists in the schema, and each notification/server-request model fits
  the params definition the schema gives *for that method*;
* every line of ``tests/data/real-session-0.169.0.jsonl`` (verbatim stdout of the real server)
  decodes: notifications and server requests by method, responses by the method encoded in the
  recorder's string ids (``"<method>#<n>"``), items without a single :class:`UnknownItem`;
* tolerance: unknown fields ignored, unknown item types kept as :class:`UnknownItem`, 0.147-style
  payloads (fields missing) decode, request ids keep their JSON type (R-WIRE-2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from codexrt._sansio import _models as m
from tests._support import pinned_schema_dir

DATA = Path(__file__).resolve().parents[1] / "data"
BUNDLE = json.loads((pinned_schema_dir() / "codex_app_server_protocol.schemas.json").read_text())
DEFS: dict[str, Any] = {k: v for k, v in BUNDLE["definitions"].items() if k != "v2"}
DEFS.update({f"v2/{k}": v for k, v in BUNDLE["definitions"]["v2"].items()})
SESSION = DATA / "real-session-0.169.0.jsonl"


def models() -> list[type[msgspec.Struct]]:
    return [v for v in vars(m).values()
            if isinstance(v, type) and issubclass(v, msgspec.Struct) and getattr(v, "__schema__", "")
            and not v.__name__.startswith("_")]


def wire_names(cls: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(cls)}


def schema_props(defn: dict[str, Any]) -> set[str]:
    """Property names of a definition, including those of its oneOf/anyOf variants."""
    props = set(defn.get("properties", {}))
    for key in ("oneOf", "anyOf"):
        for var in defn.get(key, []):
            if isinstance(var, dict):
                props |= schema_props(DEFS[var["$ref"].split("#/definitions/")[1]] if "$ref" in var else var)
    return props


def item_variant(tag: str) -> dict[str, Any]:
    for var in DEFS["v2/ThreadItem"]["oneOf"]:
        if var["properties"]["type"]["enum"] == [tag]:
            return var
    raise AssertionError(f"no ThreadItem variant {tag!r} in the schema")


def methods_of(union: str) -> dict[str, str]:
    """method → params definition key, from ServerNotification / ServerRequest / ClientRequest."""
    out = {}
    for var in DEFS[union]["oneOf"]:
        method = var["properties"]["method"]["enum"][0]
        ref = var["properties"].get("params", {}).get("$ref", "")
        out[method] = ref.split("#/definitions/")[-1] if ref else ""
    return out


def allowed_fields(cls: type[msgspec.Struct]) -> set[str]:
    if issubclass(cls, m._Item):
        tag = cls.__struct_config__.tag
        # the properties common to every item, plus those of this variant only
        return set(DEFS["v2/ThreadItem"]["properties"]) | set(item_variant(tag)["properties"])
    assert cls.__schema__ in DEFS, f"{cls.__name__}.__schema__ = {cls.__schema__!r} is not a schema definition"
    return schema_props(DEFS[cls.__schema__])


@pytest.mark.parametrize("cls", models(), ids=lambda c: c.__name__)
def test_model_fields_exist_in_the_schema(cls: type[msgspec.Struct]) -> None:
    missing = wire_names(cls) - allowed_fields(cls)
    assert not missing, f"{cls.__name__}: not in schema {cls.__schema__}: {sorted(missing)}"
    assert cls.__struct_config__.forbid_unknown_fields is False


def test_field_check_catches_a_misspelling() -> None:
    class Bad(m._Wire):
        __schema__ = "v2/Turn"
        id: str
        item_view: str | None = None  # the schema says itemsView

    assert wire_names(Bad) - allowed_fields(Bad) == {"itemView"}


def test_every_item_tag_is_a_schema_variant() -> None:
    for tag in m.ITEM_TYPES:
        item_variant(tag)
    assert {"userMessage", "agentMessage", "reasoning", "commandExecution", "fileChange"} <= m.ITEM_TYPES.keys()


@pytest.mark.parametrize(("table", "union"), [(m.NOTIFICATION_TYPES, "ServerNotification"),
                                              (m.SERVER_REQUEST_TYPES, "ServerRequest")])
def test_tables_fit_the_schema_per_method(table: dict[str, type], union: str) -> None:
    schema = methods_of(union)
    for method, cls in table.items():
        assert method in schema, f"{method} is not a {union} method"
        extra = wire_names(cls) - schema_props(DEFS[schema[method]])
        assert not extra, f"{method}: {cls.__name__} fields {sorted(extra)} not in {schema[method]}"


def test_client_request_methods_exist() -> None:
    schema = methods_of("ClientRequest")
    assert not (m.CLIENT_REQUEST_METHODS - schema.keys())
    assert not (m.RESULT_TYPES.keys() - schema.keys())


# -- the recorded real session -------------------------------------------------------------------


class _Env(msgspec.Struct):
    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    params: msgspec.Raw = msgspec.Raw()
    result: msgspec.Raw = msgspec.Raw()
    error: Any = msgspec.UNSET


def _force_items(obj: Any) -> list[Any]:
    """Decode every Raw-backed item inside a decoded payload."""
    items: list[Any] = []
    if isinstance(obj, (m.ItemStartedParams, m.ItemCompletedParams)):
        items.append(obj.item)
    for turn in ([obj.turn] if hasattr(obj, "turn") else []) + (getattr(getattr(obj, "thread", None), "turns", [])):
        items += turn.items
    if isinstance(obj, m.ThreadTurnsListResult):
        for turn in obj.data:
            items += turn.items
    if isinstance(obj, m.ThreadItemsListResult):
        items += [e.item for e in obj.data]
    return items


def test_every_line_of_the_real_session_decodes() -> None:
    lines = SESSION.read_bytes().splitlines()
    assert len(lines) > 100
    notif_methods = methods_of("ServerNotification")
    seen_methods: set[str] = set()
    items: list[Any] = []
    results = 0
    for raw in lines:
        env = msgspec.json.decode(raw, type=_Env)
        assert "jsonrpc" not in json.loads(raw)
        if env.method is not msgspec.UNSET and env.id is not msgspec.UNSET:  # server request
            params = m.decode_server_request_params(env.method, env.params)
            assert params is not None, f"unmodelled server request {env.method}"
            seen_methods.add(env.method)
        elif env.method is not msgspec.UNSET:  # notification
            assert env.method in notif_methods, f"{env.method} is not in the schema"
            params = m.decode_notification_params(env.method, env.params)
            if params is not None:
                seen_methods.add(env.method)
                items += _force_items(params)
        else:  # response to a recorder request "<method>#<n>"
            assert env.error is msgspec.UNSET, raw
            method = env.id.split("#")[0]
            result = m.decode_result(method, env.result)
            if result is not None:
                results += 1
                items += _force_items(result)
    must = {"turn/started", "turn/completed", "item/started", "item/completed", "item/agentMessage/delta",
            "item/commandExecution/outputDelta", "item/reasoning/summaryTextDelta", "thread/started",
            "thread/status/changed", "thread/settings/updated", "serverRequest/resolved", "error",
            "item/commandExecution/requestApproval", "item/fileChange/requestApproval"}
    assert must <= seen_methods, f"recording lacks {sorted(must - seen_methods)}"
    assert results >= 10
    unknown = [i for i in items if isinstance(i, m.UnknownItem)]
    assert not unknown, unknown[:3]
    kinds = {type(i).__name__ for i in items}
    assert {"UserMessageItem", "AgentMessageItem", "ReasoningItem", "CommandExecutionItem", "FileChangeItem"} <= kinds


def test_recorded_payloads_carry_the_expected_values() -> None:
    by_method: dict[str, list[Any]] = {}
    for raw in SESSION.read_bytes().splitlines():
        env = msgspec.json.decode(raw, type=_Env)
        if env.method is not msgspec.UNSET:
            dec = (m.decode_server_request_params if env.id is not msgspec.UNSET else m.decode_notification_params)
            by_method.setdefault(env.method, []).append(dec(env.method, env.params))
    statuses = [p.turn.status for p in by_method["turn/completed"]]
    assert {"completed", "interrupted", "failed"} <= set(statuses)
    failed = [p.turn for p in by_method["turn/completed"] if p.turn.status == "failed"][0]
    assert failed.error is not None and failed.error.codex_error_info == "other"
    assert by_method["error"][0].error.message.startswith("stream disconnected")
    first_user = [p.item for p in by_method["item/completed"] if isinstance(p.item, m.UserMessageItem)][0]
    assert first_user.client_id == "client-msg-1" and first_user.text.startswith("Say hello")
    fc = [p.item for p in by_method["item/completed"] if isinstance(p.item, m.FileChangeItem)][0]
    assert fc.changes[0].kind.type == "add" and fc.changes[0].path.endswith("hello.txt")
    cmd = by_method["item/commandExecution/requestApproval"][0]
    assert cmd.kind == "command" and "accept" in cmd.available_decisions
    settings = by_method["thread/settings/updated"][0].thread_settings
    assert settings.model == "mock-model-b" and settings.approval_policy == "on-request"
    assert all(isinstance(p.request_id, int) for p in by_method["serverRequest/resolved"])


# -- tolerance ---------------------------------------------------------------------------------------


def test_unknown_item_type_decodes_to_unknown_item() -> None:
    it = m.decode_item(b'{"type":"hologram","id":"x1","beam":3}')
    assert isinstance(it, m.UnknownItem)
    assert (it.type, it.id, it.data["beam"], it.decode_error) == ("hologram", "x1", 3, None)
    turn = msgspec.json.decode(b'{"id":"t","status":"weird","items":[{"type":"hologram","id":"a"},'
                               b'{"type":"agentMessage","id":"b","text":"hi","brandNew":1}]}', type=m.Turn)
    assert turn.status == "weird"
    a, b = turn.items
    assert isinstance(a, m.UnknownItem) and isinstance(b, m.AgentMessageItem) and b.text == "hi"


def test_known_item_with_a_bad_field_is_kept_visible() -> None:
    it = m.decode_item({"type": "agentMessage", "id": "b", "text": 5})
    assert isinstance(it, m.UnknownItem) and it.type == "agentMessage" and it.decode_error


def test_old_server_payloads_decode() -> None:
    # 0.147.0: no rootTurnId/itemsView, no TurnError.misalignment, no approval `kind`, no Thread.model
    t = msgspec.json.decode(b'{"id":"t","items":[],"status":"failed","error":{"message":"boom",'
                            b'"codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":502}}}}', type=m.Turn)
    assert t.error.codex_error_info == {"httpConnectionFailed": {"httpStatusCode": 502}} and t.items_view is None
    p = m.decode_server_request_params("item/commandExecution/requestApproval",
                                       b'{"threadId":"a","turnId":"b","itemId":"c","command":"ls"}')
    assert p.kind is None and p.command == "ls"
    th = msgspec.json.decode(b'{"id":"th","turns":[],"status":{"type":"idle"}}', type=m.Thread)
    assert th.model is None and th.status.type == "idle"


def test_request_id_keeps_its_json_type() -> None:
    a = m.decode_notification_params("serverRequest/resolved", b'{"threadId":"t","requestId":3}')
    b = m.decode_notification_params("serverRequest/resolved", b'{"threadId":"t","requestId":"3"}')
    assert a.request_id == 3 and b.request_id == "3" and a.request_id != b.request_id


def test_unmodelled_methods_pass_through_as_none() -> None:
    assert m.decode_notification_params("thread/goal/cleared", b"{}") is None
    assert m.decode_server_request_params("currentTime/read", b"{}") is None
    assert m.decode_result("model/list", b"{}") is None


def test_missing_identity_is_an_error() -> None:
    with pytest.raises(msgspec.ValidationError, match="threadId"):
        m.decode_notification_params("turn/started", b'{"turn":{"id":"t","status":"inProgress"}}')


def test_wire_names_are_camel_case_except_where_the_schema_says_snake() -> None:
    enc = json.loads(msgspec.json.encode(m.FileUpdateChange(path="p", kind=m.PatchChangeKind(type="update",
                                                                                              move_path="q"))))
    assert enc == {"path": "p", "kind": {"type": "update", "move_path": "q"}, "diff": ""}
    enc = json.loads(msgspec.json.encode(m.ItemDeltaParams(thread_id="a", turn_id="b", item_id="c", delta="d")))
    assert set(enc) == {"threadId", "turnId", "itemId", "delta"}


def test_typed_results_at_the_wire_fit_or_say_where() -> None:
    """``Connection.call(..., typed=True)`` decodes through ``decode_typed_result`` (R-H-7's count
    reads ``thread/read`` this way): a fitting answer is the model, a misfit a
    ``RemoteProtocolError`` naming the path, an unmodelled method a ``LocalProtocolError``."""
    from codexrt._sansio._errors import LocalProtocolError, RemoteProtocolError

    res = m.decode_typed_result("thread/read", b'{"thread":{"id":"t","updatedAt":7,"status":{"type":"active"}}}')
    assert (res.thread.id, res.thread.updated_at, res.thread.status.type) == ("t", 7, "active")
    for bad, where in ((b'{"thread":{"id":"t","status":"active"}}', "$.thread.status"),
                       (b'{"readState":null}', "thread"), (b"", "")):
        with pytest.raises(RemoteProtocolError, match="thread/read answered with an unexpected shape") as info:
            m.decode_typed_result("thread/read", bad)
        assert where in info.value.message and info.value.details == {"method": "thread/read"}
    with pytest.raises(LocalProtocolError):
        m.decode_typed_result("model/list", b"{}")
