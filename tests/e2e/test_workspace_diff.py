"""Workspace diff against real Git repositories made in tmp dirs, and fake ``git`` scripts
for the failure modes (R-DIFF-1).

Timing: these tests run real child processes, so trio's autojump clock cannot be used (a
blocked wait on a child would jump straight to the deadline). Time limits are small real
bounds; no test sleeps to order events.
"""

from __future__ import annotations

import datetime as dt
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from codexrt._io._workspace import DiffStatus, read_workspace_diff, run_limited
from tests._support import wait_until

GIT = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
pytestmark = pytest.mark.skipif(not GIT, reason="git is not installed")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "user.name", "Test User")
    git(r, "config", "user.email", "test@example.invalid")
    git(r, "config", "commit.gpgsign", "false")
    (r / "tracked.txt").write_text("one\ntwo\n")
    (r / ".gitignore").write_text("ignored.log\n")
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "init")
    return r


def fake_git(bindir: Path, body: str) -> Path:
    """A ``git`` on PATH that runs ``body`` (Python) instead of Git."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / "git"
    path.write_text(f"#!{sys.executable}\nimport os, sys\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def env_with_path(bindir: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def assert_reaped(pid: int) -> None:
    # os.kill(pid, 0) still succeeds on a zombie, so this proves the child was reaped.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_r_diff_1_staged_unstaged_untracked(repo: Path) -> None:
    (repo / "tracked.txt").write_text("one\nTWO\n")  # unstaged
    (repo / "staged.txt").write_text("new staged\n")
    git(repo, "add", "staged.txt")
    (repo / "fresh.txt").write_text("untracked line\n")
    (repo / "ignored.log").write_text("noise\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "deep file.txt").write_text("spaces ok\n")

    with trio.fail_after(20):
        diff = await read_workspace_diff(repo, session_id="sess-1")

    assert diff.status is DiffStatus.OK and diff.message is None
    assert diff.session_id == "sess-1" and diff.cwd == str(repo)
    assert Path(diff.repo_root or "").resolve() == repo.resolve()
    assert dt.datetime.fromisoformat(diff.read_at.replace("Z", "+00:00")).tzinfo is not None
    assert diff.elapsed >= 0
    assert "+new staged" in diff.staged and "staged.txt" in diff.staged
    assert "tracked.txt" not in diff.staged
    assert "-two" in diff.unstaged and "+TWO" in diff.unstaged
    assert "staged.txt" not in diff.unstaged
    assert diff.untracked_files == ("fresh.txt", "sub/deep file.txt")
    assert "+untracked line" in diff.untracked and "+spaces ok" in diff.untracked
    assert "new file mode" in diff.untracked
    assert "ignored.log" not in diff.untracked and "ignored.log" not in diff.untracked_files
    assert diff.binary_files == () and diff.omitted_files == ()
    wire = diff.to_dict()
    assert wire["status"] == "ok" and wire["sessionId"] == "sess-1" and wire["cwd"] == str(repo)


async def test_r_diff_1_clean_repo_and_subdirectory_cwd(repo: Path) -> None:
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    with trio.fail_after(20):
        diff = await read_workspace_diff(repo / "pkg", session_id="s")
    assert diff.status is DiffStatus.OK
    assert diff.cwd == str(repo / "pkg")
    # paths are repository-relative whatever the cwd inside the work tree
    assert diff.untracked_files == ("pkg/mod.py",)
    git(repo, "add", "pkg")
    git(repo, "commit", "-q", "-m", "pkg")
    with trio.fail_after(20):
        clean = await read_workspace_diff(repo, session_id="s")
    assert clean.status is DiffStatus.OK and clean.is_empty


async def test_r_diff_1_fresh_repo_without_commits(tmp_path: Path) -> None:
    r = tmp_path / "empty"
    r.mkdir()
    git(r, "init", "-q")
    (r / "a.txt").write_text("a\n")
    git(r, "add", "a.txt")
    with trio.fail_after(20):
        diff = await read_workspace_diff(r, session_id="s")
    assert diff.status is DiffStatus.OK and "+a" in diff.staged


async def test_r_diff_1_binary_files_are_marked_not_inlined(repo: Path) -> None:
    payload = bytes(range(256)) * 8 + b"\0SECRETBLOB\0"
    (repo / "img.bin").write_bytes(payload)  # untracked binary
    (repo / "staged.bin").write_bytes(payload)
    git(repo, "add", "staged.bin")
    with trio.fail_after(20):
        diff = await read_workspace_diff(repo, session_id="s")
    assert diff.status is DiffStatus.OK
    assert set(diff.binary_files) == {"img.bin", "staged.bin"}
    everything = diff.staged + diff.unstaged + diff.untracked
    assert "SECRETBLOB" not in everything and "\0" not in everything
    assert "Binary files" in diff.untracked and "Binary files" in diff.staged


async def test_r_diff_1_huge_untracked_file_hits_size_limit(repo: Path) -> None:
    (repo / "small.txt").write_text("small\n")
    with open(repo / "huge.txt", "w") as f:
        f.write("x" * 100 + "\n")
        f.truncate(8 * 1024 * 1024)  # 8 MiB, sparse
    with trio.fail_after(20):
        diff = await read_workspace_diff(repo, session_id="s", max_bytes=50_000)
    assert diff.status is DiffStatus.TRUNCATED
    assert "huge.txt" in diff.omitted_files and "huge.txt" in diff.untracked_files
    assert "+small" in diff.untracked
    total = sum(len(s.encode()) for s in (diff.staged, diff.unstaged, diff.untracked))
    assert total <= 50_000
    assert "untracked file(s) not shown" in (diff.message or "")


async def test_r_diff_1_huge_tracked_change_is_cut_and_child_killed(repo: Path) -> None:
    (repo / "tracked.txt").write_text("line\n" * 400_000)  # ~2 MB of unstaged diff
    with trio.fail_after(20):
        diff = await read_workspace_diff(repo, session_id="s", max_bytes=30_000)
    assert diff.status is DiffStatus.TRUNCATED
    assert 0 < len(diff.unstaged.encode()) <= 30_000
    assert diff.untracked == "" and diff.omitted_files == ()


async def test_r_diff_1_non_git_directory_has_explicit_status(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    with trio.fail_after(20):
        diff = await read_workspace_diff(plain, session_id="s", env=env)
    assert diff.status is DiffStatus.NOT_GIT
    assert diff.to_dict()["status"] == "notGit"
    assert diff.is_empty and diff.repo_root is None


async def test_r_diff_1_inside_dot_git_is_not_a_work_tree(repo: Path) -> None:
    with trio.fail_after(20):
        diff = await read_workspace_diff(repo / ".git", session_id="s")
    assert diff.status is DiffStatus.NOT_GIT


async def test_r_diff_1_git_missing_from_path(tmp_path: Path, repo: Path) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    diff = await read_workspace_diff(repo, session_id="s", env={**os.environ, "PATH": str(empty)})
    assert diff.status is DiffStatus.GIT_MISSING
    assert diff.to_dict()["status"] == "gitMissing"


async def test_r_diff_1_slow_git_hits_time_limit_and_is_reaped(tmp_path: Path, repo: Path) -> None:
    pidfile = tmp_path / "pid"
    bindir = tmp_path / "slowbin"
    fake_git(bindir, f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\nos.execvp('sleep', ['sleep', '60'])")
    start = trio.current_time()
    with trio.fail_after(20):
        diff = await read_workspace_diff(repo, session_id="s", timeout=0.5, env=env_with_path(bindir))
    assert diff.status is DiffStatus.TIMEOUT
    assert 0.5 <= trio.current_time() - start < 10
    assert "0.5 s" in (diff.message or "")
    assert_reaped(int(pidfile.read_text()))


async def test_r_diff_1_cancel_during_git_kills_and_reaps(tmp_path: Path, repo: Path) -> None:
    pidfile = tmp_path / "pid"
    bindir = tmp_path / "slowbin"
    fake_git(bindir, f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\nos.execvp('sleep', ['sleep', '60'])")
    with trio.fail_after(20):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: read_workspace_diff(repo, session_id="s", timeout=60, env=env_with_path(bindir))
                )
                await wait_until(lambda: pidfile.exists() and pidfile.read_text(), "the slow git to write its pid")
                scope.cancel()
    assert scope.cancelled_caught
    assert_reaped(int(pidfile.read_text()))


async def test_r_diff_1_chatty_stderr_is_drained_and_limited(tmp_path: Path, repo: Path) -> None:
    bindir = tmp_path / "chattybin"
    body = f"""
args = sys.argv[1:]
while args and args[0] == '-c':
    args = args[2:]
if args[0] == 'rev-parse':
    print({str(repo)!r}); sys.exit(0)
if args[0] == 'diff':
    # far more than a pipe buffer on stderr *before* any stdout: a reader that drains
    # stdout first would deadlock here
    sys.stderr.write('warning: chatty\\n' * 200000); sys.stderr.flush()
    sys.stdout.write('diff --git a/f b/f\\n+ok\\n'); sys.exit(0)
sys.exit(0)
"""
    fake_git(bindir, body)
    with trio.fail_after(20):
        diff = await read_workspace_diff(
            repo, session_id="s", max_stderr_bytes=1000, env=env_with_path(bindir)
        )
    assert diff.status is DiffStatus.OK
    assert diff.staged == "diff --git a/f b/f\n+ok\n" == diff.unstaged
    assert diff.stderr_truncated


async def test_r_diff_1_other_git_failures_are_errors_with_redacted_message(tmp_path: Path, repo: Path) -> None:
    bindir = tmp_path / "brokenbin"
    fake_git(bindir, "sys.stderr.write('fatal: boom token=supersecretvalue123\\n'); sys.exit(2)")
    diff = await read_workspace_diff(repo, session_id="s", env=env_with_path(bindir))
    assert diff.status is DiffStatus.ERROR
    assert "boom" in (diff.message or "") and "supersecretvalue123" not in (diff.message or "")


async def test_run_limited_limits_each_pipe() -> None:
    code = "import sys; sys.stderr.write('e' * 300000); sys.stdout.write('o' * 300000)"
    with trio.fail_after(20):
        out = await run_limited([sys.executable, "-c", code], stdout_limit=1000, stderr_limit=10)
    assert out.stdout == b"o" * 1000 and out.stdout_truncated
    assert out.stderr == b"e" * 10 and out.stderr_truncated
    assert out.returncode != 0  # killed after the stdout overflow
    with trio.fail_after(20):
        ok = await run_limited([sys.executable, "-c", "print('hi')"], stdout_limit=100, stderr_limit=100)
    assert (ok.returncode, ok.stdout, ok.stdout_truncated) == (0, b"hi\n", False)


async def test_limits_are_validated(repo: Path) -> None:
    with pytest.raises(ValueError):
        await read_workspace_diff(repo, session_id="s", timeout=0)
