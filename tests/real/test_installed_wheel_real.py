"""codexrt installed into a project as the README says (issue 33): the built wheel with the
``[cli]`` extra (the official CLI as a Python wheel) in a fresh venv **outside the checkout**,
no Node.js on ``PATH``, no checkout on ``sys.path``:

* the README's install snippet (the block after ``<!-- install-snippet: … -->``) runs against
  the bundled loopback model and prints the scripted answer;
* ``codexrt demo --yes`` prints the path of the CLI it started (never ``(discovery)``) — the
  ``[cli]`` wheel's binary, found by discovery;
* the venv has no ``peer_fixtures`` (the test helpers are not part of the wheel).

Everything installs with ``--no-index`` from ``.cache/wheelhouse``, which ``.ci/setup --tests``
fills (with the ``[cli]`` wheel) outside the tests' network namespace. ``CODEXRT_WHEELHOUSE``
names another wheelhouse (a local run whose shared ``.cache`` lacks the ``[cli]`` wheel).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import ROOT

WHEELHOUSE = Path(os.environ.get("CODEXRT_WHEELHOUSE") or ROOT / ".cache" / "wheelhouse")
SNIPPET_MARK = "<!-- install-snippet:"


def _readme_snippet() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(re.escape(SNIPPET_MARK) + r".*?-->\s*\n```python\n(.*?)\n```", text, re.S)
    assert m is not None, "README.md lost its install snippet"
    return m.group(1) + "\n"


def _need(pattern: str) -> None:
    if not any(WHEELHOUSE.glob(pattern)):
        msg = f"{WHEELHOUSE} has no {pattern}: run bash .ci/setup --tests"
        if os.environ.get("CODEXRT_REQUIRE_REAL") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def project_venv(tmp_path_factory) -> Path:
    _need("trio-*.whl")
    _need("openai_codex_cli_bin-*.whl")
    tmp = tmp_path_factory.mktemp("project")
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--find-links",
                    str(WHEELHOUSE), "--wheel-dir", str(dist), str(ROOT)],
                   check=True, timeout=300, env=pip_env, capture_output=True)
    wheel = next(dist.glob("codexrt-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                    str(WHEELHOUSE), f"{wheel}[cli]"], check=True, timeout=600, env=pip_env, capture_output=True)
    return venv


def _user_env(tmp_path: Path) -> dict[str, str]:
    """A user's shell without Node and without the checkout: PATH holds only a few system tools
    (the demo's command runs ``python3``), HOME is empty, nothing names a CLI."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("python3", "sh", "bash", "env"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CODEX", "PYTHON", "OPENAI_", "VIRTUAL_ENV"))}
    env.update(PATH=str(bindir), HOME=str(tmp_path / "home"), NO_PROXY="127.0.0.1,localhost,::1")
    (tmp_path / "home").mkdir()
    assert shutil.which("node", path=env["PATH"]) is None and shutil.which("codex", path=env["PATH"]) is None
    return env


def test_readme_snippet_runs_from_the_wheel_with_the_cli_extra(project_venv, tmp_path):
    env = _user_env(tmp_path)
    work = tmp_path / "my-project"
    work.mkdir()
    vpy = project_venv / "bin" / "python"
    proc = subprocess.run([str(vpy), "-c", _readme_snippet()], capture_output=True, text=True, timeout=180,
                          cwd=work, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "completed: codexrt works in this project", proc.stdout + proc.stderr
    probe = subprocess.run(
        [str(vpy), "-c", "import importlib.util as u, codexrt; print(codexrt.__file__); "
                         "print(u.find_spec('peer_fixtures') is None, u.find_spec('codex_cli_bin') is not None)"],
        capture_output=True, text=True, cwd=work, env=env, timeout=60)
    where, no_helpers, has_cli = probe.stdout.split()
    assert str(project_venv) in where and str(ROOT) not in where
    assert (no_helpers, has_cli) == ("True", "True"), probe.stdout + probe.stderr


def test_installed_demo_names_the_cli_it_started(project_venv, tmp_path):
    env = _user_env(tmp_path)
    proc = subprocess.run([str(project_venv / "bin" / "codexrt"), "demo", "--yes"], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    line = next((l for l in proc.stdout.splitlines() if l.strip().startswith("codex:")), None)
    assert line is not None, proc.stdout + proc.stderr
    assert "(discovery)" not in line and str(project_venv) in line and "codex_cli_bin" in line, line
    assert proc.returncode == 0, proc.stdout + proc.stderr
