"""The thin command line of codexrt: ``codexrt serve`` (the sidecar) and user commands."""
