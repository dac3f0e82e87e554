"""Built-in plugin: the ``extractive`` compaction strategy (deterministic, no model)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import CompactionStrategyRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.compaction.extractive import ExtractiveStrategy
    from kairox_core.compaction.model_strategy import ModelStrategy
    from kairox_core.config.model import KairoxConfig


def _extractive(*, config: KairoxConfig, profile: str | None) -> ExtractiveStrategy:
    from kairox_core.compaction.extractive import ExtractiveStrategy

    return ExtractiveStrategy()


def _model(*, config: KairoxConfig, profile: str | None) -> ModelStrategy:
    from kairox_core.compaction.model_strategy import ModelStrategy

    return ModelStrategy(config=config, profile=profile)


@hookimpl
def kairox_register_compaction_strategies(register: CompactionStrategyRegistrar) -> None:
    register("extractive", _extractive)
    register("model", _model)
