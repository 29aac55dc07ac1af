"""Split from ``tests/e2e/test_run_cli.py`` by layer (issue #20):
the tests that run in-process on Trio."""

from __future__ import annotations

class _FakeTTY:
    """A stderr that says it is a terminal and records what is written."""

    def __init__(self) -> None:
        self.written = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.written += s
        return len(s)

    def flush(self) -> None:
        pass


async def test_r_int_3_status_never_draws_over_an_approval_prompt(autojump_clock):
    """While a prompt waits, the 1 s ticker draws nothing and a status line goes *above* the
    prompt, which is written again; once answered the ticker draws again."""
    import trio

    from codexrt_cli._run import _PROMPT, _Status

    err = _FakeTTY()
    status = _Status(err)
    status.started({"id": "c1", "type": "commandExecution", "command": "touch marker"})
    status.prompt = _PROMPT
    err.written = _PROMPT
    async with trio.open_nursery() as n:
        n.start_soon(status.ticker)
        await trio.sleep(5)  # five ticks, virtual time
        assert err.written == _PROMPT
        status.line("✓ something else (completed)")
        assert err.written.endswith("✓ something else (completed)\n" + _PROMPT)
        status.prompt = None
        before = err.written
        await trio.sleep(1.5)
        assert err.written != before and "running: touch marker" in err.written[len(before):]
        n.cancel_scope.cancel()
