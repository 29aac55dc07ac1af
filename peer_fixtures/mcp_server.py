"""A small stdio MCP server for real-binary tests, on the official ``mcp`` SDK (2.x).

Why: a user's MCP servers are real processes started by the real ``codex app-server``; codexrt's
MCP paths (elicitation forms and URLs, tool-call approvals, content blocks and images, status and
reload) are tested against one. The app-server starts this file from a throw-away ``CODEX_HOME``'s
``[mcp_servers.<name>]`` table (see :func:`mcp_server_toml`); it speaks MCP over stdin/stdout and
touches nothing outside its process (no files, no network).

Tools (names are what the model calls inside the namespace ``mcp__<server>``):

=================  ===========================================================================
``echo``           ``{text}`` → the text back
``rich``           a text block, a 1×1 PNG image block and ``structuredContent``
``fail``           ``isError: true`` with a message
``slow``           ``{seconds}`` (capped at :data:`SLOW_CAP_S`) then a text block
``ask_form``       form elicitation with string, number, integer, boolean, array (multi-select)
                   and optional fields; the result reports the action and the values it got,
                   with their JSON types
``ask_url``        URL elicitation (``https://example.invalid/...``, never fetched by anyone)
``ask_secret``     form elicitation for a passphrase; the result says only how long it was,
                   unless ``{echo: true}`` (a careless server: the answer lands in the history)
``ask_titled``     ``ask_form`` through the SDK's own ``ctx.elicit``, whose schema carries a
                   top-level ``title``: codex 0.169.0 refuses that schema ("unknown field
                   `title`") and answers ``cancel`` itself, without asking the client
=================  ===========================================================================

Run as ``python peer_fixtures/mcp_server.py`` (stdio). ``MCP_TEST_EXTRA_TOOL=<name>`` adds one
more ``echo``-like tool of that name, so a test can see a reload pick up a changed config;
``MCP_TEST_PID_DIR=<dir>`` makes each server process leave an empty file named by its pid there.
"""

# no `from __future__ import annotations`: the SDK evaluates the tools' annotations, which name local imports

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

__all__ = ["build_server", "mcp_server_toml", "PNG_1X1", "SERVER_PATH", "SLOW_CAP_S"]

SERVER_PATH = Path(__file__).resolve()
SLOW_CAP_S = 60.0
#: A valid 1×1 transparent PNG (67 bytes), base64.
PNG_1X1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mcp_server_toml(name: str = "testsrv", *, python: str | None = None, env: dict[str, str] | None = None,
                    tool_timeout_sec: float | None = None, required: bool = False) -> str:
    """The ``[mcp_servers.<name>]`` table that makes codex start this server (append it to
    ``config.toml`` with ``make_codex_home(..., extra_toml=...)``).

    ``required = true`` (0.169.0): a new thread waits for the server before its first model
    request (without it, the first request may go out before the server's tools are known),
    and ``thread/start`` fails (-32603 "required MCP servers failed to initialize") if it
    cannot start."""
    lines = [f"[mcp_servers.{name}]",
             f"command = {_toml_str(python or sys.executable)}",
             f"args = [{_toml_str(str(SERVER_PATH))}]",
             "startup_timeout_sec = 30"]
    if required:
        lines.append("required = true")
    if tool_timeout_sec is not None:
        lines.append(f"tool_timeout_sec = {tool_timeout_sec}")
    if env:
        lines.append(f"[mcp_servers.{name}.env]")
        lines += [f"{k} = {_toml_str(v)}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def _typed(values: dict[str, Any]) -> dict[str, Any]:
    return {k: {"value": v, "type": type(v).__name__} for k, v in values.items()}


def build_server() -> Any:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import CallToolResult, ImageContent, TextContent
    from pydantic import BaseModel, Field

    app = MCPServer("codexrt-test-mcp")

    class Form(BaseModel):
        name: str = Field(description="Your name")
        age: int = Field(description="Age in years", ge=0, le=150)
        ratio: float = Field(description="A ratio", ge=0, le=1)
        subscribe: bool = Field(description="Subscribe?")
        colors: list[Literal["red", "green", "blue"]] = Field(description="Favourite colours")
        nickname: str | None = Field(default=None, description="Optional nickname")

    class Secret(BaseModel):
        passphrase: str = Field(description="The passphrase")

    async def elicit(ctx: Context, message: str, model: type[BaseModel]) -> tuple[str, Any]:
        # The SDK's ctx.elicit() sends pydantic's schema with a top-level "title", which codex
        # 0.169.0 refuses (it then cancels without asking the client): send it without.
        from mcp.server.elicitation import render_elicitation_schema

        schema = render_elicitation_schema(model)
        schema.pop("title", None)
        result = await ctx.request_context.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        if result.action == "accept":
            return "accept", model.model_validate(result.content or {})
        return result.action, None

    @app.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @app.tool(description="Return text, an image and structured content.")
    def rich() -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text="rich result"),
                     ImageContent(type="image", data=PNG_1X1, mime_type="image/png")],
            structured_content={"answer": 42, "items": ["a", "b"]})

    @app.tool(description="Always fails.")
    def fail() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="the tool failed on purpose")], is_error=True)

    @app.tool(description="Sleep for the given number of seconds, then answer.")
    async def slow(seconds: float = 1.0) -> str:
        import anyio

        await anyio.sleep(max(0.0, min(float(seconds), SLOW_CAP_S)))
        return f"slept {seconds}"

    @app.tool(description="Ask the user to fill a form.")
    async def ask_form(ctx: Context) -> str:
        action, data = await elicit(ctx, "Please fill the test form.", Form)
        out: dict[str, Any] = {"action": action}
        if data is not None:
            out["values"] = _typed(data.model_dump(exclude_none=True))
        return json.dumps(out, sort_keys=True)

    @app.tool(description="Ask for the form through the SDK's ctx.elicit (schema with a title).")
    async def ask_titled(ctx: Context) -> str:
        result = await ctx.elicit("Please fill the test form.", Form)
        return json.dumps({"action": result.action})

    @app.tool(description="Ask the user to open a URL.")
    async def ask_url(ctx: Context) -> str:
        result = await ctx.elicit_url("Open this page to continue.", "https://example.invalid/codexrt-test",
                                      "elic-test-1")
        return json.dumps({"action": result.action})

    @app.tool(description="Ask the user a secret question.")
    async def ask_secret(ctx: Context, echo: bool = False) -> str:
        action, data = await elicit(ctx, "Enter the passphrase.", Secret)
        if data is not None:
            out = {"action": "accept", "length": len(data.passphrase)}
            if echo:  # a careless server that puts the answer in its result (and so in the history)
                out["passphrase"] = data.passphrase
            return json.dumps(out)
        return json.dumps({"action": action})

    extra = os.environ.get("MCP_TEST_EXTRA_TOOL")
    if extra:
        @app.tool(name=extra, description="An extra tool named by the environment.")
        def extra_tool(text: str = "") -> str:
            return f"{extra}: {text}"

    return app


def main() -> int:
    pid_dir = os.environ.get("MCP_TEST_PID_DIR")
    if pid_dir:  # tests check that no MCP server outlives its app-server
        Path(pid_dir, str(os.getpid())).write_text("")
    build_server().run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
