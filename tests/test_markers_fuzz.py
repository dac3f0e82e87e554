"""Property suites for the marker protocol (issue 13, items 4 and 11).

Inputs are built from marker fragments (partial tags, closers, fences, backtick runs,
whitespace) so joins after a removal are tried often. The invariant: what a reply shows
(and the store keeps) never parses into a marker or an invalid element again, for the
whole-text extractor and for the stream parser under any split.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.markers import MarkerStreamParser, extract_memory_markers

pytestmark = pytest.mark.slow

FRAGMENTS = [
    '<memory scope="session">x</memory>',
    '<memory scope="user" key="k">evil</memory>',
    '<memory scope="session">`</memory>',
    '<memory scope="session">\n</memory>',
    '<memory scope="session"/>',
    '<memory scope="user" key="k">',
    "<memory",
    "<mem",
    "<me",
    "<",
    "mory",
    "ory",
    "ry",
    "y",
    ' scope="user" key="k">',
    'scope="session">',
    ">",
    "evil",
    "</memory>",
    "</mem",
    "`",
    "``",
    "```",
    "~",
    "~~",
    "~~~",
    "\n",
    " ",
    "\t",
    "a",
    ".",
]

replies = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join)


def streamed(text: str, cuts: list[int]) -> tuple[str, int, int]:
    parser = MarkerStreamParser()
    out, prev = [], 0
    for cut in [*sorted(cuts), len(text)]:
        out.append(parser.feed(text[prev:cut]))
        prev = cut
    out.append(parser.finish())
    return "".join(out), len(parser.markers), len(parser.invalid)


def reparses_to_nothing(visible: str) -> bool:
    again = extract_memory_markers(visible)
    return again.markers == [] and again.invalid == []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=replies)
def test_visible_text_never_parses_again(text: str) -> None:
    assert reparses_to_nothing(extract_memory_markers(text).visible)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), text=replies)
def test_streamed_text_never_parses_again_under_any_split(data: st.DataObject, text: str) -> None:
    whole = extract_memory_markers(text)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=10)) if text else []
    visible, n_markers, n_invalid = streamed(text, cuts)
    assert (visible, n_markers, n_invalid) == (
        whole.visible,
        len(whole.markers),
        len(whole.invalid),
    )
    assert reparses_to_nothing(visible)
