"""kairox.toml -> ``KairoxConfig``: finding the file, reading it, validating it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kairox_core.config.base import CONFIG_FILENAME, resolve_path_setting, user_config_path
from kairox_core.config.model import KairoxConfig
from kairox_core.errors import ConfigError
from kairox_core.validation import format_validation_error

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def parse_config(
    data: Mapping[str, Any], *, source: str = "<config>", base_dir: Path | None = None
) -> KairoxConfig:
    """Validate ``data``; relative knowledge-base paths resolve against ``base_dir``."""
    try:
        config = KairoxConfig.model_validate(dict(data), context={"base_dir": base_dir})
    except ValidationError as exc:
        raise format_validation_error(exc, source, model=KairoxConfig) from None
    except RecursionError:
        raise _too_deep(source) from None
    return config.model_copy(update={"source": source})


def _too_deep(source: str, text: str = "") -> ConfigError:
    line, key = _deepest_line(text)
    where = f"line {line}: " if line else ""
    return ConfigError(
        f"{where}nested too deeply: arrays or tables inside one another beyond what can be read",
        file=source,
        key=key,
        fix="flatten the nesting; no Kairox key needs more than a few levels",
    )


def _deepest_line(text: str) -> tuple[int | None, str | None]:
    """Where a document too deep for the TOML reader nests most: its line and, when the
    line is ``key = ...``, the key under the table in force (the reader cannot say)."""
    best, best_line, best_key, table = 0, None, None, ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]") and "=" not in stripped:
            table = stripped.strip("[]").strip()
            continue
        openers = line.count("[") + line.count("{")
        if openers > best:
            best, best_line = openers, number
            name = line.split("=", 1)[0].strip() if "=" in line else ""
            best_key = ".".join(p for p in (table, name) if p) or None
    return best_line, best_key


def load_config_file(path: str | os.PathLike[str]) -> KairoxConfig:
    p = resolve_path_setting(os.fspath(path), key="--config (or KAIROX_CONFIG)")
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            "file not found", file=str(p), fix="check the path given with --config or KAIROX_CONFIG"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(p)) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"not valid TOML: {exc}", file=str(p), fix="check the syntax at the line named"
        ) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise _too_deep(str(p), raw.decode("utf-8", "replace")) from None
    return parse_config(data, source=str(p), base_dir=p.absolute().parent)


def find_config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to use, or None for the embedded default."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("KAIROX_CONFIG")
    if env:
        return Path(env)
    for candidate in (Path.cwd() / CONFIG_FILENAME, user_config_path()):
        if candidate.is_file():
            return candidate
    return None


def load_config(explicit: str | os.PathLike[str] | None = None) -> KairoxConfig:
    """Find and load the configuration; the embedded default when there is none."""
    path = find_config_path(explicit)
    if path is None:
        return KairoxConfig()
    return load_config_file(path)
