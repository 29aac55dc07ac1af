"""Capability probe: does this Codex CLI accept ``turn/start.additionalContext``? (R-CTX-2, R-CTX-6)

``additionalContext`` is an experimental field: a CLI either knows it or not, and a
``turn/start`` that carries an unknown field is not the place to find out — compatibility is
**never** tested by re-sending ``turn/start`` after a failure (R-CTX-2). Instead, the first
send with non-empty context asks the CLI for its own protocol schema:

    <cli> app-server generate-json-schema --out <temp dir> --experimental

with the same resolved CLI argv and environment the app-server child uses, and looks for
``properties.additionalContext`` in ``<temp dir>/v2/TurnStartParams.json`` (the layout of the
pinned 0.169.0: one file per type under ``v2/``; without ``--experimental`` the field is
absent there, so the flag matters).

Theory of operation
-------------------
* One :class:`ContextCapabilityProbe` per client/runtime. It caches **one** answer keyed by
  ``(cli argv, child generation)``: a new CLI or a restarted child (a new generation) misses
  the cache and probes again, replacing the old answer; :meth:`invalidate` drops it. Every
  outcome is cached, failures included (a CLI that could not answer within 5 s is not asked
  again on every send of the same child); cancellation caches nothing.
* A lock makes concurrent sends share one probe run.
* The probe is a short child process: no app-server, no JSON-RPC, so it never creates a
  thread or a turn. It is bounded by ``timeout`` (5 s, R-CTX-2); on timeout or cancellation
  its process group is killed and reaped (shielded) and the temp dir is removed in every
  case.
* Cancellation (R-CTX-6): :meth:`decide` checks for cancellation *before* anything else, so
  an operation already cancelled leaves without spawning; cancelling during the probe kills
  and reaps the child, removes the temp dir and re-raises ``trio.Cancelled``.
* Failure of any kind (cannot start, non-zero exit, timeout, missing or unreadable schema)
  means "not supported": the send falls back to the text convention (R-CTX-4).
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from codexrt._sansio._context import ContextDelivery, ContextFragments
from codexrt._sansio._redact import Redactor, secret_env_values
from codexrt._io._workspace import run_limited

__all__ = [
    "DEFAULT_PROBE_TIMEOUT",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeStatistics",
    "ContextCapabilityProbe",
    "schema_supports_additional_context",
]

DEFAULT_PROBE_TIMEOUT = 5.0
_SCHEMA_FILE = ("v2", "TurnStartParams.json")
_MAX_SCHEMA_BYTES = 4 * 1024 * 1024
_OUTPUT_LIMIT = 64 * 1024
_DETAIL_CHARS = 400


class ProbeOutcome(enum.Enum):
    """Why the probe answered what it answered."""

    SUPPORTED = "supported"
    FIELD_MISSING = "fieldMissing"
    TIMEOUT = "timeout"
    SPAWN_FAILED = "spawnFailed"
    EXIT_CODE = "exitCode"
    SCHEMA_MISSING = "schemaMissing"
    SCHEMA_UNREADABLE = "schemaUnreadable"


@attrs.frozen
class ProbeResult:
    """One probe answer, for one ``(cli, generation)``."""

    supported: bool
    outcome: ProbeOutcome
    cli: tuple[str, ...]
    generation: int
    elapsed: float
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "supported": self.supported,
            "outcome": self.outcome.value,
            "cli": list(self.cli),
            "generation": self.generation,
            "elapsed": round(self.elapsed, 6),
            "detail": self.detail,
        }


@attrs.frozen
class ProbeStatistics:
    runs: int
    cache_hits: int
    cached: ProbeResult | None


def schema_supports_additional_context(schema: Any) -> bool:
    """True when a ``TurnStartParams`` JSON schema declares ``additionalContext``."""
    if not isinstance(schema, dict):
        return False
    props = schema.get("properties")
    return isinstance(props, dict) and isinstance(props.get("additionalContext"), dict)


def _read_schema(path: str) -> Any:
    size = os.stat(path).st_size
    if size > _MAX_SCHEMA_BYTES:
        raise ValueError(f"schema file is {size} bytes, more than {_MAX_SCHEMA_BYTES}")
    with open(path, "rb") as f:
        return json.loads(f.read())


class ContextCapabilityProbe:
    """Decides per send how IDE context travels (R-CTX-2), caching per CLI and child.

    ``temp_root`` is where the temp schema dir is made (default: the system temp dir).
    """

    def __init__(self, *, timeout: float = DEFAULT_PROBE_TIMEOUT, temp_root: str | os.PathLike[str] | None = None) -> None:
        if timeout <= 0:
            raise ValueError("probe timeout must be > 0")
        self.timeout = timeout
        self._temp_root = None if temp_root is None else os.fspath(temp_root)
        self._lock = trio.Lock()
        self._cached: ProbeResult | None = None
        self._runs = 0
        self._hits = 0

    def __repr__(self) -> str:
        c = self._cached
        state = "empty" if c is None else f"{c.outcome.value}@gen{c.generation}"
        return f"<ContextCapabilityProbe cache={state} runs={self._runs}>"

    def cached(self, cli: Sequence[str], generation: int) -> ProbeResult | None:
        """The cached answer for exactly this CLI argv and child generation, if any."""
        c = self._cached
        if c is not None and c.cli == tuple(cli) and c.generation == generation:
            return c
        return None

    def invalidate(self) -> None:
        """Forget the cached answer (e.g. the host switched CLI or restarted the child)."""
        self._cached = None

    def statistics(self) -> ProbeStatistics:
        return ProbeStatistics(self._runs, self._hits, self._cached)

    async def decide(
        self,
        fragments: ContextFragments,
        *,
        cli: Sequence[str],
        env: Mapping[str, str] | None,
        generation: int,
    ) -> ContextDelivery:
        """How this send's context travels (R-CTX-2).

        Empty ``fragments`` → ``NONE`` without probing. Otherwise ``ADDITIONAL_CONTEXT`` when
        the CLI's schema has the field, else ``TEXT_CONVENTION``. ``cli`` is the argv prefix
        that runs the resolved CLI (what the app-server child is started with, minus
        ``app-server …``), ``env`` its environment, ``generation`` the current child
        generation.

        Cancellation: an already-cancelled caller raises ``trio.Cancelled`` before any child
        is started (R-CTX-6); cancelling while the probe runs kills and reaps it, removes the
        temp dir and re-raises.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if not fragments:
            return ContextDelivery.NONE
        result = await self.probe(cli=cli, env=env, generation=generation)
        return ContextDelivery.ADDITIONAL_CONTEXT if result.supported else ContextDelivery.TEXT_CONVENTION

    async def probe(self, *, cli: Sequence[str], env: Mapping[str, str] | None, generation: int) -> ProbeResult:
        """The (cached) probe answer for ``cli`` at ``generation``. Never raises for a CLI
        failure — that is an answer (``supported=False``); only cancellation propagates."""
        key = tuple(cli)
        if not key:
            raise ValueError("cli argv must not be empty")
        await trio.lowlevel.checkpoint_if_cancelled()
        async with self._lock:
            hit = self.cached(key, generation)
            if hit is not None:
                self._hits += 1
                return hit
            result = await self._run(key, env, generation)
            self._runs += 1
            self._cached = result
            return result

    async def _run(self, cli: tuple[str, ...], env: Mapping[str, str] | None, generation: int) -> ProbeResult:
        started = trio.current_time()
        redact = Redactor(secret_env_values(env or {}))

        def answer(outcome: ProbeOutcome, detail: str | None = None) -> ProbeResult:
            return ProbeResult(
                outcome is ProbeOutcome.SUPPORTED,
                outcome,
                cli,
                generation,
                trio.current_time() - started,
                None if detail is None else redact(detail)[:_DETAIL_CHARS],
            )

        temp = tempfile.mkdtemp(prefix="codexrt-schema-", dir=self._temp_root)
        try:
            argv = [*cli, "app-server", "generate-json-schema", "--out", temp, "--experimental"]
            with trio.move_on_after(self.timeout) as scope:
                try:
                    out = await run_limited(argv, stdout_limit=_OUTPUT_LIMIT, stderr_limit=_OUTPUT_LIMIT, env=env)
                except OSError as exc:
                    return answer(ProbeOutcome.SPAWN_FAILED, f"cannot start {cli[0]}: {exc.strerror or exc}")
            if scope.cancelled_caught:
                return answer(ProbeOutcome.TIMEOUT, f"no answer within {self.timeout:g} s")
            if out.returncode != 0:
                tail = out.stderr.decode("utf-8", "replace").strip()[-_DETAIL_CHARS:]
                return answer(ProbeOutcome.EXIT_CODE, f"exit {out.returncode}: {tail}")
            path = os.path.join(temp, *_SCHEMA_FILE)
            if not os.path.isfile(path):
                return answer(ProbeOutcome.SCHEMA_MISSING, f"{'/'.join(_SCHEMA_FILE)} was not generated")
            try:
                schema = await trio.to_thread.run_sync(_read_schema, path)
            except (OSError, ValueError) as exc:
                return answer(ProbeOutcome.SCHEMA_UNREADABLE, str(exc))
            if schema_supports_additional_context(schema):
                return answer(ProbeOutcome.SUPPORTED)
            return answer(ProbeOutcome.FIELD_MISSING, "TurnStartParams has no additionalContext")
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(shutil.rmtree, temp, True)

