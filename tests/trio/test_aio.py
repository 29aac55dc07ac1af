"""Split from ``tests/e2e/test_aio.py`` by layer (issue #20):
the tests that run in-process (asyncio here, Trio as its guest) and start no process."""

from __future__ import annotations

import asyncio

import pytest

import codexrt
import codexrt.aio
from tests.e2e.test_aio import WAIT, _open


def test_errors_from_queueing_surface_on_wait():
    async def main():
        async with asyncio.timeout(WAIT), _open() as rt:
            op = rt.send("x", additional_context={"k": {"kind": "nonsense", "value": "v"}})
            with pytest.raises(codexrt.ConfigError):
                await op.wait()
            with pytest.raises(codexrt.ConfigError):
                rt.send(123)  # type: ignore[arg-type]

    asyncio.run(main())


def test_trio_open_runtime_under_asyncio_says_what_to_use():
    async def main():
        async with codexrt.open_runtime():
            pass

    with pytest.raises(RuntimeError, match="codexrt.aio"):
        asyncio.run(main())
