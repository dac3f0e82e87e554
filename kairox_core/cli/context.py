"""What every command shares: the config and database, loaded on first use."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from kairox_core.config import (
    KairoxConfig,
    check_plugin_names,
    is_database_url,
    load_config,
    resolve_database_setting,
)
from kairox_core.errors import ConfigError


class FilePath(click.Path):
    """``click.Path`` that refuses a NUL byte as a usage error (exit 2) instead of the
    ``ValueError: embedded null byte`` traceback ``os.stat`` raises inside click."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and "\0" in value:
            self.fail(f"{value!r} contains a NUL byte; give the path without it", param, ctx)
        return super().convert(value, param, ctx)


@dataclass
class CliContext:
    config_path: str | None = None
    db_path: str | None = None
    _config: KairoxConfig | None = field(default=None, init=False, repr=False)
    _checked: bool = field(default=False, init=False, repr=False)

    @property
    def config(self) -> KairoxConfig:
        """The validated configuration; every kind it names must be installed."""
        config = self.config_unchecked
        if not self._checked:
            check_plugin_names(config)
            self._checked = True
        return config

    @property
    def config_unchecked(self) -> KairoxConfig:
        """The validated configuration, even if a plugin it names is not installed: for
        commands that report what is missing (``kb list``, ``config show``)."""
        if self._config is None:
            with warnings.catch_warnings():  # the notes below say the same, once, in words
                warnings.simplefilter("ignore", FutureWarning)
                self._config = load_config(self.config_path)
            for note in self._config.notes:  # e.g. a deprecated key and its new name
                click.echo(f"note: {self._config.source}: {note}", err=True)
        return self._config

    @property
    def database(self) -> Path | str:
        """A path (the SQLite file) or a storage URL such as ``postgresql://...``."""
        if self.db_path:
            return resolve_database_setting(self.db_path, key="--db (or KAIROX_DB)")
        return self.config.database_path()

    @property
    def database_exists(self) -> bool:
        """Whether there is a database to read (a server behind a URL: assumed so)."""
        target = self.database
        return isinstance(target, str) or target.exists()

    @property
    def database_is_url(self) -> bool:
        """Whether the database is a storage URL (opened by its plugin), not a file."""
        target = self.database
        return isinstance(target, str) or is_database_url(target)


def _get_cli(ctx: click.Context) -> CliContext:
    obj = ctx.find_object(CliContext)
    if obj is None:  # invoked without the root group (tests calling a command directly)
        obj = ctx.ensure_object(CliContext)
    return obj


def pass_cli(f: Any) -> Any:
    """Decorator: pass the shared ``CliContext`` as the first argument."""

    @functools.wraps(f)
    @click.pass_context
    def wrapper(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
        cli_ctx = _get_cli(ctx)
        try:
            return f(cli_ctx, *args, **kwargs)
        except ConfigError as exc:  # e.g. a $env: secret resolved at use: name the file
            source = cli_ctx._config.source if cli_ctx._config is not None else None
            if exc.file is None and source:
                raise exc.located(str(source)) from exc
            raise

    return wrapper
