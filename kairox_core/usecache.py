"""A cache that keeps what is still used: two generations, bounded by entries and weight.

A long-running server sees new texts every turn (prompts, replies, tool results), so a
cache keyed by text and bounded by entry count only fills until its cap, with texts
no turn asks for again, and an entry's size is the text's (a pasted document). Here
lookups go to ``newer`` first, then to ``older`` (a hit there moves up). After
``lookups`` lookups, or when ``newer`` holds half of ``size`` entries or of ``weight``
(characters, by default), ``newer`` becomes ``older`` and the old ``older`` is dropped.
So an entry survives ``lookups`` lookups after its last use whatever else comes: a turn
that asks again for its window's texts keeps them, and a text no turn asks for goes
within two spans, long before the caps are full (issue 27: ``kairox serve`` memory over
a long session). At most ``size`` entries (2 when ``size`` is 1) and ``weight``; a value
heavier than half of ``weight`` is not kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class UseCache(Generic[K, V]):
    """See the module. Safe to share between threads under the GIL: a race can only
    misplace an entry or miscount a weight until the next turnover, never raise."""

    def __init__(self, size: int, weight: int, lookups: int) -> None:
        self.half = max(size // 2, 1)
        self.half_weight = weight // 2
        self.lookups = max(lookups, 1)
        self.newer: dict[K, tuple[V, int]] = {}
        self.older: dict[K, tuple[V, int]] = {}
        self.newer_weight = 0
        self.older_weight = 0
        self.seen = 0  # lookups since the last turnover

    def __len__(self) -> int:
        return len(self.newer) + len(self.older)

    def __contains__(self, key: object) -> bool:
        return key in self.newer or key in self.older

    @property
    def weight(self) -> int:
        """The weight of the entries held."""
        return self.newer_weight + self.older_weight

    def get(self, key: K) -> V | None:
        self.seen += 1
        if self.seen >= self.lookups:
            self._turn_over()
        entry = self.newer.get(key)
        if entry is None:
            entry = self.older.pop(key, None)
            if entry is None:
                return None
            self.older_weight -= entry[1]
            self.put(key, entry[0], entry[1])
        return entry[0]

    def put(self, key: K, value: V, weight: int) -> None:
        old = self.newer.pop(key, None)
        if old is not None:
            self.newer_weight -= old[1]
        else:
            old = self.older.pop(key, None)
            if old is not None:
                self.older_weight -= old[1]
        if weight > self.half_weight:
            return
        if len(self.newer) >= self.half or self.newer_weight + weight > self.half_weight:
            self._turn_over()
        self.newer[key] = (value, weight)
        self.newer_weight += weight

    def _turn_over(self) -> None:
        self.older, self.older_weight = self.newer, self.newer_weight
        self.newer, self.newer_weight, self.seen = {}, 0, 0


def memo_by_text(
    size: int, weight: int, lookups: int, cost: Callable[[str, V], int]
) -> Callable[[Callable[[str], V]], Callable[[str], V]]:
    """Memoise a function of one text in a ``UseCache``; ``cost(text, value)`` is an
    entry's weight (the characters it holds, roughly). The wrapper's ``cache`` is the
    ``UseCache`` (tests)."""

    def decorate(fn: Callable[[str], V]) -> Callable[[str], V]:
        cache: UseCache[str, V] = UseCache(size, weight, lookups)

        @functools.wraps(fn)
        def wrapper(text: str) -> V:
            value = cache.get(text)
            if value is None:
                value = fn(text)
                cache.put(text, value, cost(text, value))
            return value

        cast("Any", wrapper).cache = cache
        return wrapper

    return decorate


def text_and_result(text: str, result: str) -> int:
    """An entry's weight for a text and the text a function made of it: their lengths."""
    return len(text) + len(result)
