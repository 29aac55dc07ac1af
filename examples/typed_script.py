"""A typed codexrt script: CI checks it with ``mypy --strict`` (tests/e2e/test_typing.py), and
checks that each of six planted mistakes fails it: an unknown keyword, an approval policy
outside the protocol, a non-str message, a misspelt event kind, a misspelt payload key, and a
decision that does not exist.

Run it with a Codex CLI on PATH (or ``CODEX_BIN``): ``python examples/typed_script.py "Hello"``.
"""

from __future__ import annotations

import asyncio
import sys

import codexrt
import codexrt.aio
import codexrt.blocking


async def ask(text: str) -> codexrt.OperationResult:
    settings = codexrt.Settings(approval_policy="on-request", sandbox="read-only")
    async with codexrt.aio.open_runtime(cwd=".", settings=settings) as rt:
        op: codexrt.aio.AioOperation = rt.send(text)
        async for ev in op.events():
            # ``ev.kind == …`` narrows the event: its payload has the keys of that kind.
            if ev.kind == "itemUpdated" and ev.payload["stream"] == codexrt.AGENT_TEXT:
                print(ev.payload["delta"], end="", flush=True)
            elif ev.kind == "interactionRequested":
                # nothing is approved unless you say so
                await rt.respond_interaction(ev.payload["interactionKey"], ev.payload["dialogToken"],
                                             {"decision": "decline"})
            elif (done := codexrt.payload(ev, "operationDone")) is not None:
                print(f"\n[{done['status']}]")
        return await op.wait()


def decide(request: codexrt.blocking.ApprovalRequest) -> codexrt.Decision:
    """An approval callback: the decision is one of ``codexrt.Decision``."""
    print(f"approval requested: {request.describe()}")
    return "decline"


async def answer_on_trio(rt: codexrt.Runtime, ev: codexrt.Event) -> None:
    """The Trio API: answer an interaction by a named decision (not called here)."""
    if ev.kind == "interactionRequested":
        await rt.interactions[ev.payload["interactionKey"]].answer("decline")


def ask_blocking(text: str) -> codexrt.OperationResult:
    """The same from plain synchronous code (not called here; checked by mypy)."""
    with codexrt.blocking.connect(cwd=".", approvals=decide) as rt:
        return rt.send(text, timeout=600, thread_id=None)


def main(argv: list[str]) -> int:
    result = asyncio.run(ask(argv[1] if len(argv) > 1 else "Hello"))
    print(result.status, result.reason or "")
    ledger: codexrt.EditLedger | None = None  # lazily loaded names are real types for a checker
    del ledger
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
