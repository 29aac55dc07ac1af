"""Finding the Codex CLI: candidates, rejections, the version probe, launch argv (R-CLI-1…8).

Why this module looks the way it does
-------------------------------------
The most common complaints about Codex clients are "spawn codex ENOENT" with Windows ``.cmd``
shims, nvm/npm/Homebrew installs shadowing each other, and a stale binary being picked. So
discovery does not stop at the first hit: it lists **every** plausible CLI in priority order and
says why each other path was thrown away, and the runtime tries them in turn (R-CLI-5).

Theory of operation
~~~~~~~~~~~~~~~~~~~
:func:`discover_cli` is **pure filesystem** (R-CLI-2): it stats, resolves symlinks, reads at most
a few KiB of a file head and an npm ``package.json``; it never spawns a process. Paths come from,
in this order (R-CLI-1):

1. overrides: the ``explicit`` argument, ``CODEX_BIN``, ``CODEX_PATH``, ``CODEX_CLI_PATH``;
2. every ``codex`` on ``PATH`` (``Path`` on Windows, case-insensitive, ``PATHEXT`` honoured);
3. home candidates: ``CODEX_INSTALL_DIR``, ``~/.local/bin``,
   ``%LOCALAPPDATA%\\Programs\\OpenAI\\Codex\\bin``,
   ``${CODEX_HOME:-~/.codex}/packages/standalone/current/bin`` and the old flat ``current``
   layout. The unselected ``releases/`` directory is never scanned;
4. common bin dirs (Homebrew, ``/usr/local/bin``, npm/volta/bun/pnpm/nvm prefixes…), then the
   official binary wheel ``openai-codex-cli-bin`` (``codexrt[cli]``) if it is installed in this
   interpreter (``<site-packages>/codex_cli_bin/bin/codex`` next to its ``codex-package.json``;
   found on ``sys.path`` by file, never imported);
5. the login shell's ``PATH`` — only through an injected callable, only when 1–4 found nothing;
6. the legacy dependency dirs (``~/.codemoss/dependencies/codex-sdk``, ``~/.codexrt/…``) — only
   when nothing else exists; read, never created, modified or deleted (R-CLI-4).

Each path is judged from the filesystem: missing, broken symlink, not a regular file, not
executable → :class:`Rejected` with a reason. A native executable (ELF / Mach-O / PE magic) is
*confirmed*. An npm launcher (``@openai/codex/bin/codex.js``, reached directly, through a
symlink, an npm/pnpm shell shim or a Windows ``.cmd`` shim) is confirmed only when the platform
package ``@openai/codex-<platform>`` holding ``vendor/<triple>/bin/codex`` is reachable with
Node's resolution rules (nested ``node_modules`` inside the package, or hoisted into any
ancestor ``node_modules``; this is how the real 0.169.0 package is laid out). Anything else
executable (a wrapper script) is *unconfirmed*. Unconfirmed candidates are sorted after every
confirmed one, never dropped (a heuristic miss must not take away a CLI that works).

Candidates are deduplicated by real path (symlinks resolved); later sightings of the same file
are kept on the candidate as :attr:`Candidate.also_found` so a report can show PATH
duplicates.

A stale override is an **error**, not a silent skip (R-CLI-3): :func:`discover_cli` raises
:class:`~codexrt._sansio._errors.CliOverrideInvalid` (a ``CliUnavailable``, ``CODEX_CLI_OVERRIDE_INVALID``). It is a
``CliUnavailable`` (not a ``ConfigError``) because a host reacts to it the same way — show the
"how to set ``CODEX_BIN``" help — and the code tells the two cases apart. A valid override is
trusted: a wrapper script named by the user is confirmed (only an npm launcher whose platform
binary is missing stays unconfirmed, since that is positive evidence it cannot start).

Spawning happens only in the explicit calls: :func:`probe_version` (R-CLI-7) and
:func:`read_login_shell_path` (which a caller may pass, wrapped, as ``login_shell_path``, or use
through :func:`discover_cli_with_login_shell`). Both are bounded by a timeout, capture at most
64 KiB, and always reap the child (its process group on POSIX).

:func:`launch_argv` / :func:`spawn_command` turn a candidate into what to execute; Windows
``.cmd``/``.bat`` shims go through ``cmd.exe /d /s /c`` with cmd-aware quoting (R-CLI-8).
:func:`format_unavailable` builds the R-CLI-6 failure text and the machine-readable
``codexCliUnavailable`` diagnostic once every candidate has failed.

Where it lives
~~~~~~~~~~~~~~
This module is the import surface; the code is in three parts along its seams:
:mod:`codexrt._io._cli_find` (the filesystem search above, never spawns),
:mod:`codexrt._io._cli_spawn` (launch argv, the bounded child, the version probe, the login
shell) and :mod:`codexrt._io._cli_report` (the R-CLI-6 failure text, the tested range).
"""

from __future__ import annotations

from codexrt._io._cli_find import (
    INSTALL_COMMAND,
    INSTALL_URL,
    NEWEST_TESTED_CLI,
    OLDEST_TESTED_CLI,
    OVERRIDE_ENV_VARS,
    Candidate,
    CandidateKind,
    DiscoveryResult,
    Rejected,
    Sighting,
    default_common_dirs,
    discover_cli,
    platform_binary_spec,
)
from codexrt._io._cli_report import (Attempt, cause_hint, format_unavailable, stderr_reason, tested_range_warning,
                                     unavailable_error, update_hint)
from codexrt._io._cli_spawn import (
    ProbeResult,
    VersionInfo,
    discover_cli_with_login_shell,
    launch_argv,
    probe_version,
    probe_version_detailed,
    read_login_shell_path,
    spawn_command,
)

__all__ = [
    "Attempt",
    "Candidate",
    "cause_hint",
    "stderr_reason",
    "CandidateKind",
    "DiscoveryResult",
    "ProbeResult",
    "Rejected",
    "Sighting",
    "VersionInfo",
    "OVERRIDE_ENV_VARS",
    "INSTALL_COMMAND",
    "INSTALL_URL",
    "NEWEST_TESTED_CLI",
    "OLDEST_TESTED_CLI",
    "default_common_dirs",
    "discover_cli",
    "discover_cli_with_login_shell",
    "format_unavailable",
    "unavailable_error",
    "launch_argv",
    "spawn_command",
    "probe_version",
    "probe_version_detailed",
    "read_login_shell_path",
    "platform_binary_spec",
    "tested_range_warning",
    "update_hint",
]
