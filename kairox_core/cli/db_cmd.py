"""``kairox db check``, and the ``db`` group a storage plugin adds its commands to
(kairox-postgres: ``db migrate``, ``db copy``)."""

from __future__ import annotations

import sys

import click

from kairox_core.capabilities import health_check
from kairox_core.cli.context import CliContext, pass_cli


def db_group(cli: click.Group) -> click.Group:
    """The ``kairox db`` group, created by whichever registers first (the core's
    commands and a plugin's register in no fixed order)."""
    group = cli.commands.get("db")
    if isinstance(group, click.Group):
        return group
    group = click.Group(
        "db", help="The database: check it; schema migrations and copies (kairox-postgres)."
    )
    cli.add_command(group)
    return group


@click.command("check")
@click.argument("target", required=False)
@pass_cli
def check_cmd(cli_ctx: CliContext, target: str | None) -> None:
    """Check the database TARGET (default: --db): SQLite's integrity check of a file, or
    for a server URL the connection, the schema and its extensions. Exit 0 when healthy,
    1 when damaged, 2 when it cannot be checked (no file, server unreachable)."""
    where = target or str(cli_ctx.database)
    if "://" in where and not where.startswith("sqlite:///"):
        from kairox_core.facade import open_storage

        storage = open_storage(where)  # unreachable, refused: a StorageError, exit 2
        try:
            health = health_check(storage)  # declared: StorageCapabilities(check=True)
            lines = health.check() if health is not None else [f"ok: {storage.location}: opened"]
        finally:
            storage.close()
        ok = all(not line.startswith("damaged") for line in lines)
    else:
        from kairox_core.store.check import check_sqlite

        report = check_sqlite(where.removeprefix("sqlite:///"))
        lines, ok = report.lines, report.ok
    for line in lines:
        click.echo(line)
    if not ok:
        sys.exit(1)


def register(cli: click.Group) -> None:
    db_group(cli).add_command(check_cmd)
