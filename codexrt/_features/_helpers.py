"""Helper requests: prompt enhancement, commit messages and thread titles (R-HLP-1 … R-HLP-3).

Why a separate child: a helper is a small one-shot question to the model ("give this chat a
title"). Asking it on the main runtime would take the send FIFO, touch the user's thread and
risk the writer. So every helper starts its **own** ``codex app-server`` child with the same
resolved CLI, environment, ``CODEX_HOME`` and provider as the main runtime (R-HLP-1), opens one
``ephemeral`` thread (no rollout, not in ``thread/list``) with a read-only sandbox,
``approvalPolicy: "never"`` and ``approvalsReviewer: "user"``, runs one turn and closes the child.
Helpers never load an SDK and never resume a chat thread.

Theory of operation (one helper run, :func:`run_helper`)
--------------------------------------------------------
* **Start**: the main config's startup candidates in order (R-CLI-5): one that cannot spawn or
  fails its handshake is closed and the next is tried; nothing but ``initialize`` was written.
* **Ask**: ``thread/start {ephemeral: true, sandbox: "read-only", approvalPolicy: "never",
  approvalsReviewer: "user", …}`` then ``turn/start``. The connection's sink runs on the reader
  and only files facts: streamed deltas build a *preview*, a completed ``agentMessage`` is the
  *final answer* (it replaces the preview, R-HLP-2), ``turn/completed`` ends the wait.
* **Refuse**: every interactive server request is answered by a helper task, never accepted:
  approvals → ``decline`` (legacy ones → ``denied``), MCP elicitation → ``cancel``, user input,
  permission grants and dynamic tool calls → an error reply; anything else → ``-32601``.
* **Succeed** only on a ``completed`` turn with a non-empty answer. ``failed``/``interrupted``,
  a child exit, an RPC error or the ``timeout`` raise :class:`~codexrt.OperationFailed`
  (codes ``HELPER_FAILED``, ``HELPER_TIMEOUT``, ``HELPER_EMPTY``…).
* **Close**: on every path — success, failure, timeout, cancellation — the child is closed
  and its exit awaited (shielded; ``open_connection`` escalates stdin EOF → SIGTERM → SIGKILL).

Titles (:class:`TitleManager`)
------------------------------
A task subscribes to the main runtime's events. The first ``threadStarted`` of a root,
non-ephemeral thread starts **one** title attempt for it (never a second, whatever happens),
from the text of the send that created it, without waiting for the turn to end. The title is
saved with ``thread/name/set`` on the main runtime's connection only if, at that moment, the
runtime is READY and its child alive (a helper never starts, restarts or resumes the writer),
and only if no manual name arrived meanwhile (a ``thread/name/updated`` we did not cause, or
:meth:`TitleManager.name_set_manually`): the manual name wins. Pending titles are cancelled by
``runtimeReset`` (release, reset, launch-config rebuild), a crash (``FAILED``), and an interrupt
or cancel of the creating send; :meth:`TitleManager.cancel` cancels and *waits* for them.
Outcomes are published on the runtime as ``threadTitle`` events and kept in
:attr:`TitleManager.outcomes`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
from typing import Any, AsyncIterator, Deque

import attrs
import trio

from codexrt._connection import Connection, ConnectionClosed, ConnectionEvent, open_connection
from codexrt._sansio._errors import (
    CodexError,
    ConfigError,
    EmptyDiff,
    HelperEmpty,
    HelperFailed,
    HelperInterrupted,
    HelperTimeout,
    OperationFailed,
)
from codexrt._sansio._convert import to_wire, wire
from codexrt._runtime._events import CodexEvent
from codexrt._runtime._runtime import Runtime, RuntimeConfig, resolved_cli
from codexrt._sansio._methods import SUPPORTED_SERVER_REQUESTS, refusal
from codexrt._sansio._redact import Redactor
from codexrt._sansio._states import RuntimeState
from codexrt._sansio._wire import Notification, ServerRequest
from codexrt._io._fanout import HELPERS
from codexrt._io._transport import ExitStatus
from codexrt._io._util import unwrap_single_group

__all__ = [
    "DEFAULT_HELPER_TIMEOUT",
    "HELPER_SERVER_REQUESTS",
    "HelperResult",
    "helper_config",
    "run_helper",
    "enhance_prompt",
    "generate_commit_message",
    "generate_title",
    "clean_title",
    "TitleOutcome",
    "TitleManager",
    "open_title_manager",
    "resolved_cli",
]

log = logging.getLogger("codexrt.helpers")

DEFAULT_HELPER_TIMEOUT = 60.0
#: Largest answer kept (preview or final), in characters.
MAX_ANSWER_CHARS = 64 * 1024
MAX_TITLE_CHARS = 80
_PROMPT_INPUT_CHARS = 8000
_DIFF_INPUT_CHARS = 60_000

#: Server requests a helper answers itself — always by refusing (R-HLP-1): every one of the method table.
HELPER_SERVER_REQUESTS = SUPPORTED_SERVER_REQUESTS

def refusal_for(method: str, params: Any = None) -> tuple[str, Any]:
    """How a helper answers ``method``: ``("result", value)`` or ``("error", (code, message))``.
    Never an acceptance (R-HLP-1). The one method table decides (``codexrt._sansio._methods.refusal``):
    approvals and MCP elicitations get their safe negative reply, so always a reply the schema
    accepts; anything else a JSON-RPC error."""
    return refusal(method, params, message=f"codexrt helper requests cannot answer {method}; refused")


_HELPER_OPT_OUT = ("account/rateLimits/updated", "thread/readState/changed", "warning")


def helper_config(main: RuntimeConfig, **overrides: Any) -> RuntimeConfig:
    """The main runtime's config for a helper child: same CLI, env, ``CODEX_HOME``, access
    mode and transports; no idle reaper. Any field may be overridden."""
    changes: dict[str, Any] = {"channel_id": f"{main.channel_id}#helper", "idle_timeout": None}
    changes.update(overrides)
    return attrs.evolve(main, **changes)


# --------------------------------------------------------------------------- one helper run


@attrs.frozen
class HelperResult:
    """A helper's answer. ``text`` is the final answer (never a bare preview when the final
    item came); ``refused`` lists the server requests it turned down."""

    kind: str
    text: str
    thread_id: str | None
    turn_id: str | None
    elapsed: float
    exit: ExitStatus | None
    refused: tuple[str, ...] = ()


class _Run:
    """Facts of one helper turn, filed by the connection's sink (runs on the reader)."""

    def __init__(self) -> None:
        self.thread_id: str | None = None
        self.turn_id: str | None = None
        self.preview: list[str] = []
        self.preview_len = 0
        self.final: str | None = None
        self.status: str | None = None
        self.turn_error: Any = None
        self.errors: list[str] = []
        self.closed_error: CodexError | None = None
        self.done = trio.Event()
        self.requests: Deque[ServerRequest] = collections.deque()
        self.wake = trio.Event()
        self.refused: list[str] = []

    def _ours(self, params: dict[str, Any]) -> bool:
        tid = params.get("threadId")
        return self.thread_id is not None and tid == self.thread_id

    def sink(self, ev: ConnectionEvent) -> None:
        if isinstance(ev, ServerRequest):
            self.requests.append(ev)
            self.wake.set()
            return
        if isinstance(ev, ConnectionClosed):
            self.closed_error = ev.error
            self.done.set()
            self.wake.set()
            return
        if not isinstance(ev, Notification) or not isinstance(ev.params, dict):
            return
        p = ev.params
        if not self._ours(p):
            return
        m = ev.method
        if m == "item/agentMessage/delta" and isinstance(p.get("delta"), str):
            if self.preview_len < MAX_ANSWER_CHARS:
                self.preview.append(p["delta"])
                self.preview_len += len(p["delta"])
        elif m == "item/completed":
            item = p.get("item") or {}
            if item.get("type") == "agentMessage" and isinstance(item.get("text"), str):
                self.final = item["text"][:MAX_ANSWER_CHARS]  # the final answer replaces the preview
        elif m == "error":
            err = p.get("error") or {}
            msg = err.get("message") if isinstance(err, dict) else None
            if isinstance(msg, str):
                self.errors.append(msg[:500])
        elif m == "turn/completed":
            turn = p.get("turn") or {}
            if self.turn_id is None or turn.get("id") in (None, self.turn_id):
                self.turn_id = turn.get("id") or self.turn_id
                self.status = turn.get("status")
                self.turn_error = turn.get("error")
                self.done.set()

    def answer(self) -> str:
        text = self.final if self.final is not None else "".join(self.preview)
        return text.strip()


async def _refuse_requests(conn: Connection, run: _Run) -> None:
    while True:
        while run.requests:
            req = run.requests.popleft()
            how, value = refusal_for(req.method, req.params)
            run.refused.append(req.method)
            try:
                if how == "result":
                    await conn.reply(req.id, value)
                else:
                    await conn.reply_error(req.id, *value)
            except CodexError as exc:  # the child is gone: nothing left to refuse
                log.debug("helper could not refuse %s: %s", req.method, exc)
                return
        run.wake = trio.Event()
        await run.wake.wait()


def _fail(kind: str, message: str, cls: type[OperationFailed], **details: Any) -> OperationFailed:
    return cls(f"{kind} helper: {message}", details={"helper": kind, **details})


async def _ask(conn: Connection, run: _Run, kind: str, prompt: str, *, cwd: str | None,
               instructions: str | None, model: str | None) -> None:
    thread_params: dict[str, Any] = {"ephemeral": True, "sandbox": "read-only", "approvalPolicy": "never",
                                     "approvalsReviewer": "user"}
    if cwd is not None:
        thread_params["cwd"] = cwd
    if model is not None:
        thread_params["model"] = model
    if instructions is not None:
        thread_params["developerInstructions"] = instructions
    result = await conn.call("thread/start", thread_params)
    thread = (result or {}).get("thread") if isinstance(result, dict) else None
    tid = thread.get("id") if isinstance(thread, dict) else None
    if not isinstance(tid, str):
        raise _fail(kind, "thread/start returned no thread id", HelperFailed)
    run.thread_id = tid
    turn = await conn.call("turn/start", {
        "threadId": tid,
        "input": [{"type": "text", "text": prompt, "text_elements": []}],
        "approvalPolicy": "never", "approvalsReviewer": "user", "sandboxPolicy": {"type": "readOnly"},
    })
    t = (turn or {}).get("turn") if isinstance(turn, dict) else None
    if isinstance(t, dict) and isinstance(t.get("id"), str) and run.turn_id is None:
        run.turn_id = t["id"]
    await run.done.wait()


async def run_helper(config: RuntimeConfig, prompt: str, *, kind: str = "helper",
                     timeout: float = DEFAULT_HELPER_TIMEOUT, cwd: str | os.PathLike[str] | None = None,
                     instructions: str | None = None, model: str | None = None) -> HelperResult:
    """Ask ``prompt`` on a fresh helper child (R-HLP-1, R-HLP-2) and return the final answer.

    ``config`` is the *main* runtime's config (see :func:`helper_config`); its settings' model
    is used unless ``model`` is given. Raises :class:`~codexrt.OperationFailed`
    (``HELPER_TIMEOUT``, ``HELPER_FAILED``, ``HELPER_INTERRUPTED``, ``HELPER_EMPTY``),
    ``ConfigError`` (``ACCESS_INACTIVE``: nothing spawned) or ``CliUnavailable``.
    Cancelling it stops the helper; the child is closed and reaped on every path.

    At most 2 helper children per channel (``config.channel_id``) and 4 in all run at once
    (issue 35, ``codexrt._io._fanout.HELPERS``); others wait in a FIFO queue within
    ``timeout`` (``HELPER_TIMEOUT`` with ``details.queued`` when it ends there) and past 8
    waiting per channel or 32 in all are refused at once with :class:`~codexrt.QueueFull`.
    """
    if timeout <= 0:
        raise ConfigError("helper timeout must be > 0")
    candidates = config.candidate_factories()  # ACCESS_INACTIVE / CliUnavailable before any spawn
    started = trio.current_time()
    # Issue 35: a slot first (codexrt._io._fanout). Only this wait is under the deadline here;
    # the run bounds itself inside, where the connection's own tasks are not cancelled by it.
    key, acquired = config.channel_id.split("#", 1)[0], False
    with trio.move_on_at(started + timeout):
        await HELPERS.acquire(key)
        acquired = True
    if not acquired:
        raise _fail(kind, f"no helper slot within {timeout:g} s: other helper runs held every slot", HelperTimeout,
                    timeoutSeconds=timeout, queued=True)
    try:
        return await _run_helper_now(config, prompt, candidates, started, kind=kind, timeout=timeout, cwd=cwd,
                                     instructions=instructions, model=model)
    finally:
        HELPERS.release(key)


async def _run_helper_now(config: RuntimeConfig, prompt: str, candidates: list[tuple[str, Any]], started: float, *,
                          kind: str, timeout: float, cwd: str | os.PathLike[str] | None, instructions: str | None,
                          model: str | None) -> HelperResult:
    model = model if model is not None else config.settings.model
    cwd_s = os.fspath(cwd) if cwd is not None else (config.settings.cwd or config.cwd)
    redactor = Redactor(config.secret_values())
    attempts: list[dict[str, Any]] = []
    # The deadline bounds the handshake and the turn, *inside* the connection block: the
    # connection's own tasks must not be cancelled by it, so that closing the child can see
    # its end at once (the close itself is shielded and always reaps).
    deadline = started + timeout
    for label, factory in candidates:
        if trio.current_time() >= deadline:
            break
        try:
            transport = await factory()
        except OSError as exc:
            attempts.append({"candidate": redactor(label), "outcome": f"spawn failed: {exc}"})
            continue
        run = _Run()
        async with open_connection(
            transport, sink=run.sink, supported_server_requests=HELPER_SERVER_REQUESTS,
            client_info=config.client_info,
            capabilities={"optOutNotificationMethods": list(_HELPER_OPT_OUT)},
            rpc_timeout=config.rpc_timeout, handshake_timeout=config.handshake_timeout, redactor=redactor,
        ) as conn:
            with trio.move_on_at(deadline) as scope:
                try:
                    await conn.initialize()
                except CodexError as exc:
                    attempts.append({"candidate": redactor(label), "outcome": exc.message, "code": exc.code})
                    continue  # leaving the block closes and reaps this candidate (R-CLI-5)
                try:
                    async with unwrap_single_group():
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(_refuse_requests, conn, run)
                            await _ask(conn, run, kind, prompt, cwd=cwd_s, instructions=instructions, model=model)
                            nursery.cancel_scope.cancel()
                except OperationFailed:
                    raise
                except CodexError as exc:
                    raise _fail(kind, exc.message, HelperFailed, cause=exc.to_dict()) from exc
        # here the child is closed and its exit awaited (open_connection's shielded close)
        if scope.cancelled_caught:
            break
        return _outcome(kind, run, conn.exit_status, trio.current_time() - started)
    if trio.current_time() >= deadline:
        raise _fail(kind, f"no answer within {timeout:g} s; the helper child was closed", HelperTimeout,
                    timeoutSeconds=timeout, attempts=attempts)
    raise _fail(kind, "no Codex CLI candidate could start", HelperFailed, attempts=attempts)


def _outcome(kind: str, run: _Run, exit_status: ExitStatus | None, elapsed: float) -> HelperResult:
    if run.status is None:
        err = run.closed_error
        raise _fail(kind, err.message if err is not None else "the helper child ended before the turn did",
                    HelperFailed, **({"exit": err.to_dict()} if err is not None else {}))
    if run.status != "completed":
        terr = run.turn_error if isinstance(run.turn_error, dict) else {}
        msg = terr.get("message") or (run.errors[-1] if run.errors else None) or f"turn ended {run.status}"
        cls = HelperInterrupted if run.status == "interrupted" else HelperFailed
        raise _fail(kind, str(msg)[:500], cls, status=run.status, threadId=run.thread_id, turnId=run.turn_id)
    text = run.answer()
    if not text:
        raise _fail(kind, "the model answered nothing", HelperEmpty, threadId=run.thread_id)
    return HelperResult(kind, text, run.thread_id, run.turn_id, elapsed, exit_status, tuple(run.refused))


# --------------------------------------------------------------------------- the three helpers

_ENHANCE_INSTRUCTIONS = (
    "You rewrite a user's request to a coding agent so it is clearer and more specific. Keep the "
    "user's intent, language and every concrete detail; do not answer the request; do not add "
    "facts you do not know. Reply with the rewritten request only."
)
_COMMIT_INSTRUCTIONS = (
    "You write Git commit messages. Reply with the message only: a summary line of at most 72 "
    "characters in the imperative mood, then, if useful, a blank line and a short body. No code "
    "fences, no quotes."
)
_TITLE_INSTRUCTIONS = (
    "You name chat conversations. Reply with a short title (at most 8 words) for a conversation "
    "that starts with the user's message. Title only: no quotes, no trailing period."
)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[…truncated]"


def _strip_fences(text: str) -> str:
    t = text.strip()
    m = re.fullmatch(r"```[^\n]*\n(.*?)\n?```", t, re.DOTALL)
    return (m.group(1) if m else t).strip()


def clean_title(text: str, limit: int = MAX_TITLE_CHARS) -> str:
    """One line, no markdown heading/emphasis/quotes around it, at most ``limit`` characters."""
    line = next((ln for ln in _strip_fences(text).splitlines() if ln.strip()), "")
    line = re.sub(r"^\s*(#+\s*|title\s*:\s*)", "", line, flags=re.IGNORECASE)
    line = " ".join(line.split()).strip("*_`\"'“”‘’ ").rstrip(".").strip()
    if len(line) > limit:
        cut = line[: limit - 1]
        line = (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut).rstrip() + "…"
    return line


async def enhance_prompt(config: RuntimeConfig, prompt: str, *, timeout: float = DEFAULT_HELPER_TIMEOUT,
                         cwd: str | os.PathLike[str] | None = None) -> str:
    """A clearer version of ``prompt`` (R-HLP-1). Raises like :func:`run_helper`."""
    if not prompt.strip():
        raise ConfigError("nothing to enhance: the prompt is empty")
    ask = f"Rewrite this request:\n\n<request>\n{_clip(prompt, _PROMPT_INPUT_CHARS)}\n</request>"
    res = await run_helper(config, ask, kind="enhancePrompt", timeout=timeout, cwd=cwd,
                           instructions=_ENHANCE_INSTRUCTIONS)
    return _strip_fences(res.text)


async def generate_commit_message(config: RuntimeConfig, diff: str, *, timeout: float = DEFAULT_HELPER_TIMEOUT,
                                  cwd: str | os.PathLike[str] | None = None) -> str:
    """A commit message for ``diff`` (e.g. the staged part of a
    :func:`~codexrt._io._workspace.read_workspace_diff`). Raises like :func:`run_helper`."""
    if not diff.strip():
        raise EmptyDiff("nothing to describe: the diff is empty")
    ask = f"Write the commit message for this diff:\n\n<diff>\n{_clip(diff, _DIFF_INPUT_CHARS)}\n</diff>"
    res = await run_helper(config, ask, kind="commitMessage", timeout=timeout, cwd=cwd,
                           instructions=_COMMIT_INSTRUCTIONS)
    return _strip_fences(res.text)


async def generate_title(config: RuntimeConfig, message: str, *, timeout: float = DEFAULT_HELPER_TIMEOUT,
                         cwd: str | os.PathLike[str] | None = None) -> str:
    """A short title for a chat whose first message is ``message`` (R-HLP-3)."""
    if not message.strip():
        raise ConfigError("nothing to title: the message is empty")
    ask = f"Title for a conversation that starts with:\n\n<message>\n{_clip(message, _PROMPT_INPUT_CHARS)}\n</message>"
    res = await run_helper(config, ask, kind="title", timeout=timeout, cwd=cwd, instructions=_TITLE_INSTRUCTIONS)
    title = clean_title(res.text)
    if not title:
        raise _fail("title", "the model answered no usable title", HelperEmpty)
    return title


# --------------------------------------------------------------------------- automatic titles


@wire()
@attrs.frozen
class TitleOutcome:
    """``status``: ``saved``, ``skipped`` (``reason``: manual name, runtime not ready, no text),
    ``failed`` (``error``) or ``cancelled`` (``reason``)."""

    thread_id: str
    status: str
    title: str | None = None
    reason: str | None = None
    error: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        return to_wire(self)


class TitleManager:
    """Automatic thread titles for one runtime (R-HLP-3). Create with :func:`open_title_manager`."""

    def __init__(self, rt: Runtime, nursery: trio.Nursery, *, config: RuntimeConfig | None = None,
                 timeout: float = DEFAULT_HELPER_TIMEOUT, max_concurrent: int = 2) -> None:
        self.rt = rt
        self._nursery = nursery
        self._config = config
        self.timeout = timeout
        self._limiter = trio.CapacityLimiter(max_concurrent)
        # Per-thread bookkeeping, insertion-ordered and capped at MAX_TRACKED_THREADS (a sidecar
        # runs for days): the oldest threads are forgotten first.
        self.attempted: dict[str, None] = {}
        self.manual: dict[str, None] = {}
        self.outcomes: dict[str, TitleOutcome] = {}
        self._pending: dict[str, tuple[trio.CancelScope, trio.Event]] = {}
        self._saving: set[str] = set()
        self._cancel_reason: dict[str, str] = {}
        self._changed = trio.Event()

    #: Threads remembered in ``attempted``, ``manual`` and ``outcomes`` (each); oldest first out.
    MAX_TRACKED_THREADS = 1024

    def __repr__(self) -> str:
        return f"<TitleManager pending={len(self._pending)} attempted={len(self.attempted)}>"

    def _remember(self, table: dict[str, Any], key: str, value: Any = None) -> None:
        table.pop(key, None)
        table[key] = value
        while len(table) > self.MAX_TRACKED_THREADS:
            del table[next(iter(table))]

    @property
    def config(self) -> RuntimeConfig:
        """The helper config: given, else derived from the runtime's current config (so a
        launch-config change is picked up by the next attempt)."""
        return self._config if self._config is not None else helper_config(self.rt.config)

    def pending(self) -> list[str]:
        return list(self._pending)

    def name_set_manually(self, thread_id: str) -> None:
        """The host named the thread: that name wins; a pending title is cancelled."""
        self._remember(self.manual, thread_id)
        self._cancel_one(thread_id, "manual name")

    async def wait_outcome(self, thread_id: str) -> TitleOutcome:
        """Wait for the outcome of ``thread_id``'s title attempt. Unbounded: callers bound it."""
        while thread_id not in self.outcomes:
            await self._changed.wait()
        return self.outcomes[thread_id]

    async def wait_idle(self) -> None:
        """Wait until no title is pending."""
        while self._pending:
            _, done = next(iter(self._pending.values()))
            await done.wait()

    async def cancel(self, thread_id: str | None = None, *, reason: str = "cancelled") -> None:
        """Cancel pending titles (all, or one thread's) and wait until their helper children
        are reaped — what release and reset do before they go on (R-HLP-3)."""
        targets = [thread_id] if thread_id is not None else list(self._pending)
        events = []
        for tid in targets:
            entry = self._pending.get(tid)
            if entry is not None:
                self._cancel_one(tid, reason)
                events.append(entry[1])
        for ev in events:
            await ev.wait()

    def _cancel_one(self, thread_id: str, reason: str) -> None:
        entry = self._pending.get(thread_id)
        if entry is not None:
            self._cancel_reason.setdefault(thread_id, reason)
            entry[0].cancel()

    def _cancel_all(self, reason: str) -> None:
        for tid in list(self._pending):
            self._cancel_one(tid, reason)

    async def _watch(self, events: AsyncIterator[CodexEvent]) -> None:
        async for ev in events:
            try:
                self._on_event(ev)
            except Exception as exc:  # an event of unexpected shape never stops titling (nor the channel)
                log.warning("auto-title: %s event skipped: %s", ev.kind, type(exc).__name__)

    def _source_text(self, thread_id: str) -> str | None:
        op = self.rt.active
        if op is not None and op.kind == "send" and op.thread_id in (None, thread_id):
            text = op.payload.get("text")
            return text if isinstance(text, str) and text.strip() else None
        return None

    def _on_event(self, ev: CodexEvent) -> None:
        kind, p = ev.kind, ev.payload
        if kind == "threadStarted":
            thread = p.get("thread") if isinstance(p.get("thread"), dict) else {}
            tid = thread.get("id") or ev.thread_id
            if not isinstance(tid, str) or tid in self.attempted:
                return
            if thread.get("parentThreadId") or thread.get("ephemeral") is True:
                return  # sub-agents and ephemeral threads get no title
            self._remember(self.attempted, tid)  # one attempt per created thread, whatever happens next
            if tid in self.manual or (isinstance(thread.get("name"), str) and thread.get("name")):
                self._finish(TitleOutcome(tid, "skipped", reason="manual name"))
                return
            text = self._source_text(tid)
            if text is None:
                self._finish(TitleOutcome(tid, "skipped", reason="no user text for this thread"))
                return
            scope, done = trio.CancelScope(), trio.Event()
            self._pending[tid] = (scope, done)
            self._nursery.start_soon(self._title_task, tid, text, scope, done, self.rt.generation)
        elif kind == "nativeNotification" and p.get("method") == "thread/name/updated":
            params = p.get("params") if isinstance(p.get("params"), dict) else {}
            tid = params.get("threadId")
            if isinstance(tid, str):
                if tid in self._saving:
                    self._saving.discard(tid)  # the echo of our own thread/name/set
                else:
                    self.name_set_manually(tid)
        elif kind == "runtimeReset":
            self._cancel_all(f"runtime reset ({p.get('reason')})")
        elif kind == "runtimeStateChanged" and p.get("to") == RuntimeState.FAILED.value:
            self._cancel_all("runtime failed")
        elif kind == "turnAborted" and ev.thread_id:
            self._cancel_one(ev.thread_id, "turn interrupted")
        elif kind == "operationDone" and ev.thread_id and p.get("status") in ("interrupted", "cancelled"):
            self._cancel_one(ev.thread_id, f"send {p.get('status')}")

    def _finish(self, outcome: TitleOutcome) -> None:
        self._remember(self.outcomes, outcome.thread_id, outcome)
        self._changed.set()
        self._changed = trio.Event()
        with contextlib.suppress(Exception):  # a closed runtime has no subscribers left
            self.rt.publish("threadTitle", outcome.to_wire(), thread_id=outcome.thread_id)

    async def _title_task(self, tid: str, text: str, scope: trio.CancelScope, done: trio.Event,
                          generation: int) -> None:
        outcome: TitleOutcome | None = None
        try:
            with scope:
                async with self._limiter:
                    try:
                        title = await generate_title(self.config, text, timeout=self.timeout)
                        outcome = await self._save(tid, title)
                    except CodexError as exc:
                        outcome = TitleOutcome(tid, "failed", error=exc.to_dict())
                        return
                    except Exception as exc:  # a helper's odd answer fails this title, not the channel
                        outcome = TitleOutcome(tid, "failed", error={
                            "code": "PROTOCOL_ERROR", "message": f"title failed on unexpected data ({type(exc).__name__})"})
                        return
        finally:
            if outcome is None:
                outcome = TitleOutcome(tid, "cancelled", reason=self._cancel_reason.get(tid, "cancelled"))
            self._pending.pop(tid, None)
            self._cancel_reason.pop(tid, None)
            self._finish(outcome)
            done.set()

    async def _save(self, tid: str, title: str) -> TitleOutcome:
        if tid in self.manual:
            return TitleOutcome(tid, "skipped", title=title, reason="manual name")
        # Never start, restart or resume the writer: only a READY runtime with a live child.
        child = self.rt.current_child()
        if child is None:
            return TitleOutcome(tid, "skipped", title=title, reason="runtime not ready")
        # Our own thread/name/updated echo must not look like a manual rename: remembered
        # until that echo arrives (see _on_event).
        self._saving.add(tid)
        try:
            await child.call("thread/name/set", {"threadId": tid, "name": title})
        except CodexError as exc:
            self._saving.discard(tid)
            return TitleOutcome(tid, "failed", title=title, error=exc.to_dict())
        return TitleOutcome(tid, "saved", title=title)


@contextlib.asynccontextmanager
async def open_title_manager(rt: Runtime, *, config: RuntimeConfig | None = None,
                             timeout: float = DEFAULT_HELPER_TIMEOUT,
                             max_concurrent: int = 2) -> AsyncIterator[TitleManager]:
    """``async with open_title_manager(rt) as titles:`` — automatic titles for threads this
    runtime creates while the block runs (R-HLP-3). ``config`` overrides the helper config
    (default: :func:`helper_config` of ``rt.config``). Leaving the block cancels pending
    titles and waits for their children to be reaped."""
    async with trio.open_nursery() as nursery:
        mgr = TitleManager(rt, nursery, config=config, timeout=timeout, max_concurrent=max_concurrent)
        with rt.subscribe() as events:
            watch = trio.CancelScope()

            async def watcher() -> None:
                with watch:
                    await mgr._watch(events)

            nursery.start_soon(watcher)
            try:
                yield mgr
            finally:
                watch.cancel()
                with trio.CancelScope(shield=True):
                    await mgr.cancel(reason="title manager closed")
                nursery.cancel_scope.cancel()
