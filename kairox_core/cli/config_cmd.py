"""``kairox config``: where the configuration comes from and what it says."""

from __future__ import annotations

import json

import click

from kairox_core.cli.context import CliContext, pass_cli
from kairox_core.config import find_config_path


@click.group("config")
def config_group() -> None:
    """Inspect the configuration (kairox.toml)."""


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_cli
def show(cli_ctx: CliContext, as_json: bool) -> None:
    """Print the effective configuration, secrets redacted."""
    config = cli_ctx.config_unchecked
    data = config.redacted()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"# source: {config.source or 'embedded default'}")
    click.echo(f"# database: {cli_ctx.database}")
    click.echo(json.dumps(data, indent=2))


@config_group.command("path")
@pass_cli
def path(cli_ctx: CliContext) -> None:
    """Print the config file in use (or 'embedded default') and the database path."""
    found = find_config_path(cli_ctx.config_path)
    click.echo(f"config: {found if found else 'embedded default'}")
    click.echo(f"database: {cli_ctx.database}")


@config_group.command("check")
@pass_cli
def check(cli_ctx: CliContext) -> None:
    """Validate the configuration; exit 2 with the problem if it is wrong."""
    config = cli_ctx.config
    click.echo(
        f"ok: {config.source or 'embedded default'} "
        f"({len(config.profiles)} profiles, {len(config.knowledge_bases)} knowledge bases)"
    )


def register(cli: click.Group) -> None:
    cli.add_command(config_group)
