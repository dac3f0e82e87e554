"""Acceptance: a scripted 300-turn session on a small window, compacting as it goes.

Compaction fires automatically; its events come in the documented order; the assembled
context, recounted from scratch with tiktoken, never passes the budget; pinned facts are
in every later turn verbatim; every original event remains.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox_core.config import CompactionSection, KairoxConfig, ProfileConfig, RecallSection
from kairox_core.events import (
    AssistantMessageCompleted,
    CompactionSummary,
    ContextCompactionStarted,
    ToolInvocationCompleted,
    UserMessageAdded,
)
from kairox_core.facade import Kairox
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.tokens import TokenCounter

pytestmark = pytest.mark.slow

TURNS = 300
PEOPLE = ("Alice", "Bob", "Chen", "Dana", "Emeka")


def reply_for(messages: Sequence[Any]) -> str:
    prompt = str(messages[-1]["content"]).split("\n")[0]
    n = sum(1 for m in messages if m["role"] == "user")
    who = PEOPLE[len(prompt) % len(PEOPLE)]
    return (
        f"Noted: {prompt[:60]}. {who} will follow up on item {n} by March {n % 28 + 1}. "
        f"We decided to keep budget line {len(prompt)}."
    )


def prompt_for(i: int) -> str:
    who = PEOPLE[i % len(PEOPLE)]
    return (
        f"Turn {i}: {who} asked about invoice {1000 + i} and the shipping plan for "
        f"region {i % 7}; please keep track of the open task number {i}."
    )


async def test_300_turns_compact_in_order_within_budget_keeping_pins_and_originals(
    kairox_home: Path,
    tmp_path: Path,
) -> None:
    config = KairoxConfig(
        profiles={"default": ProfileConfig(model="gpt-4o", context_window=1200, reserve=200)},
        # recall (indexing compacted turns) is tested on its own; off here to keep this fast
        compaction=CompactionSection(
            strategy="extractive", keep_recent_exchanges=3, target_tokens=120
        ),
        recall=RecallSection(enabled=False),
    )
    kx = Kairox.open(tmp_path / "long.db", config)
    s = kx.session(workspace="w")
    provider = ScriptedProvider(reply_for, chunk_chars=16)
    counter = TokenCounter.for_model("gpt-4o")
    pins: list[str] = []
    sent_prompts: list[str] = []
    for i in range(TURNS):
        if i == 20:
            pins.append((await s.pin_fact("Project codename: KESTREL-42, owner Dana.")).text)
        if i == 150:
            pins.append((await s.pin_fact("The customer's invoice limit is 9,500 EUR.")).text)
        attachments = None
        if i % 50 == 5:
            attachments = [{"kind": "image", "filename": f"chart{i}.png"}]
        prompt = prompt_for(i)
        sent_prompts.append(prompt)
        turn = await s.begin_turn(prompt, attachments)
        used = counter.count_messages(turn.messages)
        assert used <= turn.trace.budget, f"turn {i}: {used} > {turn.trace.budget}"
        text = "\n".join(str(m.get("content") or "") for m in turn.messages)
        for pin in pins:
            assert pin in text, f"turn {i}: pinned fact missing"
        if i % 9 == 4:
            turn.add_tool_result(
                f"call-{i}",
                "lookup",
                {"invoice": 1000 + i},
                f"invoice {1000 + i}: paid, 3 items, shipped to depot {i % 5}",
            )
            await turn.reassemble()
            assert counter.count_messages(turn.messages) <= turn.trace.budget
        async for chunk in provider.stream(turn.messages):
            turn.feed(chunk.text)
        await turn.complete(model=provider.model, provider=provider.name)

    events = kx.events(s.id)
    # every original remains, verbatim
    assert [e.text for e in events if isinstance(e, UserMessageAdded)] == sent_prompts
    assert sum(isinstance(e, AssistantMessageCompleted) for e in events) == TURNS
    assert sum(isinstance(e, ToolInvocationCompleted) for e in events) == len(
        [i for i in range(TURNS) if i % 9 == 4]
    )
    # compaction fired automatically, each run in the documented order, uninterrupted
    starts = [e for e in events if isinstance(e, ContextCompactionStarted)]
    assert len(starts) >= 10 and all(e.trigger == "auto" for e in starts)
    compaction_types = {
        "ContextCompactionStarted",
        "CompactionSummary",
        "ContextCompactionCompleted",
        "ContextCompactionFailed",
    }
    runs = [e.type for e in events if e.type in compaction_types]
    assert runs == [
        "ContextCompactionStarted",
        "CompactionSummary",
        "ContextCompactionCompleted",
    ] * len(starts)
    for i, e in enumerate(events):
        if isinstance(e, ContextCompactionStarted):
            summary, completed = events[i + 1], events[i + 2]
            assert isinstance(summary, CompactionSummary)
            assert (summary.first_seq, summary.last_seq) == (e.first_seq, e.last_seq)
            assert completed.summary_seq == summary.seq  # type: ignore[attr-defined]
            assert summary.tokens_in > summary.tokens_out > 0
    # provenance: active summaries + uncompacted history account for every original
    state = s.refresh_compaction()
    ranges = state.covered_ranges()
    conversation = [
        e.seq
        for e in events
        if isinstance(e, UserMessageAdded | AssistantMessageCompleted | ToolInvocationCompleted)
    ]
    assert ranges and ranges[0][0] == conversation[0]
    uncovered = [q for q in conversation if not any(a <= q <= b for a, b in ranges)]
    assert uncovered == conversation[-len(uncovered) :]  # only the newest stay verbatim
    assert any(x.folded_summaries for x in events if isinstance(x, CompactionSummary))
    kx.close()
