"""Synchronous twins of async methods: ``begin_turn_sync = twin(begin_turn)``.

Scripts, the CLI and notebooks call a session's and a turn's ``*_sync`` methods; each
runs its async method on Kairox's one background loop (``sync.run_sync``), so it also
works inside a running event loop. A session's twins first check that no turn holds
the session (``idle=True``): a synchronous call would otherwise wait forever on a lock
only the caller could release. One helper instead of a hand-written body per twin keeps
each twin's signature the async method's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from kairox_core.sync import run_sync

P = ParamSpec("P")
R = TypeVar("R")


class Checked(Protocol):
    def _check_idle(self) -> None: ...


S = TypeVar("S")
C = TypeVar("C", bound=Checked)


def twin(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], R]:
    """``method`` run to completion on the background loop."""

    @functools.wraps(method)
    def sync(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(method(self, *args, **kwargs))

    sync.__name__, sync.__qualname__ = f"{method.__name__}_sync", f"{method.__qualname__}_sync"
    return sync


def idle_twin(
    method: Callable[Concatenate[C, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[C, P], R]:
    """``twin``, refusing at once (``TurnInProgress``) while a turn holds the session."""

    @functools.wraps(method)
    def sync(self: C, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._check_idle()
        return run_sync(method(self, *args, **kwargs))

    sync.__name__, sync.__qualname__ = f"{method.__name__}_sync", f"{method.__qualname__}_sync"
    return sync


__all__ = ["idle_twin", "twin"]
