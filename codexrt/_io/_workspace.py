"""Workspace diff: staged, unstaged and untracked changes of a cwd, read from Git (R-DIFF-1).

Why a separate reader and not a model turn: ``/diff`` must show the workspace *now*, for the
session that asked, without spending a turn and without reusing an old turn's
``turn/diff/updated`` (R-DIFF-1). So this module runs ``git`` itself and ties every result to
``session_id`` + ``cwd`` + a timestamp; nothing is cached.

Theory of operation
-------------------
1. ``git rev-parse --show-toplevel`` in ``cwd`` decides the status: not a repository →
   ``notGit``; ``git`` not found → ``gitMissing``; any other failure → ``error``.
2. From the top level (so all paths are repository-relative): ``git diff --cached`` (staged),
   ``git diff`` (unstaged), ``git ls-files --others --exclude-standard -z`` (untracked), and
   for each untracked file ``git diff --no-index -- /dev/null <file>`` (an add-diff; exit
   code 1 means "differs" and is success there).
3. One byte budget (``max_bytes``) is shared by all stdout; each child's stderr has its own
   limit (``max_stderr_bytes``). Both pipes of every child are drained concurrently, so a
   chatty stderr can never block a child that is also writing stdout. When stdout overflows
   the child is killed and the result is ``truncated``; an untracked file larger than the
   remaining budget is not read at all (listed in ``omitted_files``).
4. One time limit (``timeout``) covers the whole read. On expiry the running child's process
   group is killed and reaped and the result is ``timeout`` with whatever was read so far.

Binary files are never inlined: Git prints ``Binary files … differ`` (we pass neither
``--binary`` nor ``--text``) and their paths are listed in ``binary_files``.

Git runs only git (issue 18). A repository is untrusted input: its config and attributes
may name programs (filter ``clean``/``smudge``/``process`` drivers, ``textconv``, external
diff, ``core.fsmonitor``, hooks, pager, signature checkers, transports for a lazy fetch). Each
way is closed explicitly:

* **filter drivers** — before the diff, ``git config --list -z`` (the same config sources,
  includes and environment the diff commands will read) names every ``filter.<name>.*``
  driver; each is overridden for the diff commands with an empty ``clean``/``smudge``/
  ``process`` and ``required=false`` (git runs no program for an empty command) through
  ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``, which beat every config file
  and carry any subsection name. A driver named only in ``.gitattributes`` with no config runs
  nothing anyway. So the unstaged and untracked diffs compare the **raw** work-tree bytes.
  Works with git 2.39 (Debian 12), which has no ``--attr-source``;
* **textconv and external diff** — ``--no-textconv --no-ext-diff`` on every ``diff``
  (``GIT_EXTERNAL_DIFF`` is dropped from the environment);
* **fsmonitor and hooks** — ``-c core.fsmonitor=false -c core.hooksPath=/dev/null`` (no command
  we run fires a hook; this is belt and braces);
* **pager** — git starts a pager only when stdout is a terminal; ours is a pipe (and
  ``GIT_PAGER``/``PAGER`` are ``cat``);
* **submodules** — ``--ignore-submodules=dirty``: a submodule's new commit is shown, but no
  ``git status`` runs inside it (its own config could name drivers we never saw);
* **transports** (a lazy fetch of a partial clone could start ``core.sshCommand``, an
  ``ext::`` URL or ``uploadpack``) — ``GIT_ALLOW_PROTOCOL=none`` allows no protocol at all,
  ``GIT_NO_LAZY_FETCH=1`` (newer git) stops the fetch earlier;
* **signatures** — ``-c log.showSignature=false`` (no ``gpg.program``; we run no ``log`` anyway).

Limit: the driver list is read once per call; a config file rewritten *between* that read and
the diff (by another process racing us) is not covered. ``tests/e2e/test_workspace_diff_hostile.py``
configures every hostile driver above and checks that none runs.

Also ``GIT_OPTIONAL_LOCKS=0`` so a read never takes the index lock from a concurrent
``git commit``, and ``LC_ALL=C`` so error texts are stable. Children run in their own process group (a wrapper script's
grandchildren die with it) and are always reaped, also on cancellation.

:func:`run_limited` is the bounded-subprocess primitive used here and by the context probe.
"""

from __future__ import annotations

import datetime as _dt
import enum
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from codexrt._sansio._redact import Redactor
from codexrt._io._fanout import WORKSPACE_DIFFS

__all__ = [
    "DiffStatus",
    "WorkspaceDiff",
    "LimitedOutput",
    "read_workspace_diff",
    "run_limited",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_STDERR_BYTES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_UNTRACKED_FILES",
]

DEFAULT_MAX_BYTES = 1_000_000
DEFAULT_MAX_STDERR_BYTES = 64 * 1024
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_UNTRACKED_FILES = 200

_CHUNK = 65536
_MESSAGE_CHARS = 500


# --------------------------------------------------------------------------- bounded child


@attrs.frozen
class LimitedOutput:
    """What a bounded child produced. ``*_truncated`` says a limit was hit; ``returncode`` is
    negative for a signal (the child was killed, e.g. after a stdout overflow)."""

    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool


class _Sink:
    __slots__ = ("limit", "buf", "truncated")

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.buf = bytearray()
        self.truncated = False

    def feed(self, chunk: bytes) -> bool:
        """Keep what fits; return False once the limit was exceeded."""
        room = self.limit - len(self.buf)
        if len(chunk) > room:
            self.buf += chunk[: max(room, 0)]
            self.truncated = True
            return False
        self.buf += chunk
        return True


def _kill_group(proc: trio.Process) -> None:
    if proc.returncode is not None:
        return
    try:
        if hasattr(os, "killpg"):
            # start_new_session=True made the child a group leader: pgid == pid, and the pid
            # cannot be reused before we reap it below.
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:  # pragma: no cover - raced with exit
            pass


async def run_limited(
    argv: Sequence[str],
    *,
    stdout_limit: int,
    stderr_limit: int,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> LimitedOutput:
    """Run ``argv`` with stdin closed, draining stdout and stderr concurrently.

    Keeps at most ``stdout_limit`` / ``stderr_limit`` bytes of each. Exceeding the stdout
    limit kills the child (its output is no longer wanted); exceeding the stderr limit only
    discards the rest while draining continues, so the child never blocks on a full pipe.
    Not bounded in time by itself: callers wrap it in a cancel scope. Cancelling kills the
    child's process group and reaps it (shielded) before ``Cancelled`` propagates.

    Raises ``OSError`` (``FileNotFoundError`` for a missing program) if it cannot start.
    """
    proc = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    out, err = _Sink(stdout_limit), _Sink(stderr_limit)
    try:

        async def drain(stream: trio.abc.ReceiveStream, sink: _Sink, kill_on_overflow: bool) -> None:
            while True:
                chunk = await stream.receive_some(_CHUNK)
                if not chunk:
                    return
                if not sink.feed(chunk) and kill_on_overflow:
                    _kill_group(proc)
                    return

        assert proc.stdout is not None and proc.stderr is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, proc.stdout, out, True)
            nursery.start_soon(drain, proc.stderr, err, False)
        await proc.wait()
    finally:
        with trio.CancelScope(shield=True):
            _kill_group(proc)
            await proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()
    assert proc.returncode is not None
    return LimitedOutput(proc.returncode, bytes(out.buf), bytes(err.buf), out.truncated, err.truncated)


# --------------------------------------------------------------------------- result model


class DiffStatus(enum.Enum):
    """Outcome of a workspace-diff read (R-DIFF-1); the value is the wire string."""

    OK = "ok"
    NOT_GIT = "notGit"
    TRUNCATED = "truncated"
    TIMEOUT = "timeout"
    GIT_MISSING = "gitMissing"
    ERROR = "error"


@attrs.frozen
class WorkspaceDiff:
    """A snapshot of a workspace's Git changes, tied to the session that asked (R-DIFF-1).

    ``staged`` / ``unstaged`` / ``untracked`` are unified diffs (``untracked`` is the
    add-diffs of untracked files). For ``timeout`` and ``truncated`` they hold what was read
    before the limit. ``read_at`` is an ISO-8601 UTC timestamp; ``elapsed`` seconds.
    """

    session_id: str
    cwd: str
    status: DiffStatus
    read_at: str
    elapsed: float
    repo_root: str | None = None
    staged: str = ""
    unstaged: str = ""
    untracked: str = ""
    untracked_files: tuple[str, ...] = ()
    binary_files: tuple[str, ...] = ()
    omitted_files: tuple[str, ...] = ()
    stderr_truncated: bool = False
    message: str | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.staged or self.unstaged or self.untracked or self.untracked_files)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for the ``serve`` wire (camelCase keys)."""
        return {
            "sessionId": self.session_id,
            "cwd": self.cwd,
            "status": self.status.value,
            "readAt": self.read_at,
            "elapsed": round(self.elapsed, 6),
            "repoRoot": self.repo_root,
            "staged": self.staged,
            "unstaged": self.unstaged,
            "untracked": self.untracked,
            "untrackedFiles": list(self.untracked_files),
            "binaryFiles": list(self.binary_files),
            "omittedFiles": list(self.omitted_files),
            "stderrTruncated": self.stderr_truncated,
            "message": self.message,
        }


# --------------------------------------------------------------------------- reader


class _GitFailed(Exception):
    def __init__(self, status: DiffStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@attrs.define
class _Reader:
    git: str
    root: str
    env: dict[str, str]
    budget: int
    max_stderr: int
    redact: Redactor
    staged: str = ""
    unstaged: str = ""
    untracked: list[str] = attrs.Factory(list)
    untracked_files: list[str] = attrs.Factory(list)
    binary: list[str] = attrs.Factory(list)
    omitted: list[str] = attrs.Factory(list)
    truncated: bool = False
    stderr_truncated: bool = False

    def _argv(self, *args: str) -> list[str]:
        return [
            self.git,
            "-c", "core.quotepath=false",
            "-c", "core.fsmonitor=false",
            "-c", "core.hooksPath=/dev/null",
            "-c", "log.showSignature=false",
            "-c", "diff.noprefix=false",
            "-c", "diff.mnemonicPrefix=false",
            "-c", "color.ui=false",
            *args,
        ]  # fmt: skip

    async def run(self, *args: str, ok_codes: tuple[int, ...] = (0,), cwd: str | None = None) -> bytes:
        result = await run_limited(
            self._argv(*args),
            stdout_limit=self.budget,
            stderr_limit=self.max_stderr,
            cwd=cwd or self.root,
            env=self.env,
        )
        self.stderr_truncated |= result.stderr_truncated
        self.budget -= len(result.stdout)
        if result.stdout_truncated:
            self.truncated = True
            return result.stdout
        if result.returncode not in ok_codes:
            text = result.stderr.decode("utf-8", "replace").strip()
            raise _GitFailed(
                DiffStatus.ERROR,
                self.redact(f"git {args[0]} failed (exit {result.returncode}): {text}")[:_MESSAGE_CHARS],
            )
        return result.stdout

    def note_binaries(self, diff: str) -> None:
        for line in diff.splitlines():
            if line.startswith("Binary files ") and line.endswith(" differ"):
                body = line[len("Binary files ") : -len(" differ")]
                a, sep, b = body.rpartition(" and ")
                path = b if b != "/dev/null" or not sep else a
                for prefix in ("a/", "b/"):
                    if path.startswith(prefix):
                        path = path[len(prefix) :]
                        break
                if path not in self.binary:
                    self.binary.append(path)

    async def neutralize_filters(self) -> None:
        """Override every ``filter.<name>`` driver the config defines with empty commands
        (see the module doc). A config too large to list is an error, not a guess."""
        listing = await self.run("config", "--list", "-z")
        if self.truncated:
            raise _GitFailed(DiffStatus.ERROR, "the repository's git config is too large to check for filter drivers")
        names: set[str] = set()
        for entry in listing.split(b"\0"):
            key = entry.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
            section, _, rest = key.partition(".")
            if section.lower() == "filter" and "." in rest:
                names.add(rest.rpartition(".")[0])
        overrides = [(f"filter.{n}.{var}", val) for n in sorted(names)
                     for var, val in (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))]
        self.env = _with_config(self.env, overrides)

    async def read(self, max_untracked: int) -> None:
        self.staged = _decode(await self.run("diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
                                             "--ignore-submodules=dirty"))
        self.note_binaries(self.staged)
        if self.truncated:
            return
        self.unstaged = _decode(await self.run("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                                               "--ignore-submodules=dirty"))
        self.note_binaries(self.unstaged)
        if self.truncated:
            return
        listing = await self.run("ls-files", "--others", "--exclude-standard", "-z")
        if self.truncated:
            return
        names = [n.decode("utf-8", "surrogateescape") for n in listing.split(b"\0") if n]
        self.untracked_files = [n.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for n in names]
        for index, name in enumerate(names):
            shown = self.untracked_files[index]
            if index >= max_untracked or self.budget <= 0:
                self.omitted.append(shown)
                self.truncated = True
                continue
            path = os.path.join(self.root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue  # vanished since the listing
            if name.endswith("/") or os.path.isdir(path):
                continue  # a nested repository: Git lists it, there is no file to diff
            if st.st_size > self.budget:
                # too big for what is left: do not even read it
                self.omitted.append(shown)
                self.truncated = True
                continue
            chunk = _decode(
                await self.run(
                    "diff", "--no-index", "--no-color", "--no-ext-diff", "--no-textconv",
                    "--", os.devnull, name,
                    ok_codes=(0, 1),
                )  # fmt: skip
            )
            self.note_binaries(chunk)
            self.untracked.append(chunk)
            if self.truncated:
                self.omitted.extend(self.untracked_files[index + 1 :])
                return


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _git_env(env: Mapping[str, str] | None) -> dict[str, str]:
    base = dict(os.environ if env is None else env)
    base.update(
        {
            "LC_ALL": "C",
            "LANGUAGE": "C",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
        }
    )
    base.pop("GIT_EXTERNAL_DIFF", None)
    # No transport at all (no protocol is named "none"): a lazy fetch cannot start a program.
    base["GIT_ALLOW_PROTOCOL"] = "none"
    base["GIT_NO_LAZY_FETCH"] = "1"
    return base


def _with_config(env: Mapping[str, str], pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``env`` plus config ``pairs`` as ``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` entries
    appended after any the caller's environment already has (later entries win)."""
    out = dict(env)
    try:
        n = int(out.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        n = 0
    for key, value in pairs:
        out[f"GIT_CONFIG_KEY_{n}"] = key
        out[f"GIT_CONFIG_VALUE_{n}"] = value
        n += 1
    out["GIT_CONFIG_COUNT"] = str(n)
    return out


async def read_workspace_diff(
    cwd: str | os.PathLike[str],
    *,
    session_id: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_stderr_bytes: int = DEFAULT_MAX_STDERR_BYTES,
    timeout: float = DEFAULT_TIMEOUT,
    max_untracked_files: int = DEFAULT_MAX_UNTRACKED_FILES,
    git: str = "git",
    env: Mapping[str, str] | None = None,
    channel_id: str = "",
) -> WorkspaceDiff:
    """Read staged, unstaged and untracked changes of ``cwd``'s repository (R-DIFF-1).

    Never starts a model turn and never caches: every call runs Git anew. Always returns a
    :class:`WorkspaceDiff` whose ``status`` says how it went (``ok``, ``notGit``,
    ``truncated``, ``timeout``, ``gitMissing``, ``error``); it does not raise for Git
    problems. ``max_bytes`` bounds all stdout together, ``max_stderr_bytes`` each child's
    stderr, ``timeout`` the whole read. ``git`` is looked up on ``env['PATH']`` (default:
    this process's environment).

    Cancelling it kills and reaps the running ``git`` child, then ``trio.Cancelled``
    propagates; nothing is left running.

    At most 2 diffs of one ``channel_id`` and 4 in all run at once (issue 35,
    ``codexrt._io._fanout.WORKSPACE_DIFFS``); the others wait in a bounded FIFO queue — the wait
    counts in ``timeout`` (status ``timeout`` when it ends there) — and past the queue's bound
    (16 per channel, 64 in all) the read is refused with :class:`~codexrt.QueueFull` before
    any ``git`` runs.
    """
    if max_bytes < 0 or max_stderr_bytes < 0 or timeout <= 0 or max_untracked_files < 0:
        raise ValueError("read_workspace_diff limits must be non-negative and timeout > 0")
    started, acquired = trio.current_time(), False
    with trio.move_on_after(timeout):
        await WORKSPACE_DIFFS.acquire(channel_id)
        acquired = True
    if not acquired:
        return WorkspaceDiff(session_id=session_id, cwd=os.fspath(cwd), status=DiffStatus.TIMEOUT, read_at=_now_iso(),
                             elapsed=trio.current_time() - started,
                             message=f"no workspace-diff slot within {timeout:g} s: other diffs held every slot")
    try:
        return await _read_workspace_diff(cwd, session_id, max_bytes, max_stderr_bytes, timeout, max_untracked_files,
                                          git, env, started + timeout)
    finally:
        WORKSPACE_DIFFS.release(channel_id)


async def _read_workspace_diff(cwd: str | os.PathLike[str], session_id: str, max_bytes: int, max_stderr_bytes: int,
                               timeout: float, max_untracked_files: int, git: str, env: Mapping[str, str] | None,
                               deadline: float) -> WorkspaceDiff:
    """The read itself, once a slot is held (see :func:`read_workspace_diff`); ``deadline``
    (Trio time) is the caller's, queue time included."""
    cwd_s = os.fspath(cwd)
    started = trio.current_time()
    read_at = _now_iso()
    genv = _git_env(env)
    redact = Redactor()

    def done(status: DiffStatus, reader: _Reader | None = None, message: str | None = None, root: str | None = None) -> WorkspaceDiff:
        fields: dict[str, Any] = {}
        if reader is not None:
            fields = {
                "staged": reader.staged,
                "unstaged": reader.unstaged,
                "untracked": "".join(reader.untracked),
                "untracked_files": tuple(reader.untracked_files),
                "binary_files": tuple(reader.binary),
                "omitted_files": tuple(reader.omitted),
                "stderr_truncated": reader.stderr_truncated,
            }
        return WorkspaceDiff(
            session_id=session_id,
            cwd=cwd_s,
            status=status,
            read_at=read_at,
            elapsed=trio.current_time() - started,
            repo_root=root,
            message=message,
            **fields,
        )

    git_path = shutil.which(git, path=genv.get("PATH", os.defpath))
    if git_path is None:
        return done(DiffStatus.GIT_MISSING, message=f"git executable {git!r} not found on PATH")
    if not os.path.isdir(cwd_s):
        return done(DiffStatus.ERROR, message=f"cwd is not a directory: {cwd_s}")

    reader: _Reader | None = None
    root: str | None = None
    with trio.move_on_at(deadline) as scope:
        try:
            probe = _Reader(git_path, cwd_s, genv, 64 * 1024, max_stderr_bytes, redact)
            try:
                top = await probe.run("rev-parse", "--show-toplevel", cwd=cwd_s)
            except _GitFailed as exc:
                low = exc.message.lower()
                if "not a git repository" in low or "must be run in a work tree" in low:
                    return done(DiffStatus.NOT_GIT, message=f"not a Git work tree: {cwd_s}")
                return done(DiffStatus.ERROR, message=exc.message)
            root = top.decode("utf-8", "surrogateescape").strip() or None
            if root is None or probe.truncated:
                return done(DiffStatus.ERROR, message="git rev-parse gave no work-tree root")
            config = _Reader(git_path, root, genv, 1 << 20, max_stderr_bytes, redact)
            await config.neutralize_filters()
            reader = _Reader(git_path, root, config.env, max_bytes, max_stderr_bytes, redact)
            reader.stderr_truncated = probe.stderr_truncated or config.stderr_truncated
            await reader.read(max_untracked_files)
        except _GitFailed as exc:
            return done(exc.status, reader, exc.message, root)
        except FileNotFoundError:
            return done(DiffStatus.GIT_MISSING, reader, f"git executable {git!r} could not be started", root)
        except OSError as exc:
            return done(DiffStatus.ERROR, reader, f"could not run git: {exc.strerror or exc}", root)
    if scope.cancelled_caught:
        return done(DiffStatus.TIMEOUT, reader, f"git did not finish within {timeout:g} s", root)
    assert reader is not None
    if reader.truncated:
        return done(
            DiffStatus.TRUNCATED,
            reader,
            f"diff output limited (max {max_bytes} bytes, {max_untracked_files} untracked files)"
            + (f"; {len(reader.omitted)} untracked file(s) not shown" if reader.omitted else ""),
            root,
        )
    return done(DiffStatus.OK, reader, None, root)
