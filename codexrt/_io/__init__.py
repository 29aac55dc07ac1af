"""Layer 2 — OS-facing code with no Runtime: process and WebSocket transports, the host-death
reaper, CLI discovery and probes, the workspace diff, rollout files and the session index, the
edit store and private files, bounded retries. May import ``codexrt._sansio`` and
``codexrt._version`` only (``docs/architecture.md``)."""
