"""The ``kairox`` command line. Commands come from plugins, built-ins included."""

from __future__ import annotations

import sys
from typing import Any

import click

from kairox_core.cli.context import CliContext, FilePath, pass_cli
from kairox_core.cli.db_cmd import db_group
from kairox_core.errors import KairoxError, KairoxUserError

__all__ = ["CliContext", "FilePath", "cli", "db_group", "main", "pass_cli"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=FilePath(dir_okay=False),
    envvar="KAIROX_CONFIG",
    help="kairox.toml to use (default: ./kairox.toml, then the user config dir).",
)
@click.option(
    "--db",
    "db_path",
    type=FilePath(dir_okay=False),
    envvar="KAIROX_DB",
    help="SQLite database file (default: from the config, else the user data dir).",
)
@click.version_option(package_name="kairox-core", prog_name="kairox")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, db_path: str | None) -> None:
    """Kairox: durable memory, retrieval and a context window that never overflows."""
    ctx.obj = CliContext(config_path=config_path, db_path=db_path)


def _add_plugin_commands() -> None:
    from kairox_core.plugins import get_plugins

    get_plugins().pm.hook.kairox_register_commands(cli=cli)


def main(argv: list[str] | None = None) -> Any:
    """Entry point: user errors print one clear message and exit 2, never a traceback."""
    try:
        _add_plugin_commands()
        return cli.main(args=argv, prog_name="kairox", standalone_mode=True)
    except KairoxUserError as exc:
        click.echo(f"kairox: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KairoxError as exc:
        click.echo(f"kairox: error: {exc}", err=True)
        sys.exit(1)
