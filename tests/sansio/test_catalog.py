"""Split from ``tests/trio/test_catalog.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

def test_r_cat_1_serve_accepts_skills_on_send_and_a_selection_on_list_skills():
    import json

    from codexrt._serve._codec import BadCommand, Command, parse_command
    from tests._support import schema_problem

    ok = parse_command(json.dumps({"id": "1", "command": "codex.send", "params": {
        "channelId": "c", "message": "hi", "skills": [{"name": "lint", "path": "/a/SKILL.md", "cwd": "/a"}]}}).encode())
    assert isinstance(ok, Command)
    bad = parse_command(json.dumps({"id": "2", "command": "codex.send", "params": {
        "channelId": "c", "message": "hi", "skills": [{"name": "lint"}]}}).encode())
    assert isinstance(bad, BadCommand)
    sel = parse_command(json.dumps({"id": "3", "command": "codex.listSkills", "params": {
        "channelId": "c", "selected": [{"name": "lint", "path": "/a/SKILL.md"}]}}).encode())
    assert isinstance(sel, Command)
    result = {"data": [], "skills": [], "errors": [], "selected": [], "stale": [{"name": "x", "path": "/p", "cwd": None}]}
    assert schema_problem(result, "commandResult/codex.listSkills") is None
