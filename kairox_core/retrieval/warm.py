"""Loaded components stay warm: one instance per (plugin factory, options) per process.

Building an embedding backend or a reranker can mean loading a model (seconds, hundreds
of MB). A long-lived process (``kairox chat``, ``kairox serve``) opens a retriever per
session and per profile switch, and recall opens its own: without this cache each of
them would load the model again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_CACHE: dict[tuple[Hashable, ...], Any] = {}
_LOCK = threading.RLock()  # reentrant: a factory may itself load another component


def options_key(options: Mapping[str, Any]) -> str:
    """A stable key for an options mapping (order-independent)."""
    return json.dumps(dict(options), sort_keys=True, default=repr)


def warm(key: tuple[Hashable, ...], build: Callable[[], T]) -> T:
    """The instance cached under ``key``, built by ``build()`` the first time.

    The lock is held while building, so two threads asking at once load one model. A
    ``build`` that raises caches nothing (the next call tries again).
    """
    with _LOCK:
        if key in _CACHE:
            cached: T = _CACHE[key]
            return cached
        value = build()
        _CACHE[key] = value
        return value


def clear_warm() -> None:
    """Forget every cached instance (tests; a process that wants its memory back)."""
    with _LOCK:
        _CACHE.clear()
