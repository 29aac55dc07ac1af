"""Split from ``tests/trio/test_transport_ws.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import pytest

from codexrt import RuntimeConfig
from codexrt._sansio._errors import ConfigError
from codexrt._io._transport_ws import Endpoint, Secret, check_endpoint_policy, read_token
from tests.trio.test_transport_ws import TOKEN


def test_endpoint_parsing_and_loopback():
    e = Endpoint.parse("ws://127.0.0.1:4500")
    assert (e.scheme, e.host, e.port, e.path, e.url, e.is_loopback) == ("ws", "127.0.0.1", 4500, "/",
                                                                      "ws://127.0.0.1:4500", True)
    assert Endpoint.parse("ws://[::1]:9/x").url == "ws://[::1]:9/x" and Endpoint.parse("ws://[::1]:9").is_loopback
    assert Endpoint.parse("ws://localhost:1").is_loopback
    assert not Endpoint.parse("ws://10.0.0.5:1").is_loopback
    assert not Endpoint.parse("ws://build-box:1").is_loopback  # a name may resolve anywhere
    u = Endpoint.parse("unix:///run/codex/app.sock")
    assert (u.scheme, u.path, u.url, u.is_loopback) == ("unix", "/run/codex/app.sock", "unix:///run/codex/app.sock", True)


@pytest.mark.parametrize("bad", ["127.0.0.1:4500", "wss://h:1", "http://h:1", "ws://h", "unix://rel/path",
                                 "ws://user:pw@127.0.0.1:1", "ws://127.0.0.1:1/?token=x", "ws://127.0.0.1:99999"])
def test_bad_endpoints_are_config_errors(bad):
    with pytest.raises(ConfigError) as info:
        Endpoint.parse(bad)
    assert info.value.code == "BAD_ENDPOINT"
    assert "pw" not in info.value.message and "token=x" not in info.value.message


def test_token_from_file_or_env_and_never_shown(tmp_path):
    f = tmp_path / "tok"
    f.write_text(f"  {TOKEN}\n")
    s = read_token(token_file=f)
    assert s == Secret(TOKEN) and s.reveal() == TOKEN
    assert TOKEN not in repr(s) and TOKEN not in str(s) and TOKEN not in f"{s!r} {s}"
    assert read_token(token_env="CX_TOK", env={"CX_TOK": TOKEN}).reveal() == TOKEN
    assert read_token() is None
    for kw in ({"token_file": tmp_path / "missing"}, {"token_env": "CX_TOK", "env": {}},
               {"token_file": f, "token_env": "CX_TOK"}):
        with pytest.raises(ConfigError) as info:
            read_token(**kw)
        assert info.value.code == "TOKEN_UNAVAILABLE" and TOKEN not in info.value.message
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError):
        read_token(token_file=tmp_path / "empty")
    import pickle

    with pytest.raises(TypeError):
        pickle.dumps(s)


def test_remote_ws_needs_opt_in_and_token():
    remote = Endpoint.parse("ws://10.1.2.3:4500")
    check_endpoint_policy(Endpoint.parse("ws://127.0.0.1:1"), has_token=False, allow_remote=False)
    with pytest.raises(ConfigError) as info:
        check_endpoint_policy(remote, has_token=True, allow_remote=False)
    assert info.value.code == "REMOTE_NOT_ALLOWED"
    with pytest.raises(ConfigError):
        check_endpoint_policy(remote, has_token=False, allow_remote=True)
    check_endpoint_policy(remote, has_token=True, allow_remote=True)


def test_runtime_config_attached_candidate_and_checks(tmp_path):
    cands = RuntimeConfig(connect="unix:///tmp/x.sock").candidate_factories()
    assert [label for label, _ in cands] == ["unix:///tmp/x.sock"]  # the single candidate
    with pytest.raises(ConfigError):
        RuntimeConfig(connect="ws://10.0.0.1:1", env={}).candidate_factories()
    with pytest.raises(ConfigError):
        RuntimeConfig(connect="ws://10.0.0.1:1", allow_remote=True, env={}).candidate_factories()
    with pytest.raises(ConfigError) as info:
        RuntimeConfig(connect="ws://127.0.0.1:1", token_env="NOPE_TOKEN", env={}).candidate_factories()
    assert info.value.code == "TOKEN_UNAVAILABLE"
    ok = RuntimeConfig(connect="ws://10.0.0.1:1", allow_remote=True, token_env="T", env={"T": TOKEN})
    assert [label for label, _ in ok.candidate_factories()] == ["ws://10.0.0.1:1"]
    assert TOKEN not in repr(ok)
    with pytest.raises(ConfigError):
        RuntimeConfig(connect="ws://127.0.0.1:1", transports=[]).candidate_factories()


def test_serve_options_reach_the_runtime_config():
    import argparse

    from codexrt_cli import _serve

    parser = argparse.ArgumentParser()
    _serve.add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", "--connect", "ws://10.0.0.2:4500", "--token-env", "CX_T", "--allow-remote"])
    rc = _serve.config_from_args(args).runtime
    assert (rc.connect, rc.token_env, rc.token_file, rc.allow_remote) == ("ws://10.0.0.2:4500", "CX_T", None, True)
    assert _serve.config_from_args(parser.parse_args(["serve"])).runtime.connect is None


def test_r_wire_9_token_with_whitespace_or_control_character_is_bad_token(tmp_path):
    """A token is one line of printable characters: an inner newline, tab or ESC is a typed
    configuration error whose message names the source, never the value."""
    for bad in ("abc123\ndef456", "abc123\tdef456", "abc123\x1bdef456", "abc123\u2028def456"):
        f = tmp_path / "tok"
        f.write_text(bad)
        for kw in ({"token_file": f}, {"token_env": "CX_TOK", "env": {"CX_TOK": bad}}):
            with pytest.raises(ConfigError) as info:
                read_token(**kw)
            assert info.value.code == "BAD_TOKEN"
            text = repr(info.value) + str(info.value.to_dict())
            assert "abc123" not in text and "def456" not in text
    f.write_text("  good-token-1\n")
    assert read_token(token_file=f).reveal() == "good-token-1"
