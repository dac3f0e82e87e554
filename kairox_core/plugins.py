"""The plugin manager: built-ins, entry-point plugins, failures, tracing.

Built-in implementations are plugins registered exactly like external ones. External
plugins come from the entry-point group ``kairox`` and are loaded by our own loop, so
one that fails to import is recorded (a warning, and a row in ``kairox plugins``)
instead of breaking everything; ``KAIROX_STRICT_PLUGINS=1`` makes any failure fatal.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import pluggy
from pluggy import HookImpl
from pydantic import BaseModel

from kairox_core import hookspecs
from kairox_core.errors import DuplicateRegistrationError, PluginError, UnknownNameError

if TYPE_CHECKING:
    from kairox_core.events import Event
    from kairox_core.hookspecs import (
        CompactionStrategyFactory,
        EmbeddingBackendFactory,
        MemoryStoreFactory,
        ModelProviderFactory,
        RerankerFactory,
        RetrieverFactory,
        StorageFactory,
    )

ENTRY_POINT_GROUP = "kairox"

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class Category(Generic[F]):
    """One registry, typed with its factories' signature: ``host.get(STORAGE, name)`` is
    a ``Registration[StorageFactory]``, so calling its factory is type-checked. A
    registry whose products live above this module is typed where they do
    (``kairox_core.engines.ENGINES``)."""

    key: str


MEMORY_STORES: Category[MemoryStoreFactory] = Category("memory_stores")
EMBEDDING_BACKENDS: Category[EmbeddingBackendFactory] = Category("embedding_backends")
RETRIEVERS: Category[RetrieverFactory] = Category("retrievers")
COMPACTION_STRATEGIES: Category[CompactionStrategyFactory] = Category("compaction_strategies")
MODEL_PROVIDERS: Category[ModelProviderFactory] = Category("model_providers")
STORAGE: Category[StorageFactory] = Category("storage")
RERANKERS: Category[RerankerFactory] = Category("rerankers")

# What each registry is called, and the hook that fills it.
CATEGORIES: dict[str, str] = {
    "memory_stores": "kairox_register_memory_stores",
    "embedding_backends": "kairox_register_embedding_backends",
    "retrievers": "kairox_register_retrievers",
    "compaction_strategies": "kairox_register_compaction_strategies",
    "model_providers": "kairox_register_model_providers",
    "engines": "kairox_register_engines",
    "storage": "kairox_register_storage",
    "rerankers": "kairox_register_rerankers",
}
CATEGORY_NOUN = {
    "memory_stores": "memory store",
    "embedding_backends": "embedding backend",
    "retrievers": "knowledge-base kind",
    "compaction_strategies": "compaction strategy",
    "model_providers": "model provider",
    "engines": "engine",
    "storage": "storage backend",
    "rerankers": "reranker",
}

# Names provided by Kairox's own optional distributions, for "pip install ..." hints.
KNOWN_DISTRIBUTIONS: dict[tuple[str, str], str] = {
    ("retrievers", "tantivy"): "kairox-tantivy",
    ("retrievers", "bedrock"): "kairox-bedrock",
    ("retrievers", "pinecone"): "kairox-pinecone",
    ("retrievers", "weaviate"): "kairox-weaviate",
    ("embedding_backends", "sentence-transformers"): "kairox-sentence-transformers",
    ("model_providers", "llamacpp"): "kairox-llamacpp",
    ("storage", "postgresql"): "kairox-postgres",
    ("rerankers", "cross-encoder"): "kairox-sentence-transformers",
}

# Built-in plugins: modules under kairox_core.default_plugins, registered like any other.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "kairox_core.default_plugins.core_commands",
    "kairox_core.default_plugins.hashing_embeddings",
    "kairox_core.default_plugins.sqlite_fts",
    "kairox_core.default_plugins.openai_provider",
    "kairox_core.default_plugins.compaction_strategies",
    "kairox_core.default_plugins.compaction_engine",
    "kairox_core.default_plugins.recall_engine",
    "kairox_core.default_plugins.longterm_engine",
    "kairox_core.default_plugins.sqlite_storage",
)


@dataclass(frozen=True)
class Registration(Generic[F]):
    """One name registered by one plugin; ``options`` is its pydantic options model, if
    any (the core validates the section with it and passes the factory ``options=``)."""

    category: str
    name: str
    factory: F
    plugin: str
    distribution: str
    options: type[BaseModel] | None = None


@dataclass
class PluginInfo:
    """What ``kairox plugins`` reports about one plugin."""

    name: str
    distribution: str
    version: str
    builtin: bool
    hooks: list[str] = field(default_factory=list)
    registers: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "builtin": self.builtin,
            "hooks": sorted(self.hooks),
            "registers": {k: sorted(v) for k, v in sorted(self.registers.items()) if v},
            "error": self.error,
        }


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _norm(dist: str) -> str:
    return dist.strip().lower().replace("_", "-").replace(".", "-")


def _env_list(name: str) -> set[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return {_norm(p) for p in raw.split(",") if p.strip()}


class PluginHost:
    """Owns the pluggy manager, what each plugin registered, and load errors."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager("kairox")
        self.pm.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self.strict = _env_flag("KAIROX_STRICT_PLUGINS")
        self._registries: dict[str, dict[str, Registration[Any]]] | None = None
        self._lock = threading.RLock()
        if _env_flag("KAIROX_TRACE_PLUGINS"):
            self.pm.add_hookcall_monitoring(self._trace_before, self._trace_after)
        self._load_defaults()
        if load_entry_points:
            self._load_entry_points()

    # --- loading -----------------------------------------------------------------

    def _fail(self, info: PluginInfo, error: str) -> None:
        info.error = error
        self.infos[info.name] = info
        if self.strict:
            raise PluginError(f"plugin '{info.name}' ({info.distribution}): {error}")
        warnings.warn(
            f"kairox: plugin '{info.name}' from {info.distribution} failed to load: {error}",
            RuntimeWarning,
            stacklevel=3,
        )

    def _disabled(self) -> set[str]:
        return _env_list("KAIROX_DISABLE_PLUGINS") or set()

    def _load_defaults(self) -> None:
        version = _dist_version("kairox-core")
        for module_name in DEFAULT_PLUGINS:
            short = module_name.rsplit(".", 1)[-1]
            if _norm(short) in self._disabled() or _norm(module_name) in self._disabled():
                continue
            module = importlib.import_module(module_name)
            info = PluginInfo(module_name, "kairox-core", version, builtin=True)
            self._register_checked(module, info)

    def _load_entry_points(self) -> None:
        wanted = _env_list("KAIROX_LOAD_PLUGINS")
        disabled = self._disabled()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "unknown"
            if wanted is not None and _norm(dist) not in wanted and _norm(ep.name) not in wanted:
                continue
            if _norm(dist) in disabled or _norm(ep.name) in disabled:
                continue
            version = ep.dist.version if ep.dist is not None else "?"
            info = PluginInfo(ep.name, dist, version, builtin=False)
            if ep.name in self.infos:
                self._fail(
                    info,
                    f"plugin name '{ep.name}' is already taken by "
                    f"{self.infos[ep.name].distribution}",
                )
                continue
            try:
                module = ep.load()
            except Exception as exc:  # any import-time failure is the plugin's, not ours
                self._fail(info, f"import failed: {type(exc).__name__}: {exc}")
                continue
            self._register_checked(module, info)

    def _register_checked(self, plugin: object, info: PluginInfo) -> None:
        try:
            self.pm.register(plugin, name=info.name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            self._fail(info, str(exc))
            return
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(plugin)
            self._fail(info, f"implements an unknown hook: {exc}")
            return
        info.hooks = [h.name for h in self.pm.get_hookcallers(plugin) or []]
        self.infos[info.name] = info
        self._registries = None

    def add(self, plugin: object, name: str, *, distribution: str = "test") -> None:
        """Register a plugin object at run time (tests, embedding applications)."""
        with self._lock:
            info = PluginInfo(name, distribution, "0", builtin=False)
            if name in self.infos:
                raise PluginError(f"a plugin named '{name}' is already registered")
            self._register_checked(plugin, info)
            if info.error:
                raise PluginError(f"plugin '{name}': {info.error}")

    def remove(self, name: str) -> None:
        with self._lock:
            plugin = self.pm.get_plugin(name)
            if plugin is not None:
                self.pm.unregister(plugin)
            self.infos.pop(name, None)
            self._registries = None

    # --- registries --------------------------------------------------------------

    def _collect(self) -> dict[str, dict[str, Registration[Any]]]:
        registries: dict[str, dict[str, Registration[Any]]] = {c: {} for c in CATEGORIES}
        for info in self.infos.values():
            info.registers = {}
        for category, hook_name in CATEGORIES.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                info = self.infos[impl.plugin_name]

                def register(
                    name: str,
                    factory: Callable[..., object],
                    *,
                    options: type[BaseModel] | None = None,
                    _category: str = category,
                    _info: PluginInfo = info,
                ) -> None:
                    if not callable(factory):
                        raise PluginError(
                            f"{CATEGORY_NOUN[_category]} '{name}': the factory must be "
                            f"callable, got {type(factory).__name__}"
                        )
                    if options is not None and not (
                        isinstance(options, type) and issubclass(options, BaseModel)
                    ):
                        raise PluginError(
                            f"{CATEGORY_NOUN[_category]} '{name}': options must be a pydantic "
                            f"model class, got {options!r}"
                        )
                    existing = registries[_category].get(name)
                    if existing is not None:
                        raise DuplicateRegistrationError(
                            f"{CATEGORY_NOUN[_category]} '{name}' is registered twice: by "
                            f"plugin '{existing.plugin}' ({existing.distribution}) and by "
                            f"plugin '{_info.name}' ({_info.distribution})"
                        )
                    registries[_category][name] = Registration(
                        _category, name, factory, _info.name, _info.distribution, options
                    )
                    _info.registers.setdefault(_category, []).append(name)

                self._trace(hook_name, impl.plugin_name)
                try:
                    impl.function(register=register)
                except DuplicateRegistrationError as exc:
                    # The first registration wins; the clash is reported on the second.
                    if self.strict:
                        raise
                    info.error = str(exc)
                    warnings.warn(f"kairox: {exc}", RuntimeWarning, stacklevel=2)
                except Exception as exc:
                    if self.strict:
                        raise PluginError(
                            f"plugin '{info.name}' failed in {hook_name}: {exc}"
                        ) from exc
                    info.error = f"{hook_name} failed: {type(exc).__name__}: {exc}"
        return registries

    @overload
    def registry(self, category: Category[F]) -> dict[str, Registration[F]]: ...
    @overload
    def registry(self, category: str) -> dict[str, Registration[Any]]: ...
    def registry(self, category: Category[Any] | str) -> dict[str, Registration[Any]]:
        """A category's registrations by name (typed when given a ``Category``)."""
        key = category.key if isinstance(category, Category) else category
        with self._lock:
            if self._registries is None:
                self._registries = self._collect()
            return self._registries[key]

    def names(self, category: Category[Any] | str) -> list[str]:
        return sorted(self.registry(category))

    @overload
    def get(
        self,
        category: Category[F],
        name: str,
        *,
        context: str | None = None,
        builtin: Iterable[str] = (),
    ) -> Registration[F]: ...
    @overload
    def get(
        self,
        category: str,
        name: str,
        *,
        context: str | None = None,
        builtin: Iterable[str] = (),
    ) -> Registration[Any]: ...
    def get(
        self,
        category: Category[Any] | str,
        name: str,
        *,
        context: str | None = None,
        builtin: Iterable[str] = (),
    ) -> Registration[Any]:
        """The registration for ``name``, or an error saying what to install.

        ``builtin`` names are served by the core without a plugin; they are only listed
        among the choices in the error.
        """
        reg = self.registry(category).get(name)
        if reg is not None:
            return reg
        key = category.key if isinstance(category, Category) else category
        noun = CATEGORY_NOUN[key]
        where = f"{context}: " if context else ""
        dist = KNOWN_DISTRIBUTIONS.get((key, name))
        available = ", ".join(sorted({*builtin, *self.names(key)})) or "none"
        if dist:
            fix = f"install the plugin that provides it: pip install {dist}"
        else:
            fix = f"use one of: {available}"
        raise UnknownNameError(f"{where}no installed plugin provides the {noun} '{name}'; {fix}")

    def plugin_infos(self) -> list[PluginInfo]:
        with self._lock:
            if self._registries is None:
                self._registries = self._collect()
            return sorted(self.infos.values(), key=lambda i: (not i.builtin, i.name))

    # --- events ------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Call every ``kairox_on_event`` observer; one that raises never stops the caller."""
        for impl in self.pm.hook.kairox_on_event.get_hookimpls():
            self._trace("kairox_on_event", impl.plugin_name)
            try:
                impl.function(event=event)
            except Exception as exc:
                warnings.warn(
                    f"kairox: event observer in plugin '{impl.plugin_name}' raised "
                    f"{type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    # --- tracing -----------------------------------------------------------------

    def _trace(self, hook_name: str, plugin_name: str) -> None:
        if _env_flag("KAIROX_TRACE_PLUGINS"):
            print(f"kairox-trace: {hook_name} -> {plugin_name}", file=sys.stderr)

    def _trace_before(
        self, hook_name: str, impls: Sequence[HookImpl], kwargs: Mapping[str, object]
    ) -> None:
        names = ", ".join(i.plugin_name for i in impls)
        print(f"kairox-trace: call {hook_name}({', '.join(kwargs)}) -> [{names}]", file=sys.stderr)

    def _trace_after(
        self,
        outcome: object,
        hook_name: str,
        impls: Sequence[HookImpl],
        kwargs: Mapping[str, object],
    ) -> None:
        print(f"kairox-trace: done {hook_name}", file=sys.stderr)


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "0+unknown"


_host: PluginHost | None = None
_host_lock = threading.Lock()


def get_plugins() -> PluginHost:
    """The process-wide plugin host, loaded on first use."""
    global _host
    with _host_lock:
        if _host is None:
            _host = PluginHost()
        return _host


def reset_plugins() -> None:
    """Forget the loaded plugins; the next ``get_plugins()`` reloads (env vars re-read)."""
    global _host
    with _host_lock:
        _host = None


@contextmanager
def plugin_registered(plugin: object, name: str) -> Iterator[PluginHost]:
    """Register ``plugin`` for the duration of a block, then remove it."""
    host = get_plugins()
    host.add(plugin, name)
    try:
        yield host
    finally:
        host.remove(name)
