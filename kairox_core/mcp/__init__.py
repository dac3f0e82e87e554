"""MCP both ways: external servers' tools offered to the model (``client``), and
Kairox itself as an MCP server (``server``, ``kairox mcp serve``).

The official ``mcp`` SDK takes over a second to import here (the core's session:
a quarter of that), so it is the optional extra ``kairox-core[mcp]``, imported only
when an MCP server is configured or served; ``require_sdk()`` says how to install it.
"""

from __future__ import annotations

from kairox_core.errors import KairoxUserError

INSTALL_HINT = "pip install 'kairox-core[mcp]' (the official MCP SDK)"


class McpUnavailable(KairoxUserError):
    """The ``mcp`` SDK is not installed."""


def require_sdk() -> None:
    """Import the SDK now, or raise a clear error naming the extra to install."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise McpUnavailable(
            f"MCP support needs the 'mcp' package ({exc}): {INSTALL_HINT}"
        ) from None


def tool_name(server: str, tool: str) -> str:
    """The namespaced name the model sees: ``<server>__<tool>``, in OpenAI's alphabet
    (letters, digits, ``_`` and ``-``, at most 64 characters)."""
    raw = f"{server}__{tool}"
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in raw)
    return safe[:64]
