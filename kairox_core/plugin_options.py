"""A plugin's options, validated by the core with the pydantic model it registered.

``register(name, factory, options=Model)``: the core checks the section a registration
serves (a knowledge base's kind-specific keys, ``[retrieval] backend_options``, a
provider section) against ``Model`` when the configuration is checked and again when the
thing is built, and reports problems exactly as it reports its own (file, key, fix; the
CLI exits 2). The factory then receives the validated model as ``options=``, so no
plugin hand-writes "unknown key" or "expected a number" checks. Give ``Model``
``extra="forbid"`` so a typo is an error with a suggestion, not silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from kairox_core.validation import format_validation_error

M = TypeVar("M", bound=BaseModel)


class KindSection(Protocol):
    """A ``[knowledge_bases.<id>]`` or ``[providers.<id>]`` section: its id and kind
    (kairox_core.config checks every section with these keys; this module imports
    nothing of the config, so the config can import it)."""

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> str: ...


def validate_options(
    model: type[M], raw: Mapping[str, Any], *, key: str, file: str | None = None
) -> M:
    """``raw`` as ``model``, or a ``ConfigError`` naming ``file`` and ``<key>.<field>``."""
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        raise format_validation_error(exc, file, prefix=key, model=model) from None


def knowledge_base_key(kb: KindSection) -> str:
    return f"knowledge_bases.{kb.id or kb.kind}"


def provider_key(section: KindSection) -> str:
    return f"providers.{section.id or section.kind}"


BACKEND_OPTIONS_KEY = "retrieval.backend_options"
