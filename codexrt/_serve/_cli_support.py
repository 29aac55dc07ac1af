"""What the command line (``codexrt_cli``) needs beyond the public API, in one place.

``codexrt_cli`` imports only public names and ``codexrt._serve`` (``docs/architecture.md``,
enforced by ``tests/sansio/test_architecture.py``). The names below are CLI plumbing, not API a
host should build on: how ``doctor`` words its report (discovery attempts, tested version range),
how the CLI redacts its own stderr, argparse vocabularies and defaults, the ``show`` and
``edits`` renderings. Keeping them here — rather than exporting them from ``codexrt`` — keeps the
public API small while the CLI stays off private modules. A name a host would want belongs in
``codexrt/__init__.py`` instead (with docs), not here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same names, for type checkers and the layer test
    from codexrt._features._edits_live import entry_view
    from codexrt._features._endpoint_probe import probe_endpoint
    from codexrt._features._history import transcript_to_json
    from codexrt._io._discovery import (
        NEWEST_TESTED_CLI,
        OLDEST_TESTED_CLI,
        OVERRIDE_ENV_VARS,
        Attempt,
        ProbeResult,
        format_unavailable,
        probe_version_detailed,
        read_login_shell_path,
        tested_range_warning,
    )
    from codexrt._io._transport_ws import Endpoint, check_endpoint_policy, read_token
    from codexrt._io._workspace import DEFAULT_MAX_BYTES as DIFF_DEFAULT_MAX_BYTES
    from codexrt._io._workspace import DEFAULT_TIMEOUT as DIFF_DEFAULT_TIMEOUT
    from codexrt._sansio._projection import (
        AssistantMessage,
        CommandExecution,
        CompactionBoundary,
        DynamicToolCall,
        ErrorRecord,
        FileChange,
        GenericRecord,
        ImageGeneration,
        ImageView,
        McpToolCall,
        Plan,
        Reasoning,
        SubAgent,
        UserMessage,
        WebSearch,
    )
    from codexrt._sansio._redact import install_log_filter, process_redactor, register_process_secrets, secret_env_values
    from codexrt._sansio._settings import APPROVAL_POLICIES, SANDBOX_MODES

#: name -> (module, attribute). Loaded on first use: ``codexrt run`` must not pay for the history
#: reader that ``codexrt show`` needs, nor the reverse.
_LAZY: dict[str, tuple[str, str]] = {
    "entry_view": ("codexrt._features._edits_live", "entry_view"),
    "probe_endpoint": ("codexrt._features._endpoint_probe", "probe_endpoint"),
    "transcript_to_json": ("codexrt._features._history", "transcript_to_json"),
    "NEWEST_TESTED_CLI": ("codexrt._io._discovery", "NEWEST_TESTED_CLI"),
    "OLDEST_TESTED_CLI": ("codexrt._io._discovery", "OLDEST_TESTED_CLI"),
    "OVERRIDE_ENV_VARS": ("codexrt._io._discovery", "OVERRIDE_ENV_VARS"),
    "Attempt": ("codexrt._io._discovery", "Attempt"),
    "ProbeResult": ("codexrt._io._discovery", "ProbeResult"),
    "format_unavailable": ("codexrt._io._discovery", "format_unavailable"),
    "probe_version_detailed": ("codexrt._io._discovery", "probe_version_detailed"),
    "read_login_shell_path": ("codexrt._io._discovery", "read_login_shell_path"),
    "tested_range_warning": ("codexrt._io._discovery", "tested_range_warning"),
    "Endpoint": ("codexrt._io._transport_ws", "Endpoint"),
    "check_endpoint_policy": ("codexrt._io._transport_ws", "check_endpoint_policy"),
    "read_token": ("codexrt._io._transport_ws", "read_token"),
    "DIFF_DEFAULT_MAX_BYTES": ("codexrt._io._workspace", "DEFAULT_MAX_BYTES"),
    "DIFF_DEFAULT_TIMEOUT": ("codexrt._io._workspace", "DEFAULT_TIMEOUT"),
    "AssistantMessage": ("codexrt._sansio._projection", "AssistantMessage"),
    "CommandExecution": ("codexrt._sansio._projection", "CommandExecution"),
    "CompactionBoundary": ("codexrt._sansio._projection", "CompactionBoundary"),
    "DynamicToolCall": ("codexrt._sansio._projection", "DynamicToolCall"),
    "ErrorRecord": ("codexrt._sansio._projection", "ErrorRecord"),
    "FileChange": ("codexrt._sansio._projection", "FileChange"),
    "GenericRecord": ("codexrt._sansio._projection", "GenericRecord"),
    "ImageGeneration": ("codexrt._sansio._projection", "ImageGeneration"),
    "ImageView": ("codexrt._sansio._projection", "ImageView"),
    "McpToolCall": ("codexrt._sansio._projection", "McpToolCall"),
    "Plan": ("codexrt._sansio._projection", "Plan"),
    "Reasoning": ("codexrt._sansio._projection", "Reasoning"),
    "SubAgent": ("codexrt._sansio._projection", "SubAgent"),
    "UserMessage": ("codexrt._sansio._projection", "UserMessage"),
    "WebSearch": ("codexrt._sansio._projection", "WebSearch"),
    "install_log_filter": ("codexrt._sansio._redact", "install_log_filter"),
    "process_redactor": ("codexrt._sansio._redact", "process_redactor"),
    "register_process_secrets": ("codexrt._sansio._redact", "register_process_secrets"),
    "secret_env_values": ("codexrt._sansio._redact", "secret_env_values"),
    "APPROVAL_POLICIES": ("codexrt._sansio._settings", "APPROVAL_POLICIES"),
    "SANDBOX_MODES": ("codexrt._sansio._settings", "SANDBOX_MODES"),
}


def __getattr__(name: str) -> object:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


__all__ = [
    # codexrt run: argparse choices
    "APPROVAL_POLICIES",
    "SANDBOX_MODES",
    # codexrt diff: argparse defaults (read_workspace_diff's own)
    "DIFF_DEFAULT_MAX_BYTES",
    "DIFF_DEFAULT_TIMEOUT",
    # codexrt doctor: the discovery report and the endpoint check
    "NEWEST_TESTED_CLI",
    "OLDEST_TESTED_CLI",
    "OVERRIDE_ENV_VARS",
    "Attempt",
    "ProbeResult",
    "format_unavailable",
    "probe_version_detailed",
    "read_login_shell_path",
    "tested_range_warning",
    "probe_endpoint",
    "Endpoint",
    "check_endpoint_policy",
    "read_token",
    # every command: the CLI's own stderr is redacted (docs/security.md)
    "install_log_filter",
    "process_redactor",
    "register_process_secrets",
    "secret_env_values",
    # codexrt show: the transcript's record classes and its JSON form
    "transcript_to_json",
    "AssistantMessage",
    "CommandExecution",
    "CompactionBoundary",
    "DynamicToolCall",
    "ErrorRecord",
    "FileChange",
    "GenericRecord",
    "ImageGeneration",
    "ImageView",
    "McpToolCall",
    "Plan",
    "Reasoning",
    "SubAgent",
    "UserMessage",
    "WebSearch",
    # codexrt edits: one ledger entry as a row
    "entry_view",
]
