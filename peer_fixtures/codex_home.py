"""The throw-away ``CODEX_HOME`` moved into the library (``codexrt.loopback``). This name stays
for the tests that import it: it *is* that module."""

import sys

from codexrt.loopback import _home

sys.modules[__name__] = _home
