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

from kairox_core.config import BUILTIN_MEMORY_STORE, BUILTIN_NAMES
from kairox_core.errors import ConfigError
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


def check_plugin_names(config: KairoxConfig) -> None:
    """(Here, not in config.py: the configuration is below the plugin registry.)

    Every configured kind, backend, strategy and provider must be provided by a plugin,
    and the options of each must pass the options model its plugin registered."""
    from kairox_core.plugins import get_plugins

    host = get_plugins()
    src = config.source or "<embedded default>"
    checks: list[tuple[str, str, str]] = [
        ("embedding_backends", config.retrieval.backend, "retrieval.backend"),
        ("compaction_strategies", config.compaction.strategy, "compaction.strategy"),
    ]
    if config.memory.store != BUILTIN_MEMORY_STORE:  # built in: it shares the database
        checks.append(("memory_stores", config.memory.store, "memory.store"))
    checks += [
        ("retrievers", kb.kind, f"knowledge_bases.{kb_id}.kind")
        for kb_id, kb in config.knowledge_bases.items()
    ]
    checks += [
        ("model_providers", p.kind, f"providers.{pid}.kind") for pid, p in config.providers.items()
    ]
    checks += [
        ("rerankers", p.reranker, f"profiles.{name}.reranker")
        for name, p in config.profiles.items()
        if p.reranker
    ]
    for category, name, key in checks:
        try:
            host.get(category, name, builtin=BUILTIN_NAMES.get(category, ()))
        except Exception as exc:
            raise ConfigError(str(exc), file=src, key=key) from None
    check_options(config, host)
