"""Redaction of secrets in text that may reach logs, events, error details or doctor output
(R-WIRE-9; the threat model is in ``docs/security.md``).

What is masked (replaced by ``[REDACTED]``):

* **known values** — exact secret values the caller registers: the values of the child's
  secret-looking environment variables (:func:`secret_env_values`), a WebSocket token, a managed
  credential, ``RuntimeConfig.secrets``. Also their JSON-escaped and percent-encoded forms, and
  each line of a multi-line value. Values shorter than :data:`MIN_KNOWN_LENGTH` (8) characters
  are *not* masked wherever they occur: masking ``"abc"`` or ``"false"`` everywhere would
  destroy ordinary output. Such a value is still masked where it is named (``NAME=value``).
* **named values** — ``NAME=value``, ``NAME: value``, ``"name": "value"`` for names that look
  secret word by word (:func:`looks_secret_name`: ``OPENAI_API_KEY``, ``accessToken``,
  ``PGPASSWORD``, ``client_secret``, ``GITHUB_PAT``, an ``AUTH`` word — not ``KeyError`` or
  ``monkey``), and the whole value of ``Authorization``, ``Proxy-Authorization``, ``Cookie``,
  ``Set-Cookie`` and ``X-Api-Key`` headers.
* **schemes and shapes** — ``Bearer …``/``Basic …`` credentials, URL userinfo
  (``https://user:pass@host`` → ``https://[REDACTED]@host``), and well-known key shapes:
  OpenAI/Anthropic ``sk-…``/``sk-proj-…``, GitHub ``ghp_…``/``gho_…``/``ghu_…``/``ghs_…``/
  ``ghr_…``/``github_pat_…``, GitLab ``glpat-…``, Slack ``xox?-…``, AWS ``AKIA…``/``ASIA…``,
  Google ``AIza…``, Hugging Face ``hf_…`` and JWTs (``eyJ….eyJ….…``); the long shapes also
  glued to the letters before them (``xxxsk-proj-…``).

Known values registered anywhere in the process are also masked by every other
:class:`Redactor` and by the log filter (:class:`RedactingFilter`): masking more is never a
leak. A value is registered for as long as an owner holds it (a redactor, a launch
configuration, a named owner such as serve's default configuration); the last one to let go
removes it (issue 35: the registry does not grow with every key ever configured). All held
values are matched in one pass whatever their number (:class:`_Matcher`). Redaction is idempotent. Run it **before** any truncation: cutting first can leave a
key's prefix that no rule recognises any more.

What is not masked: a secret of unknown shape that was never registered and is not named; a
known value under 8 characters that appears bare; a multi-line value split by a consumer that
redacts line by line (:class:`LineRedactor` handles a name on one line and its value on the
next).
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import logging
import re
import threading
import urllib.parse
import weakref
from typing import Any, Hashable, Iterable, Mapping

__all__ = [
    "Redactor",
    "LineRedactor",
    "RedactingFilter",
    "REDACTED",
    "MIN_KNOWN_LENGTH",
    "CODEXRT_LOGGERS",
    "looks_secret_name",
    "secret_env_values",
    "register_process_secrets",
    "hold_process_secrets",
    "hold_process_secrets_while",
    "release_process_secrets",
    "process_redactor",
    "install_log_filter",
]

REDACTED = "[REDACTED]"

#: Known values shorter than this are only masked where they are named (see the module doc).
MIN_KNOWN_LENGTH = 8

# -- names ---------------------------------------------------------------------------------

#: Words whose presence anywhere in a name marks it secret (also glued: ``PGPASSWORD``).
_ANYWHERE = ("PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
#: Words that mark a name secret only as its last word (``OPENAI_API_KEY``, ``accessToken``;
#: not ``KeyError``, ``tokenUsage``, ``max_tokens``) or glued after one of
#: :data:`_GLUED_BEFORE` (``apikey``, ``authtoken``; not ``monkey``, ``turkey``).
_LAST = ("KEY", "KEYS", "TOKEN", "PAT")  # not TOKENS: ``max_tokens``, ``inputTokens`` are counts
_GLUED_BEFORE = ("API", "ACCESS", "AUTH", "REFRESH", "SESSION", "SECRET", "PRIVATE", "SIGNING", "MASTER",
                 "CLIENT", "BEARER", "ID", "ENCRYPTION", "LICENSE", "GH", "GITHUB", "GITLAB", "NPM", "PYPI")
#: Names that match the words but never hold a secret (paths to sockets and the like).
_NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KEYBOARD", "XKB_DEFAULT_LAYOUT"})
_WORD_SPLIT = re.compile(r"[_\-. ]+|(?<=[A-Za-z])(?=[0-9])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def looks_secret_name(name: str) -> bool:
    """True for an environment variable or field name whose value is treated as secret.
    The name is split into words (``_``, ``-``, ``.``, camelCase): it is secret when a word
    contains ``PASSWORD``, ``PASSWD``, ``PASSPHRASE`` or ``CREDENTIAL`` or ends in ``SECRET``; when its
    last word (digits after it ignored) is ``KEY``, ``TOKEN`` or ``PAT`` (``OPENAI_API_KEY``,
    ``GH_TOKEN``, ``GITHUB_PAT``) or ends in ``KEY``/``TOKEN`` glued to a known word
    (``apikey``, ``authtoken``); or when a word is ``AUTH``/``AUTHORIZATION``. Ordinary words
    that merely contain the letters are not secret names (issue 35): ``KeyError``,
    ``monkey``, ``keyboard``, ``tokenUsage``, ``max_tokens``, ``GIT_AUTHOR_NAME``.
    Case-insensitive."""
    if len(name) > _CACHED_NAME_CHARS:
        return _classify_name(name)
    return _classify_name_cached(name)


#: Names up to this length are classified once and remembered (:data:`_NAME_CACHE_SIZE` of
#: them, least recently used first out): a child's stderr repeats the same few ``name: value``
#: pairs on every line (issue 34). Longer names are classified afresh, so a hostile peer cannot
#: make the cache hold much.
_CACHED_NAME_CHARS = 64
_NAME_CACHE_SIZE = 1024


def _classify_name(name: str) -> bool:
    if name.upper() in _NOT_SECRET_NAMES:
        return False
    words = [w.upper() for w in _WORD_SPLIT.split(name) if w]
    if not words:
        return False
    if any(a in w for w in words for a in _ANYWHERE):
        return True
    if any(w.endswith(("SECRET", "SECRETS")) for w in words):  # client_secret, clientsecret; not secretary
        return True
    if any(w in ("AUTH", "AUTHORIZATION") for w in words):
        return True
    while len(words) > 1 and words[-1].isdigit():
        words.pop()
    last = words[-1]
    if last in _LAST:
        return last not in ("PAT", "KEYS") or len(words) > 1  # "keys: 3" is a count
    for tail in ("KEY", "TOKEN"):
        if last.endswith(tail) and last[: -len(tail)] in _GLUED_BEFORE:
            return True
    return False


_classify_name_cached = functools.lru_cache(maxsize=_NAME_CACHE_SIZE)(_classify_name)


def secret_env_values(env: Mapping[str, str]) -> list[str]:
    """The values of ``env``'s secret-looking variables (:func:`looks_secret_name`)."""
    return [v for k, v in env.items() if isinstance(v, str) and v and looks_secret_name(k)]


# -- patterns ------------------------------------------------------------------------------
# Every pattern runs in time linear in the line (a hostile child controls its stderr): a name
# is a whole run of name characters (a lookbehind pins its start, a possessive quantifier
# forbids backtracking into it) and is classified in Python afterwards.

_NAME_RUN = r"(?<![A-Za-z0-9_\-.])[A-Za-z0-9_\-.]++"
_QUOTED = r"\"(?:[^\"\\\r\n]|\\.)*+\"|'[^'\r\n]*+'"
_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key")
# "name" = value / name: value / NAME=value, the name checked by ``looks_secret_name``.
_NAMED = re.compile(r"(\"?(" + _NAME_RUN + r")\"?)(\s*+[:=]\s*+)(" + _QUOTED + r"|[^\s,;}&\"']++)")
# URL userinfo: scheme://user:pass@host
_URL_USERINFO = re.compile(r"(?i)((?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*+://)([^\s/@\"'<>]++)(?=@)")
# Credentials after an auth scheme; an all-lowercase word of prose ("bearer token") is kept.
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s++)([A-Za-z0-9\-._~+/]++=*+)")
# Well-known key shapes. A shape with a long, distinctive body is also found glued to the
# letters before it (``xxxsk-proj-…``, issue 35); ``sk-`` glued needs 20 body characters with a
# digit in them, so ``task-manager`` and ``disk-usage`` stay prose.
_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{6,}+"
    r"|(?<=[A-Za-z0-9_])sk-(?=[A-Za-z_\-]{0,200}+[0-9])[A-Za-z0-9_\-]{20,}+"
    r"|gh[pousr]_[A-Za-z0-9]{16,}+|github_pat_[A-Za-z0-9_]{16,}+"
    r"|glpat-[A-Za-z0-9_\-]{16,}+"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{8,}+"
    r"|(?<![0-9A-Z])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"
    r"|AIza[0-9A-Za-z_\-]{30,}+"
    r"|\bhf_[A-Za-z0-9]{20,}+"
    r"|eyJ[A-Za-z0-9_\-]{4,}+\.eyJ[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]*+"
)
# What each pattern cannot match without (issue 34: most lines a child writes hold none of them,
# and a substring test is far cheaper than a scan with lookbehinds). The case-insensitive words
# are tested on an ASCII text lowered; a text with other characters runs every pattern, since
# ``(?i)`` also folds a few non-ASCII letters (the Kelvin sign matches ``k``).
_SHAPE_LITERALS = ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "AKIA", "ASIA",
                   "AIza", "hf_", "eyJ")
_HEADER_WORDS = ("authorization", "cookie", "x-api-key")
# What no name that ``_secret_field`` accepts can be spelled without (a header name, or a word
# of ``_ANYWHERE``/``SECRET``/``AUTH``/``_LAST``, or a ``KEY``/``TOKEN`` ending), lowered: a line
# with none of them has no name ``_NAMED`` would mask, and skips its scan (issue 34: a child's
# stderr warnings hold ``:`` in every timestamp, and the scan was half of their redaction).
# The header substitution before it only adds ``[REDACTED]``, which spells none of them.
_NAME_WORDS = ("pass", "credential", "secret", "auth", "key", "token", "pat", "cookie")
_SCHEME_WORDS = ("bearer", "basic")
# A line that ends with a secret-looking name and its separator: the value is on the next line.
_DANGLING_NAME = re.compile(r"\"?(" + _NAME_RUN + r")\"?\s*+[:=]\s*+$")
_LEADING_VALUE = re.compile(r"^(\s*+)(" + _QUOTED + r"|[^\s,;}&]++)")
_DANGLING_WINDOW = 256


def _secret_field(name: str) -> bool:
    return name.lower() in _HEADERS or looks_secret_name(name)


def _mask_named(m: re.Match[str]) -> str:
    name, value = m.group(2), m.group(4)
    if not _secret_field(name) or REDACTED in value:
        return m.group(0)
    if name.lower() in _HEADERS and value[:1] not in ("\"", "'"):
        return m.group(0)  # a header value runs to the end of the line: _mask_header masks it
    if value[:1] in ("\"", "'") and len(value) >= 2:
        return f"{m.group(1)}{m.group(3)}{value[0]}{REDACTED}{value[-1]}"
    return f"{m.group(1)}{m.group(3)}{REDACTED}"


_HEADER_LINE = re.compile(r"(?i)\b((?:proxy-)?authorization|set-cookie|cookie|x-api-key)(\"?\s*+[:=]\s*+)"
                          r"(" + _QUOTED + r"|[^\r\n]++)")


def _mask(m: re.Match[str]) -> str:
    value = m.group(3)
    if REDACTED in value:
        return m.group(0)
    if value[:1] in ("\"", "'") and len(value) >= 2:
        return f"{m.group(1)}{m.group(2)}{value[0]}{REDACTED}{value[-1]}"
    return f"{m.group(1)}{m.group(2)}{REDACTED}"


def _mask_userinfo(m: re.Match[str]) -> str:
    return m.group(0) if m.group(2) == REDACTED else f"{m.group(1)}{REDACTED}"


def _mask_scheme(m: re.Match[str]) -> str:
    value = m.group(3)
    if value.isalpha() and value.islower() and len(value) < 20:
        return m.group(0)  # prose: "the bearer token", "basic auth"
    return f"{m.group(1)}{m.group(2)}{REDACTED}"


def _variants(value: str) -> set[str]:
    out = {value, value.strip()}
    for line in value.splitlines():
        out.add(line.strip())
    for v in list(out):
        out.add(json.dumps(v, ensure_ascii=False)[1:-1])
        out.add(json.dumps(v)[1:-1])
        out.add(urllib.parse.quote(v, safe=""))
        out.add(urllib.parse.quote_plus(v, safe=""))
    return {v for v in out if len(v) >= MIN_KNOWN_LENGTH}


#: Known values are found by their first ``_ANCHOR`` characters (one compiled pattern, a
#: radix trie of those prefixes), then checked whole with ``str.startswith``.
_ANCHOR = 20


def _trie_pattern(words: Iterable[str]) -> str:
    """One regex matching any of ``words``, built as a radix trie: alternatives at a node
    start with distinct characters (the regex engine rejects each on its first character) and
    continuing is preferred to stopping, so the longest word at a position wins. The cost per
    text position is bounded by the alphabet, not by the number of words."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = True

    def emit(node: dict[str, Any]) -> str:
        alts = []
        for ch in sorted(k for k in node if k):
            run, child = ch, node[ch]
            while "" not in child and len(child) == 1:
                (nxt, child), = child.items()
                run += nxt
            alts.append(re.escape(run) + emit(child))
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 and "" not in node else "(?:" + "|".join(alts) + ")"
        return body + "?" if "" in node else body

    return emit(root)


class _Matcher:
    """The compiled form of a set of known values (see :func:`_trie_pattern`)."""

    def __init__(self, values: Iterable[str]) -> None:
        by_anchor: dict[str, list[str]] = {}
        for v in values:
            by_anchor.setdefault(v[:_ANCHOR], []).append(v)
        for group in by_anchor.values():
            group.sort(key=len, reverse=True)
        self._by_anchor = by_anchor
        self._regex = re.compile(_trie_pattern(by_anchor))

    def sub(self, text: str) -> str:
        search, by_anchor = self._regex.search, self._by_anchor
        out: list[str] = []
        pos = done = 0
        while (m := search(text, pos)) is not None:
            start = m.start()
            hit = next((v for v in by_anchor[m.group()] if text.startswith(v, start)), None)
            if hit is None:
                # A long value whose prefix matched but not the rest: a shorter whole value
                # (shorter than the anchor) may still start here.
                shorter = range(min(len(m.group()), _ANCHOR) - 1, MIN_KNOWN_LENGTH - 1, -1)
                hit = next((text[start:start + n] for n in shorter if text[start:start + n] in by_anchor), None)
            if hit is None:
                pos = start + 1
                continue
            out.append(text[done:start])
            out.append(REDACTED)
            pos = done = start + len(hit)
        if not out:
            return text
        out.append(text[done:])
        return "".join(out)


class _KnownValues:
    """Exact values to mask, each held by owners (refcounted): a value leaves the set when the
    last owner that holds it lets go (issue 35). ``owner=None`` holds a value for the life of
    the process. Matching is one pass over the text whatever the number of values; the
    matcher is rebuilt lazily, on the first use after the set changed."""

    def __init__(self) -> None:
        self._refs: dict[str, int] = {}
        self._owned: dict[Hashable, frozenset[str]] = {}
        self._permanent: set[str] = set()
        self._matcher: _Matcher | None = None
        self._lock = threading.Lock()  # the log filter may run on any thread
        # Releases that could not take the lock at once (see release()); applied, in order, by
        # the next step that holds it.
        self._pending: collections.deque[Hashable] = collections.deque()

    def _incref(self, variants: Iterable[str]) -> None:
        refs = self._refs
        for v in variants:
            if v in refs:
                refs[v] += 1
            else:
                refs[v] = 1
                self._matcher = None

    def _decref(self, variants: Iterable[str]) -> None:
        refs = self._refs
        for v in variants:
            n = refs[v] - 1
            if n:
                refs[v] = n
            else:
                del refs[v]
                self._matcher = None

    def add(self, value: object, owner: Hashable = None) -> bool:
        """Hold ``value`` for ``owner`` (in addition to what it holds). False when the value is
        not a string or shorter than :data:`MIN_KNOWN_LENGTH` (nothing is held)."""
        if not isinstance(value, str) or len(value.strip()) < MIN_KNOWN_LENGTH:
            return False
        variants = _variants(value)
        with self._lock:
            self._drain_pending()
            if owner is None:
                new = variants - self._permanent
                self._permanent |= new
            else:
                held = self._owned.get(owner, frozenset())
                new = variants - held
                self._owned[owner] = held | new
            self._incref(new)
        return True

    def replace(self, owner: Hashable, values: Iterable[object]) -> None:
        """Make ``owner`` hold exactly ``values`` (new ones first, so a value held before and
        after is never unmasked in between)."""
        variants: set[str] = set()
        for value in values:
            if isinstance(value, str) and len(value.strip()) >= MIN_KNOWN_LENGTH:
                variants |= _variants(value)
        with self._lock:
            self._drain_pending()
            self._replace_locked(owner, variants)

    def _replace_locked(self, owner: Hashable, variants: set[str] | frozenset[str]) -> None:
        held = self._owned.pop(owner, frozenset())
        self._incref(variants - held)
        self._decref(held - variants)
        if variants:
            self._owned[owner] = frozenset(variants)

    def _drain_pending(self) -> None:
        while self._pending:
            self._replace_locked(self._pending.popleft(), frozenset())

    def release(self, owner: Hashable) -> None:
        """Let go of what ``owner`` holds. Never blocks: ``weakref.finalize`` calls this, and a
        finalizer may run on a thread that already holds the lock (a garbage collection inside
        :meth:`sub` building its matcher) — waiting there would deadlock (it did: a real launch
        test hung in ``sub``). Then the release is queued and the next locked step applies it."""
        if self._lock.acquire(blocking=False):
            try:
                self._drain_pending()
                self._replace_locked(owner, frozenset())
            finally:
                self._lock.release()
        else:
            self._pending.append(owner)

    def __len__(self) -> int:
        return len(self._refs)

    def sub(self, text: str) -> str:
        if self._pending and self._lock.acquire(blocking=False):
            try:
                self._drain_pending()
            finally:
                self._lock.release()
        if not self._refs:
            return text
        matcher = self._matcher
        if matcher is None:
            with self._lock:
                matcher = self._matcher = _Matcher(list(self._refs))
        return matcher.sub(text)


_PROCESS = _KnownValues()
_REDACTOR_IDS = itertools.count(1)


def register_process_secrets(values: Iterable[object], *, owner: Hashable = None) -> None:
    """Make ``values`` known to every :class:`Redactor` and to the log filter of this process
    — for the life of the process, or, with ``owner``, until :func:`release_process_secrets`
    (``owner``) or :func:`hold_process_secrets` (``owner``, ...) lets go of them."""
    for v in values:
        _PROCESS.add(v, owner)


def hold_process_secrets(owner: Hashable, values: Iterable[object]) -> None:
    """``owner`` now holds exactly ``values`` process-wide: a launch configuration that is
    replaced drops the secrets only it carried (issue 35)."""
    _PROCESS.replace(owner, values)


def hold_process_secrets_while(obj: object, values: Iterable[object]) -> None:
    """Hold ``values`` process-wide for as long as ``obj`` lives (it must support weak
    references): e.g. a launch configuration's credential while that configuration exists."""
    owner = ("object", id(obj))
    _PROCESS.replace(owner, values)
    weakref.finalize(obj, _PROCESS.release, owner)


def release_process_secrets(owner: Hashable) -> None:
    """``owner`` holds no secret any more; values no other owner holds stop being masked."""
    _PROCESS.release(owner)


class Redactor:
    """Masks secrets in text (see the module doc). ``known_secrets`` are exact values to mask
    wherever they occur; they are also held process-wide for as long as this redactor holds
    them (:func:`register_process_secrets`), so a log record or an error that passes through
    another redactor is masked too. :meth:`set_secrets` replaces what it holds (a runtime
    whose launch configuration changed), :meth:`release` lets go of everything, and so does
    the redactor's collection (``shared=False`` keeps the values to this redactor: for
    tests)."""

    def __init__(self, known_secrets: Iterable[object] = (), *, shared: bool = True) -> None:
        self._known = _KnownValues()
        self._shared = shared
        self._owner = ("redactor", next(_REDACTOR_IDS))
        if shared:
            weakref.finalize(self, _PROCESS.release, self._owner)
        for s in known_secrets:
            self.add_secret(s)

    def add_secret(self, value: object) -> None:
        """Register one more exact value (ignored when shorter than :data:`MIN_KNOWN_LENGTH`)."""
        (_PROCESS if self._shared else self._known).add(value, self._owner)

    def add_env(self, env: Mapping[str, str]) -> None:
        """Register the values of ``env``'s secret-looking variables."""
        for v in secret_env_values(env):
            self.add_secret(v)

    def set_secrets(self, values: Iterable[object]) -> None:
        """Hold exactly ``values`` from now on: values only this redactor held stop being
        masked process-wide (issue 35: the registry does not only grow)."""
        (_PROCESS if self._shared else self._known).replace(self._owner, values)

    def release(self) -> None:
        """Hold nothing any more (the runtime closed)."""
        self.set_secrets(())

    def __call__(self, text: str) -> str:
        if not text:
            return text
        text = _PROCESS.sub(text if self._shared else self._known.sub(text))
        low = text.lower() if text.isascii() else None
        if low is None or any(w in low for w in _HEADER_WORDS):
            text = _HEADER_LINE.sub(_mask, text)
        if (":" in text or "=" in text) and (low is None or any(w in low for w in _NAME_WORDS)):
            text = _NAMED.sub(_mask_named, text)
        if "://" in text and "@" in text:
            text = _URL_USERINFO.sub(_mask_userinfo, text)
        if low is None or any(w in low for w in _SCHEME_WORDS):
            text = _SCHEME.sub(_mask_scheme, text)
        if any(lit in text for lit in _SHAPE_LITERALS):
            text = _SHAPES.sub(REDACTED, text)
        return text

    def redact_obj(self, value: Any, *, by_key: bool = True) -> Any:
        """A copy of a JSON-able ``value`` with every string redacted and, with ``by_key``, the
        string values of secret-looking keys (``{"apiKey": "…"}``) replaced whole (for data a
        peer sent; codexrt's own details use ``by_key=False``: their ``interactionKey`` is an
        identifier, not a secret)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                key = self(k) if isinstance(k, str) else k
                if (by_key and isinstance(k, str) and isinstance(v, str) and v and v != REDACTED
                        and looks_secret_name(k)):
                    out[key] = REDACTED
                else:
                    out[key] = self.redact_obj(v, by_key=by_key)
            return out
        if isinstance(value, (list, tuple)):
            return [self.redact_obj(v, by_key=by_key) for v in value]
        return value

    def __repr__(self) -> str:  # never show the secrets themselves
        return f"<Redactor {self._owner[1]}>"


class LineRedactor:
    """Redacts a stream line by line, remembering a secret-looking name that ended the previous
    line (pretty-printed JSON or YAML with the value on the next line)."""

    def __init__(self, redactor: Redactor) -> None:
        self._redact = redactor
        self._pending = False

    def __call__(self, line: str) -> str:
        if self._pending and line.strip():
            self._pending = False
            m = _LEADING_VALUE.match(line)
            if m and REDACTED not in m.group(2):
                v = m.group(2)
                masked = f"{v[0]}{REDACTED}{v[-1]}" if v[:1] in ("\"", "'") and len(v) >= 2 else REDACTED
                line = m.group(1) + masked + line[m.end():]
        out = self._redact(line)
        # only a line ending in ":" or "=" (trailing blanks aside) can end with a dangling name
        m = _DANGLING_NAME.search(out[-_DANGLING_WINDOW:]) if out.rstrip().endswith((":", "=")) else None
        self._pending = bool(m and _secret_field(m.group(1)))
        return out


_DEFAULT = Redactor()


def process_redactor() -> Redactor:
    """A redactor with the patterns and every value registered in this process."""
    return _DEFAULT


# -- logging -------------------------------------------------------------------------------

#: Every logger codexrt and its CLI log to (a test checks the sources against this list).
CODEXRT_LOGGERS = (
    "codexrt", "codexrt.acp", "codexrt.blocking", "codexrt.connection", "codexrt.daemon", "codexrt.discovery",
    "codexrt.edits", "codexrt.helpers", "codexrt.history", "codexrt.launch", "codexrt.lines", "codexrt.run",
    "codexrt.reaper", "codexrt.runtime", "codexrt.serve", "codexrt.transport.ws",
)


class RedactingFilter(logging.Filter):
    """Redacts a log record in place: the formatted message (arguments merged in), the
    traceback text and the stack text. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        r = process_redactor()
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep the raw parts, redacted
            message = f"{record.msg!r} {record.args!r}"
        record.msg = r(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r(record.exc_text)
        if record.stack_info:
            record.stack_info = r(record.stack_info)
        return True


_FILTER = RedactingFilter()


def install_log_filter(target: logging.Logger | logging.Handler | None = None) -> None:
    """Attach the redacting filter to ``target`` (a logger or a handler), or, by default, to
    every logger of :data:`CODEXRT_LOGGERS`. Idempotent. A filter on a logger sees only the
    records logged on that very logger, which is why each one gets it."""
    targets = [target] if target is not None else [logging.getLogger(n) for n in CODEXRT_LOGGERS]
    for t in targets:
        if _FILTER not in t.filters:
            t.addFilter(_FILTER)
