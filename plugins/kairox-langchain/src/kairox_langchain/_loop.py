"""Where this adapter runs Kairox's coroutines that hold clients (retrievers): always on
Kairox's one background loop (``kairox_core.run_sync`` / ``run_async``, see DEVELOPERS.md
"Sync twins run on one background loop"), from sync and async callers alike, so a
client created by one call is never used from another loop."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from kairox_core import run_async, run_sync

T = TypeVar("T")


def on_kairox_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on Kairox's loop and wait (from any thread but that loop's)."""
    return run_sync(coro)


async def aon_kairox_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on Kairox's loop without blocking the caller's loop."""
    return await run_async(coro)
