"""The model reads its own memory tags back in history (people never see them), the
tags are never parsed again, and a reply that claims to have noted something without a
tag is flagged to the person (issue 28, item 1)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import UNCHANGED, UNSAVED, ChatEngine, unsaved_claim
from kairox_core.chat.plain import PlainChat
from kairox_core.chat.widgets import ChatMessage
from kairox_core.config import parse_config
from kairox_core.context.rendering import assistant_message
from kairox_core.events import AssistantMessageCompleted, MemoryProposed, ReplyFlagged
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.session import model_view

TAG = '<memory scope="user" key="seat">Prefers window seats</memory>'
MARKED = f"Noted. {TAG}"


def engine_for(tmp_path: Path, replies: list[str], **kw: str) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 512}},
            "memory": {"history_tags": True},
        }
    )
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(replies), **kw)


def replies_of(engine: ChatEngine) -> list[AssistantMessageCompleted]:
    return [e for e in engine.history() if isinstance(e, AssistantMessageCompleted)]


def proposals_of(engine: ChatEngine) -> list[MemoryProposed]:
    return [e for e in engine.history() if isinstance(e, MemoryProposed)]


async def test_history_keeps_the_tags_for_the_model_and_counts_them_exactly(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [MARKED, "Sure.", MARKED])
    outcome = await engine.run_turn("I like window seats", lambda _: None)
    assert outcome.text == "Noted."  # what people see
    (reply,) = replies_of(engine)
    assert reply.text == "Noted." and reply.model_text == MARKED
    counter = engine.session.assembler().counter
    assert reply.tokens == counter.message(assistant_message(MARKED))  # counted as sent
    context = await engine.session.preview("Which seat do I like?")
    assistant = [m for m in context.messages if m["role"] == "assistant"]
    assert assistant == [{"role": "assistant", "content": MARKED}]
    assert counter.count_messages(context.messages) <= context.trace.total
    # the tag in history is never parsed again: later turns raise nothing new
    await engine.run_turn("and?", lambda _: None)
    assert len(proposals_of(engine)) == 1
    # the model repeating its tag (as it reads it) changes nothing and is not "tainted"
    engine.approve(proposals_of(engine)[0].proposal_id)
    third = await engine.run_turn("again", lambda _: None)
    assert third.proposals == [] and len(proposals_of(engine)) == 1
    # a resumed session reads the same history
    sid = engine.session_id
    await engine.close()
    resumed = engine_for(tmp_path, ["x"], session_id=sid)
    context = await resumed.session.preview("next")
    assert MARKED in [m["content"] for m in context.messages if m["role"] == "assistant"]
    await resumed.close()


async def test_a_repeated_tag_is_not_tainted_by_its_own_history(
    tmp_path: Path, kairox_home: Path
) -> None:
    other_key = TAG.replace('key="seat"', 'key="seating"')
    engine = engine_for(tmp_path, [MARKED, f"Noted. {other_key}"])
    await engine.run_turn("I like window seats", lambda _: None)
    outcome = await engine.run_turn("keep that as seating too", lambda _: None)
    (proposal,) = outcome.proposals
    assert proposal.key == "seating" and not proposal.tainted
    await engine.close()


def test_model_view() -> None:
    assert model_view("Hello.", []) is None
    from kairox_core.markers import extract_memory_markers

    markers = extract_memory_markers(f"Fine.  {TAG} {TAG}").markers
    assert model_view("Fine.  ", markers) == f"Fine. {TAG} {TAG}"
    assert model_view("", markers[:1]) == TAG


@pytest.mark.parametrize(
    "text",
    [
        "Noted.",
        "noted, thanks!",
        "I'll remember that.",
        "I will remember your birthday.",
        "I've saved it.",
        "Got it, I'll keep that in mind.",
        "I have made a note of it.",
        "Sure, I've stored that for you.",
    ],
)
def test_claims_without_a_tag_are_flagged(text: str) -> None:
    assert unsaved_claim(text, []) == UNSAVED
    assert unsaved_claim(text, ["a marker"]) == ""  # a tag was written: nothing to flag


@pytest.mark.parametrize(
    "text", ["Paris is the capital.", "It is denoted by x.", "Remember to drink water.", ""]
)
def test_other_replies_are_not_flagged(text: str) -> None:
    assert unsaved_claim(text, []) == ""


async def test_plain_mode_says_nothing_was_saved(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, ["Noted.", MARKED, "Paris."])
    out, err = io.StringIO(), io.StringIO()
    prompts = io.StringIO("I am allergic to nuts\nI like window seats\nhi\n")
    assert await PlainChat(engine, prompts, out, err).run() == 0
    assert out.getvalue().splitlines() == ["Noted.", "Noted.", "Paris."]
    assert err.getvalue().count("Nothing was saved") == 1
    await engine.close()


async def test_the_warning_is_recorded_with_the_reply(tmp_path: Path, kairox_home: Path) -> None:
    """ "Nothing was saved" is kept in the audit trail, right after the reply it warns
    about, so a reload or a resumed session says it again; a reply that claims nothing,
    or whose tag was proposed, records no warning."""
    engine = engine_for(tmp_path, ["Noted.", MARKED, "Paris."])
    for prompt in ("I am allergic to nuts", "I like window seats", "capital of France?"):
        await engine.run_turn(prompt, lambda _: None)
    history = engine.history()
    (flag,) = [e for e in history if isinstance(e, ReplyFlagged)]
    first_reply = replies_of(engine)[0]
    assert flag.note == UNSAVED and flag.turn_id == first_reply.turn_id
    assert flag.seq == (first_reply.seq or 0) + 1  # written with the reply, not later
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_a_resumed_tui_says_again_what_was_and_was_not_saved(
    tmp_path: Path, kairox_home: Path
) -> None:
    trip = 'Noted. <memory scope="session" key="trip">Flying to Oslo</memory>'
    engine = engine_for(tmp_path, ["I'll remember that.", trip])
    await engine.run_turn("I am allergic to nuts", lambda _: None)
    await engine.run_turn("I fly to Oslo this trip", lambda _: None)
    session_id = engine.session_id
    await engine.close()
    resumed = engine_for(tmp_path, ["Paris."], session_id=session_id)
    app = ChatApp(resumed)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        said = [(m.role, m.text) for m in app.query(ChatMessage)]
        errors = [text for role, text in said if role == "error"]
        assert errors == [UNSAVED]
        roles = [role for role, _ in said if role in ("user", "assistant", "error")]
        assert roles == ["user", "assistant", "error", "user", "assistant"]  # under its reply
        # the session memory noted at once: said under its reply, as at the time
        assert said[-3:] == [
            ("assistant", "Noted."),
            ("note", "session memory noted [trip]: Flying to Oslo"),
            ("note", "resumed: 2 earlier prompts above"),
        ]
        # a redraw (after a compaction, say) keeps it too
        await app.redraw_chat()
        await pilot.pause()
        assert [m.text for m in app.query(ChatMessage) if m.role == "error"] == [UNSAVED]
    await resumed.close()


async def test_a_tag_that_only_repeats_a_kept_memory_is_flagged(
    tmp_path: Path, kairox_home: Path
) -> None:
    """ "Noted." over a tag that changes nothing (the model repeated its last tag for a
    new fact) saved nothing: the person is told, naming the memory it repeated."""
    engine = engine_for(tmp_path, [MARKED, MARKED, f"Your seat: window. {TAG}"])
    first = await engine.run_turn("I like window seats", lambda _: None)
    assert first.unsaved == ""
    engine.approve(first.proposals[0].proposal_id)
    second = await engine.run_turn("Remember that I fly on Mondays", lambda _: None)
    assert second.proposals == [] and second.unsaved == UNCHANGED.format(keys="seat")
    third = await engine.run_turn("Which seat do I like?", lambda _: None)
    assert third.unsaved == ""  # an answer that claims nothing: no flag
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_tui_says_nothing_was_saved(tmp_path: Path, kairox_home: Path) -> None:
    from textual.widgets import Input

    engine = engine_for(tmp_path, ["I'll remember that."])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        prompt = app.query_one("#prompt", Input)
        prompt.focus()
        prompt.value = "I am allergic to nuts"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        errors = [m.text for m in app.query(ChatMessage) if m.role == "error"]
        assert errors == [UNSAVED]
    await engine.close()


# --- "thinking…" until the first token (issue 28, item 7) -----------------------------------


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_tui_shows_thinking_until_the_first_token(
    tmp_path: Path, kairox_home: Path
) -> None:
    from textual.widgets import Input

    seen: list[str] = []
    app: ChatApp | None = None

    def reply(messages: object) -> str:  # runs when the model is called, before any token
        assert app is not None
        answers = [m for m in app.query(ChatMessage) if m.role == "assistant"]
        seen.append(str(answers[-1].content))
        return "Paris."

    engine = engine_for(tmp_path, [])
    engine.provider = ScriptedProvider(reply)
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        prompt = app.query_one("#prompt", Input)
        prompt.focus()
        prompt.value = "capital of France?"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert seen == ["Assistant: thinking…"]
        (answer,) = [m for m in app.query(ChatMessage) if m.role == "assistant"]
        assert str(answer.content) == "Assistant: Paris."
    await engine.close()


async def test_plain_mode_says_thinking_on_stderr(tmp_path: Path, kairox_home: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    seen: list[tuple[str, str]] = []

    def reply(messages: object) -> str:
        seen.append((out.getvalue(), err.getvalue()))
        return "Paris."

    engine = engine_for(tmp_path, [])
    engine.provider = ScriptedProvider(reply)
    assert await PlainChat(engine, io.StringIO("capital?\n"), out, err).run() == 0
    ((out_then, err_then),) = seen
    assert out_then == "" and err_then.endswith("kairox: thinking…\n")
    assert out.getvalue() == "Paris.\n"  # stdout carries only the answer
    await engine.close()


def test_the_built_in_prompt_files_personal_facts_under_user_and_consolidates() -> None:
    from kairox_core.prompt import MEMORY_PROTOCOL

    assert 'a personal fact is always "user"' in MEMORY_PROTOCOL
    assert "Related facts told together go into one tag" in MEMORY_PROTOCOL


async def test_by_default_history_keeps_the_tags(tmp_path: Path, kairox_home: Path) -> None:
    """``[memory] history_tags`` is on by default (benchmarks/protocol.py --conversation:
    the default model tags far more requests with it); off, history holds what people see."""
    config = parse_config({"profiles": {"default": {"context_window": 4096, "reserve": 512}}})
    assert config.memory.history_tags is True
    off = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 512}},
            "memory": {"history_tags": False},
        }
    )
    engine = ChatEngine.open(off, tmp_path / "k.db", provider=ScriptedProvider([MARKED]))
    await engine.run_turn("I like window seats", lambda _: None)
    (reply,) = replies_of(engine)
    assert reply.text == "Noted." and reply.model_text is None
    context = await engine.session.preview("Which seat do I like?")
    assert [m["content"] for m in context.messages if m["role"] == "assistant"] == ["Noted."]
    assert len(proposals_of(engine)) == 1
    await engine.close()
