"""``[tools]`` and ``[mcp_servers.<id>]``: the tool loop and the MCP servers."""

from __future__ import annotations

from pydantic import Field, model_validator

from kairox_core.config.base import Strict, key_error, resolve_all


class ToolsSection(Strict):
    """``[tools]``: the tool loop of a turn (kairox_core/toolloop.py)."""

    max_rounds: int = Field(8, ge=0)  # model calls that may run tools, per turn
    max_result_chars: int = Field(16_000, gt=0)  # a longer result is cut (it is mandatory)
    timeout: float = Field(30.0, gt=0)  # seconds one tool call may take


class McpServerConfig(Strict):
    """``[mcp_servers.<id>]``: an MCP server whose tools the model may call; ``command``
    (stdio) or ``url`` (streamable HTTP)."""

    id: str = ""
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)  # values may be "$env:NAME"
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # values may be "$env:NAME"
    enabled: bool = True
    profiles: tuple[str, ...] = ()  # empty: every profile sees it
    tools: tuple[str, ...] | None = None  # an allow-list of the server's tool names
    timeout: float = Field(30.0, gt=0)  # seconds to start, and for each call

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"mcp_servers.{self.id} needs exactly one of 'command' (a program run over "
                f"stdio) or 'url' (streamable HTTP, e.g. 'http://127.0.0.1:8000/mcp')"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise key_error("url", "must start with http:// or https://")
        if "__" in self.id:
            raise ValueError(f"mcp_servers.{self.id}: an id may not contain '__' (tool names)")
        return self

    def resolved_env(self) -> dict[str, str]:
        """``env`` with ``$env:NAME`` values read now (at start, never stored)."""
        return resolve_all(self.env, f"mcp_servers.{self.id}.env")

    def resolved_headers(self) -> dict[str, str]:
        return resolve_all(self.headers, f"mcp_servers.{self.id}.headers")
