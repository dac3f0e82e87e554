"""The <memory> marker grammar: one test per rule (issue 3, item 1)."""

from __future__ import annotations

import pytest

from kairox_core.markers import (
    DEFUSE,
    InvalidReason,
    MarkerStreamParser,
    MemoryMarker,
    MemoryScope,
    extract_memory_markers,
)


def defused(text: str) -> str:
    """An unterminated tag is shown, but can no longer parse (issue 13, item 4)."""
    return text.replace("<memory", "<" + DEFUSE + "memory")


def one(text: str) -> MemoryMarker:
    result = extract_memory_markers(text)
    assert result.invalid == [], result.invalid
    assert len(result.markers) == 1, result.markers
    return result.markers[0]


def reason(text: str, **kw: int) -> str:
    result = extract_memory_markers(text, **kw)
    assert result.markers == []
    assert len(result.invalid) == 1, result.invalid
    return result.invalid[0].reason


def test_basic_marker_is_removed_and_parsed() -> None:
    text = 'Sure. <memory scope="user" key="editor">Prefers vim</memory> Noted.'
    result = extract_memory_markers(text)
    assert result.visible == "Sure. Noted."
    assert result.markers == [
        MemoryMarker(
            MemoryScope.USER,
            "editor",
            "Prefers vim",
            '<memory scope="user" key="editor">Prefers vim</memory>',
        )
    ]
    assert result.markers[0].scope == "user" and str(result.markers[0].scope) == "user"


def test_text_without_markers_is_unchanged() -> None:
    text = "a < b and c > d\n\n  indented  \n`code` ~~ tilde\t\n"
    assert extract_memory_markers(text).visible == text


def test_attributes_in_single_or_double_quotes() -> None:
    assert one("<memory scope='user' key='k'>b</memory>").key == "k"
    assert one("<memory scope=\"user\" key='k'>b</memory>").scope is MemoryScope.USER


def test_attributes_in_any_order() -> None:
    m = one('<memory key="lang" scope="workspace">Python 3.11</memory>')
    assert (m.scope, m.key, m.body) == (MemoryScope.WORKSPACE, "lang", "Python 3.11")


def test_any_whitespace_between_attributes_including_newlines() -> None:
    m = one('<memory\n\tscope = "user"\n\n   key=\t"k"\n>body</memory>')
    assert (m.scope, m.key) == (MemoryScope.USER, "k")


def test_tag_and_attribute_names_are_case_insensitive() -> None:
    m = one('<MEMORY Scope="user" KEY="k">b</Memory>')
    assert (m.scope, m.key, m.body) == (MemoryScope.USER, "k", "b")


def test_unknown_attributes_are_ignored() -> None:
    m = one('<memory confidence="0.9" scope="session" data-x=\'y\'>b</memory>')
    assert m.scope is MemoryScope.SESSION and m.key is None


def test_key_required_for_user_and_workspace() -> None:
    assert reason('<memory scope="user">b</memory>') == InvalidReason.MISSING_KEY
    assert reason('<memory scope="workspace">b</memory>') == "missing key"


def test_key_optional_for_session() -> None:
    assert one('<memory scope="session">b</memory>').key is None
    assert one('<memory scope="session" key="topic">b</memory>').key == "topic"


@pytest.mark.parametrize("key", ["a b", "", "é", "x" * 129, "a/b", "k;"])
def test_malformed_keys_are_invalid(key: str) -> None:
    assert reason(f'<memory scope="user" key="{key}">b</memory>') == "malformed key"
    assert reason(f'<memory scope="session" key="{key}">b</memory>') == "malformed key"


def test_key_charset_and_length_limit() -> None:
    key = "A-z_0.9:" + "k" * 120
    assert one(f'<memory scope="user" key="{key}">b</memory>').key == key


def test_body_is_up_to_the_first_closing_tag_and_trimmed() -> None:
    result = extract_memory_markers(
        '<memory scope="session">\n  first  \n</memory> middle </memory> end'
    )
    assert result.markers[0].body == "first"
    assert result.visible == "middle end"  # a stray closer is removed too (issue 13, 4)
    assert [i.reason for i in result.invalid] == ["stray closing tag"]


def test_entities_decoded_in_body_and_attribute_values() -> None:
    m = one(
        '<memory scope="user" key="a&#x2D;b&#58;&#x41;&#66;">x &lt;y&gt; &amp; &quot;z&quot; '
        "&#233;</memory>"
    )
    assert m.key == "a-b:AB" and m.body == 'x <y> & "z" é'
    assert one('<memory scope="&#117;ser" key="k">b</memory>').scope is MemoryScope.USER


def test_entity_escaped_tag_in_body_is_not_nested() -> None:
    assert one('<memory scope="session">use &lt;memory&gt; tags</memory>').body == (
        "use <memory> tags"
    )


def test_complete_invalid_element_is_removed_from_text() -> None:
    result = extract_memory_markers('A <memory scope="nope" key="k">b</memory> B')
    assert result.visible == "A B"
    assert result.invalid[0].reason == "unknown scope"
    assert result.invalid[0].raw == '<memory scope="nope" key="k">b</memory>'


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('<memory key="k">b</memory>', "missing scope"),
        ("<memory>b</memory>", "missing scope"),
        ('<memory scope="global" key="k">b</memory>', "unknown scope"),
        ('<memory scope="user" key="k">   </memory>', "empty body"),
        ('<memory scope="session"/>', "empty body"),
        ('<memory scope="session" />', "empty body"),
        ("<memory scope=user key=k>b</memory>", "malformed attributes"),
        ('<memory scope="user" scope="session" key="k">b</memory>', "duplicate attribute"),
        ('<memory scope="user" key="a">x <memory scope="session">y</memory>', "nested marker"),
    ],
)
def test_invalid_reasons(text: str, why: str) -> None:
    result = extract_memory_markers(text)
    assert result.visible == "" and result.markers == []
    assert [i.reason for i in result.invalid] == [why]
    assert result.invalid[0].raw == text


def test_nested_leaves_the_rest_as_text_without_its_closer() -> None:
    result = extract_memory_markers(
        'a <memory scope="user" key="a">x <memory scope="session">y</memory> z</memory>'
    )
    assert [i.reason for i in result.invalid] == ["nested marker", "stray closing tag"]
    assert result.visible == "a z"  # no </memory> left to see (issue 13, item 4)


def test_body_length_limit_is_configurable() -> None:
    body = "x" * 2001
    assert reason(f'<memory scope="session">{body}</memory>') == "body too long"
    assert one(f'<memory scope="session">{body[:2000]}</memory>').body == body[:2000]
    assert reason('<memory scope="session">abcdef</memory>', max_body_chars=5) == ("body too long")
    with pytest.raises(ValueError):
        extract_memory_markers("x", max_body_chars=0)


def test_fenced_code_blocks_are_not_parsed() -> None:
    for fence in ("```", "~~~", "````", "```python", "~~~~ text"):
        close = fence.split()[0].rstrip("python")
        text = f'Explain:\n{fence}\n<memory scope="session">x</memory>\n{close}\nDone.'
        result = extract_memory_markers(text)
        assert result.visible == text and result.markers == [] and result.invalid == []


def test_indented_fence_and_longer_closing_fence() -> None:
    text = '1. step\n   ```\n   <memory scope="session">x</memory>\n   `````\nafter'
    assert extract_memory_markers(text).visible == text


def test_fence_closes_only_with_enough_of_the_same_character() -> None:
    text = '````\n```\n~~~~\n<memory scope="session">x</memory>\n````\n'
    assert extract_memory_markers(text).markers == []


def test_markers_after_a_closed_fence_are_parsed() -> None:
    text = '```\ncode\n```\n<memory scope="session">fact</memory>\nafter'
    result = extract_memory_markers(text)
    assert result.visible == "```\ncode\n```\nafter"
    assert result.markers[0].body == "fact"


def test_unclosed_fence_runs_to_the_end() -> None:
    text = 'text\n```\n<memory scope="session">x</memory>'
    assert extract_memory_markers(text).visible == text


def test_inline_code_spans_are_not_parsed() -> None:
    for text in (
        'Write `<memory scope="user" key="k">x</memory>` to remember.',
        'Or ``a ` <memory scope="session">x</memory>`` here.',
    ):
        result = extract_memory_markers(text)
        assert result.visible == text and result.markers == [] and result.invalid == []


def test_unmatched_backtick_does_not_hide_a_marker() -> None:
    result = extract_memory_markers('Press ` then <memory scope="session">x</memory> ok')
    assert result.visible == "Press ` then ok"
    assert result.markers[0].body == "x"


def test_code_span_ends_at_the_line_end() -> None:
    result = extract_memory_markers('a `b\n<memory scope="session">x</memory>\nc`')
    assert result.visible == "a `b\nc`" and result.markers[0].body == "x"


def test_unterminated_element_is_released_as_text() -> None:
    text = 'Hi <memory scope="session">never closed'
    result = extract_memory_markers(text)
    assert result.visible == defused(text) and result.markers == []
    assert [(i.reason, i.raw) for i in result.invalid] == [
        ("unterminated", '<memory scope="session">')
    ]


def test_unterminated_opening_tag_is_released_as_text() -> None:
    text = 'Hi <memory scope="session" key'
    result = extract_memory_markers(text)
    assert result.visible == defused(text)
    assert [i.reason for i in result.invalid] == [InvalidReason.UNTERMINATED]


def test_unterminated_tag_does_not_hide_later_self_closing_elements() -> None:
    result = extract_memory_markers('<memory scope="user">a <memory scope="session"/> b')
    assert [i.reason for i in result.invalid] == ["unterminated", "empty body"]
    assert result.visible == defused('<memory scope="user">a b')


def test_unterminated_in_stream_matches_whole_text() -> None:
    parser = MarkerStreamParser()
    assert parser.feed('ok <memory scope="session">body') == "ok"
    assert parser.finish() == defused(' <memory scope="session">body')
    assert [i.reason for i in parser.invalid] == ["unterminated"]


def test_not_a_tag_when_name_continues() -> None:
    text = "a <memoryless> b <memory-x> c <memo>"
    assert extract_memory_markers(text).visible == text


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ('Hello\n<memory scope="session">a</memory>\nWorld', "Hello\nWorld"),
        ('Hello\n  <memory scope="session">a</memory>  \nWorld', "Hello\nWorld"),
        ('<memory scope="session">a</memory>\nWorld', "World"),
        ('Hello\n<memory scope="session">a</memory>', "Hello\n"),
        ('P1\n\n<memory scope="session">a</memory>\n\nP2', "P1\n\nP2"),
        ('P1\n<memory scope="session">a</memory>\n\nP2', "P1\n\nP2"),
        ('<memory scope="session">a</memory>\n\nP2', "P2"),
        ('A <memory scope="session">a</memory> B', "A B"),
        ('A<memory scope="session">a</memory> B', "A B"),
        ('A <memory scope="session">a</memory>B', "A B"),
        ('A<memory scope="session">a</memory>B', "AB"),
        ('Noted <memory scope="session">a</memory>.', "Noted."),
        ('Noted. <memory scope="session">a</memory>', "Noted."),
        ('Noted. <memory scope="session">a</memory>\nNext', "Noted.\nNext"),
        ('A <memory scope="session">a</memory> <memory scope="session">b</memory> B', "A B"),
        ('<memory scope="session">a</memory> <memory scope="session">b</memory>\nB', "B"),
        ('  <memory scope="session">a</memory> B', "  B"),
        ('A <memory scope="session">\nmulti\nline\n</memory>\nB', "A\nB"),
        ('x\r\n<memory scope="session">a</memory>\r\ny', "x\r\ny"),
    ],
)
def test_removal_leaves_clean_text(text: str, visible: str) -> None:
    assert extract_memory_markers(text).visible == visible
    parser = MarkerStreamParser()
    streamed = "".join(parser.feed(ch) for ch in text) + parser.finish()
    assert streamed == visible


def test_no_double_spaces_or_blank_lines_left() -> None:
    text = (
        "Intro line.\n\n"
        '<memory scope="user" key="a">x</memory>\n\n'
        'Middle <memory scope="session">y</memory> text <memory scope="session">z</memory>.\n'
        '<memory scope="session">w</memory>\n'
        "End."
    )
    visible = extract_memory_markers(text).visible
    assert visible == "Intro line.\n\nMiddle text.\nEnd."
    assert "  " not in visible and "\n\n\n" not in visible


def test_stream_holds_only_a_possible_tag() -> None:
    parser = MarkerStreamParser()
    assert parser.feed("Hello wor") == "Hello wor"
    assert parser.feed("ld <mem") == "ld"
    assert parser.feed("ory scope='session'>fa") == ""
    assert parser.feed("ct</memory> and") == " and"
    assert parser.feed(" a < b") == " a < b"
    assert parser.finish() == ""
    assert [m.body for m in parser.markers] == ["fact"]
    assert parser.visible == "Hello world and a < b"


def test_stream_feed_after_finish_raises() -> None:
    parser = MarkerStreamParser()
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed("x")
