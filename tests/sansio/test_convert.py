"""attrs ↔ wire through the one cattrs converter (``codexrt._sansio._convert``): the classes
registered with it produce byte for byte the JSON their hand-written ``to_wire`` produced
(the old code is kept below as the reference), and every value survives a round trip.
R-D-2 (serve lines), R-CAT-1 (catalog results), R-SET-1 (settings), R-HLP-3 (titles)."""

from __future__ import annotations

import json
from typing import Any, Callable

from hypothesis import given
from hypothesis import strategies as st

from codexrt._features._catalog import ModelInfo, SkillInfo, SkillRef
from codexrt._features._helpers import TitleOutcome
from codexrt._sansio._convert import camel, from_wire
from codexrt._sansio._elicitation import ElicitationField, ElicitationOption
from codexrt._sansio._plans import PlanItem
from codexrt._sansio._settings import APPROVAL_POLICIES, SANDBOX_MODES, Settings

# -- the hand-written forms these classes had (the reference) --------------------------------


def old_settings(s: Settings) -> dict[str, Any]:
    return {k: v for k, v in {
        "model": s.model, "effort": s.effort, "approvalPolicy": s.approval_policy, "sandbox": s.sandbox,
        "developerInstructions": s.developer_instructions, "collaborationMode": s.collaboration_mode,
        "cwd": s.cwd, "summary": s.summary, "personality": s.personality}.items() if v is not None}


def old_plan_item(p: PlanItem) -> dict[str, Any]:
    return {"itemId": p.item_id, "threadId": p.thread_id, "turnId": p.turn_id, "text": p.text,
            "authoritative": p.authoritative}


def old_option(o: ElicitationOption) -> dict[str, Any]:
    return {"value": o.value, "label": o.label}


def old_field(f: ElicitationField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f.id, "type": f.type, "required": f.required}
    for key, value in (("title", f.title), ("description", f.description), ("default", f.default),
                       ("format", f.format), ("minimum", f.minimum), ("maximum", f.maximum),
                       ("minLength", f.min_length), ("maxLength", f.max_length),
                       ("minItems", f.min_items), ("maxItems", f.max_items)):
        if value is not None:
            out[key] = value
    if f.options:
        out["options"] = [old_option(o) for o in f.options]
    return out


def old_model(m: ModelInfo) -> dict[str, Any]:
    return {"slug": m.slug, "id": m.id, "displayName": m.display_name, "hidden": m.hidden,
            "isDefault": m.is_default, "defaultReasoningEffort": m.default_reasoning_effort,
            "reasoningEfforts": list(m.reasoning_efforts)}


def old_skill(s: SkillInfo) -> dict[str, Any]:
    return {"cwd": s.cwd, "name": s.name, "path": s.path, "scope": s.scope, "enabled": s.enabled,
            "description": s.description}


def old_skill_ref(r: SkillRef) -> dict[str, Any]:
    return {"name": r.name, "path": r.path, "cwd": r.cwd}


def old_title(t: TitleOutcome) -> dict[str, Any]:
    return {"threadId": t.thread_id, "status": t.status, "title": t.title, "reason": t.reason, "error": t.error}


# -- values -----------------------------------------------------------------------------------

text = st.text(max_size=12)
opt_text = st.none() | text
opt_int = st.none() | st.integers(-5, 10**6)
json_leaf = st.none() | st.booleans() | st.integers(-9, 9) | text
json_obj = st.dictionaries(text, json_leaf, max_size=3)

settings = st.builds(
    Settings, model=opt_text, effort=opt_text, approval_policy=st.none() | st.sampled_from(sorted(APPROVAL_POLICIES)),
    sandbox=st.none() | st.sampled_from(sorted(SANDBOX_MODES)), developer_instructions=opt_text,
    collaboration_mode=st.none() | json_obj, cwd=opt_text,
    summary=st.none() | st.sampled_from(["auto", "concise", "detailed", "none"]),
    personality=st.none() | st.sampled_from(["none", "friendly", "pragmatic"]))
plan_items = st.builds(PlanItem, item_id=text, thread_id=text, turn_id=opt_text, text=text,
                       authoritative=st.booleans())
options = st.builds(ElicitationOption, value=text, label=text)
fields = st.builds(
    ElicitationField, id=text, type=st.sampled_from(["string", "number", "integer", "boolean", "array"]),
    required=st.booleans(), title=opt_text, description=opt_text, default=json_leaf, format=opt_text,
    options=st.lists(options, max_size=3).map(tuple), minimum=st.none() | st.floats(-10, 10), maximum=opt_int,
    min_length=opt_int, max_length=opt_int, min_items=opt_int, max_items=opt_int)
models = st.builds(ModelInfo, slug=text, id=text, display_name=opt_text, hidden=st.booleans(),
                   is_default=st.booleans(), default_reasoning_effort=opt_text,
                   reasoning_efforts=st.lists(text, max_size=3).map(tuple))
skills = st.builds(SkillInfo, cwd=text, name=text, path=text, scope=opt_text, enabled=st.booleans(),
                   description=opt_text)
skill_refs = st.builds(SkillRef, name=text, path=text, cwd=opt_text)
titles = st.builds(TitleOutcome, thread_id=text, status=text, title=opt_text, reason=opt_text,
                   error=st.none() | json_obj)

CASES: list[tuple[st.SearchStrategy[Any], Callable[[Any], dict[str, Any]]]] = [
    (settings, old_settings), (plan_items, old_plan_item), (options, old_option), (fields, old_field),
    (models, old_model), (skills, old_skill), (skill_refs, old_skill_ref), (titles, old_title)]


def _dump(d: dict[str, Any]) -> str:  # serve's line encoding (key order kept)
    return json.dumps(d, ensure_ascii=True, default=str, separators=(",", ":"))


@given(st.one_of(*[st.tuples(strategy, st.just(old)) for strategy, old in CASES]))
def test_r_d_2_converter_output_is_byte_identical_and_round_trips(case: tuple[Any, Any]) -> None:
    value, old = case
    wire = value.to_wire()
    assert _dump(wire) == _dump(old(value))
    assert from_wire(json.loads(_dump(wire)), type(value)) == value


def test_camel_case_names() -> None:
    assert [camel(n) for n in ("id", "item_id", "default_reasoning_effort", "min_length")] == [
        "id", "itemId", "defaultReasoningEffort", "minLength"]


def test_r_cat_1_skill_ref_from_wire_still_validates_and_ignores_extra_keys() -> None:
    import pytest

    from codexrt._sansio._errors import ConfigError

    assert SkillRef.from_wire({"name": "n", "path": "/p", "selected": True}) == SkillRef("n", "/p")
    for bad in ({"name": "", "path": "/p"}, {"name": "n"}, {"name": "n", "path": "/p", "cwd": 3}, "n"):
        with pytest.raises(ConfigError):
            SkillRef.from_wire(bad)
