"""``kairox db migrate`` and ``kairox db copy``: the server's schema and moving data to it."""

from __future__ import annotations

import click

from kairox_core.cli import CliContext, db_group, pass_cli
from kairox_core.errors import KairoxUserError


def _url(cli_ctx: CliContext, url: str | None) -> str:
    target = url or str(cli_ctx.database)
    if "://" not in target:
        raise KairoxUserError(
            f"'{target}' is not a postgresql:// URL; give one (kairox db migrate URL) "
            "or set --db / [kairox] database"
        )
    return target


@click.command("migrate")
@click.argument("url", required=False)
@pass_cli
def migrate_cmd(cli_ctx: CliContext, url: str | None) -> None:
    """Apply the schema migrations the PostgreSQL database at URL (default: --db) lacks."""
    from kairox_postgres.db import PgDatabase
    from kairox_postgres.schema import migrate

    database = PgDatabase(_url(cli_ctx, url), max_size=1)
    try:
        done = migrate(database)
    finally:
        database.close()
    for component, (before, after) in done.items():
        state = f"{before} -> {after}" if before != after else f"{after} (up to date)"
        click.echo(f"{component}: {state}")


@click.command("copy")
@click.argument("source")
@click.argument("target")
def copy_cmd(source: str, target: str) -> None:
    """Copy a whole database from SOURCE to TARGET (a SQLite file or a postgresql:// URL,
    either way round); TARGET must hold no events yet. Counts are checked afterwards."""
    from kairox_postgres.copy import copy_database

    report = copy_database(source, target)
    for line in report.lines():
        click.echo(line)


def register(cli: click.Group) -> None:
    """``db migrate`` and ``db copy`` in the core's ``kairox db`` group."""
    group = db_group(cli)
    group.add_command(migrate_cmd)
    group.add_command(copy_cmd)
