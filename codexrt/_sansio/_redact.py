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
  secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``/``PASSWD``/``PASSPHRASE``,
  ``*CREDENTIAL*``, ``*_PAT``, an ``AUTH`` word), and the whole value of ``Authorization``,
  ``Proxy-Authorization``, ``Cookie``, ``Set-Cookie`` and ``X-Api-Key`` headers.
* **schemes and shapes** — ``Bearer …``/``Basic …`` credentials, URL userinfo
  (``https://user:pass@host`` → ``https://[REDACTED]@host``), and well-known key shapes:
  OpenAI/Anthropic ``sk-…``/``sk-proj-…``, GitHub ``ghp_…``/``gho_…``/``ghu_…``/``ghs_…``/
  ``ghr_…``/``github_pat_…``, GitLab ``glpat-…``, Slack ``xox?-…``, AWS ``AKIA…``/``ASIA…``,
  Google ``AIza…``, Hugging Face ``hf_…`` and JWTs (``eyJ….eyJ….…``).

Known values registered anywhere in the process are also masked by every other
:class:`Redactor` and by the log filter (:class:`RedactingFilter`): masking more is never a
leak. Redaction is idempotent. Run it **before** any truncation: cutting first can leave a
key's prefix that no rule recognises any more.

What is not masked: a secret of unknown shape that was never registered and is not named; a
known value under 8 characters that appears bare; a multi-line value split by a consumer that
redacts line by line (:class:`LineRedactor` handles a name on one line and its value on the
next).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import urllib.parse
from typing import Any, Iterable, Mapping

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
    "process_redactor",
    "install_log_filter",
]

REDACTED = "[REDACTED]"

#: Known values shorter than this are only masked where they are named (see the module doc).
MIN_KNOWN_LENGTH = 8

# -- names ---------------------------------------------------------------------------------

_NAME_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
#: Names that match the words but never hold a secret (paths to sockets and the like).
_NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KEYBOARD", "XKB_DEFAULT_LAYOUT"})


def looks_secret_name(name: str) -> bool:
    """True for an environment variable or field name whose value is treated as secret:
    it contains ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``PASSWD``, ``PASSPHRASE`` or
    ``CREDENTIAL``, ends in ``_PAT``, or has ``AUTH``/``AUTHORIZATION`` as one of its
    ``_``/``-`` separated words (``GIT_AUTHOR_NAME`` does not). Case-insensitive."""
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    if any(w in upper for w in _NAME_WORDS):
        return True
    words = re.split(r"[_\-.]", upper)
    return words[-1] == "PAT" and len(words) > 1 or any(w in ("AUTH", "AUTHORIZATION") for w in words)


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
_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_\-]{6,}+"
    r"|gh[pousr]_[A-Za-z0-9]{16,}+|github_pat_[A-Za-z0-9_]{16,}+"
    r"|glpat-[A-Za-z0-9_\-]{16,}+"
    r"|xox[abposr]-[A-Za-z0-9\-]{8,}+"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"
    r"|AIza[0-9A-Za-z_\-]{30,}+"
    r"|hf_[A-Za-z0-9]{20,}+"
    r"|eyJ[A-Za-z0-9_\-]{4,}+\.eyJ[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]*+)"
)
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


class _KnownValues:
    """A set of exact values with one compiled alternation (longest first)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._regex: re.Pattern[str] | None = None
        self._lock = threading.Lock()  # the log filter may run on any thread

    def add(self, value: object) -> bool:
        if not isinstance(value, str) or len(value.strip()) < MIN_KNOWN_LENGTH:
            return False
        new = _variants(value) - self._values
        if new:
            with self._lock:
                self._values |= new
                self._regex = None
        return True

    def __len__(self) -> int:
        return len(self._values)

    def sub(self, text: str) -> str:
        if not self._values:
            return text
        regex = self._regex
        if regex is None:
            with self._lock:
                ordered = sorted(self._values, key=len, reverse=True)
                regex = self._regex = re.compile("|".join(map(re.escape, ordered)))
        return regex.sub(REDACTED, text)


_PROCESS = _KnownValues()


def register_process_secrets(values: Iterable[object]) -> None:
    """Make ``values`` known to every :class:`Redactor` and to the log filter of this process."""
    for v in values:
        _PROCESS.add(v)


class Redactor:
    """Masks secrets in text (see the module doc). ``known_secrets`` are exact values to mask
    wherever they occur; they are also registered process-wide (:func:`register_process_secrets`),
    so a log record or an error that passes through another redactor is masked too
    (``shared=False`` keeps them to this redactor: for tests)."""

    def __init__(self, known_secrets: Iterable[object] = (), *, shared: bool = True) -> None:
        self._known = _KnownValues()
        self._shared = shared
        for s in known_secrets:
            self.add_secret(s)

    def add_secret(self, value: object) -> None:
        """Register one more exact value (ignored when shorter than :data:`MIN_KNOWN_LENGTH`)."""
        if self._known.add(value) and self._shared:
            _PROCESS.add(value)

    def add_env(self, env: Mapping[str, str]) -> None:
        """Register the values of ``env``'s secret-looking variables."""
        for v in secret_env_values(env):
            self.add_secret(v)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        text = _PROCESS.sub(self._known.sub(text))
        text = _HEADER_LINE.sub(_mask, text)
        text = _NAMED.sub(_mask_named, text)
        text = _URL_USERINFO.sub(_mask_userinfo, text)
        text = _SCHEME.sub(_mask_scheme, text)
        return _SHAPES.sub(REDACTED, text)

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
        return f"<Redactor known={len(self._known)}>"


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
        m = _DANGLING_NAME.search(out[-_DANGLING_WINDOW:])
        self._pending = bool(m and _secret_field(m.group(1)))
        return out


_DEFAULT = Redactor()


def process_redactor() -> Redactor:
    """A redactor with the patterns and every value registered in this process."""
    return _DEFAULT


# -- logging -------------------------------------------------------------------------------

#: Every logger codexrt and its CLI log to (a test checks the sources against this list).
CODEXRT_LOGGERS = (
    "codexrt", "codexrt.blocking", "codexrt.connection", "codexrt.daemon", "codexrt.discovery",
    "codexrt.edits", "codexrt.helpers", "codexrt.history", "codexrt.launch", "codexrt.run",
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
