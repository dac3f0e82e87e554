"""Built-in plugin: the ``compaction`` engine (turn-end check, ``session.compact()``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import EngineRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.engines import Engine
    from kairox_core.facade import Kairox


def _compaction(kx: Kairox) -> Engine:
    from kairox_core.compaction.compactor import Compactor

    return Compactor(kx)


@hookimpl
def kairox_register_engines(register: EngineRegistrar) -> None:
    register("compaction", _compaction)
