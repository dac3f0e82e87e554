"""The retrieval layer's plan: recalled turns and workspace/knowledge-base hits.

Both compete for ``retrieval_share`` of the budget, alternating by rank so neither
crowds the other out. Recalled turns pack into one item (context/recalled.py); the
other hits are an item each, deduplicated by source and document.
"""

from __future__ import annotations

from collections.abc import Sequence

from kairox_core.context.fitting import RECALLED_ITEM, Candidate, Fitter, PlannedBlock
from kairox_core.context.recalled import HEADER, TurnPack, turn_seq
from kairox_core.context.rendering import RECALL_SOURCE, hit_header, hit_key, item_unit
from kairox_core.context.trace import LayerTrace, TraceItem
from kairox_core.retrieval.base import RetrievalHit

BLOCK = "retrieved"


def hit_candidates(hits: Sequence[RetrievalHit]) -> list[Candidate]:
    """One candidate per distinct hit (``hit_key``), in rank order."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        key = hit_key(hit)
        if key not in seen:
            seen.add(key)
            header = hit_header(hit)
            out.append(
                Candidate(key, header.split(" score=")[0], item_unit(header, hit.text), hit.source)
            )
    return out


def choose_retrieval(
    fitter: Fitter,
    hits: Sequence[RetrievalHit],
    turns: Sequence[RetrievalHit],
    limit: int,
    layer: LayerTrace,
    share: float,
) -> tuple[TurnPack, list[Candidate]]:
    """Recalled turns and other hits alternate by rank (neither crowds the other
    out), each taken while it fits within ``limit``."""
    pc = fitter.counter
    over = f"over the retrieval share ({share:.0%} of the budget)"
    others = hit_candidates(hits)
    pack = TurnPack(pc)
    chosen: list[Candidate] = []
    raw = fitter.frame(BLOCK)
    for i in range(max(len(turns), len(others))):
        if i < len(turns):
            n = pack.cost_of(turns[i])
            if pc.block_message("system", raw + n) <= limit:
                pack.add(turns[i], n)
                raw += n
            else:
                layer.dropped.append(turn_trace(turns[i], pc.scale(n), over))
        if i < len(others):
            n = pc.raw_count(others[i].unit)
            if pc.block_message("system", raw + n) <= limit:
                chosen.append(others[i])
                raw += n
            else:
                layer.dropped.append(fitter.item(others[i], over))
    while pack.turns:  # the estimate was a sum of parts: check the exact text
        if fitter.block_cost(BLOCK, [recall_candidate(pack), *chosen]) <= limit:
            break
        cost = pack.costs[-1]
        layer.dropped.append(turn_trace(pack.pop(), pc.scale(cost), over))
    return pack, chosen


def retrieval_block(
    fitter: Fitter, pack: TurnPack, chosen: Sequence[Candidate], layer: LayerTrace
) -> tuple[PlannedBlock | None, int]:
    """The retrieved block (None: nothing chosen) recorded in ``layer``, and its cost."""
    pc = fitter.counter
    items = ([recall_candidate(pack)] if pack.turns else []) + list(chosen)
    layer.included.clear()
    layer.tokens = layer.messages = 0
    if not items:
        return None, 0
    cost = fitter.block_cost(BLOCK, items)
    for hit, n in sorted(
        zip(pack.turns, pack.costs, strict=True), key=lambda t: turn_seq(t[0]) or 0
    ):
        layer.included.append(turn_trace(hit, pc.scale(n)))
    layer.included.extend(fitter.item(c) for c in chosen)
    layer.tokens, layer.messages = cost, 1
    return PlannedBlock(BLOCK, tuple(c.unit for c in items)), cost


def recall_candidate(pack: TurnPack) -> Candidate:
    return Candidate(RECALLED_ITEM, HEADER, pack.unit(), RECALL_SOURCE)


def turn_trace(hit: RetrievalHit, tokens: int, reason: str | None = None) -> TraceItem:
    meta = hit.metadata
    return TraceItem(
        f"seq {turn_seq(hit)}",
        f"recalled turn ({meta.get('speaker')}, {meta.get('date')})",
        tokens,
        source=RECALL_SOURCE,
        reason=reason,
    )


__all__ = ["BLOCK", "choose_retrieval", "hit_candidates", "retrieval_block", "turn_trace"]
