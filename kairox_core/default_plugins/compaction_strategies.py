"""Built-in plugin: the ``extractive`` compaction strategy (deterministic, no model)."""

from __future__ import annotations

from typing import Any

from kairox_core.hookspecs import Register, hookimpl


def _extractive(**options: Any) -> Any:
    from kairox_core.compaction.extractive import ExtractiveStrategy

    return ExtractiveStrategy(**options)


def _model(**options: Any) -> Any:
    from kairox_core.compaction.model_strategy import ModelStrategy

    return ModelStrategy(**options)


@hookimpl
def kairox_register_compaction_strategies(register: Register) -> None:
    register("extractive", _extractive)
    register("model", _model)
