"""Declared capabilities (kairox_core/capabilities.py): what the built-ins declare, the
check when a thing leaves its registration, and what the core does with a declaration."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core import Kairox, hookimpl
from kairox_core.capabilities import (
    CapabilityError,
    IndexCapabilities,
    LongTermCapabilities,
    ProviderCapabilities,
    RetrieverCapabilities,
    StorageCapabilities,
    ann_graph,
    empty_probe,
    file_index,
    term_stats,
    verify,
    when_free,
)
from kairox_core.config import KairoxConfig, KnowledgeBaseConfig, ProviderConfig
from kairox_core.engines import ENGINES
from kairox_core.errors import KairoxUserError, PluginError
from kairox_core.facade import open_storage
from kairox_core.longterm.db import has_store, longterm_store
from kairox_core.plugins import (
    MODEL_PROVIDERS,
    RETRIEVERS,
    STORAGE,
    PluginHost,
    get_plugins,
)
from kairox_core.providers.base import ChatChunk, ChatResult
from kairox_core.providers.resolve import build_provider
from kairox_core.retrieval.base import RetrievalHit, indexable
from kairox_core.retrieval.selection import build_knowledge_base
from kairox_core.store.sqlite_storage import SqliteStorage
from kairox_core.toolloop import accepts_tools

# --- what the built-ins declare, checked as the core checks them ------------------------


def test_the_sqlite_storage_its_longterm_store_and_index_pass_their_claims(
    tmp_path: Path, kairox_home: Path
) -> None:
    storage = open_storage(tmp_path / "k.db")  # verifies the storage and its long-term store
    try:
        assert storage.capabilities == StorageCapabilities(longterm=True)
        assert storage.longterm.capabilities == LongTermCapabilities(when_free=True)
        index = verify(storage.workspace_index(KairoxConfig(), "w"), "index")
        try:
            assert index.capabilities == IndexCapabilities(
                term_stats=True, ann=True, empty_probe=True, files=True
            )
            for accessor in (term_stats, ann_graph, empty_probe, file_index):
                assert accessor(index) is index
            probe = empty_probe(index)
            assert probe is not None and probe.surely_empty()
        finally:
            index.close()
        found = when_free(storage.longterm)
        assert found is not None and found.when_free(lambda: True) is True
    finally:
        storage.close()


def test_the_built_in_providers_declare_tools_only_where_stream_takes_them(
    kairox_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    openai = build_provider(ProviderConfig(kind="openai", model="m"))
    scripted = build_provider(ProviderConfig(kind="scripted", model="m"))
    assert accepts_tools(openai) and not accepts_tools(scripted)


def test_a_sqlite_fts_knowledge_base_is_indexable(tmp_path: Path, kairox_home: Path) -> None:
    kb = KnowledgeBaseConfig(id="notes", kind="sqlite_fts", path=str(tmp_path / "fts.db"))
    retriever = build_knowledge_base(kb)
    assert retriever.capabilities == RetrieverCapabilities(index_files=True)
    assert indexable(retriever) is retriever


# --- false or missing claims are refused where the thing is built ------------------------


class _Index:
    capabilities = IndexCapabilities(term_stats=True, ann=True)

    def build_ann(self, threads: int = 0) -> bool:
        return True


def test_a_claim_without_its_method_names_the_capability_and_what_is_missing() -> None:
    with pytest.raises(CapabilityError) as info:
        verify(_Index(), "the test storage's workspace index")
    message = str(info.value)
    assert "the test storage's workspace index" in message
    assert "'term_stats' of IndexCapabilities" in message
    assert "lacks refresh_term_stats" in message and "set term_stats=False" in message
    assert isinstance(info.value, PluginError)


def test_a_thing_without_capabilities_or_with_a_wrong_object_is_refused() -> None:
    class Bare:
        pass

    class Wrong:
        capabilities = ("tools",)

    with pytest.raises(CapabilityError, match="declares no capabilities"):
        verify(Bare(), "model provider 'bare'")
    with pytest.raises(CapabilityError, match="capabilities must be one of"):
        verify(Wrong(), "model provider 'wrong'")


def test_an_undeclared_capability_gives_none_and_an_honest_claim_passes() -> None:
    class Plain:
        capabilities = IndexCapabilities()

    assert term_stats(Plain()) is None and ann_graph(Plain()) is None
    assert empty_probe(Plain()) is None and file_index(Plain()) is None
    plain = Plain()
    assert verify(plain, "index") is plain


class _Storage:
    name = "liar"
    location = "liar://x"
    capabilities = StorageCapabilities(longterm=True)

    def close(self) -> None: ...


class _Plugin:
    @staticmethod
    @hookimpl
    def kairox_register_storage(register: Any) -> None:
        register("liar", lambda target: _Storage())

    @staticmethod
    @hookimpl
    def kairox_register_model_providers(register: Any) -> None:
        register("no-tools", lambda config: _ToolsClaim(config.model or "m"))

    @staticmethod
    @hookimpl
    def kairox_register_retrievers(register: Any) -> None:
        register("no-index", lambda kb: _IndexClaim(kb.id))


class _ToolsClaim:
    """Claims tools, but its stream and complete do not take ``tools=``."""

    capabilities = ProviderCapabilities(tools=True)
    name = "no-tools"

    def __init__(self, model: str) -> None:
        self.model = model

    async def stream(
        self, messages: Sequence[Any], *, max_tokens: int | None = None
    ) -> AsyncIterator[ChatChunk]:
        yield ChatChunk(text="hi")

    async def complete(self, messages: Sequence[Any], *, max_tokens: int | None = None) -> Any:
        return ChatResult(text="hi", model=self.model)

    async def close(self) -> None: ...


class _IndexClaim:
    capabilities = RetrieverCapabilities(index_files=True)

    def __init__(self, name: str) -> None:
        self.name = name

    async def retrieve(
        self, query: str, k: int, filters: Mapping[str, Any] | None = None
    ) -> list[RetrievalHit]:
        return []

    async def close(self) -> None: ...


@pytest.fixture
def liar(kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]) -> None:
    register_plugin(_Plugin(), "liar")


def test_a_storage_claiming_longterm_without_it_is_refused_at_open(liar: None) -> None:
    with pytest.raises(CapabilityError) as info:
        open_storage("liar://somewhere")
    assert "storage backend 'liar'" in str(info.value)
    assert "'longterm' of StorageCapabilities" in str(info.value)


def test_a_provider_claiming_tools_without_the_parameter_is_refused(liar: None) -> None:
    with pytest.raises(CapabilityError) as info:
        build_provider(ProviderConfig(kind="no-tools", model="m"))
    assert "stream(tools=...), complete(tools=...)" in str(info.value)


def test_a_kind_claiming_index_files_without_index_is_refused(liar: None) -> None:
    with pytest.raises(CapabilityError, match=r"knowledge-base kind 'no-index'.*lacks index"):
        build_knowledge_base(KnowledgeBaseConfig(id="x", kind="no-index"))


def test_a_factory_that_is_not_callable_is_refused_when_registered(
    kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    class NotCallable:
        @staticmethod
        @hookimpl
        def kairox_register_engines(register: Any) -> None:
            register("broken", "not a factory")

    host = register_plugin(NotCallable(), "not-callable")
    host.strict = True
    with pytest.raises(PluginError, match="engine 'broken': the factory must be callable"):
        host.registry(ENGINES)


# --- what the core does with a declaration ----------------------------------------------


class _NoLongTerm(SqliteStorage):
    """SQLite storage that does not declare its long-term store."""

    capabilities = StorageCapabilities()


class _NoLongTermPlugin:
    @staticmethod
    @hookimpl
    def kairox_register_storage(register: Any) -> None:
        register("nolt", lambda target: _NoLongTerm(target.split("://", 1)[1]))


async def test_a_storage_without_longterm_runs_with_it_off_and_says_so(
    tmp_path: Path, kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    from kairox_core.engines import AssemblyRequest

    register_plugin(_NoLongTermPlugin(), "nolt")
    with Kairox.open(f"nolt://{tmp_path / 'k.db'}") as kx:
        assert not has_store(kx.storage)
        with pytest.raises(KairoxUserError, match="does not declare the `longterm` capability"):
            longterm_store(kx.storage)
        session = kx.session(workspace="w")
        (out,) = await kx.engine("longterm").before_assembly(
            session, AssemblyRequest("hello", "default")
        )
        assert out.longterm is not None
        assert out.longterm.recall.notes == (
            "long-term memory and packs are not on the sqlite storage",
        )


def test_the_registries_are_read_through_typed_categories(kairox_home: Path) -> None:
    host = get_plugins()
    assert host.get(STORAGE, "sqlite").factory.__name__ == "_open"
    assert "openai" in host.names(MODEL_PROVIDERS) and "sqlite_fts" in host.names(RETRIEVERS)
    assert list(host.registry(ENGINES)) == list(host.registry("engines"))


def test_every_capability_is_documented_in_hooks_md() -> None:
    import dataclasses
    import re

    from kairox_core.capabilities import REQUIRES

    text = (Path(__file__).resolve().parent.parent / "docs" / "hooks.md").read_text()
    section = re.search(r"^### Declared capabilities\n(.*?)(?=^##)", text, re.M | re.S)
    assert section is not None, "docs/hooks.md has no 'Declared capabilities' section"
    for caps, fields in REQUIRES.items():
        assert f"`{caps.__name__}`" in section.group(1), caps.__name__
        assert {f.name for f in dataclasses.fields(caps)} == set(fields), caps.__name__
        for name in fields:
            assert f"`{name}`" in section.group(1), f"{caps.__name__}.{name} is not documented"
