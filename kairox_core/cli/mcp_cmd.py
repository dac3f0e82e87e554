"""``kairox mcp tools|serve``: external MCP servers' tools, and Kairox as an MCP server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from kairox_core.cli.context import CliContext, pass_cli


@click.group("mcp")
def mcp_group() -> None:
    """MCP both ways: servers in [mcp_servers.<id>] offer tools to the model, and
    `kairox mcp serve` lets an MCP client (Claude Desktop, Cursor...) use Kairox.

    Needs the extra: pip install 'kairox-core[mcp]'. See docs/mcp.md.
    """


@mcp_group.command("tools")
@click.option("--profile", help="Only the servers this profile sees (default: every server).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def tools_command(cli_ctx: CliContext, profile: str | None, as_json: bool) -> None:
    """Start each configured MCP server, list its tools (as the model sees them), stop it.

    A server that fails to start or does not answer within its timeout is listed with
    the reason; the command then exits 1.
    """
    from kairox_core.mcp import require_sdk
    from kairox_core.mcp.client import McpServer

    config = cli_ctx.config
    servers = (
        config.mcp_servers_for(profile)
        if profile
        else [s for _, s in sorted(config.mcp_servers.items())]
    )
    if not servers:
        where = f" for profile '{profile}'" if profile else ""
        click.echo(f"no MCP server configured{where}: add [mcp_servers.<id>] to kairox.toml")
        return
    require_sdk()

    async def probe() -> list[McpServer]:
        running = [McpServer(cfg) for cfg in servers]
        try:
            await asyncio.gather(*(s.start() for s in running))
        finally:
            await asyncio.gather(*(s.aclose() for s in running))
        return running

    probed = asyncio.run(probe())
    rows: list[dict[str, Any]] = [
        {
            "server": s.id,
            "transport": "stdio" if s.config.command else "http",
            "ok": s.error is None,
            "error": s.error,
            "notes": s.notes,
            "start_ms": round(s.started_ms),
            "tools": [
                {"name": t.offered_as, "tool": t.name, "description": t.description}
                for t in s.tools
            ],
        }
        for s in probed
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        for row in rows:
            state = "ok" if row["ok"] else f"FAILED: {row['error']}"
            click.echo(f"{row['server']} ({row['transport']}, {row['start_ms']} ms): {state}")
            for note in row["notes"]:
                click.echo(f"  note: {note}")
            for tool in row["tools"]:
                first = (tool["description"] or "").strip().splitlines()
                click.echo(f"  {tool['name']}  {first[0] if first else ''}".rstrip())
    if any(not row["ok"] for row in rows):
        raise SystemExit(1)


@mcp_group.command("serve")
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP on 127.0.0.1, not stdio.")
@click.option("--port", type=click.IntRange(1, 65535), help="Port for --http (default 8765).")
@pass_cli
def serve_command(cli_ctx: CliContext, use_http: bool, port: int | None) -> None:
    """Serve Kairox over MCP: search and list memories, propose one (it waits for
    approval in `kairox memory pending`), search the workspace, knowledge bases and
    long-term chunks, preview a prompt's context.

    stdio by default (what Claude Desktop and Cursor start); --http serves
    http://127.0.0.1:PORT/mcp. Logs go to stderr; stdout is the protocol.
    """
    if port is not None and not use_http:
        raise click.UsageError("--port needs --http (stdio has no port)")
    port = port or 8765
    from kairox_core.facade import Kairox
    from kairox_core.mcp import require_sdk

    require_sdk()
    from kairox_core.mcp.server import build_server

    config = cli_ctx.config
    with Kairox.open(cli_ctx.database, config) as kx:
        server = build_server(kx, config)
        if use_http:
            click.echo(f"kairox: serving MCP on http://127.0.0.1:{port}/mcp", err=True)
            server.run("streamable-http", host="127.0.0.1", port=port)
        else:
            server.run("stdio")


def register(cli: click.Group) -> None:
    cli.add_command(mcp_group)


__all__ = ["register"]
