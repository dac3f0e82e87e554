"""``TurnResult`` says what the turn and its engines did: the proposals with their
status, the events they recorded, the compactions run at the turn's end, the recalled
turns. Each is checked against what the store holds, so a front end can trust the
result instead of reading the store again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kairox_core import Kairox
from kairox_core.chat.engine import TurnOutcome, collect_turn_result
from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
)
from kairox_core.events import (
    CompactionSummary,
    ContextCompactionCompleted,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    MemoryAccepted,
    MemoryProposed,
)
from kairox_core.results import TurnResult

FILLER = (
    "Let us keep talking about the garden, the weather and what to plant next "
    "spring; tomatoes did well last year and the beans were fine too."
)
FACT = "My locker code at the Vantaa gym is 4417-ZETA, please remember it."


def small(*, enabled: bool = True, recall: bool = False) -> KairoxConfig:
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(
                model="gpt-4o", encoding="o200k_base", context_window=1400, reserve=200
            )
        },
        retrieval=RetrievalSection(backend="hashing", share=0.4),
        compaction=CompactionSection(enabled=enabled, keep_recent_exchanges=2, target_tokens=60),
        recall=RecallSection(enabled=recall),
    )


@pytest.fixture
def kx(tmp_path: Path) -> Iterator[Kairox]:
    with Kairox.open(tmp_path / "kx.db", small()) as k:
        yield k


def test_a_turn_that_proposes_says_what_became_of_each_proposal(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    reply = (
        "Done. <memory scope='session'>we speak Finnish</memory>"
        "<memory scope='user' key='city'>Oulu</memory>"
        "<memory scope='user' key='city'>Vantaa</memory>"
    )
    result = session.run_turn_sync("I moved from Oulu to Vantaa; we speak Finnish.", reply)
    by_body = {p.body: p for p in result.proposals}
    assert by_body["we speak Finnish"].status == "accepted"
    assert by_body["Vantaa"].status == "pending"
    oulu = by_body["Oulu"]  # the turn's second city marker replaced it
    assert oulu.status == "superseded" and oulu.superseded_by == by_body["Vantaa"].id
    assert [p.body for p in result.pending] == ["Vantaa"]
    assert [p.body for p in result.accepted] == ["we speak Finnish"]
    # the store agrees with the result, proposal by proposal
    for p in result.proposals:
        stored = kx.approvals.get_proposal(p.id)
        assert stored is not None and stored.status == p.status
    # the events are those stored for the turn, seqs and all
    stored_events = [
        e for e in kx.events(session.id) if isinstance(e, MemoryProposed | MemoryAccepted)
    ]
    assert result.memory_events == stored_events
    assert result.compactions == [] and result.recalled == []


def test_a_turn_without_markers_proposes_nothing(kx: Kairox) -> None:
    result = kx.session(workspace="w").run_turn_sync("hello", "hi there")
    assert result.proposals == [] and result.memory_events == [] and result.pending == []


def test_a_turn_whose_end_compacts_carries_the_compaction(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    results: list[TurnResult] = []
    for i in range(20):
        results.append(session.run_turn_sync(f"turn {i}: {FILLER}", f"noted {i}. {FILLER}"))
        if results[-1].compactions:
            break
    compacting = [r for r in results if r.compactions]
    assert compacting, "the small window must compact within 20 turns"
    assert all(not r.compactions for r in results[:-1])
    (done, *_) = compacting[0].compactions
    assert done.ok and done.summary is not None
    assert [type(e) for e in done.events] == [
        ContextCompactionStarted,
        CompactionSummary,
        ContextCompactionCompleted,
    ]
    stored = {e.seq: e for e in kx.events(session.id)}
    assert all(stored[e.seq] == e for e in done.events)  # as stored, seqs set
    assert done.summary_seq == done.events[1].seq
    assert "compaction" in done.engines  # the engines whose on_compacted took it
    assert "summary" not in done.as_dict() and "events" not in done.as_dict()


def test_a_turn_end_that_may_not_compact_says_it_skipped(tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "off.db", small(enabled=False)) as kx:
        session = kx.session(workspace="w")
        skipped = []
        for i in range(20):
            result = session.run_turn_sync(f"turn {i}: {FILLER}", f"noted {i}. {FILLER}")
            skipped += result.compactions
            if skipped:
                break
        assert skipped and skipped[0].status == "skipped"
        assert "disabled" in skipped[0].reason
        (event,) = skipped[0].events
        assert isinstance(event, ContextCompactionSkipped) and event.seq is not None


def test_a_turn_that_recalls_carries_the_recalled_turns(tmp_path: Path) -> None:
    with Kairox.open(tmp_path / "recall.db", small(recall=True)) as kx:
        session = kx.session(workspace="w")
        session.run_turn_sync(FACT, "Noted.")
        for i in range(12):  # the fact falls out of the verbatim history
            session.run_turn_sync(f"turn {i}: {FILLER}", f"noted {i}. {FILLER}")
        result = session.run_turn_sync("What is my locker code at the gym?", "4417-ZETA")
        assert any(FACT in hit.text for hit in result.recalled)
        assert all(hit.source == "recall" for hit in result.recalled)


def test_the_chat_outcome_is_built_from_the_result(kx: Kairox) -> None:
    session = kx.session(workspace="w")
    reply = (
        "<memory scope='session'>tea, no sugar</memory><memory scope='user' key='tea'>tea</memory>"
    )
    result = session.run_turn_sync("I drink tea without sugar.", reply)
    outcome = TurnOutcome(prompt="I drink tea without sugar.")
    collect_turn_result(result, outcome)
    assert [e.body for e in outcome.proposals] == ["tea"]  # waiting for a person
    assert [p.body for p in outcome.pending] == ["tea"]
    assert [e.body for e in outcome.accepted] == ["tea, no sugar"]
    assert outcome.compaction == []
