"""ContextAssembler: rebuild a turn's prompt from scratch under the token budget.

Precedence: the system prompt, the active context packs, the new prompt and the user's
pinned facts are mandatory (too big: the turn is refused with ``ContextBudgetExceeded``,
naming the packs). Then approved memories
(they outrank old history; when they do not all fit they are ranked by key and body
match against the prompt, then recency, within ``memory_share`` of the budget),
compaction summaries, the long-term memory block (chunks the long-term engine found
above its similarity threshold, within ``longterm_share``), retrieval hits and recalled
past turns (capped at ``retrieval_share`` of the budget so history keeps room) and
finally history newest-first, whole units, until the next one does not fit.
Every count is exact (see counting.py), so the messages recounted from scratch never
exceed ``context_window - reserve``.

Pure and deterministic: same inputs, same output. ``plan`` chooses and traces,
``render`` builds the messages; neither calls an engine, an index or a store (history
comes from the ``HistorySource`` given, which may page older units in lazily). A recall
search that left the newest turns unindexed (a ``DeferredTurns`` mark) is not done
again here: when the plan finds an unindexed turn outside its history, it names the
mark (``ContextPlan.unsettled``) and the caller (the session, off the event loop) runs
its search and plans again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from kairox_core.config import KairoxConfig, ProfileConfig
from kairox_core.context.contributions import Contribution
from kairox_core.context.counting import REPLY_PRIMING_TOKENS, ProfileCounter, counter_for_profile
from kairox_core.context.errors import ContextBudgetExceeded
from kairox_core.context.fitting import Candidate, Fitter, PlannedBlock, render_block
from kairox_core.context.history_plan import HistoryWindow, plan_history, trace_history
from kairox_core.context.longterm import LongTermContext, LongTermRecall
from kairox_core.context.mandatory import (
    mandatory_parts,
    system_text,
    trace_engine_block,
    trace_mandatory,
)
from kairox_core.context.recalled import DeferredTurns, settle_deferred, turn_seq
from kairox_core.context.rendering import (
    item_unit,
    longterm_header,
    memory_header,
    summary_header,
    user_message,
)
from kairox_core.context.retrieval_plan import choose_retrieval, retrieval_block
from kairox_core.context.sources import (
    HistorySource,
    HistoryUnit,
    ListHistory,
    MemoryItem,
    PinnedFact,
    SummaryItem,
)
from kairox_core.context.trace import ContextTrace, LayerTrace, TraceItem
from kairox_core.retrieval.base import RetrievalHit

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11

_SCOPE_ORDER = {"user": 0, "workspace": 1, "session": 2}
_WORD = re.compile(r"\w+")
_KEY_SPLIT = re.compile(r"[._:\-]+")


@dataclass
class AssembledContext:
    """The messages to send (OpenAI chat format) and the trace of how they were chosen."""

    messages: list[dict[str, Any]]
    trace: ContextTrace

    @property
    def tokens(self) -> int:
        return self.trace.total

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "trace": self.trace.as_dict()}


class AssemblyInputs(TypedDict, total=False):
    """The keywords of ``ContextAssembler.plan`` (and ``assemble``) after the prompt."""

    system_prompt: str | None
    instructions: Sequence[str]
    memories: Sequence[MemoryItem]
    pinned: Sequence[PinnedFact]
    summaries: Sequence[SummaryItem]
    hits: Sequence[RetrievalHit]
    history: HistorySource | Iterable[HistoryUnit]
    attachments: Sequence[Mapping[str, Any]]
    after_prompt: Sequence[HistoryUnit]
    recalled: Sequence[RetrievalHit]
    contributions: Sequence[Contribution]
    longterm: LongTermContext | None


@dataclass
class ContextPlan:
    """What one assembly chose, before rendering: the system message, the blocks in
    order, the history units (oldest first), the prompt and this turn's tool results,
    and the trace. ``unsettled``: deferred recall marks whose search must be done again
    (``DeferredTurns.search``) before the plan can be rendered; plan again after."""

    trace: ContextTrace
    system: dict[str, Any] | None
    blocks: list[PlannedBlock]
    history: list[HistoryUnit]
    prompt: dict[str, Any]
    after_prompt: Sequence[HistoryUnit]
    unsettled: tuple[DeferredTurns, ...] = ()


class ContextAssembler:
    """Builds ``AssembledContext`` for one profile. Cheap to construct; reuse per turn."""

    def __init__(
        self,
        profile: ProfileConfig,
        *,
        profile_name: str | None = None,
        retrieval_share: float = 0.25,
        memory_share: float = 0.5,
        longterm_share: float = 0.1,
        counter: ProfileCounter | None = None,
    ) -> None:
        if not 0 <= retrieval_share <= 1 or not 0 < memory_share <= 1:
            raise ValueError("retrieval_share must be in [0, 1] and memory_share in (0, 1]")
        if not 0 <= longterm_share <= 1:
            raise ValueError("longterm_share must be in [0, 1]")
        self.longterm_share = longterm_share
        self.profile = profile
        self.profile_name = profile_name
        self.retrieval_share = retrieval_share
        self.memory_share = memory_share
        self.counter = counter or counter_for_profile(profile)
        self._fitter = Fitter(self.counter)

    @classmethod
    def from_config(cls, config: KairoxConfig, profile: str | None = None) -> ContextAssembler:
        name, prof = config.resolve_profile(profile)
        return cls(
            prof,
            profile_name=name,
            retrieval_share=config.retrieval.share,
            memory_share=config.memory.max_memories_tokens_share,
            longterm_share=config.longterm.share,
        )

    @property
    def budget(self) -> int:
        return self.profile.budget

    def assemble(self, prompt: str, **inputs: Unpack[AssemblyInputs]) -> AssembledContext:
        """``plan`` then ``render``: see ``plan`` for the inputs. A deferred recall mark
        that needs its search done again is refused (``render``): the caller settles it."""
        return self.render(self.plan(prompt, **inputs))

    def render(self, plan: ContextPlan) -> AssembledContext:
        """The messages of ``plan``: system, blocks, history, prompt, tool results."""
        if plan.unsettled:
            raise ValueError(
                f"{len(plan.unsettled)} deferred recall searches are not settled: call "
                f"search() on each of plan.unsettled (off the event loop), then plan again"
            )
        messages: list[dict[str, Any]] = [plan.system] if plan.system else []
        messages.extend(render_block(b) for b in plan.blocks)
        messages.extend(dict(m) for u in plan.history for m in u.messages)
        messages.append(plan.prompt)
        messages.extend(dict(m) for u in plan.after_prompt for m in u.messages)
        return AssembledContext(messages=messages, trace=plan.trace)

    def plan(
        self,
        prompt: str,
        *,
        system_prompt: str | None = None,
        instructions: Sequence[str] = (),
        memories: Sequence[MemoryItem] = (),
        pinned: Sequence[PinnedFact] = (),
        summaries: Sequence[SummaryItem] = (),
        hits: Sequence[RetrievalHit] = (),
        history: HistorySource | Iterable[HistoryUnit] = (),
        attachments: Sequence[Mapping[str, Any]] = (),
        after_prompt: Sequence[HistoryUnit] = (),
        recalled: Sequence[RetrievalHit] = (),
        contributions: Sequence[Contribution] = (),
        longterm: LongTermContext | None = None,
    ) -> ContextPlan:
        """Plan one turn. ``history`` is newest first (a ``HistorySource`` or any
        iterable of units; planning twice needs one that can be walked twice);
        ``after_prompt`` holds this turn's tool call/result units, which belong after
        the prompt and are mandatory like it. ``recalled``: past turns of this session,
        one hit each, best first (the recall engine); those the history surely holds
        are skipped, the rest join ``hits``. ``contributions``: the engines'
        (kairox_core/engines.py), placed by layer: ``recalled`` hits join ``recalled``,
        ``system`` text joins the system message, ``mandatory`` text is a block of its
        own that is always present. ``longterm``: the active context packs (mandatory)
        and the chunks recalled for the prompt (the long-term engine's contribution)."""
        fit, budget = self._fitter, self.budget
        trace = self._new_trace()
        recalled = [*recalled, *(h for c in contributions if c.layer == "recalled" for h in c.hits)]
        in_system = [c for c in contributions if c.layer == "system" and c.text.strip()]
        own_blocks = [c for c in contributions if c.layer == "mandatory" and c.text.strip()]
        system = system_text(system_prompt, self.profile.instructions, instructions, in_system)
        prompt_msg = user_message(prompt, attachments, vision=self.profile.vision)
        must = mandatory_parts(fit, system, prompt_msg, after_prompt, longterm, own_blocks, pinned)
        if sum(must.parts.values()) > budget:
            raise ContextBudgetExceeded(
                must.parts,
                budget=budget,
                context_window=self.profile.context_window,
                reserve=self.profile.reserve,
                profile=self.profile_name,
            )
        remaining = budget - sum(must.parts.values())
        trace_mandatory(trace, fit, must, instructions, in_system, after_prompt)
        blocks: list[PlannedBlock] = []
        if must.packs:
            fit.emit(blocks, "packs", must.packs, must.packs_cost, trace.layer("packs"), limit=None)
        if longterm is not None:
            trace.layer("packs").notes.extend(longterm.pack_notes)
        for c, block in must.contributed:  # always present, paid for with the mandatory parts
            trace_engine_block(trace, c, self.counter.message(block))
            blocks.append(PlannedBlock(c.label or c.engine, message=block))
        remaining -= self._plan_memories(blocks, memories, prompt, remaining, trace)
        if must.pins:  # verbatim, all of them: paid for with the mandatory parts
            fit.emit(blocks, "pinned", must.pins, must.pins_cost, trace.layer("pinned"), limit=None)
        remaining -= self._plan_summaries(blocks, summaries, remaining, trace.layer("summaries"))
        if longterm is not None:
            remaining -= self._plan_longterm(
                blocks, longterm.recall, remaining, trace.layer("longterm")
            )
        for c in contributions:
            if c.layer == "recalled":
                trace.layer("retrieval").notes.extend(c.notes)
        remaining, units, unsettled = self._plan_retrieval_and_history(
            blocks, hits, recalled, HistoryWindow(history), remaining, trace
        )
        trace.total = budget - remaining
        return ContextPlan(
            trace, must.system, blocks, units, must.prompt, tuple(after_prompt), unsettled
        )

    def _new_trace(self) -> ContextTrace:
        pc = self.counter
        return ContextTrace(
            profile=self.profile_name,
            encoding=pc.encoding,
            margin=pc.margin,
            context_window=self.profile.context_window,
            reserve=self.profile.reserve,
            budget=self.budget,
            priming=REPLY_PRIMING_TOKENS,
        )

    # --- the optional layers, in precedence order ---------------------------------------

    def _plan_memories(
        self,
        blocks: list[PlannedBlock],
        memories: Sequence[MemoryItem],
        prompt: str,
        remaining: int,
        trace: ContextTrace,
    ) -> int:
        """All memories when they fit; else the best matches, within ``memory_share``."""
        fit = self._fitter
        cands = [
            Candidate(
                m.id,
                f"{m.scope}:{m.key}" if m.key else m.scope,
                item_unit(memory_header(m.scope, m.key, m.id), m.body),
                m.scope,
            )
            for m in sorted(memories, key=_memory_order)
        ]
        layer = trace.layer("memories")
        if not cands:
            return 0
        full = fit.block_cost("memories", cands)
        if full <= remaining:
            chosen, cost = fit.fill("memories", cands, remaining, layer, "")
            return fit.emit(blocks, "memories", chosen, cost, layer, limit=None)
        limit = min(remaining, math.floor(self.memory_share * self.budget))
        order = {m.id: i for i, m in enumerate(_rank_memories(memories, prompt))}
        by_rank = sorted(cands, key=lambda c: order[c.id])
        reason = "memories did not fit; kept by prompt match, then recency"
        chosen, cost = fit.fill("memories", by_rank, limit, layer, reason)
        layer.notes.append(
            f"all {len(cands)} memories need {full} tokens, "
            f"{remaining} were left: filtered by key/body match against the prompt, "
            f"then recency, within {limit} tokens"
        )
        keep = {c.id for c in chosen}
        chosen = [c for c in cands if c.id in keep]  # stable display order
        return fit.emit(blocks, "memories", chosen, cost, layer, limit=None)

    def _plan_summaries(
        self,
        blocks: list[PlannedBlock],
        summaries: Sequence[SummaryItem],
        remaining: int,
        layer: LayerTrace,
    ) -> int:
        """Summaries newest first when tight, sent chronologically."""
        if not summaries:
            return 0
        newest = sorted(summaries, key=lambda s: (-s.last_seq, -s.seq))
        cands = [
            Candidate(
                f"seq {s.seq}",
                f"summary of seq {s.first_seq}-{s.last_seq}",
                item_unit(summary_header(s.seq, s.first_seq, s.last_seq), s.text.strip()),
            )
            for s in newest
        ]
        chosen, cost = self._fitter.fill("summaries", cands, remaining, layer, "no room left")
        chosen.reverse()  # chronological
        return self._fitter.emit(blocks, "summaries", chosen, cost, layer, limit=None)

    def _plan_longterm(
        self,
        blocks: list[PlannedBlock],
        recall: LongTermRecall,
        remaining: int,
        layer: LayerTrace,
    ) -> int:
        """Fit the recalled chunks (best first) within ``longterm_share``; trace every
        chunk with its similarity, and the engine's near misses with their reason."""
        limit = min(remaining, math.floor(self.longterm_share * self.budget))
        cands = [
            Candidate(
                c.id,
                f"{c.scope} chunk, similarity {c.similarity:.3f}",
                item_unit(longterm_header(c.scope, c.id), c.text),
                c.scope,
            )
            for c in recall.chunks
        ]
        over = f"over the long-term share ({self.longterm_share:.0%} of the budget)"
        chosen, cost = self._fitter.fill("longterm", cands, limit, layer, over)
        for item, reason in recall.left_out:
            label = f"{item.scope} chunk, similarity {item.similarity:.3f}"
            layer.dropped.append(TraceItem(item.id, label, 0, source=item.scope, reason=reason))
        layer.notes.extend(recall.notes)
        return self._fitter.emit(blocks, "longterm", chosen, cost, layer, limit=limit)

    def _plan_retrieval_and_history(
        self,
        blocks: list[PlannedBlock],
        hits: Sequence[RetrievalHit],
        recalled: Sequence[RetrievalHit],
        window: HistoryWindow,
        remaining: int,
        trace: ContextTrace,
    ) -> tuple[int, list[HistoryUnit], tuple[DeferredTurns, ...]]:
        """Retrieval (recalled turns and other hits, capped at ``retrieval_share``: history
        keeps the rest), then history newest first, whole units. Returns the tokens left,
        the history units (oldest first) and the deferred marks to settle."""
        fit, layer = self._fitter, trace.layer("retrieval")
        limit = min(remaining, math.floor(self.retrieval_share * self.budget))
        turns, unsettled = _recalled_turns(recalled, window, remaining - limit, layer)
        pack, chosen = choose_retrieval(fit, hits, turns, limit, layer, self.retrieval_share)
        layer.limit = limit
        block, ret_cost = retrieval_block(fit, pack, chosen, layer)
        at = len(blocks)
        blocks.extend([block] if block else [])
        remaining -= ret_cost
        units = plan_history(window, remaining, trace.layer("history"))
        # History may get more than the room retrieval left at its cap (retrieval did not
        # fill it): a turn it took in is not repeated in the retrieved block.
        dropped = pack.discard({u.seq for u in units}) if pack.turns else 0
        if dropped:
            layer.notes.append(
                f"{dropped} recalled turns left out: history took "
                f"them in with the room retrieval did not use"
            )
            block, cost = retrieval_block(fit, pack, chosen, layer)
            blocks[at : at + 1] = [block] if block else []
            remaining += ret_cost - cost
        remaining -= trace_history(units, trace.layer("history"))
        return remaining, units, unsettled


def _recalled_turns(
    recalled: Sequence[RetrievalHit], window: HistoryWindow, room: int, layer: LayerTrace
) -> tuple[list[RetrievalHit], tuple[DeferredTurns, ...]]:
    """The recalled turns history does not surely hold. History gets at least ``room``
    (what retrieval leaves at its cap): the turns that fit there are in the context
    anyway, so they are not recalled a second time. Also the deferred marks whose
    unindexed turns are not all held (their search must be done again)."""
    if not recalled:
        return [], ()
    held = window.held(room)
    settled, unsettled = settle_deferred(recalled, held)
    turns = [h for h in settled if turn_seq(h) not in held]
    if len(turns) < len(settled):
        layer.notes.append(
            f"{len(settled) - len(turns)} recalled turns skipped: history holds them verbatim"
        )
    return turns, unsettled


def _memory_order(m: MemoryItem) -> tuple[int, str, str]:
    return (_SCOPE_ORDER.get(m.scope, 9), m.key or "", m.id)


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3}


def _rank_memories(memories: Sequence[MemoryItem], prompt: str) -> list[MemoryItem]:
    """Key match first, then body terms shared with the prompt, then most recent."""
    lowered = prompt.lower()
    words = _terms(prompt)

    def score(m: MemoryItem) -> tuple[int, int, float, str]:
        key = (m.key or "").lower()
        parts = {p for p in _KEY_SPLIT.split(key) if len(p) >= 3}
        key_hit = 1 if key and (key in lowered or parts & words) else 0
        overlap = len(_terms(m.body) & words)
        return (-key_hit, -overlap, -m.updated_at, m.id)

    return sorted(memories, key=score)


__all__ = [
    "AssembledContext",
    "AssemblyInputs",
    "ContextAssembler",
    "ContextPlan",
    "ListHistory",
]
