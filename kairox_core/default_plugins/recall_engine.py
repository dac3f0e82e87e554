"""Built-in plugin: the ``recall`` engine (every turn indexed, recalled per prompt)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kairox_core.hookspecs import EngineRegistrar, hookimpl

if TYPE_CHECKING:
    from kairox_core.engines import Engine
    from kairox_core.facade import Kairox


def _recall(kx: Kairox) -> Engine:
    from kairox_core.recall.engine import Recall

    return Recall(kx)


@hookimpl
def kairox_register_engines(register: EngineRegistrar) -> None:
    register("recall", _recall)
