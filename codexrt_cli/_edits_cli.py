"""``codexrt edits THREAD_ID`` and ``codexrt undo THREAD_ID PATH``: the edit ledger for a user.

``edits`` lists every file change Codex made in a thread — kind, ``+added -removed``, the
review state and the path — from the thread's native history (R-EDIT-1). ``undo`` takes back
one file's applied changes, newest first, checking first that the file still holds what Codex
wrote (R-EDIT-3); ``--dry-run`` prints the reverse diff and writes nothing.

Both read the thread through the real app-server, read-only (``thread/read`` and
``thread/turns/list``; never ``thread/resume``, never a turn): the CLI is found like everywhere
else in codexrt (``--codex-bin``, else ``CODEX_BIN``/``PATH``…), ``CODEX_HOME`` is inherited or
given with ``--codex-home``. Paths are relative to the thread's recorded working directory (the
submission's cwd), never to the shell's: a later cwd change never retargets the write. Review
checkpoints and undone changes are kept in the per-workspace store
(``$CODEXRT_STATE_DIR``… or ``--state-dir``; see ``docs/edits.md``) and shared with
``codexrt serve``. An undo touches only files below the thread's working directory and never
follows a symbolic link; ``--allow-outside-workspace`` lets one undo reach a file elsewhere.

Exit status: 0 done; 1 an error (no CLI, unknown thread, nothing to undo, I/O…: the message
says which, on stderr); 2 usage; 3 a conflict — the file changed since Codex wrote it: the
diff is shown and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, TextIO

import trio

from codexrt import CodexError, EditConflict, EditLedger, RuntimeConfig, ThreadEdits, load_thread_edits, open_runtime
from codexrt._serve._cli_support import entry_view

__all__ = ["add_parser", "list_edits", "undo_path", "EXIT_CONFLICT"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CONFLICT = 3


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("thread_id", metavar="THREAD_ID", help="the Codex thread (as listed by `codex resume`)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--codex-bin", metavar="PATH", help="Codex CLI to use (default: CODEX_BIN, then PATH …)")
    p.add_argument("--codex-home", metavar="DIR", help="CODEX_HOME of the app-server (default: inherited)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="where codexrt keeps review checkpoints (default: $CODEXRT_STATE_DIR, "
                        "$XDG_STATE_HOME/codexrt or ~/.local/state/codexrt)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "edits",
        help="list the file changes Codex made in a thread, with +/- and review state",
        description="List every file change of a thread (from its history, read-only): kind, "
                    "+added -removed lines, review state (pending/accepted/rejected/undone/notApplied) "
                    "and the path relative to the thread's working directory.",
    )
    _common(p)
    p.add_argument("--pending", action="store_true", help="only applied changes not yet reviewed or undone")
    p.set_defaults(func=_edits_main)
    u = subparsers.add_parser(
        "undo",
        help="take back one file's changes from a thread (checks for your later edits first)",
        description="Reverse every applied, not yet undone change Codex made to PATH in the thread, "
                    "newest first. PATH is relative to the thread's working directory (or absolute). "
                    "If the file no longer holds what Codex wrote, nothing is written, the difference "
                    "is shown and the exit status is 3.",
    )
    _common(u)
    u.add_argument("path", metavar="PATH", help="the file, as `codexrt edits` lists it")
    u.add_argument("--dry-run", action="store_true", help="print the reverse diff; write nothing")
    u.add_argument("--allow-outside-workspace", action="store_true",
                   help="allow this undo to write, restore or remove files outside the thread's working "
                        "directory (refused by default; symbolic links are never followed)")
    u.set_defaults(func=_undo_main)
    return p


def _config(args: argparse.Namespace) -> RuntimeConfig:
    return RuntimeConfig(codex_bin=args.codex_bin, codex_home=args.codex_home, channel_id="codexrt-edits")


def _edits_main(args: argparse.Namespace) -> int:
    return trio.run(lambda: list_edits(args.thread_id, config=_config(args), as_json=args.json,
                                       pending=args.pending, state_dir=args.state_dir))


def _undo_main(args: argparse.Namespace) -> int:
    return trio.run(lambda: undo_path(args.thread_id, args.path, config=_config(args), dry_run=args.dry_run,
                                      as_json=args.json, state_dir=args.state_dir,
                                      allow_outside_workspace=args.allow_outside_workspace))


async def _load(thread_id: str, config: RuntimeConfig, state_dir: str | None) -> ThreadEdits:
    async with open_runtime(config) as rt:
        conn = await rt.ensure_started()
        return await load_thread_edits(conn, thread_id, state_dir=state_dir)


def _fail(exc: CodexError, as_json: bool, out: TextIO, err: TextIO) -> int:
    if as_json:
        out.write(json.dumps({"ok": False, "error": exc.to_dict()}) + "\n")
    else:
        err.write(f"codexrt: error: {exc.message} [{exc.code}]\n")
        hint = exc.details.get("hint") if isinstance(exc.details, dict) else None
        if hint:
            err.write(f"  hint: {hint}\n")
    return EXIT_ERROR


async def list_edits(thread_id: str, *, config: RuntimeConfig, as_json: bool = False, pending: bool = False,
                     state_dir: str | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``codexrt edits``: print the thread's file changes; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        te = await _load(thread_id, config, state_dir)
    except CodexError as exc:
        return _fail(exc, as_json, out, err)
    led = te.ledger
    try:
        entries = led.pending_review(thread_id=thread_id) if pending else led.by_thread(thread_id)
        views = [entry_view(led, e, cwd=te.meta.cwd) for e in entries]
        if as_json:
            out.write(json.dumps({"ok": True, **te.meta.to_dict(), "entries": views}) + "\n")
        else:
            out.write(_table(te, views))
    finally:
        led.store.close()
    return EXIT_OK


def _table(te: ThreadEdits, views: list[dict[str, Any]]) -> str:
    m = te.meta
    lines = [f"thread {m.thread_id}  cwd {m.cwd}  (session {m.session_id}, provider {m.provider or '?'})"]
    if not views:
        lines.append("no file changes")
        return "\n".join(lines) + "\n"
    rows = [("STATE", "KIND", "+ADD", "-DEL", "TURN", "PATH")]
    for v in views:
        path = v["path"] + (f" (from {v['fromPath']})" if v["fromPath"] else "")
        if v["parseError"]:
            path += f"  [unparsed: {v['parseError']}]"
        rows.append((v["state"], v["kind"] or "?", f"+{v['added']}", f"-{v['removed']}",
                     v["key"]["turnId"][:13], path))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[5])
    return "\n".join(line.rstrip() for line in lines) + "\n"


async def undo_path(thread_id: str, path: str, *, config: RuntimeConfig, dry_run: bool = False,
                    as_json: bool = False, state_dir: str | None = None, out: TextIO | None = None,
                    err: TextIO | None = None, allow_outside_workspace: bool = False) -> int:
    """``codexrt undo``: reverse one file's changes in the thread; returns the exit status.
    A change outside the thread's working directory is refused (``OUTSIDE_WORKSPACE``) unless
    ``allow_outside_workspace``."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        te = await _load(thread_id, config, state_dir)
    except CodexError as exc:
        return _fail(exc, as_json, out, err)
    led: EditLedger = te.ledger
    target = os.path.normpath(os.path.join(te.meta.cwd, path))  # relative to the submission's cwd
    try:
        receipt = await led.undo_file((thread_id, target), dry_run=dry_run,
                                      allow_outside_workspace=allow_outside_workspace)
    except EditConflict as exc:
        if as_json:
            out.write(json.dumps({"ok": False, "error": exc.to_dict()}) + "\n")
        else:
            err.write(f"codexrt: {exc.message}\n")
            err.write("expected (what Codex wrote) vs actual (on disk now):\n")
            err.write(exc.details.get("diff", ""))
            if not exc.details.get("diff", "").endswith("\n"):
                err.write("\n")
        return EXIT_CONFLICT
    except CodexError as exc:
        if exc.code == "OUTSIDE_WORKSPACE" and not ({"link", "missing"} & exc.details.keys()):
            exc.details.setdefault("hint", "the file is outside the thread's working directory; "
                                           "rerun with --allow-outside-workspace to undo it anyway")
        return _fail(exc, as_json, out, err)
    finally:
        led.store.close()
    display = te.display_path(led.get(receipt.keys[0]))
    if as_json:
        out.write(json.dumps({"ok": True, "threadId": thread_id, "cwd": te.meta.cwd, **receipt.to_dict()}) + "\n")
    elif dry_run:
        out.write(receipt.reverse_diff if receipt.reverse_diff.endswith("\n") or not receipt.reverse_diff
                  else receipt.reverse_diff + "\n")
        out.write(f"(dry run: {len(receipt.keys)} change(s) of {display} would be undone; nothing written)\n")
    else:
        touched = ", ".join(f"{'removed' if op.content is None else 'restored'} "
                            f"{te.display_path_of(op.path)}" for op in receipt.ops) or "nothing to write"
        out.write(f"undid {len(receipt.keys)} change(s) of {display}: {touched}\n")
    return EXIT_OK
