"""Split invariance: any split of a text, streamed, gives the whole-text result."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kairox_core.markers import (
    DEFUSE,
    MarkerExtraction,
    MarkerStreamParser,
    extract_memory_markers,
)

ATOMS = [
    '<memory scope="session">fact</memory>',
    '<memory scope="user" key="editor">Prefers vim &amp; tmux</memory>',
    "<MEMORY\n key='w.k' scope='workspace'\n>\n multi\n line \n</Memory >",
    '<memory scope="global" key="k">bad scope</memory>',
    '<memory scope="user">no key</memory>',
    '<memory scope="user" key="a b">bad key</memory>',
    '<memory scope="session"/>',
    '<memory scope="session">  </memory>',
    '<memory scope="session">outer <memory scope="session">inner</memory>',
    '<memory scope="session">',
    '<memory scope="user" key="k">',
    "</memory>",
    "</memory\n\n >",  # a closer may hold blanks (at most 16) before its '>'
    "</MEMORY \t\f>",
    "</memories\n>",
    "</memory",
    "<memory",
    "<memory ",
    "<mem",
    "<",
    ">",
    "/",
    '"',
    "'",
    "`",
    "``",
    "```",
    "```py\n",
    "~~~",
    "~",
    "\n",
    "\n\n",
    "\r\n",
    "\f",
    " ",
    "  ",
    "\t",
    ".",
    "word",
    "x",
    "&lt;",
    "&#65;",
    "`code`",
    "<b>",
    "````",
    "``",
    "`a`",
    "~~~~",
    "  ```\n",
]

texts = st.lists(
    st.one_of(st.sampled_from(ATOMS), st.text(alphabet="ab <>`~\n/m", max_size=4)),
    max_size=16,
).map("".join)


def stream(text: str, cuts: list[int]) -> MarkerExtraction:
    parser = MarkerStreamParser()
    out = []
    prev = 0
    for cut in [*sorted(cuts), len(text)]:  # a repeated cut feeds an empty delta
        out.append(parser.feed(text[prev:cut]))
        prev = cut
    out.append(parser.finish())
    assert "".join(out) == parser.visible
    return MarkerExtraction("".join(out), parser.markers, parser.invalid)


def same(a: MarkerExtraction, b: MarkerExtraction) -> None:
    assert a.visible == b.visible
    assert a.markers == b.markers
    assert a.invalid == b.invalid


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), text=texts)
def test_any_split_equals_whole_text(data: st.DataObject, text: str) -> None:
    whole = extract_memory_markers(text)
    same(stream(text, list(range(1, len(text)))), whole)  # one character at a time
    if len(text) > 1:
        cuts = data.draw(st.lists(st.integers(1, len(text) - 1), max_size=8))
        same(stream(text, cuts), whole)
    same(stream(text, []), whole)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(exclude_characters="<"), max_size=200))
def test_text_without_tags_is_unchanged(text: str) -> None:
    assert extract_memory_markers(text).visible == text
    assert stream(text, list(range(1, len(text), 3))).visible == text


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_visible_text_never_grows_and_markers_come_from_the_text(text: str) -> None:
    result = extract_memory_markers(text)
    assert len(result.visible.replace(DEFUSE, "")) <= len(text)
    for item in [*result.markers, *result.invalid]:
        assert item.raw and item.raw in text


def test_an_empty_delta_releases_nothing_held() -> None:
    text = 'foo  <memory scope="session">x</memory>'
    parser = MarkerStreamParser()
    shown = parser.feed("foo  ") + parser.feed("") + parser.feed(text[5:]) + parser.finish()
    assert shown == extract_memory_markers(text).visible == "foo"


# A closer is ``</memory``, up to 16 blanks (space, tab, CR, LF, FF; HTML's set) and
# ``>``. One that spans lines, next to a backtick on its line, leaves its line break
# (a join could pair backticks anew), in both parsers.
CLOSERS_SPLIT = [
    # atheris: the blank between two removed closers lost the second one's line break
    # in the whole-text cleaner ("` a"), while the stream kept it
    ("`</memory> </memory\n\n >a", "`\na"),
    ("`a </memory\n\n > b", "`a\nb"),
    ('<memory scope="session">x</memory\n\n >y', "y"),
    ("a</memory" + " " * 16 + ">b", "ab"),
    ("a</memory \t\r\n\f>b", "ab"),
    ("a</memory" + " " * 17 + ">b", "a</memory" + " " * 17 + ">b"),  # past the bound: text
]


@pytest.mark.parametrize(("text", "visible"), CLOSERS_SPLIT)
def test_a_closer_with_blanks_streams_as_the_whole_text(text: str, visible: str) -> None:
    whole = extract_memory_markers(text)
    assert whole.visible == visible
    same(stream(text, list(range(1, len(text)))), whole)
    for cut in range(len(text) + 1):
        same(stream(text, [cut]), whole)


# Text, blanks, then a tag (a closer with any blanks inside, to one past the bound),
# repeated: the shapes in which the two parsers' clean-up after a removal once disagreed
# (a removed tag, blanks, a closer spanning lines, a backtick on the line). The usual
# pieces are drawn more often, so about one example in a hundred has that shape. Fast tier.
BLANKS = " \t\r\n\f"
closer = st.builds(
    "</{}{}>".format,
    st.sampled_from(["memory", "MEMORY", "memories"]),
    st.one_of(st.sampled_from(["", "\n", " \n\n "]), st.text(alphabet=BLANKS, max_size=17)),
)
bit = st.one_of(
    st.sampled_from(["", "`", "a"]),
    st.sampled_from(["\n", ">", "```", "</memory", "<memories>", '<memory scope="session">x']),
)
unit = st.tuples(bit, st.sampled_from(["", " ", "\n", "\t\r", "\f"]), closer).map("".join)
closer_texts = st.builds("{}{}".format, st.lists(unit, min_size=2, max_size=6).map("".join), bit)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), text=closer_texts)
def test_closers_with_blanks_stream_as_the_whole_text(data: st.DataObject, text: str) -> None:
    whole = extract_memory_markers(text)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    same(stream(text, cuts), whole)
    same(stream(text, []), whole)
    again = extract_memory_markers(whole.visible)
    assert again.markers == [] and again.invalid == []


# A removal between what may still grow into a tag (left) and code the reply had
# (right): the join is defused without breaking that fence or span (a DEFUSE before
# a fence's run once made the tags inside it parse again). Fast tier.
grows = st.tuples(
    st.sampled_from(["<memories", "<memory", "</memory", "<mem", "a"]),
    st.sampled_from(["", " ", "\n", " \n", "\f"]),
).map("".join)
removed = st.sampled_from(
    ["</memory>", '<memory scope="session">x</memory>', "</memories\n>", "<memories>"]
)
code = st.tuples(
    st.sampled_from(["", "\n", "\n  ", " "]),
    st.sampled_from(["~~~", "```", "`", "``", ">", "ory>"]),
    st.sampled_from(["", "\n", "x"]),
    st.sampled_from(["</memories>", "</memory>", ">", '<memory scope="session">y</memory>']),
    st.sampled_from(["", "`", "\n~~~", "\n```"]),
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), text=st.builds("{}{}{}".format, grows, removed, code))
def test_a_defused_join_never_breaks_the_code_after_it(data: st.DataObject, text: str) -> None:
    whole = extract_memory_markers(text)
    same(stream(text, data.draw(st.lists(st.integers(0, len(text)), max_size=4))), whole)
    again = extract_memory_markers(whole.visible)
    assert again.markers == [] and again.invalid == []
