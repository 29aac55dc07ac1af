"""Fuzzing ``codexrt serve`` with hostile command lines (issue 18; R-D-4).

One real ``codexrt serve`` subprocess (against the stdio fake app-server) takes at least
20,000 generated lines: deep nesting, huge and non-finite numbers, wrong types, NUL bytes,
lone surrogates (escaped and as raw bytes), invalid UTF-8, unknown fields, schema-valid
out-of-range values, garbage. Hypothesis draws line *specs* (a command, its params, one
mutation); each spec is rendered as several lines (the mutation alone, and combined with
an unknown field, a wrong-typed field and an out-of-range number), so a few dozen examples
reach 20,000 lines.

What must hold, checked on every example:

* serve never exits;
* every line whose id a reference parser can read (strict UTF-8, strict JSON, finite
  numbers, no lone surrogates, a top-level ``id`` a reply can carry — or, in a line that does
  not decode whole, a leading ``{"id":<value>,`` member, issue 31) gets exactly one reply with
  that id; the lines without a readable id get exactly as many ``"id": null`` replies; a line
  too deep to decode gets its top-level id back (``LINE_TOO_DEEP``);
* every reply is a result or an error with an UPPER_SNAKE code, never ``INTERNAL_ERROR``;
* stdout stays valid NDJSON, each line fitting the shipped schema;
* a real ``codex.send`` queued before the flood completes.

Bounded in time: ``deadline=None`` and ``max_examples`` sized for about a minute on a loaded
2-core machine; commands that would spawn a process per line (helpers, turns) are kept
invalid except for a small quota.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from codexrt._serve._codec import MAX_COMMAND_DEPTH, MAX_ID_LENGTH, Command, parse_command
from codexrt._serve._commands import ALL_COMMANDS, HELPER_COMMANDS, LONG_COMMANDS
from codexrt._serve._schema import load_schema
from tests._support import schema_problem
from tests.e2e.test_serve_e2e import fake_cli

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = load_schema()
PARAMS = SCHEMA["$defs"]["commandParams"]
CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")
MIN_LINES = 20_000
#: Commands a valid line would make spawn a process or run a turn: kept invalid past a quota.
SPAWNING = HELPER_COMMANDS | LONG_COMMANDS | {"codex.executePlan", "codex.resetRuntime", "codex.releaseThread",
                                              "codex.updateSettings"}
VALID_SPAWN_QUOTA = 10
WAIT = 60.0


class Serve:
    """A ``codexrt serve`` subprocess; a thread reads stdout into parsed lines."""

    def __init__(self, tmp: Path) -> None:
        env = dict(os.environ, HOME=str(tmp), XDG_STATE_HOME=str(tmp / "state"), CODEX_HOME=str(tmp / "codex"),
                   CODEXRT_PRIVACY_DIR=str(tmp / "privacy"))
        self.stderr_path = tmp / "serve.stderr"
        self.stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "codexrt_cli", "--log-level", "warning", "serve", "--codex-bin", fake_cli(tmp, "handshake-ok")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd=str(ROOT), env=env)
        self.lines: list[dict[str, Any]] = []
        self.bad_stdout: list[bytes] = []
        self.cond = threading.Condition()
        self.eof = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
                assert isinstance(obj, dict) and raw.endswith(b"\n")
                problem = schema_problem(obj, "outputLine")
                assert problem is None, problem
            except Exception:  # recorded, asserted by the test
                with self.cond:
                    self.bad_stdout.append(raw)
                continue
            with self.cond:
                self.lines.append(obj)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_for(self, pred, timeout: float = WAIT) -> None:
        end = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = end - time.monotonic()
                assert left > 0 and not self.eof, "serve stopped answering (or exited)"
                self.cond.wait(left)


def _key(rid: Any) -> tuple[str, Any]:
    return (type(rid).__name__, rid)


# ---------------------------------------------------------------------------- the reference


class _Unreadable(Exception):
    pass


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unreadable(text)
    return value


def _constant(text: str) -> Any:
    raise _Unreadable(text)


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, list):
        return any(map(_has_surrogate, value))
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    return False


def _usable(rid: Any) -> bool:
    if isinstance(rid, bool):
        return False
    if isinstance(rid, str):
        return len(rid) <= MAX_ID_LENGTH
    if isinstance(rid, int):
        return True
    return isinstance(rid, float) and math.isfinite(rid)


def _echoable(rid: Any) -> bool:
    """An id a reply carries: a usable one, or a string over MAX_ID_LENGTH (refused, echoed whole)."""
    return _usable(rid) or isinstance(rid, str)


def reference_id(line: bytes) -> tuple[bool, Any]:
    """(readable, id) by an independent parser: the stdlib's strict JSON on strict UTF-8,
    rejecting non-finite numbers and lone surrogates (which the wire does not carry). A line
    that does not decode whole still has its id read when it starts with the id member
    (issue 31: ``{"id":<value>,`` then anything — how the generator writes every line but the
    deep ones): the value by the stdlib's ``raw_decode`` (a number followed by ``,`` or ``}``)."""
    try:
        obj = json.loads(line.decode("utf-8"), parse_float=_finite, parse_constant=_constant)
    except (UnicodeDecodeError, ValueError, _Unreadable, RecursionError):
        return _leading_id(line)
    try:
        if _has_surrogate(obj):  # not on the wire: the line does not decode whole
            return _leading_id(line)
        if not isinstance(obj, dict) or "id" not in obj or not _echoable(obj["id"]):
            return False, None
    except RecursionError:  # (deep lines are judged by how they were built, see the generator)
        return False, None
    return True, obj["id"]


def _leading_id(line: bytes) -> tuple[bool, Any]:
    head = b'{"id":'
    if not line.startswith(head):
        return False, None
    text = line[len(head):].decode("utf-8", "replace")
    try:
        rid, end = json.JSONDecoder(parse_float=_finite, parse_constant=_constant).raw_decode(text)
    except (ValueError, _Unreadable):
        return False, None
    if not isinstance(rid, str) and text[end:].lstrip()[:1] not in (",", "}"):
        return False, None  # a number must be whole: a member delimiter follows it (a string ends in its quote)
    if _has_surrogate(rid) or not _echoable(rid) or "\ufffd" in str(rid):
        return False, None
    return True, rid


# ---------------------------------------------------------------------------- generation


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].split("/")[-1]]
    return node


SPECIAL = {"channelId": "d", "threadId": "00000000-0000-4000-8000-000000000009", "message": "hi",
           "cwd": "/nonexistent-codexrt-fuzz", "interactionKey": "ik-none", "dialogToken": "t"}


def _plausible(name: str, schema: dict[str, Any]) -> Any:
    if name in SPECIAL:
        return SPECIAL[name]
    schema = _resolve(schema)
    if "enum" in schema:
        return next(v for v in schema["enum"] if v is not None)
    if "anyOf" in schema or "oneOf" in schema:
        return _plausible(name, (schema.get("anyOf") or schema["oneOf"])[0])
    types = schema.get("type", "object")
    t = next((x for x in (types if isinstance(types, list) else [types]) if x != "null"), "null")
    if t == "object":
        props = schema.get("properties", {})
        return {k: _plausible(k, props.get(k, {"type": "string"})) for k in schema.get("required", [])}
    return {"string": "x", "integer": max(1, schema.get("minimum", 1)), "number": 1.0, "boolean": False,
            "array": [], "null": None}[t]


def base_params(command: str) -> dict[str, Any]:
    return dict(_BASE[command])


_BASE = {name: _plausible("", schema) for name, schema in PARAMS.items()}


#: Values that are out of range (or not finite) for the numbers the schema bounds.
OUT_OF_RANGE = [0, -5, -0.0, 3601, 1e308, 10 ** 30, -(2 ** 63), 2 ** 64, 1e-320]
NUMERIC_FIELDS = ["timeout", "maxBytes", "limit", "maxPages", "updatedAt"]

json_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 100), max_value=2 ** 100)
                | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
                | st.sampled_from(["\ud800", "a\udfffb", "\x00", "\u2028", "é", "💥", "" * 3]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)

MUTATIONS = ["asis", "drop", "retype", "unknown_field", "range", "deep_first", "deep_last", "bad_utf8", "nul",
             "nonfinite", "surrogate_raw", "surrogate_escaped", "garbage", "top_extra", "not_object", "bad_id",
             "no_id", "truncate", "params_not_object"]


@st.composite
def specs(draw) -> dict[str, Any]:
    return {
        "command": draw(st.sampled_from(sorted(ALL_COMMANDS)) | st.text(max_size=10)),
        "id_kind": draw(st.sampled_from(["str", "int", "float", "str", "int"])),
        "mutation": draw(st.sampled_from(MUTATIONS)),
        "field": draw(st.sampled_from(["channelId", "threadId", "timeout", "message", "settings", "scope",
                                       "maxBytes", "cwd", "error", "result", "key", "limit"])),
        "value": draw(json_values),
        "number": draw(st.sampled_from(OUT_OF_RANGE)),
        "depth": draw(st.sampled_from([MAX_COMMAND_DEPTH + 1, 500, 1000, 5000, 50_000])),
        "garbage": draw(st.binary(min_size=1, max_size=40)),
        "cut": draw(st.integers(min_value=1, max_value=60)),
    }


def _num(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "1e400" if value > 0 else "-Infinity"
        return repr(value)
    return str(value)


def render(value: Any, *, ascii_only: bool = True) -> str:
    """JSON text of ``value`` that keeps what ``json.dumps`` would refuse (NaN, lone
    surrogates as escapes or raw)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return _num(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=ascii_only)
    if isinstance(value, list):
        return "[" + ",".join(render(v, ascii_only=ascii_only) for v in value) + "]"
    return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=ascii_only)}:{render(v, ascii_only=ascii_only)}"
                          for k, v in value.items()) + "}"


class Generator:
    def __init__(self) -> None:
        self.n = 0
        self.valid_spawns = 0

    def _id(self, kind: str) -> Any:
        self.n += 1
        return {"str": f"f{self.n}", "int": 1_000_000 + self.n, "float": self.n + 0.5}[kind]

    def lines(self, spec: dict[str, Any]) -> list[tuple[bytes, bool, Any]]:
        """Lines for one spec: (line, deep-with-readable-id, id put at top level)."""
        out = []
        for extra in (None, "unknown_field", "retype", "range"):
            out.append(self._one(spec, extra))
        return out

    def _one(self, spec: dict[str, Any], extra: str | None) -> tuple[bytes, bool, Any]:
        command, m = spec["command"], spec["mutation"]
        if m in ("deep_first", "deep_last") and extra in ("retype", "unknown_field"):
            extra = None  # a deep line is otherwise well formed: its id must come back
        rid = self._id(spec["id_kind"])
        params: Any = base_params(command) if command in PARAMS else {"channelId": "d"}
        for how in (m, extra):
            if not isinstance(params, dict):
                break
            if how == "drop" and params:
                params.pop(sorted(params)[0])
            elif how == "retype":
                params[spec["field"]] = spec["value"]
            elif how == "unknown_field":
                params["zz" + spec["field"]] = spec["value"]
            elif how == "range":
                params[spec["field"] if spec["field"] in NUMERIC_FIELDS else "timeout"] = spec["number"]
            elif how == "params_not_object":
                params = spec["value"] if not isinstance(spec["value"], dict) else [spec["value"]]
        obj: dict[str, Any] = {"id": rid, "command": command, "params": params}
        if m == "top_extra":
            obj["jsonrpc"] = "2.0"
        if m == "bad_id":
            # (the over-long one is unique: its refusal echoes it, issue 31)
            obj["id"] = [True, None, f"{self.n}".rjust(MAX_ID_LENGTH + 1, "x"), {"a": 1}, float("nan")][self.n % 5]
        if m == "no_id":
            del obj["id"]
        text = render(obj, ascii_only=m != "surrogate_raw")
        deep = False
        if m in ("deep_first", "deep_last"):
            nested = "[" * spec["depth"] + "]" * spec["depth"]
            body = render({k: v for k, v in obj.items() if k != "id"})[1:-1]
            head = f'"id":{render(rid)}'
            text = ("{" + head + ',"zdeep":' + nested + "," + body + "}" if m == "deep_first"
                    else '{"zdeep":' + nested + "," + body + "," + head + "}")
            deep = spec["depth"] > MAX_COMMAND_DEPTH
        data = text.encode("utf-8", "surrogatepass")
        if m == "bad_utf8":
            data = data[:-1] + b"\xff\xfe" + data[-1:]
        elif m == "nul":
            data = data.replace(b'"command"', b'"com\x00mand"', 1)
        elif m == "nonfinite":
            data = data[:-1] + b',"zz":' + [b"NaN", b"Infinity", b"-1e999", b"1e400"][self.n % 4] + b"}"
        elif m == "surrogate_escaped":
            data = data[:-1] + b',"zz":"\\ud800x"}'
        elif m == "garbage":
            data = spec["garbage"]
        elif m == "truncate":
            data = data[: spec["cut"]]
        elif m == "not_object":
            data = b"[" + data + b"]"
        data = data.replace(b"\n", b" ").replace(b"\r", b" ")
        if not data.strip():
            data = b"\x00"
        if command in SPAWNING and isinstance(parse_command(data), Command):
            if self.valid_spawns < VALID_SPAWN_QUOTA and command not in HELPER_COMMANDS:
                self.valid_spawns += 1  # a few real turns / resets on channel "d" are welcome
            else:
                data = json.dumps({"id": rid, "command": command, "params": {"channelId": 5}}).encode()
        return data, deep, rid


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    s = Serve(tmp)
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()
    s.stderr.close()


def test_r_d_4_fuzz_serve_answers_every_readable_line_once(serve):
    """R-D-4: ≥ 20,000 hostile lines through a real ``codexrt serve``; see the module doc."""
    gen = Generator()
    state = {"lines": 0, "null_expected": 0, "batches": 0}
    answered: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    seen = [0]
    null_replies = [0]

    def absorb() -> None:
        for line in serve.lines[seen[0]:]:
            if line["type"] == "response":
                if line["id"] is None:
                    null_replies[0] += 1
                else:
                    answered.setdefault(_key(line["id"]), []).append(line)
        seen[0] = len(serve.lines)

    real = ('{"id":"real-send","command":"codex.send","params":{"channelId":"real-\u03a9","message":'
            '"before the flood"}}\n')
    serve.write(real.encode())

    @settings(max_examples=70, deadline=None, database=None, phases=[Phase.generate],  # no shrinking: one serve
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(st.lists(specs(), min_size=75, max_size=90))
    def one_batch(batch):
        expected: list[Any] = []
        sent: dict[tuple[str, Any], bytes] = {}
        nulls = 0
        out = []
        for spec in batch:
            for data, deep, rid in gen.lines(spec):
                out.append(data + b"\n")
                readable, ref = reference_id(data)
                if deep:
                    readable, ref = _usable(rid), rid if _usable(rid) else None
                if readable:
                    expected.append(ref)
                    sent[_key(ref)] = data
                else:
                    nulls += 1
        state["batches"] += 1
        sentinel = f"sentinel-{state['batches']}"
        out.append(json.dumps({"id": sentinel, "command": "status"}).encode() + b"\n")
        serve.write(b"".join(out))
        state["lines"] += len(out) - 1
        state["null_expected"] += nulls
        keys = [_key(r) for r in expected] + [_key(sentinel)]

        def done() -> bool:
            absorb()
            return all(k in answered for k in keys)

        try:
            serve.wait_for(done)
        except AssertionError:
            missing = [k for k in keys if k not in answered]
            raise AssertionError(f"no reply to {len(missing)} line(s), e.g. {[sent.get(k, k)[:300] for k in missing[:3]]}"
                                 f"; serve alive: {serve.proc.poll() is None}; stderr tail: "
                                 f"{serve.stderr_path.read_text(errors='replace')[-2000:]}") from None
        assert serve.proc.poll() is None, "serve exited"
        assert not serve.bad_stdout, serve.bad_stdout[:3]
        for k in keys:
            replies = answered[k]
            assert len(replies) == 1, replies
            r = replies[0]
            if not r["ok"]:
                assert CODE.match(r["error"]["code"]) and r["error"]["code"] != "INTERNAL_ERROR", r
            else:
                assert "result" in r

    one_batch()
    # parse-level replies (the null ones) are written in line order before the last sentinel's
    absorb()
    assert null_replies[0] == state["null_expected"]
    assert state["lines"] >= MIN_LINES, state
    print(f"fuzz: {state['lines']} lines in {state['batches']} batches, {len(answered)} replies with an id, "
          f"{null_replies[0]} with id null, {gen.valid_spawns} valid long/lifecycle commands")
    # the real send queued before the flood completed
    serve.wait_for(lambda: (absorb(), _key("real-send") in answered)[1])
    [reply] = answered[_key("real-send")]
    assert reply["ok"] and reply["result"]["status"] == "completed", reply
    # no reply to anything twice, not even to lines outside the expected set
    assert all(len(v) == 1 for v in answered.values())
    assert serve.proc.poll() is None
    serve.proc.stdin.close()
    assert serve.proc.wait(timeout=WAIT) == 0
    serve.thread.join(WAIT)
    assert not serve.bad_stdout
