"""Redaction of secrets in text that may reach logs, events or error details (R-WIRE-9).

What is masked: API keys (``sk-…``), bearer tokens, ``Authorization``/``Cookie`` header values,
values assigned to names like ``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*`` (``NAME=v``,
``NAME: v``, ``"name": "v"``), and any exact secret value the caller knows (e.g. the credential
passed to the child by ``env_key``). Redaction is line-based and idempotent.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["Redactor", "REDACTED"]

REDACTED = "[REDACTED]"

_SECRET_NAME = r"[A-Za-z0-9_\-]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Za-z0-9_\-]*"
_PATTERNS = [
    # Authorization: Bearer xyz / Authorization: Basic xyz / Cookie: …
    re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key)(\s*[:=]\s*)([^\r\n]+)"),
    re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9\-._~+/]+=*)"),
    # NAME=value, NAME: value, "name": "value" for secret-looking names
    re.compile(r"(?i)(\"?\b" + _SECRET_NAME + r"\"?)(\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;}&]+)"),
    # bare OpenAI-style keys
    re.compile(r"()()\b(sk-[A-Za-z0-9_\-]{6,})"),
]


class Redactor:
    """Masks secrets in text. ``known_secrets`` are exact values to mask wherever they occur
    (values shorter than 6 characters are ignored: masking them would mangle ordinary text)."""

    def __init__(self, known_secrets: Iterable[str] = ()) -> None:
        self._known = sorted({s for s in known_secrets if s and len(s) >= 6}, key=len, reverse=True)

    def add_secret(self, value: str | None) -> None:
        if value and len(value) >= 6 and value not in self._known:
            self._known.append(value)
            self._known.sort(key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._known:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pat in _PATTERNS:
            text = pat.sub(_mask, text)
        return text

    def __repr__(self) -> str:  # never show the secrets themselves
        return f"<Redactor known={len(self._known)}>"


def _mask(m: re.Match[str]) -> str:
    value = m.group(3)
    if value.startswith(("\"", "'")) and len(value) >= 2:
        return f"{m.group(1)}{m.group(2)}{value[0]}{REDACTED}{value[-1]}"
    if value == REDACTED:
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{REDACTED}"
