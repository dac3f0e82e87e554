"""Built-in plugin: the ``recall`` engine (every turn indexed, recalled per prompt)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.engines import EngineRegistrar
from kairox_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import Engine


def _recall(ctx: EngineContext) -> Engine:
    from kairox_core.recall.engine import Recall

    return Recall(ctx)


@hookimpl
def kairox_register_engines(register: EngineRegistrar) -> None:
    register("recall", _recall)
