"""The curated public namespace (issue 33): ``codexrt.__all__`` is pinned, so a new top-level
name is a conscious choice made here, and the plumbing earlier versions exported stays
importable without being advertised.

The rule (``codexrt/__init__.py``, above ``_UNADVERTISED``): public is what a user calls, catches
(every error class: hosts catch them by name), configures, holds or compares against, and the
results a user annotates most; what only the runtime, ``serve``, ``acp`` or the CLI use is not. That no mypy message about a public name
shows a private class is checked in ``tests/e2e/test_typing.py``.
"""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

import codexrt
from codexrt._sansio import _errors
from tests._support import ROOT

#: Every top-level name that is not an error class. Adding one: put it in ``_CORE`` or ``_LAZY``
#: (and the ``TYPE_CHECKING`` block) of ``codexrt/__init__.py``, document it, then add it here.
PUBLIC = frozenset({
    "__version__",
    # the runtime: open it, configure it, what it hands out
    "open_runtime", "Runtime", "RuntimeConfig", "Settings", "ClientInfo", "RuntimeState",
    "Operation", "OperationResult", "OpPhase", "CodexEvent", "EventStream",
    "Connection", "ChildHandle",  # rt.ensure_started() / rt.current_child()
    # typed events and decisions
    "Event", "EventKind", "Decision", "payload", "AGENT_TEXT",
    # interactions
    "Interaction", "InteractionState", "decline_all", "decline_all_in_read_only", "PrivacyStore",
    # transports for RuntimeConfig(transports=...), reconnects for RuntimeConfig(reconnect_backoff=...)
    "ProcessTransport", "StreamTransport", "spawn_process_transport", "ExitStatus", "Backoff",
    # finding the CLI
    "discover_cli", "probe_version", "DiscoveryResult", "Candidate", "Rejected",
    # history
    "open_history_reader", "HistoryReader", "Transcript", "ThreadPage", "ThreadSummary",
    "SubagentView", "MessageCount", "MessageCounter",
    # edits
    "open_live_edits", "LiveEdits", "load_thread_edits", "ThreadEdits", "EditLedger", "EditStore",
    "EditKey", "EditEntry", "UndoReceipt", "ReviewTicket", "Checkpoint",
    # IDE context and the workspace diff
    "EditorState", "build_context", "read_workspace_diff", "WorkspaceDiff", "DiffStatus",
    # helper runs and catalogs
    "generate_title", "enhance_prompt", "generate_commit_message", "open_title_manager", "TitleManager",
    "list_models", "list_skills", "mcp_status", "reload_mcp", "start_slash_command",
})

#: Exported before issue 33, plumbing since: importable from ``codexrt`` still, advertised nowhere.
UNADVERTISED = frozenset({
    "open_connection", "LaunchConfig", "AccessMode", "launch_fingerprint", "call_read_only",
    "READ_ONLY_RETRY_TABLE", "Endpoint", "InteractionRegistry", "DECISIONS",
})

SUBMODULES = frozenset({"aio", "blocking", "loopback"})


def _error_classes() -> set[str]:
    return {name for name, obj in vars(_errors).items()
            if inspect.isclass(obj) and issubclass(obj, codexrt.CodexError) and obj.__module__ == _errors.__name__}


def test_all_is_the_curated_list_plus_every_error_class() -> None:
    exported = codexrt.__all__
    assert len(exported) == len(set(exported)), "a name is listed twice in codexrt.__all__"
    errors = _error_classes()
    assert errors <= set(exported), f"error classes not exported: {sorted(errors - set(exported))}"
    others = set(exported) - errors
    assert others - PUBLIC == set(), "new public names: a conscious choice — add them to PUBLIC"
    assert PUBLIC - others == set(), "names no longer public: take them out of PUBLIC (and say so in CHANGELOG)"
    assert len(exported) == len(PUBLIC) + len(errors)


def test_dir_offers_the_public_names_only() -> None:
    """What a notebook's completion lists: the curated names and the public submodules."""
    assert dir(codexrt) == sorted(set(codexrt.__all__) | SUBMODULES)
    for name in SUBMODULES:
        assert getattr(codexrt, name) is importlib.import_module(f"codexrt.{name}")


def test_unadvertised_names_still_import_from_where_they_live() -> None:
    assert set(codexrt._UNADVERTISED) == UNADVERTISED
    for name, home in codexrt._UNADVERTISED.items():
        assert name not in codexrt.__all__
        assert getattr(codexrt, name) is getattr(importlib.import_module(home), name), name
        assert name not in dir(codexrt)
    ns: dict[str, object] = {}
    exec("from codexrt import open_connection, LaunchConfig, DECISIONS", ns)  # what old code does
    assert ns["DECISIONS"] == ("accept", "acceptForSession", "decline", "cancel")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        getattr(codexrt, "NoSuchName")


def _init_tree() -> ast.Module:
    return ast.parse((ROOT / "codexrt" / "__init__.py").read_text(encoding="utf-8"))


def test_the_type_checkers_view_is_the_advertised_one() -> None:
    """The ``TYPE_CHECKING`` re-exports (``X as X``) and the module's eager imports name exactly
    ``__all__`` and the submodules: a checker neither misses a public name nor offers plumbing."""
    typed: set[str] = set()
    eager: set[str] = set()
    for node in _init_tree().body:
        if isinstance(node, ast.If):  # if TYPE_CHECKING:
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for alias in imp.names:
                    assert alias.asname == alias.name, f"{alias.name}: re-export as `X as X`"
                    typed.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "codexrt._sansio._errors":
            eager |= {a.asname or a.name for a in node.names}
    assert typed.isdisjoint(UNADVERTISED)
    assert typed | eager | {"__version__"} == set(codexrt.__all__) | SUBMODULES
    assert set(codexrt._CORE) | set(codexrt._LAZY) == typed - SUBMODULES


def _codexrt_imports(paths: list[str]) -> list[tuple[str, str]]:
    """(file, name) for every ``from codexrt import name`` in the files under ``paths``."""
    found = []
    for top in paths:
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "codexrt" and node.level == 0:
                    found += [(str(path.relative_to(ROOT)), a.name) for a in node.names]
    return found


def test_the_cli_serve_and_acp_import_only_public_names_from_codexrt() -> None:
    """What is not advertised is imported from where it lives (the CLI: through
    ``codexrt._serve._cli_support``), never from the top level."""
    imports = _codexrt_imports(["codexrt_cli", "codexrt"])
    assert imports, "the walk found nothing: has the layout changed?"
    wrong = [(f, n) for f, n in imports if n not in codexrt.__all__ and n not in SUBMODULES]
    assert not wrong, wrong
