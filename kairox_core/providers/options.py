"""Typed options for a ``[providers.<id>]`` section, with errors that name the key.

The core already validates a section whose provider registered ``options=Model``; this
is for building a provider directly (``OpenAICompatProvider.from_config``).
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from kairox_core.config import ProviderConfig
from kairox_core.plugin_options import provider_key, validate_options

T = TypeVar("T", bound=BaseModel)


def parse_options(config: ProviderConfig, cls: type[T]) -> T:
    """Validate ``config.options`` against ``cls`` (a pydantic model with extra="forbid").

    A typo or a wrong type becomes a ``ConfigError`` naming ``providers.<id>.<key>``
    and the closest known key, as the core reports its own keys.
    """
    return validate_options(cls, config.options, key=provider_key(config))
