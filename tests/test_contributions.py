"""Engines' contributions in the assembler: placed by layer, counted, traced."""

from __future__ import annotations

import pytest

from kairox_core.config import ProfileConfig
from kairox_core.context import ContextAssembler, ContextBudgetExceeded, ListHistory
from kairox_core.context.history import unit_from
from kairox_core.engines import Contribution
from kairox_core.retrieval.base import RetrievalHit
from kairox_core.tokens import TokenCounter


def assembler(window: int = 2000) -> ContextAssembler:
    return ContextAssembler(
        ProfileConfig(model="gpt-4o", encoding="o200k_base", context_window=window, reserve=0),
        retrieval_share=0.5,
    )


def fresh_count(messages: list[dict]) -> int:
    return TokenCounter("o200k_base", margin=0.0, cache_size=1).count_messages(messages)


def turn(seq: int, text: str) -> RetrievalHit:
    meta = {"seq": seq, "speaker": "user", "date": "2024-01-02", "session_id": "s"}
    return RetrievalHit(text=text, score=1.0, source="recall", doc_id=f"t{seq}", metadata=meta)


def test_recalled_contributions_are_the_recalled_argument_exactly() -> None:
    a = assembler()
    pc = a.counter
    units = [
        unit_from(s, "UserMessageAdded", {"text": f"turn {s} beans", "turn_id": f"t{s}"}, pc)
        for s in range(1, 6)
    ]
    hits = [turn(9, "the code is 4417"), turn(2, "turn 2 beans")]
    direct = a.assemble("code?", recalled=hits, history=ListHistory(tuple(units)))
    via = a.assemble(
        "code?",
        contributions=[Contribution("recall", "recalled", hits=tuple(hits), notes=("n1",))],
        history=ListHistory(tuple(units)),
    )
    assert via.messages == direct.messages and via.tokens == direct.tokens
    assert via.trace.layer("retrieval").notes == ["n1", *direct.trace.layer("retrieval").notes]


def test_system_and_mandatory_contributions_are_counted_and_traced() -> None:
    a = assembler()
    ctx = a.assemble(
        "hello",
        system_prompt="Be brief.",
        contributions=[
            Contribution("longterm", "system", label="long-term memory", text="Likes tea."),
            Contribution("packs", "mandatory", label="pack", text="Team style: terse.\n[memory x"),
        ],
    )
    assert ctx.messages[0]["content"] == "Be brief.\n\nLikes tea."
    assert (
        ctx.messages[1]["content"]
        == "<kairox:pack>\nTeam style: terse.\n\\[memory x\n</kairox:pack>"
    )
    assert ctx.messages[-1] == {"role": "user", "content": "hello"}
    assert any("engine longterm" in n for n in ctx.trace.layer("system").notes)
    pack = ctx.trace.layers["pack"]
    assert pack.messages == 1 and pack.included[0].source == "packs"
    assert fresh_count(ctx.messages) == ctx.tokens <= a.budget


def test_a_mandatory_contribution_too_big_refuses_the_turn() -> None:
    a = assembler(200)
    with pytest.raises(ContextBudgetExceeded, match="pack"):
        a.assemble("hi", contributions=[Contribution("packs", "mandatory", "pack", "word " * 400)])
