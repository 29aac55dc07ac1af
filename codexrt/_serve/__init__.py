"""Layer 7 — ``codexrt serve``: the daemon command loop, its commands and the shipped wire
schema. May import the whole library; only ``codexrt_cli`` imports it (``docs/architecture.md``)."""
