"""``examples/quickstart.ipynb`` executed against the real ``codex app-server`` and the loopback
model, the way Jupyter runs it: every code cell inside a running asyncio loop, top-level
``await`` allowed.

Why no nbclient: it would add jupyter_client, a kernel and ZeroMQ to the test dependencies.
What the notebook needs proving is that codexrt works *while an asyncio loop runs on the
calling thread* — so a small runner (in a fresh interpreter) compiles each cell with
``PyCF_ALLOW_TOP_LEVEL_AWAIT`` and executes it from inside ``asyncio.run(...)``, as IPython's
kernel does, sharing one namespace across cells.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests._support import ROOT

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"

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


def test_quickstart_notebook_runs_in_an_asyncio_loop(real_env, tmp_path):
    env = dict(real_env)
    env.pop("CODEX_HOME", None)  # the notebook makes its own throw-away home
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(NOTEBOOK)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    n_code = sum(1 for c in nb["cells"] if c["cell_type"] == "code")
    assert out.count("=== cell ") == n_code
    assert "READY" in out
    assert "completed | d0 d1 d2 d3 d4 d5" in out
    assert "approval requested: run command:" in out and "command output seen by the model: True" in out
    assert "completed | awaited reply" in out
    assert "closed: True" in out
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")  # committed clean
