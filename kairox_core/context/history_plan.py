"""The history layer's plan: the newest whole units that fit, never opening on an
orphan (a reply or tool call whose user message is gone)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Literal, cast

from kairox_core.context.sources import (
    HistorySource,
    HistoryUnit,
    WindowedHistory,
    units_within,
)
from kairox_core.context.trace import LayerTrace, TraceItem


class _Replay:
    """A lazy unit iterator that can be walked again from the start (each unit read once
    from the source): the recall filter and the history layer read the same units."""

    def __init__(self, source: Iterator[HistoryUnit]) -> None:
        self._source = source
        self._read: list[HistoryUnit] = []

    def replay(self) -> Iterator[HistoryUnit]:
        yield from self._read
        for unit in self._source:
            self._read.append(unit)
            yield unit


_KINDS: dict[type, Literal["windowed", "source", "iterable"]] = {}


def _kind(history: object) -> Literal["windowed", "source", "iterable"]:
    """Which protocol the history's class implements, checked once per class: a
    protocol ``isinstance`` looks up each of its members, every time it runs."""
    cls = type(history)
    kind = _KINDS.get(cls)
    if kind is None:
        if isinstance(history, WindowedHistory):
            kind = "windowed"
        elif isinstance(history, HistorySource):
            kind = "source"
        else:
            kind = "iterable"
        _KINDS[cls] = kind
    return kind


class HistoryWindow:
    """What the assembler asks of history: ``take(room)``, the newest units that fit in
    ``room`` tokens (stopping at the first that does not) and that first unit (None:
    history ran out). A ``WindowedHistory`` (the session's cached history) answers from
    its running sums; any other source or iterable is walked once and replayed."""

    take: Callable[[int], tuple[list[HistoryUnit], HistoryUnit | None]]

    def __init__(self, history: HistorySource | Iterable[HistoryUnit]) -> None:
        kind = _kind(history)
        if kind == "windowed":
            self.take = cast(WindowedHistory, history).within
            return
        units = (
            cast(HistorySource, history).newest_first()
            if kind == "source"
            else iter(cast(Iterable[HistoryUnit], history))
        )
        replay = _Replay(units)
        self.take = lambda room: units_within(replay.replay(), room)

    def held(self, room: int) -> set[int]:
        """Seqs of the units surely in the context when history gets at least ``room``."""
        fit, over = self.take(room)
        if over is not None:
            drop_orphans(fit)
        return {u.seq for u in fit}


def drop_orphans(units: list[HistoryUnit]) -> None:
    """Never open with an orphan: drop the oldest units (the list is newest first) up
    to the oldest user message kept."""
    while units and units[-1].kind != "user":
        units.pop()


def plan_history(window: HistoryWindow, room: int, layer: LayerTrace) -> list[HistoryUnit]:
    """The units to send, oldest first, within ``room``; traced in ``layer`` (the one
    item is added by the caller, once retrieval has had its last word)."""
    layer.limit = room
    units, over = window.take(room)
    if over is None:
        return units[::-1]
    used = sum(u.tokens for u in units)
    layer.dropped.append(
        TraceItem(
            f"seq {over.seq}",
            over.kind,
            over.tokens,
            reason=f"budget full ({room - used} tokens left); older history not included",
        )
    )
    layer.notes.append(f"stopped at seq {over.seq}: messages with a lower seq were not read")
    while units and units[-1].kind != "user":
        orphan = units.pop()
        layer.dropped.append(
            TraceItem(
                f"seq {orphan.seq}",
                orphan.kind,
                orphan.tokens,
                reason="its user message did not fit",
            )
        )
    return units[::-1]


def trace_history(units: list[HistoryUnit], layer: LayerTrace) -> int:
    """Record the units sent (oldest first) as one item; their tokens."""
    used = sum(u.tokens for u in units)
    messages = sum(len(u.messages) for u in units)
    if units:  # one item for the whole contiguous stretch: it may be thousands long
        layer.included.append(
            TraceItem(
                f"seq {units[0].seq}-{units[-1].seq}",
                f"{len(units)} units ({messages} messages), newest first",
                used,
            )
        )
    layer.tokens, layer.messages = used, messages
    return used


__all__ = ["HistoryWindow", "drop_orphans", "plan_history", "trace_history"]
