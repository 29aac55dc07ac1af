"""Print plans: how the script prints a batch's values, read from its source.

Recognised shapes (each a :class:`_Plan`): index labels printed from ``VAR.forEach((x, i) =>
…)`` or from ``for (let i = 0; i < VAR.length; i++)`` (template strings or ``"Result " + i``);
``{i, result}`` / ``{index, ...x}`` envelopes built per element (``forEach`` or ``map``); and
``JSON.stringify(VAR)`` of the whole array. A plan only says how to find each slot's value in
the printed text; ``_output`` reads the text. A label whose printed value is not that slot's
element, or envelope index keys that disagree, raise ``_Unresolved`` (the wrapper is kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ._lexer import _brackets, _callback, _expr_end, _is, _split_top, _Tok
from ._model import _PRINT_FUNCS, KeepReason, _Unresolved
from ._source import _Batch, _ends_expression, _reflective, _scopes, _Source


def single_key(call_index: int) -> int:
    """The pseudo batch number of a ``single`` plan: one awaited call outside any batch."""
    return -1 - call_index


@attrs.define
class _Plan:
    """How a batch's values are printed."""

    kind: Literal["label", "envelope", "array", "single"]
    batch: int  # for "single": ``single_key(call index)``
    prefix: str = ""
    sep: str = ""
    offset: int = 0
    json_value: bool = True
    whole: bool = True  # the printed value is the whole element (settled receipt for allSettled)
    spread: bool = False  # envelope spreads the local value (no independent result)
    index_keys: tuple[str, ...] = ()
    exclusive: bool = True  # no other print call could interleave text


def _print_calls(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int]) -> list[tuple[int, int]]:
    """Argument spans of ``text(...)`` / ``console.log(...)`` calls within ``[lo, hi)``."""
    out = []
    for i in range(lo, hi):
        t = toks[i]
        if t.kind == "id" and t.value in _PRINT_FUNCS and i + 1 < hi and _is(toks[i + 1], "p", "("):
            if i and _is(toks[i - 1], "p", "."):
                continue
            out.append((i + 2, match[i + 1]))
        elif (
            _is(t, "id", "console")
            and i + 3 < hi
            and _is(toks[i + 1], "p", ".")
            and _is(toks[i + 2], "id", "log")
            and _is(toks[i + 3], "p", "(")
        ):
            out.append((i + 4, match[i + 3]))
    return out


def _value_ref(toks: Sequence[_Tok], match: Mapping[int, int], value_is: Any) -> tuple[bool, bool] | None:
    """Classify a printed value expression. ``value_is(toks, a, b)`` says whether
    ``toks[a:b]`` denotes the slot's element. Returns (json, whole) or None when the
    expression is not the slot's element (or a field of it)."""
    n = len(toks)
    js = False
    a, b = 0, n
    if (
        n >= 4
        and _is(toks[0], "id", "JSON")
        and _is(toks[1], "p", ".")
        and _is(toks[2], "id", "stringify")
        and _is(toks[3], "p", "(")
        and match.get(3) == n - 1
    ):
        spans = _split_top(toks, 4, n - 1, match)
        if not spans:
            return None
        a, b = spans[0]
        js = len(spans) == 1
    elif n >= 3 and _is(toks[0], "id", "String") and _is(toks[1], "p", "(") and match.get(1) == n - 1:
        a, b = 2, n - 1
    if value_is(toks, a, b):
        return js, True
    # a field of the element: x.output / r[i].output
    if b - a >= 3 and _is(toks[b - 2], "p", ".") and toks[b - 1].kind == "id" and value_is(toks, a, b - 2):
        return js, False
    return None


def _label_parts(toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int]) -> list[Any] | None:
    """Flatten a template literal or a ``+`` concatenation into static strings and
    expression token tuples."""
    if hi - lo == 1 and toks[lo].kind == "tpl":
        return [p if isinstance(p, str) else tuple(p) for p in toks[lo].value]
    parts: list[Any] = []
    for a, b in _split_top(toks, lo, hi, match, sep="+"):
        if b - a == 1 and toks[a].kind == "str":
            parts.append(toks[a].value)
        elif b - a == 1 and toks[a].kind == "tpl":
            parts.extend(p if isinstance(p, str) else tuple(p) for p in toks[a].value)
        else:
            parts.append(tuple(toks[a:b]))
    return parts if len(parts) > 1 else None


def _index_expr(expr: Sequence[_Tok], idx: str) -> int | None:
    """Offset K if ``expr`` is ``idx`` or ``idx + K``."""
    if len(expr) == 1 and _is(expr[0], "id", idx):
        return 0
    if len(expr) == 3 and _is(expr[0], "id", idx) and _is(expr[1], "p", "+") and expr[2].kind == "num":
        return int(expr[2].value)
    if len(expr) == 3 and _is(expr[0], "p", "(") and _is(expr[2], "p", ")"):
        return _index_expr(expr[1:2], idx)
    return None


def _analyse_print(
    toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int], idx: str, value_is: Any, batch: _Batch
) -> _Plan | None:
    """A print inside a forEach/for body: labels or a per-item envelope."""
    parts = _label_parts(toks, lo, hi, match)
    if parts is not None:
        merged: list[Any] = []
        for p in parts:
            if isinstance(p, str) and merged and isinstance(merged[-1], str):
                merged[-1] += p
            else:
                merged.append(p)
        exprs = [k for k, p in enumerate(merged) if not isinstance(p, str)]
        if len(exprs) != 2:
            return None
        k_idx, k_val = exprs
        offset = _index_expr(merged[k_idx], idx)
        if offset is None:
            return None
        sub = list(merged[k_val])
        ref = _value_ref(sub, _brackets(sub), value_is)
        if ref is None:
            raise _Unresolved(KeepReason.SLOT_MISMATCH, "the value printed under an index label is not that slot's value")
        prefix = "".join(p for p in merged[:k_idx] if isinstance(p, str))
        sep = "".join(p for p in merged[k_idx + 1 : k_val] if isinstance(p, str))
        if not sep:
            return None
        json_value, whole = ref
        return _Plan("label", batch.number, prefix=prefix, sep=sep, offset=offset, json_value=json_value, whole=whole)
    # text(JSON.stringify({i, result: x})) per item
    sub = list(toks[lo:hi])
    if (
        len(sub) >= 5
        and _is(sub[0], "id", "JSON")
        and _is(sub[2], "id", "stringify")
        and _is(sub[3], "p", "(")
        and _is(sub[4], "p", "{")
    ):
        m2 = _brackets(sub)
        return _envelope_plan(sub, 4, m2[4] + 1, m2, idx, value_is, batch)
    return None


def _envelope_plan(
    toks: Sequence[_Tok], lo: int, hi: int, match: Mapping[int, int], idx: str, value_is: Any, batch: _Batch
) -> _Plan | None:
    """An object literal ``{i, result: x}`` / ``{index: i, ...x}`` built per element."""
    keys: dict[str, int | None] = {}
    spread = has_result = False
    whole = True
    for a, b in _split_top(toks, lo + 1, hi - 1, match):
        t = toks[a]
        if b - a == 1 and t.kind == "id" and t.value in ("i", "index"):
            keys[t.value] = 0 if t.value == idx else None
        elif b - a == 1 and _is(t, "id", "result"):
            has_result = True
            whole = bool(value_is(toks, a, b))
        elif _is(t, "p", "...") and value_is(toks, a + 1, b):
            spread = True
        elif b - a >= 3 and t.kind in ("id", "str") and _is(toks[a + 1], "p", ":"):
            key = str(t.value)
            if key in ("i", "index"):
                keys[key] = _index_expr(toks[a + 2 : b], idx)
            elif key == "result":
                has_result = True
                whole = bool(value_is(toks, a + 2, b))
    index_keys = tuple(k for k in ("i", "index") if k in keys)
    if not index_keys or not (spread or has_result):
        return None
    offsets = {keys[k] for k in index_keys}
    if None in offsets:
        raise _Unresolved(KeepReason.INDEX_CONFLICT, "an index envelope key is not the element's index")
    if len(offsets) > 1:
        raise _Unresolved(KeepReason.INDEX_CONFLICT, "the i and index keys of an envelope disagree")
    return _Plan(
        "envelope",
        batch.number,
        offset=offsets.pop() or 0,
        whole=whole,
        spread=spread and not has_result,
        index_keys=index_keys,
    )



def _find_plans(src: _Source) -> list[_Plan]:
    """Every print plan of the script's batches; each plan learns whether anything else in
    the script prints (``exclusive``)."""
    toks, match = src.toks, src.match
    by_var = {b.var: b for b in src.batches if b.var}
    plans: list[_Plan] = []
    all_prints = _print_calls(toks, 0, len(toks), match)
    claimed: set[tuple[int, int]] = set()
    for i, t in enumerate(toks):
        if t.kind != "id":
            continue
        if t.value in by_var:
            _callback_plans(toks, match, i, by_var, all_prints, plans, claimed)
        if t.value == "for":
            _for_loop_plans(toks, match, i, by_var, plans, claimed)
    # text(JSON.stringify(VAR))
    for a, b in all_prints:
        sub = toks[a:b]
        if (
            len(sub) >= 6
            and _is(sub[0], "id", "JSON")
            and _is(sub[2], "id", "stringify")
            and _is(sub[3], "p", "(")
            and sub[4].kind == "id"
            and sub[4].value in by_var
            and (_is(sub[5], "p", ")") or _is(sub[5], "p", ","))
            and match.get(a + 3) == b - 1
        ):
            plans.append(_Plan("array", by_var[sub[4].value].number))
            claimed.add((a, b))
    single = _single_plan(src, all_prints)
    if single is not None:
        plans.append(single)
        claimed.add(all_prints[0])
    exclusive = len(claimed) == len(all_prints)
    for p in plans:
        p.exclusive = exclusive
    return plans


def _callback_plans(
    toks: Sequence[_Tok],
    match: Mapping[int, int],
    i: int,
    by_var: Mapping[str, _Batch],
    all_prints: Sequence[tuple[int, int]],
    plans: list[_Plan],
    claimed: set[tuple[int, int]],
) -> None:
    """``VAR.forEach(cb)`` printing labels or envelopes, ``VAR.map(cb)`` building envelopes
    inside a print, at token ``i``."""
    n = len(toks)
    t = toks[i]
    if not (
        t.kind == "id"
        and t.value in by_var
        and i + 3 < n
        and _is(toks[i + 1], "p", ".")
        and toks[i + 2].kind == "id"
        and toks[i + 2].value in ("forEach", "map")
        and _is(toks[i + 3], "p", "(")
    ):
        return
    batch = by_var[t.value]
    cb = _callback(toks, i + 4, match)
    if cb is None or len(cb[0]) < 2:
        return
    (v, idx, *_), blo, bhi = cb
    value_is = lambda ts, a, b, v=v: b - a == 1 and _is(ts[a], "id", v)  # noqa: E731
    if toks[i + 2].value == "forEach":
        for a, b in _print_calls(toks, blo, bhi, match):
            plan = _analyse_print(toks, a, b, match, idx, value_is, batch)
            if plan is not None:
                plans.append(plan)
                claimed.add((a, b))
        return
    lo, hi = blo, bhi
    if _is(toks[lo], "p", "(") and match[lo] == hi - 1:
        lo, hi = lo + 1, hi - 1
    elif _is(toks[lo], "id", "return"):
        lo, hi = lo + 1, _expr_end(toks, lo + 1, match)
    if _is(toks[lo], "p", "{") and match[lo] == hi - 1:
        plan = _envelope_plan(toks, lo, hi, match, idx, value_is, batch)
        if plan is not None:
            enclosing = [(a, b) for a, b in all_prints if a <= i < b]
            if enclosing:
                plans.append(plan)
                claimed.update(enclosing)


def _for_loop_plans(
    toks: Sequence[_Tok],
    match: Mapping[int, int],
    i: int,
    by_var: Mapping[str, _Batch],
    plans: list[_Plan],
    claimed: set[tuple[int, int]],
) -> None:
    """``for (let I = 0; I < VAR.length; I++) body`` printing labels, at token ``i``."""
    n = len(toks)
    if not (_is(toks[i], "id", "for") and i + 1 < n and _is(toks[i + 1], "p", "(")):
        return
    rp = match[i + 1]
    head = toks[i + 2 : rp]
    hs = [x for x in head if not (x.kind == "id" and x.value in ("let", "var", "const"))]
    if not (
        len(hs) >= 12
        and hs[0].kind == "id"
        and _is(hs[1], "p", "=")
        and _is(hs[2], "num", 0)
        and _is(hs[3], "p", ";")
        and _is(hs[4], "id", hs[0].value)
        and _is(hs[5], "p", "<")
        and hs[6].kind == "id"
        and hs[6].value in by_var
        and _is(hs[7], "p", ".")
        and _is(hs[8], "id", "length")
        and _is(hs[9], "p", ";")
    ):
        return
    idx, batch = hs[0].value, by_var[hs[6].value]
    step = [x.value for x in hs[10:]]
    if step not in ([idx, "++"], ["++", idx], [idx, "+=", 1]):
        return
    var = batch.var
    value_is = lambda ts, a, b, var=var, idx=idx: (  # noqa: E731
        b - a == 4
        and _is(ts[a], "id", var)
        and _is(ts[a + 1], "p", "[")
        and _is(ts[a + 2], "id", idx)
        and _is(ts[a + 3], "p", "]")
    )
    blo = rp + 1
    bhi = match[blo] if _is(toks[blo], "p", "{") else _expr_end(toks, blo, match)
    for a, b in _print_calls(toks, blo, bhi, match):
        plan = _analyse_print(toks, a, b, match, idx, value_is, batch)
        if plan is not None:
            plans.append(plan)
            claimed.add((a, b))


def _uses(toks: Sequence[_Tok], name: str) -> int:
    """How often the variable ``name`` is referred to (property names excluded), template
    substitutions included."""
    n = 0
    for i, t in enumerate(toks):
        if t.kind == "tpl":
            n += sum(_uses(list(part), name) for part in t.value if not isinstance(part, str))
        elif _is(t, "id", name) and not (i and (_is(toks[i - 1], "p", ".") or _is(toks[i - 1], "p", "?."))):
            n += 1
    return n


def _single_plan(src: _Source, all_prints: Sequence[tuple[int, int]]) -> _Plan | None:
    """``const V = await tools.X(...);`` (or ``let``; the call ends the expression) and the
    script's only print ``text(JSON.stringify(V))``, once, outside any loop or callback, with
    ``V`` used nowhere else and no ``eval`` / ``Function`` (so nothing can change it before it
    is printed): the whole printed value is that call's result — a ``session_id`` in
    it identifies the process the call started (issue 32, R-H-5)."""
    if len(all_prints) != 1:
        return None
    toks, match = src.toks, src.match
    a, b = all_prints[0]
    sub = toks[a:b]
    if not (
        len(sub) == 6
        and _is(sub[0], "id", "JSON")
        and _is(sub[1], "p", ".")
        and _is(sub[2], "id", "stringify")
        and _is(sub[3], "p", "(")
        and sub[4].kind == "id"
        and _is(sub[5], "p", ")")
    ):
        return None
    scopes = _scopes(toks, match)
    if any(lo <= a < hi for lo, hi in scopes) or _reflective(toks):
        return None
    var = sub[4].value
    for c in src.calls:
        i = c.lo
        if (
            c.batch is None
            and i >= 4
            and _is(toks[i - 1], "id", "await")
            and _is(toks[i - 2], "p", "=")
            and _is(toks[i - 3], "id", var)
            and toks[i - 4].kind == "id"
            and toks[i - 4].value in ("const", "let")  # a top-level ``var`` may be reachable as ``globalThis.V``
            and c.hi <= a
            and not any(lo <= i <= hi for lo, hi in scopes)  # one run, in the print's scope (not an unrolled loop's)
            and _ends_expression(toks, c.hi)  # ``await tools.X(…).then(…)`` is not the call's result
        ):
            return _Plan("single", single_key(c.index)) if _uses(toks, var) == 2 else None
    return None
