"""Native receipts: the tool records that follow a wrapper, paired and read for what they prove.

A :class:`Receipt` is one native record (a nested call or its output), built from a rollout
``response_item``, an ``item_completed`` ``CommandExecution``/``FileChange`` item, or a
``patch_apply_end`` event. :class:`ReceiptPairer` pairs calls with outputs by ``call_id``
whatever the arrival order, in a bounded cache of unpaired records (overflow is counted, R-H-5).
``_native_result`` reads what an invocation proves — output body, exit code, process id,
still running — from structured fields first, then from the tool's own header lines. The
argument readers (command, working directory, ``write_stdin`` target) are shared by the
matching stage in ``_engine``.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from .._patch import parse_apply_patch
from ._model import COMMAND_TOOLS, DEFAULT_MAX_UNPAIRED, DYNAMIC, _crlf, _pid, normalize_dir


@attrs.frozen
class Receipt:
    """One native record following the wrapper: a nested call or its output.

    ``kind`` is ``"call"`` (``function_call`` / ``custom_tool_call``) or ``"output"``
    (``function_call_output`` / ``custom_tool_call_output``). On a call, ``tool`` is the
    tool name and ``arguments`` the parsed argument object (or the raw freeform input of
    ``apply_patch``). On an output, ``output`` is the text and ``success`` / ``exit_code``
    the *native* outcome when the record states it. ``process_id`` is the native
    process/session id where the record carries one. ``ordinal`` is the record's position
    in its transcript (used only to order polling chunks, never to attribute).
    ``headerless`` marks an output that is the command's own bytes (``aggregated_output``
    of an item, a patch's stdout): it has no tool header, so nothing in it is read as an
    exit code or a process id. ``started_ms`` is, on an item's call, the server's
    ``started_at_ms`` (when the command started, by the server's clock): the reader uses it
    only to rule a cell *out* (a script that had ended starts nothing).
    """

    kind: Literal["call", "output"]
    call_id: str
    tool: str | None = None
    arguments: Any = None
    output: str | None = None
    success: bool | None = None
    exit_code: int | None = None
    process_id: str | None = attrs.field(default=None, converter=lambda v: _pid(v))
    ordinal: int | None = None
    headerless: bool = False
    started_ms: int | None = None

    @classmethod
    def from_response_item(cls, payload: Mapping[str, Any], *, ordinal: int | None = None) -> Receipt | None:
        """Build a receipt from a rollout ``response_item`` payload; ``None`` if it is not
        a tool call or tool output (messages, reasoning, …)."""
        typ = payload.get("type")
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return None
        if typ in ("function_call", "custom_tool_call", "local_shell_call"):
            name = payload.get("name") or ("local_shell" if typ == "local_shell_call" else None)
            raw = payload.get("arguments", payload.get("input", payload.get("action")))
            args: Any = raw
            if typ == "function_call" and isinstance(raw, str):
                try:
                    args = json.loads(raw)
                except (ValueError, RecursionError):  # too deep is not JSON here
                    args = raw
            return cls("call", call_id, tool=name, arguments=args, ordinal=ordinal)
        if typ in ("function_call_output", "custom_tool_call_output"):
            out = payload.get("output")
            success = None
            if isinstance(out, Mapping):
                success = out.get("success") if isinstance(out.get("success"), bool) else None
                out = out.get("content", out.get("body"))
            text = _content_text(out)
            return cls("output", call_id, output=text, success=success, ordinal=ordinal)
        return None


def receipts_from_rollout_line(line: Mapping[str, Any]) -> list[Receipt]:
    """Native receipts carried by one rollout line (``{timestamp, [ordinal], type, payload}``).

    * ``response_item`` tool calls / outputs → one receipt (see :meth:`Receipt.from_response_item`);
    * ``event_msg`` ``item_completed`` of a ``CommandExecution`` item — how the real 0.169.0
      server records a command run from inside a code-mode cell (id ``exec-<uuid>``,
      ``process_id``, ``command`` argv, ``cwd`` as a ``file:`` URI, ``aggregated_output``,
      ``exit_code``, ``status``) → a call and its output, paired by the item id. A bash
      ``-lc`` argv is read back as its script text.
    Anything else → ``[]``.
    """
    payload = line.get("payload")
    ordinal = line.get("ordinal") if isinstance(line.get("ordinal"), int) else None
    if not isinstance(payload, Mapping):
        return []
    if line.get("type") == "response_item":
        r = Receipt.from_response_item(payload, ordinal=ordinal)
        return [] if r is None else [r]
    if line.get("type") != "event_msg" or payload.get("type") != "item_completed":
        return []
    item = payload.get("item")
    if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
        return []
    if item.get("type") == "FileChange":
        return _file_change_receipts(item["id"], item.get("changes"), item.get("status"), item, ordinal)
    if item.get("type") != "CommandExecution":
        return []
    argv = item.get("command")
    if isinstance(argv, list) and len(argv) == 3 and argv[1] in ("-lc", "-c") and isinstance(argv[2], str):
        cmd: Any = argv[2]
    elif isinstance(argv, list):
        cmd = " ".join(str(a) for a in argv)
    else:
        cmd = argv
    args: dict[str, Any] = {"cmd": cmd}
    if isinstance(item.get("cwd"), str):
        args["workdir"] = item["cwd"]
    pid = item.get("process_id")
    status = item.get("status")
    started = payload.get("started_at_ms")
    call = Receipt("call", item["id"], tool="exec_command", arguments=args, process_id=pid, ordinal=ordinal,
                   started_ms=started if isinstance(started, int) and not isinstance(started, bool) else None)
    if status in ("in_progress", "inProgress"):
        return [call]
    exit_code = item.get("exit_code")
    success = None if status not in ("failed", "declined") else False
    out = item.get("aggregated_output")
    return [
        call,
        Receipt(
            "output",
            item["id"],
            output=_crlf(out) if isinstance(out, str) else None,
            success=success,
            exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            process_id=pid,
            ordinal=ordinal,
            headerless=True,
        ),
    ]


def patch_end_receipts(payload: Mapping[str, Any], *, ordinal: int | None = None) -> list[Receipt]:
    """Receipts of an ``event_msg/patch_apply_end`` (``call_id``, ``changes``, ``success`` /
    ``status``, ``stdout``/``stderr``): an ``apply_patch`` call identified by the files it
    changed, and its native outcome."""
    cid = payload.get("call_id")
    if not isinstance(cid, str):
        return []
    status = payload.get("status")
    if not isinstance(status, str):
        status = {True: "completed", False: "failed"}.get(payload.get("success"))  # type: ignore[arg-type]
    return _file_change_receipts(cid, payload.get("changes"), status, payload, ordinal)


def _file_change_receipts(cid: str, changes: Any, status: Any, src: Mapping[str, Any],
                          ordinal: int | None) -> list[Receipt]:
    files: list[str] = []
    if isinstance(changes, Mapping):
        for path, ch in changes.items():
            files.append(str(path))
            mv = ch.get("move_path") if isinstance(ch, Mapping) else None
            if isinstance(mv, str):
                files.append(mv)
    elif isinstance(changes, list):
        for ch in changes:
            if isinstance(ch, Mapping) and isinstance(ch.get("path"), str):
                files.append(ch["path"])
    call = Receipt("call", cid, tool="apply_patch", arguments={"files": sorted(files)}, ordinal=ordinal)
    if status in ("in_progress", "inProgress", None):
        return [call]
    text = "".join(x for x in (src.get("stdout"), src.get("stderr")) if isinstance(x, str)) or None
    success = True if status == "completed" else False if status in ("failed", "declined") else None
    return [call, Receipt("output", cid, output=_crlf(text) if text else None, success=success, ordinal=ordinal,
                          headerless=True)]


def _content_text(out: Any) -> str | None:
    if out is None:
        return None
    if isinstance(out, str):
        return _crlf(out)
    if isinstance(out, Sequence):
        parts = [
            item.get("text", "") for item in out if isinstance(item, Mapping) and isinstance(item.get("text"), str)
        ]
        return _crlf("\n".join(parts))
    return _crlf(json.dumps(out))


@attrs.frozen
class _Invocation:
    call: Receipt
    output: Receipt | None

    @property
    def tool(self) -> str:
        return self.call.tool or ""

    @property
    def args(self) -> Any:
        return self.call.arguments


class ReceiptPairer:
    """Pairs native call records with their outputs by ``call_id`` regardless of arrival
    order. Unpaired records (inputs waiting for an output, outputs waiting for their call)
    wait in a bounded cache of ``max_unpaired`` entries; on overflow the oldest unpaired
    record is evicted and counted in ``evicted`` (R-H-5: bounded cache of unpaired inputs)."""

    def __init__(self, max_unpaired: int = DEFAULT_MAX_UNPAIRED) -> None:
        if max_unpaired < 1:
            raise ValueError("max_unpaired must be at least 1")
        self.max_unpaired = max_unpaired
        self._unpaired: OrderedDict[tuple[str, str], Receipt] = OrderedDict()
        self.paired: dict[str, _Invocation] = {}
        self.evicted = 0

    def feed(self, receipt: Receipt) -> None:
        cid = receipt.call_id
        if cid in self.paired:
            return  # a duplicate record of an already paired invocation
        other = ("output" if receipt.kind == "call" else "call", cid)
        partner = self._unpaired.pop(other, None)
        if partner is not None:
            call, out = (receipt, partner) if receipt.kind == "call" else (partner, receipt)
            self.paired[cid] = _Invocation(call, out)
            return
        self._unpaired[(receipt.kind, cid)] = receipt
        while len(self._unpaired) > self.max_unpaired:
            self._unpaired.popitem(last=False)
            self.evicted += 1

    def invocations(self) -> list[_Invocation]:
        """Paired invocations plus calls still waiting for an output (output ``None``)."""
        waiting = [_Invocation(r, None) for (kind, _), r in self._unpaired.items() if kind == "call"]
        return [*self.paired.values(), *waiting]

    def orphan_outputs(self) -> list[Receipt]:
        return [r for (kind, _), r in self._unpaired.items() if kind == "output"]


_NATIVE_HEADER = re.compile(r"^(?:Chunk ID|Wall time|Original token count|Total output lines)\b[^\n]*$")


@attrs.frozen
class _Native:
    """What a native invocation proves: output body, exit code, process id, running."""

    inv: _Invocation
    body: str | None
    exit_code: int | None
    pid: str | None
    success: bool | None
    running: bool


def _native_result(inv: _Invocation) -> _Native:
    """Read the native outcome: structured fields first, then the unified-exec /
    shell header of the native output text (``Process exited with code N``, ``Exit code:
    N``, ``Process running with session ID N``) — these are the *receipt's* own words, not
    data printed by the wrapper."""
    out = inv.output
    if out is None:
        return _Native(inv, None, None, inv.call.process_id, None, False)
    text = out.output
    exit_code = out.exit_code
    pid = out.process_id or inv.call.process_id
    running = False
    if text is not None and not out.headerless:
        # The tool's own header: known lines only, ended by ``Output:``. Without that end
        # there is no header and nothing is read out of the text.
        lines = text.split("\n")
        h_code: int | None = None
        h_pid: str | None = None
        for j, line in enumerate(lines[:8]):
            m = re.match(r"^Process exited with code (-?\d+)$", line) or re.match(r"^Exit code: (-?\d+)$", line)
            if m:
                h_code = int(m.group(1)) if h_code is None else h_code
                continue
            m = re.match(r"^Process running with session ID (\S+)$", line)
            if m:
                h_pid = h_pid or m.group(1)
                continue
            if line == "Output:":
                text = "\n".join(lines[j + 1 :])
                exit_code = h_code if exit_code is None else exit_code
                if h_pid is not None:
                    pid, running = pid or h_pid, True
                break
            if not _NATIVE_HEADER.match(line):
                break
    return _Native(inv, text, exit_code, pid, out.success, running and exit_code is None)


def _command_of(tool: str, args: Any) -> str | None:
    if not isinstance(args, Mapping):
        return None
    v = args.get("cmd", args.get("command"))
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return " ".join(v)
    return _crlf(v).strip() if isinstance(v, str) else None


def _cwd_of_raw(args: Any) -> Any:
    if not isinstance(args, Mapping):
        return None
    return args.get("workdir", args.get("cwd", args.get("working_directory")))


def _cwd_of(args: Any) -> str | None:
    if not isinstance(args, Mapping):
        return None
    v = args.get("workdir", args.get("cwd", args.get("working_directory")))
    return v if isinstance(v, str) else None


def _same_files(patch: str, files: Sequence[Any]) -> bool:
    """A native FileChange result (absolute paths) is this literal patch's when each file
    of the patch names exactly one of the result's files and none is left over."""
    files_of_patch = parse_apply_patch(patch)
    mine = [f.path for f in files_of_patch] + [f.move_path for f in files_of_patch if f.move_path]
    theirs = [normalize_dir(f) or str(f).replace("\\", "/") for f in files if isinstance(f, str)]
    if not mine or len(mine) != len(theirs):
        return False
    left = list(theirs)
    for m in mine:
        m_abs = normalize_dir(m)
        rel = m.replace("\\", "/").lstrip("/")
        while rel.startswith("./"):
            rel = rel[2:]
        hits = [t for t in left if (t == m_abs if m_abs else (t == rel or t.endswith("/" + rel)))]
        if len(hits) != 1:
            return False
        left.remove(hits[0])
    return not left


def _tool_family(tool: str) -> str:
    return "command" if tool in COMMAND_TOOLS else tool


def _stdin_args(args: Any) -> tuple[str | None, str | None]:
    if not isinstance(args, Mapping):
        return None, None
    chars = args.get("chars", args.get("input"))
    target = args.get("session_id", args.get("process_id"))
    return (None if target is DYNAMIC else _pid(target)), (chars if isinstance(chars, str) else None)
