"""Reordering recalled turns: speaker and content priors, neighbours (recall/rank.py)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
)
from kairox_core.context.recalled import turn_seq
from kairox_core.facade import Kairox
from kairox_core.recall.engine import recall_of
from kairox_core.recall.rank import (
    RankSettings,
    arrange,
    content_words,
    neighbour_reader,
    propagate,
    speaker_of,
    weigh_content,
    weigh_speakers,
)
from kairox_core.retrieval.base import RetrievalHit


def hit(seq: int, score: float, text: str = "", speaker: str = "user") -> RetrievalHit:
    meta = {"seq": seq, "speaker": speaker}
    return RetrievalHit(text or f"turn {seq}", score, "recall", f"turn:s:{seq}", meta)


def seqs(hits: Sequence[RetrievalHit]) -> list[int | None]:
    return [turn_seq(h) for h in hits]


def test_propagate_lifts_the_neighbour_of_a_strong_hit() -> None:
    hits = [hit(10, 1.0), hit(50, 0.5), hit(12, 0.4)]
    around = {10: (hit(9, 0.0), hit(12, 0.0)), 50: (None, None)}
    out = propagate(hits, around, weight=0.3)
    assert seqs(out) == [10, 12, 50, 9]  # 12: 0.4 + 0.3; 9 (not retrieved) joins at 0.3
    assert out[1].score == 0.4 + 0.3 * 1.0
    assert seqs(propagate(hits, around, weight=0.0))[:3] == [10, 50, 12]


def test_weigh_content_puts_the_turn_that_says_more_first() -> None:
    filler = "Sounds nice! Spending time with loved ones is so important."
    fact = "Last Friday I passed the adoption agency interviews in Portland, finally."
    assert content_words(filler) < content_words(fact)
    hits = [hit(1, 0.0165, filler), hit(2, 0.0160, fact)]
    assert seqs(weigh_content(hits, 1.0, 12)) == [2, 1]
    assert seqs(weigh_content(hits, 0.0, 12)) == [1, 2]


def test_speaker_of_reads_a_transcript_label_else_the_metadata() -> None:
    assert speaker_of(hit(1, 0.0, "John: I ran for office again.")) == "John"
    assert speaker_of(hit(1, 0.0, "Dr. Mary Ann: The results are in.")) == "Dr. Mary Ann"
    assert speaker_of(hit(1, 0.0, "  Gina: hi")) == "Gina"
    for text in (
        "note: buy milk",  # not capitalised
        "Yes, and: more",  # not a name
        "See https://example.org for it",  # no space after the colon
        "The four of us went: me, Ann, Bob and Tim",  # more than three words
        "12: the answer",
    ):
        assert speaker_of(hit(1, 0.0, text, speaker="assistant")) == "assistant", text


def test_weigh_speakers_puts_the_named_speakers_turns_first() -> None:
    hits = [
        hit(1, 0.030, "Maria: The shelter needs more volunteers this winter."),
        hit(2, 0.020, "John: I tried to stay calm and asked for assistance."),
        hit(3, 0.016, "Maria: I love the beach."),
        hit(4, 0.012, "John: Family time means a lot to me."),
    ]
    out = weigh_speakers(hits, "What attributes describe John?", 1.0)
    assert seqs(out) == [2, 1, 4, 3]  # 0.040, 0.030, 0.024, 0.016
    assert out[0].score == 0.020 * 2
    assert seqs(weigh_speakers(hits, "What attributes describe John?", 0.0)) == [1, 2, 3, 4]
    # naming every speaker, or none, says nothing about who: the order stays
    assert seqs(weigh_speakers(hits, "Did John and Maria meet?", 1.0)) == [1, 2, 3, 4]
    assert seqs(weigh_speakers(hits, "Who likes the beach?", 1.0)) == [1, 2, 3, 4]
    # a whole word, any case: "Johnny" is not John, "JOHN" is
    assert seqs(weigh_speakers(hits, "Where is Johnny?", 1.0)) == [1, 2, 3, 4]
    assert seqs(weigh_speakers(hits, "WHAT DOES JOHN LIKE", 1.0))[0] == 2


def test_speaker_prior_is_a_typed_setting() -> None:
    assert RecallSection().speaker_prior == 0.0
    assert RankSettings.of(RecallSection(speaker_prior=1.5)).speaker_prior == 1.5
    assert RankSettings.of(RecallSection(speaker_prior=1.5)).active
    with pytest.raises(ValidationError):
        RecallSection(speaker_prior=-1.0)


def test_weigh_speakers_falls_back_to_the_speaker_metadata() -> None:
    hits = [hit(1, 0.03, "Try the blue one.", "assistant"), hit(2, 0.02, "I like red.", "user")]
    assert seqs(weigh_speakers(hits, "What colour did the user like?", 1.0)) == [2, 1]


def no_neighbours(seqs: Sequence[int]) -> dict[int, tuple[RetrievalHit | None, ...]]:
    raise AssertionError("no neighbour read expected")


@pytest.mark.slow
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=0, max_size=30),
    st.integers(1, 40),
)
def test_arrange_with_every_weight_zero_keeps_the_order(scores: list[float], limit: int) -> None:
    hits = [hit(i, s) for i, s in enumerate(scores)]
    assert arrange(hits, RankSettings(), no_neighbours, limit=limit) == hits[:limit]


@pytest.mark.slow
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30, unique=True),
    st.floats(0.01, 2),
    st.floats(0.01, 3),
    st.floats(0, 3),
)
def test_arrange_never_repeats_a_turn_and_respects_the_limit(
    scores: list[float], neighbour: float, prior: float, speaker: float
) -> None:
    hits = [
        hit(2 * i, s, f"{'Ann' if i % 3 else 'Bob'}: " + "word " * i) for i, s in enumerate(scores)
    ]

    def neighbours(s: Sequence[int]) -> dict[int, tuple[RetrievalHit | None, ...]]:
        return {x: (hit(x - 1, 0.0), hit(x + 1, 0.0)) for x in s}

    settings = RankSettings(content_prior=prior, neighbour_weight=neighbour, speaker_prior=speaker)
    out = arrange(hits, settings, neighbours, limit=len(hits), prompt="What does Ann say?")
    assert len(out) == len(hits)
    assert len(set(seqs(out))) == len(out)
    assert all(a.score >= b.score for a, b in itertools.pairwise(out))


@dataclass
class Ev:
    seq: int


def test_neighbour_reader_finds_the_adjacent_conversation_turns() -> None:
    stored = [Ev(s) for s in (1, 2, 5, 6, 30)]  # gaps: other events (deltas, summaries)
    reads: list[tuple[int, int]] = []

    def read(first: int, last: int) -> list[Ev]:
        reads.append((first, last))
        return [e for e in stored if first <= e.seq <= last]

    def to_hit(e: object) -> RetrievalHit:
        assert isinstance(e, Ev)
        return hit(e.seq, 0.0)

    around = neighbour_reader(read, to_hit, window=4)([2, 5, 30])
    assert [seqs([h]) if h else None for h in around[2]] == [[1], [5]]
    assert [seqs([h]) if h else None for h in around[5]] == [[2], [6]]
    assert around[30] == (None, None)  # nothing within 4 seqs either side
    assert reads == [(0, 9), (26, 34)]  # the windows of 2 and 5 overlap: read once


def kx_config(**ranking: float) -> KairoxConfig:
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(
                model="gpt-4o", encoding="o200k_base", context_window=4000, reserve=200
            )
        },
        retrieval=RetrievalSection(backend="hashing", workspace_index=False),
        compaction=CompactionSection(keep_recent_exchanges=1),
        recall=RecallSection(k=12, **ranking),
    )


STORY = [
    ("Did you ever get the keys for the cabin at Lake Inari?", "Not yet, why?"),
    ("The owner left them under the blue flowerpot by the sauna.", "Good to know!"),
]
FILLER = [
    (f"Chat {i} about trains and timetables.", f"Trains {i} are late again.") for i in range(8)
]


@pytest.mark.slow
def test_recall_turns_brings_the_answer_after_a_hit(tmp_path: Path) -> None:
    """With neighbours on, the reply after the best-matching turn ranks above the
    unrelated turns the search alone put before it."""
    found: dict[bool, list[str]] = {}
    for on in (False, True):
        cfg = kx_config(neighbour_weight=1.0 if on else 0.0)
        with Kairox.open(tmp_path / f"{on}.db", cfg) as kx:
            session = kx.session(workspace="w")
            for user, reply in [*STORY, *FILLER]:
                session.run_turn_sync(user, reply)
            turns = recall_of(kx).turns(session, "Where are the cabin keys at Lake Inari?")
            found[on] = [h.text for h in turns]
            assert all(h.metadata.get("session_id") == session.id for h in turns)

    def place(texts: list[str]) -> int:
        return texts.index("Not yet, why?") if "Not yet, why?" in texts else len(texts)

    def first_filler(texts: list[str]) -> int:
        return min(i for i, t in enumerate(texts) if t.startswith("Trains"))

    assert place(found[False]) > first_filler(found[False])
    assert place(found[True]) < first_filler(found[True])


def test_recall_turns_puts_the_named_speakers_turns_first(tmp_path: Path) -> None:
    """``[recall] speaker_prior`` reaches ``Recall.turns``: asked about Ann,
    the turns Ann said come before Ben's, which match the prompt's words better."""
    talk = [
        ("Ann: My weekend was hiking in the hills.", "Ben: My weekend was hiking by the sea."),
        ("Ann: The hills were windy on the weekend.", "Ben: The sea was calm on the weekend."),
        *FILLER,
    ]
    order: dict[float, list[str]] = {}
    for prior in (0.0, 3.0):
        with Kairox.open(tmp_path / f"{prior}.db", kx_config(speaker_prior=prior)) as kx:
            session = kx.session(workspace="w")
            for user, reply in talk:
                session.run_turn_sync(user, reply)
            turns = recall_of(kx).turns(session, "Ann, was the sea calm on the weekend?")
            order[prior] = [h.text.split(":")[0] for h in turns if ":" in h.text][:4]
    assert order[0.0][0] == "Ben"  # the search alone: Ben's words are the prompt's
    assert order[3.0] == ["Ann", "Ann", "Ben", "Ben"]
