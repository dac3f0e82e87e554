"""``LongTermEngine``: before each assembly, the active packs and the chunks for the prompt.

Registered as the built-in engine ``longterm`` (kairox_core/default_plugins/
longterm_engine.py): ``before_assembly`` hands the assembler one ``longterm``
contribution (``LongTermContext``: the active packs, mandatory, and the chunks recalled
for the prompt), which it fits within ``[longterm] share`` and traces chunk by chunk
(layers ``packs`` and ``longterm``). ``context_for`` is the same, synchronously.

Recall: the ``k + SLACK`` visible chunks nearest the prompt are read; those with cosine
similarity >= ``[longterm] threshold`` are offered, at most ``k``, best first; the rest
of what was read is reported as left out with the reason (below the threshold, over k),
so the trace explains why a chunk the user expected is absent. An empty prompt (a
preview) recalls nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kairox_core.capabilities import when_free
from kairox_core.context.longterm import LongTermContext, LongTermItem, LongTermRecall, PackItem
from kairox_core.engines import AssemblyRequest, Contribution, Engine
from kairox_core.longterm.db import has_store
from kairox_core.retrieval.threads import run_blocking

if TYPE_CHECKING:
    from kairox_core.engine_context import EngineContext
    from kairox_core.engines import EngineSession as Session
    from kairox_core.longterm.chunks import ChunkHit

SLACK = 4  # near misses read beyond k, for the trace


class LongTermEngine(Engine):
    """Long-term memory and context packs for the turns of one ``Kairox``."""

    name = "longterm"

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    def context_for(
        self, session: Session, prompt: str, *, profile: str | None = None
    ) -> LongTermContext:
        if not has_store(self.ctx.storage):
            note = f"long-term memory and packs are not on the {self.ctx.storage.name} storage"
            return LongTermContext(recall=LongTermRecall(notes=(note,)))
        packs, pack_notes = self.ctx.packs.active_for(
            session.workspace_id, profile or session.profile
        )
        return LongTermContext(
            packs=[PackItem(p.name, p.level, p.text) for p in packs],
            recall=self.recall(session.id, session.workspace_id, prompt),
            pack_notes=pack_notes,
        )

    def recall(self, session_id: str, workspace_id: str, prompt: str) -> LongTermRecall:
        cfg = self.ctx.config.longterm
        if not cfg.enabled:
            return LongTermRecall(notes=("long-term recall is off ([longterm] enabled = false)",))
        if not prompt.strip():
            return LongTermRecall()
        found = self.ctx.longterm.nearest(
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

    async def before_assembly(
        self, session: Session, request: AssemblyRequest
    ) -> Sequence[Contribution]:
        """The active packs and the chunks for ``request.prompt``, as one ``longterm``
        contribution: the assembler counts the packs with the mandatory parts and fits
        the chunks within ``[longterm] share`` (embedding and k-NN run off the loop, on a
        reused daemon thread: the loop's default executor would start a thread on a new
        loop's first turn, a cost a cold turn would pay)."""
        if self._surely_nothing(session, request.profile):
            found = LongTermContext()  # what context_for gives then, without the thread hop
        else:
            found = await run_blocking(
                functools.partial(
                    self.context_for, session, request.prompt, profile=request.profile
                )
            )
        return (Contribution(engine=self.name, layer="longterm", longterm=found),)

    def _surely_nothing(self, session: Session, profile: str | None) -> bool:
        """No pack active and a store that never held a chunk (most chats), found on the
        event loop without waiting: two index probes, run only if the store declares
        ``when_free`` and its database is free at once (else the usual thread hop)."""
        if not has_store(self.ctx.storage) or not self.ctx.config.longterm.enabled:
            return False
        store = self.ctx.storage.longterm
        probe = when_free(store)
        if probe is None:
            return False

        def nothing() -> bool:
            return store.vector_space() is None and not self.ctx.packs.active_names(
                session.workspace_id, profile or session.profile
            )

        return probe.when_free(nothing) is True


def _item(hit: ChunkHit) -> LongTermItem:
    c = hit.chunk
    return LongTermItem(id=c.id, scope=c.scope, text=c.text, similarity=hit.similarity)
