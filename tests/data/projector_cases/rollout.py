"""A tiny writer of legacy rollout files in the shapes codex 0.169.0 writes (see
``tests/data/rollouts`` and ``tests/data/wrappers`` for real ones), used to build the
projector case files of this directory (``make_cases.py``)."""

from __future__ import annotations

import json
from typing import Any

T0 = "2026-11-30T10:00:00.000Z"


def unified(body: str, *, code: int | None = None, pid: str | int | None = None) -> str:
    """A unified-exec tool receipt (``exec_command`` / ``write_stdin`` output), real header."""
    head = "Chunk ID: 1a2b3c\nWall time: 0.0100 seconds\n"
    if code is not None:
        head += f"Process exited with code {code}\n"
    if pid is not None:
        head += f"Process running with session ID {pid}\n"
    return head + f"Original token count: {max(1, len(body) // 4)}\nOutput:\n{body}"


class Rollout:
    def __init__(self, thread_id: str, cwd: str = "/w") -> None:
        self.thread_id = thread_id
        self.cwd = cwd
        self.lines: list[dict[str, Any]] = []
        self.turn: str | None = None
        self.minute = 0
        self._line("session_meta", {"id": thread_id, "timestamp": T0, "cwd": cwd, "originator": "codexrt-tests",
                                    "cli_version": "0.169.0", "source": "vscode"})

    def _ts(self) -> str:
        return T0

    def _line(self, typ: str, payload: dict[str, Any], ts: str | None = None) -> None:
        self.lines.append({"timestamp": ts or self._ts(), "type": typ, "payload": payload})

    def _meta(self) -> dict[str, Any]:
        return {"internal_chat_message_metadata_passthrough": {"turn_id": self.turn}}

    def start(self, turn_id: str, cwd: str | None = None) -> Rollout:
        self.turn = turn_id
        self._line("event_msg", {"type": "task_started", "turn_id": turn_id})
        self._line("turn_context", {"turn_id": turn_id, "cwd": cwd or self.cwd, "model": "mock-model"})
        return self

    def end(self, status: str = "complete") -> Rollout:
        typ = {"complete": "task_complete", "aborted": "turn_aborted"}[status]
        self._line("event_msg", {"type": typ, "turn_id": self.turn})
        return self

    def user(self, text: str) -> Rollout:
        self._line("event_msg", {"type": "user_message", "message": text, "images": [], "local_images": []})
        self._line("response_item", {"type": "message", "role": "user",
                                     "content": [{"type": "input_text", "text": text}], **self._meta()})
        return self

    def say(self, text: str, mid: str) -> Rollout:
        self._line("response_item", {"type": "message", "id": mid, "role": "assistant",
                                     "content": [{"type": "output_text", "text": text}], **self._meta()})
        return self

    def reasoning(self, rid: str, summary: str | None = None) -> Rollout:
        s = [{"type": "summary_text", "text": summary}] if summary else []
        self._line("response_item", {"type": "reasoning", "id": rid, "summary": s, "content": None,
                                     "encrypted_content": "gAAAA-not-shown", **self._meta()})
        return self

    def call(self, call_id: str, name: str, args: dict[str, Any]) -> Rollout:
        self._line("response_item", {"type": "function_call", "name": name, "arguments": json.dumps(args),
                                     "call_id": call_id, **self._meta()})
        return self

    def out(self, call_id: str, output: str) -> Rollout:
        self._line("response_item", {"type": "function_call_output", "call_id": call_id, "output": output,
                                     **self._meta()})
        return self

    def patch_call(self, call_id: str, patch: str) -> Rollout:
        self._line("response_item", {"type": "custom_tool_call", "name": "apply_patch", "input": patch,
                                     "call_id": call_id, **self._meta()})
        return self

    def custom_out(self, call_id: str, output: Any) -> Rollout:
        self._line("response_item", {"type": "custom_tool_call_output", "call_id": call_id, "output": output,
                                     **self._meta()})
        return self

    def wrapper(self, call_id: str, source: str) -> Rollout:
        self._line("response_item", {"type": "custom_tool_call", "name": "exec", "input": source,
                                     "call_id": call_id, **self._meta()})
        return self

    def wrapper_out(self, call_id: str, items: list[str], *, status: str = "completed",
                    error: str | None = None) -> Rollout:
        head = {"completed": "Script completed", "failed": "Script failed",
                "terminated": "Script terminated"}[status] + "\nWall time 0.1 seconds\nOutput:\n"
        texts = [head, *items]
        if error is not None:
            texts.append(f"Script error:\n{error}")
        self._line("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                                     "output": [{"type": "input_text", "text": t} for t in texts], **self._meta()})
        return self

    def item_cmd(self, item_id: str, cmd: str, *, output: str, code: int | None, pid: str | int | None = None,
                 cwd: str | None = None, status: str | None = None, turn: str | None = None) -> Rollout:
        item: dict[str, Any] = {
            "type": "CommandExecution", "id": item_id, "command": ["/bin/bash", "-lc", cmd],
            "cwd": "file://" + (cwd or self.cwd), "aggregated_output": output, "exit_code": code,
            "status": status or ("completed" if code == 0 else "failed"), "source": "unified_exec_startup",
        }
        if pid is not None:
            item["process_id"] = str(pid)
        self._line("event_msg", {"type": "item_completed", "thread_id": self.thread_id, "turn_id": turn or self.turn,
                                 "item": item})
        return self

    def item_file_change(self, item_id: str, changes: dict[str, Any], status: str = "completed",
                         stdout: str = "") -> Rollout:
        self._line("event_msg", {"type": "item_completed", "thread_id": self.thread_id, "turn_id": self.turn,
                                 "item": {"type": "FileChange", "id": item_id, "changes": changes,
                                          "status": status, "stdout": stdout, "stderr": ""}})
        return self

    def patch_end(self, call_id: str, changes: dict[str, Any], success: bool, stdout: str = "") -> Rollout:
        self._line("event_msg", {"type": "patch_apply_end", "call_id": call_id, "turn_id": self.turn,
                                 "stdout": stdout, "stderr": "", "success": success, "changes": changes,
                                 "status": "completed" if success else "failed"})
        return self

    def compacted(self, message: str, ts: str) -> Rollout:
        self._line("compacted", {"message": message, "replacement_history": []}, ts=ts)
        return self

    def context_compacted(self, ts: str) -> Rollout:
        self._line("event_msg", {"type": "context_compacted", "turn_id": self.turn}, ts=ts)
        return self

    def text(self) -> str:
        return "".join(json.dumps(x, sort_keys=True) + "\n" for x in self.lines)
