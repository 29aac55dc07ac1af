"""Split from ``tests/trio/test_support_waits.py`` by layer (issue #20):
the tests that run no event loop and start no process."""

from __future__ import annotations

import pytest

from tests._support import wait_until_blocking


def test_wait_until_blocking_fails_naming_what_it_waited_for():
    with pytest.raises(AssertionError, match="timed out after 0.05 s waiting for the sun"):
        wait_until_blocking(lambda: False, "the sun", timeout=0.05, interval=0.01)
    wait_until_blocking(lambda: True, "nothing")
