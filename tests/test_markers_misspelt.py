"""``<memories>``: a misspelt marker small models write. Removed, reported, never
proposed; the text between the tags stays visible. Both parsers agree on it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core.chat.plain import PlainChat
from kairox_core.markers import (
    DEFUSE,
    InvalidReason,
    MarkerExtraction,
    MarkerStreamParser,
    extract_memory_markers,
)
from tests.test_protocol_history import engine_for, proposals_of, replies_of

OPEN = '<memories scope="session">'
WORKOUTS = (
    'Hi! <memories scope="workspace" key="running-workouts">'
    "Tracking your running workouts.</memories>\nWhat next?"
)


def streamed(text: str, cut: int) -> MarkerExtraction:
    p = MarkerStreamParser()
    visible = p.feed(text[:cut]) + p.feed(text[cut:]) + p.finish()
    return MarkerExtraction(visible, p.markers, p.invalid)


def assert_same_at_every_split(text: str) -> MarkerExtraction:
    whole = extract_memory_markers(text)
    for cut in range(len(text) + 1):
        assert streamed(text, cut) == whole, cut
    return whole


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        (f"{OPEN}17 * 23 = 409.</memories>", "17 * 23 = 409."),
        (WORKOUTS, "Hi! Tracking your running workouts.\nWhat next?"),
        ("<MEMORIES>409.</Memories >", "409."),
        (f"{OPEN}\n409.\n</memories>\n", "409.\n"),
        ("A </memories> B", "A B"),  # a lone closer goes too
        ("A </MEMORIES\n\n > B", "A B"),  # blanks before '>', as a closer may have
        # a tag spanning lines after another removal keeps its line break by a backtick
        # (whole text once gave "` a", the stream "`\na")
        ("`<memories> </memories\n>a", "`\na"),
    ],
)
def test_the_tags_go_the_body_stays_and_nothing_is_proposed(text: str, visible: str) -> None:
    result = assert_same_at_every_split(text)
    assert result.visible == visible and result.markers == []
    assert result.invalid and all(i.reason == InvalidReason.MISSPELLED for i in result.invalid)
    assert {i.describe() for i in result.invalid} == {
        "the model wrote a malformed memory tag (<memories>); nothing was saved"
    }


def test_a_real_marker_inside_still_counts() -> None:
    text = f'{OPEN}Noted. <memory scope="user" key="seat">Window</memory></memories>'
    result = assert_same_at_every_split(text)
    assert result.visible == "Noted." and [m.body for m in result.markers] == ["Window"]
    assert [i.raw for i in result.invalid] == [OPEN, "</memories>"]


@pytest.mark.parametrize(
    "text",
    [
        "`<memories>x</memories>`",  # inline code: text
        "```\n<memories>x</memories>\n```",  # a fence: text
        "<mem>x</mem>",  # other near misses stay text (kept tight)
        "<memoriesx>y</memoriesx>",
        "<memories a<b>x",  # no '<' inside the tag
        "<memories " + "a" * 201 + ">x",  # bounded (so the stream's carry is)
    ],
)
def test_what_is_not_a_misspelt_tag_stays_text(text: str) -> None:
    result = assert_same_at_every_split(text)
    assert result.visible == text and result.invalid == [] and result.markers == []


def test_a_removal_never_assembles_a_misspelt_tag() -> None:
    tag = '<memory scope="session">a</memory>'
    join = f"<memor{tag}ies>x</memo{tag}ries>"
    result = assert_same_at_every_split(join)
    assert DEFUSE in result.visible and len(result.markers) == 2
    again = extract_memory_markers(result.visible)
    assert again.invalid == [] and again.visible == result.visible
    # inside the attributes a defused join breaks the tag too
    attrs = '<memories a="<memory scope="session">c</memory>">x'
    seen = assert_same_at_every_split(attrs).visible
    assert extract_memory_markers(seen).invalid == []


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        # '<memories' and a blank may grow across the removed line into a misspelt tag,
        # so the join is defused; before the fence's run it broke the fence and the
        # '</memories>' inside it parsed again (hfenum: random fragments)
        (
            "<memories\n</memory>\n~~~\n</memories>\n~~~",
            f"<memories\n~~~{DEFUSE}\n</memories>\n~~~",
        ),
        (
            "<memories\n</memory>\n  ```\n</memories>\n```",
            f"<memories\n  ```{DEFUSE}\n</memories>\n```",
        ),
        ("<memories\n</memory>\n`</memories>`", f"<memories\n`{DEFUSE}</memories>`"),
        # a line break the cleaner writes itself takes the DEFUSE before it, as before
        ("<memory</memory>\n```\n</memory>\n```", f"<memory{DEFUSE}\n```\n</memory>\n```"),
    ],
)
def test_a_defused_join_keeps_the_fence_after_it(text: str, visible: str) -> None:
    result = assert_same_at_every_split(text)
    assert result.visible == visible
    again = extract_memory_markers(result.visible)
    assert again.invalid == [] and again.visible == result.visible


def test_released_text_is_defused() -> None:
    text = f'<memory scope="session">{OPEN}x</memories>'  # never closed: released as text
    result = assert_same_at_every_split(text)
    assert extract_memory_markers(result.visible).invalid == []


PIECES = [
    OPEN,
    "</memories>",
    "</memories\n\n >",  # blanks before '>', as a closer may have
    "<memories\n key='k'\n>",
    "<memories\n",
    "</memory\n>",
    "~~~",
    "<MEMORIES>",
    "<memories key='k' >",
    '<memory scope="session">',
    "</memory>",
    "<memor",
    "ies",
    "409.",
    " ",
    "\n",
    "`",
    "```",
    "<",
    ">",
    "x",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14), st.data())
def test_stream_equals_whole(parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    whole = extract_memory_markers(text)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=4)))
    p = MarkerStreamParser()
    visible, last = "", 0
    for cut in cuts:
        visible += p.feed(text[last:cut])
        last = cut
    visible += p.feed(text[last:]) + p.finish()
    assert MarkerExtraction(visible, p.markers, p.invalid) == whole
    # what the person sees never parses into markup again
    again = extract_memory_markers(whole.visible)
    assert again.markers == [] and again.invalid == []


async def test_chat_shows_the_answer_and_saves_nothing(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, [f"{OPEN}409.</memories>", "Sure."])
    outcome = await engine.run_turn("What is 17 * 23?", lambda _: None)
    assert outcome.text == "409." and outcome.proposals == []
    assert [i.reason for i in outcome.invalid] == ["misspelled tag"] * 2
    (reply,) = replies_of(engine)
    assert reply.text == "409." and "<memories" not in (reply.model_text or "")
    context = await engine.session.preview("next")
    sent = [m["content"] for m in context.messages if m["role"] == "assistant"]
    assert sent == ["409."]  # the model never sees the tag to imitate it
    assert proposals_of(engine) == []
    await engine.close()


async def test_plain_chat_says_it_once(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, [f"{OPEN}409.</memories>"])
    out, err = io.StringIO(), io.StringIO()
    assert await PlainChat(engine, io.StringIO("17 * 23?\n"), out, err).run() == 0
    assert out.getvalue().splitlines() == ["409."]
    said = "the model wrote a malformed memory tag (<memories>); nothing was saved"
    assert err.getvalue().count(said) == 1
    await engine.close()


async def test_the_web_says_it_once(tmp_path: Path, kairox_home: Path) -> None:
    from kairox_core.web.turns import stream_turn

    engine = engine_for(tmp_path, [f"{OPEN}409.</memories>"])
    events = [(name, data) async for name, data in stream_turn(engine, "17 * 23?")]
    done = dict(events)["done"]
    assert done["text"] == "409." and done["invalid"] == ["misspelled tag"] * 2
    assert done["notes"] == [
        "the model wrote a malformed memory tag (<memories>); nothing was saved"
    ]
    assert "proposal" not in dict(events)
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_tui_trace_says_it_once(tmp_path: Path, kairox_home: Path) -> None:
    from textual.widgets import Input, Static

    from kairox_core.chat.app import ChatApp
    from kairox_core.chat.widgets import ChatMessage

    engine = engine_for(tmp_path, [f"{OPEN}409.</memories>"])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        prompt = app.query_one("#prompt", Input)
        prompt.focus()
        prompt.value = "17 * 23?"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        answers = [m.text for m in app.query(ChatMessage) if m.role == "assistant"]
        assert answers == ["409."]
        lines = [str(s.render()) for s in app.trace_panel.query(Static)]
        said = "the model wrote a malformed memory tag (<memories>); nothing was saved"
        assert lines.count(said) == 1
    await engine.close()
