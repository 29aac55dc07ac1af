"""Split from ``tests/e2e/test_secret_planting.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

from tests.e2e.test_secret_planting import REDACTED, _hex


def test_r_wire_9_a_crashing_command_prints_a_redacted_traceback(monkeypatch, capsys) -> None:
    """A bug in a command still shows its traceback on stderr (exit 1), redacted."""
    import argparse

    from codexrt._sansio._redact import register_process_secrets
    from codexrt_cli import _main

    secret = "crash-" + _hex()
    register_process_secrets([secret])

    def boom(args: argparse.Namespace) -> int:
        raise RuntimeError(f"mark-40 failed with {secret} and Bearer {_hex()}x")

    def parser(command: str | None = None) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog="codexrt")
        p.add_argument("--log-level", default="warning")
        p.set_defaults(func=boom)
        return p

    monkeypatch.setattr(_main, "build_parser", parser)
    assert _main.main([]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "mark-40" in err and REDACTED in err
    assert secret not in err and "Bearer " + REDACTED in err
