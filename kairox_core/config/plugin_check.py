"""Every configured kind, backend, strategy and provider is provided by a plugin, and
each one's options pass the options model its plugin registered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kairox_core.config.memory import BUILTIN_MEMORY_STORE, BUILTIN_NAMES
from kairox_core.config.model import KairoxConfig
from kairox_core.errors import ConfigError
from kairox_core.plugin_options import (
    BACKEND_OPTIONS_KEY,
    knowledge_base_key,
    provider_key,
    validate_options,
)

if TYPE_CHECKING:
    from kairox_core.plugins import PluginHost


def check_plugin_names(config: KairoxConfig) -> None:
    """Every configured kind, backend, strategy and provider must be provided by a plugin,
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


__all__ = ["check_options", "check_plugin_names"]
