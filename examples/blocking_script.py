"""The blocking facade from a plain script, against the bundled loopback model.

    .venv/bin/python examples/blocking_script.py

Starts the loopback model and a throw-away CODEX_HOME (``codexrt.loopback``, as ``codexrt demo``
does), then uses ``codexrt.blocking`` exactly as a script with a real Codex login would — only
the ``open_loopback`` lines differ (with a login: ``codexrt.blocking.connect(cwd=".")``).
"""

from __future__ import annotations

import codexrt
import codexrt.blocking
from codexrt.loopback import open_loopback


def ask(request: codexrt.blocking.ApprovalRequest) -> str:
    print(f"\n[approval requested: {request.describe()} → accept]")
    return "accept"


def main() -> int:
    with open_loopback() as lb, codexrt.blocking.connect(lb.config, approvals=ask) as rt:
        first = rt.send("Hello [[mock:deltas:6]]")
        print(first)
        op = rt.stream("[[mock:exec:python3 -c 'print(6*7)']]", thread_id=first.thread_id,
                       settings=codexrt.Settings(approval_policy="untrusted", sandbox="read-only"))
        for text in op.text():
            print(text, end="", flush=True)
        print(f"\n[{op.wait().status}] turns so far: {len(rt.list_turns(first.thread_id)['data'])}")
        return 0 if op.result.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
