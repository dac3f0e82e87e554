"""Registers the storage ``postgresql`` and the ``kairox db`` commands.

psycopg is imported only when a ``postgresql://`` database is opened or a ``db``
command runs, so a Kairox that never uses the server pays nothing for the plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kairox_core.hookspecs import StorageRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.store.protocol import Storage


def _open(target: str) -> Storage:
    from kairox_postgres.storage import open_postgres

    return open_postgres(target)


@hookimpl
def kairox_register_storage(register: StorageRegistrar) -> None:
    register("postgresql", _open)


@hookimpl
def kairox_register_commands(cli: click.Group) -> None:
    from kairox_postgres.cli import register

    register(cli)
