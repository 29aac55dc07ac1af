"""Scenario interpreter of the scripted fake ``codex app-server`` (sans-IO, stdlib only).

Why this exists: codexrt's unit tests need a peer that speaks the real server's wire
(``real-app-server-0.169.0.md`` §2-§9: no ``"jsonrpc"`` field, ``emittedAtMs`` on every
notification, server request ids counting from ``0``, ``{"id","result"}`` and
``{"error":{...},"id"}`` responses) *and* misbehaves on cue: refuse the handshake, answer late,
reuse an id, break the framing, flood stderr, die mid-turn.  The misbehaviour is data (a JSON
scenario file) so one interpreter serves the stdio child (``fake_app_server.py``) and the
in-memory Trio peer (``memory.py``).

Theory of operation
-------------------
``ScenarioPeer`` is a pure state machine.  It is fed complete lines (``on_line``) and returns
the *actions* a runner must perform, in order: ``Write`` (bytes to stdout), ``Stderr``,
``Sleep``, ``Exit`` and ``CloseStdout``.  It never does I/O and never reads a clock except the
injectable ``clock_ms`` used for ``emittedAtMs`` stamps.

For each received line the peer (1) decodes and classifies it by structure (client request,
client notification, reply to one of our server requests, or invalid), (2) records it in
``received``, (3) runs the first scenario rule whose matcher accepts it, or else the built-in
*defaults* that mimic a minimal real app-server, and (4) renders the rule's actions into wire
bytes.  Rendering is eager: every template (``$turn_id`` …) and every state change (a thread
is created, a turn ends) happens when the line is interpreted; a ``Sleep`` only delays the
bytes that follow it.  Runners do not block their reading on a ``Sleep``: ``ActionQueue``
splits an action list at each ``Sleep`` into timed batches, so a slow answer to one request
does not stop the peer from answering the next one (that is how a real server behaves, and
it is what ``never-respond`` and ``reverse-approval-with-traffic`` rely on).

The format of scenario files is documented in ``docs/fake-peer.md``.
"""

from __future__ import annotations

import copy
import heapq
import json
import os
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

__all__ = [
    "Action",
    "ActionQueue",
    "CloseStdout",
    "Exit",
    "SCENARIO_DIR",
    "Scenario",
    "ScenarioError",
    "ScenarioPeer",
    "Sleep",
    "Stderr",
    "Write",
    "encode_message",
    "scenario_names",
]

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

# JSON-RPC error codes the real server uses (it answers almost everything with -32600).
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601


# --------------------------------------------------------------------------------------------
# Actions


@dataclass(frozen=True)
class Write:
    """Write ``data`` to stdout (one or more frames, or a fragment of one)."""

    data: bytes


@dataclass(frozen=True)
class Stderr:
    """Write ``data`` to stderr."""

    data: bytes


@dataclass(frozen=True)
class Sleep:
    """Delay every later action of the same list by ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class Exit:
    """Flush and end the process (or the memory peer) with ``code``."""

    code: int


@dataclass(frozen=True)
class CloseStdout:
    """Close stdout; later writes are dropped, the peer keeps reading."""


Action = Union[Write, Stderr, Sleep, Exit, CloseStdout]


class ScenarioError(ValueError):
    """A scenario file (or dict) is malformed: unknown key, unknown action, bad type."""


def encode_message(obj: Any) -> bytes:
    """One wire frame: compact JSON, UTF-8, terminated by ``\\n`` (like the real server)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


# --------------------------------------------------------------------------------------------
# Timeline of actions (shared by the runners)


class ActionQueue:
    """Sans-IO timeline: turns action lists containing ``Sleep`` into timed batches.

    ``add(now, actions)`` schedules the actions before the first ``Sleep`` at ``now``, those
    after it at ``now + seconds``, and so on.  ``pop_due(now)`` returns every ready action in
    (due time, insertion order), never a ``Sleep``.  Runners wait until ``next_due()`` *or* new
    input, whichever comes first, so sleeping never stops the peer from reading.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, list[Action]]] = []
        self._seq = 0

    def add(self, now: float, actions: Iterable[Action]) -> None:
        due = now
        batch: list[Action] = []
        for action in actions:
            if isinstance(action, Sleep):
                if batch:
                    self._push(due, batch)
                    batch = []
                due += max(0.0, float(action.seconds))
            else:
                batch.append(action)
        if batch:
            self._push(due, batch)

    def _push(self, due: float, batch: list[Action]) -> None:
        heapq.heappush(self._heap, (due, self._seq, batch))
        self._seq += 1

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Action]:
        out: list[Action] = []
        while self._heap and self._heap[0][0] <= now:
            out.extend(heapq.heappop(self._heap)[2])
        return out

    def __len__(self) -> int:
        return len(self._heap)


# --------------------------------------------------------------------------------------------
# Scenario files

_TOP_KEYS = {"name", "description", "defaults", "on_start", "rules", "settings"}
_RULE_KEYS = {"match", "actions", "times", "comment"}
_MATCH_KEYS = {"method", "nth", "kind", "params", "reply_to", "result", "error", "invalid"}
# action kind -> the extra keys it accepts
_ACTION_KEYS: dict[str, set[str]] = {
    "default": set(),
    "respond": {"id"},
    "error": {"id"},
    "notify": {"params"},
    "request": {"params", "id", "repeat"},
    "raw": set(),
    "blob": {"fill", "count", "suffix"},
    "raw_hex": set(),
    "sleep": set(),
    "stderr": {"repeat", "pad_to"},
    "exit": set(),
    "close_stdout": set(),
    "hang_turn": set(),
    "turn_response": set(),
    "turn_started": set(),
    "user_message": set(),
    "agent_message": {"deltas", "complete"},
    "item": set(),
    "end_turn": {"error"},
    "settings_updated": set(),
}
_ACTION_KEYS["comment"] = set()

DEFAULT_SETTINGS: dict[str, Any] = {
    "user_agent": "fake-app-server/0.0.0",
    "codex_home": "/tmp/fake-codex-home",
    "platform_family": "unix",
    "platform_os": "linux",
    "cli_version": "0.0.0-fake",
    "model": "mock-model",
    "model_provider": "mock",
    "cwd": "/tmp/fake-workspace",
    "text": "Hello from the fake peer.",
    "deltas": 3,
    # thread/resume and thread/read of an unknown but well-formed UUID succeed (the fake has
    # no disk; a fresh process must still let codexrt resume the threads of the last one).
    "resume_any_uuid": True,
    "known_threads": [],
    # turn/start on a thread that is neither started nor resumed in this process fails, as on
    # the real server after a restart.
    "require_loaded_thread": True,
    # echo the real server's stderr ERROR line for an undecodable input line
    "stderr_on_invalid": True,
    # "exit" (exit 0 like the real server) or "ignore" (to test kill escalation); stdio only
    "sigterm": "exit",
    # seed of the id generator; null = random ids
    "seed": None,
}


@dataclass
class Rule:
    match: dict[str, Any]
    actions: list[dict[str, Any]]
    times: int | None = None
    fired: int = 0


@dataclass
class Scenario:
    """A parsed, validated scenario.  Build with ``Scenario.load``."""

    name: str
    description: str = ""
    defaults: bool = True
    on_start: list[dict[str, Any]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, source: "Scenario | str | os.PathLike[str] | Mapping[str, Any]") -> "Scenario":
        """Load a scenario by bundled name (``"handshake-ok"``), by path, or from a dict."""
        if isinstance(source, Scenario):
            return copy.deepcopy(source)
        if isinstance(source, Mapping):
            return cls.from_dict(source)
        text = os.fspath(source)
        path = Path(text)
        if not (text.endswith(".json") or os.sep in text or "/" in text):
            path = SCENARIO_DIR / f"{text}.json"
        if not path.is_file():
            raise ScenarioError(f"no such scenario: {text!r} (known: {', '.join(scenario_names())})")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ScenarioError(f"{path}: invalid JSON: {exc}") from None
        return cls.from_dict(data, where=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "<dict>") -> "Scenario":
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{where}: a scenario is a JSON object")
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
        name = data.get("name", "unnamed")
        settings = data.get("settings", {})
        if not isinstance(settings, Mapping):
            raise ScenarioError(f"{where}: settings must be an object")
        bad = set(settings) - set(DEFAULT_SETTINGS)
        if bad:
            raise ScenarioError(f"{where}: unknown settings {sorted(bad)}")
        on_start = list(data.get("on_start", []))
        _check_actions(on_start, f"{where}: on_start")
        rules = []
        for i, raw in enumerate(data.get("rules", [])):
            at = f"{where}: rules[{i}]"
            if not isinstance(raw, Mapping) or "match" not in raw or "actions" not in raw:
                raise ScenarioError(f"{at}: a rule is {{'match': {{...}}, 'actions': [...]}}")
            if set(raw) - _RULE_KEYS:
                raise ScenarioError(f"{at}: unknown keys {sorted(set(raw) - _RULE_KEYS)}")
            match = dict(raw["match"])
            if set(match) - _MATCH_KEYS:
                raise ScenarioError(f"{at}: unknown matcher keys {sorted(set(match) - _MATCH_KEYS)}")
            for key, needs in (("nth", "method"), ("params", "method"), ("result", "reply_to"), ("error", "reply_to")):
                if key in match and needs not in match:
                    raise ScenarioError(f"{at}: matcher key {key!r} needs {needs!r}")
            times = raw.get("times")
            if times is not None and (not isinstance(times, int) or times < 0):
                raise ScenarioError(f"{at}: times must be a non-negative integer or null")
            actions = list(raw["actions"])
            _check_actions(actions, at)
            rules.append(Rule(match=match, actions=actions, times=times))
        return cls(
            name=str(name),
            description=str(data.get("description", "")),
            defaults=bool(data.get("defaults", True)),
            on_start=on_start,
            rules=rules,
            settings={**DEFAULT_SETTINGS, **settings},
        )


def _check_actions(actions: list[Any], where: str) -> None:
    for j, action in enumerate(actions):
        if not isinstance(action, Mapping):
            raise ScenarioError(f"{where}: action {j} is not an object")
        kinds = [k for k in action if k in _ACTION_KEYS and k != "comment"]
        if not kinds and set(action) == {"comment"}:
            continue
        if len(kinds) != 1:
            raise ScenarioError(f"{where}: action {j} must have exactly one kind of {sorted(_ACTION_KEYS)}: {dict(action)}")
        extra = set(action) - {kinds[0], "comment"} - _ACTION_KEYS[kinds[0]]
        if extra:
            raise ScenarioError(f"{where}: action {j} ({kinds[0]}) has unknown keys {sorted(extra)}")


def scenario_names() -> list[str]:
    """Names of the bundled scenarios (``peer_fixtures/scenarios/*.json``)."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.json"))


# --------------------------------------------------------------------------------------------
# Templates

_PLACEHOLDER = re.compile(r"\$(id|thread_id|turn_id|turn|thread|client_message_id|now_ms|n|env\.[A-Za-z_][A-Za-z0-9_]*|(?:params|msg)(?:\.[A-Za-z0-9_\-]+)*)(?![A-Za-z0-9_])")
_MISSING = object()


def _dig(obj: Any, path: Iterable[str]) -> Any:
    for part in path:
        if isinstance(obj, Mapping) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def _subset(pattern: Any, value: Any) -> bool:
    """``pattern`` is contained in ``value`` (dicts by key, everything else by equality and type)."""
    if isinstance(pattern, Mapping):
        return isinstance(value, Mapping) and all(k in value and _subset(v, value[k]) for k, v in pattern.items())
    return type(pattern) is type(value) and pattern == value


# --------------------------------------------------------------------------------------------
# The peer


@dataclass
class _Msg:
    kind: str  # "request" | "notification" | "response" | "invalid"
    obj: Any
    text: str

    @property
    def method(self) -> str | None:
        return self.obj.get("method") if self.kind in ("request", "notification") else None

    @property
    def id(self) -> Any:
        return self.obj.get("id") if isinstance(self.obj, dict) else None

    @property
    def params(self) -> Any:
        return self.obj.get("params") if isinstance(self.obj, dict) else None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _classify(line: bytes) -> _Msg:
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    try:
        obj = json.loads(text)
    except ValueError:
        return _Msg("invalid", {"_invalid": text}, text)
    if not isinstance(obj, dict):
        return _Msg("invalid", {"_invalid": text}, text)
    has_id = "id" in obj
    if isinstance(obj.get("method"), str):
        if not has_id:
            return _Msg("notification", obj, text)
        # The real server ignores a request whose id is not an integer or a string (1.5).
        return _Msg("request" if _valid_id(obj["id"]) else "invalid", obj, text)
    if has_id and ("result" in obj or "error" in obj) and _valid_id(obj["id"]):
        return _Msg("response", obj, text)
    return _Msg("invalid", obj, text)


class _RpcError(Exception):
    def __init__(self, message: str, code: int = INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_THREAD_METHODS = {
    "thread/resume", "thread/read", "thread/turns/list", "thread/items/list", "thread/name/set",
    "thread/settings/update", "turn/start", "turn/interrupt",
}
_EXPERIMENTAL_METHODS = {"thread/settings/update", "collaborationMode/list"}


class ScenarioPeer:
    """The fake app-server's brain: lines in, actions out.  No I/O.

    ``received`` holds every decoded message (invalid lines as ``{"_invalid": text}``).
    ``pending_server_requests`` maps the ids of our unanswered server requests to their method.
    ``finished`` becomes true once an ``Exit`` was produced; later lines produce nothing.
    """

    def __init__(
        self,
        scenario: "Scenario | str | os.PathLike[str] | Mapping[str, Any]",
        *,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.scenario = Scenario.load(scenario)
        self.settings = self.scenario.settings
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._rng = random.Random(self.settings["seed"])
        self.received: list[Any] = []
        self.pending_server_requests: dict[Any, str] = {}
        self.finished = False
        self.initialized = False
        self.experimental_api = False
        self.threads: dict[str, dict[str, Any]] = {}  # loaded threads, by id
        self.thread_settings: dict[str, dict[str, Any]] = {}
        self.turns: dict[str, list[dict[str, Any]]] = {}  # finished turns per thread
        self.items: dict[str, list[dict[str, Any]]] = {}  # completed item entries per thread
        self.current_thread_id: str | None = None
        self.turn: dict[str, Any] | None = None  # the current (latest) turn object
        self.turn_thread_id: str | None = None
        self.active_turn = False
        self._turn_items: list[dict[str, Any]] = []
        self._turn_started_ms = 0
        self._client_message_id: Any = None
        self._turn_input: Any = None
        self._server_request_counter = 0
        self._server_request_turn: dict[Any, str | None] = {}
        self._method_counts: dict[str, int] = {}
        self._out: list[Action] = []
        self._msg: _Msg | None = None
        self._repeat_n = 0

    # ---- public API ------------------------------------------------------------------------

    def start(self) -> list[Action]:
        """Actions to perform when the process starts (``on_start``)."""
        return self._run(self.scenario.on_start, None)

    def on_line(self, line: bytes) -> list[Action]:
        """Interpret one complete line from the client (with or without its ``\\n``)."""
        msg = _classify(line)
        self.received.append(msg.obj)
        if self.finished:
            return []
        if msg.method is not None:
            self._method_counts[msg.method] = self._method_counts.get(msg.method, 0) + 1
        if msg.kind == "request" and msg.method == "turn/start":
            self._new_turn(msg)
        if msg.kind == "response":
            # A reply settles our request whatever rule runs next (unknown ids are logged).
            self._server_request_turn.pop(msg.id, None)
            if self.pending_server_requests.pop(msg.id, _MISSING) is _MISSING and not self._matching_rule(msg):
                if self.scenario.defaults:
                    return self._stderr_line(f"WARN codex_app_server::outgoing_message: could not find callback for {_rust_id(msg.id)}")
                return []
        rule = self._matching_rule(msg)
        if rule is not None:
            rule.fired += 1
            if msg.method == "initialize" and msg.kind == "request" and not self.initialized \
                    and not any("error" in a or "default" in a for a in rule.actions):
                # A rule that answers initialize its own way (raw, respond, silence) still
                # leaves the server initialized; only an ``error`` action refuses it.
                self._accept_initialize(msg)
            return self._run(rule.actions, msg)
        if not self.scenario.defaults:
            return []
        return self._run([{"default": True}], msg)

    # ---- rule matching -----------------------------------------------------------------------

    def _matching_rule(self, msg: _Msg) -> Rule | None:
        for rule in self.scenario.rules:
            if rule.times is not None and rule.fired >= rule.times:
                continue
            if self._matches(rule.match, msg):
                return rule
        return None

    def _matches(self, m: Mapping[str, Any], msg: _Msg) -> bool:
        if m.get("invalid") is True and msg.kind != "invalid":
            return False
        if "kind" in m and m["kind"] != msg.kind:
            return False
        if "method" in m:
            if msg.method != m["method"]:
                return False
            if "nth" in m and self._method_counts.get(msg.method, 0) != m["nth"]:
                return False
            if "params" in m and not _subset(m["params"], msg.params):
                return False
        if "reply_to" in m:
            if msg.kind != "response" or not _subset(m["reply_to"], msg.id):
                return False
            if "result" in m and ("result" not in msg.obj or not _subset(m["result"], msg.obj["result"])):
                return False
            if m.get("error") is True and "error" not in msg.obj:
                return False
        return True

    # ---- action rendering ----------------------------------------------------------------------

    def _run(self, actions: list[dict[str, Any]], msg: _Msg | None) -> list[Action]:
        self._out = []
        self._msg = msg
        for action in actions:
            if self.finished:
                break
            self._do(action, msg)
        out, self._out = self._out, []
        return out

    def _do(self, a: Mapping[str, Any], msg: _Msg | None) -> None:
        if "comment" in a and len(a) == 1:
            return
        if "default" in a:
            if msg is not None:
                self._default(msg)
        elif "respond" in a:
            self._emit({"id": self._t(a.get("id", "$id")), "result": self._t(a["respond"])})
        elif "error" in a:
            self._emit({"error": self._t(a["error"]), "id": self._t(a.get("id", "$id"))})
        elif "notify" in a:
            self._notify(self._t(a["notify"]), self._t(a.get("params", {})))
        elif "request" in a:
            for n in range(int(a.get("repeat", 1))):
                self._repeat_n = n
                rid = self._t(a["id"]) if "id" in a else self._next_request_id()
                self._server_request(rid, self._t(a["request"]), self._t(a.get("params", {})))
            self._repeat_n = 0
        elif "raw" in a:
            self._out.append(Write(self._t(a["raw"], as_json=True).encode("utf-8", "surrogateescape")))
        elif "blob" in a:
            # one big write without templates: prefix + fill * count + suffix (a 100 MB line)
            fill = str(a.get("fill", "")).encode("utf-8") * int(a.get("count", 0))
            self._out.append(Write(str(a["blob"]).encode("utf-8") + fill + str(a.get("suffix", "")).encode("utf-8")))
        elif "raw_hex" in a:
            self._out.append(Write(bytes.fromhex(a["raw_hex"])))
        elif "sleep" in a:
            self._out.append(Sleep(float(a["sleep"])))
        elif "stderr" in a:
            for n in range(int(a.get("repeat", 1))):
                self._repeat_n = n
                text = self._t(a["stderr"])
                data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
                pad_to = a.get("pad_to")
                if pad_to and len(data) < pad_to:
                    data = data[:-1] + b"." * (pad_to - len(data)) + b"\n"
                self._out.append(Stderr(data))
            self._repeat_n = 0
        elif "exit" in a:
            self._out.append(Exit(int(a["exit"])))
            self.finished = True
        elif "close_stdout" in a:
            self._out.append(CloseStdout())
        elif "hang_turn" in a:
            self._turn_response(msg)
            self._turn_started()
            self._user_message()
        elif "turn_response" in a:
            self._turn_response(msg)
        elif "turn_started" in a:
            self._turn_started()
        elif "user_message" in a:
            self._user_message()
        elif "agent_message" in a:
            text = a["agent_message"]
            self._agent_message(
                self.settings["text"] if text in (None, True) else self._t(text),
                int(a.get("deltas", self.settings["deltas"])),
                complete=bool(a.get("complete", True)),
            )
        elif "item" in a:
            item = self._t(a["item"])
            if not isinstance(item, dict) or not isinstance(item.get("type"), str) or not isinstance(item.get("id"), str):
                raise ScenarioError(f"item action needs an object with string type and id: {a['item']!r}")
            if self.turn is None:
                raise ScenarioError("item outside a turn")
            self._item(item)
        elif "end_turn" in a:
            self._end_turn(self._t(a["end_turn"]), self._t(a.get("error")))
        elif "settings_updated" in a:
            self._settings_updated(msg)
        else:  # pragma: no cover - rejected at load time
            raise ScenarioError(f"unknown action {dict(a)}")

    def _t(self, value: Any, *, as_json: bool = False) -> Any:
        """Expand templates in ``value`` (recursively).  A string that is exactly one
        placeholder keeps the JSON type of its value; inside longer strings values are inserted
        as text (strings bare, others as JSON), or always as JSON text when ``as_json``."""
        if isinstance(value, str):
            whole = _PLACEHOLDER.fullmatch(value)
            if whole and not as_json:
                return copy.deepcopy(self._lookup(whole.group(1)))

            def repl(m: re.Match[str]) -> str:
                v = self._lookup(m.group(1))
                if isinstance(v, str) and not as_json:
                    return v
                return json.dumps(v, separators=(",", ":"), ensure_ascii=False)

            return _PLACEHOLDER.sub(repl, value)
        if isinstance(value, list):
            return [self._t(v, as_json=as_json) for v in value]
        if isinstance(value, dict):
            return {k: self._t(v, as_json=as_json) for k, v in value.items()}
        return value

    def _lookup(self, name: str) -> Any:
        msg = self._msg
        if name == "id":
            return msg.id if msg is not None else None
        if name == "thread_id":
            return self._thread_id_of(msg)
        if name == "turn_id":
            return self.turn["id"] if self.turn else None
        if name == "turn":
            return self.turn
        if name == "thread":
            tid = self._thread_id_of(msg)
            return self.threads.get(tid) if tid else None
        if name == "client_message_id":
            return self._client_message_id
        if name == "now_ms":
            return self._clock_ms()
        if name == "n":
            return self._repeat_n
        head, _, rest = name.partition(".")
        if head == "env":  # the server's own environment, e.g. to echo a credential it was given
            return os.environ.get(rest, "")
        root = msg.params if head == "params" and msg is not None else (msg.obj if msg is not None else None)
        return _dig(root, rest.split(".")) if rest else root

    def _thread_id_of(self, msg: _Msg | None) -> str | None:
        if msg is not None and isinstance(msg.params, dict) and isinstance(msg.params.get("threadId"), str):
            return msg.params["threadId"]
        if self.turn_thread_id and self.active_turn:
            return self.turn_thread_id
        return self.current_thread_id

    # ---- wire helpers ------------------------------------------------------------------------

    def _emit(self, obj: Any) -> None:
        self._out.append(Write(encode_message(obj)))

    def _respond(self, msg: _Msg, result: Any) -> None:
        self._emit({"id": msg.id, "result": result})

    def _error(self, msg: _Msg, code: int, message: str) -> None:
        self._emit({"error": {"code": code, "message": message}, "id": msg.id})

    def _notify(self, method: str, params: Any) -> None:
        self._emit({"method": method, "params": params, "emittedAtMs": self._clock_ms()})

    def _next_request_id(self) -> int:
        rid = self._server_request_counter
        self._server_request_counter += 1
        return rid

    def _server_request(self, rid: Any, method: str, params: Any) -> None:
        self.pending_server_requests[rid] = method
        self._server_request_turn[rid] = self.turn["id"] if self.turn and self.active_turn else None
        self._emit({"id": rid, "method": method, "params": params})

    def _stderr_line(self, text: str) -> list[Action]:
        return [Stderr(f"{_log_stamp()}  {text}\n".encode("utf-8"))]

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _now_s(self) -> int:
        return self._clock_ms() // 1000

    # ---- defaults: a minimal real app-server ------------------------------------------------

    def _default(self, msg: _Msg) -> None:
        if msg.kind == "invalid":
            if self.settings["stderr_on_invalid"]:
                self._out.extend(self._stderr_line(
                    "ERROR codex_app_server_transport::transport: Failed to deserialize JSONRPCMessage: "
                    f"{msg.text[:200]}"
                ))
            return
        if msg.kind != "request":
            return  # notifications (initialized, unknown ones) and replies: nothing to say
        try:
            self._default_request(msg)
        except _RpcError as exc:
            self._error(msg, exc.code, exc.message)

    def _default_request(self, msg: _Msg) -> None:
        method = msg.method or ""
        params = msg.params
        if "params" not in msg.obj:
            raise _RpcError("Invalid request: missing field `params`")
        if method == "initialize":
            if self.initialized:
                raise _RpcError("Already initialized")
            self._accept_initialize(msg)
            self._respond(msg, {
                "userAgent": self.settings["user_agent"],
                "codexHome": self.settings["codex_home"],
                "platformFamily": self.settings["platform_family"],
                "platformOs": self.settings["platform_os"],
            })
            return
        if not self.initialized:
            raise _RpcError("Not initialized")
        handler = _DEFAULT_HANDLERS.get(method)
        if handler is None:
            raise _RpcError(f"Invalid request: unknown variant `{method}`")
        if method in _EXPERIMENTAL_METHODS and not self.experimental_api:
            raise _RpcError(f"{method} requires experimentalApi capability")
        if not isinstance(params, dict):
            raise _RpcError(f"Invalid request: invalid type: {type(params).__name__}, expected struct")
        if method in _THREAD_METHODS:
            tid = params.get("threadId")
            if not isinstance(tid, str):
                raise _RpcError("Invalid request: missing field `threadId`")
            try:
                uuid.UUID(tid)
            except ValueError as exc:
                raise _RpcError(f"invalid thread id: {exc}") from None
        handler(self, msg, params)

    def _accept_initialize(self, msg: _Msg) -> None:
        self.initialized = True
        caps = msg.params.get("capabilities") if isinstance(msg.params, dict) else None
        self.experimental_api = bool(isinstance(caps, dict) and caps.get("experimentalApi"))

    # -- threads

    def _make_thread(self, tid: str, params: Mapping[str, Any], status: str = "idle") -> dict[str, Any]:
        now = self._now_s()
        cwd = params.get("cwd") or self.settings["cwd"]
        return {
            "id": tid,
            "sessionId": tid,
            "preview": "",
            "ephemeral": bool(params.get("ephemeral", False)),
            "modelProvider": self.settings["model_provider"],
            "model": params.get("model") or self.settings["model"],
            "createdAt": now,
            "updatedAt": now,
            "recencyAt": now,
            "status": {"type": status},
            "path": None if params.get("ephemeral") else
            f"{self.settings['codex_home']}/sessions/rollout-{tid}.jsonl",
            "cwd": cwd,
            "cliVersion": self.settings["cli_version"],
            "source": "vscode",
            "threadSource": None,
            "agentNickname": None,
            "agentRole": None,
            "attachedToThreadId": None,
            "forkedFromId": None,
            "parentThreadId": None,
            "gitInfo": None,
            "name": None,
            "originator": "codexrt",
            "projectId": None,
            "reasoningEffort": None,
            "canAcceptDirectInput": True,
            "historyMode": params.get("historyMode") or "paginated",
            "turns": [],
        }

    def _thread_response(self, thread: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        sandbox = params.get("sandbox") or "read-only"
        return {
            "thread": thread,
            "model": thread["model"],
            "modelProvider": thread["modelProvider"],
            "cwd": thread["cwd"],
            "approvalPolicy": params.get("approvalPolicy") or "on-request",
            "approvalsReviewer": "user",
            "sandbox": _sandbox_policy(sandbox),
            "activePermissionProfile": None,
            "reasoningEffort": None,
            "serviceTier": None,
            "instructionSources": [],
            "disabledPluginIds": [],
            "runtimeWorkspaceRoots": [],
            "multiAgentMode": "explicitRequestOnly",
        }

    def _load_thread(self, thread: dict[str, Any], params: Mapping[str, Any]) -> None:
        tid = thread["id"]
        self.threads[tid] = thread
        self.turns.setdefault(tid, [])
        self.items.setdefault(tid, [])
        self.thread_settings[tid] = {
            "cwd": thread["cwd"],
            "model": thread["model"],
            "modelProvider": thread["modelProvider"],
            "approvalPolicy": params.get("approvalPolicy") or "on-request",
            "approvalsReviewer": "user",
            "sandboxPolicy": _sandbox_policy(params.get("sandbox") or "read-only"),
            "collaborationMode": None,
            "activePermissionProfile": None,
            "disabledPluginIds": [],
            "effort": None,
            "environments": None,
            "multiAgentMode": "explicitRequestOnly",
            "personality": None,
            "serviceTier": None,
            "summary": None,
        }
        self.current_thread_id = tid

    def _h_thread_start(self, msg: _Msg, params: dict[str, Any]) -> None:
        thread = self._make_thread(self._uuid(), params)
        self._load_thread(thread, params)
        self._respond(msg, self._thread_response(thread, params))
        self._notify("thread/started", {"thread": thread})

    def _known(self, tid: str) -> bool:
        return tid in self.threads or tid in self.settings["known_threads"] or bool(self.settings["resume_any_uuid"])

    def _h_thread_resume(self, msg: _Msg, params: dict[str, Any]) -> None:
        tid = params["threadId"]
        if not self._known(tid):
            raise _RpcError(f"no rollout found for thread id {tid}")
        thread = self.threads.get(tid) or self._make_thread(tid, params)
        thread = {**thread, "status": {"type": "idle"}, "turns": [] if params.get("excludeTurns") else list(self.turns.get(tid, []))}
        self._load_thread(thread, params)
        self._notify("thread/status/changed", {"threadId": tid, "status": {"type": "idle"}})
        self._respond(msg, self._thread_response(thread, params))

    def _h_thread_list(self, msg: _Msg, params: dict[str, Any]) -> None:
        data = [{**t, "turns": []} for t in reversed(list(self.threads.values())) if not t["ephemeral"]]
        limit = params.get("limit")
        if isinstance(limit, int) and limit >= 0:
            data = data[:limit]
        self._respond(msg, {"data": data, "nextCursor": None, "backwardsCursor": None, "readStates": {}})

    def _h_thread_read(self, msg: _Msg, params: dict[str, Any]) -> None:
        tid = params["threadId"]
        if not self._known(tid):
            raise _RpcError(f"no rollout found for thread id {tid}")
        thread = self.threads.get(tid) or self._make_thread(tid, params, status="notLoaded")
        turns = list(self.turns.get(tid, [])) if params.get("includeTurns") else []
        self._respond(msg, {"thread": {**thread, "turns": turns}, "readState": {"firstUnread": None, "revision": "0"}})

    def _h_thread_turns_list(self, msg: _Msg, params: dict[str, Any]) -> None:
        turns = list(self.turns.get(params["threadId"], []))
        if params.get("sortDirection", "desc") != "asc":
            turns.reverse()
        if params.get("itemsView") == "notLoaded":  # as the real server: the items left out
            turns = [{**t, "items": [], "itemsView": "notLoaded"} if isinstance(t, dict) else t for t in turns]
        self._respond(msg, {"data": turns, "nextCursor": None, "backwardsCursor": None})

    def _h_thread_items_list(self, msg: _Msg, params: dict[str, Any]) -> None:
        items = list(self.items.get(params["threadId"], []))
        if params.get("sortDirection") == "desc":
            items.reverse()
        self._respond(msg, {"data": items, "nextCursor": None, "backwardsCursor": None})

    def _h_thread_name_set(self, msg: _Msg, params: dict[str, Any]) -> None:
        tid = params["threadId"]
        if tid in self.threads:
            self.threads[tid]["name"] = params.get("name")
        self._respond(msg, {})
        self._notify("thread/name/updated", {"threadId": tid, "threadName": params.get("name")})

    def _h_thread_settings_update(self, msg: _Msg, params: dict[str, Any]) -> None:
        self._respond(msg, {})
        self._settings_updated(msg)

    def _settings_updated(self, msg: _Msg | None) -> None:
        params = msg.params if msg is not None and isinstance(msg.params, dict) else {}
        tid = self._thread_id_of(msg)
        current = self.thread_settings.setdefault(tid or "", {})
        for key, value in params.items():
            if key == "threadId":
                continue
            current["sandboxPolicy" if key == "sandbox" else key] = (
                _sandbox_policy(value) if key == "sandbox" and isinstance(value, str) else value
            )
        self._notify("thread/settings/updated", {"threadId": tid, "threadSettings": dict(current)})

    # -- turns

    def _new_turn(self, msg: _Msg) -> None:
        """Allocate the turn of a ``turn/start`` before any rule runs, so ``$turn_id`` is the
        same in notifications sent before and after the response."""
        params = msg.params if isinstance(msg.params, dict) else {}
        tid = self._uuid()
        self.turn = {
            "id": tid,
            "rootTurnId": tid,
            "items": [],
            "itemsView": "notLoaded",
            "status": "inProgress",
            "error": None,
            "startedAt": None,
            "completedAt": None,
            "durationMs": None,
        }
        self.turn_thread_id = params.get("threadId") if isinstance(params.get("threadId"), str) else self.current_thread_id
        self.active_turn = False
        self._turn_items = []
        self._turn_input = params.get("input")
        self._client_message_id = params.get("clientUserMessageId")

    def _h_turn_start(self, msg: _Msg, params: dict[str, Any]) -> None:
        tid = params["threadId"]
        if self.settings["require_loaded_thread"] and tid not in self.threads:
            raise _RpcError(f"thread not found: {tid}")
        self._turn_response(msg)
        self._turn_started()
        self._user_message()
        self._agent_message(self.settings["text"], int(self.settings["deltas"]))
        self._end_turn("completed")

    def _turn_response(self, msg: _Msg | None) -> None:
        if self.turn is None:
            raise ScenarioError("turn_response outside a turn/start")
        self.active_turn = True
        if msg is not None and msg.kind == "request":
            self._respond(msg, {"turn": dict(self.turn)})

    def _turn_started(self) -> None:
        if self.turn is None:
            raise ScenarioError("turn_started outside a turn/start")
        self.active_turn = True
        self._turn_started_ms = self._clock_ms()
        self.turn["startedAt"] = self._turn_started_ms // 1000
        self._notify("thread/status/changed", {"threadId": self.turn_thread_id, "status": {"type": "active", "activeFlags": []}})
        self._notify("turn/started", {"threadId": self.turn_thread_id, "turn": dict(self.turn)})

    def _item(self, item: dict[str, Any], *, complete: bool = True, deltas: list[str] | None = None) -> None:
        turn_id = self.turn["id"] if self.turn else None
        started = self._clock_ms()
        base = {"threadId": self.turn_thread_id, "turnId": turn_id}
        self._notify("item/started", {"item": item, **base, "startedAtMs": started})
        if deltas is not None:
            for d in deltas:
                self._notify("item/agentMessage/delta", {**base, "itemId": item["id"], "delta": d})
        if not complete:
            return
        done = dict(item)
        if deltas is not None:
            done["text"] = "".join(deltas)
        completed = self._clock_ms()
        done["completedAtMs"] = completed
        self._notify("item/completed", {"item": done, **base, "contentTokenCount": None, "completedAtMs": completed})
        if self.turn_thread_id is not None:
            self.items.setdefault(self.turn_thread_id, []).append(
                {"turnId": turn_id, "item": done, "startedAtMs": started, "completedAtMs": completed})
        if done["type"] != "userMessage":
            self._turn_items.append(done)

    def _user_message(self) -> None:
        content = self._turn_input if isinstance(self._turn_input, list) else []
        content = [
            {**c, "text_elements": c.get("text_elements", [])} if isinstance(c, dict) and c.get("type") == "text" else c
            for c in content
        ]
        self._item({
            "type": "userMessage",
            "id": self._uuid(),
            "clientId": self._client_message_id,
            "content": content,
            "startedAtMs": self._clock_ms(),
            "completedAtMs": None,
        })

    def _agent_message(self, text: str, n: int, *, complete: bool = True) -> None:
        self._item({
            "type": "agentMessage",
            "id": f"msg_{self._rng.getrandbits(64):016x}",
            "text": "",
            "phase": None,
            "moderation": None,
            "memoryCitation": None,
            "delivery": None,
            "questions": None,
            "startedAtMs": self._clock_ms(),
            "completedAtMs": None,
        }, complete=complete, deltas=_split(text, n))

    def _end_turn(self, status: str, error: Any = None) -> None:
        if self.turn is None:
            raise ScenarioError("end_turn outside a turn")
        now = self._clock_ms()
        if status == "failed" and error is not None:
            self._notify("error", {"error": error, "willRetry": False, "threadId": self.turn_thread_id, "turnId": self.turn["id"]})
        self.turn.update({
            "status": status,
            "error": error,
            "items": list(self._turn_items) if status == "completed" else [],
            "itemsView": "summary" if status == "completed" else "notLoaded",
            "completedAt": now // 1000,
            "durationMs": max(0, now - self._turn_started_ms) if self._turn_started_ms else None,
        })
        self.active_turn = False
        self._notify("thread/status/changed", {"threadId": self.turn_thread_id, "status": {"type": "idle"}})
        self._notify("turn/completed", {"threadId": self.turn_thread_id, "turn": dict(self.turn)})
        if self.turn_thread_id is not None:
            self.turns.setdefault(self.turn_thread_id, []).append(dict(self.turn))

    def _h_turn_interrupt(self, msg: _Msg, params: dict[str, Any]) -> None:
        if not (self.active_turn and self.turn and params.get("turnId") in (None, self.turn["id"])):
            raise _RpcError("no active turn to interrupt")
        self._respond(msg, {})
        self._end_turn("interrupted")
        # The real server resolves approvals of the interrupted turn without a client reply.
        for rid, turn_id in list(self._server_request_turn.items()):
            if turn_id == self.turn["id"]:
                self.pending_server_requests.pop(rid, None)
                del self._server_request_turn[rid]
                self._notify("serverRequest/resolved", {"threadId": self.turn_thread_id, "requestId": rid})

    # -- lists

    def _h_model_list(self, msg: _Msg, params: dict[str, Any]) -> None:
        efforts = [{"reasoningEffort": e, "description": e} for e in ("low", "medium", "high")]
        data = [
            {"id": m, "model": m, "displayName": m, "description": f"{m} (fake)", "hidden": False,
             "isDefault": i == 0, "defaultReasoningEffort": "medium", "supportedReasoningEfforts": efforts,
             "inputModalities": ["text"], "supportsPersonality": False, "upgrade": None}
            for i, m in enumerate([self.settings["model"], "mock-model-b"])
        ]
        self._respond(msg, {"data": data, "nextCursor": None})

    def _h_skills_list(self, msg: _Msg, params: dict[str, Any]) -> None:
        self._respond(msg, {"data": [{"cwd": self.settings["cwd"], "skills": [], "errors": []}]})

    def _h_mcp_status(self, msg: _Msg, params: dict[str, Any]) -> None:
        self._respond(msg, {"data": [], "nextCursor": None})

    def _h_collaboration_modes(self, msg: _Msg, params: dict[str, Any]) -> None:
        self._respond(msg, {"data": [
            {"name": "Plan", "mode": "plan", "model": None, "reasoning_effort": "medium"},
            {"name": "Default", "mode": "default", "model": None, "reasoning_effort": None},
        ]})

    def _h_loaded_list(self, msg: _Msg, params: dict[str, Any]) -> None:
        self._respond(msg, {"data": list(self.threads), "nextCursor": None})

    def _h_account_read(self, msg: _Msg, params: dict[str, Any]) -> None:
        self._respond(msg, {"account": None, "userId": None, "requiresOpenaiAuth": False, "workspaceRouting": None})


_DEFAULT_HANDLERS: dict[str, Callable[[ScenarioPeer, _Msg, dict[str, Any]], None]] = {
    "thread/start": ScenarioPeer._h_thread_start,
    "thread/resume": ScenarioPeer._h_thread_resume,
    "thread/list": ScenarioPeer._h_thread_list,
    "thread/read": ScenarioPeer._h_thread_read,
    "thread/turns/list": ScenarioPeer._h_thread_turns_list,
    "thread/items/list": ScenarioPeer._h_thread_items_list,
    "thread/name/set": ScenarioPeer._h_thread_name_set,
    "thread/settings/update": ScenarioPeer._h_thread_settings_update,
    "thread/loaded/list": ScenarioPeer._h_loaded_list,
    "turn/start": ScenarioPeer._h_turn_start,
    "turn/interrupt": ScenarioPeer._h_turn_interrupt,
    "model/list": ScenarioPeer._h_model_list,
    "skills/list": ScenarioPeer._h_skills_list,
    "mcpServerStatus/list": ScenarioPeer._h_mcp_status,
    "collaborationMode/list": ScenarioPeer._h_collaboration_modes,
    "account/read": ScenarioPeer._h_account_read,
}


def _sandbox_policy(mode: Any) -> Any:
    """``thread/start.sandbox`` is kebab-case; the policy object's ``type`` is camelCase (R-WIRE-11)."""
    if not isinstance(mode, str):
        return mode
    return {
        "read-only": {"type": "readOnly", "networkAccess": False},
        "workspace-write": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False,
                            "excludeTmpdirEnvVar": False, "excludeSlashTmp": False},
        "danger-full-access": {"type": "dangerFullAccess"},
    }.get(mode, {"type": mode})


def _split(text: str, n: int) -> list[str]:
    """Split ``text`` into ``n`` non-empty pieces (fewer when the text is shorter). The loopback
    model has the same helper: this module stays stdlib-only and cannot import the library."""
    n = max(1, min(n, len(text))) if text else 1
    size, extra = divmod(len(text), n)
    out, pos = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(text[pos:pos + step])
        pos += step
    return out


def _rust_id(rid: Any) -> str:
    return f"Integer({rid})" if isinstance(rid, int) else f"String({json.dumps(rid)})"


def _log_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
