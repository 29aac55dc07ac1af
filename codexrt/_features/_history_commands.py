"""The read-only history commands of ``codexrt serve`` (R-D-1, R-H-1 … R-H-8, R-LC-3): each runs
a :class:`~codexrt._features._history.HistoryReader` on the channel's runtime (or, in access
mode ``inactive``, on the rollout files only) and answers in the wire form of
``docs/daemon-protocol.md``."""

from __future__ import annotations

import os
from typing import Any

import trio

from codexrt._features._history import HistoryReader, transcript_to_json
from codexrt._features._history_ahead import PageReadAhead
from codexrt._features._history_count import MessageCounter
from codexrt._features._history_legacy import _session_names
from codexrt._features._history_pages import PageRecordsCache
from codexrt._features._history_values import PrivacySource, ThreadSummary
from codexrt._io._history_files import find_rollout
from codexrt._io._retry import call_read
from codexrt._sansio._errors import AccessInactive, RemoteProtocolError, malformed_data_is_typed
from codexrt._sansio._paging import page_is_partial
from codexrt._sansio._redact import Redactor

__all__ = ["HISTORY_COMMANDS", "LEGACY_HISTORY_COMMANDS", "run_history_command", "run_legacy_history_command"]


HISTORY_COMMANDS = frozenset({"codex.listThreads", "codex.readThread", "codex.readHistoryPage",
                              "codex.countThreadMessages", "codex.readSubagent"})


@malformed_data_is_typed("history data")
async def run_history_command(rt: Any, name: str, params: dict[str, Any], *, counter: MessageCounter,
                              nursery: trio.Nursery, page_cache: PageRecordsCache | None = None,
                              read_ahead: PageReadAhead | None = None) -> Any:
    """One read-only history command of ``codexrt serve`` on ``rt``'s connection — never the
    send FIFO, never ``thread/resume`` (R-D-1). ``counter`` is the host-level message counter
    (R-H-7); ``page_cache`` the host-level records of pages already answered and
    ``read_ahead`` the host-level read-ahead of history walks (both issue 34).
    Results (``docs/daemon-protocol.md``):

    * ``codex.listThreads``: the native ``thread/list`` result plus ``source`` and ``partial`` (R-H-6);
    * ``codex.readThread``: the native ``thread/read`` result; with ``display: true`` instead
      ``{thread, transcript}`` — the whole projected transcript from one source (R-H-1, R-H-3);
    * ``codex.readHistoryPage``: the native page plus ``source`` and its display ``records``;
    * ``codex.countThreadMessages``: :meth:`MessageCount.to_json` (``messageCount`` null when unknown);
    * ``codex.readSubagent``: ``{thread, parentThreadId, relationVerified, ancestry, status}`` (R-H-8).
    """
    p = {k: v for k, v in params.items() if k != "channelId"}
    reader = HistoryReader(nursery, rt.ensure_started, codex_home=rt.config.codex_home, env=rt.config.env,
                           inactive=rt.config.access_mode == "inactive",
                           redact=Redactor(rt.config.secrets) if rt.config.secrets else None, counter=counter,
                           privacy=rt.privacy_store(), page_cache=page_cache, read_ahead=read_ahead)
    if name == "codex.countThreadMessages":
        expected = p.get("updatedAt")
        res = await reader.count_messages(p["threadId"], expected_version=None if expected is None else str(expected))
        return res.to_json()
    if name == "codex.readSubagent":
        view = await reader.read_subagent(p["threadId"], p.get("parentThreadId"))
        return {"thread": view.thread, "parentThreadId": view.parent_thread_id,
                "relationVerified": view.relation_verified, "ancestry": list(view.ancestry), "status": view.status}
    if name == "codex.readThread" and p.pop("display", False):
        tr = await reader.read_thread(p["threadId"])
        return {"thread": tr.thread, "transcript": transcript_to_json(tr)}
    if name == "codex.readHistoryPage":
        return await reader._serve_page(p["threadId"], p.get("scope", "turns"), p.get("cursor"), p.get("limit"),
                                        p.get("sortDirection"))  # serve's form (a BoundedText its writer knows)
    conn = await rt.ensure_started()
    if name == "codex.listThreads":
        res = await call_read(conn, "thread/list", p)
        if not isinstance(res, dict) or not isinstance(res.get("data"), list):
            raise RemoteProtocolError("thread/list answered without a data list", details={"method": "thread/list"})
        page = [ThreadSummary.from_native(t) for t in res["data"] if isinstance(t, dict) and isinstance(t.get("id"), str)]
        for t in page:
            counter.note_version(t.thread_id, t.version)
        partial = page_is_partial(res) or len(page) != len(res["data"])
        return {**res, "source": "native", "partial": partial}
    return await call_read(conn, "thread/read", p)  # codex.readThread, native form


#: What ``codexrt serve --access-mode inactive`` still answers, from rollout files only (R-LC-3,
#: R-H-3, R-H-6): no process is spawned for them.
LEGACY_HISTORY_COMMANDS = frozenset({"codex.listThreads", "codex.readThread", "codex.countThreadMessages"})


@malformed_data_is_typed("history data")
async def run_legacy_history_command(name: str, params: dict[str, Any], *, codex_home: str | os.PathLike[str],
                                     privacy: PrivacySource | None, nursery: trio.Nursery) -> Any:
    """One of :data:`LEGACY_HISTORY_COMMANDS` in access mode ``inactive``: the rollout files
    under ``codex_home/sessions`` are the whole source and nothing is spawned (R-LC-3). Results:

    * ``codex.listThreads``: ``{data, nextCursor: null, source: "legacy", partial: false}``, one row
      per rollout file, newest first (:meth:`ThreadSummary.to_json` plus ``id``); ``limit`` honoured (R-H-6);
    * ``codex.readThread``: always the display form ``{thread, transcript}`` — ``thread`` is the
      legacy list row (or null), ``transcript`` the whole rollout, masked with ``privacy`` (R-H-3);
    * ``codex.countThreadMessages``: the count over the rollout file (R-H-7).
    """
    reader = HistoryReader(nursery, None, codex_home=codex_home, inactive=True, privacy=privacy)
    if name == "codex.listThreads":
        limit = params.get("limit")
        page = await reader.list_threads(limit=limit if isinstance(limit, int) and limit >= 0 else None)
        return {"data": [{"id": t.thread_id, **t.to_json()} for t in page.threads], "nextCursor": None,
                "source": "legacy", "partial": page.partial, "notices": list(page.notices)}
    if name == "codex.readThread":
        tr = await reader.read_thread(params["threadId"])

        def row_of() -> ThreadSummary | None:
            info = find_rollout(reader.codex_home, tr.thread_id)
            if info is None:
                return None
            return ThreadSummary(thread_id=info.thread_id, name=_session_names(reader.codex_home).get(info.thread_id),
                                 updated_at=int(info.mtime), path=str(info.path), source="legacy", status="notLoaded")

        row = await trio.to_thread.run_sync(row_of)
        thread = {"id": row.thread_id, **row.to_json()} if row is not None else None
        return {"thread": thread, "transcript": transcript_to_json(tr)}
    if name == "codex.countThreadMessages":
        return (await reader.count_messages(params["threadId"])).to_json()
    raise AccessInactive(f"{name} is not available in access mode inactive",
                         details={"command": name})
