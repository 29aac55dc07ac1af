"""The ``codexrt`` entry point: quick ``--version`` and ``--help`` (only what they print is
imported), one help line per command kept in step with its module, and global flags accepted
after the sub-command too (issue 22)."""

from __future__ import annotations

import argparse

import pytest

from codexrt_cli import _main


def test_each_module_registers_its_command_with_the_listed_help_line():
    parser = _main.build_parser()  # every module imported
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    registered = {choice.dest: choice.help for choice in sub._choices_actions}
    assert registered == {name: help_line for name, (_m, help_line) in _main.COMMANDS.items()}


def test_log_level_is_accepted_before_and_after_the_sub_command():
    before = _main.build_parser("diff").parse_args(["--log-level", "debug", "diff"])
    after = _main.build_parser("diff").parse_args(["diff", "--log-level", "info"])
    neither = _main.build_parser("diff").parse_args(["diff"])
    assert (before.log_level, after.log_level, neither.log_level) == ("debug", "info", "warning")


@pytest.mark.parametrize(("argv", "command"), [
    (["run", "hi"], "run"), (["--log-level", "debug", "serve"], "serve"), (["--version"], None),
    (["--log-level", "info"], None),
])
def test_command_is_found_past_global_flags(argv, command):
    assert _main._command_in(argv) == command


def test_cli_support_names_resolve():
    """Every name the CLI takes from ``codexrt._serve._cli_support`` loads (issue #20: the CLI
    imports only public names and ``codexrt._serve``)."""
    from codexrt._serve import _cli_support

    for name in _cli_support.__all__:
        assert getattr(_cli_support, name) is not None
    with pytest.raises(AttributeError):
        getattr(_cli_support, "no_such_name")
