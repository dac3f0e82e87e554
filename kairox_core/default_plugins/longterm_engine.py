"""Built-in plugin: the ``longterm`` engine (active context packs and long-term chunks
recalled by similarity, before every assembly)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import EngineRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.engines import Engine
    from kairox_core.facade import Kairox


def _longterm(kx: Kairox) -> Engine:
    from kairox_core.longterm.engine import LongTermEngine

    return LongTermEngine(kx)


@hookimpl
def kairox_register_engines(register: EngineRegistrar) -> None:
    register("longterm", _longterm)
