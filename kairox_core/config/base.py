"""What the sections share: strict models, paths, secrets and key-path errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import BaseModel, ConfigDict, SecretStr
from pydantic_core import PydanticCustomError

from kairox_core.errors import ConfigError

CONFIG_FILENAME = "kairox.toml"
ENV_PREFIX = "$env:"
#: tables and arrays inside one another; a real config needs four or five, while pydantic
#: cannot dump a value much deeper than 100 (``kairox config show`` would fail)
MAX_NESTING = 32


def user_config_path() -> Path:
    return Path(platformdirs.user_config_dir("kairox")) / CONFIG_FILENAME


def default_database_path() -> Path:
    return Path(platformdirs.user_data_dir("kairox")) / "kairox.db"


def resolve_secret(value: Any, *, where: str) -> SecretStr | None:
    """Resolve a ``$env:NAME`` reference (or a literal) into a SecretStr at use time."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError("expected a string", key=where)
    if value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX) :]
        resolved = os.environ.get(name)
        if resolved is None:
            raise ConfigError(
                f"environment variable {name} is not set",
                key=where,
                fix=f"export {name}=... before running kairox",
            )
        return SecretStr(resolved)
    return SecretStr(value)


def expand_path(value: str) -> Path:
    """``value`` with ``~`` expanded; ValueError, in words, for what the OS would refuse
    later with a traceback (a NUL byte, ``~user`` for a user that does not exist)."""
    if "\0" in value:
        raise ValueError("the path contains a NUL byte; write it without one")
    try:
        return Path(value).expanduser()
    except RuntimeError:
        user = value[1:].split("/", 1)[0]
        who = f"no user '{user}' on this machine" if user else "the home directory is unknown"
        raise ValueError(f"cannot expand '~{user}': {who}; write the full path") from None


def is_database_url(value: str | os.PathLike[str]) -> bool:
    """A storage URL (``postgresql://...``), opened by its plugin, rather than a path.
    ``sqlite:///path`` counts as a path: a file that may or may not exist yet."""
    text = os.fspath(value)
    return "://" in text and not text.startswith("sqlite:///")


def resolve_database_setting(value: str, *, key: str, file: str | None = None) -> Path | str:
    """A database given as a path (``~`` expanded) or a storage URL (kept as written:
    a ``$env:NAME`` password in it is resolved by the storage, at connect time)."""
    if is_database_url(value):
        return value
    return resolve_path_setting(value, key=key, file=file)


def resolve_path_setting(value: str, *, key: str, file: str | None = None) -> Path:
    """``expand_path`` for a path given outside a config file (``--db``, ``KAIROX_DB``)."""
    try:
        return expand_path(value)
    except ValueError as exc:
        raise ConfigError(str(exc), file=file, key=key) from None


def key_error(sub: str, message: str) -> PydanticCustomError:
    """An error for ``sub``, a key inside the validated value (an option of a kind, a
    ``backend_options`` entry), so the message names the full key path."""
    return PydanticCustomError("kairox_key", "{message}", {"sub": sub, "message": message})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def resolve_all(values: Mapping[str, str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in values.items():
        secret = resolve_secret(value, where=f"{where}.{name}")
        out[name] = secret.get_secret_value() if secret is not None else ""
    return out
