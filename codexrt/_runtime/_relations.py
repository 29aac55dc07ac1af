"""Sub-agent relations and thread release (R-H-8, R-D-1, R-OP-6): verified parent
ancestry, the relation set of a root, draining it (children stopped, waited for,
unsubscribed), and unloading a thread."""

from __future__ import annotations

import logging
from typing import Any

import trio

from codexrt._connection import Connection
from codexrt._sansio._errors import CodexError
from codexrt._io._retry import call_read

log = logging.getLogger("codexrt.runtime")


class RuntimeRelations:
    """Part of :class:`~codexrt._runtime._runtime.Runtime` (a mixin: the state it uses is set up in
    ``Runtime.__init__``)."""

    MAX_ANCESTRY = 16

    def _want_relation(self, thread_id: str) -> None:
        if thread_id not in self.threads:  # first seen as a receiver of a spawn: not known as a root
            self._thread_info(thread_id).root = False
        info = self._thread_info(thread_id)
        if info.root_id is not None or info.relation_pending or self.conn is None:
            return
        info.relation_pending = True
        self._nursery.start_soon(self._verify_relation, thread_id, self.generation, self.conn)

    async def _verify_relation(self, thread_id: str, gen: int, conn: Connection) -> None:
        """Walk ``parentThreadId`` up to a root with ``thread/read`` (read-only: no resume, no
        writer). Only then is the thread recorded in its root's relation set and
        ``threadRelationVerified`` published; a walk of an older generation publishes nothing."""
        chain: list[tuple[str, str]] = []
        cur, status = thread_id, None
        walked = False  # the walk reached a thread without parent (not an error, not too deep)
        try:
            for _ in range(self.MAX_ANCESTRY):
                res = await call_read(conn, "thread/read", {"threadId": cur})
                thread = (res or {}).get("thread") if isinstance(res, dict) else None
                thread = thread if isinstance(thread, dict) else {}
                if cur == thread_id and isinstance(thread.get("status"), dict):
                    status = thread["status"].get("type")
                parent = thread.get("parentThreadId")
                if not isinstance(parent, str) or not parent or parent == cur:
                    walked = True
                    break
                chain.append((cur, parent))
                cur = parent
            else:
                chain = []  # deeper than MAX_ANCESTRY: not verified
        except CodexError as exc:
            log.info("relation of %s not verified: %s", thread_id, exc.message)
            chain = []
        if gen != self.generation:
            return  # an old generation's answer never publishes into a newer one (R-RT-2)
        info = self._thread_info(thread_id)
        info.relation_pending = False
        if not chain:
            if walked and info.root_id is None:
                info.root = True  # read: it has no parent, it is a root of its own
            return  # a root, or not verified (a later hint tries again)
        root = cur
        root_info = self._thread_info(root)
        for depth, (tid, parent) in enumerate(reversed(chain), 1):
            ti = self._thread_info(tid)
            newly = ti.root_id is None
            ti.root, ti.parent_id, ti.root_id = False, parent, root
            if ti.loaded_generation is None:
                ti.loaded_generation = gen  # loaded on the server (thread/loaded/list lists it)
            root_info.children[tid] = depth
            if newly:
                self._publish(self._event("threadRelationVerified", {
                    "rootThreadId": root, "threadId": tid, "parentThreadId": parent}, thread_id=tid))
        if info.status is None and isinstance(status, str):
            info.status = status

    def relations(self, root_thread_id: str) -> dict[str, dict[str, Any]]:
        """The verified relation set of ``root_thread_id``: child id → ``parentThreadId``,
        ``depth`` and native ``status`` (None when unknown — never guessed)."""
        info = self.threads.get(root_thread_id)
        out: dict[str, dict[str, Any]] = {}
        for child, depth in (info.children.items() if info is not None else ()):
            ci = self.threads.get(child)
            out[child] = {"parentThreadId": ci.parent_id if ci else None, "depth": depth,
                          "status": ci.status if ci else None}
        return out

    async def drain_relations(self, root_thread_id: str) -> list[dict[str, Any]]:
        """``releaseThread`` of a root (R-D-1): its verified children, deepest first, each
        stopped (our operations on it aborted, its running turn interrupted), waited for until its
        native status is no longer active — an unknown status is queried again, never guessed
        (R-H-8) — and unsubscribed. Bounded by the stop budget per child. The relation set itself
        (the lease) stays until :meth:`release_relation_lease`."""
        info = self.threads.get(root_thread_id)
        if info is None:
            return []
        out = []
        for child in sorted(info.children, key=lambda c: -info.children[c]):
            out.append({"threadId": child, **await self._release_child(child)})
        return out

    async def _release_child(self, child: str) -> dict[str, Any]:
        for op in [self.active, *self._queue]:
            if op is not None and op.thread_id == child and not op.terminal:
                self.abort(op)
                with trio.move_on_after(self.config.stop_budget + 11):
                    await op._done.wait()
        ci = self._thread_info(child)
        interrupted = False
        settled = False
        with trio.move_on_after(self.config.stop_budget):
            while True:
                conn = self.conn
                if conn is None:
                    settled = True  # the app-server is gone: so is the child's work
                    break
                if ci.status is None:  # unknown: ask, never guess
                    try:
                        res = await call_read(conn, "thread/read", {"threadId": child})
                        st = ((res or {}).get("thread") or {}).get("status") or {}
                        if ci.status is None and isinstance(st.get("type"), str):
                            ci.status = st["type"]
                    except CodexError as exc:
                        log.info("status of %s unknown: %s", child, exc.message)
                    if ci.status is None:
                        await trio.sleep(0.5)
                        continue
                if ci.status != "active":
                    settled = True
                    break
                if ci.active_turn is not None and not interrupted:
                    interrupted = True
                    try:
                        await conn.call("turn/interrupt", {"threadId": child, "turnId": ci.active_turn})
                    except CodexError as exc:
                        log.info("turn/interrupt of sub-agent %s failed: %s", child, exc.message)
                if ci.status_event is None:
                    ci.status_event = trio.Event()
                with trio.move_on_after(1.0):  # wake on its next status change, else look again
                    await ci.status_event.wait()
        if ci.loaded_generation == self.generation and self.conn is not None:
            try:
                await self.conn.call("thread/unsubscribe", {"threadId": child})
            except CodexError as exc:
                log.info("thread/unsubscribe of %s failed: %s", child, exc.message)
        ci.loaded_generation = None
        return {"interrupted": interrupted, "status": ci.status, "settled": settled}

    def release_relation_lease(self, root_thread_id: str) -> list[str]:
        """Forget the root's relation set (after its release finished, and after the child
        process's exit when the release retired it). Returns the children it held."""
        info = self.threads.get(root_thread_id)
        if info is None:
            return []
        children, info.children = list(info.children), {}
        return children

    async def release_thread(self, thread_id: str) -> None:
        """Stop tracking ``thread_id`` as a loaded session: abort its operations, tell the
        server (``thread/unsubscribe``) and mark it unloaded (its id is kept). A runtime with
        no loaded session may then be retired by the idle reaper (R-RT-6). Its verified
        sub-agents are released first (:meth:`drain_relations`, R-D-1)."""
        await self.drain_relations(thread_id)
        for op in [self.active, *self._queue]:
            if op is not None and op.thread_id == thread_id and not op.terminal:
                self.abort(op)
                with trio.move_on_after(self.config.stop_budget + 11):
                    await op._done.wait()
        try:
            await self.unload_thread(thread_id)
        except CodexError as exc:
            log.info("thread/unsubscribe failed: %s", exc.message)
        self.release_relation_lease(thread_id)

    async def unload_thread(self, thread_id: str) -> str | None:
        """Mark ``thread_id`` unloaded (its id is kept: the next operation on it resumes it) and,
        when it is loaded on the current child, tell the server (``thread/unsubscribe``).
        Returns the server's ``status`` (None when nothing was sent); a failed unsubscribe
        raises its :class:`CodexError` after the thread is marked unloaded. Does not stop
        its operations or sub-agents (:meth:`release_thread` does)."""
        info = self.threads.get(thread_id)
        if info is None:
            return None
        loaded = info.loaded_generation == self.generation
        info.loaded_generation = None
        conn = self.conn
        if not loaded or conn is None:
            return None
        res = await conn.call("thread/unsubscribe", {"threadId": thread_id})
        return (res or {}).get("status")
