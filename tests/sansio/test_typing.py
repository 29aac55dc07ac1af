"""Split from ``tests/e2e/test_typing.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

def test_runtime_options_name_every_runtime_config_field() -> None:
    """``open_runtime(**options)`` is typed by ``RuntimeOptions``: it must list exactly the
    fields of ``RuntimeConfig`` (a new field without a type here would be rejected by mypy)."""
    import attrs

    from codexrt import RuntimeConfig
    from codexrt._runtime._options import RuntimeOptions

    assert set(RuntimeOptions.__annotations__) == {f.name for f in attrs.fields(RuntimeConfig)}
