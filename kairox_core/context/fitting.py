"""Fitting items into a block under a token limit: the assembler's common step.

A block is one system message, ``<kairox:name>`` ... ``</kairox:name>``, holding items
(``Candidate.unit``: a header line and a body). Its cost is counted from the raw tokens
of its parts (``ProfileCounter.block_message``), so a greedy fill adds item counts
instead of recounting the block. The planned block keeps the chosen units; rendering
joins them (``render_block``): nothing here reads storage or calls an engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.context.counting import ProfileCounter
from kairox_core.context.rendering import RECALL_SOURCE, block_close, block_content, block_open
from kairox_core.context.trace import LayerTrace, TraceItem

RECALLED_ITEM = "recalled turns"  # the id of the one item all recalled turns render as


@dataclass(frozen=True)
class Candidate:
    """An item the assembler may put in a block: its trace id and label, and its text."""

    id: str
    label: str
    unit: str
    source: str | None = None


@dataclass(frozen=True)
class PlannedBlock:
    """A block of the plan: ``name`` and its items' text, or a whole ``message`` (an
    engine's mandatory block, rendered by the engine's label)."""

    name: str
    units: tuple[str, ...] = ()
    message: dict[str, Any] | None = None


def render_block(block: PlannedBlock) -> dict[str, Any]:
    if block.message is not None:
        return dict(block.message)
    return {"role": "system", "content": block_content(block.name, block.units)}


class Fitter:
    """Block costs, greedy fills and the trace of what was kept, for one counter."""

    def __init__(self, counter: ProfileCounter) -> None:
        self.counter = counter

    def frame(self, name: str) -> int:
        """Raw tokens of a block's opening and closing tags."""
        pc = self.counter
        return pc.raw_count(block_open(name)) + pc.raw_count(block_close(name))

    def unit_count(self, cand: Candidate) -> int:
        """A unit's raw tokens; the recalled turns' item (new text each turn, mostly the
        same lines) line by line, each line's count cached (``raw_count_lines``)."""
        if cand.source == RECALL_SOURCE and cand.id == RECALLED_ITEM:
            return self.counter.raw_count_lines(cand.unit)
        return self.counter.raw_count(cand.unit)

    def block_cost(self, name: str, cands: Sequence[Candidate]) -> int:
        raw = self.frame(name) + sum(self.unit_count(c) for c in cands)
        return self.counter.block_message("system", raw)

    def item(self, cand: Candidate, reason: str | None = None) -> TraceItem:
        tokens = self.counter.scale(self.counter.raw_count(cand.unit))
        return TraceItem(cand.id, cand.label, tokens, source=cand.source, reason=reason)

    def fill(
        self,
        name: str,
        cands: Sequence[Candidate],
        limit: int,
        layer: LayerTrace,
        reason: str,
    ) -> tuple[list[Candidate], int]:
        """Greedy, in the given order, skipping what does not fit. Returns (chosen, cost)."""
        pc = self.counter
        raw = self.frame(name)
        empty = pc.block_message("system", raw)
        chosen: list[Candidate] = []
        for cand in cands:
            n = pc.raw_count(cand.unit)
            if empty <= limit and pc.block_message("system", raw + n) <= limit:
                chosen.append(cand)
                raw += n
            else:
                layer.dropped.append(
                    TraceItem(
                        cand.id,
                        cand.label,
                        pc.scale(n),
                        source=cand.source,
                        reason=reason or "no room left",
                    )
                )
        cost = pc.block_message("system", raw) if chosen else 0
        return chosen, cost

    def emit(
        self,
        blocks: list[PlannedBlock],
        name: str,
        chosen: Sequence[Candidate],
        cost: int,
        layer: LayerTrace,
        *,
        limit: int | None,
    ) -> int:
        """Plan the block of ``chosen`` (if any) and trace it in ``layer``; its cost."""
        layer.limit = limit
        if not chosen:
            return 0
        blocks.append(PlannedBlock(name, tuple(c.unit for c in chosen)))
        layer.included.extend(self.item(c) for c in chosen)
        layer.tokens, layer.messages = cost, 1
        return cost


__all__ = ["RECALLED_ITEM", "Candidate", "Fitter", "PlannedBlock", "render_block"]
