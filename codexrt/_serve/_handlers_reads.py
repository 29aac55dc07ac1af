"""``codexrt serve`` commands that run in their own task and never take the FIFO or resume a
thread: native reads and history (R-D-1, R-H-*), catalogs (R-CAT-1), the edit ledger
(R-EDIT-1..3), helpers on their own ephemeral child (R-HLP-1..3), the workspace diff (R-DIFF-1)
and, in access mode ``inactive``, history from the rollout files (R-LC-3)."""

from __future__ import annotations

import os
from typing import Any

import attrs
from msgspec import UNSET

from codexrt._features._catalog import run_catalog_command
from codexrt._features._edits_live import LiveEdits, run_edit_command
from codexrt._features._helpers import (DEFAULT_HELPER_TIMEOUT, enhance_prompt, generate_commit_message,
                                        generate_title, helper_config)
from codexrt._features._history_commands import (HISTORY_COMMANDS, run_history_command,
                                                 run_legacy_history_command)
from codexrt._features._history_count import MessageCounter
from codexrt._io._codex_home import resolve_codex_home
from codexrt._io._retry import call_read
from codexrt._io._workspace import DiffStatus, read_workspace_diff
from codexrt._runtime._interactions import PrivacyStore, default_privacy_dir
from codexrt._sansio._errors import CodexError, ConfigError, DiffUnavailable, RelationUnverified
from codexrt._serve._channel import Channel, inflight_release
from codexrt._serve._codec import Command
from codexrt._serve._commands import (CATALOG_COMMANDS, READ_ONLY_METHODS, EnhancePromptParams,
                                      GenerateCommitMessageParams, GenerateTitleParams, ReadWorkspaceDiffParams)
from codexrt._serve._core import DaemonCore

__all__ = ["read_only", "legacy_history", "edit_command", "helper", "workspace_diff"]

async def read_only(d: DaemonCore, cmd: Command, ch: Channel) -> None:
    """Native reads: the runtime's connection, never the FIFO, never ``thread/resume``."""
    release = inflight_release(ch)
    p = dict(cmd.params)
    p.pop("channelId", None)
    method = READ_ONLY_METHODS.get(cmd.name, "")
    try:
        if cmd.name in HISTORY_COMMANDS:  # R-H-1..R-H-8: codexrt._features._history_commands
            if d.history_counter is None:
                assert d.nursery is not None
                d.history_counter = MessageCounter(d.nursery)  # host-level (R-H-7)
            await d.reply(cmd.id, await run_history_command(ch.rt, cmd.name, cmd.params,
                                                            counter=d.history_counter, nursery=d.nursery,
                                                            page_cache=d.history_pages,
                                                            read_ahead=d.history_ahead))
            return
        if cmd.name == "codex.readHistoryPage":
            scope = p.pop("scope", "turns")
            method = "thread/items/list" if scope == "items" else "thread/turns/list"
        parent = p.pop("parentThreadId", None) if cmd.name == "codex.readSubagent" else None
        if cmd.name in CATALOG_COMMANDS:
            await d.reply(cmd.id, await run_catalog_command(ch.rt, cmd.name, p))
            return
        conn = await ch.rt.ensure_started()
        result = await call_read(conn, method, p)
        if cmd.name == "codex.readSubagent":
            thread = (result or {}).get("thread") or {}
            actual = thread.get("parentThreadId")
            if parent is not None and actual != parent:
                raise RelationUnverified(
                    f"thread {cmd.params['threadId']} is not a child of {parent} (its parent is {actual!r})",
                    details={"threadId": cmd.params["threadId"], "parentThreadId": actual})
            result = {"thread": thread, "parentThreadId": actual,
                      "relationVerified": parent is not None and actual == parent}
        await d.reply(cmd.id, result)
    except CodexError as exc:
        await d.reply(cmd.id, error=exc)
    finally:
        release()


async def legacy_history(d: DaemonCore, cmd: Command) -> None:
    """Access mode ``inactive``: thread list, transcript and counts from the rollout files
    under ``CODEX_HOME/sessions``, masked with the privacy index of that home; no channel
    runtime is created and nothing is spawned (R-LC-3, R-H-3, R-H-6)."""
    rc = d.config.runtime
    env = rc.env if rc.env is not None else os.environ
    home = resolve_codex_home(rc.codex_home, env)
    store = PrivacyStore.for_home(default_privacy_dir(env), str(home))
    assert d.nursery is not None
    try:
        result = await run_legacy_history_command(cmd.name, cmd.params, codex_home=home, privacy=store.load,
                                                   nursery=d.nursery)
        await d.reply(cmd.id, result)
    except CodexError as exc:
        await d.reply(cmd.id, error=exc)


async def edit_command(d: DaemonCore, cmd: Command, ch: Channel) -> None:
    """``codex.listEdits`` … ``codex.undoFile``: like a read-only command, never the FIFO and
    never a resume; each runs in its own task, so undos of different files run in parallel.
    The channel's :class:`LiveEdits` starts on the first one (history covers what came
    before) and ends with the channel's runtime."""
    release = inflight_release(ch)
    try:
        live = ch.edits
        if live is None or live.closed:
            live = ch.edits = LiveEdits(ch.rt)
            assert d.nursery is not None
            await d.nursery.start(live.run)
        await live.subscribed.wait()
        await d.reply(cmd.id, await run_edit_command(live, cmd.name, cmd.params))
    except CodexError as exc:
        await d.reply(cmd.id, error=exc)
    finally:
        release()


async def helper(d: DaemonCore, cmd: Command) -> None:
    """A helper on its own ephemeral child (R-HLP-1); never the channel's FIFO or writer."""
    a = cmd.args
    assert isinstance(a, (EnhancePromptParams, GenerateCommitMessageParams, GenerateTitleParams))
    cfg = helper_config(attrs.evolve(d.config.runtime, channel_id=a.channel_id))
    timeout = float(a.timeout or DEFAULT_HELPER_TIMEOUT)
    try:
        if isinstance(a, EnhancePromptParams):
            result: dict[str, Any] = {"prompt": await enhance_prompt(cfg, a.prompt, timeout=timeout, cwd=a.cwd)}
        elif isinstance(a, GenerateCommitMessageParams):
            diff_text, diff_status = a.diff, None
            if diff_text is None:
                cwd = a.cwd or cfg.cwd
                if not cwd:
                    raise ConfigError("codex.generateCommitMessage needs a diff or a cwd")
                wd = await read_workspace_diff(cwd, session_id=a.session_id or "", channel_id=a.channel_id)
                diff_status = wd.status.value
                if wd.status not in (DiffStatus.OK, DiffStatus.TRUNCATED):
                    raise DiffUnavailable(f"cannot read the workspace diff of {cwd}: {wd.status.value}",
                                          details={"status": wd.status.value, "message": wd.message})
                diff_text = wd.staged or (wd.unstaged + wd.untracked)
            message = await generate_commit_message(cfg, diff_text, timeout=timeout, cwd=a.cwd)
            result = {"message": message, "diffStatus": diff_status}
        else:  # codex.generateTitle
            title = await generate_title(cfg, a.message, timeout=timeout, cwd=a.cwd)
            tid, saved, reason = a.thread_id, False, None
            if tid and a.save:
                ch = d.channels.get(a.channel_id)
                # never starts or restarts the writer: only a READY runtime with a live child
                child = ch.rt.current_child() if ch is not None else None
                if child is None:
                    reason = "runtime not ready"
                else:
                    if ch is not None and ch.titles is not None:
                        ch.titles.name_set_manually(tid)  # the host's name wins over an automatic one
                    await child.call("thread/name/set", {"threadId": tid, "name": title})
                    saved = True
            result = {"title": title, "threadId": tid, "saved": saved, "reason": reason}
        await d.reply(cmd.id, result)
    except CodexError as exc:
        await d.reply(cmd.id, error=exc)


async def workspace_diff(d: DaemonCore, cmd: Command) -> None:
    """Git only, no model turn; a fresh read every time, tied to the session and cwd (R-DIFF-1)."""
    a = cmd.args
    assert isinstance(a, ReadWorkspaceDiffParams)
    kwargs: dict[str, Any] = {}
    if a.max_bytes is not None:
        kwargs["max_bytes"] = a.max_bytes
    if a.timeout is not None:
        kwargs["timeout"] = a.timeout
    try:
        if a.channel_id is not UNSET:
            kwargs["channel_id"] = a.channel_id  # the fan-out cap counts per channel (issue 35)
        diff = await read_workspace_diff(a.cwd, session_id=a.session_id or "", **kwargs)
        await d.reply(cmd.id, diff.to_dict())
    except CodexError as exc:
        await d.reply(cmd.id, error=exc)
