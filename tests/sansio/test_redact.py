"""Redaction rules (R-WIRE-9, docs/security.md): what is masked, what is left alone, known values
and their encodings, short values, structures, the line-by-line stream form and the log filter.
The end-to-end grep of every output is tests/e2e/test_secret_planting.py."""

from __future__ import annotations

import json
import logging
import re
import secrets
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codexrt._sansio._errors import CodexError, ConfigError, RpcError
from codexrt._sansio._redact import (
    CODEXRT_LOGGERS,
    REDACTED,
    LineRedactor,
    RedactingFilter,
    Redactor,
    looks_secret_name,
    secret_env_values,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "line, secret",
    [
        ("clone https://bob:hunter2hunter2@github.com/x.git", "hunter2hunter2"),
        ("remote https://ghtok1234567890@github.com/x.git", "ghtok1234567890"),
        ("Proxy-Authorization: Basic Zm9vOmJhcjEyMw==", "Zm9vOmJhcjEyMw=="),
        ("sent bearer eyJhbGci.payload.sig", "eyJhbGci.payload.sig"),
        ('{"Authorization": "Bearer abcdef123", "n": 1}', "abcdef123"),
        ("Cookie: session=abcdef0123; other=1", "abcdef0123"),
        ("key sk-ant-api03-abcdefghij end", "sk-ant-api03-abcdefghij"),
        ("token ghp_abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwx"),
        ("pat github_pat_11ABCDEFG0123456789_abcdef", "github_pat_11ABCDEFG0123456789_abcdef"),
        ("gitlab glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789"),
        ("slack xoxb-1234-5678-abcdefgh", "xoxb-1234-5678-abcdefgh"),
        ("aws AKIAIOSFODNN7EXAMPLE done", "AKIAIOSFODNN7EXAMPLE"),
        ("google AIzaSyA1234567890abcdefghijklmnopqrstu", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
        ("hf hf_abcdefghijklmnopqrstuvwxyz", "hf_abcdefghijklmnopqrstuvwxyz"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "eyJzdWIiOiIxIn0"),
        ("GH_PAT=abc123xyz", "abc123xyz"),
        ("X-Auth-Token: q1w2e3r4t5", "q1w2e3r4t5"),
        ("HTTP_AUTH=zzz999yyy", "zzz999yyy"),
        ('{"db_password": "with \\"quote\\" inside"}', "inside"),
        ("DB_PASSPHRASE='a b c d'", "a b c d"),
    ],
)
def test_r_wire_9_shapes_schemes_and_names_are_masked(line: str, secret: str) -> None:
    out = Redactor()(line)
    assert secret not in out and REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "INFO thread started; tokens used: 42 (keyboard layout)",
        "the bearer token is missing; use basic auth",
        "GIT_AUTHOR_NAME=Alice GIT_AUTHOR_EMAIL=alice@example.com",
        "see https://example.com/a@b and me@example.com",
        "task-manager finished; disk-usage ok",
        "author: Bob",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor()(text) == text


def test_names_that_look_secret() -> None:
    secret = ["OPENAI_API_KEY", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "MY_CREDENTIALS",
              "GITHUB_PAT", "X_AUTH", "HTTP_AUTHORIZATION", "codex-auth-token", "SSH_PASSPHRASE"]
    plain = ["PATH", "HOME", "GIT_AUTHOR_NAME", "SSH_AUTH_SOCK", "PATCH", "PATHEXT", "AUTHOR"]
    assert [n for n in secret if not looks_secret_name(n)] == []
    assert [n for n in plain if looks_secret_name(n)] == []
    assert secret_env_values({"GH_TOKEN": "v1", "PATH": "/bin", "X_KEY": ""}) == ["v1"]


def test_r_wire_9_known_values_and_their_encodings_are_masked() -> None:
    value = 'p@ss "word" ' + secrets.token_hex(6)
    r = Redactor([value])
    assert value not in r(f"x {value} y")
    escaped = json.dumps(value)[1:-1]
    assert escaped not in r(f'{{"v": "{escaped}"}}')
    quoted = urllib.parse.quote(value, safe="")
    assert quoted not in r(f"GET /x?q={quoted}")
    multi = "line-one-" + secrets.token_hex(4) + "\nline-two-" + secrets.token_hex(4)
    r.add_secret(multi)
    for part in multi.splitlines():
        assert part not in r(f"stderr: {part}")


def test_short_known_values_are_masked_only_where_named() -> None:
    """Decision (docs/security.md): a known value under 8 characters is not masked bare —
    masking "false" or "abc" everywhere would destroy output — but is masked as NAME=value."""
    r = Redactor(["abc12"])
    assert r("the abc12 stays") == "the abc12 stays"
    assert r("MY_TOKEN=abc12") == f"MY_TOKEN={REDACTED}"


def test_known_values_are_masked_by_every_redactor_of_the_process() -> None:
    value = "proc-" + secrets.token_hex(8)
    holder = Redactor([value])
    assert value not in Redactor()(f"elsewhere {value}")
    del holder  # issue 35: a value lives in the registry as long as a holder holds it


def test_redaction_before_truncation_keeps_no_prefix() -> None:
    value = "known-" + secrets.token_hex(12)
    r = Redactor([value])
    line = "x" * 1995 + value
    assert value[:5] not in r(line)[:2000]


def test_structures_are_redacted_by_value_and_by_key() -> None:
    value = "val-" + secrets.token_hex(8)
    r = Redactor([value])
    data = {"apiKey": "unregistered-1", "list": [value, {"password": "unregistered-2"}], "n": 3,
            "ok": "https://u:pw12345678@h/"}
    out = r.redact_obj(data)
    text = json.dumps(out)
    assert "unregistered" not in text and value not in text and "pw12345678" not in text
    assert out["n"] == 3
    ids = {"interactionKey": "ik-123456789"}
    assert r.redact_obj(ids, by_key=False) == ids  # codexrt's own identifiers are not secrets


def test_line_redactor_masks_a_value_on_the_line_after_its_name() -> None:
    lr = LineRedactor(Redactor())
    lines = ["{", '  "client_secret":', '    "s3cr3t-value-1",', '  "n": 1', "}"]
    out = [lr(line) for line in lines]
    assert "s3cr3t-value-1" not in "\n".join(out)
    assert out[3] == '  "n": 1'  # only the next value


@settings(max_examples=200, deadline=None)
@given(prefix=st.text(max_size=40), suffix=st.text(max_size=40),
       secret=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e, blacklist_characters="[]"),
                      min_size=8, max_size=40))
def test_r_wire_9_a_known_value_never_survives_and_redaction_is_idempotent(prefix, secret, suffix):
    r = Redactor([secret], shared=False)  # arbitrary values must not mask other tests' text
    out = r(prefix + secret + suffix)
    if secret not in REDACTED:
        assert secret not in out
    assert r(out) == out


def test_errors_are_redacted_when_made() -> None:
    value = "err-" + secrets.token_hex(8)
    holder = Redactor([value])  # noqa: F841 (held for the test)
    e = CodexError(f"failed with {value}", details={"cmd": f"x --token {value}", "n": 1})
    assert value not in str(e) and value not in repr(e) and value not in json.dumps(e.to_dict())
    rpc = RpcError("Authorization: Bearer abcdefgh1234", rpc_code=-32600, data={"api_key": "zz-unknown-1"})
    assert "abcdefgh1234" not in json.dumps(rpc.to_dict()) and "zz-unknown-1" not in json.dumps(rpc.to_dict())
    assert isinstance(ConfigError("x"), CodexError)


def test_log_filter_redacts_message_arguments_and_tracebacks() -> None:
    value = "log-" + secrets.token_hex(8)
    holder = Redactor([value])  # noqa: F841 (held for the test)
    records = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Keep()
    log = logging.getLogger("codexrt.connection")
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.DEBUG)
    try:
        log.debug("stderr: %s and Bearer %s", value, "abcdefgh12345")
        try:
            raise RuntimeError(f"boom {value}")
        except RuntimeError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    text = "\n".join(records)
    assert len(records) == 2 and "RuntimeError" in text
    assert value not in text and "abcdefgh12345" not in text


def test_every_codexrt_logger_has_the_filter() -> None:
    import codexrt  # noqa: F401  (installs the filter)

    names = set()
    for path in [*ROOT.joinpath("codexrt").rglob("*.py"), *ROOT.joinpath("codexrt_cli").rglob("*.py")]:
        names |= set(re.findall(r"getLogger\(\"(codexrt[^\"]*)\"\)", path.read_text()))
    assert names and names <= set(CODEXRT_LOGGERS), names - set(CODEXRT_LOGGERS)
    for name in CODEXRT_LOGGERS:
        assert any(isinstance(f, RedactingFilter) for f in logging.getLogger(name).filters), name


@pytest.mark.parametrize("line", [
    "Set-Coo\u212Aie: session=abcdef123456",  # a Kelvin sign folds to "k" under (?i)
    "AUTHOR\u0130ZATION: opaque-credential-value",  # a dotted capital I folds to "i"
    "BEAR\u0130 is prose, but Bearer abc.DEF-123_xyz is not",
])
def test_r_wire_9_non_ascii_text_still_runs_the_case_folding_rules(line: str) -> None:
    """The cheap word checks that skip a rule on most lines (issue 34) are only used on ASCII
    text; a line with other characters runs every rule, as ``(?i)`` also folds a few of them."""
    out = Redactor()(line)
    assert "[REDACTED]" in out
    assert "abcdef123456" not in out and "opaque-credential-value" not in out and "abc.DEF-123_xyz" not in out


def test_a_typical_app_server_warning_line_is_left_as_it_is() -> None:
    """The line the real server writes several times per turn holds no secret: every rule
    leaves it alone (and most are skipped by their cheap checks)."""
    line = ("\x1b[2m2026-12-02T12:36:30.711410Z\x1b[0m \x1b[33m WARN\x1b[0m \x1b[2mcodex_models_manager::model_info"
            "\x1b[0m\x1b[2m:\x1b[0m Unknown model mock-model is used. This will use fallback model metadata.")
    assert LineRedactor(Redactor())(line) == line


_PIECES = ["sk-", "sk-proj-", "ghp_", "github_pat_", "glpat-", "xoxb-", "AKIA", "ASIA", "AIza", "hf_", "eyJ",
           "eyJhbGciOi.eyJzdWIi.sig", "Authorization", "authorization: ", "Cookie", "x-api-key", "Bearer ",
           "bearer ", "Basic ", "password=", "API_KEY: ", '"token": "', "https://", "user:pw@", "@", "://",
           ":", "=", " ", "\n", '"', "'", "abcdefghij0123456789", "ABCDEFGHIJKLMNOP", "_-.~+/", "K", "\u212a",
           "\u0130", "é", "task-manager", "disk-usage",
           # the words a secret-looking name is spelled with, whole and in parts (issue 34: a
           # line without any of them skips the named-value scan)
           "PGPASSWORD", "pass", "WD", "phrase", "credential", "client_secret", "Secret", "AUTH", "auth_",
           "KEY", "Keys", "token", "Token", "GITHUB_PAT", "pat", "apikey", "cookie", "SSH_AUTH_SOCK", "KEYBOARD",
           "pattern", "2026-12-02T17", "::"]


def _every_rule(text: str) -> str:
    """The redactor's rules run on every line, none skipped: what ``Redactor.__call__`` did
    before its cheap per-rule checks (issue 34)."""
    from codexrt._sansio import _redact as r

    text = r._HEADER_LINE.sub(r._mask, text)
    text = r._NAMED.sub(r._mask_named, text)
    text = r._URL_USERINFO.sub(r._mask_userinfo, text)
    text = r._SCHEME.sub(r._mask_scheme, text)
    return r._SHAPES.sub(r.REDACTED, text)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
def test_r_wire_9_the_cheap_checks_never_change_what_is_redacted(text: str) -> None:
    """Skipping a rule whose literal a line lacks is only a shortcut: built from the rules' own
    pieces (case-folding letters included), every line comes out as if every rule had run."""
    assert Redactor()(text) == _every_rule(text)


_NAME_PARTS = ["pass", "PASS", "word", "WD", "phrase", "cred", "ential", "CREDENTIAL", "secret", "SECRET", "s",
               "auth", "AUTH", "orization", "key", "KEY", "Key", "token", "Token", "TOKEN", "pat", "PAT", "api",
               "API", "access", "Access", "id", "ID", "gh", "github", "_", "-", ".", "1", "x", "X", "cookie",
               "set-", "proxy-", "x-api-", "Error", "Usage", "max", "board", "SOCK"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_NAME_PARTS), min_size=1, max_size=8).map("".join))
def test_r_wire_9_every_secret_name_spells_one_of_the_name_words(name: str) -> None:
    """Issue 34: a line skips the named-value scan when its lowered text holds none of
    ``_NAME_WORDS``; that is only right if no name the scan would mask can be spelled without
    one of them (headers included)."""
    from codexrt._sansio import _redact as r

    if r._secret_field(name):
        assert any(w in name.lower() for w in r._NAME_WORDS), name
