"""Built-in plugin: the ``longterm`` engine (active context packs and long-term chunks
recalled by similarity, before every assembly)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.engines import EngineRegistrar
from kairox_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import Engine


def _longterm(ctx: EngineContext) -> Engine:
    from kairox_core.longterm.engine import LongTermEngine

    return LongTermEngine(ctx)


@hookimpl
def kairox_register_engines(register: EngineRegistrar) -> None:
    register("longterm", _longterm)
