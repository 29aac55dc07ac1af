"""Layer 4 — the runtime: launch configuration, lifecycle and generations, operations and their
stop paths, interactions and plans, the event stream. May import ``codexrt._sansio``,
``codexrt._io`` and ``codexrt._connection`` (``docs/architecture.md``)."""
