"""Stored line counts: recall stamps each turn's line count when it indexes the turn
(``line_stamp``), and a turn that recalls it takes the count from there, only for that
very line under that encoding (``ProfileCounter.known_raw_count``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.config import (
    CompactionSection,
    KairoxConfig,
    ProfileConfig,
    RecallSection,
    RetrievalSection,
)
from kairox_core.context.counting import ProfileCounter
from kairox_core.context.recalled import (
    HEADER,
    LINE_TOKENS,
    TurnPack,
    line_of,
    line_stamp,
    render_turns,
)
from kairox_core.context.rendering import item_unit, neutralise
from kairox_core.facade import Kairox
from kairox_core.recall.engine import recall_of
from kairox_core.retrieval.base import RetrievalHit

LOCKER = "My locker code at the Vantaa gym is 4417-ZETA, please remember it."
FILLER = "Let us keep talking about the garden and what to plant next spring."


def config() -> KairoxConfig:
    """A small window: the early turns leave the history and are recalled."""
    return KairoxConfig(
        profiles={
            "default": ProfileConfig(
                model="gpt-4o", encoding="o200k_base", context_window=1400, reserve=200
            )
        },
        retrieval=RetrievalSection(backend="hashing", share=0.4),
        compaction=CompactionSection(keep_recent_exchanges=2, target_tokens=60),
        recall=RecallSection(k=8),
    )


_piece = st.sampled_from(
    [*"aZ9 \t\n./:'-<[", "  ", "'s", "é", "漢字", "<|endoftext|>", "<memory>", "user", "42"]
)
_text = st.lists(_piece, max_size=40).map("".join)


def exact(pc: ProfileCounter, text: str) -> int:
    return len(pc.raw._encoding.encode(text, disallowed_special=()))


class CountingEncoding:
    """The encoding, recording every text it encodes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts: list[str] = []

    def encode(self, text: str, **kw: Any) -> list[int]:
        self.texts.append(text)
        result: list[int] = self.inner.encode(text, **kw)
        return result


@pytest.mark.slow
@settings(deadline=None)  # the first example loads the encoding
@given(text=_text, other=_text)
def test_a_stamp_gives_its_own_text_s_count_and_no_other_s(text: str, other: str) -> None:
    pc = ProfileCounter("o200k_base", 0.0)
    stamp = pc.stamp(text)
    assert pc.known_raw_count(text, stamp) == exact(pc, text)
    fresh = ProfileCounter("o200k_base", 0.0)
    assert fresh.known_raw_count(other, stamp) == exact(fresh, other)
    cl100k = ProfileCounter("cl100k_base", 0.0)  # another encoding's stamp is not read
    assert cl100k.known_raw_count(text, stamp) == exact(cl100k, text)


def test_a_matching_stamp_is_taken_without_encoding_and_cached() -> None:
    pc = ProfileCounter("o200k_base", 0.0)
    text = "user: the release walrus is due on Friday\n"
    stamp = pc.stamp(text)
    spy = CountingEncoding(pc.raw._encoding)
    pc.raw._encoding = spy  # type: ignore[assignment]
    assert pc.known_raw_count(text, stamp) == exact(pc, text)
    assert pc.raw_count(text) == exact(pc, text)  # from the cache the stamp filled
    assert spy.texts == [text, text]  # only exact()'s own two calls


@pytest.mark.parametrize(
    "stamp",
    [
        None,
        7,
        "",
        "o200k_base",
        "o200k_base:nothex:12",
        "o200k_base:{digest}:-3",
        "o200k_base:{digest}:\u0661\u0662",  # Arabic-Indic digits: not a count
        "o200k_base:{digest}:",
        "cl100k_base:{digest}:12",
        "o200k_base:{other}:12",
    ],
)
def test_a_stamp_that_is_not_this_text_s_is_counted_instead(stamp: object) -> None:
    pc = ProfileCounter("o200k_base", 0.0)
    text = "assistant: noted.\n"
    digest = pc.stamp(text).split(":")[1]
    other = pc.stamp("assistant: noted!\n").split(":")[1]
    if isinstance(stamp, str):
        stamp = stamp.format(digest=digest, other=other)
    assert pc.known_raw_count(text, stamp) == exact(pc, text)


def test_the_pack_reads_the_stamp() -> None:
    """What the stamp says is what the pack counts (so it must be the line's own count:
    recall writes it, from the text it indexes)."""
    pc = ProfileCounter("o200k_base", 0.0)
    line = neutralise(line_of("user", "hello there")) + "\n"
    digest = pc.stamp(line).split(":")[1]
    hit = RetrievalHit(
        "hello there",
        1.0,
        "recall",
        "turn:s:1",
        {"seq": 1, "speaker": "user", "date": "2026-12-01", LINE_TOKENS: f"o200k_base:{digest}:99"},
    )
    pack = TurnPack(pc)
    header = pc.raw_count(item_unit(HEADER, ""))
    assert pack.cost_of(hit) == 99 + pc.raw_count("2026-12-01:\n") + header


@pytest.mark.slow
def test_recalled_turns_carry_their_line_counts_and_are_not_encoded_on_the_turn(
    tmp_path: Path,
) -> None:
    with Kairox.open(tmp_path / "kx.db", config()) as kx:
        session = kx.session()
        for i in range(30):
            said = LOCKER if i == 3 else f"turn {i}: {FILLER}"
            session.run_turn_sync(said, f"Noted, turn {i}. {FILLER}")
        recall = recall_of(kx)
        recall.catch_up(session)
        hits = recall.turns(session, "What is my locker code at the gym?")
        assert hits and any(LOCKER in h.text for h in hits)
        pc = ProfileCounter("o200k_base", 0.0)  # a fresh counter: nothing cached
        for hit in hits:
            stamp = hit.metadata[LINE_TOKENS]
            assert stamp == line_stamp(pc, hit.metadata["speaker"], hit.text)
        spy = CountingEncoding(pc.raw._encoding)
        pc.raw._encoding = spy  # type: ignore[assignment]
        pack = TurnPack(pc)
        for hit in hits:
            pack.add(hit, pack.cost_of(hit))
        lines = [neutralise(line_of(h.metadata["speaker"], h.text)) + "\n" for h in hits]
        assert not [t for t in spy.texts if t in lines]  # no recalled line was encoded
        pc.raw._encoding = spy.inner  # type: ignore[assignment]
        unit = render_turns(pack.turns)
        assert pc.raw_count_lines(unit) == exact(pc, unit)  # the exact check agrees
        assert pack.estimate == exact(pc, unit)
