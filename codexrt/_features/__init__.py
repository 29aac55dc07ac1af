"""Layer 5 — features built on a Runtime: history readers, catalogs, helper runs and titles, the
live edit ledger. May import every layer below (``_sansio``, ``_io``, ``_connection``,
``_runtime``), never the public facades or ``_serve`` (``docs/architecture.md``)."""
