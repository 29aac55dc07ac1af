"""``examples/quickstart.ipynb`` executed against the real ``codex app-server`` and the loopback
model, the way Jupyter runs it: every code cell inside a running asyncio loop, top-level
``await`` allowed — once from the checkout, and once **from a wheel built and installed in a
fresh venv outside the checkout**, with nothing but a Codex CLI on ``PATH`` (issue 22).

Why no nbclient: it would add jupyter_client, a kernel and ZeroMQ to the test dependencies.
What the notebook needs proving is that codexrt works *while an asyncio loop runs on the
calling thread* — so a small runner (in a fresh interpreter) compiles each cell with
``PyCF_ALLOW_TOP_LEVEL_AWAIT`` and executes it from inside ``asyncio.run(...)``, as IPython's
kernel does, sharing one namespace across cells.

The wheel variant installs with ``--no-index`` from ``.cache/wheelhouse`` (filled by
``.ci/setup``, outside the tests' network namespace): the tests reach no package index.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import ROOT

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
WHEELHOUSE = ROOT / ".cache" / "wheelhouse"

RUNNER = r'''
import ast, asyncio, json, sys

async def main(path):
    asyncio.get_running_loop()  # the cells run while this loop runs, as in Jupyter
    nb = json.load(open(path, encoding="utf-8"))
    ns = {"__name__": "__main__"}
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for i, cell in enumerate(cells):
        src = "".join(cell["source"])
        code = compile(src, f"<cell {i}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, ns)
        if asyncio.iscoroutine(result):
            await result
        print(f"=== cell {i} ok", flush=True)

asyncio.run(main(sys.argv[1]))
'''


def _check_output(proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    n_code = sum(1 for c in nb["cells"] if c["cell_type"] == "code")
    assert out.count("=== cell ") == n_code
    assert "READY" in out
    assert "completed | d0 d1 d2 d3 d4 d5" in out
    assert "approval requested: run command:" in out and "command output seen by the model: True" in out
    assert "completed | awaited reply" in out
    assert "completed | from codexrt.aio" in out
    assert "closed: True" in out
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")  # committed clean


def _cli_only_path(tmp_path: Path, codex_bin: Path) -> str:
    """A PATH with the Codex CLI (as ``codex``) and the system's tools, nothing of the checkout."""
    bindir = tmp_path / "cli-bin"
    bindir.mkdir()
    (bindir / "codex").symlink_to(codex_bin)
    return os.pathsep.join([str(bindir), "/usr/bin", "/bin"])


def test_quickstart_notebook_runs_in_an_asyncio_loop(real_env, codex_bin, tmp_path):
    env = dict(real_env)
    env.pop("CODEX_HOME", None)  # the notebook makes its own throw-away home
    env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = _cli_only_path(tmp_path, codex_bin)  # found by discovery, as a user's would be
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    _check_output(proc)


def test_quickstart_notebook_runs_from_the_built_wheel_in_a_fresh_venv(real_env, codex_bin, tmp_path):
    if not any(WHEELHOUSE.glob("trio-*.whl")):
        if os.environ.get("CODEXRT_REQUIRE_REAL") == "1":
            pytest.fail(f"{WHEELHOUSE} has no wheels: run .ci/setup")
        pytest.skip(f"{WHEELHOUSE} has no wheels: run .ci/setup")
    dist = tmp_path / "dist"
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--find-links",
                    str(WHEELHOUSE), "--wheel-dir", str(dist), str(ROOT)],
                   check=True, timeout=300, env=pip_env, capture_output=True)
    wheel = next(dist.glob("codexrt-*.whl"))
    venv = tmp_path / "venv"  # outside the checkout
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    vpy = venv / "bin" / "python"
    subprocess.run([str(vpy), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(WHEELHOUSE),
                    str(wheel)], check=True, timeout=300, env=pip_env, capture_output=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "quickstart.ipynb").write_bytes(NOTEBOOK.read_bytes())  # as a user who downloaded it
    env = {k: v for k, v in real_env.items() if k not in ("CODEX_HOME", "PYTHONPATH")}
    env["PATH"] = _cli_only_path(tmp_path, codex_bin)
    env["HOME"] = str(tmp_path / "home")
    proc = subprocess.run([str(vpy), "-c", RUNNER, "quickstart.ipynb"], capture_output=True, text=True,
                          timeout=180, cwd=work, env=env, stdin=subprocess.DEVNULL)
    _check_output(proc)
    # It really ran the installed wheel, not the checkout.
    where = subprocess.run([str(vpy), "-c", "import codexrt, codexrt.loopback; print(codexrt.__file__)"],
                           capture_output=True, text=True, cwd=work, env=env, timeout=60)
    assert where.returncode == 0 and str(venv) in where.stdout and str(ROOT) not in where.stdout, where
