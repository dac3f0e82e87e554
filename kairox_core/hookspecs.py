"""Every Kairox hook, in one place.

Plugins implement these with ``@kairox_core.hookimpl``. The ``kairox_register_*``
hooks follow the register-callback style of ``llm``: the hook receives a
``register(name, factory)`` callable and calls it once per thing it provides. A name
registered twice (by two plugins, or twice by one) is an error naming both.
Factories are called lazily, so a plugin's heavy imports belong inside them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("kairox")
hookimpl = pluggy.HookimplMarker("kairox")

Register = Callable[..., None]


@hookspec
def kairox_register_memory_stores(register: Register) -> None:
    """Register memory store backends.

    ``register(name, factory)`` where ``factory(path: str) -> MemoryStore`` opens the
    store for a Kairox database path. The built-in ``sqlite`` store is registered here.
    """


@hookspec
def kairox_register_embedding_backends(register: Register) -> None:
    """Register embedding backends for the workspace index.

    ``register(name, factory)`` where ``factory(**options) -> EmbeddingBackend``;
    ``options`` come from ``[retrieval.backend_options]`` in kairox.toml. The built-in
    ``hashing`` backend is registered here.
    """


@hookspec
def kairox_register_retrievers(register: Register) -> None:
    """Register knowledge-base kinds.

    ``register(kind, factory)`` where ``factory(kb: KnowledgeBaseConfig) ->
    WorkspaceRetriever`` builds a retriever for one ``[knowledge_bases.<id>]``
    section; ``kb.options`` holds the kind-specific keys and ``kb.secret(name)``
    resolves ``$env:`` values. One factory per kind.
    """


@hookspec
def kairox_register_compaction_strategies(register: Register) -> None:
    """Register compaction strategies.

    ``register(name, factory)`` where ``factory(**options) -> CompactionStrategy``,
    selected by ``[compaction] strategy``. ``extractive`` and ``model`` are built in.
    """


@hookspec
def kairox_register_model_providers(register: Register) -> None:
    """Register chat model providers.

    ``register(name, factory)`` where ``factory(config: ProviderConfig) ->
    ModelProvider``; ``config`` is a ``[providers.<name>]`` section whose ``kind``
    names the registered provider. ``openai`` (any OpenAI-compatible endpoint) is
    built in.
    """


@hookspec
def kairox_register_commands(cli: Any) -> None:
    """Add commands to the ``kairox`` CLI.

    ``cli`` is the root ``click.Group``; add commands or groups to it, e.g.
    ``@cli.command()``. Commands a plugin adds show in ``kairox --help``.
    """


@hookspec
def kairox_on_event(event: Any) -> None:
    """Observe every event after it is appended to the event store.

    ``event`` is a ``kairox_core.events.Event`` with its ``seq`` set. Observers run
    synchronously in the appending process; an observer that raises is reported and
    never stops the session.
    """


@hookspec
def kairox_register_rerankers(register: Register) -> None:
    """Register rerankers: a second, stronger ranking of the fused top-N hits.

    ``register(name, factory)`` where ``factory(**options) -> Reranker`` (``name`` and
    ``score(query, texts) -> list[float]``, higher is better); ``options`` come from
    ``[profiles.<name>] reranker_options`` of a profile whose ``reranker`` names it.
    Workspace search and recall of past turns reorder their first ``rerank_top_n``
    hits by it.
    """
