"""``codexrt run "prompt"``: one turn from the terminal.

What it does: starts one supervised ``codex app-server`` (discovery as everywhere in codexrt,
or ``--codex-bin``), sends the prompt (a new thread, or ``--thread ID`` to continue one), and
streams the assistant's text to stdout as it arrives. While a tool runs, a status line on stderr
says what is running (redrawn in place, with elapsed time, when stderr is a terminal). The exit
status is the turn's: 0 completed, 1 failed (or nothing could be started), 130 interrupted or
cancelled, 2 bad usage.

Approvals (R-INT-3) are never granted by default:

* stdin is a terminal (and ``--approve`` not given): each request is shown on stderr and asked
  ``[y]es / [n]o / [a]lways for this session / [c]ancel the turn``; end of input declines;
* otherwise ``--approve`` decides: ``decline`` (the default), ``cancel``, or ``accept`` (an
  explicit opt-in). Requests that are not approvals (questions, forms) are declined.

``Ctrl+C`` (SIGINT) interrupts the turn (R-OP-5: ``turn/interrupt``, or a local cancel when it
had not started), waits for the turn's native terminal, prints its status and exits 130; a
second ``Ctrl+C`` during that wait kills the app-server's process group at once and exits 130.
The app-server runs in its own session (R-RT-7), so a terminal's Ctrl+C reaches only this
command, which decides what to do with it. The child is always reaped before exit.

``--json`` writes every runtime event as one JSON line (the ``codexrt serve`` event shape,
R-D-2) and ends with ``{"type": "result", ...}``; prompts and status still go to stderr.

``--loopback`` runs against the bundled loopback model with a throw-away ``CODEX_HOME`` (see
``codexrt demo``): no account, no network beyond 127.0.0.1.

Why Trio directly and not the blocking facade: a CLI owns its main thread, so it can run
``trio.run`` there and use Trio's signal receiver for SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import signal
import sys
from typing import Any, Iterator, Sequence, TextIO

import trio

from codexrt import (
    CodexError,
    CodexEvent,
    Interaction,
    InteractionError,
    Operation,
    Runtime,
    RuntimeConfig,
    Settings,
    open_runtime,
)
from codexrt._serve._cli_support import APPROVAL_POLICIES, SANDBOX_MODES

__all__ = ["add_parser", "run_turn", "EXIT_CODES"]

log = logging.getLogger("codexrt.run")

#: Exit status per turn status.
EXIT_CODES = {"completed": 0, "failed": 1, "interrupted": 130, "cancelled": 130}
_TOOL_ITEMS = {"commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch",
               "imageGeneration", "collabAgentToolCall"}
#: Requests `codexrt run` asks about on the terminal (the others are declined).
_PROMPTED = ("commandApproval", "fileChangeApproval", "mcpToolApproval")
_PROMPT = "  Allow? [y]es / [n]o / [a]lways for this session / [c]ancel the turn: "
_ANSWERS = {"y": "accept", "yes": "accept", "n": "decline", "no": "decline", "": "decline",
            "a": "acceptForSession", "always": "acceptForSession", "c": "cancel", "cancel": "cancel"}


#: ``codexrt run --help``: for people at a terminal (the module docstring is for developers).
DESCRIPTION = """\
Start a supervised `codex app-server`, send the prompt (a new thread, or --thread ID to
continue one), and stream the answer to stdout as it arrives. While a tool runs, a status line
on stderr says what is running.

Approvals are never granted unless you say so: at a terminal each request is asked
([y]es / [n]o / [a]lways for this session / [c]ancel); otherwise --approve decides
(decline by default).

Ctrl+C interrupts the turn and exits 130 once the app-server has stopped it; a second Ctrl+C
stops the app-server at once.

Exit status: 0 completed, 1 failed, 130 interrupted or cancelled, 2 bad usage.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "run",
        help="run one turn: stream the answer, ask for approvals, exit with the turn's status",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="?", help="the message; '-' or omitted reads it from stdin (when not a terminal)")
    p.add_argument("--thread", metavar="ID", help="continue this thread (default: start a new one)")
    p.add_argument("--json", action="store_true", help="write events as NDJSON on stdout instead of text")
    p.add_argument("--approve", choices=["ask", "decline", "cancel", "accept"], default=None,
                   help="how to answer approval requests: ask (default when stdin is a terminal), "
                        "decline (default otherwise), cancel (decline and stop the turn), accept")
    p.add_argument("--approval-policy", choices=sorted(APPROVAL_POLICIES), default=None,
                   help="when the app-server asks for approval (native setting; default: its config)")
    p.add_argument("--sandbox", choices=sorted(SANDBOX_MODES), default=None,
                   help="sandbox of the turn (default: the app-server's config)")
    p.add_argument("--model", help="model slug for the turn")
    p.add_argument("--skill", metavar="NAME=PATH", action="append", default=[],
                   help="use this skill in the turn (repeatable; NAME and PATH as `skills/list` gives them)")
    p.add_argument("--cwd", metavar="DIR", help="working directory of the turn (default: the current one)")
    p.add_argument("--codex-bin", metavar="PATH", help="the Codex CLI to run (default: found on PATH and the usual install places; see `codexrt doctor`)")
    p.add_argument("--codex-home", metavar="DIR", help="CODEX_HOME of the app-server (default: inherited)")
    p.add_argument("--loopback", action="store_true",
                   help="use the bundled loopback model and a throw-away CODEX_HOME (no account, no internet)")
    p.set_defaults(func=_main)
    return p


def _read_prompt(args: argparse.Namespace) -> str | None:
    if args.prompt not in (None, "-"):
        return args.prompt
    if sys.stdin.isatty():
        return None
    return sys.stdin.read().strip() or None


def _main(args: argparse.Namespace) -> int:
    prompt = _read_prompt(args)
    if not prompt:
        print("codexrt run: no prompt (give it as an argument, or pipe it on stdin)", file=sys.stderr)
        return 2
    skills = []
    for spec in args.skill:
        name, sep, path = spec.partition("=")
        if not (sep and name and path):
            print(f"codexrt run: --skill needs NAME=PATH, got {spec!r}", file=sys.stderr)
            return 2
        skills.append({"name": name, "path": path})
    if args.cwd and not os.path.isdir(args.cwd):
        # Said before anything starts; the directory is never created (a typo must leave no trace).
        print(f"codexrt run: --cwd {args.cwd!r} does not exist or is not a directory", file=sys.stderr)
        return 2
    interactive = sys.stdin.isatty() and args.prompt not in (None, "-")
    approve = args.approve or ("ask" if interactive else "decline")
    if approve == "ask" and not sys.stdin.isatty():
        print("codexrt run: --approve=ask needs a terminal on stdin", file=sys.stderr)
        return 2
    with _environment(args) as (config, note):
        if note:
            print(note, file=sys.stderr)
        settings = Settings(model=args.model, approval_policy=args.approval_policy, sandbox=args.sandbox,
                            cwd=os.path.abspath(args.cwd) if args.cwd else config.cwd)
        try:
            return trio.run(functools.partial(run_turn, config, prompt, settings, args.thread, approve, args.json,
                                              resumable=not args.loopback, skills=skills))
        except KeyboardInterrupt:  # a SIGINT before the turn existed: nothing to interrupt
            print("\ninterrupted", file=sys.stderr)
            return EXIT_CODES["interrupted"]
        except BrokenPipeError:
            # stdout's reader went away (``codexrt run … | head``): the turn was stopped and the
            # app-server reaped on the way out; end quietly, as a pipeline's producer does.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
            os.close(devnull)
            return 128 + signal.SIGPIPE


@contextlib.contextmanager
def _environment(args: argparse.Namespace) -> Iterator[tuple[RuntimeConfig, str | None]]:
    cwd = os.path.abspath(args.cwd) if args.cwd else os.getcwd()
    if not args.loopback:
        yield RuntimeConfig(codex_bin=args.codex_bin, codex_home=args.codex_home, cwd=cwd), None
        return
    from codexrt_cli._demo import loopback_environment

    with loopback_environment(codex_bin=args.codex_bin, cwd=args.cwd) as lb:
        yield lb.config, f"loopback model at {lb.mock.base_url}, throw-away CODEX_HOME {lb.codex_home}"


class _Status:
    """The live status line on stderr (redrawn in place on a terminal, plain lines otherwise)."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.tty = err.isatty()
        self.running: dict[str, tuple[str, float]] = {}
        self.shown = False
        self.prompt: str | None = None  # an approval prompt on screen: nothing redraws over it

    def clear(self) -> None:
        if self.tty and self.shown:
            self.err.write("\r\x1b[2K")
            self.err.flush()
            self.shown = False

    def draw(self) -> None:
        if not self.tty or not self.running or self.prompt is not None:
            return
        now = trio.current_time()
        label, since = next(reversed(self.running.values()))
        more = f" (+{len(self.running) - 1})" if len(self.running) > 1 else ""
        self.err.write(f"\r\x1b[2K… {label} [{now - since:.0f}s]{more}")
        self.err.flush()
        self.shown = True

    def line(self, text: str) -> None:
        if self.prompt is not None:
            # A line printed while a prompt waits for an answer goes above it; the prompt is
            # written again so it stays the last thing on screen.
            self.err.write(("\r\x1b[2K" if self.tty else "\n") + text + "\n" + self.prompt)
            self.err.flush()
            return
        self.clear()
        self.err.write(text + "\n")
        self.err.flush()
        self.draw()

    def started(self, item: dict[str, Any]) -> None:
        label = _describe_item(item)
        self.running[str(item.get("id"))] = (label, trio.current_time())
        if not self.tty:
            self.line(f"… {label}")
        self.draw()

    def completed(self, item: dict[str, Any]) -> None:
        entry = self.running.pop(str(item.get("id")), None)
        label = entry[0] if entry else _describe_item(item)
        status = item.get("status", "done")
        extra = f", exit {item['exitCode']}" if item.get("exitCode") is not None else ""
        self.line(f"{'✓' if status == 'completed' else '✗'} {label} ({status}{extra})")

    async def ticker(self) -> None:
        while True:
            await trio.sleep(1)
            if self.running:
                self.draw()


def _describe_item(item: dict[str, Any]) -> str:
    t = item.get("type")
    if t == "commandExecution":
        return f"running: {item.get('command')}"
    if t == "fileChange":
        paths = [c.get("path") for c in item.get("changes") or [] if isinstance(c, dict)]
        return "editing: " + (", ".join(str(p) for p in paths) or "files")
    if t == "mcpToolCall":
        return f"tool: {item.get('server')}/{item.get('tool')}"
    if t == "webSearch":
        return f"searching: {item.get('query')}"
    return f"{t}"


class _Session:
    def __init__(self, rt: Runtime, op: Operation, approve: str, json_mode: bool) -> None:
        self.rt = rt
        self.op = op
        self.approve = approve
        self.json = json_mode
        self.out = sys.stdout
        self.status = _Status(sys.stderr)
        self.prompt_lock = trio.Lock()
        self.text_open = False  # stdout has text not yet ended by a newline
        self.interrupts = 0

    def emit_event(self, ev: CodexEvent) -> None:
        if self.json:
            self.out.write(json.dumps(ev.to_wire(), ensure_ascii=False) + "\n")
            self.out.flush()
        mine = ev.client_operation_id == self.op.id
        if ev.kind == "itemStarted" and mine and (ev.payload.get("item") or {}).get("type") in _TOOL_ITEMS:
            self.status.started(ev.payload["item"])
        elif ev.kind == "itemCompleted" and mine:
            item = ev.payload.get("item") or {}
            if item.get("type") in _TOOL_ITEMS:
                self.status.completed(item)
            elif item.get("type") == "agentMessage" and self.text_open and not self.json:
                self.out.write("\n")
                self.out.flush()
                self.text_open = False
        elif ev.kind == "itemUpdated" and mine and ev.payload.get("stream") == "item/agentMessage/delta":
            if not self.json:
                if self.status.shown and self.out.isatty():
                    self.status.clear()
                self.out.write(ev.payload["delta"])
                self.out.flush()
                self.text_open = True
        elif ev.kind == "error" and mine:
            err = ev.payload.get("message") or ev.payload.get("error")
            if isinstance(err, dict):  # a native error object: show its message, not a Python dict
                err = err.get("message") or json.dumps(err, ensure_ascii=False)[:300]
            self.status.line(f"error: {err}")
        elif ev.kind == "runtimeFallback":
            failed = ev.payload.get("failed") or {}
            self.status.line(f"warning: the Codex CLI {failed.get('candidate')} did not start "
                             f"({str(failed.get('outcome'))[:300]}); trying {ev.payload.get('next')} instead")
        elif ev.kind == "runtimeUnhealthy":
            self.status.line(f"{ev.kind}: {json.dumps(ev.payload)[:300]}")

    async def answer(self, inter: Interaction) -> None:
        decision: str
        why: str
        if self.approve == "ask" and inter.kind in _PROMPTED:
            async with self.prompt_lock:
                if inter.state != "pending":
                    return
                got = await self._ask(inter)
                if got is None:
                    return  # resolved meanwhile (turn interrupted)
                decision, why = got, "your answer"
        elif self.approve == "ask":
            decision, why = "decline", f"{inter.kind} requests are not supported by `codexrt run`"
        else:
            decision, why = self.approve, f"--approve={self.approve}" + (
                "" if self.approve != "decline" or sys.stdin.isatty() else " (default when stdin is not a terminal)")
        try:
            inter.reply_for(decision)  # a decision this request cannot take (accept of a form) declines
        except CodexError:
            decision = "decline"
        if self.approve != "ask" or inter.kind not in _PROMPTED:
            self.status.line(f"approval requested: {inter.describe()} → {decision} ({why})")
        try:
            await inter.answer(decision)
        except InteractionError as exc:
            log.info("approval not delivered: %s", exc.message)
        if decision == "cancel":
            self.rt.abort(self.op)

    async def _ask(self, inter: Interaction) -> str | None:
        self.status.clear()
        try:
            return await self._ask_on_screen(inter)
        finally:
            self.status.prompt = None  # whatever happened, the ticker may draw again

    async def _ask_on_screen(self, inter: Interaction) -> str | None:
        if self.text_open and not self.json:
            self.out.write("\n")
            self.out.flush()
            self.text_open = False
        err = self.status.err
        err.write(f"\napproval requested: {inter.describe()}\n")
        reason = inter.params.get("reason")
        if isinstance(reason, str) and reason:
            err.write(f"  reason: {reason}\n")
        box: list[str] = []
        async with trio.open_nursery() as n:
            async def read() -> None:
                while True:
                    self.status.prompt = _PROMPT
                    err.write(_PROMPT)
                    err.flush()
                    line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                    self.status.prompt = None  # answered: the cursor is on a fresh line
                    if not line:  # end of input
                        box.append("decline")
                        break
                    choice = _ANSWERS.get(line.strip().lower())
                    if choice is not None:
                        box.append(choice)
                        break
                n.cancel_scope.cancel()

            async def resolved() -> None:
                await inter.resolved.wait()
                self.status.prompt = None
                err.write("\n  (no longer needed: the request was resolved)\n")
                n.cancel_scope.cancel()

            n.start_soon(read)
            n.start_soon(resolved)
        return box[0] if box else None

    async def watch_sigint(self, signals: Any) -> None:
        async for _ in signals:
            self.interrupts += 1
            if self.interrupts == 1:
                path = self.rt.abort(self.op)
                self.status.line(f"interrupting the turn ({path}); Ctrl+C again to kill the app-server")
            elif self.interrupts == 2:
                self.status.line("killing the app-server")
                self.rt.kill_child()  # SIGKILL to its process group; the reader then settles the turn


async def run_turn(config: RuntimeConfig, prompt: str, settings: Settings, thread_id: str | None,
                   approve: str, json_mode: bool, *, resumable: bool = True,
                   skills: Sequence[dict[str, str]] = ()) -> int:
    """Run one turn and return the exit status. Cancelling it stops the turn and reaps the
    child (``open_runtime`` does, shielded). ``resumable=False`` (a throw-away ``CODEX_HOME``)
    leaves out the ``--thread`` hint, which could not work there."""
    session: _Session | None = None
    # SIGINT is ours from here on: no KeyboardInterrupt in the middle of a child's start or
    # shutdown (both bounded); while the turn runs, watch_sigint decides what a Ctrl+C does.
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        try:
            async with open_runtime(config) as rt:
                with rt.subscribe() as events:
                    op = rt.send(prompt, thread_id=thread_id, settings=settings, skills=skills)
                    session = _Session(rt, op, approve, json_mode)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(session.watch_sigint, signals)
                        nursery.start_soon(session.status.ticker)
                        async for ev in events:
                            session.emit_event(ev)
                            if ev.kind == "interactionRequested":
                                inter = rt.interactions.get(ev.payload.get("interactionKey", ""))
                                if inter is not None and inter.state == "pending":
                                    nursery.start_soon(session.answer, inter)
                            if ev.kind == "operationDone" and ev.client_operation_id == op.id:
                                break
                        nursery.cancel_scope.cancel()
                    result = await op.wait()
        except CodexError as exc:
            if session is not None:
                session.status.clear()
            print(f"codexrt run: {exc.message}", file=sys.stderr)
            hint = exc.details.get("hint") if isinstance(exc.details, dict) else None
            if hint:
                print(f"hint: {hint}", file=sys.stderr)
            return 1
    assert session is not None
    session.status.clear()
    if session.text_open and not json_mode:
        sys.stdout.write("\n")
    if json_mode:
        sys.stdout.write(json.dumps({"type": "result", **result.to_wire()}, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    summary = f"[{result.status}]" + (f" thread {result.thread_id}" if result.thread_id else "")
    if result.error is not None and result.status != "completed":
        summary += f": {result.error.message}"
    if session.interrupts and result.status not in ("interrupted", "cancelled", "completed"):
        # Stopped by the user the hard way (second Ctrl+C, or the stop budget ran out).
        summary += " (stopped by Ctrl+C)"
    if resumable and result.thread_id and result.turn_id:
        # Only a thread that ran a turn has a rollout to resume (a start failure leaves none).
        summary += f"\ncontinue with: codexrt run --thread {result.thread_id} \"…\""
    print(summary, file=sys.stderr)
    if session.interrupts and result.status != "completed":
        return EXIT_CODES["interrupted"]
    return EXIT_CODES.get(result.status, 1)
