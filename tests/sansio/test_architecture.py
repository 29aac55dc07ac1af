"""The layers of ``docs/architecture.md``, enforced: every import in ``codexrt`` and
``codexrt_cli`` — at module level, inside functions and under ``TYPE_CHECKING`` — points down
(or sideways inside one layer), and the module graph has no cycle.

This walks the source with :mod:`ast` (nothing is imported), so it also sees the imports a test
run never executes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("codexrt", "codexrt_cli")

#: (prefix, rank, name) — the first matching prefix wins; a module may import modules of its own
#: rank or lower. Keep in step with the table in docs/architecture.md.
LAYERS: tuple[tuple[str, int, str], ...] = (
    ("codexrt._version", 0, "version"),
    ("codexrt._sansio", 1, "_sansio"),
    ("codexrt._io", 2, "_io"),
    ("codexrt._connection", 3, "_connection"),
    ("codexrt._runtime", 4, "_runtime"),
    ("codexrt._features", 5, "_features"),
    ("codexrt._serve", 7, "_serve"),
    ("codexrt._acp", 7, "_acp"),  # the ACP front end, a sibling of _serve (STYLE.md point 10)
    ("codexrt.__main__", 9, "entry point"),
    ("codexrt_cli", 8, "codexrt_cli"),
    ("codexrt", 6, "public API"),  # __init__, blocking, aio, _payloads, loopback
)

#: Modules of the public layer that the CLI may import (plus ``codexrt._serve``, ``codexrt._acp``
#: and the version).
PUBLIC_MODULES = ("codexrt", "codexrt.blocking", "codexrt.aio", "codexrt.loopback", "codexrt._version")

#: Private modules the CLI may import besides ``codexrt._serve``: none (issue #20). What the CLI
#: needs beyond the public API comes from ``codexrt._serve._cli_support``.
CLI_PRIVATE_ALLOWED: frozenset[tuple[str, str]] = frozenset()


def layer_of(module: str) -> tuple[int, str]:
    for prefix, rank, name in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return rank, name
    raise AssertionError(f"{module} is in no layer")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """``(target module, line)`` for every codexrt import in ``path``. ``from pkg import name``
    counts as importing ``pkg.name`` when that is a module, else ``pkg``."""
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in MODULES else target, node.lineno))
    return found


EDGES = {m: _imports(m, p) for m, p in MODULES.items()}


def test_every_module_is_in_a_layer():
    for module in MODULES:
        layer_of(module)


def test_imports_point_down():
    """R-ARCH: no module imports a higher layer (docs/architecture.md)."""
    bad = []
    for module, targets in EDGES.items():
        rank, name = layer_of(module)
        for target, line in targets:
            t_rank, t_name = layer_of(target)
            if t_rank > rank:
                bad.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {name} imports {target} ({t_name})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycle():
    """No cycle between modules, counting imports inside functions and under TYPE_CHECKING.
    (A package's ``__init__`` is not an edge of ``import codexrt._x``: Python runs it first
    anyway; only an explicit ``import codexrt`` / ``from codexrt import …`` counts.)"""
    graph = {m: sorted({t for t, _ in ts if t in MODULES and t != m}) for m, ts in EDGES.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in graph[m]:
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


#: The one exception to the sans-IO ban (docs/architecture.md): the error tree imports trio's
#: resource exception classes, so that ``except trio.ClosedResourceError`` also catches
#: codexrt's ClosedError (and Broken/Busy likewise). Exception classes only, no event loop.
SANSIO_TRIO_EXCEPTION: tuple[str, frozenset[str]] = (
    "codexrt._sansio._errors",
    frozenset({"BrokenResourceError", "BusyResourceError", "ClosedResourceError"}),
)


def test_sansio_never_imports_trio_or_runs_processes():
    """The sans-IO core (layer 1) imports no event loop and starts no process; the one
    exception is ``from trio import <resource error class>`` in the error tree."""
    banned = {"trio", "subprocess", "asyncio", "socket", "selectors"}
    allowed_module, allowed_names = SANSIO_TRIO_EXCEPTION
    bad = []
    for module, path in MODULES.items():
        if layer_of(module)[1] != "_sansio":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if (module == allowed_module and node.module == "trio"
                        and {a.name for a in node.names} <= allowed_names):
                    continue
                names = [node.module.split(".")[0]]
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names if n in banned]
    assert not bad, "\n".join(bad)


def test_the_sansio_trio_exception_is_used_and_narrow():
    """The exception above is real (the error tree does import exactly those classes from
    trio), so it cannot silently outlive its reason."""
    allowed_module, allowed_names = SANSIO_TRIO_EXCEPTION
    imported = {a.name for node in ast.walk(ast.parse(MODULES[allowed_module].read_text(encoding="utf-8")))
                if isinstance(node, ast.ImportFrom) and node.module == "trio" for a in node.names}
    assert imported == allowed_names


def _cli_private_imports() -> set[tuple[str, str]]:
    out = set()
    for module, targets in EDGES.items():
        if not module.startswith("codexrt_cli"):
            continue
        for target, _line in targets:
            if target.startswith(("codexrt_cli", "codexrt._serve", "codexrt._acp")):
                continue
            if target in PUBLIC_MODULES or target.startswith("codexrt.loopback"):
                continue
            out.add((module, target))
    return out


def test_cli_uses_public_names_and_serve_only():
    """``codexrt_cli`` imports the public API, ``codexrt._serve`` and ``codexrt._acp``; nothing
    else private."""
    private = _cli_private_imports()
    new = sorted(private - CLI_PRIVATE_ALLOWED)
    gone = sorted(CLI_PRIVATE_ALLOWED - private)
    assert not new, "the CLI imports private modules:\n" + "\n".join(f"{m} -> {t}" for m, t in new)
    assert not gone, "no longer imported, drop from CLI_PRIVATE_ALLOWED:\n" + "\n".join(map(str, gone))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_noqa_e402(module):
    """Imports sit at the top of each module: no ``noqa: E402`` escape hatch."""
    assert "noqa: E402" not in MODULES[module].read_text(encoding="utf-8")


def test_cli_support_lazy_table_matches_its_imports():
    """``codexrt._serve._cli_support`` (what the CLI needs beyond the public API) loads its names
    lazily; its ``_LAZY`` table, its ``TYPE_CHECKING`` imports and ``__all__`` name the same
    things, so the layer walk above sees every module it reaches."""
    tree = ast.parse(MODULES["codexrt._serve._cli_support"].read_text(encoding="utf-8"))
    typed: dict[str, tuple[str, str]] = {}
    lazy: dict[str, tuple[str, str]] = {}
    exported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If):  # if TYPE_CHECKING:
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                typed.update({a.asname or a.name: (imp.module, a.name) for a in imp.names})
        elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "_LAZY":
            lazy = ast.literal_eval(node.value)
        elif isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__":
            exported = set(ast.literal_eval(node.value))
    assert typed and typed == lazy
    assert exported == set(lazy)


#: The size rule of issue #20: a module over this many lines, or a class over CLASS_LIMIT, needs a
#: one-line reason in its header — a comment line ``# size: <why>`` among its first 30 lines.
MODULE_LIMIT = 800
CLASS_LIMIT = 500


def _size_reason(text: str) -> str | None:
    for line in text.splitlines()[:30]:
        if line.startswith("# size:") and len(line.split(":", 1)[1].strip()) > 10:
            return line.split(":", 1)[1].strip()
    return None


def test_modules_and_classes_are_small_or_say_why():
    """No module over ~800 lines and no class over ~500 without a reason in its header."""
    big = []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if _size_reason(text):
            continue
        lines = text.count("\n")
        if lines > MODULE_LIMIT:
            big.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > CLASS_LIMIT:
                    big.append(f"{path.relative_to(ROOT)}: class {node.name} is {size} lines")
    assert not big, "split these, or give a '# size: <reason>' line in the header:\n" + "\n".join(big)


def test_the_two_front_ends_do_not_import_each_other():
    """``codexrt._serve`` and ``codexrt._acp`` are siblings on the runtime (STYLE.md point 10):
    what both need lives below them, never in one of them for the other."""
    bad = [f"{m} -> {t}" for m, ts in EDGES.items() for t, _ in ts
           if (m.startswith("codexrt._acp") and t.startswith("codexrt._serve"))
           or (m.startswith("codexrt._serve") and t.startswith("codexrt._acp"))]
    assert not bad, "\n".join(bad)
