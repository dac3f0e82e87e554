"""A compaction strategy says whether it writes with a model (``StrategyCapabilities``),
checked once where it is built; what it returns is normalised where it enters."""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest

from kairox_core import hookimpl
from kairox_core.capabilities import CapabilityError, StrategyCapabilities
from kairox_core.compaction.base import CompactionOutput, CompactionRequest, as_output
from kairox_core.compaction.model_strategy import ModelStrategy
from kairox_core.compaction.strategies import build_strategy
from kairox_core.config import CompactionSection, KairoxConfig
from kairox_core.plugins import PluginHost
from kairox_core.providers.base import TokenUsage


class _Plugin:
    def __init__(self, name: str, factory: Callable[..., Any]) -> None:
        self.name, self.factory = name, factory

    @hookimpl
    def kairox_register_compaction_strategies(self, register: Callable[..., None]) -> None:
        register(self.name, self.factory)


def _config(strategy: str) -> KairoxConfig:
    return KairoxConfig(compaction=CompactionSection(strategy=strategy))


class Undeclared:
    """A strategy from before declared capabilities: it supports nothing optional."""

    def provider(self) -> object:  # never asked for: not declared
        raise AssertionError("probed")

    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        return CompactionOutput("s")


class ClaimsAModel:
    capabilities = StrategyCapabilities(model=True)

    async def summarize(self, request: CompactionRequest) -> CompactionOutput:
        return CompactionOutput("s")


def test_the_built_ins_declare_whether_they_write_with_a_model(kairox_home: Any) -> None:
    assert build_strategy(_config("extractive")).model() is None
    built = build_strategy(_config("model"))
    assert isinstance(built.strategy, ModelStrategy) and built.model() is built.strategy


def test_a_strategy_declaring_nothing_writes_without_a_model(
    kairox_home: Any, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    register_plugin(_Plugin("old", lambda **kw: Undeclared()), "old")
    built = build_strategy(_config("old"))
    assert built.capabilities == StrategyCapabilities() and built.model() is None


def test_a_claimed_model_without_provider_is_refused_where_it_is_built(
    kairox_home: Any, register_plugin: Callable[[object, str], PluginHost]
) -> None:
    register_plugin(_Plugin("liar", lambda **kw: ClaimsAModel()), "liar")
    with pytest.raises(CapabilityError, match=r"'model'.*lacks provider"):
        build_strategy(_config("liar"))


class _Foreign:
    """A third-party strategy's output: not a ``CompactionOutput``, usage of its own type."""

    def __init__(self, usage: object) -> None:
        self.text, self.model, self.usage = "summary", "m", usage


def test_a_strategys_usage_becomes_a_plain_dict_where_it_enters() -> None:
    tokens = TokenUsage(prompt_tokens=3, completion_tokens=2)
    assert as_output(_Foreign(tokens)).usage == {"prompt_tokens": 3, "completion_tokens": 2}
    proxied = MappingProxyType({"prompt_tokens": 1})
    assert as_output(_Foreign(proxied)).usage == {"prompt_tokens": 1}
    assert as_output(_Foreign(None)).usage is None
    own = CompactionOutput("s", usage=tokens)  # type: ignore[arg-type]  # a plugin's slip
    assert as_output(own).usage == {"prompt_tokens": 3, "completion_tokens": 2}
    with pytest.raises(TypeError, match="usage as int"):
        as_output(_Foreign(7))
