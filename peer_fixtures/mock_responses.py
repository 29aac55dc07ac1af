"""The loopback model moved into the library (``codexrt.loopback``, so an installed wheel has
it). This name stays for the tests and scripts that import it: it *is* that module (one module
object, so a monkeypatch through either name is seen by both). ``python -m
peer_fixtures.mock_responses`` still runs the standalone server."""

import sys

from codexrt.loopback import _model

if __name__ == "__main__":
    raise SystemExit(_model.main())
sys.modules[__name__] = _model
