"""A small real MCP server (stdio) for tests: ``python -m kairox_core.testing.mcp_stub``.

Tools: ``echo(text)``, ``big(size)`` (a result of ``size`` characters, to test the cut)
and ``sleep(seconds)`` (a call that outlives its timeout). Built on the official SDK's
``MCPServer``, so the client under test talks to the same protocol stack as anywhere.
"""

from __future__ import annotations

import time


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("kairox-stub")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def big(size: int = 1_000_000) -> str:
        """Return a text of ``size`` characters."""
        return "y" * size

    @server.tool()
    def sleep(seconds: float) -> str:
        """Sleep, then answer (blocks the server, like a hung backend)."""
        time.sleep(seconds)
        return "awake"

    server.run("stdio")


if __name__ == "__main__":
    main()
