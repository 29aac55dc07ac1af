"""``codexrt acp``: an Agent Client Protocol agent on codexrt's runtime (``docs/acp.md``)."""
