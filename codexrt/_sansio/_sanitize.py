"""Give a user message back its own text (R-CTX-5, R-H-4).

Why this exists: several clients put machinery into the *text* of the user's message, and the
text is what lands in native history and in the rollout file. A history display that shows it
verbatim shows the user something they never typed. The forms handled here, all observed in
real transcripts:

* the official IDE text convention (our own fallback, R-CTX-4)::

      # Context from my IDE setup:
      ## Active file: src/pay.ts
      ...
      ## My request for Codex:
      <the user's text>

* the desktop attachment wrapper — same shape, other header, file list as ``## name: path``::

      # Files mentioned by the user:
      ## shot.png: /tmp/codex-clipboard-1.png
      ## My request for Codex:
      <the user's text>

  The mentioned files are not thrown away: they come back as :class:`FileMention` values, so a
  display can still show "ordinary file references" next to the real task.
* the older *appended* form, where the context section trails the user's text
  (``<text>\\n\\n# Context from my IDE setup:\\n...`` with no request marker after it). This
  form is not documented anywhere we could read; we strip it only in exactly that shape: the
  header at the start of a line, after some user text, and no ``## My request for Codex:``
  after it. Anything else is left alone — a false strip would hide the user's own words.
* the internal ``<external_codex_apps_open_page>…</external_codex_apps_open_page>`` tag the
  desktop app injects (removed wherever it appears in the message).

Rules: this is for **user** messages only; the projection never calls it on assistant text
(an assistant may legitimately quote the wrapper). Images are not text and are never touched
here — the projection keeps them beside the sanitized text. Pure functions, no I/O.
"""

from __future__ import annotations

import re

import attrs

__all__ = [
    "IDE_CONTEXT_HEADER",
    "FILES_MENTIONED_HEADER",
    "REQUEST_MARKER",
    "APPS_OPEN_PAGE_TAG",
    "FileMention",
    "SanitizedUserText",
    "may_hold_wrapper",
    "sanitize_user_text",
]

IDE_CONTEXT_HEADER = "# Context from my IDE setup:"
FILES_MENTIONED_HEADER = "# Files mentioned by the user:"
REQUEST_MARKER = "## My request for Codex:"
APPS_OPEN_PAGE_TAG = "external_codex_apps_open_page"

_WRAPPER_HEADERS = (IDE_CONTEXT_HEADER, FILES_MENTIONED_HEADER)
# The request marker must start a line; the user's text begins on the next line (or right
# after the colon when a client put it on the same line).
_MARKER_RE = re.compile(r"(?m)^" + re.escape(REQUEST_MARKER) + r"[ \t]*(?:\r?\n)?")
_APPS_TAG_RE = re.compile(
    r"<" + APPS_OPEN_PAGE_TAG + r"(?:\s[^>]*)?>.*?</" + APPS_OPEN_PAGE_TAG + r"\s*>", re.S
)
_APPENDED_RE = re.compile(r"(?:\r?\n)[ \t]*" + re.escape(IDE_CONTEXT_HEADER))
_MENTION_RE = re.compile(r"^## (?P<name>[^\n]+?): (?P<path>[^\n]+?)[ \t]*$")


@attrs.frozen
class FileMention:
    """One ``## name: path`` line of the desktop attachment wrapper."""

    name: str
    path: str


@attrs.frozen
class SanitizedUserText:
    """The user's own text plus what was taken out.

    ``stripped`` names the wrappers removed, in the order found: ``"apps_open_page"``,
    ``"ide_context"``, ``"files_mentioned"``, ``"appended_ide_context"``. Empty when the text
    was already clean (then ``text`` is the input, unchanged).
    """

    text: str
    file_mentions: tuple[FileMention, ...] = ()
    stripped: tuple[str, ...] = ()


def _strip_leading_wrapper(
    text: str, stripped: list[str], mentions: list[FileMention]
) -> str:
    lead = text.lstrip()
    header = next((h for h in _WRAPPER_HEADERS if lead.startswith(h)), None)
    if header is None:
        return text
    m = _MARKER_RE.search(lead)
    if m is None:
        # A header without the request marker: not the convention we know; leave it.
        return text
    preamble = lead[: m.start()]
    for line in preamble.splitlines():
        line = line.strip()
        if line == FILES_MENTIONED_HEADER:
            if "files_mentioned" not in stripped:
                stripped.append("files_mentioned")
        elif line == IDE_CONTEXT_HEADER:
            if "ide_context" not in stripped:
                stripped.append("ide_context")
    if FILES_MENTIONED_HEADER in preamble:
        # Only the lines of the files section are mentions (an IDE section may follow it).
        section = preamble.split(FILES_MENTIONED_HEADER, 1)[1]
        section = section.split(IDE_CONTEXT_HEADER, 1)[0]
        for line in section.splitlines():
            mm = _MENTION_RE.match(line.strip())
            if mm:
                mentions.append(FileMention(name=mm["name"], path=mm["path"]))
    return lead[m.end() :]


def may_hold_wrapper(text: str) -> bool:
    """False when no wrapper :func:`sanitize_user_text` strips can be in ``text`` (it then
    returns the text as it is): most messages (issue 34)."""
    return IDE_CONTEXT_HEADER in text or FILES_MENTIONED_HEADER in text or APPS_OPEN_PAGE_TAG in text


def sanitize_user_text(text: str) -> SanitizedUserText:
    """Strip client wrappers from a **user** message's text (R-CTX-5, R-H-4).

    Never call this on assistant text. Returns the input unchanged (``stripped == ()``) when
    no known wrapper is present.
    """
    if not may_hold_wrapper(text):
        return SanitizedUserText(text=text)  # no wrapper can match: most messages (issue 34)
    stripped: list[str] = []
    mentions: list[FileMention] = []
    out = text
    if APPS_OPEN_PAGE_TAG in out:
        new = _APPS_TAG_RE.sub("", out)
        if new != out:
            stripped.append("apps_open_page")
            out = new
    new = _strip_leading_wrapper(out, stripped, mentions)
    if new is not out:
        out = new
    else:
        m = _APPENDED_RE.search(out)
        if m is not None and out[: m.start()].strip() and not _MARKER_RE.search(out, m.end()):
            stripped.append("appended_ide_context")
            out = out[: m.start()]
    if not stripped:
        return SanitizedUserText(text=text)
    return SanitizedUserText(text=out.strip(), file_mentions=tuple(mentions), stripped=tuple(stripped))
