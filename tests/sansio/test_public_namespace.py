"""The curated public namespace (issue 33): ``codexrt.__all__`` lists what a user needs, and
every name it used to list stays importable — for a checker too (``X as X`` re-exports)."""

from __future__ import annotations

import ast
from pathlib import Path

import codexrt
from codexrt._sansio import _errors

INIT = Path(codexrt.__file__)


def test_all_is_curated_and_every_error_class_stays_importable() -> None:
    assert len(codexrt.__all__) < 100  # was 156: the whole error tree and the plumbing
    for name in ("open_runtime", "RuntimeConfig", "Event", "EventKind", "Decision", "NotLoggedIn",
                 "CliOverrideInvalid", "CodexError"):
        assert name in codexrt.__all__
    for name in _errors.__all__:
        obj = getattr(_errors, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert getattr(codexrt, name) is obj  # compat: still there, outside __all__ or in it


def test_top_level_imports_are_explicit_re_exports() -> None:
    """``from m import X as X`` keeps a name out of ``__all__`` exported for ``mypy --strict``
    (no "does not explicitly export" for code written against earlier releases)."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    plain = [a.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
             and node.module.startswith("codexrt.") for a in node.names
             if a.asname != a.name and not (a.asname or a.name).startswith("_")]
    assert not plain
