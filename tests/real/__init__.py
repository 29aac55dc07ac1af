"""Tests against the real, pinned ``codex app-server`` binary with a loopback model (issue 4)."""
