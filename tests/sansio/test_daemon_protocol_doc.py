"""The examples of ``docs/daemon-protocol.md``, statically (issue 31): every command line is
one ``serve`` accepts (parsed into a ``Command``, fits ``#/$defs/command`` and its params
schema), and every output line shown whole (no ``…``) fits ``#/$defs/outputLine``. Running them
against the real server: ``tests/real/test_daemon_protocol_examples_real.py``."""

from __future__ import annotations

import json

from codexrt._serve._codec import Command, parse_command
from tests._support import schema_problem
from tests._doc_examples import ELIDED, blocks, item_kind


def test_every_doc_command_is_accepted_and_every_whole_line_fits_the_schema():
    commands = whole = 0
    for line, items, _reason in blocks():
        for item in items:
            where = f"daemon-protocol.md:{line}: {json.dumps(item)[:120]}"
            if item_kind(item) == "command":
                parsed = parse_command(json.dumps(item).encode())
                assert isinstance(parsed, Command), (where, parsed)
                assert schema_problem(item, "command") is None, where
                assert schema_problem(item.get("params", {}), f"commandParams/{item['command']}") is None, where
                commands += 1
            elif ELIDED not in json.dumps(item, ensure_ascii=False):
                assert schema_problem(item, "outputLine") is None, where
                whole += 1
    assert commands >= 30 and whole >= 5, (commands, whole)
