"""``kairox plugins``: what is installed, what it provides, what failed."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from kairox_core.plugins import CATEGORY_NOUN, get_plugins


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins_command(as_json: bool) -> None:
    """List plugins: distribution, version, hooks, registered names and load errors."""
    infos = [info.as_dict() for info in get_plugins().plugin_infos()]
    if as_json:
        click.echo(json.dumps(infos, indent=2))
        return
    table = Table(title="Kairox plugins", show_lines=True)
    for column in ("plugin", "distribution", "hooks", "registers", "status"):
        table.add_column(column, overflow="fold")
    for info in infos:
        registers = "\n".join(
            f"{CATEGORY_NOUN[cat]}: {', '.join(names)}" for cat, names in info["registers"].items()
        )
        status = f"[red]error: {info['error']}[/red]" if info["error"] else "[green]ok[/green]"
        table.add_row(
            info["name"],
            f"{info['distribution']} {info['version']}",
            "\n".join(info["hooks"]),
            registers or "-",
            status,
        )
    Console().print(table)


def register(cli: click.Group) -> None:
    cli.add_command(plugins_command)
