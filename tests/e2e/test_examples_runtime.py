"""docs/runtime.md's example runs (issue 3 "one example script runs")."""

import subprocess
import sys

from tests._support import ROOT


def test_runtime_example_script_runs():
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "runtime_fake_peer.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # the example meets an approval, declines it (never approves by default), and completes
    assert "declining" in proc.stdout
    assert "[completed]" in proc.stdout
