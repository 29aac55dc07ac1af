"""Locate the pinned real ``codex`` native binary installed by ``.ci/setup``.

``.ci/setup`` runs ``npm install @openai/codex@<version>`` into ``.cache/codex-<version>``; the
npm package is a Node shim whose platform binary sits in an aliased optional dependency. Tests
spawn the *native* binary, not the shim, so signals reach the server itself.

``python -m peer_fixtures.codex_bin [--check] [--version V]`` prints the path.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_TRIPLES = {
    ("Linux", "x86_64"): ("linux-x64", "x86_64-unknown-linux-musl"),
    ("Linux", "aarch64"): ("linux-arm64", "aarch64-unknown-linux-musl"),
    ("Darwin", "x86_64"): ("darwin-x64", "x86_64-apple-darwin"),
    ("Darwin", "arm64"): ("darwin-arm64", "aarch64-apple-darwin"),
}


def pinned_version() -> str | None:
    """The version ``.ci/setup`` pins, or None outside a checkout (an installed wheel has no
    ``.ci``: callers then let discovery find the CLI)."""
    p = ROOT / ".ci" / "codex-version"
    return p.read_text().strip() if p.exists() else None


def old_version() -> str | None:
    p = ROOT / ".ci" / "codex-version-old"
    return p.read_text().strip() if p.exists() else None


def native_binary(version: str | None = None) -> Path | None:
    """Path of the native binary for ``version`` (default: the pinned one), or None (also
    when there is no pin, as in an installed wheel)."""
    version = version or pinned_version()
    if version is None:
        return None
    env = os.environ.get("CODEXRT_REAL_CODEX_BIN")
    if env and version == pinned_version():
        return Path(env) if Path(env).is_file() else None
    key = (platform.system(), platform.machine())
    if key not in _TRIPLES:
        return None
    pkg, triple = _TRIPLES[key]
    base = ROOT / ".cache" / f"codex-{version}" / "node_modules" / "@openai"
    for p in (
        base / f"codex-{pkg}" / "vendor" / triple / "bin" / "codex",  # hoisted (npm >= 7)
        base / "codex" / "node_modules" / "@openai" / f"codex-{pkg}" / "vendor" / triple / "bin" / "codex",
        base / f"codex-{pkg}" / "vendor" / triple / "codex" / "codex",  # older layouts
    ):
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m peer_fixtures.codex_bin")
    ap.add_argument("--check", action="store_true", help="exit 1 when the binary is missing")
    ap.add_argument("--version", default=None)
    ns = ap.parse_args(argv)
    path = native_binary(ns.version)
    if path is None:
        print(f"codex {ns.version or pinned_version()} native binary not found; run .ci/setup", file=sys.stderr)
        return 1 if ns.check else 0
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
