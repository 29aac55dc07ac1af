"""One projection from native thread items and rollout records to display records (R-H-4).

Two sources describe the same conversation: the app-server's ``ThreadItem`` JSON
(``item/completed``, ``thread/turns/list``, ``thread/items/list``, ``thread/read
includeTurns``) and the rollout file (:mod:`._legacy`). A display must not care which one it
got, so both land in the same frozen attrs records defined here, grouped by turn, carrying
the session thread id and the turn id.

Theory of operation. A :class:`Projector` holds, per turn, an ordered list of *entries*
keyed by the native item id (legacy: the id the server would use — ``call_id`` for tools,
the response item ``id`` for messages — else ``L<line>``). Feeding is incremental and
idempotent:

* **upsert, never duplicate** — an id (or a userMessage ``clientId``) seen again replaces the
  entry in place; a batch (one page) is merged by its known anchors so a later full page
  slots new items between the ones an earlier summary page gave (R-H-1);
* **a completed snapshot wins** — once an entry holds a completed snapshot, ``item/started``
  copies and deltas for it are ignored; deltas only grow an entry that is still open;
* **status is computed at read time** — :meth:`Projector.records` closes entries still open
  in a turn that ended ``interrupted``/``failed`` with that turn's status (never another
  turn's), because the real server never completes them (research §5, §6);
* **unknown stays unknown** — a status field the schema has but the item lacks is
  ``"unknown"``; item kinds without a status field take it from their lifecycle (completed
  snapshot → ``completed``, only started → ``inProgress``); output fragments never complete a
  command; a compaction's trigger is only ever copied, never guessed.

Legacy specifics (see ``docs/history.md``): rollouts hold several copies of one message
(``response_item`` and ``event_msg``, plus ``event_msg/item_completed`` snapshots in
paginated files). User text is taken from the event copy (the response copy also carries
injected context), assistant text and reasoning from the response copy; the other copy is only
a fallback for a turn that lacks the preferred one. Snapshots (``item_completed``) share the
native id and upsert over the response copy.

Legacy code-mode ``exec`` wrappers (R-H-5): the wrapper's call and output lines, the native
receipts and the process starts of the whole thread are collected while feeding; at read time
:func:`~._wrappers.attribute_wrapper` decides, in file order, with only the wrapper's own
receipts (nested between its call and output and made by no model call, or tied to it later
by call id / process id — never a later direct call) and the processes started before it.
When every call is attributed without doubt the wrapper and the receipts it consumed are
replaced, at the wrapper's place, by one record per call in *source* order (plus its
``Script failed`` envelope); otherwise the wrapper stays whole (a ``dynamicToolCall`` named
``exec`` with its output, then a grey preview of each static patch) and
:meth:`Projector.wrapper_attributions` says why. Polls — a wrapper's ``ProcessUpdate`` or a
direct ``write_stdin`` — update the command whose process they target and make no card.

Display records are for display: nothing here is ever sent back to the model.

Modules (imports only downward): :mod:`._records` (the display records) → :mod:`._shapes`
(small field readers) → :mod:`._native` (native items → records) → :mod:`._legacy` (rollout
record conversion, exec receipts) → :mod:`._store` (entries per turn; reading one) →
:mod:`._native_feed` (the native path) → :mod:`._replay` (wrapper replay glue) →
:mod:`._legacy_feed` (the legacy path) → :mod:`._projector` (the :class:`Projector` facade) →
:mod:`._tally` (the R-H-7 count).
"""

from __future__ import annotations

from ._native import plain_message_json, project_native_item
from ._native_feed import plain_page
from ._plain_text import PAGE_MAX_DEPTH, RECORDS_DEPTH, PlainPage, decode_page, page_records_json
from ._projector import Projector
from ._records import (
    STATUSES,
    AssistantMessage,
    CommandAction,
    CommandExecution,
    CompactionBoundary,
    ContentBlock,
    DisplayRecord,
    DynamicToolCall,
    ErrorRecord,
    FileChange,
    FileChangeEntry,
    GenericRecord,
    ImageGeneration,
    ImageSource,
    ImageView,
    McpToolCall,
    Plan,
    PlanStep,
    Reasoning,
    SubAgent,
    TurnGroup,
    UserMessage,
    WebSearch,
)
from ._shapes import _norm_status, parse_apply_patch, patch_line_counts
from ._tally import MessageTally, count_messages

__all__ = [
    "STATUSES",
    "ImageSource",
    "ContentBlock",
    "CommandAction",
    "FileChangeEntry",
    "PlanStep",
    "UserMessage",
    "AssistantMessage",
    "Reasoning",
    "CommandExecution",
    "FileChange",
    "DynamicToolCall",
    "McpToolCall",
    "WebSearch",
    "ImageView",
    "ImageGeneration",
    "Plan",
    "CompactionBoundary",
    "SubAgent",
    "ErrorRecord",
    "GenericRecord",
    "DisplayRecord",
    "TurnGroup",
    "Projector",
    "project_native_item",
    "PAGE_MAX_DEPTH",
    "RECORDS_DEPTH",
    "PlainPage",
    "decode_page",
    "page_records_json",
    "plain_message_json",
    "plain_page",
    "count_messages",
    "MessageTally",
    "patch_line_counts",
    "parse_apply_patch",
]
