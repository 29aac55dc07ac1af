"""Split from ``tests/sansio/test_cli_main.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import subprocess
import sys


from codexrt_cli import _main
from tests._support import ROOT


PROBE = """
import sys
from codexrt_cli._main import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("trio", "codexrt", "codexrt._runtime._runtime", "codexrt._serve._daemon", "msgspec") if m in sys.modules)
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


def _heavy_modules_after(argv: list[str]) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    line = [l for l in proc.stderr.splitlines() if l.startswith("HEAVY=")][-1]
    return line.removeprefix("HEAVY="), proc.stdout


def test_version_imports_nothing_heavy():
    heavy, out = _heavy_modules_after(["--version"])
    assert out.startswith("codexrt ")
    assert heavy == ""


def test_top_level_help_lists_every_command_without_importing_them():
    heavy, out = _heavy_modules_after(["--help"])
    assert heavy == ""
    for name, (_module, help_line) in _main.COMMANDS.items():
        assert name in out
        assert help_line.split()[0] in out
