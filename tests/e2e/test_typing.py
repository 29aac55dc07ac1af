"""Types a checker can use (issues 22, 33): the typed example passes ``mypy --strict``, and each
planted mistake fails it — an unknown keyword, a bad approval policy, a non-str message, a
misspelt event kind, a misspelt payload key (after narrowing on the kind), an unknown decision —
and no mypy message names a private class of codexrt.

mypy runs on the example only (``--follow-imports=silent``: codexrt's own modules give types,
their internals are not what is checked here), in a subprocess, with a cache in a temp dir.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import ROOT

EXAMPLE = ROOT / "examples" / "typed_script.py"

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(cache), str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_typed_example_passes_mypy_strict(mypy_cache: Path) -> None:
    proc = _mypy(EXAMPLE, mypy_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("original", "planted", "error"), [
    ('rt.send(text)', 'rt.send(text, thread="t")', 'Unexpected keyword argument "thread"'),
    ('approval_policy="on-request"', 'approval_policy="sometimes"', 'approval_policy'),
    ('rt.send(text)', 'rt.send(42)', 'Argument 1 to "send"'),
    ('connect(cwd=".", approvals', 'connect(cwdir=".", approvals', 'Unexpected keyword argument "cwdir"'),
    ('timeout=600, thread_id=None', 'timeout=600, thread=None', 'Unexpected keyword argument "thread"'),
    # issue 33: the event's kind and payload, and the decision, are typed too
    ('ev.kind == "itemUpdated" and', 'ev.kind == "itemUpdate" and', 'Non-overlapping equality check'),
    ('print(ev.payload["delta"]', 'print(ev.payload["delat"]', 'TypedDict "ItemUpdated" has no key "delat"'),
    ('    return "decline"', '    return "deny"', 'Incompatible return value type (got "Literal[\'deny\']"'),
    ('.answer("decline")', '.answer("deny")', 'Argument 1 to "answer" of "Interaction"'),
], ids=["unknown-keyword", "bad-approval-policy", "non-str-message", "unknown-config-field",
        "unknown-send-keyword", "misspelt-kind", "misspelt-payload-key", "unknown-decision",
        "unknown-decision-trio"])
def test_planted_mistakes_fail_mypy_strict(tmp_path: Path, mypy_cache: Path, original: str, planted: str,
                                           error: str) -> None:
    src = EXAMPLE.read_text(encoding="utf-8")
    assert original in src
    bad = tmp_path / "typed_script.py"
    bad.write_text(src.replace(original, planted, 1), encoding="utf-8")
    proc = _mypy(bad, mypy_cache)
    assert proc.returncode != 0, f"mypy accepted {planted!r}"
    assert error in proc.stdout, proc.stdout


@pytest.mark.parametrize(("original", "planted"), [
    ("rt.send(text)", 'rt.send(text, thread="t")'),
    ('.answer("decline")', '.answer("deny")'),
])
def test_no_private_class_in_a_users_mypy_message(tmp_path: Path, mypy_cache: Path, original: str,
                                                  planted: str) -> None:
    """The Trio runtime's methods come from mixins: their names must read as public ones."""
    src = EXAMPLE.read_text(encoding="utf-8")
    trio_user = src + (
        "\n\nasync def trio_user(text: str) -> None:\n"
        "    async with codexrt.open_runtime() as rt:\n"
        f"        {planted if planted.startswith('rt.') else 'rt.send(text)'}\n")
    if not planted.startswith("rt."):
        trio_user = trio_user.replace(original, planted, 1)
    bad = tmp_path / "typed_script.py"
    bad.write_text(trio_user, encoding="utf-8")
    proc = _mypy(bad, mypy_cache)
    assert proc.returncode != 0
    assert not re.search(r'"_[A-Za-z]', proc.stdout), proc.stdout


def test_event_kinds_are_the_serve_schemas() -> None:
    """``codexrt.EventKind`` lists exactly the kinds the ``serve`` schema's ``eventKind`` names."""
    import json
    import typing

    import codexrt

    def flat(tp: object) -> set[str]:
        out: set[str] = set()
        for a in typing.get_args(tp):
            out |= flat(a) if typing.get_args(a) else {a}  # type: ignore[arg-type]
        return out

    schema = json.loads((ROOT / "codexrt" / "_serve" / "daemon-protocol.schema.json").read_text(encoding="utf-8"))
    assert flat(codexrt.EventKind) == set(schema["$defs"]["eventKind"]["enum"])


#: A private class as mypy prints it: ``codexrt._runtime._lifecycle._Lifecycle`` (private modules
#: are fine, a class whose name starts with ``_`` is what a user must never be shown).
PRIVATE_CLASS = re.compile(r"\bcodexrt(?:\.\w+)*\._[A-Z]\w*")


def test_no_public_name_shows_a_private_class(tmp_path: Path, mypy_cache: Path) -> None:
    """Every public function, class and class member of ``codexrt``, ``codexrt.aio``,
    ``codexrt.blocking`` and ``codexrt.loopback``, as mypy shows it to a user (issue 33). Members
    are revealed on the class, so the class that defines a method (its ``self``) shows too — what
    a mistaken call's message names (``Argument 1 to "send" of "…"``), mixins of ``Runtime``
    included."""
    import importlib
    import inspect

    lines: list[str] = []
    for modname in ("codexrt", "codexrt.aio", "codexrt.blocking", "codexrt.loopback"):
        module = importlib.import_module(modname)
        lines.append(f"import {modname}")
        for name in module.__all__:
            obj = getattr(module, name)
            if name.startswith("__") or (inspect.isclass(obj) and issubclass(obj, BaseException)):
                continue
            lines.append(f"reveal_type({modname}.{name})")
            if inspect.isclass(obj):
                lines += [f"reveal_type({modname}.{name}.{m})" for m in sorted(dir(obj)) if not m.startswith("_")]
    script = tmp_path / "user_script.py"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _mypy(script, mypy_cache)
    revealed = proc.stdout.count("Revealed type is")
    assert revealed == sum(ln.startswith("reveal_type(") for ln in lines) > 500, proc.stdout[-3000:]
    leaks = sorted(set(PRIVATE_CLASS.findall(proc.stdout)))
    assert not leaks, f"private classes in what mypy shows a user: {leaks}"
