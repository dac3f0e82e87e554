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
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from kairox_core.validation import format_validation_error

if TYPE_CHECKING:
    from kairox_core.config import KairoxConfig, KnowledgeBaseConfig, ProviderConfig
    from kairox_core.plugins import PluginHost

M = TypeVar("M", bound=BaseModel)


def validate_options(
    model: type[M], raw: Mapping[str, Any], *, key: str, file: str | None = None
) -> M:
    """``raw`` as ``model``, or a ``ConfigError`` naming ``file`` and ``<key>.<field>``."""
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        raise format_validation_error(exc, file, prefix=key, model=model) from None


def knowledge_base_key(kb: KnowledgeBaseConfig) -> str:
    return f"knowledge_bases.{kb.id or kb.kind}"


def provider_key(section: ProviderConfig) -> str:
    return f"providers.{section.id or section.kind}"


BACKEND_OPTIONS_KEY = "retrieval.backend_options"


def check_options(config: KairoxConfig, host: PluginHost) -> None:
    """Validate every configured section whose plugin registered an options model."""
    src = config.source or "<embedded default>"
    sections: list[tuple[str, str, Mapping[str, Any], str]] = [
        (
            "embedding_backends",
            config.retrieval.backend,
            config.retrieval.backend_options,
            BACKEND_OPTIONS_KEY,
        ),
    ]
    sections += [
        ("retrievers", kb.kind, kb.options, knowledge_base_key(kb))
        for kb in config.knowledge_bases.values()
    ]
    sections += [
        ("model_providers", p.kind, p.options, provider_key(p)) for p in config.providers.values()
    ]
    for category, name, raw, key in sections:
        registration = host.registry(category).get(name)
        if registration is not None and registration.options is not None:
            validate_options(registration.options, raw, key=key, file=src)
