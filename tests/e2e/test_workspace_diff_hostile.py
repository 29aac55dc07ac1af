"""Git runs only git (R-DIFF-1, issue 18): a repository whose config and attributes name a
program for every hook git offers, read by ``read_workspace_diff`` (``codexrt diff``,
``codex.readWorkspaceDiff`` and commit-message generation all go through it).

Every hostile program is one script that writes a marker file named after its role; the test
first proves the trap works (a plain ``git diff`` with the same environment leaves markers),
then reads the workspace diff and checks that no marker appeared and that staged, unstaged and
untracked changes are all in the result with their raw content.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from codexrt._io._workspace import DiffStatus, read_workspace_diff

GIT = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
pytestmark = pytest.mark.skipif(not GIT, reason="git is not installed")

HOOKS = ("pre-commit", "post-index-change", "post-checkout", "reference-transaction", "pre-auto-gc",
         "fsmonitor-watchman", "post-rewrite")


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    markers = tmp_path / "markers"
    markers.mkdir()
    evil = tmp_path / "evil.sh"
    # writes a marker named after its first argument, then passes stdin through (a filter that
    # ran would still produce plausible output, so only the marker tells)
    evil.write_text(f'#!/bin/sh\ntouch "{markers}/$1"\ncat\n')
    evil.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)

    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.name", "T")
    git("config", "user.email", "t@example.invalid")
    (repo / ".gitattributes").write_text(
        "*.txt filter=evil diff=evil\n*.md filter=we.ird diff=evil\n*.dat filter=glob\n")
    (repo / "staged.txt").write_text("base staged\n")
    (repo / "work.txt").write_text("base work\n")
    (repo / "notes.md").write_text("base notes\n")
    (repo / "data.dat").write_text("base data\n")
    git("add", ".")
    git("commit", "-q", "-m", "base")
    (repo / "staged.txt").write_text("RAW staged change\n")
    git("add", "staged.txt")
    (repo / "work.txt").write_text("RAW unstaged change\n")
    (repo / "notes.md").write_text("RAW notes change\n")
    (repo / "data.dat").write_text("RAW data change\n")
    (repo / "new.txt").write_text("RAW untracked content\n")

    # Only now the traps (nothing above ran a driver: none was configured yet).
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for h in HOOKS:
        (hooks / h).write_text(f'#!/bin/sh\n"{evil}" hook-{h} </dev/null\n')
        (hooks / h).chmod(0o755)
    for h in HOOKS:
        (repo / ".git" / "hooks" / h).write_text(f'#!/bin/sh\n"{evil}" githook-{h} </dev/null\n')
        (repo / ".git" / "hooks" / h).chmod(0o755)
    cfg = {
        "filter.evil.clean": f"{evil} filter-clean",
        "filter.evil.smudge": f"{evil} filter-smudge",
        "filter.evil.required": "true",
        "filter.we.ird.process": f"{evil} filter-process",
        "filter.we.ird.required": "true",
        "diff.evil.textconv": f"{evil} textconv",
        "diff.evil.command": f"{evil} diff-command",
        "diff.external": f"{evil} diff-external",
        "core.fsmonitor": str(evil) + "-fsmonitor",
        "core.hooksPath": str(hooks),
        "core.pager": f"{evil} pager",
        "pager.diff": f"{evil} pager-diff",
        "gpg.program": f"{evil} gpg",
        "log.showSignature": "true",
        "core.sshCommand": f"{evil} ssh",
        "credential.helper": f"!{evil} credential",
        "core.askPass": f"{evil} askpass",
        "core.editor": f"{evil} editor",
        "remote.origin.url": f"ext::{evil} ext %S",
        "remote.origin.uploadpack": f"{evil} uploadpack",
        "remote.origin.promisor": "true",
        "diff.submodule": "diff",
    }
    for k, v in cfg.items():
        git("config", k, v)
    (tmp_path / "evil.sh-fsmonitor").write_text(f'#!/bin/sh\n"{evil}" fsmonitor </dev/null\n')
    (tmp_path / "evil.sh-fsmonitor").chmod(0o755)
    # a driver from the *global* config too (not only the repository's)
    (home / ".gitconfig").write_text(f"[filter \"glob\"]\n\tclean = {evil} global-clean\n\trequired = true\n")
    # make every tracked file's stat info stale so git must read (and filter) its content
    for name in ("staged.txt", "work.txt", "notes.md", "data.dat"):
        os.utime(repo / name, (1, 1))
    return repo, env, markers


def test_the_trap_works_on_plain_git(hostile) -> None:
    """Without codexrt's guards the same repository runs its programs: the test can fail."""
    repo, env, markers = hostile
    subprocess.run(["git", "diff"], cwd=repo, capture_output=True, env=env)
    subprocess.run(["git", "diff", "--no-index", "--", os.devnull, "new.txt"], cwd=repo, capture_output=True, env=env)
    assert os.listdir(markers), "the hostile config ran nothing even without guards"


async def test_r_diff_1_no_repository_program_runs_and_the_diff_is_raw(hostile) -> None:
    repo, env, markers = hostile
    diff = await read_workspace_diff(repo, session_id="s", env=env)
    assert sorted(os.listdir(markers)) == []
    assert diff.status is DiffStatus.OK, diff.message
    assert "+RAW staged change" in diff.staged and "-base staged" in diff.staged
    for raw in ("+RAW unstaged change", "+RAW notes change", "+RAW data change"):
        assert raw in diff.unstaged
    assert diff.untracked_files == ("new.txt",) and "+RAW untracked content" in diff.untracked


def test_r_diff_1_codexrt_diff_cli_runs_no_repository_program(hostile) -> None:
    repo, env, markers = hostile
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "codexrt_cli", "diff", "--cwd", str(repo)], cwd=root,
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(markers)) == []
    for raw in ("+RAW staged change", "+RAW unstaged change", "+RAW untracked content"):
        assert raw in proc.stdout


async def test_r_diff_1_driver_names_with_odd_characters_are_neutralized(hostile) -> None:
    """A subsection may hold any character but a newline (``=`` breaks ``git -c``)."""
    repo, env, markers = hostile
    evil = repo.parent / "evil.sh"
    subprocess.run(["git", "config", "filter.a=b c.clean", f"{evil} odd-clean"], cwd=repo, check=True, env=env)
    (repo / ".gitattributes").write_text('*.txt filter="a=b c"\n')
    for name in ("staged.txt", "work.txt"):
        os.utime(repo / name, (2, 2))
    diff = await read_workspace_diff(repo, session_id="s", env=env)
    assert diff.status is DiffStatus.OK, diff.message
    assert sorted(os.listdir(markers)) == [] and "+RAW unstaged change" in diff.unstaged
    assert stat.S_ISREG((repo / "work.txt").stat().st_mode)


@pytest.mark.parametrize("transport", ["ext", "uploadpack", "ssh"])
async def test_r_diff_1_lazy_fetch_of_a_partial_clone_starts_no_transport(tmp_path: Path, transport: str) -> None:
    """A partial clone misses the blobs the diff needs, so git would fetch them from the
    promisor remote — through an ``ext::`` command, the remote's ``uploadpack`` program or
    ``core.sshCommand``. Plain git runs each (the trap works); codexrt's read runs none (it
    reports an error instead of a diff it cannot compute)."""
    marker = tmp_path / "markers"
    marker.mkdir()
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\ntouch "{marker}/$1"\nexit 1\n')  # never waits on stdin
    evil.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"), GIT_CONFIG_NOSYSTEM="1")

    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env, timeout=60)

    src = tmp_path / "src"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    git(src, "config", "uploadpack.allowFilter", "true")
    (src / "a.txt").write_text("one\n")
    git(src, "add", ".")
    git(src, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "base")
    git(tmp_path, "-c", "protocol.file.allow=always", "clone", "-q", "--no-local", "--filter=blob:none",
        "--no-checkout", f"file://{src}", "dst")
    dst = tmp_path / "dst"
    git(dst, "reset", "-q")  # index from HEAD; the work tree stays empty, the blob is missing
    if transport == "ext":
        git(dst, "config", "remote.origin.url", f"ext::{evil} ext")
        git(dst, "config", "protocol.ext.allow", "always")
    elif transport == "uploadpack":
        git(dst, "config", "remote.origin.url", str(src))
        git(dst, "config", "remote.origin.uploadpack", f"{evil} uploadpack")
    else:
        git(dst, "config", "remote.origin.url", "ssh://example.invalid/repo")
        git(dst, "config", "core.sshCommand", f"{evil} ssh")
    subprocess.run(["git", "diff"], cwd=dst, capture_output=True, env=env, timeout=60)
    assert os.listdir(marker) == [transport], "the trap did not fire on plain git"
    os.unlink(marker / transport)
    diff = await read_workspace_diff(dst, session_id="s", env=env)
    assert os.listdir(marker) == []
    assert diff.status is DiffStatus.ERROR and "promisor" in (diff.message or "")
