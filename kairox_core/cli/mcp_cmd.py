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
@click.option("--port", type=click.IntRange(0, 65535), help="Port for --http (default 8765).")
@click.option(
    "--host",
    help="Address for --http (default 127.0.0.1); off loopback a token is required.",
)
@click.option(
    "--token",
    envvar="KAIROX_MCP_TOKEN",
    metavar="TOKEN",
    help="For --http: required on every request as 'Authorization: Bearer TOKEN'. "
    "'$env:NAME' reads it from NAME. Default: $KAIROX_MCP_TOKEN.",
)
@click.option(
    "--max-body",
    type=click.IntRange(1024, 64 * 1_048_576),
    help="For --http: largest request body accepted, in bytes (default 1 MiB).",
)
@pass_cli
def serve_command(
    cli_ctx: CliContext,
    use_http: bool,
    port: int | None,
    host: str | None,
    token: str | None,
    max_body: int | None,
) -> None:
    """Serve Kairox over MCP: search and list memories, propose one (it waits for
    approval in `kairox memory pending`), search the workspace, knowledge bases and
    long-term chunks, preview a prompt's context.

    stdio by default (what Claude Desktop and Cursor start); --http serves
    http://127.0.0.1:PORT/mcp with the same guard as `kairox serve`: without --token
    only the Host names 127.0.0.1, localhost, [::1] and --host, with the port, are
    answered (DNS rebinding), and a POST must be JSON. Logs go to stderr; stdout is the
    protocol.
    """
    from kairox_core.cli.serve_cmd import check_bind, resolve_token

    for name, value in (("--port", port), ("--host", host), ("--max-body", max_body)):
        if value is not None and not use_http:
            raise click.UsageError(f"{name} needs --http (stdio has no {name[2:]})")
    secret = resolve_token(token) if use_http else None
    host = host or "127.0.0.1"
    port = 8765 if port is None else port
    if use_http:
        check_bind(host, secret, env="KAIROX_MCP_TOKEN")
    from kairox_core.facade import Kairox
    from kairox_core.mcp import require_sdk

    require_sdk()
    from kairox_core.mcp.server import build_server, http_app, run_stdio

    config = cli_ctx.config
    with Kairox.open(cli_ctx.database, config) as kx:
        server = build_server(kx, config)
        if use_http:
            import uvicorn

            app = http_app(server, host=host, port=port, token=secret, max_body=max_body)
            shown = f"[{host}]" if ":" in host else host
            click.echo(f"kairox: serving MCP on http://{shown}:{port}/mcp", err=True)
            uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
        else:
            import anyio

            anyio.run(run_stdio, server)


def register(cli: click.Group) -> None:
    cli.add_command(mcp_group)


__all__ = ["register"]
