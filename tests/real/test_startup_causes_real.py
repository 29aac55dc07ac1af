"""Start-up causes against the real ``codex app-server`` (pinned and old) — issue 33.

* an empty ``CODEX_HOME`` with no provider (the built-in OpenAI one needs a login): the first
  operation fails with ``NOT_LOGGED_IN`` right after the handshake — the model is never asked
  and no turn is started (the mock model, which a turn could not reach anyway, sees nothing);
* a ``config.toml`` the CLI refuses at start (``approval_policy = "untrusted"``, removed in
  recent releases): the error carries the CLI's own words and no "Update the Codex CLI" hint.

Run inside the loopback-only network namespace, like every real test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import codexrt
from codexrt import CliUnavailable, RuntimeConfig
from peer_fixtures.codex_home import codex_env

WAIT = 60  # a bound, not a speed target: the verdict comes from one local account/read


def _empty_home(tmp_path: Path, text: str = "") -> Path:
    home = tmp_path / "empty-codex-home"
    home.mkdir()
    # No provider, no login; plugin sync and analytics off so nothing would reach out.
    (home / "config.toml").write_text(text + "[analytics]\nenabled = false\n\n[features]\nplugins = false\n")
    return home


@pytest.mark.parametrize("which", ["codex_bin", "codex_bin_old"])
async def test_not_logged_in_fails_the_first_operation_with_how_to_log_in(request, tmp_path, real_cwd, which):
    binary = request.getfixturevalue(which)
    home = _empty_home(tmp_path)
    cfg = RuntimeConfig(codex_bin=str(binary), codex_home=str(home), cwd=str(real_cwd), env=codex_env(home))
    with trio.fail_after(WAIT):
        async with codexrt.open_runtime(cfg) as rt:
            with rt.subscribe() as events:
                result = await rt.send("hello").wait()
                kinds = []
                while (ev := events.get_nowait()) is not None:
                    kinds.append(ev.kind)
    assert result.status == "failed" and result.error is not None, result
    assert result.error.code == "NOT_LOGGED_IN", result.error
    assert "codex login" in result.error.message and "loopback" in result.error.message
    assert "turnStarted" not in kinds and "threadStarted" not in kinds


async def test_a_setting_the_cli_refuses_is_named_with_its_own_words(codex_bin, tmp_path, real_cwd):
    home = _empty_home(tmp_path, 'approval_policy = "untrusted"\n')
    env = {**codex_env(home), "CODEX_BIN": str(codex_bin)}  # discovered, not explicit: the R-CLI-6 report
    cfg = RuntimeConfig(codex_home=str(home), cwd=str(real_cwd), env=env)
    with trio.fail_after(WAIT):
        async with codexrt.open_runtime(cfg) as rt:
            with pytest.raises(CliUnavailable) as info:
                await rt.ensure_started()
    err = info.value
    assert "approval_policy" in err.message, err.message
    hint = err.details["codexCliUnavailable"]["hint"]
    assert "Update the Codex CLI" not in hint and "approval_policy" in hint
