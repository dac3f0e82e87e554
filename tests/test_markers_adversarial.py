"""Hostile replies: linear time, a cap on proposals, no smuggled markup (issue 13, 3-4).

A model's reply is untrusted input. Each shape below took from seconds to minutes per
megabyte before (measured on main: ``'<memory>' * N`` 1 MB over 40 s); the bound here
is CPU time, generous enough for a loaded machine and far below the quadratic figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kairox_core.markers import (
    DEFUSE,
    MAX_TAGS,
    MarkerExtraction,
    MarkerStreamParser,
    extract_memory_markers,
)

MB = 1_000_000
SHAPES: dict[str, Callable[[int], str]] = {
    "openers": lambda n: "<memory>" * (n // 8),
    "unclosed openers, one per line": lambda n: '<memory scope="session">\n' * (n // 25),
    "backtick runs": lambda n: "<" + "x```" * (n // 4),
    "markers": lambda n: '<memory scope="session">fact</memory> ' * (n // 38),
    "unclosed marker": lambda n: '<memory scope="session">' + "word " * (n // 5),
    "tags in code spans": lambda n: '`<memory scope="session">x</memory>` ' * (n // 38),
    "openers without '>'": lambda n: "<memory " * (n // 8),
}


def stream(text: str, size: int = 16, **kw: int) -> MarkerExtraction:
    parser = MarkerStreamParser(**kw)
    out = [parser.feed(text[i : i + size]) for i in range(0, len(text), size)]
    out.append(parser.finish())
    return MarkerExtraction("".join(out), parser.markers, parser.invalid)


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_one_megabyte_of_each_hostile_shape_is_fast(shape: str) -> None:
    text = SHAPES[shape](MB)
    assert cpu(lambda: extract_memory_markers(text)) < 1.0
    assert cpu(lambda: stream(text)) < 2.0


@pytest.mark.parametrize("shape", SHAPES)
def test_hostile_shapes_stream_as_whole_text(shape: str) -> None:
    text = SHAPES[shape](200_000)
    whole, streamed = extract_memory_markers(text), stream(text, 7)
    assert streamed.visible == whole.visible
    assert streamed.markers == whole.markers and streamed.invalid == whole.invalid
    again = extract_memory_markers(whole.visible)
    assert again.markers == [] and again.invalid == []


def test_proposals_past_the_cap_are_invalid() -> None:
    text = "".join(f'<memory scope="session">fact {i}</memory>\n' for i in range(30))
    for result in (extract_memory_markers(text, max_markers=20), stream(text, max_markers=20)):
        assert [m.body for m in result.markers] == [f"fact {i}" for i in range(20)]
        assert [i.reason for i in result.invalid] == ["too many proposals"] * 10
        assert result.invalid[0].raw == '<memory scope="session">fact 20</memory>'
        assert result.visible == ""
    assert len(extract_memory_markers(text).markers) == 30  # no cap by default
    assert extract_memory_markers(text, max_markers=0).markers == []
    with pytest.raises(ValueError):
        extract_memory_markers(text, max_markers=-1)


def test_past_the_tag_budget_the_rest_is_defused_text() -> None:
    text = "ok " + '<memory scope="session">x</memory> ' * (MAX_TAGS + 5) + "end"
    for result in (extract_memory_markers(text), stream(text)):
        assert len(result.markers) == MAX_TAGS
        assert [i.reason for i in result.invalid] == ["too many proposals"]
        assert result.visible.endswith("end")
        assert result.visible.count("<" + DEFUSE + "memory") == 5
        assert extract_memory_markers(result.visible).invalid == []


def test_unclosed_openers_are_each_reported_once() -> None:
    text = "<memory>" * 50
    result = extract_memory_markers(text)
    assert [i.reason for i in result.invalid] == ["unterminated"] * 50
    assert result.visible.replace(DEFUSE, "") == text


@pytest.mark.parametrize(
    "text",
    [
        '<mem<memory scope="session">x</memory>ory scope="user" key="k">evil</memory>',
        '<memory<memory scope="session">x</memory> scope="user" key="k">evil</memory>',
        '<memory<memory scope="session">x</memory>\nscope="user" key="k">evil</memory>',
        '<memory scope="session">x</memory>```\nfoo\n```\n<memory scope="session">evil</memory>',
        '```a <memory scope="session">`</memory>\nb\n```\n<memory scope="session">evil</memory>',
        '~<memory scope="session">x</memory>~~\n<memory scope="session">evil</memory>\n~~~',
        '`` <memory scope="session">x</memory>` <memory scope="session">evil</memory> ``',
        # found by the fuzzers: text released from an unterminated tag, read again
        "y<memory\t\t`dor``>me``\t`y<memory\t\t`dor``",
        "<memory\n~~~>\n~~~\n<memory/",
        '`<memory scope="session">\n</memory>`<memory scope="session">x</memory>`',
        '</mem<memory scope="session">x</memory>ory>',
        '</memory <memory scope="session">x</memory> >',
    ],
)
def test_removal_never_assembles_new_markup(text: str) -> None:
    """What the user sees (and the store keeps) never parses into a marker again."""
    for result in (extract_memory_markers(text), stream(text, 1)):
        again = extract_memory_markers(result.visible)
        assert again.markers == [] and again.invalid == [], result.visible


def test_the_smuggled_user_marker_of_the_issue_is_not_proposed() -> None:
    text = '<mem<memory scope="session">x</memory>ory scope="user" key="k">evil</memory>'
    result = extract_memory_markers(text)
    assert [m.body for m in result.markers] == ["x"]
    assert result.visible.replace(DEFUSE, "") == '<memory scope="user" key="k">evil'
    assert [i.reason for i in result.invalid] == ["stray closing tag"]
    assert extract_memory_markers(result.visible).markers == []
