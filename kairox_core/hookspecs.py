"""Every Kairox hook, in one place.

Plugins implement these with ``@kairox_core.hookimpl``. The ``kairox_register_*``
hooks follow the register-callback style of ``llm``: the hook receives a
``register(name, factory, options=Model)`` callable and calls it once per thing it
provides. A name registered twice (by two plugins, or twice by one) is an error naming
both. Factories are called lazily, so a plugin's heavy imports belong inside them.

``options`` (optional) is a pydantic model of the section the registration serves; the
core validates the user's keys with it, reports errors like its own (file, key, fix),
and calls the factory with the validated model as ``options=`` (see plugin_options.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Never, Protocol, TypeVar

import pluggy

if TYPE_CHECKING:
    import click
    from pydantic import BaseModel

    from kairox_core.compaction.base import CompactionStrategy
    from kairox_core.config.model import KairoxConfig
    from kairox_core.config.sources import KnowledgeBaseConfig, ProviderConfig
    from kairox_core.events import Event
    from kairox_core.memory.base import MemoryStore
    from kairox_core.providers.base import ModelProvider
    from kairox_core.retrieval.base import EmbeddingBackend, Reranker, WorkspaceRetriever
    from kairox_core.store.base import Storage

hookspec = pluggy.HookspecMarker("kairox")
hookimpl = pluggy.HookimplMarker("kairox")

F_contra = TypeVar("F_contra", contravariant=True)


class Registrar(Protocol[F_contra]):
    """The ``register`` callable a ``kairox_register_*`` hook receives."""

    def __call__(
        self, name: str, factory: F_contra, /, *, options: type[BaseModel] | None = None
    ) -> None: ...


class CompactionStrategyFactory(Protocol):
    """``factory(config=KairoxConfig, profile=str | None)`` -> the strategy ``[compaction]
    strategy`` names, for the session's profile (None: outside a session)."""

    def __call__(self, *, config: KairoxConfig, profile: str | None) -> CompactionStrategy: ...


# What each registry's factories are. A kind registered with an options model is called
# with ``options=<Model>`` (the ``*WithOptions`` protocols; the core casts to the one its
# registration says). Embedding backends and rerankers take their section's keys as
# keyword arguments (any names), so their parameters are left open (``...``) and only
# what they return is fixed.
# factory(path) -> MemoryStore
MemoryStoreFactory = Callable[[str], "MemoryStore"]
# factory(**backend_options) -> EmbeddingBackend; factory(options=Model) with a model
EmbeddingBackendFactory = Callable[..., "EmbeddingBackend"]


class RetrieverWithOptions(Protocol):
    """A knowledge-base kind registered with ``options=Model``: called with the validated
    model (typed ``Any`` here so a factory may name its own model class)."""

    def __call__(self, kb: KnowledgeBaseConfig, /, *, options: Any) -> WorkspaceRetriever: ...


class ProviderWithOptions(Protocol):
    """A provider kind registered with ``options=Model``: called with the validated model."""

    def __call__(self, config: ProviderConfig, /, *, options: Any) -> ModelProvider: ...


# factory(kb) -> WorkspaceRetriever; factory(kb, options=<Model>) with a model
RetrieverFactory = Callable[["KnowledgeBaseConfig"], "WorkspaceRetriever"] | RetrieverWithOptions
# factory(config) -> ModelProvider; factory(config, options=<Model>) with a model
ModelProviderFactory = Callable[["ProviderConfig"], "ModelProvider"] | ProviderWithOptions
# factory(ctx: EngineContext) -> Engine: typed with those names in kairox_core.engines
# (``EngineFactory``, ``EngineRegistrar``, the ``ENGINES`` registry the facade reads).
# This module sits below the seams (the core looks plugins up through the registry), so
# here it is any one-argument callable; the facade checks each product is an ``Engine``.
EngineFactory = Callable[[Never], object]
# factory(target: str) -> Storage (a path or a URL)
StorageFactory = Callable[[str], "Storage"]
# factory(**reranker_options) -> Reranker
RerankerFactory = Callable[..., "Reranker"]

MemoryStoreRegistrar = Registrar[MemoryStoreFactory]
EmbeddingBackendRegistrar = Registrar[EmbeddingBackendFactory]
RetrieverRegistrar = Registrar[RetrieverFactory]
ModelProviderRegistrar = Registrar[ModelProviderFactory]
CompactionStrategyRegistrar = Registrar[CompactionStrategyFactory]
EngineRegistrar = Registrar[EngineFactory]
StorageRegistrar = Registrar[StorageFactory]
RerankerRegistrar = Registrar[RerankerFactory]
# any of the above, for a plugin that does not care which
Register = Registrar[Callable[..., object]]


@hookspec
def kairox_register_memory_stores(register: MemoryStoreRegistrar) -> None:
    """Register memory store backends.

    ``register(name, factory)`` where ``factory(path: str) -> MemoryStore`` opens the
    store for a Kairox database path. The built-in ``sqlite`` store is not a plugin: it
    shares the event store's connection, so approvals commit in one transaction.
    """


@hookspec
def kairox_register_embedding_backends(register: EmbeddingBackendRegistrar) -> None:
    """Register embedding backends for the workspace index.

    ``register(name, factory)`` where ``factory(**options) -> EmbeddingBackend``;
    ``options`` come from ``[retrieval.backend_options]`` in kairox.toml. With
    ``register(name, factory, options=Model)`` the core validates them with ``Model``
    and calls ``factory(options=<Model>)``. The built-in ``hashing`` backend is
    registered here.
    """


@hookspec
def kairox_register_retrievers(register: RetrieverRegistrar) -> None:
    """Register knowledge-base kinds.

    ``register(kind, factory)`` where ``factory(kb: KnowledgeBaseConfig) ->
    WorkspaceRetriever`` builds a retriever for one ``[knowledge_bases.<id>]``
    section; ``kb.options`` holds the kind-specific keys and ``kb.secret(name)``
    resolves ``$env:`` values. With ``register(kind, factory, options=Model)`` the core
    validates those keys with ``Model`` and calls ``factory(kb, options=<Model>)``. One
    factory per kind. The retriever declares ``capabilities`` (``RetrieverCapabilities``:
    ``index_files`` for ``kairox kb index``), checked when it is built.
    """


@hookspec
def kairox_register_compaction_strategies(register: CompactionStrategyRegistrar) -> None:
    """Register compaction strategies.

    ``register(name, factory)`` where ``factory(config=KairoxConfig, profile=str | None)
    -> CompactionStrategy``, selected by ``[compaction] strategy``. ``extractive`` and
    ``model`` are built in.
    """


@hookspec
def kairox_register_model_providers(register: ModelProviderRegistrar) -> None:
    """Register chat model providers.

    ``register(name, factory)`` where ``factory(config: ProviderConfig) ->
    ModelProvider``; ``config`` is a ``[providers.<name>]`` section whose ``kind``
    names the registered provider. With ``register(kind, factory, options=Model)`` the
    core validates the section's keys (all but ``kind`` and ``model``) with ``Model``
    and calls ``factory(config, options=<Model>)``. ``openai`` (any OpenAI-compatible
    endpoint) is built in. The provider declares ``capabilities``
    (``ProviderCapabilities``: ``tools`` when ``stream``/``complete`` take ``tools=``),
    checked when it is built.
    """


@hookspec
def kairox_register_commands(cli: click.Group) -> None:
    """Add commands to the ``kairox`` CLI.

    ``cli`` is the root ``click.Group``; add commands or groups to it, e.g.
    ``@cli.command()``. Commands a plugin adds show in ``kairox --help``.
    """


@hookspec
def kairox_on_event(event: Event) -> None:
    """Observe every event after it is appended to the event store.

    ``event`` is a ``kairox_core.events.Event`` with its ``seq`` set. Observers run
    synchronously in the appending process; an observer that raises is reported and
    never stops the session.
    """


@hookspec
def kairox_register_engines(register: EngineRegistrar) -> None:
    """Register engines: objects a session calls at fixed points of every turn.

    ``register(name, factory)`` where ``factory(ctx: EngineContext) -> Engine``
    (``kairox_core.engines``; ``ctx``: the storage, configuration and long-term services
    of the ``Kairox``, never the ``Kairox`` itself): ``before_assembly`` (contribute context),
    ``after_turn`` and ``on_compacted``; subclass ``Engine`` for do-nothing defaults.
    Built once per ``Kairox``, in registration order. The built-in ``compaction``
    (which also serves ``session.compact()``), ``recall`` and ``longterm`` engines are
    registered here.
    """


@hookspec
def kairox_register_storage(register: StorageRegistrar) -> None:
    """Register storage backends: a whole database for events, memories, proposals and
    the retrieval index.

    ``register(name, factory)`` where ``factory(target: str) -> Storage``
    (``kairox_core.store.protocol``); ``Kairox.open`` picks the backend by the target's
    URL scheme (``postgresql://...`` -> ``postgresql``; a plain path -> ``sqlite``). The
    built-in ``sqlite`` storage is registered here. A backend passes
    ``kairox_core.testing.storage_contract.StorageContract`` and declares what it supports
    beyond the protocol in ``capabilities`` (``StorageCapabilities``; its indexes
    ``IndexCapabilities``, its long-term store ``LongTermCapabilities``), checked when
    ``Kairox.open`` builds it (``kairox_core.capabilities``).
    """


@hookspec
def kairox_register_rerankers(register: RerankerRegistrar) -> None:
    """Register rerankers: a second, stronger ranking of the fused top-N hits.

    ``register(name, factory)`` where ``factory(**options) -> Reranker`` (``name`` and
    ``score(query, texts) -> list[float]``, higher is better); ``options`` come from
    ``[profiles.<name>] reranker_options`` of a profile whose ``reranker`` names it.
    Workspace search and recall of past turns reorder their first ``rerank_top_n``
    hits by it.
    """
