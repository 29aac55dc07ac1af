"""The legacy path of a :class:`~._projector.Projector`: rollout records, in file order, into
the :class:`~._store.RecordStore` (R-H-3, R-H-4), logging what the wrapper replay needs
(:class:`~._replay.ReplayLog`, R-H-5). Which copy of a message wins is decided at read time
(:meth:`~._store.RecordStore.visible`)."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from .._legacy import LegacyRecord
from .._sanitize import sanitize_user_text
from .._wrappers import Receipt, patch_end_receipts, receipts_from_rollout_line
from ._legacy import (
    _CONTEXT_PREFIXES,
    _EXEC_TOOLS,
    COMPACTION_FACET_WINDOW_MS,
    _core_item_to_native,
    _duration_ms,
    _parse_exec_output,
    _parse_ts,
)
from ._native import _actions, _native_changes, project_native_item
from ._records import (
    AssistantMessage,
    CommandExecution,
    CompactionBoundary,
    ContentBlock,
    DynamicToolCall,
    ErrorRecord,
    FileChange,
    GenericRecord,
    ImageGeneration,
    ImageSource,
    ImageView,
    McpToolCall,
    Plan,
    PlanStep,
    Reasoning,
    SubAgent,
    UserMessage,
    WebSearch,
)
from ._replay import _ABORTED, ReplayLog, _Poll, _Wait, _Wrapper, is_notification
from ._shapes import (
    _IMAGE_TYPES,
    _TEXT_TYPES,
    _assistant_text,
    _content_blocks,
    _image_from_block,
    _image_from_url,
    _int,
    _join_argv,
    _norm_status,
    _str,
    _texts,
    parse_apply_patch,
)
from ._store import RecordStore

#: ``event_msg`` subtypes that end a tool call (handled by :meth:`LegacyFeed._tool_end`).
_TOOL_ENDS = frozenset({"patch_apply_end", "exec_command_end", "mcp_tool_call_end", "web_search_end",
                        "image_generation_end", "view_image_tool_call"})


_CELL_HEADER = re.compile(r"Script (completed|failed|terminated)\b")


def _receipt_status(out: Any) -> str:
    """The status a tool's output receipt states (R-H-5: a cell follows its receipt): ``Script
    failed`` (a script that threw, ``Script error:``) and ``Script terminated`` are ``failed``;
    the harness's ``aborted by user after 2.4s`` is ``interrupted`` (the status the server gives
    an aborted turn's items); anything else is ``completed`` (the output arrived)."""
    first: Any = out
    if isinstance(out, list):
        first = next((b.get("text") for b in out if isinstance(b, dict) and isinstance(b.get("text"), str)), "")
    if not isinstance(first, str):
        return "completed"
    head = first.lstrip()
    if _ABORTED.fullmatch(head.rstrip()):
        return "interrupted"
    m = _CELL_HEADER.match(head)
    return "failed" if m is not None and m.group(1) != "completed" else "completed"


class LegacyFeed:
    """Feeds rollout records into a store. Its own state: the current and synthetic turns,
    each turn's cwd, the last compaction per turn (facets merge) and the current line."""

    def __init__(self, store: RecordStore, log: ReplayLog) -> None:
        self._store = store
        self._log = log
        self._cur_turn: str | None = None
        self._synthetic = 0
        self._turn_cwd: dict[str, str] = {}
        self._last_compaction: dict[str, tuple[str, set[str]]] = {}
        self._line = 0
        self.fed = False  # a rollout record was fed: this projector's source is the file
        self._task_turns: set[str] = set()

    def add_record(self, rec: LegacyRecord) -> None:
        """Feed one rollout record (in file order)."""
        self.fed = True
        p = rec.payload if isinstance(rec.payload, dict) else {}
        ts = _parse_ts(rec.timestamp)
        line_key = f"L{rec.line_no}"
        self._line = rec.line_no
        self._log_receipts(rec, p)
        if rec.type == "session_meta":
            if self._store.thread_id is None and isinstance(p.get("id"), str):
                self._store.thread_id = p["id"]
            return
        if rec.type == "turn_context":
            tid = p.get("turn_id")
            if isinstance(tid, str) and tid:
                self._cur_turn = tid
                self._store.turn(tid)
                if isinstance(p.get("cwd"), str):
                    self._turn_cwd[tid] = p["cwd"]
            return
        if rec.type == "compacted":
            self._compaction(self._turn_for(rec), line_key, "compacted", ts, _str(p.get("message")) or None)
            return
        if rec.type == "response_item":
            self._response_item(rec, p, line_key, ts)
            return
        if rec.type == "event_msg":
            self._event(rec, p, line_key, ts)
            return
        # world_state, token_usage_record, unknown top-level types: not display items.

    def _log_receipts(self, rec: LegacyRecord, p: dict[str, Any]) -> None:
        """Native receipts (items and terminal events that name a call) with their line, and
        the processes they show started; the wrappers take theirs at read time (R-H-5)."""
        if rec.type != "event_msg":
            return
        st = rec.subtype
        found: list[Receipt] = []
        if st == "item_completed":
            found = receipts_from_rollout_line({"type": "event_msg", "payload": p, "ordinal": rec.ordinal})
            raw_item = p.get("item")
            item: dict[str, Any] = raw_item if isinstance(raw_item, dict) else {}
            pid = item.get("process_id")
            if item.get("type") == "CommandExecution" and isinstance(item.get("id"), str) and pid is not None:
                self._log.starts.append((rec.line_no, str(pid), item["id"]))
        elif st == "patch_apply_end":
            found = patch_end_receipts(p, ordinal=rec.ordinal)
        elif st == "exec_command_end" and isinstance(p.get("call_id"), str):
            pid = p.get("process_id")
            if pid is not None:
                self._log.starts.append((rec.line_no, str(pid), p["call_id"]))
        tid = _str(p.get("turn_id")) or self._cur_turn or ""
        for r in found:
            self._log.receipt_log.append((rec.line_no, tid, r))

    def _turn_for(self, rec: LegacyRecord) -> str:
        p = rec.payload if isinstance(rec.payload, dict) else {}
        tid = p.get("turn_id")
        if not isinstance(tid, str):
            meta = p.get("internal_chat_message_metadata_passthrough")
            tid = meta.get("turn_id") if isinstance(meta, dict) else None
        if isinstance(tid, str) and tid:
            if tid not in self._store.turns:
                self._store.turn(tid)
            return tid
        if self._cur_turn is None:
            self._synthetic += 1
            self._cur_turn = f"legacy-turn-{self._synthetic}"
            self._store.turn(self._cur_turn)
        return self._cur_turn

    def _synthetic_turn_has_user_message(self, channel: str) -> bool:
        """Files without turn ids (0.46-era: no task events, ``turn_context`` without
        ``turn_id``; mid-2025 bare lines: nothing but response items) mark a turn only by its
        user message: a second one of the same copy (``event`` / ``response``) in the current
        made-up turn begins the next turn."""
        cur = self._cur_turn
        if cur is None or not cur.startswith("legacy-turn-") or cur not in self._store.turns or cur in self._task_turns:
            return False
        return any(isinstance(self._store.entries[k].record, UserMessage) and self._store.entries[k].channel == channel
                   for k in self._store.turns[cur].keys)

    def _next_synthetic_turn(self) -> str:
        self._synthetic += 1
        self._cur_turn = f"legacy-turn-{self._synthetic}"
        self._store.turn(self._cur_turn)
        return self._cur_turn

    def _put(self, turn_id: str, key: str, rec: Any, *, channel: str, complete: bool = True,
             open_: bool = False, times: tuple[int | None, int | None, int | None] = (None, None, None)) -> None:
        e = self._store.entries.get(key)
        if e is None:
            self._store.insert(turn_id, key, rec, complete=complete, open_=open_, channel=channel, anchor=None, times=times)
            return
        rec = attrs.evolve(rec, turn_id=e.turn_id)
        if e.channel == "snapshot" and channel != "snapshot":
            return  # the item_completed snapshot wins over response/event copies
        e.record, e.open, e.complete = rec, open_, complete
        if channel == "snapshot":
            e.channel = "snapshot"
        e.times = tuple(n if n is not None else o for n, o in zip(times, e.times))  # type: ignore[assignment]

    def _compaction(self, turn_id: str, key: str, facet: str, ts: int | None, summary: str | None) -> None:
        """A compaction is recorded as up to three facets (``compacted``, the ``context_compacted``
        event, a ``compaction`` response item). Consecutive facets of *different* kinds with no
        record between them are one boundary; a repeated facet kind is a new compaction, and so
        is a facet whose explicit time is more than :data:`COMPACTION_FACET_WINDOW_MS` away
        (the facets of one compaction are written back to back; distinct times are never
        merged)."""
        t = self._store.turn(turn_id)
        if facet == "compacted" and summary:
            self._drop_summarizer_output(t, summary)
        last = self._last_compaction.get(turn_id)
        if last is not None and t.keys and t.keys[-1] == last[0] and facet not in last[1]:
            e = self._store.entries[last[0]]
        else:
            e = None
        if e is not None and (ts is None or e.record.time_ms is None
                              or abs(ts - e.record.time_ms) <= COMPACTION_FACET_WINDOW_MS):
            assert last is not None
            last[1].add(facet)
            if summary and not e.record.summary:
                e.record = attrs.evolve(e.record, summary=summary)
            return
        rec = CompactionBoundary(id=key, thread_id=self._store.thread_id, turn_id=turn_id, status="completed",
                                 time_ms=ts, time_source="item" if ts is not None else "unknown", summary=summary,
                                 source="legacy")
        self._put(turn_id, key, rec, channel="response", times=(ts, ts, None))
        self._last_compaction[turn_id] = (key, {facet})

    def _drop_summarizer_output(self, t: Any, summary: str) -> None:
        """0.171.0 writes the summarizer model's answer as an assistant ``response_item``
        right before the ``compacted`` line whose ``message`` ends with that same text. It is
        the compaction's summary, not a message of the conversation (the server shows none): the
        turn's last entries, while they are assistant messages whose text ends the summary, are
        dropped."""
        tail = summary.rstrip()
        while t.keys:
            e = self._store.entries[t.keys[-1]]
            text = e.record.text.strip() if isinstance(e.record, AssistantMessage) else ""
            if not text or e.channel == "snapshot" or not tail.endswith(text):
                return
            self._store.drop(e.key)

    def _response_item(self, rec: LegacyRecord, p: dict[str, Any], line_key: str, ts: int | None) -> None:
        st = rec.subtype
        tid = self._turn_for(rec)
        common = {"thread_id": self._store.thread_id, "turn_id": tid, "source": "legacy"}
        if st == "message":
            role = p.get("role")
            key = _str(p.get("id")) or line_key
            if role == "assistant":
                r = AssistantMessage(id=key, status="completed", text=_assistant_text(p), phase=_str(p.get("phase")), **common)
                self._put(tid, key, r, channel="response")
            elif role == "user":
                parts, images = [], []
                for b in p.get("content") or ():
                    if not isinstance(b, dict):
                        continue
                    if b.get("type") in _TEXT_TYPES and isinstance(b.get("text"), str):
                        parts.append(b["text"])
                    elif b.get("type") in _IMAGE_TYPES:
                        img = _image_from_block(b)
                        if img is not None:
                            images.append(img)
                text = "".join(parts)
                if text.lstrip().startswith(_CONTEXT_PREFIXES):
                    return
                if tid == self._cur_turn and self._synthetic_turn_has_user_message("response"):
                    tid = self._next_synthetic_turn()
                    common["turn_id"] = tid
                # ``<image name=…>`` / ``</image>`` text wrappers around image inputs.
                text = re.sub(r"<image(?: [^>]*)?>\s*</image>|<image(?: [^>]*)?>|</image>", "", text)
                s = sanitize_user_text(text)
                r2 = UserMessage(id=key, status="completed", text=s.text, images=tuple(images),
                                 file_mentions=s.file_mentions, stripped=s.stripped, **common)
                self._put(tid, key, r2, channel="response")
            return
        if st == "reasoning":
            key = _str(p.get("id")) or line_key
            summary, content = _texts(p.get("summary")), _texts(p.get("content"))
            plain = any(x.strip() for x in summary + content)
            r3 = Reasoning(id=key, status="completed", summary=summary, content=content,
                           state="plain" if plain else "encrypted", **common)
            self._put(tid, key, r3, channel="response")
            return
        if st in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(tid, p, st, line_key, common)
            return
        if st in ("function_call_output", "custom_tool_call_output"):
            self._output(p)
            return
        if st == "web_search_call":
            key = _str(p.get("id")) or _str(p.get("call_id")) or line_key
            action = p.get("action") if isinstance(p.get("action"), dict) else None
            q = (action or {}).get("query") or ""
            self._put(tid, key, WebSearch(id=key, status=_norm_status(p.get("status")), query=str(q),
                                          action=action, **common), channel="response")
            return
        if st == "image_generation_call":
            key = _str(p.get("id")) or line_key
            result = p.get("result")
            img = ImageSource("data", result, "image/png") if isinstance(result, str) and result else None
            self._put(tid, key, ImageGeneration(id=key, status=_norm_status(p.get("status")),
                                                revised_prompt=_str(p.get("revised_prompt")), image=img,
                                                **common), channel="response")
            return
        if st in ("compaction", "context_compaction"):
            self._compaction(tid, line_key, "compaction_item", ts, None)
            return
        if st in ("additional_tools", "tool_search_call", "tool_search_output", "agent_message"):
            return  # tool catalogs and inter-agent traffic: not part of the display
        key = _str(p.get("id")) or _str(p.get("call_id")) or line_key
        self._put(tid, key, GenericRecord(id=key, status=_norm_status(p.get("status")),
                                          item_type=str(st), raw=p, **common), channel="response")

    def _call(self, tid: str, p: dict[str, Any], st: str, line_key: str, common: dict[str, Any]) -> None:
        key = _str(p.get("call_id")) or _str(p.get("id")) or line_key
        name = _str(p.get("name")) or ("local_shell" if st == "local_shell_call" else "")
        raw_args = p.get("arguments") if st == "function_call" else p.get("input")
        args: Any = raw_args
        if isinstance(raw_args, str) and st == "function_call":
            try:
                args = json.loads(raw_args)
            except (ValueError, RecursionError):  # too deep is not JSON here
                args = raw_args
        a = args if isinstance(args, dict) else {}
        if st == "local_shell_call":
            a = p.get("action") if isinstance(p.get("action"), dict) else {}
        self._log.direct_ids.add(key)
        self._log.direct_tools[key] = name
        if name == "write_stdin":
            # polling: no record of its own; it updates the command it targets (R-H-5)
            target = a.get("session_id", a.get("process_id"))
            chars = a.get("chars", a.get("input"))
            self._log.polls[key] = _Poll(self._line, None if target is None or isinstance(target, bool) else str(target),
                                         chars if isinstance(chars, str) else None)
            return
        if name == "wait" and st == "function_call" and isinstance(a.get("cell_id"), (str, int)) \
                and not isinstance(a.get("cell_id"), bool):
            # code mode's wait for a yielded cell: its output is the cell's (R-H-5, issue 32)
            self._log.waits[key] = _Wait(key, tid, str(a["cell_id"]), self._line)
        if name == "exec" and st == "custom_tool_call":
            # shown whole until attribution replaces it (turns())
            self._log.wrappers[key] = _Wrapper(key, tid, dict(p), self._line)
        if name in _EXEC_TOOLS:
            cmd = a.get("cmd", a.get("command"))
            cmd_s = _join_argv(cmd)
            cwd = _str(a.get("workdir")) or _str(a.get("working_directory")) or self._turn_cwd.get(tid)
            r: Any = CommandExecution(
                id=key, status="unknown", command=cmd_s, cwd=cwd,
                approval_reason=_str(a.get("justification")), description=_str(a.get("description")), **common,
            )
            self._put(tid, key, r, channel="response", open_=True)
            return
        if name == "apply_patch":
            text = raw_args if st == "custom_tool_call" else a.get("input", raw_args)
            changes = parse_apply_patch(text) if isinstance(text, str) else ()
            self._put(tid, key, FileChange(id=key, status="unknown", changes=changes, **common),
                      channel="response", open_=True)
            return
        if name == "update_plan":
            steps = tuple(
                PlanStep(str(s.get("step", "")), str(s.get("status", "unknown")))
                for s in a.get("plan") or () if isinstance(s, dict)
            )
            self._put(tid, key, Plan(id=key, status="completed", steps=steps,
                                     explanation=_str(a.get("explanation")), **common), channel="response")
            return
        if name == "view_image":
            self._put(tid, key, ImageView(id=key, status="inProgress", path=_str(a.get("path")), **common),
                      channel="response", open_=True)
            return
        self._put(tid, key, DynamicToolCall(id=key, status="inProgress", tool=name,
                                            namespace=_str(p.get("namespace")), arguments=args, **common),
                  channel="response", open_=True)

    def _output(self, p: dict[str, Any]) -> None:
        key = _str(p.get("call_id"))
        if key is None:
            return
        if key in self._log.polls:
            poll = self._log.polls[key]
            poll.out_line, poll.receipt = self._line, _parse_exec_output(p.get("output"), "write_stdin")
            return
        if key in self._log.wrappers:
            if is_notification(self._log.wrappers[key].output, p):
                return  # a notify() message: the cell's output stays what the script printed
            self._log.wrappers[key].output = dict(p)
            self._log.wrappers[key].output_line = self._line
        if key in self._log.waits:
            self._log.waits[key].output = dict(p)
            self._log.waits[key].output_line = self._line
        e = self._store.entries.get(key)
        if e is None:
            return  # an output without its call
        out = p.get("output")
        if isinstance(e.record, CommandExecution):
            rcpt = _parse_exec_output(out, self._log.direct_tools.get(key))
            if rcpt.running_pid is not None:
                self._log.starts.append((self._line, rcpt.running_pid, key))
        if e.channel == "snapshot":
            return  # the item_completed snapshot knows better
        r = e.record
        if isinstance(r, CommandExecution):
            if rcpt.running:
                e.record = attrs.evolve(r, output=rcpt.body, status="inProgress", process_id=rcpt.running_pid)
                return
            code = rcpt.exit_code
            status = "unknown" if code is None else ("completed" if code == 0 else "failed")
            e.record = attrs.evolve(r, output=rcpt.body, exit_code=code, status=status)
            e.open = False
        elif isinstance(r, FileChange):
            text = out if isinstance(out, str) else json.dumps(out)
            if r.output is None:
                e.record = attrs.evolve(r, output=text)  # status only from patch_apply_end
        elif isinstance(r, ImageView):
            e.record = attrs.evolve(r, status="completed")
            e.open = False
        elif isinstance(r, DynamicToolCall):
            blocks = _content_blocks(out if not isinstance(out, dict) else out.get("content", []))
            e.record = attrs.evolve(r, status=_receipt_status(out), content=blocks)
            e.open = False

    def _event(self, rec: LegacyRecord, p: dict[str, Any], line_key: str, ts: int | None) -> None:
        st = rec.subtype
        if st in ("task_started", "turn_started"):
            tid = _str(p.get("turn_id"))
            if tid is None:
                self._synthetic += 1
                tid = f"legacy-turn-{self._synthetic}"
                self._task_turns.add(tid)  # delimited by task events: never split by its messages
            cut = self._store.turns.get(self._cur_turn) if self._cur_turn is not None else None
            if cut is not None and cut.status == "inProgress" and self._cur_turn != tid:
                # started and never ended, and another turn began: the writer was killed or
                # restarted in between — what the server then reports as `interrupted`
                cut.status = "interrupted"
            self._cur_turn = tid
            t = self._store.turn(tid)
            t.status = "inProgress"
            t.started_at = _int(p.get("started_at"))
            return
        if st in ("task_complete", "turn_complete", "turn_aborted"):
            tid = _str(p.get("turn_id")) or self._cur_turn
            if tid is None:
                return
            t = self._store.turn(tid)
            t.status = "completed" if st != "turn_aborted" else "interrupted"
            t.completed_at = _int(p.get("completed_at")) or (ts // 1000 if ts else None)
            return
        if st == "user_message" and _str(p.get("turn_id")) is None and self._synthetic_turn_has_user_message("event"):
            self._next_synthetic_turn()
        tid = self._turn_for(rec)
        common = {"thread_id": self._store.thread_id, "turn_id": tid, "source": "legacy"}
        if st in _TOOL_ENDS:
            self._tool_end(st, p, tid, line_key, common)
            return
        if st == "user_message":
            images = [_image_from_url(u) for u in p.get("images") or () if isinstance(u, str)]
            images += [ImageSource("path", u) for u in p.get("local_images") or () if isinstance(u, str)]
            s = sanitize_user_text(_str(p.get("message")) or "")
            self._put(tid, line_key, UserMessage(id=line_key, status="completed", text=s.text,
                                                 images=tuple(images), file_mentions=s.file_mentions,
                                                 client_id=_str(p.get("client_id")), stripped=s.stripped,
                                                 **common), channel="event")
        elif st == "agent_message":
            self._put(tid, line_key, AssistantMessage(id=line_key, status="completed",
                                                      text=_str(p.get("message")) or "",
                                                      phase=_str(p.get("phase")), **common), channel="event")
        elif st == "agent_reasoning":
            self._put(tid, line_key, Reasoning(id=line_key, status="completed",
                                               summary=(_str(p.get("text")) or "",), content=(),
                                               state="plain", **common), channel="event")
        elif st == "item_completed":
            item = p.get("item")
            if not isinstance(item, dict):
                return
            native = _core_item_to_native(item)
            if native.get("type") == "contextCompaction":
                # one facet of a compaction whose `compacted` line came first (0.171.0 writes both)
                at = _int(p.get("completed_at_ms")) or _int(p.get("started_at_ms")) or ts
                self._compaction(tid, _str(native.get("id")) or line_key, "context_compaction_item", at, None)
                return
            r = project_native_item(native, thread_id=self._store.thread_id, turn_id=tid, completed=True)
            r = attrs.evolve(r, source="legacy")
            st_ms, ct_ms = _int(p.get("started_at_ms")), _int(p.get("completed_at_ms"))
            self._put(tid, r.id, r, channel="snapshot", open_=r.status == "inProgress",
                      times=(st_ms, ct_ms, None))
        elif st == "context_compacted":
            self._compaction(tid, line_key, "context_compacted", ts, None)
        elif st == "sub_agent_activity":
            key = _str(p.get("id")) or line_key
            child = p.get("agent_thread_id")
            self._put(tid, key, SubAgent(id=key, status="completed", activity=_str(p.get("kind")),
                                         child_thread_ids=(child,) if isinstance(child, str) else (),
                                         **common), channel="response")
        elif st == "error":
            self._put(tid, line_key, ErrorRecord(id=line_key, status="failed",
                                                 message=_str(p.get("message")) or "",
                                                 info=p.get("codex_error_info"), **common), channel="event")
        # token_count, thread_settings_applied, goals, review mode, unknown events: not shown.

    def _tool_end(self, st: str, p: dict[str, Any], tid: str, line_key: str, common: dict[str, Any]) -> None:
        """A tool's end event (the call's outcome, keyed by its ``call_id``)."""
        if st == "patch_apply_end":
            key = _str(p.get("call_id")) or line_key
            status = _norm_status(p.get("status")) if "status" in p else (
                "completed" if p.get("success") is True else "failed" if p.get("success") is False else "unknown")
            out = "".join(x for x in (_str(p.get("stdout")), _str(p.get("stderr"))) if x) or None
            fc = FileChange(id=key, status=status, changes=_native_changes(p.get("changes")), output=out, **common)
            self._put(tid, key, fc, channel="response")
        elif st == "exec_command_end":
            key = _str(p.get("call_id")) or line_key
            e = self._store.entries.get(key)
            base = e.record if e is not None and isinstance(e.record, CommandExecution) else None
            code = _int(p.get("exit_code"))
            status = _norm_status(p.get("status")) if "status" in p else (
                "unknown" if code is None else "completed" if code == 0 else "failed")
            out = _str(p.get("aggregated_output"))
            if out is None:
                out = "".join(x for x in (_str(p.get("stdout")), _str(p.get("stderr"))) if x) or None
            ce = CommandExecution(
                id=key, status=status,
                command=_join_argv(p.get("command")) or (base.command if base else ""),
                cwd=_str(p.get("cwd")) or (base.cwd if base else None), exit_code=code, output=out,
                actions=_actions(p.get("parsed_cmd")), approval_reason=base.approval_reason if base else None,
                description=base.description if base else None, duration_ms=_duration_ms(p.get("duration")), **common,
            )
            self._put(tid, key, ce, channel="response")
        elif st == "mcp_tool_call_end":
            key = _str(p.get("call_id")) or line_key
            inv = p.get("invocation") if isinstance(p.get("invocation"), dict) else {}
            result = p.get("result")
            content: tuple[ContentBlock, ...] = ()
            structured = None
            error = None
            status = "completed"
            if isinstance(result, dict) and "Ok" in result:
                ok = result["Ok"] if isinstance(result["Ok"], dict) else {}
                content = _content_blocks(ok.get("content"))
                structured = ok.get("structuredContent", ok.get("structured_content"))
                if ok.get("isError") or ok.get("is_error"):
                    status = "failed"
            elif isinstance(result, dict) and "Err" in result:
                error, status = str(result["Err"]), "failed"
            self._put(tid, key, McpToolCall(id=key, status=status, server=str(inv.get("server", "")),
                                            tool=str(inv.get("tool", "")), arguments=inv.get("arguments"),
                                            content=content, structured_content=structured, error=error,
                                            **common), channel="response")
        elif st == "web_search_end":
            key = _str(p.get("call_id")) or line_key
            self._put(tid, key, WebSearch(id=key, status="completed", query=str(p.get("query", "")),
                                          action=p.get("action"), **common), channel="response")
        elif st == "image_generation_end":
            key = _str(p.get("call_id")) or line_key
            result = p.get("result")
            img = ImageSource("data", result, "image/png") if isinstance(result, str) and result else None
            saved = _str(p.get("saved_path"))
            if img is None and saved:
                img = ImageSource("path", saved)
            self._put(tid, key, ImageGeneration(id=key, status=_norm_status(p.get("status")),
                                                revised_prompt=_str(p.get("revised_prompt")),
                                                saved_path=saved, image=img, **common), channel="response")
        elif st == "view_image_tool_call":
            key = _str(p.get("call_id")) or line_key
            self._put(tid, key, ImageView(id=key, status="completed", path=_str(p.get("path")), **common),
                      channel="response")
