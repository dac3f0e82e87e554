"""Chunking: token bounds, Markdown structure, fenced blocks kept whole, overlap."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.retrieval.chunking import Chunker, split_blocks
from kairox_core.tokens import TokenCounter

pytestmark = pytest.mark.slow

COUNTER = TokenCounter()


def test_blocks_follow_markdown() -> None:
    text = "# A\n\npara one\nstill one\n\n```py\nx = 1\n\ny = 2\n```\n## B\ntext b\n"
    blocks = split_blocks(text)
    assert [b.kind for b in blocks] == ["heading", "paragraph", "code", "heading", "paragraph"]
    assert blocks[2].text == "```py\nx = 1\n\ny = 2\n```"  # a blank line inside stays inside
    assert blocks[-1].heading == "A > B"


def test_headings_start_chunks_and_are_recorded() -> None:
    body = " ".join(["word"] * 40)
    text = f"# Intro\n{body}\n\n# Usage\n{body}\n"
    chunks = Chunker(64, 8).chunk(text)
    assert [c.heading for c in chunks] == ["Intro", "Usage"]
    assert chunks[1].text.startswith("# Usage")


def test_overlap_carries_trailing_sentences() -> None:
    text = " ".join(f"Sentence {i} ends here." for i in range(60))
    chunks = Chunker(64, 16).chunk(text)
    assert len(chunks) > 2
    for a, b in itertools.pairwise(chunks):
        last = a.text.split(". ")[-1].rstrip(".")
        assert last in b.text  # the previous chunk's last sentence is repeated


def test_short_document_is_one_chunk() -> None:
    chunks = Chunker().chunk("Title\n\nA short abstract about proteins.")
    assert len(chunks) == 1 and chunks[0].tokens > 0


paragraph = st.lists(
    st.sampled_from(["alpha", "beta", "gamma.", "delta", "epsilon!"]), min_size=1, max_size=60
).map(" ".join)
code = st.lists(
    st.sampled_from(["x = 1", "def f():", "    return x", "", "# note"]), min_size=1, max_size=12
).map(lambda lines: "```\n" + "\n".join(lines) + "\n```")
heading = st.sampled_from(["# Top", "## Section", "### Sub"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(paragraph, code, heading), min_size=1, max_size=25))
def test_chunks_fit_cover_and_keep_fences_whole(parts: list[str]) -> None:
    text = "\n\n".join(parts)
    chunker = Chunker(96, 16, COUNTER)
    chunks = chunker.chunk(text)
    joined = "\n".join(c.text for c in chunks)
    for c in chunks:
        assert COUNTER.count(c.text) <= 96 + 8  # separators are estimated, not exact
    for part in parts:
        if part.startswith("```"):  # every fence that fits in a chunk is whole in one
            assert any(part in c.text for c in chunks)
        else:
            assert all(word in joined for word in part.split())
