"""An MCP stdio server for the tests, written with the `mcp` package (MCPServer, FastMCP's
name in mcp 2): `echo` repeats its text, `env_value` answers one of its environment
variables and `header_value` one of the HTTP request's headers (to show a secret reached it),
`fail` answers an error result, `count` how many times it was called since the server
started (to show a server kept between slices). `--http PORT` serves Streamable HTTP instead of stdio. Extra
arguments on its command line are ignored: tests put a marker there to find its processes."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("fixture")


@server.tool()
def echo(text: str) -> str:
    """Repeat `text`."""
    return f"echo: {text}"


@server.tool()
def env_value(name: str) -> str:
    """The value of the environment variable `name`, or "(unset)"."""
    return os.environ.get(name, "(unset)")


_calls = 0


@server.tool()
def count() -> str:
    """How many times this was called since the server started."""
    global _calls
    _calls += 1
    return f"call {_calls}"


@server.tool()
def fail(reason: str) -> str:
    """Fail with `reason`."""
    raise ToolError(reason)


@server.tool()
def header_value(name: str, ctx: Context) -> str:
    """The HTTP request's header `name`, or "(unset)" (over Streamable HTTP only)."""
    request = ctx.request_context.request
    return request.headers.get(name, "(unset)") if request is not None else "(not http)"


if __name__ == "__main__":
    if "--http" in sys.argv:  # --http PORT: Streamable HTTP on 127.0.0.1
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
