"""Stage 1 of the replay: the static model of a wrapper script.

Finds every ``tools.NAME(...)`` call (name, literal arguments, token span) and every
``Promise.all([...])`` / ``Promise.allSettled([...])`` batch with its element slots. A call
inside a loop or callback, a dynamic tool name, or the ``tools`` object reached through an alias
makes the call's multiplicity unknown: ``_Unresolved`` is raised and the wrapper is kept — but a
command call in ``for (const V of [literals])`` whose body cannot skip or repeat it is unrolled
into one call per element (``_unrolled``). After
a batch, its array variable may only be *read* (``_check_not_rebound``), so a slot index
printed later still names the element ``Promise.all`` returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ._lexer import (
    _brackets,
    _callback,
    _expr_end,
    _has_dynamic,
    _is,
    _literal,
    _split_top,
    _Tok,
    _tok_text,
    _tokenize,
)
from ._model import _PRINT_FUNCS, COMMAND_TOOLS, KNOWN_TOOLS, KeepReason, _Unresolved


@attrs.define
class _SrcCall:
    index: int  # order in source, counting tool calls only
    tool: str
    args: Any  # static literal (dict / str) or DYNAMIC parts inside
    lo: int  # token span of the whole call expression
    hi: int
    batch: int | None = None
    slot: int | None = None
    target: int | None = None  # write_stdin: the call whose result's session_id it names


@attrs.define
class _Batch:
    number: int
    settled: bool
    var: str | None
    entries: list[tuple[str, Any]]  # ("call", _SrcCall) | ("internal", expression text)
    end: int = -1  # token index of the closing ``)`` of ``Promise.all(...)``


@attrs.define
class _Source:
    """The static scan of one script: its tool calls and batches, and the tokens (with their
    bracket map) that the print plans are read from."""

    calls: list[_SrcCall]
    batches: list[_Batch]
    toks: list[_Tok]
    match: dict[int, int]


def _scopes(toks: Sequence[_Tok], match: Mapping[int, int]) -> list[tuple[int, int]]:
    """Token spans of bodies that may run zero or many times: arrow and function bodies,
    loop bodies."""
    spans: list[tuple[int, int]] = []
    n = len(toks)
    for i, t in enumerate(toks):
        if _is(t, "p", "=>"):
            j = i + 1
            if j < n and _is(toks[j], "p", "{"):
                spans.append((j, match[j]))
            else:
                spans.append((j, _expr_end(toks, j, match)))
        elif t.kind == "id" and t.value in ("function", "for", "while", "do"):
            j = i + 1
            while j < n and not _is(toks[j], "p", "(") and not _is(toks[j], "p", "{"):
                j += 1
            if j < n and _is(toks[j], "p", "(") and t.value != "do":
                head_end = match[j]
                if t.value in ("for", "while"):
                    spans.append((j, head_end))  # loop head runs repeatedly too
                j = head_end + 1
            if j < n and _is(toks[j], "p", "{"):
                spans.append((j, match[j]))
            elif j < n:
                spans.append((j, _expr_end(toks, j, match, stop_semicolon=True)))
    return spans


#: names through which code can reach a binding, or change what a print shows, without naming
#: it (R-H-5: never certain)
_REFLECTIVE = frozenset({"eval", "Function", "toJSON", "prototype", "__proto__", "setPrototypeOf",
                         "defineProperty", "defineProperties"})


def _ends_expression(toks: Sequence[_Tok], k: int) -> bool:
    """Whether the expression before token ``k`` ends there: ``k`` is past the end, or ``;``,
    ``}``, or a name starting the next statement (automatic semicolon). Anything else — ``.then(…)``,
    ``.catch(…)``, ``||``, ``?.``, an index — makes the bound value something other than the
    awaited call's result (issue 32 review)."""
    if k >= len(toks):
        return True
    t = toks[k]
    return _is(t, "p", ";") or _is(t, "p", "}") or (t.kind == "id" and t.value not in ("in", "instanceof", "of"))


def _reflective(toks: Sequence[_Tok]) -> bool:
    """Whether the script uses ``eval`` / ``Function`` / prototypes / ``toJSON``: then a
    binding, or what ``JSON.stringify`` prints, may change unseen; as does a script that binds
    ``JSON`` or a print function itself (``const text = …``, ``JSON.stringify = …``)."""
    for i, t in enumerate(toks):
        if t.kind == "id" and t.value in _REFLECTIVE:
            return True
        if t.kind == "id" and (t.value == "JSON" or t.value in _PRINT_FUNCS) and i + 1 < len(toks):
            nxt = toks[i + 1]
            if nxt.kind == "p" and nxt.value in _ASSIGN or (i and _is(toks[i - 1], "id", "const")) or (
                    i and toks[i - 1].kind == "id" and toks[i - 1].value in ("let", "var", "function", "class")):
                return True
        if _is(t, "id", "stringify") and i >= 2 and _is(toks[i - 1], "p", ".") and i + 1 < len(toks) and (
                toks[i + 1].kind == "p" and toks[i + 1].value in _ASSIGN):
            return True
    return False


def _call_at(toks: Sequence[_Tok], i: int, match: Mapping[int, int]) -> tuple[str, int, int] | None:
    """If a tool call starts at token ``i``: (tool name, index of "(", index of ")")."""
    t = toks[i]
    n = len(toks)
    if _is(t, "id", "tools"):
        if i + 3 < n and _is(toks[i + 1], "p", ".") and toks[i + 2].kind == "id" and _is(toks[i + 3], "p", "("):
            return toks[i + 2].value, i + 3, match[i + 3]
        if (
            i + 4 < n
            and _is(toks[i + 1], "p", "[")
            and toks[i + 2].kind == "str"
            and _is(toks[i + 3], "p", "]")
            and _is(toks[i + 4], "p", "(")
        ):
            return toks[i + 2].value, i + 4, match[i + 4]
        return None
    if t.kind == "id" and t.value in KNOWN_TOOLS and i + 1 < n and _is(toks[i + 1], "p", "("):
        prev = toks[i - 1] if i else None
        if prev is not None and (_is(prev, "p", ".") or _is(prev, "id", "function")):
            return None
        return t.value, i + 1, match[i + 1]
    return None


def _scan_source(src: str) -> _Source:
    """Stage 1 (static source scan): the tool calls and ``Promise.all`` batches of ``src``.
    Raises ``_Unresolved`` for anything that makes a call's multiplicity or input unknowable."""
    toks = _tokenize(src)
    match = _brackets(toks)
    for t in toks:
        if t.kind == "tpl" and any(not isinstance(p, str) and any(_is(x, "id", "tools") for x in p) for p in t.value):
            raise _Unresolved(KeepReason.DYNAMIC_TOOL, "tools used inside a template substitution")
    calls = _tool_calls(toks, match)
    _stdin_targets(toks, calls)
    batches = _batches(toks, match, calls)
    for bt in batches:
        if bt.var is not None:
            _check_not_rebound(toks, match, bt)
    return _Source(calls, batches, toks, match)


def _tool_calls(toks: Sequence[_Tok], match: Mapping[int, int]) -> list[_SrcCall]:
    """Every ``tools.NAME(...)`` call, in source order, with its static arguments; the
    ``tools`` object used any other way keeps the wrapper."""
    scopes = _scopes(toks, match)
    calls: list[_SrcCall] = []
    used_tools_tokens: set[int] = set()
    for i in range(len(toks)):
        found = _call_at(toks, i, match)
        if found is None:
            continue
        name, lp, rp = found
        if name not in KNOWN_TOOLS:
            raise _Unresolved(KeepReason.UNKNOWN_TOOL, f"tool {name!r} has no individual record form")
        if any(a <= i <= b for a, b in scopes):
            unrolled = _unrolled(toks, match, scopes, i, name, lp, rp)
            if unrolled is None:
                raise _Unresolved(
                    KeepReason.DYNAMIC_MULTIPLICITY, f"{name} call inside a loop or callback may run any number of times"
                )
            for run_args in unrolled:
                calls.append(_SrcCall(len(calls), name, run_args, i, rp + 1))
            used_tools_tokens.add(i)
            continue
        argspans = _split_top(toks, lp + 1, rp, match)
        args: Any = {} if not argspans else _literal(toks, argspans[0][0], argspans[0][1], match)
        if name == "apply_patch" and isinstance(args, dict) and set(args) <= {"input", "patch"} and args:
            args = next(iter(args.values()))
        calls.append(_SrcCall(len(calls), name, args, i, rp + 1))
        used_tools_tokens.add(i)
    for i, t in enumerate(toks):
        if _is(t, "id", "tools") and i not in used_tools_tokens:
            prev = toks[i - 1] if i else None
            if not _is(prev, "p", "."):
                raise _Unresolved(KeepReason.DYNAMIC_TOOL, "the tools object is used other than as a direct call")
    return calls


def _stdin_targets(toks: Sequence[_Tok], calls: Sequence[_SrcCall]) -> None:
    """``const V = await tools.exec_command(…);`` then ``tools.write_stdin({session_id:
    V.session_id, …})``: the poll targets that call's process (issue 32) — ``V`` is declared
    once (``const``), bound to exactly that call's result (the call ends the expression), and
    used nowhere but in such ``session_id: V.session_id`` targets or as a printed
    ``text(V.NAME)``, so nothing can have changed its ``session_id`` (no
    ``Object.assign``, alias, shadowing block, ``eval``)."""
    if _reflective(toks):
        return
    bound: dict[str, _SrcCall] = {}
    for c in calls:
        i = c.lo
        if (c.batch is None and c.tool in COMMAND_TOOLS and i >= 4 and _is(toks[i - 1], "id", "await")
                and _is(toks[i - 2], "p", "=") and toks[i - 3].kind == "id" and _is(toks[i - 4], "id", "const")
                and _ends_expression(toks, c.hi)):
            bound.setdefault(toks[i - 3].value, c)
    targets: dict[int, tuple[_SrcCall, str]] = {}  # token index of V in `session_id: V.session_id`
    for c in calls:
        if c.tool != "write_stdin" or not isinstance(c.args, dict):
            continue
        for k in range(c.lo, c.hi - 4):
            if (_is(toks[k], "id", "session_id") and _is(toks[k + 1], "p", ":") and toks[k + 2].kind == "id"
                    and _is(toks[k + 3], "p", ".") and _is(toks[k + 4], "id", "session_id")
                    and (_is(toks[k + 5], "p", ",") or _is(toks[k + 5], "p", "}"))):  # the value itself
                targets[k + 2] = (c, toks[k + 2].value)
                break
    for k, (c, var) in targets.items():
        src = bound.get(var)
        if src is None or src.index >= c.index:
            continue
        decl = src.lo - 3
        uses = [j for j, t in enumerate(toks)
                if _is(t, "id", var) and not (j and (_is(toks[j - 1], "p", ".") or _is(toks[j - 1], "p", "?.")))]
        if all(j == decl or j in targets or _printed_member(toks, j) for j in uses) and not _in_template(toks, var):
            c.target = src.index


def _printed_member(toks: Sequence[_Tok], j: int) -> bool:
    """``text(V.NAME)``: a read of one member as the whole print argument."""
    return (j >= 2 and _is(toks[j - 1], "p", "(") and toks[j - 2].kind == "id" and toks[j - 2].value in _PRINT_FUNCS
            and j + 3 < len(toks) and _is(toks[j + 1], "p", ".") and toks[j + 2].kind == "id"
            and _is(toks[j + 3], "p", ")"))


def _in_template(toks: Sequence[_Tok], var: str) -> bool:
    """Whether ``var`` is named inside a template substitution."""
    for t in toks:
        if t.kind == "tpl":
            for part in t.value:
                if not isinstance(part, str) and (any(_is(x, "id", var) for x in part) or _in_template(list(part), var)):
                    return True
    return False


#: what may not appear in an unrolled loop's body: anything that could skip or repeat its call
_NO_UNROLL_IDS = frozenset({"break", "continue", "return", "throw", "if", "else", "switch", "case", "try", "catch",
                            "finally", "while", "do", "for", "function", "yield", "eval", "tools"})
_NO_UNROLL_PUNCTS = frozenset({"?", "?.", "&&", "||", "??", "&&=", "||=", "??=", "=>"})


def _unrolled(toks: Sequence[_Tok], match: Mapping[int, int], scopes: Sequence[tuple[int, int]], i: int, name: str,
              lp: int, rp: int) -> list[Any] | None:
    """The arguments of each run of a command call in ``for (const V of [literals]) { … }``
    (issue 32): one per element, in order, when the loop body holds that one call (``tools``
    used nowhere else in it) and nothing that could skip or repeat it, and ``V`` appears in the
    call's arguments only as a whole value. None otherwise (the call's multiplicity is unknown)."""
    if name not in COMMAND_TOOLS:
        return None
    inside = [(a, b) for a, b in scopes if a <= i <= b]
    if len(inside) != 1:
        return None
    a, b = inside[0]
    if not (_is(toks[a], "p", "{") and a >= 1 and _is(toks[a - 1], "p", ")")):
        return None
    head = next((k for k, v in match.items() if v == a - 1), None)
    if head is None or head < 1 or not _is(toks[head - 1], "id", "for") or head + 4 >= a - 1:
        return None
    if not (_is(toks[head + 1], "id", "const") and toks[head + 2].kind == "id" and _is(toks[head + 3], "id", "of")
            and _is(toks[head + 4], "p", "[") and match.get(head + 4) == a - 2):
        return None
    var = toks[head + 2].value
    values = _literal(toks, head + 4, a - 1, match)
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        return None
    for k in range(a + 1, b):
        t = toks[k]
        if t.kind == "tpl" or (t.kind == "id" and t.value in _NO_UNROLL_IDS and k != i) or (
                t.kind == "p" and t.value in _NO_UNROLL_PUNCTS):
            return None
    argspans = _split_top(toks, lp + 1, rp, match)
    if len(argspans) != 1:
        return None
    lo, hi = argspans[0]
    if _reflective(toks) or any(_is(toks[k], "id", var) and not lo <= k < hi for k in range(a + 1, b)):
        return None  # named elsewhere in the body: it may be shadowed, redeclared or assigned
    uses = [k for k in range(lo, hi) if _is(toks[k], "id", var)]
    if not uses or any(not (_is(toks[k - 1], "p", ":") and (_is(toks[k + 1], "p", ",") or _is(toks[k + 1], "p", "}")))
                       for k in uses):
        return None
    out = []
    for v in values:
        sub = list(toks)
        for k in uses:
            sub[k] = _Tok("str", v, toks[k].pos)
        args = _literal(sub, lo, hi, match)
        if not isinstance(args, dict) or _has_dynamic(args):
            return None
        out.append(args)
    return out


def _batches(toks: Sequence[_Tok], match: Mapping[int, int], calls: Sequence[_SrcCall]) -> list[_Batch]:
    """``Promise.all([...])`` / ``Promise.allSettled([...])`` over an array literal: its slots
    (a tool call, or an internal orchestration entry) and the variable it is assigned to."""
    by_start = {c.lo: c for c in calls}
    batches: list[_Batch] = []
    for i in range(len(toks) - 4):
        if not (
            _is(toks[i], "id", "Promise")
            and _is(toks[i + 1], "p", ".")
            and toks[i + 2].kind == "id"
            and toks[i + 2].value in ("all", "allSettled")
            and _is(toks[i + 3], "p", "(")
        ):
            continue
        rp = match[i + 3]
        if not (_is(toks[i + 4], "p", "[") and match[i + 4] == rp - 1):
            continue  # not an array literal: its calls are in callbacks and already refused
        entries: list[tuple[str, Any]] = []
        number = len(batches)
        for slot, (a, b) in enumerate(_split_top(toks, i + 5, rp - 1, match)):
            call = by_start.get(a)
            if call is not None and call.hi == b:
                call.batch, call.slot = number, slot
                entries.append(("call", call))
            elif any(a <= c.lo < b for c in calls):
                raise _Unresolved(KeepReason.DYNAMIC_INPUT, f"batch entry {slot} wraps a tool call in an expression")
            else:
                entries.append(("internal", _tok_text(toks[a:b])))
        var = None
        j = i - 1
        if j >= 0 and _is(toks[j], "id", "await"):
            j -= 1
        if j >= 1 and _is(toks[j], "p", "=") and toks[j - 1].kind == "id" and _ends_expression(toks, rp + 1):
            var = toks[j - 1].value  # not ``Promise.all([…]).then(…)``: that value is not the array
        batches.append(_Batch(number, toks[i + 2].value == "allSettled", var, entries, rp))
    return batches


_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", "&&=", "||=", "??=", "++", "--"})


def _check_not_rebound(toks: Sequence[_Tok], match: Mapping[int, int], batch: _Batch) -> None:
    """R-H-5: a label or envelope printed from a batch variable names its slot only while
    the array is the one ``Promise.all`` returned. After the batch, every use of the
    variable must be a read that cannot reorder, replace or alias it: ``V.forEach`` /
    ``V.map`` (callback without the array parameter), ``V.length``, ``V[k]`` reads,
    ``JSON.stringify(V)``, ``for (… of V)`` or a bare print. Anything else — ``reverse()``,
    ``sort()``, ``push()``, an assignment to ``V``, ``V[k]`` or ``V.length``, a
    destructuring target, passing ``V`` on — keeps the wrapper (``array_rebound``)."""
    var = batch.var

    def scan(ts: Sequence[_Tok], m: Mapping[int, int], start: int) -> None:
        spans = [(a, b) for a, b in m.items() if ts[a].value in ("[", "{")]
        for i in range(start, len(ts)):
            t = ts[i]
            if t.kind == "tpl":
                for part in t.value:
                    if not isinstance(part, str):
                        sub = list(part)
                        scan(sub, _brackets(sub), 0)
                continue
            if not _is(t, "id", var):
                continue
            prev = ts[i - 1] if i else None
            if prev is not None and (_is(prev, "p", ".") or _is(prev, "p", "?.")):
                continue  # a property name, not the variable
            if not _safe_use(ts, m, i, spans):
                raise _Unresolved(KeepReason.ARRAY_REBOUND,
                                  f"batch array {var!r} may be reordered, replaced or aliased before it is printed")

    scan(toks, match, batch.end + 1)


def _safe_use(ts: Sequence[_Tok], m: Mapping[int, int], i: int, spans: Sequence[tuple[int, int]]) -> bool:
    n = len(ts)
    prev = ts[i - 1] if i else None
    nxt = ts[i + 1] if i + 1 < n else None
    if _is(prev, "p", "++") or _is(prev, "p", "--"):
        return False
    for a, b in spans:  # a destructuring assignment target: [V[1], V[0]] = …
        if a < i < b and b + 1 < n and _is(ts[b + 1], "p", "="):
            return False
    if _is(nxt, "p", ".") and i + 2 < n and ts[i + 2].kind == "id":
        name = ts[i + 2].value
        after = ts[i + 3] if i + 3 < n else None
        if name in ("forEach", "map") and _is(after, "p", "("):
            cb = _callback(ts, i + 4, m)
            return cb is not None and len(cb[0]) <= 2
        if name == "length":
            return not (after is not None and after.kind == "p" and after.value in _ASSIGN)
        return False
    if _is(nxt, "p", "["):
        j = m[i + 1] + 1
        while j < n:  # follow the member chain of the element: V[k].x[y]
            if (_is(ts[j], "p", ".") or _is(ts[j], "p", "?.")) and j + 1 < n and ts[j + 1].kind == "id":
                j += 2
            elif _is(ts[j], "p", "["):
                j = m[j] + 1
            else:
                break
        return not (j < n and ts[j].kind == "p" and ts[j].value in _ASSIGN)
    closes = _is(nxt, "p", ")") or _is(nxt, "p", ",")
    if (closes and i >= 4 and _is(prev, "p", "(") and _is(ts[i - 2], "id", "stringify")
            and _is(ts[i - 3], "p", ".") and _is(ts[i - 4], "id", "JSON")):
        return True
    if _is(prev, "id", "of") and _is(nxt, "p", ")"):
        return True
    if _is(nxt, "p", ")") and _is(prev, "p", "(") and i >= 2 and (
        (ts[i - 2].kind == "id" and ts[i - 2].value in _PRINT_FUNCS)
        or (_is(ts[i - 2], "id", "log") and i >= 4 and _is(ts[i - 4], "id", "console"))
    ):
        return True
    return False
