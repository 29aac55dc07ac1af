"""Split from ``tests/trio/test_runtime_correlation.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

def test_r_set_2_match_is_by_the_fields_sent():
    from codexrt._runtime._dispatch import _settings_match
    eff = {"model": "m", "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False},
           "collaborationMode": {"mode": "plan", "settings": {"model": "m", "developer_instructions": "long"}}}
    assert _settings_match({"model": "m", "sandboxPolicy": {"type": "workspaceWrite"}}, eff)
    assert _settings_match({"collaborationMode": {"mode": "plan", "settings": {"model": "m",
                                                                            "developer_instructions": None}}}, eff)
    assert not _settings_match({"sandboxPolicy": {"type": "readOnly"}}, eff)
    assert not _settings_match({"effort": "high"}, eff)  # a field the server did not confirm
