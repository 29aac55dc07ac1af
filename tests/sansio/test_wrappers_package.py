"""The wrapper replay package (issue #20) keeps its shape: one module per stage in one order,
each importing only the stages before it (also inside functions), no module over ~800 lines, no
class over ~500, no function over ~100. Behaviour (R-H-5) is tested in test_wrappers_cases.py
and test_wrappers_property.py; this guards the seams."""

from __future__ import annotations

import ast
from pathlib import Path

import codexrt._sansio._wrappers as wrappers

PKG = Path(wrappers.__file__).parent
#: The stages, bottom first: a module may import only modules listed before it.
STAGES = ("_model", "_lexer", "_source", "_plan", "_output", "_receipts", "_engine", "__init__")
LIMITS = {ast.ClassDef: 500, ast.FunctionDef: 100, ast.AsyncFunctionDef: 100}


def test_r_h_5_every_wrappers_module_is_a_listed_stage() -> None:
    assert sorted(p.stem for p in PKG.glob("*.py")) == sorted(STAGES)


def test_r_h_5_wrappers_stages_import_downward_and_stay_small() -> None:
    problems = []
    for rank, stage in enumerate(STAGES):
        text = (PKG / f"{stage}.py").read_text(encoding="utf-8")
        if text.count("\n") > 800:
            problems.append(f"{stage} has {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text, filename=stage)):
            limit = LIMITS.get(type(node))
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                problems.append(f"{stage}.{node.name} is over {limit} lines")
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                imported = node.module.split(".")[0]
                if imported not in STAGES[:rank]:
                    problems.append(f"{stage} imports {imported} (line {node.lineno})")
    assert problems == []


def test_r_h_5_wrappers_package_exports_what_its_users_import() -> None:
    """The projection and the tests import these names from ``codexrt._sansio._wrappers``."""
    for name in wrappers.__all__:
        assert getattr(wrappers, name) is not None, name
    assert {"attribute_wrapper", "Receipt", "ReceiptPairer", "WrapperCall", "KeepReason", "Attribution",
            "normalize_dir", "receipts_from_rollout_line", "patch_end_receipts", "PollUpdate",
            "ToolRecord"} <= set(wrappers.__all__)
