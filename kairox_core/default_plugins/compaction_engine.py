"""Built-in plugin: the ``compaction`` engine (turn-end check, ``session.compact()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.engines import EngineRegistrar
from kairox_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import Engine


def _compaction(ctx: EngineContext) -> Engine:
    from kairox_core.compaction.compactor import Compactor

    return Compactor(ctx)


@hookimpl
def kairox_register_engines(register: EngineRegistrar) -> None:
    register("compaction", _compaction)
