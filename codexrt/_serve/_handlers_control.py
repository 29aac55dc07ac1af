"""``codexrt serve`` control, launch and lifecycle commands: ``codex.updateSettings``,
``codex.abortTurn`` and ``codex.respondInteraction[Error]`` (answered by the reader at once,
never queued: R-OP-1), ``codex.configureLaunch`` (R-LC-1..3), ``codex.releaseThread`` and
``codex.resetRuntime`` (own task; they stop work but never take the FIFO: R-D-1)."""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable

import attrs
import trio
from msgspec import UNSET, UnsetType

from codexrt._runtime._launch import launch_fingerprint
from codexrt._runtime._runtime import Operation
from codexrt._sansio._errors import CodexError, InteractionUnknown, InteractionWrongChannel
from codexrt._sansio._redact import hold_process_secrets
from codexrt._sansio._settings import Settings
from codexrt._sansio._states import RuntimeState
from codexrt._serve._channel import Channel, answering
from codexrt._serve._codec import Command
from codexrt._serve._commands import (AbortTurnParams, RespondInteractionErrorParams, RespondInteractionParams,
                                      UpdateSettingsParams)
from codexrt._serve._core import DaemonCore

__all__ = ["control", "configure_launch", "lifecycle"]


async def control(d: DaemonCore, cmd: Command) -> None:
    a = cmd.args
    if isinstance(a, UpdateSettingsParams):
        ch = await d.channel(a.channel_id)
        # the settings as sent: which keys were given (even as null) is what the update means
        revision = ch.rt.update_settings(Settings.from_wire(cmd.params["settings"]))
        await d.reply(cmd.id, {"settingsRevision": revision, "desired": ch.rt.desired.to_wire()})
    elif isinstance(a, AbortTurnParams):
        ch_or_none = d.channels.get(a.channel_id)
        op_id = a.client_operation_id
        if ch_or_none is None:
            await d.reply(cmd.id, {"stopPath": "noOperation", "clientOperationId": op_id})
            return
        rt = ch_or_none.rt
        target = op_id or (rt.active.id if rt.active is not None else None)
        if target is None:
            queued = ch_or_none.live_ops()
            target = queued[0].id if queued else None
        path = rt.abort(target) if target is not None else "noOperation"
        await d.reply(cmd.id, {"stopPath": path, "clientOperationId": target})
    else:
        assert isinstance(a, (RespondInteractionParams, RespondInteractionErrorParams))
        ch = find_interaction_channel(d, a.interaction_key, a.channel_id)
        # The app-server may end the turn as soon as it reads the answer: this command's reply
        # (or its refusal) goes out before the reply to the send it unblocked (R-OP-1).
        with ch.answering_host():
            try:
                if isinstance(a, RespondInteractionParams):
                    await ch.rt.respond_interaction(a.interaction_key, a.dialog_token, a.result)
                else:
                    await ch.rt.respond_interaction_error(a.interaction_key, a.dialog_token, a.error.code,
                                                          a.error.message)
            except Exception as exc:  # the fault barrier's answer, given inside the gate
                answer = answering.get()
                assert answer is not None
                await d.answer_failure(cmd, answer, exc)
                return
            ch.touch()
            await d.reply(cmd.id, {"interactionKey": a.interaction_key, "answered": True})


def find_interaction_channel(d: DaemonCore, key: str, channel_id: str | UnsetType) -> Channel:
    """The channel holding ``key``. A ``channelId`` that names another channel than the one
    holding a live key is refused (``INTERACTION_WRONG_CHANNEL``), not reported unknown."""
    holder = next((ch for ch in d.channels.values() if key in ch.rt.interactions), None)
    if channel_id is UNSET:
        if holder is not None:
            return holder
    elif holder is not None and holder.id != channel_id:
        raise InteractionWrongChannel(f"interaction {key!r} belongs to channel {holder.id!r}, not {channel_id!r}; "
                                      "nothing was sent", details={"interactionKey": key, "channelId": channel_id,
                                                                   "keyChannelId": holder.id})
    else:
        ch = d.channels.get(channel_id)
        if ch is not None:
            return ch
    raise InteractionUnknown(f"unknown interaction {key!r}")


async def configure_launch(d: DaemonCore, cmd: Command) -> None:
    """``codex.configureLaunch`` (R-LC-1..3): a new launch configuration for one channel
    (``channelId``) or, without one, for channels created later and every live one. Every
    target is validated before any changes; each live runtime applies it through
    :meth:`Runtime.update_launch` (rebuild at once when idle, after the active operation
    otherwise; a ``runtimeReset`` event when the child is retired). ``model`` is a per-turn
    setting (desired settings), never part of the fingerprint. The API key and header values
    are registered as secrets before anything else happens."""
    p = cmd.params
    provider = p.get("provider")
    # Held until the next configureLaunch (its errors are masked); the runtimes and the default
    # configuration hold what they keep, and let go when it is replaced (issue 35).
    hold_process_secrets("serve.configureLaunch", [p.get("apiKey"), *((provider or {}).get("headers") or {}).values()])
    changes: dict[str, Any] = {"access_mode": p["accessMode"], "provider": provider, "api_key": p.get("apiKey")}
    if "codexHome" in p:
        changes["codex_home"] = p["codexHome"]
    if "codexBin" in p:
        changes["codex_bin"] = p["codexBin"]
    model = p.get("model")
    cid = p.get("channelId")
    if cid is not None:
        targets = [await d.channel(cid)]
    else:
        targets = list(d.channels.values())
    # Validate everything first: an invalid configuration changes nothing anywhere.
    template = attrs.evolve(d.config.runtime, **changes)
    if model is not None:
        template.settings = attrs.evolve(template.settings, model=model)
    fingerprint = launch_fingerprint(template.launch_config())
    for ch in targets:
        attrs.evolve(ch.rt.config, **changes).launch_config()
    rebuilds: dict[str, str] = {}
    if cid is None:
        before = launch_fingerprint(d.config.runtime.launch_config())
        d.config.runtime = template
        hold_process_secrets("serve.defaultLaunch", template.secret_values())
        d.config.inactive = p["accessMode"] == "inactive"
        if before != fingerprint and not targets:
            rebuilds["*"] = "immediate"  # nothing running: channels created later use it
    for ch in targets:
        rebuilds[ch.id] = ch.rt.update_launch(**changes)
        if model is not None:
            ch.rt.update_settings(model=model)
        ch.touch()
        if cid is not None:
            fingerprint = ch.rt.launch_fingerprint()
    kinds = set(rebuilds.values())
    rebuild = "deferred" if "deferred" in kinds else "immediate" if "immediate" in kinds else "unchanged"
    await d.reply(cmd.id, {"fingerprint": fingerprint, "rebuild": rebuild,
                           "channels": {k: v for k, v in rebuilds.items() if k != "*"}})


async def stop_ops(ch: Channel, ops: list[Operation], *,
                    then: Callable[[], Awaitable[None]] | None = None) -> list[dict[str, Any]]:
    """Stop ``ops`` (R-OP-5), run ``then`` (if given) once every stop is requested, and
    wait for their terminals; the runtime's stop budget bounds the wait (after it the child
    is killed and the op fails)."""
    stopped = []
    for op in ops:
        stopped.append({"clientOperationId": op.id, "stopPath": ch.rt.abort(op), "status": None})
    if then is not None:
        await then()
    with trio.move_on_after(ch.rt.config.stop_budget + 15):
        for op, entry in zip(ops, stopped):
            entry["status"] = (await op.wait()).status
    return stopped


async def lifecycle(d: DaemonCore, cmd: Command, ch: Channel | None) -> None:
    try:
        if cmd.name == "codex.resetRuntime":
            if ch is None:
                await d.reply(cmd.id, {"stoppedOperations": [], "runtime": None})
                return
            then = None
            if ch.rt.state in (RuntimeState.STARTING, RuntimeState.INITIALIZING):
                # The child is still starting: retire it now; an operation waiting for it
                # (its stop already requested) ends cancelled instead of waiting the budget.
                then = functools.partial(ch.rt.reset, reason="resetRuntime")
            stopped = await stop_ops(ch, ch.live_ops(), then=then)
            await ch.cancel_titles(reason="resetRuntime")  # R-HLP-3: reset waits for helpers
            await ch.rt.reset(reason="resetRuntime")
            await d.events_written(ch)  # the reply comes after runtimeReset and STOPPED
            await d.reply(cmd.id, {"stoppedOperations": stopped, "runtime": ch.snapshot()})
            return
        # codex.releaseThread
        tid = cmd.params["threadId"]
        result: dict[str, Any] = {"threadId": tid, "stoppedOperations": [], "unsubscribe": None,
                                  "runtimeRetired": False}
        if ch is None:
            await d.reply(cmd.id, result)
            return
        rt = ch.rt
        # R-D-1: the verified relation set first (children deepest first: stopped, waited
        # for until not active, unsubscribed); the lease itself is released at the end.
        for child in rt.relations(tid):
            result["stoppedOperations"] += await stop_ops(ch, ch.live_ops(child))
        result["releasedChildren"] = await rt.drain_relations(tid)
        result["stoppedOperations"] += await stop_ops(ch, ch.live_ops(tid))
        await ch.cancel_titles(tid, reason="releaseThread")  # R-HLP-3: release waits for helpers
        try:  # the next operation on it resumes it
            result["unsubscribe"] = await rt.unload_thread(tid)
        except CodexError as exc:
            result["unsubscribeError"] = exc.to_dict()
        snap = rt.runtime_snapshot()
        if snap["sessionCount"] == 0 and not snap["busy"] and rt.is_connected():
            await ch.cancel_titles(reason="releaseThread")  # nothing may save on a retired child
            await rt.reset(reason="releaseThread")  # confirms the child's exit (R-RT-5)
            result["runtimeRetired"] = True
        rt.release_relation_lease(tid)  # only now: after the children and the child's exit
        ch.touch()
        await d.events_written(ch)  # the reply comes after the release's events (runtimeReset, STOPPED)
        await d.reply(cmd.id, result)
    except CodexError as exc:
        await d.reply(cmd.id, error=exc)
