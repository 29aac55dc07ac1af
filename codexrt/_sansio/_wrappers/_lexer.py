"""Tokens of the JavaScript subset a wrapper script is read in, and span helpers over them.

Stage 1 of the replay starts here. The tokenizer knows strings, template literals with nested
``${}``, comments, brackets, numbers and punctuation — no regex literals, no JS engine. Text it
cannot read (an unterminated string, a bad escape, unbalanced brackets) raises ``_Unresolved``
with ``source_unparseable``: the wrapper is kept. The helpers below work on a token list plus
its bracket map (``_brackets``): top-level splitting, literal values (anything computed is
``DYNAMIC``), the end of an expression, and the parameters and body of a callback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._model import DYNAMIC, KeepReason, _crlf, _Unresolved

@attrs.frozen
class _Tok:
    kind: str  # "id" | "num" | "str" | "tpl" | "p"
    value: Any  # id/p: text; num: number; str: decoded text; tpl: tuple[str | tuple[_Tok, ...]]
    pos: int


_PUNCTS = sorted(
    "=== !== ... **= <<= >>= >>> &&= ||= ??= => == != <= >= && || ?? ?. ++ -- += -= *= /= %= ** << >>".split(),
    key=len,
    reverse=True,
)
_ESC = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


class _Lexer:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0

    def error(self, msg: str) -> _Unresolved:
        return _Unresolved(KeepReason.SOURCE_UNPARSEABLE, f"{msg} at offset {self.i}")

    def escape(self) -> str:
        s, i = self.s, self.i
        c = s[i + 1] if i + 1 < len(s) else ""
        if c == "u":
            if s.startswith("{", i + 2):
                end = s.index("}", i + 3)
                self.i = end + 1
                return chr(int(s[i + 3 : end], 16))
            self.i = i + 6
            return chr(int(s[i + 2 : i + 6], 16))
        if c == "x":
            self.i = i + 4
            return chr(int(s[i + 2 : i + 4], 16))
        if c == "\n":
            self.i = i + 2
            return ""
        self.i = i + 2
        return _ESC.get(c, c)

    def escaped(self) -> str:
        """:meth:`escape`, an unreadable escape keeping the wrapper."""
        try:
            return self.escape()
        except (ValueError, IndexError):
            raise self.error("bad escape") from None

    def string(self, quote: str) -> _Tok:
        """A ``'…'`` / ``"…"`` literal starting at the current offset, decoded."""
        s = self.s
        start = self.i
        self.i += 1
        buf = []
        while True:
            if self.i >= len(s) or s[self.i] == "\n":
                raise self.error("unterminated string")
            ch = s[self.i]
            if ch == quote:
                self.i += 1
                break
            if ch == "\\":
                buf.append(self.escaped())
            else:
                buf.append(ch)
                self.i += 1
        return _Tok("str", "".join(buf), start)

    def tokens(self, *, until_brace: bool = False) -> list[_Tok]:
        s = self.s
        out: list[_Tok] = []
        depth = 0
        while self.i < len(s):
            c = s[self.i]
            if c.isspace():
                self.i += 1
            elif s.startswith("//", self.i):
                nl = s.find("\n", self.i)
                self.i = len(s) if nl < 0 else nl
            elif s.startswith("/*", self.i):
                end = s.find("*/", self.i + 2)
                if end < 0:
                    raise self.error("unterminated comment")
                self.i = end + 2
            elif c in "\"'":
                out.append(self.string(c))
            elif c == "`":
                out.append(self.template())
            elif c.isdigit() or (c == "." and self.i + 1 < len(s) and s[self.i + 1].isdigit()):
                m = re.compile(r"0[xX][0-9a-fA-F_]+|(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][+-]?\d+)?").match(s, self.i)
                assert m is not None
                txt = m.group(0).replace("_", "")
                val: Any = int(txt, 16) if txt[:2].lower() == "0x" else float(txt)
                if isinstance(val, float) and val.is_integer() and "." not in txt and "e" not in txt.lower():
                    val = int(val)
                out.append(_Tok("num", val, self.i))
                self.i = m.end()
            elif c.isalpha() or c in "_$":
                m = re.compile(r"[\w$]+").match(s, self.i)
                assert m is not None
                out.append(_Tok("id", m.group(0), self.i))
                self.i = m.end()
            else:
                if until_brace:
                    if c == "{":
                        depth += 1
                    elif c == "}":
                        if depth == 0:
                            self.i += 1
                            return out
                        depth -= 1
                for p in _PUNCTS:
                    if s.startswith(p, self.i):
                        out.append(_Tok("p", p, self.i))
                        self.i += len(p)
                        break
                else:
                    out.append(_Tok("p", c, self.i))
                    self.i += 1
        if until_brace:
            raise self.error("unterminated template substitution")
        return out

    def template(self) -> _Tok:
        s = self.s
        start = self.i
        self.i += 1
        parts: list[Any] = []
        buf: list[str] = []
        while True:
            if self.i >= len(s):
                raise self.error("unterminated template literal")
            ch = s[self.i]
            if ch == "`":
                self.i += 1
                break
            if ch == "\\":
                buf.append(self.escaped())
            elif s.startswith("${", self.i):
                parts.append("".join(buf))
                buf = []
                self.i += 2
                parts.append(tuple(self.tokens(until_brace=True)))
            else:
                buf.append(ch)
                self.i += 1
        parts.append("".join(buf))
        return _Tok("tpl", tuple(parts), start)


def _tokenize(src: str) -> list[_Tok]:
    return _Lexer(_crlf(src)).tokens()


_OPEN = {"(": ")", "[": "]", "{": "}"}


def _brackets(toks: Sequence[_Tok]) -> dict[int, int]:
    match: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.kind != "p":
            continue
        if t.value in _OPEN:
            stack.append(i)
        elif t.value in (")", "]", "}"):
            if not stack or _OPEN[toks[stack[-1]].value] != t.value:
                raise _Unresolved(KeepReason.SOURCE_UNPARSEABLE, f"unbalanced {t.value!r} at offset {t.pos}")
            match[stack.pop()] = i
    if stack:
        raise _Unresolved(KeepReason.SOURCE_UNPARSEABLE, "unbalanced brackets")
    return match


def _is(t: _Tok | None, kind: str, value: Any = None) -> bool:
    return t is not None and t.kind == kind and (value is None or t.value == value)


def _split_top(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int], sep: str = ",") -> list[tuple[int, int]]:
    """Split ``toks[lo:hi]`` at top-level ``sep``; empty trailing element dropped."""
    spans: list[tuple[int, int]] = []
    i = start = lo
    while i < hi:
        t = toks[i]
        if t.kind == "p" and t.value in _OPEN:
            i = match[i] + 1
            continue
        if t.kind == "p" and t.value == sep:
            spans.append((start, i))
            start = i + 1
        i += 1
    if start < hi:
        spans.append((start, hi))
    return spans


def _tok_text(toks: Sequence[_Tok]) -> str:
    def one(t: _Tok) -> str:
        if t.kind == "str":
            return json.dumps(t.value)
        if t.kind == "tpl":
            return "`" + "".join(p if isinstance(p, str) else "${" + _tok_text(p) + "}" for p in t.value) + "`"
        return str(t.value)

    out = ""
    for t in toks:
        s = one(t)
        if out and (out[-1].isalnum() or out[-1] in "_$") and (s[0].isalnum() or s[0] in "_$"):
            out += " "
        out += s
    return out


def _literal(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int]) -> Any:
    """The static value of the expression ``toks[lo:hi]``, or DYNAMIC."""
    if hi - lo == 2 and _is(toks[lo], "p", "-") and toks[lo + 1].kind == "num":
        return -toks[lo + 1].value
    if hi - lo == 1:
        t = toks[lo]
        if t.kind in ("str", "num"):
            return t.value
        if t.kind == "tpl":
            return t.value[0] if len(t.value) == 1 else DYNAMIC
        if t.kind == "id" and t.value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[t.value]
        return DYNAMIC
    t = toks[lo]
    if t.kind == "p" and t.value in ("[", "{") and match.get(lo) == hi - 1:
        inner = _split_top(toks, lo + 1, hi - 1, match)
        if t.value == "[":
            return [_literal(toks, a, b, match) for a, b in inner]
        obj: dict[str, Any] = {}
        for a, b in inner:
            k = toks[a]
            if b - a >= 3 and k.kind in ("id", "str", "num") and _is(toks[a + 1], "p", ":"):
                obj[str(k.value)] = _literal(toks, a + 2, b, match)
            else:
                return DYNAMIC
        return obj
    return DYNAMIC


def _has_dynamic(v: Any) -> bool:
    if v is DYNAMIC:
        return True
    if isinstance(v, list):
        return any(_has_dynamic(x) for x in v)
    if isinstance(v, dict):
        return any(_has_dynamic(x) for x in v.values())
    return False


def _expr_end(toks: Sequence[_Tok], i: int, match: Mapping[int, int], *, stop_semicolon: bool = True) -> int:
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.kind == "p":
            if t.value in _OPEN:
                i = match[i] + 1
                continue
            if t.value in (")", "]", "}", ","):
                return i
            if t.value == ";" and stop_semicolon:
                return i
        i += 1
    return n



def _callback(toks: Sequence[_Tok], i: int, match: Mapping[int, int]) -> tuple[list[str], int, int] | None:
    """Parse ``(a, b) => body`` / ``a => body`` / ``function (a, b) {body}`` at ``i``:
    (params, body lo, body hi)."""
    n = len(toks)
    params: list[str] = []
    if i < n and _is(toks[i], "id", "function"):
        i += 1
        if i < n and toks[i].kind == "id":
            i += 1
        if i >= n or not _is(toks[i], "p", "("):
            return None
        rp = match[i]
        params = [toks[a].value for a, b in _split_top(toks, i + 1, rp, match) if b - a == 1 and toks[a].kind == "id"]
        if rp + 1 < n and _is(toks[rp + 1], "p", "{"):
            return params, rp + 2, match[rp + 1]
        return None
    if i < n and _is(toks[i], "id", "async"):
        i += 1
    if i < n and toks[i].kind == "id" and i + 1 < n and _is(toks[i + 1], "p", "=>"):
        params, arrow = [toks[i].value], i + 1
    elif i < n and _is(toks[i], "p", "("):
        rp = match[i]
        params = [toks[a].value for a, b in _split_top(toks, i + 1, rp, match) if b - a == 1 and toks[a].kind == "id"]
        arrow = rp + 1
        if arrow >= n or not _is(toks[arrow], "p", "=>"):
            return None
    else:
        return None
    j = arrow + 1
    if j < n and _is(toks[j], "p", "{"):
        return params, j + 1, match[j]
    return params, j, _expr_end(toks, j, match)
