"""Privacy index and masking (R-PRIV-1, R-PRIV-2, R-PRIV-3): records, legacy file, corruption,
atomic writes under SIGKILL, and what masking may and may not touch."""

from __future__ import annotations

import json
import os
import stat

import pytest

from codexrt._runtime._interactions import PrivacyStore
from codexrt._sansio._privacy import (
    MASK,
    Masker,
    PrivacyRecord,
    QuestionFlag,
    home_fingerprint,
    legacy_file_name,
    load_index,
    marker_file_name,
    record_file_name,
    record_for_elicitation,
    record_for_user_input,
)
from codexrt._sansio._projection import (
    AssistantMessage,
    CommandExecution,
    ContentBlock,
    DynamicToolCall,
    GenericRecord,
    McpToolCall,
    Reasoning,
    UserMessage,
)

FP = "0123456789abcdef"
PARAMS = {"threadId": "th", "turnId": "tu", "itemId": "call_1", "isBlocking": True,
          "questions": [{"id": "user", "header": "User", "question": "Login name?"},
                        {"id": "pw", "header": "Password", "question": "Password?", "isSecret": True}]}


def _rec(**kw) -> PrivacyRecord:
    return record_for_user_input({**PARAMS, **kw}, record_id="r1", scope=FP, host="ch", created_ms=1)


def _answers_block(**answers) -> ContentBlock:
    return ContentBlock("text", json.dumps({"answers": {k: {"answers": [v]} for k, v in answers.items()}}))


def _call(call_id="call_1", thread="th", **answers) -> DynamicToolCall:
    return DynamicToolCall(id=call_id, thread_id=thread, turn_id="tu", status="completed", tool="request_user_input",
                           arguments={"questions": [{"id": "pw", "question": "Password?"}]},
                           content=(_answers_block(**answers),))


def _shown(record) -> dict:
    return json.loads(record.content[0].text)["answers"]


def test_r_priv_1_records_hold_identities_and_flags_only():
    r = _rec()
    doc = json.dumps(r.to_json())
    assert r.secret_ids() == {"pw"} and r.item_id == r.call_id == "call_1"
    for forbidden in ("Login name", "Password?", "Password"):  # no question text or header
        assert forbidden not in doc
    assert PrivacyRecord.from_json(json.loads(doc)) == r
    e = record_for_elicitation({"threadId": "th", "turnId": None}, [("port", True)], record_id="r2", scope=FP,
                               host=None, created_ms=2)
    assert e.item_id is None and e.call_id is None and e.turn_id is None  # the RPC id is not an item id


def test_fingerprint_is_stable_and_scoped():
    assert home_fingerprint("/home/a/.codex") == home_fingerprint("/home/a/.codex/")
    assert home_fingerprint("/home/a/.codex") != home_fingerprint("/home/b/.codex")
    assert len(home_fingerprint("/x")) == 16


def test_r_priv_1_store_writes_one_private_atomic_file_per_record(tmp_path):
    store = PrivacyStore(str(tmp_path / "idx"), FP)
    store.write(_rec())
    store.write(attrs_evolve(_rec(), record_id="r2"))
    names = sorted(os.listdir(store.directory))
    assert names == [record_file_name(FP, "r1"), record_file_name(FP, "r2")]
    assert stat.S_IMODE(os.stat(store.directory).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(os.path.join(store.directory, n)).st_mode) == 0o600 for n in names)
    idx = store.load()
    assert not idx.conservative and [r.record_id for r in idx.records] == ["r1", "r2"]


def attrs_evolve(r, **kw):
    import attrs

    return attrs.evolve(r, **kw)


def test_r_priv_1_legacy_single_file_is_still_read(tmp_path):
    d = tmp_path / "idx"
    d.mkdir()
    (d / legacy_file_name(FP)).write_text(json.dumps({"version": 1, "records": [_rec().to_json()]}))
    (d / record_file_name(FP, "r9")).write_text(json.dumps(attrs_evolve(_rec(), record_id="r9").to_json()))
    (d / record_file_name("ffffffffffffffff", "zz")).write_text("not ours, not read")
    idx = PrivacyStore(str(d), FP).load()
    assert not idx.conservative and {r.record_id for r in idx.records} == {"r1", "r9"}


@pytest.mark.parametrize("bad", [
    b"{not json",
    json.dumps({"version": 99, "records": []}).encode(),
    json.dumps({"version": 1, "records": [{"kind": "requestUserInput"}]}).encode(),
])
def test_r_priv_2_corrupt_index_turns_conservative_and_stays_so(tmp_path, bad):
    d = tmp_path / "idx"
    d.mkdir()
    (d / legacy_file_name(FP)).write_bytes(bad)
    store = PrivacyStore(str(d), FP)
    idx = store.load()
    assert idx.conservative and idx.problems
    assert (d / marker_file_name(FP)).exists()  # persisted
    # A new good record and even removing the broken file never restore trust (R-PRIV-2).
    (d / legacy_file_name(FP)).unlink()
    store.write(_rec())
    again = store.load()
    assert again.conservative and [r.record_id for r in again.records] == ["r1"]


def test_r_priv_2_secret_answers_masked_ordinary_answers_shown():
    m = Masker(load_index(FP, {record_file_name(FP, "r1"): json.dumps(_rec().to_json()).encode()}))
    out = m.mask(_call(user="ada", pw="hunter2"))
    assert _shown(out) == {"user": {"answers": ["ada"]}, "pw": {"answers": [MASK]}}
    assert out.arguments == _call().arguments and out.id == "call_1" and out.tool == "request_user_input"


def test_r_priv_3_question_names_protect_only_their_own_interaction():
    m = Masker(load_index(FP, {record_file_name(FP, "r1"): json.dumps(_rec().to_json()).encode()}))
    other = _rec(itemId="call_2")
    m2 = Masker(load_index(FP, {record_file_name(FP, "r2"): json.dumps(
        attrs_evolve(other, record_id="r2", questions=(QuestionFlag("pw", False),)).to_json()).encode()}))
    # call_2 was classified with a non-secret "pw": shown there, even though call_1's "pw" is secret.
    assert _shown(m2.mask(_call("call_2", pw="visible"))) == {"pw": {"answers": ["visible"]}}
    assert _shown(m.mask(_call("call_1", pw="x"))) == {"pw": {"answers": [MASK]}}


def test_r_priv_3_a_cold_read_never_unmasks_unclassified_answers():
    m = Masker(load_index(FP, {}))
    assert _shown(m.mask(_call("call_unknown", user="ada"))) == {"user": {"answers": [MASK]}}
    broken = DynamicToolCall(id="c", thread_id="th", turn_id="tu", status="completed", tool="request_user_input",
                             content=(ContentBlock("text", "ada / hunter2"),))
    assert m.mask(broken).content[0].text == MASK  # unparseable body: masked whole


def test_r_priv_3_native_function_call_output_is_masked_inside_the_result_only():
    raw = {"type": "functionCallOutput", "id": "call_1", "name": "request_user_input", "namespace": None,
           "output": json.dumps({"answers": {"pw": {"answers": ["hunter2"]}, "user": {"answers": ["ada"]}}})}
    rec = GenericRecord(id="call_1", thread_id="th", turn_id="tu", status="completed", item_type="functionCallOutput",
                        raw=raw)
    m = Masker(load_index(FP, {record_file_name(FP, "r1"): json.dumps(_rec().to_json()).encode()}))
    out = m.mask(rec)
    assert json.loads(out.raw["output"])["answers"] == {"pw": {"answers": [MASK]}, "user": {"answers": ["ada"]}}
    assert out.raw["name"] == "request_user_input" and out.raw["id"] == "call_1"


def _mcp(turn="tu", thread="th", call="mcp_1"):
    return McpToolCall(id=call, thread_id=thread, turn_id=turn, status="completed", server="db", tool="connect",
                       arguments={"host": "db.local"},
                       content=(ContentBlock("text", "connected as admin"),),
                       structured_content={"id": "sess-9", "name": "admin", "path": "/p", "status": "ok"})


def test_r_priv_3_elicitation_protects_its_turn_or_thread_not_others():
    elic_turn = record_for_elicitation({"threadId": "th", "turnId": "tu"}, [("password", True)], record_id="e1",
                                       scope=FP, host=None, created_ms=1)
    m = Masker(load_index(FP, {record_file_name(FP, "e1"): json.dumps(elic_turn.to_json()).encode()}))
    out = m.mask(_mcp())
    assert out.content[0].text == MASK
    # No exemption for data fields named id/name/path/status; the record's own identities stay.
    assert out.structured_content == {"id": MASK, "name": MASK, "path": MASK, "status": MASK}
    assert (out.id, out.server, out.tool, out.status, out.arguments) == ("mcp_1", "db", "connect", "completed",
                                                                        {"host": "db.local"})
    assert m.mask(_mcp(turn="other-turn")) == _mcp(turn="other-turn")
    elic_thread = attrs_evolve(elic_turn, record_id="e2", turn_id=None)
    m2 = Masker(load_index(FP, {record_file_name(FP, "e2"): json.dumps(elic_thread.to_json()).encode()}))
    assert m2.mask(_mcp(turn="any")).content[0].text == MASK
    assert m2.mask(_mcp(thread="other-thread")) == _mcp(thread="other-thread")


def test_r_priv_3_a_reliable_per_call_classification_wins():
    elic = record_for_elicitation({"threadId": "th", "turnId": "tu"}, [("password", True)], record_id="e1",
                                  scope=FP, host=None, created_ms=1)
    per_call = attrs_evolve(_rec(), record_id="c1", item_id="mcp_1", call_id="mcp_1",
                            questions=(QuestionFlag("x", False),))
    files = {record_file_name(FP, r.record_id): json.dumps(r.to_json()).encode() for r in (elic, per_call)}
    assert Masker(load_index(FP, files)).mask(_mcp()) == _mcp()


def test_r_priv_2_conservative_masking_never_touches_ordinary_text():
    idx = load_index(FP, {legacy_file_name(FP): b"garbage"})
    assert idx.conservative
    m = Masker(idx)
    ordinary = [
        UserMessage(id="u", thread_id="th", turn_id="tu", status="completed", text="my password is in the vault"),
        AssistantMessage(id="a", thread_id="th", turn_id="tu", status="completed", text='{"answers": {"pw": 1}}'),
        Reasoning(id="r", thread_id="th", turn_id="tu", status="completed", summary=("thinking",), content=(), state="plain"),
        CommandExecution(id="c", thread_id="th", turn_id="tu", status="completed", command="psql -U admin",
                         output="ok"),
    ]
    assert m.mask_all(ordinary) == ordinary
    assert m.mask(_mcp()).content[0].text == MASK  # unclassifiable results are protected
    assert _shown(m.mask(_call("call_x", user="ada"))) == {"user": {"answers": [MASK]}}
