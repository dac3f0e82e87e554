"""Typed registrars: a plugin's options model is validated by the core, errors like its own."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from kairox_core import hookimpl
from kairox_core.capabilities import RetrieverCapabilities
from kairox_core.cli import main
from kairox_core.config import KnowledgeBaseConfig, check_plugin_names, parse_config
from kairox_core.errors import ConfigError
from kairox_core.hookspecs import RetrieverRegistrar
from kairox_core.plugins import PluginHost
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.retrieval.selection import build_knowledge_base


class NotesOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    depth: int = Field(2, ge=1)


class NotesRetriever:
    capabilities = RetrieverCapabilities()

    def __init__(self, kb: KnowledgeBaseConfig, options: NotesOptions) -> None:
        self.name = kb.id
        self.options = options

    async def retrieve(
        self, query: str, k: int, filters: dict[str, Any] | None = None
    ) -> list[RetrievalHit]:
        return []

    async def close(self) -> None:
        return None


class NotesPlugin:
    @hookimpl
    def kairox_register_retrievers(self, register: RetrieverRegistrar) -> None:
        def make(kb: KnowledgeBaseConfig, *, options: NotesOptions) -> NotesRetriever:
            return NotesRetriever(kb, options)

        register("notes", make, options=NotesOptions)


def _config(body: str, source: str = "/etc/kx/kairox.toml") -> Any:
    import tomllib

    return parse_config(tomllib.loads(body), source=source)


@pytest.fixture
def notes(kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]) -> PluginHost:
    return register_plugin(NotesPlugin(), "notes-plugin")


def test_the_registration_carries_the_model(notes: PluginHost) -> None:
    assert notes.get("retrievers", "notes").options is NotesOptions


def test_the_factory_gets_the_validated_model(notes: PluginHost) -> None:
    config = _config('[knowledge_bases.kb1]\nkind = "notes"\npath = "/n"\ndepth = 3\n')
    check_plugin_names(config)  # no error
    retriever = build_knowledge_base(config.knowledge_bases["kb1"])
    assert isinstance(retriever, NotesRetriever)
    assert retriever.options == NotesOptions(path="/n", depth=3)


def test_a_typo_names_file_key_and_the_closest_key(notes: PluginHost) -> None:
    config = _config('[knowledge_bases.kb1]\nkind = "notes"\npath = "/n"\ndepht = 3\n')
    with pytest.raises(ConfigError) as info:
        check_plugin_names(config)
    err = info.value
    assert err.file == "/etc/kx/kairox.toml" and err.key == "knowledge_bases.kb1.depht"
    assert "unknown key 'knowledge_bases.kb1.depht'" in str(err)
    assert "did you mean 'depth'?" in str(err)


def test_missing_and_bad_values_are_reported_together(notes: PluginHost) -> None:
    config = _config('[knowledge_bases.kb1]\nkind = "notes"\ndepth = 0\n')
    with pytest.raises(ConfigError) as info:
        check_plugin_names(config)
    text = str(info.value)
    assert "missing required key 'knowledge_bases.kb1.path'" in text
    assert "key 'knowledge_bases.kb1.depth'" in text and "greater than or equal to 1" in text


def test_building_validates_too(notes: PluginHost) -> None:
    kb = KnowledgeBaseConfig(id="kb1", kind="notes", depth="many")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"knowledge_bases\.kb1\.path"):
        build_knowledge_base(kb)


def test_the_cli_exits_2_with_file_and_key(
    notes: PluginHost, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "kairox.toml"
    toml.write_text('[knowledge_bases.kb1]\nkind = "notes"\npaht = "/n"\n')
    with pytest.raises(SystemExit) as info:
        main(["--config", str(toml), "config", "check"])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert str(toml) in err and "knowledge_bases.kb1.paht" in err
    assert "did you mean 'path'?" in err and "Traceback" not in err


def test_provider_sections_are_checked_up_front(kairox_home: Path) -> None:
    config = _config('[providers.oa]\nkind = "openai"\nmodel = "m"\nbase_ulr = "http://x"\n')
    with pytest.raises(ConfigError) as info:
        check_plugin_names(config)
    assert info.value.key == "providers.oa.base_ulr" and "did you mean 'base_url'?" in str(
        info.value
    )


def test_options_must_be_a_pydantic_model(
    kairox_home: Path, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    class Broken:
        @hookimpl
        def kairox_register_retrievers(self, register: Any) -> None:
            register("broken", lambda kb: None, options={"path": str})

    host = register_plugin(Broken(), "broken-plugin")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "broken" not in host.names("retrievers")
    info = {i.name: i for i in host.plugin_infos()}["broken-plugin"]
    assert info.error is not None and "pydantic model" in info.error
