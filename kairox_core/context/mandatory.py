"""The mandatory parts of a turn's context: system prompt (with the engines' system
text), active context packs, the engines' own blocks, the new prompt and this turn's
tool results, pinned facts and the reply priming. Too big together: the turn is
refused (``ContextBudgetExceeded``), naming each part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kairox_core.context.contributions import Contribution
from kairox_core.context.counting import REPLY_PRIMING_TOKENS
from kairox_core.context.fitting import Candidate, Fitter
from kairox_core.context.longterm import LongTermContext
from kairox_core.context.rendering import (
    header_field,
    item_unit,
    neutralise,
    pack_header,
    pinned_header,
)
from kairox_core.context.sources import HistoryUnit, PinnedFact
from kairox_core.context.trace import ContextTrace, LayerTrace, TraceItem


@dataclass(frozen=True)
class Mandatory:
    """What every context of the turn holds, with its costs (``parts``, by name)."""

    system: dict[str, Any] | None
    system_tokens: int
    prompt: dict[str, Any]
    prompt_tokens: int
    packs: list[Candidate]
    packs_cost: int
    pins: list[Candidate]
    pins_cost: int
    contributed: list[tuple[Contribution, dict[str, Any]]]
    parts: dict[str, int]


def system_text(
    system_prompt: str | None,
    profile: str,
    instructions: Sequence[str],
    engines: Sequence[Contribution],
) -> str:
    """The system message: the caller's prompt, the profile's instructions, the
    caller's instructions and the engines' ``system`` text, blank parts left out."""
    texts = (system_prompt or "", profile, *instructions, *(c.text for c in engines))
    return "\n\n".join(t.strip() for t in texts if t and t.strip())


def mandatory_parts(
    fitter: Fitter,
    system: str,
    prompt_msg: dict[str, Any],
    after_prompt: Sequence[HistoryUnit],
    longterm: LongTermContext | None,
    own_blocks: Sequence[Contribution],
    pinned: Sequence[PinnedFact],
) -> Mandatory:
    pc = fitter.counter
    system_msg = {"role": "system", "content": system} if system else None
    system_tokens = pc.message(system_msg) if system_msg else 0
    prompt_tokens = pc.message(prompt_msg)
    parts = {"system prompt": system_tokens}
    packs = longterm.packs if longterm is not None else ()
    pack_cands = [
        Candidate(p.name, f"{p.level} pack", item_unit(pack_header(p.name, p.level), p.text))
        for p in packs
    ]
    packs_cost = fitter.block_cost("packs", pack_cands) if pack_cands else 0
    if pack_cands:  # active packs are always present: counted with the system prompt
        parts[f"active context packs ({', '.join(p.name for p in packs)})"] = packs_cost
    parts["new prompt"] = prompt_tokens
    if after_prompt:
        parts["this turn's tool results"] = sum(u.tokens for u in after_prompt)
    contributed = [(c, contributed_block(c)) for c in own_blocks]
    for c, block in contributed:
        key = f"{c.label or c.engine} ({c.engine})"
        parts[key] = parts.get(key, 0) + pc.message(block)
    pins = [
        Candidate(f.fact_id, "pinned fact", item_unit(pinned_header(f.fact_id), f.text))
        for f in pinned
    ]
    pins_cost = fitter.block_cost("pinned", pins) if pins else 0
    if pins:  # the user pinned them: always included verbatim, never silently dropped
        parts["pinned facts"] = pins_cost
    parts["reply priming"] = REPLY_PRIMING_TOKENS
    return Mandatory(
        system_msg,
        system_tokens,
        prompt_msg,
        prompt_tokens,
        pack_cands,
        packs_cost,
        pins,
        pins_cost,
        contributed,
        parts,
    )


def contributed_block(c: Contribution) -> dict[str, Any]:
    """A ``mandatory`` contribution as one system message, tagged with its label."""
    name = header_field(c.label or c.engine)
    body = neutralise(c.text.strip())
    return {"role": "system", "content": f"<kairox:{name}>\n{body}\n</kairox:{name}>"}


def trace_mandatory(
    trace: ContextTrace,
    fitter: Fitter,
    must: Mandatory,
    instructions: Sequence[str],
    engines: Sequence[Contribution],
    after_prompt: Sequence[HistoryUnit],
) -> None:
    """The system and prompt layers of the trace: what each holds and who added it."""
    pc = fitter.counter
    system = trace.layer("system")
    if must.system:
        system.tokens, system.messages = must.system_tokens, 1
        system.included.append(
            TraceItem("system", "system prompt + instructions", must.system_tokens)
        )
    for text in (t.strip() for t in instructions):
        if text:  # the caller's (an OpenAI client's system message): shown as sent
            preview = text if len(text) <= 80 else text[:79] + "…"
            system.notes.append(
                f"instructions from the caller ({pc.scale(pc.raw_count(text))} tokens): {preview!r}"
            )
    for c in engines:
        system.notes.append(
            f"{c.label or 'text'} from engine {c.engine}: {pc.scale(pc.raw_count(c.text))} tokens"
        )
        system.notes.extend(c.notes)
    layer = trace.layer("prompt")
    layer.tokens = must.prompt_tokens + sum(u.tokens for u in after_prompt)
    layer.messages = 1 + sum(len(u.messages) for u in after_prompt)
    layer.included.append(TraceItem("prompt", "new prompt (verbatim)", must.prompt_tokens))
    for unit in after_prompt:
        layer.included.append(TraceItem(f"seq {unit.seq}", "tool call + result", unit.tokens))


def trace_engine_block(trace: ContextTrace, c: Contribution, cost: int) -> None:
    """An engine's own block: a layer named by its label, always present."""
    name = c.label or c.engine
    own = trace.layers.setdefault(name, LayerTrace(name))
    own.tokens += cost
    own.messages += 1
    own.included.append(TraceItem(name, f"from engine {c.engine}", cost, source=c.engine))
    own.notes.extend(c.notes)


__all__ = [
    "Mandatory",
    "contributed_block",
    "mandatory_parts",
    "system_text",
    "trace_engine_block",
    "trace_mandatory",
]
