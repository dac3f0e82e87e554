"""Built-in plugin: the ``extractive`` compaction strategy (deterministic, no model)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kairox_core.hookspecs import CompactionStrategyRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.compaction.extractive import ExtractiveStrategy
    from kairox_core.compaction.model_strategy import ModelStrategy


def _extractive(**options: Any) -> ExtractiveStrategy:
    from kairox_core.compaction.extractive import ExtractiveStrategy

    return ExtractiveStrategy(**options)


def _model(**options: Any) -> ModelStrategy:
    from kairox_core.compaction.model_strategy import ModelStrategy

    return ModelStrategy(**options)


@hookimpl
def kairox_register_compaction_strategies(register: CompactionStrategyRegistrar) -> None:
    register("extractive", _extractive)
    register("model", _model)
