"""The Runtime's narrow port, enforced (issue #20): the layers above ``codexrt._runtime`` — the
features, ``serve``, the blocking and asyncio facades and the CLI — use only public, named
Runtime methods and properties (``is_connected()``, ``start_child()``, ``current_child()``,
``kill_child()``, ``publish()``, ``unload_thread()``, ``idle_retirable()``, …), never its
private attributes nor ``.conn`` / ``.threads``.

The check walks the source with :mod:`ast` (nothing is imported). It is name-based: an
expression "holds a runtime" when it is a name or attribute called ``rt``, ``runtime``, ``_rt``
or ``_runtime``, or a name annotated ``Runtime`` (a parameter or an annotated assignment) in
the same file. Its limits: a runtime reached under another, unannotated name (``x = ch.rt;
x.conn``), through a container, ``getattr`` with a string, or a variable that merely shares
one of those names but is not a runtime (then rename it) are not told apart.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What is checked: every layer above the runtime.
CHECKED = ("codexrt/_features", "codexrt/_serve", "codexrt/blocking.py", "codexrt/aio.py", "codexrt_cli")

RUNTIME_NAMES = frozenset({"rt", "runtime", "_rt", "_runtime"})

#: Public attributes of Runtime that are nevertheless internal state: the port replaces them.
FORBIDDEN_PUBLIC = frozenset({"conn", "threads"})

_ANNOTATED = re.compile(r"\bRuntime\b")


def _files() -> list[Path]:
    out: list[Path] = []
    for entry in CHECKED:
        path = ROOT / entry
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def _annotated_runtime_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if _ANNOTATED.search(ast.unparse(node.annotation)):
                names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if _ANNOTATED.search(ast.unparse(node.annotation)):
                names.add(node.target.id)
    return names


def port_violations(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: expression`` for every access past the Runtime's port in ``source``."""
    tree = ast.parse(source, filename)
    holders = RUNTIME_NAMES | _annotated_runtime_names(tree)

    def holds_runtime(expr: ast.expr) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id in holders
        if isinstance(expr, ast.Attribute):
            return expr.attr in RUNTIME_NAMES
        return False

    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not holds_runtime(node.value):
            continue
        private = node.attr.startswith("_") and not (node.attr.startswith("__") and node.attr.endswith("__"))
        if private or node.attr in FORBIDDEN_PUBLIC:
            bad.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return bad


def test_layers_above_the_runtime_use_only_its_port():
    """R-RT-1..R-RT-6 are guaranteed by the Runtime alone: nothing above it touches its state."""
    files = _files()
    assert len(files) > 10  # the walk found the layers it checks
    bad: list[str] = []
    for path in files:
        bad += port_violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not bad, "access past the Runtime's port:\n" + "\n".join(bad)


def test_the_check_sees_what_it_forbids():
    """The checker flags each kind of access it is meant to (so the test above can fail)."""
    src = '''
def f(rt, x: "Runtime", y: Runtime | None, ch):
    rt.conn.kill()
    ch.rt._publish(ch.rt._event("k"))
    x.threads.get("t")
    y._queue
    self._runtime._nursery
    rt.state, rt.publish("k"), rt.__class__, x.generation, ch.rt.is_connected()
    other.conn  # not a runtime by name: not seen (a documented limit)
'''
    found = [v.split(": ", 1)[1] for v in port_violations(src)]
    assert set(found) == {"rt.conn", "ch.rt._publish", "ch.rt._event", "x.threads", "y._queue",
                          "self._runtime._nursery"}


def test_the_forbidden_attributes_are_the_runtimes():
    """``conn`` and ``threads`` are still what Runtime calls its connection and thread table:
    if they are renamed, this list must follow (else the check above guards nothing)."""
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in sorted((ROOT / "codexrt/_runtime").glob("*.py"))]
    assigned = {t.attr for tree in trees for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    assert FORBIDDEN_PUBLIC <= assigned
