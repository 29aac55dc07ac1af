"""Where the Codex CLI's home is: the one ``CODEX_HOME`` resolver.

Order: an explicit directory (``RuntimeConfig.codex_home``, ``--codex-home``, a reader's
``codex_home=``), else the ``CODEX_HOME`` variable of the environment the child inherits (the
given mapping; ``os.environ`` when none is given), else ``~/.codex``. ``~`` is expanded in each;
an empty string counts as unset (as the CLI treats it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["resolve_codex_home"]


def resolve_codex_home(explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None, *,
                       home: Path | None = None) -> Path:
    """The effective ``CODEX_HOME`` (see the module doc). ``home``: the user's home directory
    for the ``~/.codex`` default (``Path.home()`` when None)."""
    if explicit is not None and os.fspath(explicit):
        return Path(os.path.expanduser(os.fspath(explicit)))
    raw = (os.environ if env is None else env).get("CODEX_HOME")
    if raw:
        return Path(os.path.expanduser(raw))
    return (Path.home() if home is None else home) / ".codex"
