"""``codexrt diff`` on real Git repositories made in tmp dirs (R-DIFF-1). Git's own behaviour
(binary files, size and time limits, a slow fake ``git``) is covered by
``tests/e2e/test_workspace_diff.py``; here: the command's output, ``--json`` and exit statuses."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from codexrt_cli._main import main

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "tracked.txt").write_text("one\n")
    _git(r, "add", "tracked.txt")
    _git(r, "commit", "-q", "-m", "init")
    (r / "staged.txt").write_text("staged\n")
    _git(r, "add", "staged.txt")
    (r / "tracked.txt").write_text("one\ntwo\n")
    (r / "new.txt").write_text("untracked\n")
    return r


def test_r_diff_1_cli_prints_staged_unstaged_untracked(repo, capsys):
    assert main(["diff", "--cwd", str(repo)]) == 0
    out = capsys.readouterr().out
    staged, rest = out.split("# --- unstaged ---\n")
    assert staged.startswith("# --- staged ---\n") and "+staged" in staged
    unstaged, untracked = rest.split("# --- untracked ---\n")
    assert "+two" in unstaged and "+untracked" in untracked


def test_r_diff_1_cli_json_is_the_serve_result(repo, capsys):
    assert main(["diff", "--cwd", str(repo / "."), "--json", "--session-id", "s-9"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (res["status"], res["sessionId"]) == ("ok", "s-9")
    assert res["untrackedFiles"] == ["new.txt"]


def test_r_diff_1_cli_non_git_dir_has_its_own_status(tmp_path, capsys):
    assert main(["diff", "--cwd", str(tmp_path), "--json"]) == 4
    assert json.loads(capsys.readouterr().out)["status"] == "notGit"


def test_r_diff_1_cli_size_limit_is_reported(repo, capsys):
    (repo / "big.txt").write_text("x" * 50_000)
    code = main(["diff", "--cwd", str(repo), "--max-bytes", "2000"])
    captured = capsys.readouterr()
    assert code == 3  # incomplete: the huge untracked file was not read
    assert "xxxx" not in captured.out
    assert "codexrt diff: truncated" in captured.err and "1 untracked file(s) left out" in captured.err


def test_r_diff_1_cli_rejects_bad_limits(repo, capsys):
    assert main(["diff", "--cwd", str(repo), "--timeout", "0"]) == 2
