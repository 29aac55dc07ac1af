"""``codexrt serve`` long commands (``codex.send``/``compact``/``review``/``preconnect``) and
plans (``codex.replayInteractions``, ``codex.executePlan``): the reader queues the operation on
its channel's runtime FIFO at once (submission order is line order); the reply comes at its
terminal, after its ``operationDone`` event — written right behind that event's line, or by a
waiter task (module doc of :mod:`codexrt._serve._daemon`)."""

from __future__ import annotations

from typing import Any

import trio

from codexrt._runtime._runtime import Operation
from codexrt._sansio._editor_wire import editor_state_from_wire, is_fragment_map
from codexrt._sansio._settings import Settings
from codexrt._serve._channel import Channel, answering
from codexrt._serve._codec import Command
from codexrt._serve._core import DONE_EVENT_GRACE, DaemonCore

__all__ = ["accept_long", "interaction_command"]


async def accept_long(d: DaemonCore, cmd: Command) -> None:
    """Queue a long command on its channel's FIFO now (line order) and spawn its waiter."""
    ch = await d.channel(cmd.params["channelId"])
    op = create_op(ch, cmd)
    done = ch.track(op, cmd.id)  # no checkpoint between creating the op and this (module doc)
    d.spawn(await_op, cmd, ch, op, done)


def create_op(ch: Channel, cmd: Command) -> Operation:
    p = cmd.params
    ch.touch()
    rt = ch.rt
    if cmd.name == "codex.send":
        settings = Settings.from_wire(p["settings"]) if p.get("settings") else None
        if p.get("cwd"):
            settings = (settings or Settings()).merged(Settings(cwd=p["cwd"]))
        # context: ready additionalContext fragments, or the editor state (R-CTX-1); both
        # are frozen by rt.send now, and the probe decides at dispatch how they travel.
        ctx = p.get("context") or None
        editor_state = None
        if ctx is not None and not is_fragment_map(ctx):
            editor_state, ctx = editor_state_from_wire(ctx), None
        return rt.send(p["message"], thread_id=p.get("threadId"), client_message_id=p.get("clientMessageId"),
                       images=p.get("images") or (), additional_context=ctx, editor_state=editor_state,
                       settings=settings, skills=p.get("skills") or ())
    if cmd.name == "codex.compact":
        return rt.compact(p["threadId"])
    if cmd.name == "codex.review":
        return rt.review(p["threadId"], p.get("target"))
    return rt.preconnect(p.get("threadId"))


async def await_op(d: DaemonCore, cmd: Command, ch: Channel, op: Operation, done: trio.Event) -> None:
    answer = answering.get()
    if answer is not None and not op.terminal:
        # parked from here on: the task that writes the operationDone line writes the reply
        # right after it when it can (``DaemonCore._reply_now``, issue 34: no wake-up of this
        # task between the app-server's last line and the host's reply)
        ch.awaiting[op.id] = answer
    try:
        result = await op.wait()
        with trio.move_on_after(DONE_EVENT_GRACE):
            if not done.is_set():  # the forwarder has not passed its operationDone yet
                await done.wait()
            await ch.answers_replied()  # the reply to an answer that ended the turn goes first
        ch.awaiting.pop(op.id, None)  # from here on only this task replies
        if answer is not None and answer.done:
            return  # replied already, right after its operationDone line
        ch.touch()
        # one of the two waits above was this step's schedule point: the reply goes out without
        # another when the pipe takes it whole (issue 34: two scheduler passes less a turn)
        await d.reply(cmd.id, {"kind": op.kind, **result.to_wire(), "clientMessageId": op.client_message_id},
                      parked=True)
    finally:
        ch.forget(op.id)  # replied: a terminal operation leaves the daemon's tables


async def interaction_command(d: DaemonCore, cmd: Command) -> None:
    """``codex.replayInteractions`` is answered at once (R-INT-2: pending interactions in
    delivery order with rotated tokens). ``codex.executePlan`` (R-INT-5) queues its turn
    like ``codex.send`` and replies with the execution's result (keyed by this request id)."""
    p = cmd.params
    if cmd.name == "codex.replayInteractions":
        ch_or_none = d.channels.get(p["channelId"])
        replayed = ch_or_none.rt.replay_interactions() if ch_or_none is not None else []
        await d.reply(cmd.id, {"interactions": [i.to_wire(replayed=True) for i in replayed]})
        return
    assert d.nursery is not None
    ch = await d.channel(p["channelId"])
    ch.touch()
    ex = ch.rt.execute_plan(p["threadId"], p["planItemId"], request_id=cmd.id, model=p.get("model"))
    op, done = ex.operation, None
    if op is not None and op.id not in ch.request_ids and not op.terminal:
        done = ch.track(op, cmd.id)  # no checkpoint between creating the op and this (module doc)
    d.spawn(await_plan, cmd, ch, ex, done)


async def await_plan(d: DaemonCore, cmd: Command, ch: Channel, ex: Any, done: trio.Event | None) -> None:
    op = ex.operation
    try:
        result = await ex.wait()
        with trio.move_on_after(DONE_EVENT_GRACE):
            if done is not None:
                await done.wait()
            await ch.answers_replied()
        ch.touch()
        await d.reply(cmd.id, result)
    finally:
        if done is not None and op is not None:
            ch.forget(op.id)
