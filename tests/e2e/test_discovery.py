"""Split from ``tests/sansio/test_discovery.py`` by layer (issue #20):
the tests that start processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from codexrt._io import _discovery as disc
from codexrt._io._discovery import discover_cli, probe_version, probe_version_detailed
from tests._support import process_alive, wait_until
from tests.sansio.test_discovery import real_binary, script


async def test_read_login_shell_path_uses_markers_and_ignores_profile_noise(tmp_path: Path) -> None:
    shell = script(
        tmp_path / "fake-sh",
        '#!/bin/sh\n[ "$1" = -l ] || exit 9\nshift\necho "welcome to the machine"\necho "noise" >&2\n'
        'PATH=/from/profile:/usr/bin\nexport PATH\nexec /bin/sh "$@"\n',
    )
    got = await disc.read_login_shell_path(env={"SHELL": str(shell), "PATH": "/usr/bin:/bin"}, timeout=10)
    assert got == "/from/profile:/usr/bin"


async def test_read_login_shell_path_times_out_and_reaps(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    shell = script(tmp_path / "slow-sh", f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 30\n")
    start = trio.current_time()
    got = await disc.read_login_shell_path(env={"SHELL": str(shell)}, timeout=0.5)
    assert got is None
    assert trio.current_time() - start < 5
    pid = int(pidfile.read_text())
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: not our child any more
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_r_cli_7_version_probe_tolerates_warnings(tmp_path: Path) -> None:
    fake = script(tmp_path / "codex", "#!/bin/sh\necho 'WARNING: something odd'\necho 'codex-cli 1.2.3'\n")
    info = await probe_version(fake)
    assert info is not None and info.version == "1.2.3" and info.line == "codex-cli 1.2.3"


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        ("echo 'codex-cli 1.2.3'; exit 2", "exitNonZero"),
        ("echo 'codex 1.2.3'", "noVersionLine"),
        ("echo 'not codex-cli 1.2.3 at all'", "noVersionLine"),
    ],
)
async def test_r_cli_7_version_probe_requires_exit_0_and_version_line(tmp_path: Path, body: str, outcome: str) -> None:
    fake = script(tmp_path / "codex", f"#!/bin/sh\n{body}\n")
    res = await probe_version_detailed(fake)
    assert res.version is None and res.outcome == outcome


async def test_r_cli_7_version_probe_spawn_failure(tmp_path: Path) -> None:
    res = await probe_version_detailed(tmp_path / "missing")
    assert res.version is None and res.outcome == "spawnFailed"


async def test_r_cli_7_version_probe_timeout_reaps_child(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    fake = script(tmp_path / "codex", f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 30\n")
    res = await probe_version_detailed(fake, timeout=0.5)
    assert res.outcome == "timeout" and res.version is None
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_r_cli_7_version_probe_bounds_output(tmp_path: Path) -> None:
    fake = script(tmp_path / "codex", "#!/bin/sh\nhead -c 1000000 /dev/zero | tr '\\0' 'x'\necho\necho 'codex-cli 9.9.9'\n")
    res = await probe_version_detailed(fake, timeout=10)
    assert res.outcome == "noVersionLine"  # the version line came after the 64 KiB bound


@pytest.mark.real
async def test_r_cli_7_real_binary_version() -> None:
    from peer_fixtures.codex_bin import pinned_version

    binary = real_binary()
    [c] = discover_cli(env={"CODEX_BIN": str(binary)}, home=Path("/nonexistent"), common_dirs=[]).candidates
    info = await probe_version(c)
    assert info is not None and info.version == pinned_version()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["hangs", "answers-and-leaves-a-child"])
async def test_r_cli_7_version_probe_leaves_nothing_running(tmp_path: Path, how: str) -> None:
    """Whatever the probed CLI starts dies with the probe: a hanging wrapper's ``sleep`` (killed
    at the timeout) and a child left behind by a CLI that answered (swept after it exits)."""
    pidfile = tmp_path / "child.pid"
    body = ("sleep 300 >/dev/null 2>&1 &\necho $! > \"$PIDFILE\"\n"
            + ("wait\n" if how == "hangs" else "echo 'codex-cli 9.9.9'\n"))
    fake = script(tmp_path / "codex", "#!/bin/sh\n" + body)
    res = await probe_version_detailed(fake, timeout=2.0, env={**os.environ, "PIDFILE": str(pidfile)})
    assert res.outcome == ("timeout" if how == "hangs" else "ok"), res
    child = int(pidfile.read_text())
    await wait_until(lambda: not process_alive(child), "the probe to kill the CLI's child", timeout=5)
