"""A typed codexrt script: CI checks it with ``mypy --strict`` (tests/e2e/test_typing.py).

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
            if (chunk := codexrt.payload(ev, "itemUpdated")) is not None and chunk["stream"] == codexrt.AGENT_TEXT:
                print(chunk["delta"], end="", flush=True)
            elif (request := codexrt.payload(ev, "interactionRequested")) is not None:
                # nothing is approved unless you say so
                await rt.respond_interaction(request["interactionKey"], request["dialogToken"], {"decision": "decline"})
        return await op.wait()


def ask_blocking(text: str) -> codexrt.OperationResult:
    """The same from plain synchronous code (not called here; checked by mypy)."""
    with codexrt.blocking.connect(cwd=".", approvals="decline") as rt:
        return rt.send(text, timeout=600, thread_id=None)


def main(argv: list[str]) -> int:
    result = asyncio.run(ask(argv[1] if len(argv) > 1 else "Hello"))
    print()
    print(result.status, result.reason or "")
    ledger: codexrt.EditLedger | None = None  # lazily loaded names are real types for a checker
    del ledger
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
