"""The history projection package (issue #20) keeps its shape: modules in one order, each
importing only modules before it (also inside functions), none over ~800 lines, no class over
~500 and no function over ~100. The projection's behaviour (R-H-1, R-H-4, R-H-5) is tested in
tests/test_projection.py and tests/test_projector_cases.py; this guards the seams."""

from __future__ import annotations

import ast
from pathlib import Path

import codexrt._sansio._projection as projection

PKG = Path(projection.__file__).parent
#: Bottom first: a module may import only modules listed before it.
ORDER = ["_records", "_shapes", "_native", "_plain_text", "_legacy", "_store", "_native_feed", "_replay", "_legacy_feed",
         "_projector", "_tally", "__init__"]


def _tree(name: str) -> ast.Module:
    return ast.parse((PKG / f"{name}.py").read_text(), filename=name)


def test_r_h_4_projection_modules_are_all_placed_in_the_order() -> None:
    assert sorted(p.stem for p in PKG.glob("*.py")) == sorted(ORDER)


def test_r_h_4_projection_modules_import_only_downward() -> None:
    upward = []
    for i, name in enumerate(ORDER):
        for node in ast.walk(_tree(name)):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                target = (node.module or "").split(".")[0]
                if target and ORDER.index(target) >= i:
                    upward.append(f"{name} imports {target} (line {node.lineno})")
    assert upward == []


def test_r_h_4_projection_modules_classes_and_functions_stay_small() -> None:
    big = []
    for name in ORDER:
        text = (PKG / f"{name}.py").read_text()
        if text.count("\n") > 800:
            big.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(_tree(name)):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > (500 if isinstance(node, ast.ClassDef) else 100):
                    big.append(f"{name}.{node.name}: {size} lines")
    assert big == []
