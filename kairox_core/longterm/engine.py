"""``LongTermEngine``: before each assembly, the active packs and the chunks for the prompt.

Two entry points over the same logic:

- ``context_for(session, prompt)``: today's path. ``Session._assemble`` calls it from one
  marked place and hands the ``LongTermContext`` to the assembler, which fits the
  long-term block within ``[longterm] share`` and traces every chunk (layers ``packs``
  and ``longterm``).
- ``before_assembly(session, request)``: the engine seam's shape (branch ``engine``,
  kairox_core/engines.py: ``Engine.before_assembly(session, AssemblyRequest) ->
  Sequence[Contribution]``). Each active pack is a ``mandatory`` contribution labelled
  with its name (so a refusal names it); the long-term block, already fitted within the
  share here, is a ``system`` contribution, with one trace note per chunk. Once that
  seam is merged, register this object through ``kairox_register_engines`` and drop the
  call in ``Session._assemble``.
  Caveat: the seam's ``system`` layer is mandatory, so a block fitted to the share can
  still tip a turn whose mandatory parts are near the budget into a refusal; the
  assembler path fits the block into what is left and never refuses because of it.

Recall: the ``k + SLACK`` visible chunks nearest the prompt are read; those with cosine
similarity >= ``[longterm] threshold`` are offered, at most ``k``, best first; the rest
of what was read is reported as left out with the reason (below the threshold, over k),
so the trace explains why a chunk the user expected is absent. An empty prompt (a
preview) recalls nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kairox_core.context.longterm import LongTermContext, LongTermItem, LongTermRecall, PackItem
from kairox_core.context.rendering import block_close, block_open, item_unit, longterm_header

if TYPE_CHECKING:
    from kairox_core.facade import Kairox
    from kairox_core.longterm.chunks import ChunkHit
    from kairox_core.session import Session

SLACK = 4  # near misses read beyond k, for the trace


class LongTermEngine:
    """Long-term memory and context packs for the turns of one ``Kairox``."""

    name = "longterm"

    def __init__(self, kx: Kairox) -> None:
        self.kx = kx

    def context_for(
        self, session: Session, prompt: str, *, profile: str | None = None
    ) -> LongTermContext:
        packs, pack_notes = self.kx.packs.active_for(
            session.workspace_id, profile or session.profile
        )
        return LongTermContext(
            packs=[PackItem(p.name, p.level, p.text) for p in packs],
            recall=self.recall(session.id, session.workspace_id, prompt),
            pack_notes=pack_notes,
        )

    def recall(self, session_id: str, workspace_id: str, prompt: str) -> LongTermRecall:
        cfg = self.kx.config.longterm
        if not cfg.enabled:
            return LongTermRecall(notes=("long-term recall is off ([longterm] enabled = false)",))
        if not prompt.strip():
            return LongTermRecall()
        found = self.kx.longterm.nearest(
            prompt, session_id=session_id, workspace_id=workspace_id, k=cfg.k + SLACK
        )
        chunks: list[LongTermItem] = []
        left_out: list[tuple[LongTermItem, str]] = []
        for hit in found:
            item = _item(hit)
            if hit.similarity < cfg.threshold:
                left_out.append((item, f"similarity below the threshold {cfg.threshold:.2f}"))
            elif len(chunks) >= cfg.k:
                left_out.append((item, f"over k ({cfg.k} chunks at most)"))
            else:
                chunks.append(item)
        return LongTermRecall(chunks=chunks, left_out=left_out)

    # --- the engine seam (kairox_core/engines.py on branch engine) ------------------------

    async def before_assembly(self, session: Session, request: Any) -> list[Any]:
        """``Contribution``s for ``request`` (``.prompt``, ``.profile``): one
        ``mandatory`` per active pack, one ``system`` for the long-term block."""
        ctx = self.context_for(session, request.prompt, profile=request.profile)
        out: list[Any] = [
            contribution(
                engine=self.name,
                layer="mandatory",
                label=f"pack:{p.name}",
                text=p.text,
                notes=(f"{p.level} pack {p.name}",),
            )
            for p in ctx.packs
        ]
        if ctx.pack_notes and out:
            out[0] = _with_notes(out[0], ctx.pack_notes)
        assembler = session.assembler(request.profile)
        limit = math.floor(self.kx.config.longterm.share * assembler.budget)
        text, notes = fit_block(ctx.recall, assembler.counter, limit)
        if text or notes:
            out.append(
                contribution(
                    engine=self.name,
                    layer="system",
                    label="long-term memory",
                    text=text,
                    notes=tuple(notes),
                )
            )
        return out


def fit_block(recall: LongTermRecall, counter: Any, limit: int) -> tuple[str, list[str]]:
    """The long-term block's text with the recalled chunks that fit in ``limit`` tokens
    (best first, skipping what does not fit), and one trace note per chunk."""
    head, tail = block_open("longterm"), block_close("longterm")
    raw = counter.raw_count(head) + counter.raw_count(tail)
    units: list[str] = []
    notes: list[str] = []
    for c in recall.chunks:
        unit = item_unit(longterm_header(c.scope, c.id), c.text)
        n = counter.raw_count(unit)
        if counter.block_message("system", raw + n) <= limit:
            units.append(unit)
            raw += n
            notes.append(f"{c.id} ({c.scope}, similarity {c.similarity:.3f}): included")
        else:
            notes.append(
                f"{c.id} ({c.scope}, similarity {c.similarity:.3f}): left out, over the "
                f"long-term share ({limit} tokens)"
            )
    for c, reason in recall.left_out:
        notes.append(f"{c.id} ({c.scope}, similarity {c.similarity:.3f}): left out, {reason}")
    notes.extend(recall.notes)
    return (head + "".join(units) + tail if units else ""), notes


@dataclass(frozen=True)
class _Contribution:
    """Stand-in with ``kairox_core.engines.Contribution``'s fields, used only while that
    module is absent (this branch); the real class is used once it exists."""

    engine: str
    layer: str
    label: str = ""
    text: str = ""
    hits: tuple[Any, ...] = ()
    notes: tuple[str, ...] = ()


def contribution(**fields: Any) -> Any:
    try:
        from kairox_core.engines import Contribution
    except ImportError:
        return _Contribution(**fields)
    return Contribution(**fields)


def _with_notes(c: Any, notes: Sequence[str]) -> Any:
    from dataclasses import replace

    return replace(c, notes=(*c.notes, *notes))


def _item(hit: ChunkHit) -> LongTermItem:
    c = hit.chunk
    return LongTermItem(id=c.id, scope=c.scope, text=c.text, similarity=hit.similarity)
