"""Built-in interaction policies (``Runtime.set_interaction_policy``): decline approvals, never
grant one. Each returns the method table's safe negative reply or None (leave it to the host)."""

from __future__ import annotations

from typing import Any

from codexrt._runtime._interactions import Interaction
from codexrt._sansio._methods import APPROVAL_KINDS, safe_negative_reply

__all__ = ["decline_all", "decline_all_in_read_only"]


async def decline_all(inter: Interaction) -> dict[str, Any] | None:
    """Policy: decline every approval (questions, forms and tools are left to the host)."""
    if inter.kind in APPROVAL_KINDS:
        return safe_negative_reply(inter.method, inter.params)
    return None


def _thread_is_read_only(inter: Interaction) -> bool:
    rt = inter.runtime
    info = rt.threads.get(inter.thread_id) if isinstance(inter.thread_id, str) else None
    eff = info.effective if info is not None else {}
    policy = eff.get("sandboxPolicy") if isinstance(eff, dict) else None
    if isinstance(policy, dict) and isinstance(policy.get("type"), str):
        return policy["type"] == "readOnly"
    if isinstance(eff.get("sandbox"), str):
        return eff["sandbox"] in ("read-only", "readOnly")
    return rt.desired.sandbox == "read-only"


async def decline_all_in_read_only(inter: Interaction) -> dict[str, Any] | None:
    """Policy: decline every approval of a thread whose sandbox is read-only (effective settings
    from ``thread/settings/updated`` first, else the runtime's desired settings)."""
    if inter.kind in APPROVAL_KINDS and _thread_is_read_only(inter):
        return safe_negative_reply(inter.method, inter.params)
    return None
