"""``codexrt acp``: an Agent Client Protocol agent on stdin/stdout, on codexrt's runtime.

Theory of operation. One **reader** task reads stdin line by line (:class:`LineBuffer`,
bounded) and decodes each line (:func:`codexrt._acp._wire.decode_message`): answers to our own
requests resolve their waiter, notifications act at once (``session/cancel``,
``$/cancel_request``), and every request runs in a **task of its own** behind the fault
barrier (:meth:`AcpAgent._answer`), which writes its one answer — a result, the handler's typed
error, ``-32800`` when the client cancelled it, or ``-32603`` for a bug (traceback to the
redacted stderr log only). So a slow request never holds the reader, and every request is
answered exactly once, with its id.

Every line goes out through :meth:`AcpAgent.write` (encoded once, one ``send_all`` under a FIFO
lock: lines never interleave). stdout carries protocol lines only; logs go to stderr.

Each session (:mod:`codexrt._acp._session`) has its own runtime while active and a
**forwarder** reading the runtime's event subscription. A client that stops reading blocks
only the forwarder's write; meanwhile the subscription buffers — consecutive text deltas of one
item merged, byte-exact, status chatter bounded — and codex is never held back. Approvals the
forwarder sees are asked in tasks of their own (:mod:`codexrt._acp._asks`), so a human's
answer never blocks the stream.

Turns: ``session/prompt`` queues ``Runtime.send`` on the session's thread (the first prompt
creates it) and answers after the forwarder passed the turn's ``operationDone``: ``end_turn``,
``cancelled`` (``session/cancel``, a "stop" permission answer), or a JSON-RPC error for a failed
turn (codexrt's code and message in ``data``) — never ``end_turn`` with error text. After an
app-server crash the next prompt starts a new child and resumes the thread; nothing is re-sent.

stdin EOF: nobody is left to answer, so running turns are cancelled and open approvals
declined; after :attr:`AcpConfig.eof_grace` the children still busy are killed, every runtime is
closed (children reaped) and :func:`run_acp_agent` returns.
"""

from __future__ import annotations

import logging
import os
import traceback
import uuid
from datetime import datetime, timezone
from typing import Any

import attrs
import trio

from codexrt._acp import _asks
from codexrt._acp._index import SessionIndex, default_index_path
from codexrt._acp._mapping import (ConfigOptionError, PromptError, apply_config_option, config_options, prompt_input,
                                   replay_updates)
from codexrt._acp._session import Prompt, Session, counted
from codexrt._acp._wire import (INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PROTOCOL_VERSION, REQUEST_CANCELLED,
                                RESOURCE_NOT_FOUND, ClientCapabilities, Ignored, Invalid, Notification, Request,
                                Response, decode_message, encode, error_response, notification, request, response)
from codexrt._features._catalog import list_models
from codexrt._features._history import ThreadPage, Transcript, open_history_reader
from codexrt._io._work import OpenRequests, sweep_idle
from codexrt._runtime._events import EventStream
from codexrt._runtime._runtime import Runtime, RuntimeConfig
from codexrt._sansio._context import EditorState, FileReference
from codexrt._sansio._errors import (CodexError, ConfigError, InvalidParams, RpcError, ThreadNotFound,
                                     from_rpc_error)
from codexrt._io._lines import LineWriter, read_frames
from codexrt._sansio._framing import DEFAULT_MAX_LINE, OversizedLine
from codexrt._sansio._redact import process_redactor, register_process_secrets
from codexrt._version import __version__

__all__ = ["AcpConfig", "AcpAgent", "AcpError", "run_acp_agent"]

log = logging.getLogger("codexrt.acp")

#: How long a prompt cancelled by ``$/cancel_request`` (or shutdown) waits for its turn to end
#: before it is answered ``-32800`` anyway (a stuck child is killed by the stop budget later).
CANCEL_SETTLE = 2.0
#: How long the one ``model/list`` that fills the model option may take (left out after it).
MODELS_BOUND = 30.0
#: Requests running at once (each a task, its answer waiting on stdout). One more is refused
#: inline, which holds the reader on stdout: a client that sends without reading cannot make
#: the agent grow without bound. Far above an editor's need (a prompt per session, short calls).
MAX_OPEN_REQUESTS = 1024


@attrs.define
class AcpConfig:
    """How ``codexrt acp`` runs. ``runtime`` is the template of every session's runtime.
    ``idle_timeout`` (seconds, None = never) retires the child of a session with no prompt,
    no open question and no request for that long; the next prompt starts a new one and
    resumes the thread. ``eof_grace``: after stdin EOF, how long cancelled turns get to end
    before the children still busy are killed (the agent exits within about this plus the
    children's reaping). ``index_path``: the session index (None: the default under the
    state dir, :func:`codexrt._acp._index.default_index_path`; ``""``: in memory only)."""

    runtime: RuntimeConfig = attrs.field(factory=RuntimeConfig)
    idle_timeout: float | None = 600.0
    max_line: int = DEFAULT_MAX_LINE
    index_path: str | None = None
    eof_grace: float = 1.0


class AcpError(Exception):
    """A request refused with a JSON-RPC error (code, message, data)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


async def _read_thread(rt: Runtime, thread_id: str) -> Transcript:
    """The thread's transcript; a thread the server does not know is :class:`ThreadNotFound`
    (``-32002``, as ``session/resume`` names it)."""
    try:
        async with open_history_reader(rt) as reader:
            return await reader.read_thread(thread_id)
    except RpcError as exc:
        if from_rpc_error(exc) is not ThreadNotFound:
            raise
        raise ThreadNotFound(f"thread {thread_id} not found: {exc.message}",
                             details={"threadId": thread_id, "rpcCode": exc.rpc_code}) from None


async def _list_page(rt: Runtime, cursor: str | None, **filters: Any) -> ThreadPage:
    """One ``thread/list`` page; a cursor the server refuses is the client's bad parameter."""
    try:
        async with open_history_reader(rt) as reader:
            return await reader.list_threads(cursor=cursor, limit=50, **filters)
    except RpcError as exc:  # a stale or mangled cursor
        if cursor is None or "cursor" not in (exc.message or "").lower():
            raise
        _, _, data = _codex_error_answer(exc)
        raise AcpError(INVALID_PARAMS, f"session/list: {exc.message} - at `$.params.cursor`", data) from None


def _check_cwd(cwd: str, *, attached: bool) -> None:
    """A session's directory: absolute, and (its children run in it) an existing directory —
    unless the app-server is attached (``--connect``), whose files these are. (One ``stat``,
    as the spawn's own ``chdir``.)"""
    if not os.path.isabs(cwd):
        raise AcpError(INVALID_PARAMS, "cwd must be an absolute path - at `$.params.cwd`")
    if not attached and not os.path.isdir(cwd):
        raise AcpError(INVALID_PARAMS, f"cwd is not a directory: {cwd} - at `$.params.cwd`")


def _turn_error_answer(err: CodexError) -> tuple[int, str, Any]:
    """A failed turn's JSON-RPC error: ``-32603`` with codexrt's error in ``data``, or
    ``-32602`` when codex refused the input itself (too long, …): the client's to fix."""
    code, message, data = _codex_error_answer(err)
    if isinstance(err, RpcError) and err.rpc_code == INVALID_PARAMS:
        code = INVALID_PARAMS
    return (code if code == INVALID_PARAMS else INTERNAL_ERROR), message, data


def _codex_error_answer(exc: CodexError) -> tuple[int, str, Any]:
    d = exc.to_dict()
    data = {"code": d["code"], "message": d["message"], **({"details": d["details"]} if d.get("details") else {})}
    if isinstance(exc, ThreadNotFound):
        return RESOURCE_NOT_FOUND, exc.message, data
    if isinstance(exc, (InvalidParams, ConfigError)):
        return INVALID_PARAMS, exc.message, data
    return INTERNAL_ERROR, exc.message, data


class _Pending:
    __slots__ = ("method", "done", "result", "error")

    def __init__(self, method: str) -> None:
        self.method = method
        self.done = trio.Event()
        self.result: Any = None
        self.error: Any = None


class AcpAgent:
    """The agent over one pair of byte streams. Use :func:`run_acp_agent`."""

    def __init__(self, receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, config: AcpConfig) -> None:
        self._receive = receive
        self.config = config
        self._reader_scope = trio.CancelScope()
        self._out = LineWriter(send, encode, self._reader_scope.cancel)
        self.client_capabilities = ClientCapabilities()
        self.sessions: dict[str, Session] = {}
        self._catalog: Session | None = None  # the runtime that serves session/list
        self.index = SessionIndex(default_index_path() if config.index_path is None else config.index_path)
        self.nursery: trio.Nursery | None = None
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._requests: dict[tuple[type, Any], list[trio.CancelScope]] = {}
        self._open = OpenRequests()
        self.draining = False
        self.finished = trio.Event()
        self._models: tuple[tuple[str, str], ...] = ()  # (slug, name) of the models on offer
        self._models_asked = False

    # -- output ----------------------------------------------------------------------------

    async def write(self, obj: Any) -> None:
        """Write one protocol line, whole, in FIFO order. A broken stdout stops reading (the
        client is gone: what runs is cancelled) and later lines are dropped."""
        await self._out.write(obj)

    @property
    def lines_written(self) -> int:
        return self._out.lines_written

    async def update(self, s: Session, upd: dict[str, Any]) -> None:
        s.mapper.track(upd)
        await self.write(notification("session/update", {"sessionId": s.id, "update": upd}))

    async def call_client(self, method: str, params: Any) -> _Pending:
        """Send a request to the client and wait for its answer (no bound of its own: a human
        answers it; the caller's scope bounds it). Cancelled, it withdraws the request with
        ``$/cancel_request`` and the late answer is ignored."""
        rid = self._next_id
        self._next_id += 1
        pending = self._pending[rid] = _Pending(method)
        try:
            await self.write(request(rid, method, params))
            await pending.done.wait()
            return pending
        finally:
            if self._pending.pop(rid, None) is not None and not pending.done.is_set():
                with trio.CancelScope(shield=True), trio.move_on_after(1.0):
                    await self.write(notification("$/cancel_request", {"requestId": rid}))

    def stop_reading(self) -> None:
        """Stop reading and shut down as on stdin EOF (SIGTERM/SIGINT). Safe from anywhere."""
        self._reader_scope.cancel()

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        stuck = self._out.stuck_watch(self.config.eof_grace, self._receive)
        async with stuck as watch_stdout, trio.open_nursery() as nursery:
            self.nursery = nursery
            aux = trio.CancelScope()

            async def aux_tasks() -> None:
                with aux:
                    if self.config.idle_timeout is not None:
                        await self._idle_reaper(self.config.idle_timeout)

            nursery.start_soon(aux_tasks)
            with self._reader_scope:
                await self._read_loop()
            # From here on nobody may read stdout again: a client that stopped reading but keeps
            # the pipe open must not hold the shutdown, the children or the exit forever.
            watch_stdout()
            await self._shutdown()
            aux.cancel()

    async def _read_loop(self) -> None:
        async for frame in read_frames(self._receive, self.config.max_line):
            await self._handle_frame(frame)

    async def _handle_frame(self, frame: bytes | OversizedLine) -> None:
        if isinstance(frame, OversizedLine):
            await self.write(error_response(None, INVALID_REQUEST,
                                            f"message of {frame.size} bytes exceeds the limit of {frame.limit}"))
            return
        try:
            msg = decode_message(frame)
        except Exception as exc:  # decode_message never raises; if it does, the line still gets an answer
            log.error("decode_message failed: %s", type(exc).__name__)
            msg = Invalid(None, INTERNAL_ERROR, f"internal error while decoding a message: {type(exc).__name__}")
        if isinstance(msg, Invalid):
            log.info("bad message: %s %s", msg.code, msg.message)
            await self.write(msg.reply())
        elif isinstance(msg, Ignored):
            log.debug("ignored: %s", msg.reason)
        elif isinstance(msg, Response):
            pending = self._pending.get(msg.id) if isinstance(msg.id, int) else None
            if pending is None:
                log.info("an answer to no open request (id %r) was ignored", msg.id)
                return
            pending.result, pending.error = msg.result, msg.error
            pending.done.set()
        elif isinstance(msg, Notification):
            self._notification(msg)
        elif self._open.count >= MAX_OPEN_REQUESTS:
            await self.write(error_response(msg.id, INVALID_REQUEST, f"{msg.method}: {self._open.count} requests "
                                            "are in flight (the limit); read their answers first"))
        else:
            self._spawn(msg)

    def _notification(self, msg: Notification) -> None:
        if msg.method == "session/cancel":
            s = self.sessions.get(msg.params.session_id)
            if s is not None:
                self.cancel_turn(s)
        elif msg.method == "$/cancel_request":
            rid = msg.params.request_id
            for scope in self._requests.get((type(rid), rid), ()):
                scope.cancel()

    def _spawn(self, req: Request) -> None:
        assert self.nursery is not None
        if self.draining:
            self.nursery.start_soon(self.write, error_response(req.id, INVALID_REQUEST, "the agent is shutting down"))
            return
        self._open.opened()
        self.nursery.start_soon(self._answer, req)

    # -- the fault barrier -----------------------------------------------------------------

    async def _answer(self, req: Request) -> None:
        """Run ``req``'s handler and write its one answer (module doc)."""
        key = (type(req.id), req.id)
        scope = trio.CancelScope()
        self._requests.setdefault(key, []).append(scope)
        try:
            answer: dict[str, Any]
            try:
                with scope:
                    result = await self._handle(req)
                if scope.cancelled_caught:  # by $/cancel_request, or by the shutdown (nothing is read then)
                    answer = error_response(req.id, REQUEST_CANCELLED, f"{req.method}: cancelled "
                                            + ("because the agent is shutting down" if self.draining
                                               else "by the client"))
                else:
                    answer = response(req.id, result)
            except AcpError as exc:
                answer = error_response(req.id, exc.code, exc.message, exc.data)
            except CodexError as exc:
                log.info("%s (id %r) failed: %s", req.method, req.id, exc.code)
                answer = error_response(req.id, *_codex_error_answer(exc))
            except Exception as exc:
                tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                log.error("internal error in %s (id %r):\n%s", req.method, req.id, process_redactor()(tb))
                answer = error_response(req.id, INTERNAL_ERROR, f"internal error in {req.method}: {type(exc).__name__}",
                                        {"method": req.method})
            await self.write(answer)
        finally:
            scopes = self._requests.get(key, [])
            if scope in scopes:
                scopes.remove(scope)
            if not scopes:
                self._requests.pop(key, None)
            self._open.closed()

    async def _handle(self, req: Request) -> Any:
        p = req.params
        if req.method == "initialize":
            return self._initialize(p)
        if req.method == "session/new":
            return await self._new(p)
        if req.method == "session/load":
            return await self._load(p, replay=True)
        if req.method == "session/resume":
            return await self._load(p, replay=False)
        if req.method == "session/list":
            return await self._list(p)
        if req.method == "session/close":
            return await self._close(p)
        if req.method == "session/prompt":
            return await self._prompt(p)
        if req.method == "session/set_config_option":
            return self._set_config(p)
        if req.method in ("session/cancel", "$/cancel_request"):  # a notification sent as a request:
            self._notification(Notification(req.method, p))    # done as such, and answered
            return None
        raise AcpError(-32601, f"method not found: {req.method}")

    # -- initialize and sessions -----------------------------------------------------------

    def _initialize(self, p: Any) -> dict[str, Any]:
        self.client_capabilities = p.client_capabilities
        # No authMethods: codexrt has no `authenticate` to offer; the access mode (the CLI's own
        # login, or a managed provider key) is chosen when the agent starts.
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "codexrt", "title": "Codex (codexrt)", "version": __version__},
        }

    def _new_session(self, session_id: str, cwd: str, thread_id: str | None) -> Session:
        s = Session(session_id, cwd, thread_id, on_thread=self._thread_known)
        s.config = attrs.evolve(s.config, models=self._models)
        self.sessions[session_id] = s
        return s

    def _thread_known(self, s: Session) -> None:
        assert self.nursery is not None
        self.nursery.start_soon(self._record, s.id, s.thread_id, s.cwd)

    async def _indexed(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a session-index call: in a worker thread when it reads or writes a file."""
        if not self.index.path:
            return fn(*args, **kwargs)
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    async def _record(self, session_id: str, thread_id: str | None, cwd: str) -> None:
        await self._indexed(self.index.put, session_id, thread_id=thread_id, cwd=cwd)

    async def _new(self, p: Any) -> dict[str, Any]:
        _check_cwd(p.cwd, attached=self.config.runtime.connect is not None)
        if p.mcp_servers:
            log.warning("session/new: %d MCP server(s) from the client are not used (codexrt uses the MCP servers "
                        "of the Codex configuration)", len(p.mcp_servers))
        sid = str(uuid.uuid4())
        s = self._new_session(sid, p.cwd, None)
        await self._record(sid, None, p.cwd)
        return {"sessionId": sid, "configOptions": config_options(s.config)}

    async def _resolve(self, session_id: str, cwd: str) -> tuple[Session, bool]:
        """The session ``session_id`` (known here, in the index, or a thread id); True when it
        was opened by this call."""
        s = self.sessions.get(session_id)
        if s is not None:
            return s, False
        entry = await self._indexed(self.index.get, session_id)
        thread_id = entry.get("threadId") if entry is not None else session_id
        return self._new_session(session_id, cwd, thread_id if isinstance(thread_id, str) else None), True

    async def _load(self, p: Any, *, replay: bool) -> dict[str, Any]:
        """``session/load`` (replay the whole conversation first) and ``session/resume`` (no
        replay): the thread is read from codexrt's history projection; nothing calls the model."""
        _check_cwd(p.cwd, attached=self.config.runtime.connect is not None)
        s, opened = await self._resolve(p.session_id, p.cwd)
        if s.prompt is not None:
            raise AcpError(INVALID_REQUEST, "a prompt is running in this session")
        try:
            with counted(s):
                if s.thread_id is not None:
                    rt = await self._runtime(s)
                    if replay:
                        await self._replay(s, rt)
                    else:
                        op = rt.preconnect(s.thread_id)
                        op.discard_events()
                        res = await op.wait()
                        if res.error is not None:
                            raise res.error
        except BaseException:
            if opened and self.sessions.get(s.id) is s:
                del self.sessions[s.id]
                s.request_close()
            raise
        return {"configOptions": config_options(s.config)}

    async def _replay(self, s: Session, rt: Runtime) -> None:
        assert s.thread_id is not None
        tr = await _read_thread(rt, s.thread_id)
        # the files' current text completes the edits' diffs (file reads: a worker thread)
        updates = await trio.to_thread.run_sync(
            lambda: replay_updates(tr.records(), cwd=s.cwd, read=s.mapper.read))
        for upd in updates:
            await self.update(s, upd)
        s.mapper.open.clear()  # a replayed call is history, never a running one
        name = (tr.thread or {}).get("name")
        if isinstance(name, str) and name:
            s.mapper.title = name
            await self.update(s, {"sessionUpdate": "session_info_update", "title": name})

    async def _list(self, p: Any) -> dict[str, Any]:
        if self._catalog is None:
            self._catalog = Session("catalog", os.getcwd(), None, on_thread=lambda s: None)
        cat = self._catalog
        with counted(cat):
            rt = await self._runtime(cat)
            filters: dict[str, Any] = {"cwd": p.cwd} if p.cwd else {}
            page = await _list_page(rt, p.cursor, **filters)
        ids = [t.thread_id for t in page.threads]
        sessions_of = await self._indexed(self.index.session_of_thread, ids)
        out = []
        for t in page.threads:
            raw = t.raw if isinstance(t.raw, dict) else {}
            info: dict[str, Any] = {"sessionId": sessions_of.get(t.thread_id, t.thread_id),
                                    "cwd": raw.get("cwd") if isinstance(raw.get("cwd"), str) else (p.cwd or "")}
            title = t.name or t.preview
            if title:
                info["title"] = title[:200]
            if t.updated_at is not None:
                stamp = datetime.fromtimestamp(t.updated_at, timezone.utc)
                info["updatedAt"] = stamp.isoformat().replace("+00:00", "Z")
            out.append(info)
        cursor = page.next_cursor if isinstance(page.next_cursor, str) else None
        return {"sessions": out, "nextCursor": cursor}

    async def _close(self, p: Any) -> dict[str, Any]:
        s = self.sessions.pop(p.session_id, None)
        if s is None:
            raise AcpError(RESOURCE_NOT_FOUND, f"no such session: {p.session_id[:120]}")
        self.cancel_turn(s)
        await s.close_runtime()
        return {}

    def _session(self, session_id: str) -> Session:
        s = self.sessions.get(session_id)
        if s is None:
            raise AcpError(RESOURCE_NOT_FOUND, f"no such session: {session_id[:120]} (session/new or session/load "
                                               "it first)")
        return s

    def _set_config(self, p: Any) -> dict[str, Any]:
        s = self._session(p.session_id)
        try:
            s.config = apply_config_option(s.config, p.config_id, p.value)
        except ConfigOptionError as exc:
            raise AcpError(INVALID_PARAMS, str(exc)) from None
        if s.rt is not None:
            s.rt.update_settings(**s.config.settings_changes())
        return {"configOptions": config_options(s.config)}

    async def _runtime(self, s: Session) -> Runtime:
        assert self.nursery is not None
        if self.draining:
            raise AcpError(INVALID_REQUEST, "the agent is shutting down")
        return await s.runtime(self.nursery, self.config.runtime, self._forward)

    # -- turns -----------------------------------------------------------------------------

    async def _prompt(self, p: Any) -> dict[str, Any]:
        s = self._session(p.session_id)
        if s.prompt is not None:
            raise AcpError(INVALID_REQUEST, "a prompt is already running in this session")
        try:
            inp = prompt_input(p.prompt, images_ok=True)
        except PromptError as exc:
            raise AcpError(INVALID_PARAMS, str(exc)) from None
        with counted(s):
            rt = await self._runtime(s)
            refs: tuple[FileReference, ...] = tuple(FileReference(f) for f in inp.files)
            editor = EditorState(referenced_files=refs) if refs else None
            op = rt.send(inp.text, thread_id=s.thread_id, images=inp.images,
                         additional_context=inp.additional_context or None, editor_state=editor)
            op.discard_events()  # the forwarder follows the runtime subscription
            prompt = s.prompt = Prompt(op)
            try:
                try:
                    result = await op.wait()
                except trio.Cancelled:
                    # $/cancel_request of this prompt, or shutdown: as session/cancel (open
                    # questions withdrawn, the turn stopped), and the turn ends (bounded) with its
                    # calls closed before the answer, so nothing of it runs or spins afterwards
                    with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_SETTLE):
                        self.cancel_turn(s)
                        await op.wait()
                        await prompt.forwarded.wait()
                        for upd in s.mapper.interrupted():
                            await self.update(s, upd)
                    raise
                # No bound of its own: the forwarder passes the turn's operationDone (or ends)
                # as soon as the client reads what came before it; answering earlier would let
                # the turn's last text overtake its answer.
                await prompt.forwarded.wait()
            finally:
                if s.prompt is prompt:
                    s.prompt = None
            if s.thread_id is None and result.thread_id:
                s.thread_id = result.thread_id
                self._thread_known(s)
            for upd in s.mapper.interrupted():  # the turn is over: no call of it is still running
                await self.update(s, upd)
            if not self._models_asked and self.nursery is not None:
                self._models_asked = True  # once per agent: the models are the same for every session
                self.nursery.start_soon(self._offer_models, rt)
            if result.status == "completed":
                return {"stopReason": "end_turn"}
            if result.status in ("cancelled", "interrupted") or prompt.cancel_requested:
                return {"stopReason": "cancelled"}
            err = result.error
            if err is None:
                raise AcpError(INTERNAL_ERROR, f"the turn ended {result.status}", {"status": result.status})
            code, message, data = _turn_error_answer(err)
            raise AcpError(code, message, {**data, "status": result.status})

    async def _offer_models(self, rt: Runtime) -> None:
        """Fill the model option from the server's ``model/list`` (local on the real server:
        no model call) once a child is up, and tell every session (``config_option_update``).
        A failure leaves the option at the configured default and any id the client sets."""
        catalog = None
        with trio.move_on_after(MODELS_BOUND):
            try:
                catalog = await list_models(rt)
            except CodexError as exc:
                log.info("model/list failed (%s): the model option offers the configured default only", exc.code)
        if catalog is None or self.draining:
            return
        self._models = tuple((m.slug, m.display_name or m.slug) for m in catalog.visible() if m.slug)
        for s in list(self.sessions.values()):
            s.config = attrs.evolve(s.config, models=self._models)
            await self.update(s, {"sessionUpdate": "config_option_update", "configOptions": config_options(s.config)})

    def cancel_turn(self, s: Session) -> None:
        """``session/cancel``: withdraw open questions (``$/cancel_request``; the interaction is
        declined, so nothing runs) and stop the turn; its prompt answers ``cancelled``."""
        for scope in list(s.asks.values()):
            scope.cancel()
        prompt = s.prompt
        if prompt is not None:
            prompt.cancel_requested = True
            if s.rt is not None:
                s.rt.abort(prompt.op)

    # -- the forwarder ---------------------------------------------------------------------

    async def _forward(self, s: Session, rt: Runtime, events: EventStream) -> None:
        try:
            await self._forward_events(s, events)
        finally:  # a runtime that ended (closed, failed) releases the prompt waiting on it
            if s.prompt is not None:
                s.prompt.forwarded.set()

    async def _forward_events(self, s: Session, events: EventStream) -> None:
        async for ev in events:
            try:
                s.note_thread(ev)
                prompt = s.prompt
                if ev.kind == "interactionRequested" and not ev.payload.get("replayed"):
                    inter = s.find_interaction(str(ev.payload.get("interactionKey")))
                    if inter is not None and self.nursery is not None:
                        self.nursery.start_soon(_asks.ask, self, s, inter)
                elif ev.kind == "operationDone":
                    if prompt is not None and ev.client_operation_id == prompt.op.id:
                        prompt.forwarded.set()
                elif s.own_event(ev):
                    cancelled = prompt is not None and prompt.cancel_requested
                    for upd in s.mapper.updates(ev.kind, ev.payload):
                        if cancelled and upd["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk"):
                            continue  # the user stopped the turn: no more text is shown for it
                        await self.update(s, upd)
            except Exception:  # one odd event never ends the stream of a session
                log.exception("session %s: event %s not forwarded", s.id, ev.kind)

    # -- idle and shutdown -----------------------------------------------------------------

    def _all_sessions(self) -> list[Session]:
        return list(self.sessions.values()) + ([self._catalog] if self._catalog is not None else [])

    async def _idle_reaper(self, idle_timeout: float) -> None:
        async def close(s: Session) -> None:
            s.request_close()

        await sweep_idle(idle_timeout, self._all_sessions, retirable=lambda s: s.rt is not None and not s.busy,
                         last_activity=lambda s: s.last_activity, retire=close, log=log,
                         what=lambda s: f"session {s.id}")

    async def _shutdown(self) -> None:
        """stdin EOF (or stdout gone): cancel the turns, decline open questions, give them
        :attr:`AcpConfig.eof_grace` to end, kill the children still busy, close every runtime (children
        reaped); running handlers are cancelled and answered. A stdout that takes nothing for
        ``eof_grace`` while lines wait is given up meanwhile (:meth:`LineWriter.give_up_when_stuck`)."""
        self.draining = True
        sessions = self._all_sessions()
        for s in sessions:
            if s.rt is not None:
                s.rt.set_interaction_policy(_asks.no_host_policy)
            self.cancel_turn(s)
        with trio.move_on_after(self.config.eof_grace):
            await self._open.wait_none()
        for s in sessions:
            rt = s.rt
            if rt is not None and rt.busy:
                log.info("session %s: the turn did not end in time; killing its app-server", s.id)
                rt.kill_child()
        for s in sessions:
            s.request_close()
        with trio.move_on_after(self.config.eof_grace):
            await self._open.wait_none()
        for scopes in list(self._requests.values()):
            for scope in scopes:
                scope.cancel()
        for s in sessions:
            await s.close_runtime()


async def run_acp_agent(receive: trio.abc.ReceiveStream, send: trio.abc.SendStream, config: AcpConfig | None = None,
                        task_status: trio.TaskStatus[AcpAgent] = trio.TASK_STATUS_IGNORED) -> None:
    """Run the agent until ``receive`` reaches EOF, then shut down (module doc) and return.
    Cancelling it cancels everything at once — the runtimes still stop their children, shielded."""
    agent = AcpAgent(receive, send, config or AcpConfig())
    register_process_secrets(agent.config.runtime.secret_values())
    task_status.started(agent)
    try:
        await agent.run()
    finally:
        agent.finished.set()

