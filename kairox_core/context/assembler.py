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
exceed ``context_window - reserve``. Pure and deterministic: same inputs, same output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.config import KairoxConfig, ProfileConfig
from kairox_core.context.counting import (
    REPLY_PRIMING_TOKENS,
    ProfileCounter,
    counter_for_profile,
)
from kairox_core.context.errors import ContextBudgetExceeded
from kairox_core.context.longterm import LongTermContext, LongTermRecall
from kairox_core.context.recalled import HEADER, TurnPack, settle_deferred, turn_seq
from kairox_core.context.rendering import (
    RECALL_SOURCE,
    block_close,
    block_content,
    block_open,
    header_field,
    hit_header,
    hit_key,
    item_unit,
    longterm_header,
    memory_header,
    neutralise,
    pack_header,
    pinned_header,
    summary_header,
    user_message,
)
from kairox_core.context.sources import (
    HistorySource,
    HistoryUnit,
    ListHistory,
    MemoryItem,
    PinnedFact,
    SummaryItem,
)
from kairox_core.context.trace import ContextTrace, LayerTrace, TraceItem
from kairox_core.engines import Contribution
from kairox_core.retrieval.base import RetrievalHit

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


@dataclass(frozen=True)
class _Candidate:
    id: str
    label: str
    unit: str
    source: str | None = None


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

    def assemble(
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
    ) -> AssembledContext:
        """Assemble one turn. ``history`` is newest first (a ``HistorySource`` or any
        iterable of units); ``after_prompt`` holds this turn's tool call/result units,
        which belong after the prompt and are mandatory like it. ``recalled``: past
        turns of this session, one hit each, best first (the recall engine); those
        the history surely holds are skipped, the rest join ``hits``.
        ``contributions``: the engines' (kairox_core/engines.py), placed by layer:
        ``recalled`` hits join ``recalled``, ``system`` text joins the system message,
        ``mandatory`` text is a block of its own that is always present.
        ``longterm``: the active context packs (mandatory) and the chunks recalled for
        the prompt (the long-term engine's ``longterm`` contribution)."""
        pc = self.counter
        budget = self.budget
        trace = ContextTrace(
            profile=self.profile_name,
            encoding=pc.encoding,
            margin=pc.margin,
            context_window=self.profile.context_window,
            reserve=self.profile.reserve,
            budget=budget,
            priming=REPLY_PRIMING_TOKENS,
        )

        recalled = [*recalled, *(h for c in contributions if c.layer == "recalled" for h in c.hits)]
        in_system = [c for c in contributions if c.layer == "system" and c.text.strip()]
        own_blocks = [c for c in contributions if c.layer == "mandatory" and c.text.strip()]

        # --- mandatory: system, prompt (and this turn's tool results), reply priming ---
        system_text = "\n\n".join(
            t.strip()
            for t in (
                system_prompt or "",
                self.profile.instructions,
                *instructions,
                *(c.text for c in in_system),
            )
            if t and t.strip()
        )
        system_msg = {"role": "system", "content": system_text} if system_text else None
        system_tokens = pc.message(system_msg) if system_msg else 0
        prompt_msg = user_message(prompt, attachments, vision=self.profile.vision)
        prompt_tokens = pc.message(prompt_msg)
        tail_tokens = sum(u.tokens for u in after_prompt)
        parts = {"system prompt": system_tokens}
        packs = longterm.packs if longterm is not None else ()
        pack_cands = [
            _Candidate(p.name, f"{p.level} pack", item_unit(pack_header(p.name, p.level), p.text))
            for p in packs
        ]
        packs_cost = self._block_cost("packs", pack_cands) if pack_cands else 0
        if pack_cands:  # active packs are always present: counted with the system prompt
            names = ", ".join(p.name for p in packs)
            parts[f"active context packs ({names})"] = packs_cost
        parts["new prompt"] = prompt_tokens
        if after_prompt:
            parts["this turn's tool results"] = tail_tokens
        contributed = [(c, _contributed_block(c)) for c in own_blocks]
        for c, block in contributed:
            key = f"{c.label or c.engine} ({c.engine})"
            parts[key] = parts.get(key, 0) + pc.message(block)
        pins = [
            _Candidate(f.fact_id, "pinned fact", item_unit(pinned_header(f.fact_id), f.text))
            for f in pinned
        ]
        pins_cost = self._block_cost("pinned", pins) if pins else 0
        if pins:  # the user pinned them: always included verbatim, never silently dropped
            parts["pinned facts"] = pins_cost
        parts["reply priming"] = REPLY_PRIMING_TOKENS
        if sum(parts.values()) > budget:
            raise ContextBudgetExceeded(
                parts,
                budget=budget,
                context_window=self.profile.context_window,
                reserve=self.profile.reserve,
                profile=self.profile_name,
            )
        remaining = budget - sum(parts.values())
        if system_msg:
            layer = trace.layer("system")
            layer.tokens, layer.messages = system_tokens, 1
            layer.included.append(
                TraceItem("system", "system prompt + instructions", system_tokens)
            )
        for text in (t.strip() for t in instructions):
            if text:  # the caller's (an OpenAI client's system message): shown as sent
                preview = text if len(text) <= 80 else text[:79] + "…"
                trace.layer("system").notes.append(
                    f"instructions from the caller ({pc.scale(pc.raw_count(text))} tokens): "
                    f"{preview!r}"
                )
        for c in in_system:
            trace.layer("system").notes.append(
                f"{c.label or 'text'} from engine {c.engine}: "
                f"{pc.scale(pc.raw_count(c.text))} tokens"
            )
            trace.layer("system").notes.extend(c.notes)
        layer = trace.layer("prompt")
        layer.tokens, layer.messages = (
            prompt_tokens + tail_tokens,
            1 + sum(len(u.messages) for u in after_prompt),
        )
        layer.included.append(TraceItem("prompt", "new prompt (verbatim)", prompt_tokens))
        for unit in after_prompt:
            layer.included.append(TraceItem(f"seq {unit.seq}", "tool call + result", unit.tokens))

        blocks: list[dict[str, Any]] = []
        if pack_cands:
            self._emit(blocks, "packs", pack_cands, packs_cost, trace.layer("packs"), limit=None)
        if longterm is not None:
            trace.layer("packs").notes.extend(longterm.pack_notes)
        for c, block in contributed:  # always present, paid for with the mandatory parts
            name = c.label or c.engine
            own = trace.layers.setdefault(name, LayerTrace(name))
            cost = pc.message(block)
            own.tokens += cost
            own.messages += 1
            own.included.append(TraceItem(name, f"from engine {c.engine}", cost, source=c.engine))
            own.notes.extend(c.notes)
            blocks.append(block)

        # --- memories: all when they fit; else the best matches, within memory_share ---
        mem_candidates = [
            _Candidate(
                m.id,
                f"{m.scope}:{m.key}" if m.key else m.scope,
                item_unit(memory_header(m.scope, m.key, m.id), m.body),
                m.scope,
            )
            for m in sorted(memories, key=_memory_order)
        ]
        mem_layer = trace.layer("memories")
        if mem_candidates:
            full = self._block_cost("memories", mem_candidates)
            if full <= remaining:
                chosen, cost = self._fill("memories", mem_candidates, remaining, mem_layer, "")
            else:
                limit = min(remaining, math.floor(self.memory_share * budget))
                ranked = _rank_memories(memories, prompt)
                order = {m.id: i for i, m in enumerate(ranked)}
                by_rank = sorted(mem_candidates, key=lambda c: order[c.id])
                chosen, cost = self._fill(
                    "memories",
                    by_rank,
                    limit,
                    mem_layer,
                    "memories did not fit; kept by prompt match, then recency",
                )
                mem_layer.notes.append(
                    f"all {len(mem_candidates)} memories need {full} tokens, "
                    f"{remaining} were left: filtered by key/body match against the prompt, "
                    f"then recency, within {limit} tokens"
                )
                keep = {c.id for c in chosen}
                chosen = [c for c in mem_candidates if c.id in keep]  # stable display order
            remaining -= self._emit(blocks, "memories", chosen, cost, mem_layer, limit=None)

        # --- pinned facts (verbatim, all of them: paid for with the mandatory parts),
        # then summaries (newest first when tight) ---
        pin_layer = trace.layer("pinned")
        if pins:
            self._emit(blocks, "pinned", pins, pins_cost, pin_layer, limit=None)

        sum_layer = trace.layer("summaries")
        if summaries:
            newest = sorted(summaries, key=lambda s: (-s.last_seq, -s.seq))
            cands = [
                _Candidate(
                    f"seq {s.seq}",
                    f"summary of seq {s.first_seq}-{s.last_seq}",
                    item_unit(summary_header(s.seq, s.first_seq, s.last_seq), s.text.strip()),
                )
                for s in newest
            ]
            chosen, cost = self._fill("summaries", cands, remaining, sum_layer, "no room left")
            chosen.reverse()  # chronological
            remaining -= self._emit(blocks, "summaries", chosen, cost, sum_layer, limit=None)

        # --- long-term memory: chunks above the threshold, best first, within its share ---
        if longterm is not None:
            remaining -= self._longterm_block(
                blocks, longterm.recall, remaining, trace.layer("longterm")
            )

        # --- retrieval: recalled turns and workspace/knowledge-base hits, capped at
        # retrieval_share (history keeps the rest) ---
        ret_layer = trace.layer("retrieval")
        for c in contributions:
            if c.layer == "recalled":
                ret_layer.notes.extend(c.notes)
        limit = min(remaining, math.floor(self.retrieval_share * budget))
        history_units = _History(history)
        turns: list[RetrievalHit] = []
        if recalled:
            # History gets at least what retrieval leaves at its cap: the turns that fit
            # there are in the context anyway, so they are not recalled a second time.
            fit, over = history_units.take(remaining - limit)
            if over is not None:
                _drop_orphans(fit)
            held = {u.seq for u in fit}
            recalled = settle_deferred(recalled, held)  # a search that skipped held turns
            turns = [h for h in recalled if turn_seq(h) not in held]
            if len(turns) < len(recalled):
                ret_layer.notes.append(
                    f"{len(recalled) - len(turns)} recalled turns "
                    f"skipped: history holds them verbatim"
                )
        pack, chosen_hits = self._choose_retrieval(hits, turns, limit, ret_layer)
        ret_layer.limit = limit
        ret_at, ret_cost = len(blocks), self._retrieval_block(blocks, pack, chosen_hits, ret_layer)
        remaining -= ret_cost

        # --- history, newest first, whole units, stop at the first that does not fit ---
        hist_layer = trace.layer("history")
        hist_layer.limit = remaining
        units, over = history_units.take(remaining)
        used = sum(u.tokens for u in units)
        stopped = over is not None
        if over is not None:
            hist_layer.dropped.append(
                TraceItem(
                    f"seq {over.seq}",
                    over.kind,
                    over.tokens,
                    reason=f"budget full ({remaining - used} tokens left); "
                    f"older history not included",
                )
            )
            hist_layer.notes.append(
                f"stopped at seq {over.seq}: messages with a lower seq were not read"
            )
        if stopped:
            # Never open with an orphan: a reply (or tool call) whose user message is gone.
            while units and units[-1].kind != "user":
                orphan = units.pop()
                used -= orphan.tokens
                hist_layer.dropped.append(
                    TraceItem(
                        f"seq {orphan.seq}",
                        orphan.kind,
                        orphan.tokens,
                        reason="its user message did not fit",
                    )
                )
        units.reverse()
        if pack.turns:
            # History may get more than the room retrieval left at its cap (retrieval did
            # not fill it): a turn it took in is not repeated in the retrieved block.
            dropped = pack.discard({u.seq for u in units})
            if dropped:
                ret_layer.notes.append(
                    f"{dropped} recalled turns left out: history took "
                    f"them in with the room retrieval did not use"
                )
                kept: list[dict[str, Any]] = []
                cost = self._retrieval_block(kept, pack, chosen_hits, ret_layer)
                blocks[ret_at : ret_at + 1] = kept
                remaining += ret_cost - cost
        history_messages = [dict(m) for u in units for m in u.messages]
        if units:  # one item for the whole contiguous stretch: it may be thousands long
            hist_layer.included.append(
                TraceItem(
                    f"seq {units[0].seq}-{units[-1].seq}",
                    f"{len(units)} units ({len(history_messages)} messages), newest first",
                    used,
                )
            )
        hist_layer.tokens, hist_layer.messages = used, len(history_messages)
        remaining -= used

        messages: list[dict[str, Any]] = []
        if system_msg:
            messages.append(system_msg)
        messages.extend(blocks)
        messages.extend(history_messages)
        messages.append(prompt_msg)
        messages.extend(dict(m) for u in after_prompt for m in u.messages)
        trace.total = budget - remaining
        return AssembledContext(messages=messages, trace=trace)

    # --- blocks ------------------------------------------------------------------------

    def _longterm_block(
        self,
        blocks: list[dict[str, Any]],
        recall: LongTermRecall,
        remaining: int,
        layer: LayerTrace,
    ) -> int:
        """Fit the recalled chunks (best first) within ``longterm_share``; trace every
        chunk with its similarity, and the engine's near misses with their reason."""
        limit = min(remaining, math.floor(self.longterm_share * self.budget))
        cands = [
            _Candidate(
                c.id,
                f"{c.scope} chunk, similarity {c.similarity:.3f}",
                item_unit(longterm_header(c.scope, c.id), c.text),
                c.scope,
            )
            for c in recall.chunks
        ]
        over = f"over the long-term share ({self.longterm_share:.0%} of the budget)"
        chosen, cost = self._fill("longterm", cands, limit, layer, over)
        for item, reason in recall.left_out:
            layer.dropped.append(
                TraceItem(
                    item.id,
                    f"{item.scope} chunk, similarity {item.similarity:.3f}",
                    0,
                    source=item.scope,
                    reason=reason,
                )
            )
        layer.notes.extend(recall.notes)
        return self._emit(blocks, "longterm", chosen, cost, layer, limit=limit)

    def _choose_retrieval(
        self,
        hits: Sequence[RetrievalHit],
        turns: Sequence[RetrievalHit],
        limit: int,
        layer: LayerTrace,
    ) -> tuple[TurnPack, list[_Candidate]]:
        """Recalled turns and other hits alternate by rank (neither crowds the other
        out), each taken while it fits within ``limit``."""
        pc = self.counter
        over = f"over the retrieval share ({self.retrieval_share:.0%} of the budget)"
        seen: set[str] = set()
        others = []
        for hit in hits:
            key = hit_key(hit)
            if key not in seen:
                seen.add(key)
                header = hit_header(hit)
                others.append(
                    _Candidate(
                        key, header.split(" score=")[0], item_unit(header, hit.text), hit.source
                    )
                )
        pack = TurnPack(pc)
        chosen: list[_Candidate] = []
        raw = pc.raw_count(block_open("retrieved")) + pc.raw_count(block_close("retrieved"))
        for i in range(max(len(turns), len(others))):
            if i < len(turns):
                n = pack.cost_of(turns[i])
                if pc.block_message("system", raw + n) <= limit:
                    pack.add(turns[i], n)
                    raw += n
                else:
                    layer.dropped.append(_turn_trace(turns[i], pc.scale(n), over))
            if i < len(others):
                n = pc.raw_count(others[i].unit)
                if pc.block_message("system", raw + n) <= limit:
                    chosen.append(others[i])
                    raw += n
                else:
                    layer.dropped.append(
                        TraceItem(
                            others[i].id,
                            others[i].label,
                            pc.scale(n),
                            source=others[i].source,
                            reason=over,
                        )
                    )
        while pack.turns:  # the estimate was a sum of parts: check the exact text
            if self._block_cost("retrieved", [_recall_candidate(pack), *chosen]) <= limit:
                break
            cost = pack.costs[-1]
            layer.dropped.append(_turn_trace(pack.pop(), pc.scale(cost), over))
        return pack, chosen

    def _retrieval_block(
        self,
        blocks: list[dict[str, Any]],
        pack: TurnPack,
        chosen: Sequence[_Candidate],
        layer: LayerTrace,
    ) -> int:
        """Append the retrieved block (if any) and record it in ``layer``; its cost."""
        pc = self.counter
        items = ([_recall_candidate(pack)] if pack.turns else []) + list(chosen)
        layer.included.clear()
        layer.tokens = layer.messages = 0
        if not items:
            return 0
        cost = self._block_cost("retrieved", items)
        blocks.append(
            {"role": "system", "content": block_content("retrieved", [c.unit for c in items])}
        )
        for hit, n in sorted(
            zip(pack.turns, pack.costs, strict=True), key=lambda t: turn_seq(t[0]) or 0
        ):
            layer.included.append(_turn_trace(hit, pc.scale(n)))
        for c in chosen:
            layer.included.append(
                TraceItem(c.id, c.label, pc.scale(pc.raw_count(c.unit)), source=c.source)
            )
        layer.tokens, layer.messages = cost, 1
        return cost

    def _block_cost(self, name: str, cands: Sequence[_Candidate]) -> int:
        pc = self.counter
        raw = pc.raw_count(block_open(name)) + pc.raw_count(block_close(name))
        raw += sum(_unit_count(pc, c) for c in cands)
        return pc.block_message("system", raw)

    def _fill(
        self,
        name: str,
        cands: Sequence[_Candidate],
        limit: int,
        layer: LayerTrace,
        reason: str,
    ) -> tuple[list[_Candidate], int]:
        """Greedy, in the given order, skipping what does not fit. Returns (chosen, cost)."""
        pc = self.counter
        raw = pc.raw_count(block_open(name)) + pc.raw_count(block_close(name))
        empty = pc.block_message("system", raw)
        chosen: list[_Candidate] = []
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

    def _emit(
        self,
        blocks: list[dict[str, Any]],
        name: str,
        chosen: Sequence[_Candidate],
        cost: int,
        layer: LayerTrace,
        *,
        limit: int | None,
    ) -> int:
        layer.limit = limit
        if not chosen:
            return 0
        pc = self.counter
        blocks.append({"role": "system", "content": block_content(name, [c.unit for c in chosen])})
        for c in chosen:
            layer.included.append(
                TraceItem(c.id, c.label, pc.scale(pc.raw_count(c.unit)), source=c.source)
            )
        layer.tokens, layer.messages = cost, 1
        return cost


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


class _History:
    """What the assembler asks of history: ``take(room)``, the newest units that fit in
    ``room`` tokens (stopping at the first that does not) and that first unit (None:
    history ran out). A source with ``within`` (the session's cached history) answers
    from its running sums; any other is walked once and replayed."""

    def __init__(self, history: HistorySource | Iterable[HistoryUnit]) -> None:
        self._within = getattr(history, "within", None)
        self._replay: _Replay | None = None
        if self._within is None:
            self._replay = _Replay(
                history.newest_first() if hasattr(history, "newest_first") else iter(history)
            )

    def take(self, room: int) -> tuple[list[HistoryUnit], HistoryUnit | None]:
        if self._within is not None:
            found: tuple[list[HistoryUnit], HistoryUnit | None] = self._within(room)
            return found
        assert self._replay is not None
        taken: list[HistoryUnit] = []
        used = 0
        for unit in self._replay.replay():
            if used + unit.tokens > room:
                return taken, unit
            taken.append(unit)
            used += unit.tokens
        return taken, None


def _drop_orphans(units: list[HistoryUnit]) -> None:
    """Never open with an orphan: drop the oldest units (the list is newest first) up
    to the oldest user message kept."""
    while units and units[-1].kind != "user":
        units.pop()


def _contributed_block(c: Contribution) -> dict[str, Any]:
    """A ``mandatory`` contribution as one system message, tagged with its label."""
    name = header_field(c.label or c.engine)
    body = neutralise(c.text.strip())
    return {"role": "system", "content": f"<kairox:{name}>\n{body}\n</kairox:{name}>"}


def _unit_count(pc: ProfileCounter, cand: _Candidate) -> int:
    """A unit's raw tokens; the recalled turns' item (new text each turn, mostly the
    same lines) line by line, each line's count cached (``raw_count_lines``)."""
    if cand.source == RECALL_SOURCE and cand.id == "recalled turns":
        return pc.raw_count_lines(cand.unit)
    return pc.raw_count(cand.unit)


def _recall_candidate(pack: TurnPack) -> _Candidate:
    return _Candidate("recalled turns", HEADER, pack.unit(), RECALL_SOURCE)


def _turn_trace(hit: RetrievalHit, tokens: int, reason: str | None = None) -> TraceItem:
    meta = hit.metadata
    return TraceItem(
        f"seq {turn_seq(hit)}",
        f"recalled turn ({meta.get('speaker')}, {meta.get('date')})",
        tokens,
        source=RECALL_SOURCE,
        reason=reason,
    )


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


__all__ = ["AssembledContext", "ContextAssembler", "ListHistory"]
