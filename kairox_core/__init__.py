"""Kairox: durable memory, retrieval and a context window that never overflows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kairox_core.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["Kairox", "__version__", "hookimpl"]

if TYPE_CHECKING:
    from kairox_core.facade import Kairox


def __getattr__(name: str) -> Any:
    # The facade pulls in the stores and the assembler; import it only when asked.
    if name == "Kairox":
        from kairox_core.facade import Kairox

        return Kairox
    raise AttributeError(name)
