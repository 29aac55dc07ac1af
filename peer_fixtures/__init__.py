"""Test peers for codexrt: a scripted fake app-server, a loopback Responses-API mock, and
helpers to find the pinned real ``codex`` binary. Stdlib only where a script runs as a child."""
