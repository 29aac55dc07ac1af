"""A loopback model for trying codexrt with the real ``codex`` and no account or network.

``open_loopback()`` starts a scripted stand-in for the OpenAI Responses API on 127.0.0.1 and a
throw-away ``CODEX_HOME`` whose ``config.toml`` points the real ``codex app-server`` at it, and
gives you a :class:`~codexrt.RuntimeConfig` that ties them together::

    import codexrt.blocking
    from codexrt.loopback import open_loopback

    with open_loopback() as lb, codexrt.blocking.connect(lb.config) as rt:
        print(rt.send("Hello! [[mock:deltas:5]]"))

The Codex CLI is found as everywhere in codexrt (``codex_bin=``, ``CODEX_BIN``, ``PATH``, the usual
install places, the ``codexrt[cli]`` wheel); nothing here reads a checkout's files. The child's
environment keeps nothing that could carry a credential or a proxy, so ``codex`` can reach
nothing but 127.0.0.1. ``[[mock:…]]`` directives in a message script the model (see
:mod:`codexrt.loopback._model`): ``[[mock:text:…]]``, ``[[mock:deltas:N]]``,
``[[mock:exec:cmd]]`` (asks to run a command), ``[[mock:hang]]`` and others. ``codexrt demo``,
``codexrt run --loopback`` and ``codexrt serve --loopback`` use this module.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import attrs

from codexrt._runtime._runtime import RuntimeConfig
from codexrt._sansio._errors import ConfigError
from codexrt.loopback._home import codex_env, config_toml, make_codex_home
from codexrt.loopback._model import MockResponsesServer, RecordedRequest, Script, parse_directives

__all__ = ["open_loopback", "Loopback", "MockResponsesServer", "Script", "RecordedRequest", "make_codex_home",
           "codex_env", "config_toml", "parse_directives"]


#: How many recent model requests :func:`open_loopback`'s model keeps in memory.
KEEP_REQUESTS = 32


@attrs.frozen
class Loopback:
    """A running loopback setup: the model server, its throw-away ``CODEX_HOME``, a workspace
    and the :class:`~codexrt.RuntimeConfig` that ties them together (``codex_bin`` is None
    when discovery picks the CLI)."""

    model: MockResponsesServer
    codex_home: Path
    workspace: Path
    config: RuntimeConfig
    codex_bin: str | None

    @property
    def mock(self) -> MockResponsesServer:
        """The model server (older name)."""
        return self.model


@contextlib.contextmanager
def open_loopback(*, codex_bin: str | None = None, cwd: str | None = None) -> Iterator[Loopback]:
    """Start the loopback model and a throw-away ``CODEX_HOME`` (and a workspace, unless
    ``cwd`` names one — an existing directory: a missing one is a ``ConfigError``, never
    created); stop the model and remove the temporary files on exit. The model keeps only its
    :data:`KEEP_REQUESTS` most recent requests in memory."""
    if cwd is not None and not Path(cwd).is_dir():
        # Never created on the user's filesystem: a typo must not leave a directory behind.
        raise ConfigError(f"the working directory {cwd!r} does not exist or is not a directory",
                          details={"field": "cwd", "path": str(cwd)})
    tmp = Path(tempfile.mkdtemp(prefix="codexrt-loopback-"))
    try:
        # Bounded memory for long sessions (serve --loopback): only the recent requests are kept
        # in memory, and no request log is written (each body repeats the thread's history).
        with MockResponsesServer(keep_requests=KEEP_REQUESTS) as model:
            home = make_codex_home(tmp / "codex-home", model.base_url)
            workspace = Path(cwd).resolve() if cwd else tmp / "workspace"
            workspace.mkdir(exist_ok=True)
            config = RuntimeConfig(codex_bin=codex_bin, codex_home=str(home), cwd=str(workspace),
                                   env=codex_env(home))
            yield Loopback(model, home, workspace, config, codex_bin)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
