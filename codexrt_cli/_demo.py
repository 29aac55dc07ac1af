"""``codexrt demo``: the whole thing working, in one step, with no account and no internet.

It starts the bundled **loopback model** (``codexrt.loopback``: a scripted
Responses-API server on 127.0.0.1), a **throw-away** ``CODEX_HOME`` whose ``config.toml``
points the real ``codex`` at it (no credentials, plugin sync and
analytics off), finds the **pinned real binary** installed by ``bash .ci/setup`` (else
codexrt's usual discovery), and then drives two real turns of ``codex app-server`` through
codexrt's blocking API (:mod:`codexrt.blocking`):

1. a question; the answer streams to the terminal as it arrives;
2. a request the model answers by asking to run a harmless command. The app-server asks for
   approval (``approvalPolicy: untrusted``, read-only sandbox). On a terminal you decide
   (y / n / always for this session). With ``--yes``, or without a terminal, the demo
   **accepts**, and says so: that command is the demo's own, fixed in its script
   (:data:`DEMO_COMMAND`); a request for any other command is declined. This choice is the
   demo's alone — codexrt itself never grants an approval by default (``codexrt run`` declines
   unless told ``--approve=accept``).

The model's words are scripted (it is a loopback stand-in); everything else — the app-server,
its sandbox running the command, the approval round trip, codexrt's supervision — is real.
Exit status 0 when both turns completed and the approval was answered, else 1.

:func:`loopback_environment` is shared with ``codexrt run --loopback``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

from codexrt import CodexError, Settings
from codexrt.loopback import Loopback, open_loopback

__all__ = ["add_parser", "run_demo", "loopback_environment", "Loopback", "DEMO_COMMAND", "find_codex_bin"]

#: The one command the demo's scripted model asks to run.
DEMO_COMMAND = "python3 -c 'print(6*7)'"
QUESTION = "Hello! What are you, in one sentence?"
ANSWER = ("I am the real `codex app-server`, supervised by codexrt, answering from a loopback "
          "model on 127.0.0.1 — no account and no internet needed.")
TASK = "Check that commands work here: run a harmless one and tell me what it printed."


def find_codex_bin(explicit: str | None = None) -> str | None:
    """The CLI to use: ``explicit``; else None when ``$CODEX_BIN`` (or another override
    variable) is set, so discovery honours it and names it in any error; else — in a source
    checkout set up by ``bash .ci/setup`` — its pinned binary; else None: discovery searches
    (an installed wheel has no checkout pin, so it always gets here)."""
    if explicit:
        return explicit
    if any(os.environ.get(var) for var in ("CODEX_BIN", "CODEX_PATH", "CODEX_CLI_PATH")):
        return None
    try:
        from peer_fixtures.codex_bin import native_binary

        found = native_binary()
    except ImportError:  # the test helpers are not on the path: look at the checkout's files
        found = _checkout_pinned_cli()
    except Exception:  # noqa: BLE001 - no pinned binary: fall back to discovery
        found = None
    return str(found) if found is not None else None


def _checkout_pinned_cli() -> Path | None:
    """The native binary ``bash .ci/setup`` installed for the pinned version, when this module
    runs from a source checkout; None otherwise (an installed wheel has no ``.ci`` beside it).
    Judged by discovery itself (the npm launcher's platform binary), from the filesystem only."""
    from codexrt import CodexError, discover_cli

    root = Path(__file__).resolve().parent.parent
    try:
        version = (root / ".ci" / "codex-version").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    launcher = root / ".cache" / f"codex-{version}" / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    if not launcher.is_file():
        return None
    try:
        found = discover_cli(explicit=launcher, env={}, home=root, common_dirs=[], python_paths=[]).first
    except CodexError:
        return None
    if found is None or not found.confirmed or found.native_path is None:
        return None
    return found.native_path if os.access(found.native_path, os.X_OK) else None


@contextlib.contextmanager
def loopback_environment(*, codex_bin: str | None = None, cwd: str | None = None) -> Iterator[Loopback]:
    """:func:`codexrt.loopback.open_loopback` with the CLI chosen by :func:`find_codex_bin`."""
    with open_loopback(codex_bin=find_codex_bin(codex_bin), cwd=cwd) as lb:
        yield lb


#: ``codexrt demo --help``: for people at a terminal.
DESCRIPTION = """\
Two real turns of the Codex app-server, supervised by codexrt, with no account and no
internet: a scripted loopback model on 127.0.0.1 answers, and a throw-away CODEX_HOME points
the real `codex` at it.

  1. a question, whose answer streams as it arrives;
  2. a request to run one harmless, fixed command: the app-server asks for approval and you
     decide (with --yes, or without a terminal, the demo accepts its own command and says so;
     codexrt itself never approves by default).

Exit status 0 when both turns completed, else 1.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "demo",
        help="two real turns against the bundled loopback model: streaming and one approval (no account)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--yes", action="store_true",
                   help=f"accept the demo's own command ({DEMO_COMMAND}) without asking")
    p.add_argument("--codex-bin", metavar="PATH", help="the Codex CLI to run (default: the one codexrt finds; see `codexrt doctor`)")
    p.set_defaults(func=lambda args: run_demo(yes=args.yes, codex_bin=args.codex_bin))
    return p


class _Printer:
    def __init__(self) -> None:
        self.out = sys.stdout
        self.lock = threading.Lock()

    def say(self, text: str = "", end: str = "\n") -> None:
        with self.lock:
            self.out.write(text + end)
            self.out.flush()


def run_demo(*, yes: bool = False, codex_bin: str | None = None) -> int:
    import codexrt.blocking
    from codexrt.loopback import Script

    p = _Printer()
    interactive = sys.stdin.isatty() and not yes
    decided: list[str] = []

    def approve(req: "codexrt.blocking.ApprovalRequest") -> str:
        p.say(f"\n  approval requested: {req.describe()}")
        if req.kind != "command" or DEMO_COMMAND not in (req.command or ""):
            p.say("  decided: decline — this is not the demo's own command")
            return _decided("decline")
        if not interactive:
            why = "--yes" if yes else "stdin is not a terminal"
            p.say(f"  decided: accept ({why}). The command is the demo's own, fixed and harmless; "
                  "codexrt itself never approves by default.")
            return _decided("accept")
        while True:
            with p.lock:
                p.out.write("  Allow? [y]es / [n]o / [a]lways for this session: ")
                p.out.flush()
            line = sys.stdin.readline()
            choice = {"y": "accept", "yes": "accept", "n": "decline", "no": "decline", "": "decline",
                      "a": "acceptForSession", "always": "acceptForSession"}.get(line.strip().lower())
            if not line:
                choice = "decline"
            if choice is not None:
                p.say(f"  decided: {choice} (your answer)")
                return _decided(choice)

    mock_box: list[Any] = []

    def _decided(choice: str) -> str:
        # The scripted model's next words depend on the answer (it is a stand-in model); the
        # command's real output is printed from the app-server's own item above.
        decided.append(choice)
        mock_box[0].enqueue(Script.reply(
            "The command ran in the sandbox after your approval; its output is shown above."
            if choice != "decline" else "You declined, so I did not run the command."))
        return choice

    try:
        with loopback_environment(codex_bin=codex_bin) as lb:
            mock_box.append(lb.mock)
            p.say("codexrt demo — the real `codex app-server`, supervised by codexrt, against a loopback model")
            settings = Settings(approval_policy="untrusted", sandbox="read-only")
            # start=True: a missing or broken CLI is reported here, before any turn is shown.
            with codexrt.blocking.connect(lb.config, approvals=approve, settings=settings, start=True) as rt:
                snap = rt.snapshot()
                pid = snap["pid"]
                # The CLI that really started (discovery's pick, or the one chosen), by its path.
                p.say(f"  codex:      {snap['cliPath'] or lb.codex_bin}")
                p.say(f"  model:      {lb.mock.base_url} (scripted, loopback only)")
                p.say(f"  CODEX_HOME: {lb.codex_home} (throw-away)")
                p.say(f"  workspace:  {lb.workspace}")
                # Turn 1: a streamed answer.
                lb.mock.enqueue(Script.reply(ANSWER, deltas=16, delta_interval=0.04))
                p.say(f"\n[1/2] you:   {QUESTION}")
                first = _stream_turn(rt, p, QUESTION)
                second = None
                if first.status == "completed":
                    # Turn 2: the model asks to run a command; the approval is answered above.
                    lb.mock.enqueue(Script.exec_command(DEMO_COMMAND))
                    p.say(f"\n[2/2] you:   {TASK}")
                    second = _stream_turn(rt, p, TASK, thread_id=first.thread_id)
            p.say(f"\ncodex app-server (pid {pid}) stopped and reaped; loopback model and CODEX_HOME removed.")
    except KeyboardInterrupt:
        # The blocking facade has stopped the turn and reaped the app-server by now.
        p.say("\ninterrupted (Ctrl+C): the turn was stopped and the app-server reaped.")
        return 130
    except CodexError as exc:
        print(f"codexrt demo: {exc.message}", file=sys.stderr)
        if exc.code in ("CODEX_CLI_UNAVAILABLE", "CODEX_CLI_OVERRIDE_INVALID"):
            print("(pip install 'codexrt[cli]' installs the official CLI binary; in a source checkout, "
                  "bash .ci/setup installs the pinned one)", file=sys.stderr)
        return 1
    ok = first.status == "completed" and second is not None and second.status == "completed" and bool(decided)
    if ok:
        p.say("demo OK: one streamed turn and one approval, through codexrt. "
              'Next: codexrt run --loopback "…", or the Python examples in the README.')
    else:
        failed = second if second is not None and second.status != "completed" else first
        p.say(f"demo did not complete: {failed}" if failed.status != "completed"
              else f"demo did not complete: the approval was {decided or 'not asked'}")
    return 0 if ok else 1


def _stream_turn(rt: Any, p: _Printer, text: str, thread_id: str | None = None) -> Any:
    op = rt.stream(text, thread_id=thread_id)
    open_line = False
    with op:
        for ev in op:
            item = ev.payload.get("item") or {}
            if ev.is_delta and ev.payload.get("stream") == "item/agentMessage/delta":
                if not open_line:
                    p.say("      codex: ", end="")
                    open_line = True
                p.say(ev.payload["delta"], end="")
            elif ev.kind == "itemStarted" and item.get("type") == "commandExecution":
                p.say(f"  … running: {item.get('command')}")
            elif ev.kind == "itemCompleted" and item.get("type") == "commandExecution":
                out = (item.get("aggregatedOutput") or "").strip()
                p.say(f"  {'✓' if item.get('status') == 'completed' else '✗'} {item.get('status')}"
                      + (f", exit {item.get('exitCode')}" if item.get("exitCode") is not None else "")
                      + (":" if out else ""))
                for line in out.splitlines()[-10:]:
                    p.say(f"    │ {line}")
            elif ev.kind == "itemCompleted" and item.get("type") == "agentMessage" and open_line:
                p.say("")
                open_line = False
    if open_line:
        p.say("")
    result = op.wait()
    p.say(f"      ({result.status} · thread {result.thread_id})")
    return result
