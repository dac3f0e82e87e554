"""Declared capabilities: what a storage, an index or a model provider says it supports.

An optional operation (an index's keyword statistics or ANN graph, a storage's long-term
store, a provider's tools) is declared in the object's frozen ``capabilities`` attribute
instead of probed with ``getattr`` wherever it is used. ``verify`` checks the claim once
per class, where the object leaves its registration (``open_storage``, a storage's
``workspace_index``, ``build_provider``): a backend that claims a capability without the
methods behind it is refused there, with an error naming the backend, the capability
and what is missing, not with an ``AttributeError`` deep inside a turn.

The typed accessors (``term_stats(index)``, ``ann_graph(index)``, ...) give the
capability's protocol when declared and ``None`` otherwise, so a caller neither probes
nor casts. This module imports only ``kairox_core.errors``: every layer may use it.
(``indexable(retriever)`` lives beside ``IndexableRetriever`` in retrieval/base.py.)
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from kairox_core.errors import PluginError

T = TypeVar("T")


class CapabilityError(PluginError):
    """A backend claims a capability it does not implement (a plugin's bug)."""


# --- the capability objects ------------------------------------------------------------


@dataclass(frozen=True)
class IndexCapabilities:
    """What one space's retrieval index (``WorkspaceIndex``) supports beyond the protocol.

    ``term_stats``: ``refresh_term_stats()`` stores the keyword statistics again once the
    index has grown (SQLite's FTS5 counts); callers run it after bulk indexing.
    ``ann``: ``build_ann()`` builds the approximate-nearest-neighbour graph of a large
    space now rather than inside a search. ``empty_probe``: ``surely_empty()`` answers on
    the event loop, without a thread hop, whether the space surely holds nothing.
    ``files``: ``add_file``, ``documents``, ``optimize``, ``check_backend``, ``backend``
    and ``embedded_chunks``, so ``kairox index`` can index files into it."""

    term_stats: bool = False
    ann: bool = False
    empty_probe: bool = False
    files: bool = False


@dataclass(frozen=True)
class StorageCapabilities:
    """What a storage backend (``Storage``) supports beyond the protocol.

    ``longterm``: its ``longterm`` property is a ``LongTermStore`` (chunks and personal
    packs); a storage without it runs with long-term memory and packs switched off.
    ``check``: ``check() -> list[str]`` reports the database's health for ``kairox db
    check``, one line each, a damaged part's line starting with "damaged"."""

    longterm: bool = False
    check: bool = False


@dataclass(frozen=True)
class LongTermCapabilities:
    """What a ``LongTermStore`` supports beyond the protocol.

    ``when_free``: ``when_free(probe)`` runs a cheap probe only if the store's database
    is free at once (else answers ``None``), so the long-term engine can find "nothing to
    recall" on the event loop instead of hopping to a thread for it."""

    when_free: bool = False


@dataclass(frozen=True)
class ProviderCapabilities:
    """What a model provider supports beyond the protocol.

    ``tools``: ``stream`` and ``complete`` take ``tools=`` (OpenAI's ``tools`` schema),
    so the tool loop offers tools to it. ``tool_limitation``: ``async tool_limitation()
    -> str | None`` says why the model it serves cannot call tools though the provider
    takes them (a local model's chat template), None when it can."""

    tools: bool = False
    tool_limitation: bool = False


@dataclass(frozen=True)
class StrategyCapabilities:
    """What a compaction strategy supports beyond the protocol (a strategy that declares
    none supports nothing optional).

    ``model``: ``provider() -> ModelProvider`` builds the provider it writes with (the
    caller closes it), so long attachments' synopses are written by the same model."""

    model: bool = False


@dataclass(frozen=True)
class RetrieverCapabilities:
    """What a knowledge-base retriever (``WorkspaceRetriever``) supports beyond the
    protocol.

    ``index_files``: ``index(paths, progress=...)`` builds its index from files
    (``IndexableRetriever``), so ``kairox kb index`` can fill it; kinds without it are
    indexed by their own service's tools."""

    index_files: bool = False


# --- the protocol behind each capability -----------------------------------------------


@runtime_checkable
class TermStats(Protocol):
    def refresh_term_stats(self, *, force: bool = False) -> bool: ...


@runtime_checkable
class AnnGraph(Protocol):
    def build_ann(self, threads: int = 0) -> bool: ...


@runtime_checkable
class EmptyProbe(Protocol):
    def surely_empty(self) -> bool: ...


@runtime_checkable
class FileIndex(Protocol):
    """What ``kairox index`` needs of a space's index (``WorkspaceRagIndex`` on SQLite,
    ``PgWorkspaceIndex`` from kairox-postgres): the ``files`` capability plus the
    ``WorkspaceIndex`` methods it uses."""

    embedded_chunks: int
    backend: Any

    @property
    def capabilities(self) -> IndexCapabilities: ...

    def add_file(self, path: str | os.PathLike[str]) -> str: ...
    def check_backend(self) -> None: ...
    def rebuild(self, *, progress: Callable[[int, int], None] | None = ...) -> int: ...
    def documents(self, *, origin: str | None = ...) -> Sequence[Any]: ...
    def delete_many(self, doc_ids: Iterable[str]) -> int: ...
    def optimize(self) -> None: ...
    def chunk_count(self) -> int: ...
    def close(self) -> None: ...


@runtime_checkable
class WhenFree(Protocol):
    def when_free(self, probe: Callable[[], bool]) -> bool | None: ...


@runtime_checkable
class ToolLimitation(Protocol):
    async def tool_limitation(self) -> str | None: ...


# The methods (or attributes) a claim of each capability requires.
REQUIRES: dict[type, dict[str, tuple[str, ...]]] = {
    IndexCapabilities: {
        "term_stats": ("refresh_term_stats",),
        "ann": ("build_ann",),
        "empty_probe": ("surely_empty",),
        "files": (
            "add_file",
            "documents",
            "optimize",
            "check_backend",
            "backend",
            "embedded_chunks",
        ),
    },
    StorageCapabilities: {"longterm": ("longterm",), "check": ("check",)},
    LongTermCapabilities: {"when_free": ("when_free",)},
    ProviderCapabilities: {
        "tools": ("stream", "complete"),
        "tool_limitation": ("tool_limitation",),
    },
    StrategyCapabilities: {"model": ("provider",)},
    RetrieverCapabilities: {"index_files": ("index",)},
}


# --- declaring and checking ------------------------------------------------------------


class Declares(Protocol):
    """Anything with a ``capabilities`` object (a class attribute, usually)."""

    @property
    def capabilities(self) -> object: ...


_verified: set[tuple[type, object]] = set()
_verified_lock = threading.Lock()


def _claimed(caps: object, what: str) -> list[tuple[str, tuple[str, ...]]]:
    table = REQUIRES.get(type(caps))
    if table is None:
        raise CapabilityError(
            f"{what}: capabilities must be one of {', '.join(t.__name__ for t in REQUIRES)}, "
            f"got {type(caps).__name__}"
        )
    return [
        (f.name, table[f.name])
        for f in dataclasses.fields(cast(Any, caps))
        if getattr(caps, f.name)
    ]


def _missing(obj: object, names: Iterable[str]) -> list[str]:
    cls = type(obj)
    return [n for n in names if not hasattr(cls, n) and n not in getattr(obj, "__dict__", {})]


def verify(obj: T, what: str) -> T:
    """``obj`` itself once its declared ``capabilities`` are checked (once per class and
    declaration); ``what`` names it in the error, e.g. "storage backend 'postgresql'".

    Raises ``CapabilityError`` when the object declares none, declares something that is
    not a capability object, or claims a capability whose methods it lacks; a provider
    claiming ``tools`` must take ``tools=`` in ``stream`` and ``complete``."""
    cls = type(obj)
    caps = getattr(obj, "capabilities", None)
    if caps is None:
        raise CapabilityError(
            f"{what} ({cls.__module__}.{cls.__qualname__}) declares no capabilities; "
            "give the class a `capabilities` attribute (kairox_core.capabilities), e.g. "
            "`capabilities = IndexCapabilities()` when it supports nothing optional"
        )
    key = (cls, caps)
    if type(caps) in REQUIRES and key in _verified:  # checked before: a set lookup
        return obj
    for name, names in _claimed(caps, what):
        missing = _missing(obj, names)
        if name == "tools" and not missing:
            missing = [f"{m}(tools=...)" for m in names if not _takes_tools(getattr(obj, m))]
        if missing:
            raise CapabilityError(
                f"{what} ({cls.__module__}.{cls.__qualname__}) claims the capability "
                f"'{name}' of {type(caps).__name__} but lacks {', '.join(missing)}; "
                f"implement {'them' if len(missing) > 1 else 'it'} or set {name}=False"
            )
    with _verified_lock:
        _verified.add(key)
    return obj


C = TypeVar("C")


def declared(obj: object, what: str, default: C) -> C:
    """What ``obj`` declares, checked as ``verify`` checks it, or ``default`` (nothing
    optional) when it declares nothing: for a seam whose plugins predate declared
    capabilities (compaction strategies). Called once, where the thing is built."""
    caps = getattr(obj, "capabilities", None)
    if caps is None:
        return default
    if not isinstance(caps, type(default)):
        raise CapabilityError(
            f"{what}: capabilities must be a {type(default).__name__}, got {type(caps).__name__}"
        )
    verify(obj, what)
    return caps


def _takes_tools(method: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin without a signature: cannot tell
        return False
    return "tools" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


# --- typed accessors: the capability's protocol when declared, else None ----------------


class _HasIndexCaps(Protocol):
    @property
    def capabilities(self) -> IndexCapabilities: ...


@runtime_checkable
class HealthCheck(Protocol):
    def check(self) -> list[str]: ...


class _HasStorageCaps(Protocol):
    @property
    def capabilities(self) -> StorageCapabilities: ...


class _HasLongTermCaps(Protocol):
    @property
    def capabilities(self) -> LongTermCapabilities: ...


def term_stats(index: _HasIndexCaps) -> TermStats | None:
    return cast(TermStats, index) if index.capabilities.term_stats else None


def ann_graph(index: _HasIndexCaps) -> AnnGraph | None:
    return cast(AnnGraph, index) if index.capabilities.ann else None


def empty_probe(index: _HasIndexCaps) -> EmptyProbe | None:
    return cast(EmptyProbe, index) if index.capabilities.empty_probe else None


def file_index(index: _HasIndexCaps) -> FileIndex | None:
    return cast(FileIndex, index) if index.capabilities.files else None


def health_check(storage: _HasStorageCaps) -> HealthCheck | None:
    return cast(HealthCheck, storage) if storage.capabilities.check else None


def when_free(store: _HasLongTermCaps) -> WhenFree | None:
    return cast(WhenFree, store) if store.capabilities.when_free else None


class _HasProviderCaps(Protocol):
    @property
    def capabilities(self) -> ProviderCapabilities: ...


def tool_limitation(provider: _HasProviderCaps) -> ToolLimitation | None:
    return cast(ToolLimitation, provider) if provider.capabilities.tool_limitation else None


__all__ = [
    "AnnGraph",
    "CapabilityError",
    "Declares",
    "EmptyProbe",
    "FileIndex",
    "HealthCheck",
    "IndexCapabilities",
    "LongTermCapabilities",
    "ProviderCapabilities",
    "RetrieverCapabilities",
    "StorageCapabilities",
    "StrategyCapabilities",
    "TermStats",
    "ToolLimitation",
    "WhenFree",
    "ann_graph",
    "declared",
    "empty_probe",
    "file_index",
    "health_check",
    "term_stats",
    "tool_limitation",
    "verify",
    "when_free",
]
