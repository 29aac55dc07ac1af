"""Attribution of legacy code-mode ``exec`` wrappers to individual tool records (R-H-5).

Why this module exists
----------------------
Codex "code mode" lets the model run a JavaScript cell (the ``exec`` *custom* tool) that
calls real tools through the global ``tools`` object — ``await tools.exec_command({...})``,
often several at once inside ``Promise.all``. A transcript then holds one opaque wrapper
(the script and its printed text) followed by *independent* native receipts of the nested
calls. A history reader that shows only the blob is useless; one that guesses which output
belongs to which command shows the wrong output under the wrong command, which is worse.
This engine decides, for one wrapper, whether it can be *replaced* by individual records
or must be *kept* whole — and it only replaces when every call and its result are
attributed without doubt.

Theory of operation
-------------------
The engine is pure: no I/O, no trio, and it never executes anything. It runs in three
stages, each of which may only *remove* certainty, never invent it:

1. **Static source scan.** A small tokenizer for the JS subset that matters (strings,
   template literals with nested ``${}``, comments, brackets, numbers, punctuation — no
   regex literals, no JS engine) finds every ``tools.NAME(...)`` call, parses literal
   arguments (anything computed is *dynamic*), finds ``Promise.all([...])`` /
   ``Promise.allSettled([...])`` batches and their element slots (``Promise.resolve(...)``
   and other non-tool entries are internal orchestration data: they keep their slot but
   make no record and are not counted), and recognises how the batch is printed:
   labels from ``forEach`` or from a ``for`` loop over ``batch.length`` (template strings
   or ``"Result " + i``), ``{i, result}`` / ``{index, ...}`` envelopes, or the whole array.
   A call inside a loop/callback, with a dynamic tool name, or reachable through an alias
   of ``tools`` has unknown multiplicity: the wrapper is kept.
2. **Printed output parse.** The ``Script completed|failed|...`` header and the trailing
   ``Script error:`` envelope are split off (CRLF normalised); then the print plan yields
   one *slot value* per array index — JSON, plain text, an explicit rejection (only when
   the source prints the whole ``allSettled`` receipt by index), or a spread envelope with
   no independent result. Empty array, ``null`` and a rejection stay distinct; text equal
   to a label is data; an ``i``/``index`` conflict or a duplicate slot keeps the wrapper.
3. **Receipt matching.** Native receipts are paired call→output by ``call_id`` (order
   independent; a bounded cache holds unpaired records and reports overflow). A source
   call is matched to a native invocation first by process identity (a ``session_id`` in
   its own slot value against the receipt's ``process_id``), then by *mutually unique*
   tool+command+working-directory compatibility (explicit absolute directories compared
   as normalised paths, ``file:`` URIs as paths, Windows separators folded, a POSIX
   backslash kept as a file-name character). Arrival or completion order is never used.
   Receipts that match a call but not uniquely keep the wrapper; receipts matching
   nothing are reported as unmatched and never override a complete projection.

Statuses come only from native receipts (exit code, ``success``, ``Process exited with
code N``) or from an unwrapped settled rejection — never from ``exit_code``/``status``
fields inside printed data. ``write_stdin`` never creates a record: it updates the
command whose process it targets (inside this wrapper, or one passed in
``known_processes``); Ctrl+C ends only that command. A wrapper of pure polling therefore
replaces into zero records plus updates. Static ``apply_patch`` literals always yield a
preview; without a separate result their status is ``unknown`` and the wrapper is kept.

Layout
------
One module per stage, each importing only the ones above it in this list:
``_model`` (keep reasons, public records, value helpers) → ``_lexer`` (tokens of the JS subset,
span helpers) → ``_source`` (stage 1: calls and batches) → ``_plan`` (print plans) →
``_output`` (stage 2: printed slot values) → ``_receipts`` (native receipts, pairing, what a
receipt proves) → ``_engine`` (stage 3: matching, records, :func:`attribute_wrapper`).
This ``__init__`` re-exports the public names.
"""

from ._engine import attribute_wrapper, receipt_command, static_commands
from ._model import (
    DEFAULT_MAX_UNPAIRED,
    Attribution,
    InternalEntry,
    KeepReason,
    PatchFile,
    PatchPreview,
    PollUpdate,
    ProcessUpdate,
    SlotValue,
    ToolRecord,
    WrapperCall,
    normalize_dir,
)
from ._receipts import Receipt, ReceiptPairer, patch_end_receipts, receipts_from_rollout_line

__all__ = [
    "DEFAULT_MAX_UNPAIRED",
    "Attribution",
    "InternalEntry",
    "KeepReason",
    "PatchFile",
    "PatchPreview",
    "PollUpdate",
    "ProcessUpdate",
    "Receipt",
    "ReceiptPairer",
    "SlotValue",
    "ToolRecord",
    "WrapperCall",
    "attribute_wrapper",
    "normalize_dir",
    "patch_end_receipts",
    "receipt_command",
    "receipts_from_rollout_line",
    "static_commands",
]
