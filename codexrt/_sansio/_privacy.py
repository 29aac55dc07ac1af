"""The privacy index and history masking, without I/O (R-PRIV-1, R-PRIV-2, R-PRIV-3).

Why: a ``requestUserInput`` question can be marked ``isSecret`` (a password, a token) and an
MCP elicitation can ask for anything. The answers travel to the app-server, which may keep
them in its own transcript — codexrt cannot control that. What codexrt *can* do is remember,
before it forwards an answer, *which* interaction had secret questions, so that every history
view it renders later masks those answers. The index therefore stores identities and flags
only: host/home scope, thread, turn, call, item and question ids, and ``isSecret``. Never the
question text, the answers, or a hash of an answer (a hash of a short secret is the secret).

Theory of operation
-------------------
*Records.* One :class:`PrivacyRecord` per forwarded answer, written by
``codexrt._io._privacy_store.PrivacyStore`` as its own file
``<home-fingerprint>.record.<uuid>.json`` (atomic: temp + fsync + rename), so several
processes never overwrite each other's classifications. The legacy single file
``<home-fingerprint>.json`` (``{"version": 1, "records": [...]}``) is still read.

*Loading.* :func:`load_index` takes the files' bytes and builds a :class:`PrivacyIndex`. A file
that is not JSON, has an unknown version, or holds a malformed entry is a *problem*: what it
could have classified is lost, so the index turns **conservative** (and the store persists that
with a marker file, so a later good record never "repairs" a lost classification).

*Masking* (:class:`Masker`) looks only at tool *result bodies*:

* ``request_user_input`` results (legacy ``DynamicToolCall`` records, native
  ``functionCallOutput`` items): the body is parsed as ``{"answers": {qid: {"answers": [...]}}}``.
  With a record for that call, the answers of its secret questions are masked and the others
  shown. Without one (another client answered it, or the index lost it) every answer is masked:
  a cold read never unmasks. An unparseable body of a call that needs masking is masked whole.
* MCP tool results (``McpToolCall``): a record for that exact call wins; otherwise an
  elicitation with secret fields protects the results of its turn (an elicitation's RPC id is
  not an item id), or of its whole thread when its ``turnId`` is null. A conservative index
  masks every MCP result it cannot classify.
* Masking a result replaces every leaf value — a field named ``id``/``name``/``path``/
  ``status`` inside result data gets no exemption — while the record's own protocol identities
  (record id, thread/turn ids, tool and server names, status) and known content-block types stay.
* Never masked: user text, assistant text (JSON or not), reasoning, command arguments and
  output, timestamps.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable, Mapping

import attrs

__all__ = [
    "INDEX_VERSION",
    "MASK",
    "USER_INPUT_TOOL",
    "QuestionFlag",
    "PrivacyRecord",
    "PrivacyIndex",
    "Masker",
    "home_fingerprint",
    "record_file_name",
    "legacy_file_name",
    "marker_file_name",
    "record_for_user_input",
    "record_for_elicitation",
    "load_index",
    "RecordError",
]

INDEX_VERSION = 1
MASK = "[masked]"
USER_INPUT_TOOL = "request_user_input"
KINDS = ("requestUserInput", "elicitation")


class RecordError(ValueError):
    """A record or index file that cannot be trusted (names the problem, never the content)."""


@attrs.frozen
class QuestionFlag:
    id: str
    is_secret: bool


@attrs.frozen
class PrivacyRecord:
    """What one forwarded answer leaves behind: identities and secret flags, nothing else."""

    record_id: str
    kind: str  # requestUserInput | elicitation
    scope: str  # home fingerprint
    host: str | None
    thread_id: str | None
    turn_id: str | None
    item_id: str | None
    call_id: str | None
    questions: tuple[QuestionFlag, ...]
    created_ms: int

    @property
    def has_secret(self) -> bool:
        return any(q.is_secret for q in self.questions)

    def secret_ids(self) -> frozenset[str]:
        return frozenset(q.id for q in self.questions if q.is_secret)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": INDEX_VERSION,
            "recordId": self.record_id,
            "kind": self.kind,
            "scope": self.scope,
            "host": self.host,
            "threadId": self.thread_id,
            "turnId": self.turn_id,
            "itemId": self.item_id,
            "callId": self.call_id,
            "questions": [{"id": q.id, "isSecret": q.is_secret} for q in self.questions],
            "createdMs": self.created_ms,
        }

    @classmethod
    def from_json(cls, data: Any) -> "PrivacyRecord":
        if not isinstance(data, dict):
            raise RecordError("entry is not an object")
        version = data.get("version", INDEX_VERSION)
        if version != INDEX_VERSION:
            raise RecordError(f"unsupported record version {version!r}")
        kind = data.get("kind")
        if kind not in KINDS:
            raise RecordError("unknown record kind")
        for key in ("recordId", "scope"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise RecordError(f"missing {key}")
        for key in ("host", "threadId", "turnId", "itemId", "callId"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise RecordError(f"{key} must be a string or null")
        qs = data.get("questions")
        if not isinstance(qs, list):
            raise RecordError("questions must be a list")
        flags = []
        for q in qs:
            if not isinstance(q, dict) or not isinstance(q.get("id"), str) or not isinstance(q.get("isSecret"), bool):
                raise RecordError("malformed question entry")
            flags.append(QuestionFlag(q["id"], q["isSecret"]))
        created = data.get("createdMs", 0)
        if isinstance(created, bool) or not isinstance(created, int):
            raise RecordError("createdMs must be an integer")
        return cls(data["recordId"], kind, data["scope"], data.get("host"), data.get("threadId"), data.get("turnId"),
                   data.get("itemId"), data.get("callId"), tuple(flags), created)


def home_fingerprint(codex_home: str) -> str:
    """Scope of an index: 16 hex digits of SHA-256 over the absolute, normalised CODEX_HOME."""
    norm = os.path.normpath(os.path.abspath(os.path.expanduser(codex_home)))
    return hashlib.sha256(f"codex-home\0{norm}".encode()).hexdigest()[:16]


def record_file_name(fingerprint: str, record_id: str) -> str:
    return f"{fingerprint}.record.{record_id}.json"


def legacy_file_name(fingerprint: str) -> str:
    return f"{fingerprint}.json"


def marker_file_name(fingerprint: str) -> str:
    """Presence = persistent conservative masking for this scope (a classification was lost)."""
    return f"{fingerprint}.conservative"


def record_for_user_input(params: Mapping[str, Any], *, record_id: str, scope: str, host: str | None,
                          created_ms: int) -> PrivacyRecord:
    """The record of an ``item/tool/requestUserInput`` answer: its question ids and flags."""
    qs = []
    for q in params.get("questions") or ():
        if isinstance(q, dict) and isinstance(q.get("id"), str):
            qs.append(QuestionFlag(q["id"], bool(q.get("isSecret", False))))
    item = params.get("itemId") if isinstance(params.get("itemId"), str) else None
    return PrivacyRecord(record_id, "requestUserInput", scope, host, _s(params.get("threadId")),
                         _s(params.get("turnId")), item, item, tuple(qs), created_ms)


def record_for_elicitation(params: Mapping[str, Any], field_flags: Iterable[tuple[str, bool]], *, record_id: str,
                           scope: str, host: str | None, created_ms: int) -> PrivacyRecord:
    """The record of an MCP elicitation answer. There is no item or call: the RPC id is not
    an item id (R-PRIV-3), so masking protects the turn's (or thread's) MCP results."""
    qs = tuple(QuestionFlag(fid, secret) for fid, secret in field_flags)
    return PrivacyRecord(record_id, "elicitation", scope, host, _s(params.get("threadId")), _s(params.get("turnId")),
                         None, None, qs, created_ms)


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else None


@attrs.define
class PrivacyIndex:
    """Loaded classifications of one scope. ``conservative``: something was lost."""

    scope: str
    records: list[PrivacyRecord] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)
    conservative: bool = False

    def by_call(self, thread_id: str | None, call_id: str) -> PrivacyRecord | None:
        """The record of one call (a reliable per-call classification)."""
        found = None
        for r in self.records:
            if call_id in (r.call_id, r.item_id) and (thread_id is None or r.thread_id in (None, thread_id)):
                found = r
        return found

    def elicitations_protecting(self, thread_id: str | None, turn_id: str | None) -> list[PrivacyRecord]:
        """Elicitation records with secret fields that protect results of this turn: same turn,
        or same thread when the elicitation had no turn."""
        out = []
        for r in self.records:
            if r.kind != "elicitation" or not r.has_secret:
                continue
            if r.turn_id is not None and r.turn_id == turn_id:
                out.append(r)
            elif r.turn_id is None and r.thread_id is not None and r.thread_id == thread_id:
                out.append(r)
        return out


def load_index(scope: str, files: Mapping[str, bytes], *, marker: bool = False) -> PrivacyIndex:
    """Build the index of ``scope`` from file name → bytes (record files and the legacy file;
    other names are ignored). Never raises: problems make it conservative."""
    index = PrivacyIndex(scope, conservative=marker)
    if marker:
        index.problems.append("a classification was lost earlier (persistent conservative masking)")
    rec_prefix = f"{scope}.record."
    for name in sorted(files):
        data = files[name]
        if name == legacy_file_name(scope):
            try:
                doc = json.loads(data)
            except ValueError:
                index.problems.append(f"{name}: not valid JSON")
                continue
            if not isinstance(doc, dict) or doc.get("version") != INDEX_VERSION or not isinstance(doc.get("records"), list):
                index.problems.append(f"{name}: unknown version or shape")
                continue
            for i, entry in enumerate(doc["records"]):
                try:
                    index.records.append(PrivacyRecord.from_json(entry))
                except RecordError as exc:
                    index.problems.append(f"{name}[{i}]: {exc}")
        elif name.startswith(rec_prefix) and name.endswith(".json"):
            try:
                index.records.append(PrivacyRecord.from_json(json.loads(data)))
            except (ValueError, RecordError) as exc:
                reason = str(exc) if isinstance(exc, RecordError) else "not valid JSON"
                index.problems.append(f"{name}: {reason}")
    # Records of another scope inside our files are not ours to trust.
    foreign = [r for r in index.records if r.scope != scope]
    if foreign:
        index.problems.append(f"{len(foreign)} record(s) carry another scope")
        index.records = [r for r in index.records if r.scope == scope]
    if index.problems:
        index.conservative = True
    index.records.sort(key=lambda r: (r.created_ms, r.record_id))
    return index


# ------------------------------------------------------------------------------------------
# Masking


def _mask_value(v: Any) -> Any:
    """Every leaf replaced; keys kept (they are the structure, not the data)."""
    if isinstance(v, dict):
        return {k: _mask_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_mask_value(x) for x in v]
    if v is None:
        return None
    return MASK


def _mask_answers_doc(doc: Any, secret: frozenset[str] | None) -> Any | None:
    """Mask answers inside a parsed ``{"answers": {qid: {"answers": [...]}}}`` body.
    ``secret=None`` masks every answer. None when the body has no such shape."""
    if not isinstance(doc, dict) or not isinstance(doc.get("answers"), dict):
        return None
    out = dict(doc)
    answers = {}
    for qid, ans in doc["answers"].items():
        if secret is None or qid in secret:
            answers[qid] = _mask_value(ans)
        else:
            answers[qid] = ans
    out["answers"] = answers
    return out


def _mask_answer_text(text: str, secret: frozenset[str] | None) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return MASK
    masked = _mask_answers_doc(doc, secret)
    if masked is None:
        return MASK
    return json.dumps(masked, ensure_ascii=False)


def _mask_block(b: Any) -> Any:
    """A content block with its data masked; its ``type`` (a known content type) stays."""
    changes: dict[str, Any] = {}
    if getattr(b, "text", None):
        changes["text"] = MASK
    raw = getattr(b, "raw", None)
    if raw is not None:
        masked = _mask_value(raw)
        if isinstance(raw, dict) and "type" in raw:
            masked["type"] = raw["type"]
        changes["raw"] = masked
    return attrs.evolve(b, **changes) if changes else b


class Masker:
    """Apply an index to display records (``codexrt._sansio._projection`` records).

    ``mask(record)`` returns the record (same type) with protected result data masked;
    ``mask_all(records)`` maps a list; ``mask_turns(groups)`` maps ``TurnGroup`` s.
    Use it on the output of ``Projector.records()`` / ``turns()``.
    """

    def __init__(self, index: PrivacyIndex) -> None:
        self.index = index

    def mask_all(self, records: Iterable[Any]) -> list[Any]:
        return [self.mask(r) for r in records]

    def mask_turns(self, groups: Iterable[Any]) -> list[Any]:
        return [attrs.evolve(g, records=tuple(self.mask(r) for r in g.records)) for g in groups]

    def mask(self, record: Any) -> Any:
        kind = getattr(record, "kind", None)
        if kind == "dynamicToolCall" and getattr(record, "tool", None) == USER_INPUT_TOOL:
            return self._mask_user_input_blocks(record)
        if kind == "generic" and getattr(record, "item_type", None) == "functionCallOutput":
            raw = getattr(record, "raw", None)
            if isinstance(raw, dict) and raw.get("name") == USER_INPUT_TOOL:
                return self._mask_native_output(record, raw)
            return record
        if kind == "mcpToolCall":
            return self._mask_mcp(record)
        return record

    def _secret_for(self, record: Any) -> frozenset[str] | None:
        """Secret question ids of this call; None = unknown → mask every answer."""
        rec = self.index.by_call(getattr(record, "thread_id", None), record.id)
        if rec is None or rec.kind != "requestUserInput":
            return None
        return rec.secret_ids()

    def _mask_user_input_blocks(self, record: Any) -> Any:
        secret = self._secret_for(record)
        if secret is not None and not secret:
            return record
        blocks = []
        for b in record.content:
            text = getattr(b, "text", None)
            blocks.append(attrs.evolve(b, text=_mask_answer_text(text, secret)) if isinstance(text, str) else b)
        return attrs.evolve(record, content=tuple(blocks))

    def _mask_native_output(self, record: Any, raw: dict[str, Any]) -> Any:
        secret = self._secret_for(record)
        if secret is not None and not secret:
            return record
        raw = dict(raw)
        out = raw.get("output")
        if isinstance(out, str):
            raw["output"] = _mask_answer_text(out, secret)
        elif out is not None:
            masked = _mask_answers_doc(out, secret)
            raw["output"] = masked if masked is not None else _mask_value(out)
        return attrs.evolve(record, raw=raw)

    def _mask_mcp(self, record: Any) -> Any:
        rec = self.index.by_call(record.thread_id, record.id)
        if rec is not None:
            if not rec.has_secret:
                return record  # a reliable per-call classification wins
        elif not self.index.elicitations_protecting(record.thread_id, record.turn_id) and not self.index.conservative:
            return record
        blocks = tuple(_mask_block(b) for b in record.content)
        structured = _mask_value(record.structured_content) if record.structured_content is not None else None
        return attrs.evolve(record, content=blocks, structured_content=structured)
