"""Small Trio helpers shared by codexrt's nursery-owning context managers."""

from __future__ import annotations

import contextlib
from typing import AsyncIterator

import trio

__all__ = ["unwrap_single_group"]


@contextlib.asynccontextmanager
async def unwrap_single_group() -> AsyncIterator[None]:
    """Re-raise a one-exception group as that exception (trio-websocket's rule: a public
    context manager raises one exception per cause). Cancellation-only groups collapse to one
    ``trio.Cancelled`` so trio can route it."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        non_cancel = [e for e in leaves if not isinstance(e, trio.Cancelled)]
        if len(non_cancel) == 1:
            raise non_cancel[0] from None
        if not non_cancel:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup) -> "list[BaseException]":
    out: list[BaseException] = []
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            out.extend(_leaves(e))
        else:
            out.append(e)
    return out
