"""``ProfileCounter.raw_count_lines``: the sum of its lines' counts is the exact count."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.context.counting import ProfileCounter

# Lines made of what pre-token boundaries are sensitive to: spaces, newline runs,
# punctuation (which takes following newlines and slashes), digits, contractions,
# non-ASCII letters and marks, special-token look-alikes.
_piece = st.sampled_from(
    [*"aZ9 \t\n\r./:'-<[", "  ", "\n\n", "'s", "é", "\u0301", "漢字", "<|endoftext|>", "user", "42"]
)
_line = st.lists(_piece, max_size=12).map("".join)
_text = st.lists(_line, min_size=1, max_size=60).map("\n".join)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(deadline=None)  # the first example loads the encoding
@given(text=_text)
def test_line_sum_equals_the_whole_count(encoding: str, text: str) -> None:
    pc = ProfileCounter(encoding, 0.0)
    padded = text + "\n" + "x" * 600  # over the size below which the text is counted whole
    assert pc.raw_count_lines(padded) == len(pc.raw._encoding.encode(padded, disallowed_special=()))
    assert pc.raw_count_lines(text) == pc.raw_count(text)


def test_a_recalled_block_counts_as_encoded() -> None:
    pc = ProfileCounter("o200k_base", 0.0)
    lines = ["[recalled turns of this conversation]", "2024-05-01:"]
    lines += [
        f"{'user' if i % 2 else 'assistant'}: turn {i} says: ok/fine.\n  indented"
        for i in range(80)
    ]
    text = "\n".join(lines) + "\n"
    assert pc.raw_count_lines(text) == len(pc.raw._encoding.encode(text, disallowed_special=()))
