"""The checked-in protocol schema still is what the pinned binary generates.

Why: codexrt's wire models (``codexrt/_sansio/_models.py``) are derived by hand from
``codex app-server generate-json-schema --out DIR --experimental`` of the pinned 0.169.0. The full
tree is 6 MB (479 files), so ``tests/data/schema-0.169.0/`` keeps the one bundle that holds every
definition (``codex_app_server_protocol.schemas.json``, top level plus ``definitions.v2``) and a
``SHA256SUMS`` manifest of *all* generated files. This test regenerates the tree from the pinned
binary and fails, on drift, with a per-file summary that names added/removed files and, for changed
ones, which definitions and properties changed (read from the bundle, old vs new).

Generation is deterministic (checked: two runs, and a run with an empty environment, give identical
trees). To update after bumping ``.ci/codex-version``, see ``docs/real-server-notes.md``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests._support import pinned_schema_dir

SCHEMA_DIR = pinned_schema_dir()
BUNDLE = "codex_app_server_protocol.schemas.json"


def read_manifest(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        digest, _, name = line.partition("  ")
        out[name] = digest
    return out


def hash_tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def all_definitions(bundle: dict[str, Any]) -> dict[str, Any]:
    """Flatten the bundle: top-level definitions by name, ``v2`` ones as ``v2/<name>``."""
    defs = dict(bundle.get("definitions", {}))
    v2 = defs.pop("v2", {})
    out = {k: v for k, v in defs.items()}
    out.update({f"v2/{k}": v for k, v in v2.items()})
    return out


def describe_definition_change(old: Any, new: Any) -> str:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "changed"
    po, pn = old.get("properties", {}) or {}, new.get("properties", {}) or {}
    bits = []
    if added := sorted(set(pn) - set(po)):
        bits.append(f"+props {added}")
    if removed := sorted(set(po) - set(pn)):
        bits.append(f"-props {removed}")
    if changed := sorted(k for k in set(po) & set(pn) if po[k] != pn[k]):
        bits.append(f"~props {changed}")
    if sorted(old.get("required", [])) != sorted(new.get("required", [])):
        bits.append(f"required {sorted(old.get('required', []))} -> {sorted(new.get('required', []))}")
    if old.get("oneOf") != new.get("oneOf") or old.get("anyOf") != new.get("anyOf") or old.get("enum") != new.get("enum"):
        bits.append("variants changed")
    return ", ".join(bits) or "changed (other keywords)"


def drift_report(expected: dict[str, str], actual: dict[str, str], old_bundle: dict[str, Any],
                 new_bundle: dict[str, Any] | None) -> list[str]:
    """Readable lines, one per drifted file (plus per-definition details); empty if no drift."""
    lines = []
    old_defs = all_definitions(old_bundle)
    new_defs = all_definitions(new_bundle) if new_bundle is not None else {}
    for name in sorted(set(actual) - set(expected)):
        lines.append(f"added file   {name}")
    for name in sorted(set(expected) - set(actual)):
        lines.append(f"removed file {name}")
    for name in sorted(n for n in set(expected) & set(actual) if expected[n] != actual[n]):
        key = name.removesuffix(".json")
        key = key if key.startswith("v2/") else key.rsplit("/", 1)[-1]
        if name == BUNDLE or key not in old_defs or key not in new_defs:
            lines.append(f"changed file {name}")
        else:
            lines.append(f"changed file {name}: {describe_definition_change(old_defs[key], new_defs[key])}")
    if new_bundle is not None and lines:
        added = sorted(set(new_defs) - set(old_defs))
        removed = sorted(set(old_defs) - set(new_defs))
        changed = sorted(k for k in set(old_defs) & set(new_defs) if old_defs[k] != new_defs[k])
        lines.append(f"bundle definitions: +{len(added)} -{len(removed)} ~{len(changed)}")
        lines += [f"  + {k}" for k in added[:40]] + [f"  - {k}" for k in removed[:40]]
        lines += [f"  ~ {k}: {describe_definition_change(old_defs[k], new_defs[k])}" for k in changed[:60]]
    return lines


def test_checked_in_bundle_matches_its_manifest() -> None:
    manifest = read_manifest(SCHEMA_DIR / "SHA256SUMS")
    assert len(manifest) > 400
    assert hashlib.sha256((SCHEMA_DIR / BUNDLE).read_bytes()).hexdigest() == manifest[BUNDLE]


def test_drift_report_names_files_and_definitions() -> None:
    """The report is readable: it must name the changed definition and property (so it can fail)."""
    old = {"definitions": {"A": {"properties": {"x": {}}}, "v2": {"Turn": {"properties": {"id": {}}, "required": ["id"]}}}}
    new = {"definitions": {"A": {"properties": {"x": {}}}, "v2": {"Turn": {"properties": {"id": {}, "y": {}}, "required": ["id"]},
                                                               "New": {}}}}
    rep = drift_report({"v2/Turn.json": "1", "Gone.json": "2"}, {"v2/Turn.json": "3", "v2/New.json": "4"}, old, new)
    assert "added file   v2/New.json" in rep
    assert "removed file Gone.json" in rep
    assert "changed file v2/Turn.json: +props ['y']" in rep
    assert "  + v2/New" in rep


def test_pinned_binary_generates_the_checked_in_schema(codex_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "schema"
    proc = subprocess.run([str(codex_bin), "app-server", "generate-json-schema", "--out", str(out), "--experimental"],
                          capture_output=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    expected = read_manifest(SCHEMA_DIR / "SHA256SUMS")
    actual = hash_tree(out)
    if expected == actual:
        return
    old_bundle = json.loads((SCHEMA_DIR / BUNDLE).read_text())
    new_path = out / BUNDLE
    new_bundle = json.loads(new_path.read_text()) if new_path.exists() else None
    report = drift_report(expected, actual, old_bundle, new_bundle)
    pytest.fail(f"schema drift against {SCHEMA_DIR.name} ({len(report)} lines):\n" + "\n".join(report[:200]),
                pytrace=False)
