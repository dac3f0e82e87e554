"""Built-in plugin: the core ``kairox`` commands."""

from __future__ import annotations

import importlib

import click

from kairox_core.hookspecs import hookimpl

# Each module exposes ``register(cli: click.Group) -> None``.
COMMAND_MODULES = (
    "kairox_core.cli.plugins_cmd",
    "kairox_core.cli.config_cmd",
    "kairox_core.cli.tokens_cmd",
    "kairox_core.cli.retrieval_cmd",
    "kairox_core.cli.chat_cmd",
    "kairox_core.cli.memory_cmd",
    "kairox_core.cli.context_cmd",
    "kairox_core.cli.compaction_cmd",
    "kairox_core.cli.longterm_cmd",
    "kairox_core.cli.pack_cmd",
    "kairox_core.cli.usage_cmd",
    "kairox_core.cli.serve_cmd",
    "kairox_core.cli.mcp_cmd",
    "kairox_core.cli.db_cmd",
)


@hookimpl
def kairox_register_commands(cli: click.Group) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(cli)
