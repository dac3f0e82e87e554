"""Typed options for a ``[providers.<id>]`` section, with errors that name the key."""

from __future__ import annotations

import difflib
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from kairox_core.config import ProviderConfig
from kairox_core.errors import ConfigError

T = TypeVar("T", bound=BaseModel)


def parse_options(config: ProviderConfig, cls: type[T]) -> T:
    """Validate ``config.options`` against ``cls`` (a pydantic model with extra="forbid").

    A typo or a wrong type becomes a ``ConfigError`` naming ``providers.<id>.<key>``,
    the file, and the closest known key.
    """
    try:
        return cls.model_validate(config.options)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        key = f"providers.{config.id or config.kind}.{field}"
        known = sorted(cls.model_fields)
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(err["loc"][0]), known, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
            raise ConfigError(
                f"unknown option for a '{config.kind}' provider", key=key, fix=fix
            ) from None
        message = err["msg"].removeprefix("Value error, ")
        raise ConfigError(
            message, key=key, fix=f"see the '{config.kind}' provider's options"
        ) from None
