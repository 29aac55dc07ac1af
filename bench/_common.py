"""Helpers shared by the benchmark workers: where things are, peak RSS, timing.

Every benchmark runs in its own fresh interpreter (``python -m bench.run --worker NAME``) so
that peak RSS (``ru_maxrss``) belongs to that benchmark alone and one benchmark's garbage does
not slow the next. A worker prints one JSON object on its last stdout line.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def peak_rss_mb() -> float:
    """Peak resident set size of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def proc_status_mb(pid: int, key: str) -> float | None:
    """A memory figure of another process from ``/proc/PID/status`` (``VmRSS``, ``VmHWM``), MiB
    (Linux); None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def now() -> float:
    return time.perf_counter()


def emit(result: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def env_with_root() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def flood_cli(directory: str, *args: str) -> str:
    """An executable script that runs the flood peer (for ``--codex-bin``); it ignores the
    ``app-server`` argument a launcher adds."""
    import shlex

    from peer_fixtures.flood_peer import argv

    path = Path(directory) / "flood-codex"
    path.write_text(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\nexec {shlex.join(argv(*args))} \"$@\"\n")
    path.chmod(0o755)
    return str(path)
