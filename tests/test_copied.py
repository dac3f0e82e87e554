"""Tags copied from the system prompt (kairox_core.memory.copied): left out of the
proposals and said so; the person's own words are never taken for a copy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kairox_core.chat.engine import UNSAVED_COPIED, ChatEngine
from kairox_core.config import parse_config
from kairox_core.events import AssistantMessageCompleted
from kairox_core.markers import MemoryMarker, MemoryScope
from kairox_core.memory.copied import is_copied, split_copied
from kairox_core.prompt import MEMORY_PROTOCOL
from kairox_core.providers.base import Message
from kairox_core.providers.scripted import ScriptedProvider

EXAMPLE = '<memory scope="user" key="work-hours">Works night shifts</memory>'
BULLETS = "Note that I prefer answers in short bullet points."


def marker(body: str, key: str = "k") -> MemoryMarker:
    return MemoryMarker(MemoryScope.USER, key, body)


def test_the_prompt_example_is_a_copy_unless_the_person_said_it() -> None:
    example = marker("Works night shifts", "work-hours")
    assert is_copied(example, BULLETS, MEMORY_PROTOCOL)
    assert not is_copied(example, "Remember that I work night shifts.", MEMORY_PROTOCOL)
    assert is_copied(marker("one fact about the user"), "My name is Dana.", MEMORY_PROTOCOL)


def test_facts_not_in_the_prompt_and_glue_alone_are_kept() -> None:
    assert not is_copied(marker("Prefers short bullet points"), BULLETS, MEMORY_PROTOCOL)
    assert not is_copied(marker("the user"), BULLETS, MEMORY_PROTOCOL)  # one content word
    kept, copied = split_copied(
        [marker("Prefers bullet points"), marker("Works night shifts")], BULLETS, MEMORY_PROTOCOL
    )
    assert [m.body for m in kept] == ["Prefers bullet points"]
    assert [m.body for m in copied] == ["Works night shifts"]


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@given(st.lists(words, min_size=1, max_size=8), st.text(max_size=200))
def test_a_body_in_the_persons_own_words_is_never_a_copy(body: list[str], extra: str) -> None:
    text = " ".join(body)
    system = f"{MEMORY_PROTOCOL}\n{text}"  # even when the prompt holds it too
    assert not is_copied(marker(text), f"{extra} remember {text}.", system)


@given(st.lists(words, min_size=1, max_size=8))
def test_a_body_absent_from_the_prompt_is_never_a_copy(body: list[str]) -> None:
    text = " ".join([*body, "zzqx"])  # "zzqx" is in no prompt
    assert not is_copied(marker(text), "", MEMORY_PROTOCOL)


def engine(tmp_path: Path, answer: str, restated: str | None = None) -> ChatEngine:
    def reply(messages: Sequence[Message]) -> str:
        first = str(messages[0]["content"])
        if "remember or other" in first:
            return "remember"
        if restated is not None and [m["role"] for m in messages] == ["system", "user"]:
            # the restating call: the system prompt and the message, no history
            return restated
        return answer

    return ChatEngine.open(
        parse_config({"memory": {"scope_check": False}}),
        tmp_path / "k.db",
        workspace="w",
        provider=ScriptedProvider(reply),
        request_check=True,
        restate_tags=restated is not None,
    )


async def test_a_copied_tag_is_not_proposed_and_the_person_is_told(
    tmp_path: Path, kairox_home: Path
) -> None:
    chat = engine(tmp_path, f"Noted. {EXAMPLE}")
    try:
        outcome = await chat.run_turn(BULLETS, lambda _: None)
        assert outcome.proposals == [] and [m.key for m in outcome.copied] == ["work-hours"]
        assert any("copied from the system prompt" in n for n in outcome.scope_notes)
        assert outcome.unsaved == UNSAVED_COPIED
        reply = [e for e in chat.history() if isinstance(e, AssistantMessageCompleted)][-1]
        assert reply.dropped_tags == [EXAMPLE]
        assert "copied from the system prompt" in str(reply.dropped_because)
    finally:
        await chat.close()


async def test_a_copied_restatement_leaves_the_replys_own_tag(
    tmp_path: Path, kairox_home: Path
) -> None:
    own = '<memory scope="user" key="answer-style">Prefers short bullet points</memory>'
    chat = engine(tmp_path, f"Noted. {own}", restated=f"Noted. {EXAMPLE}")
    try:
        await chat.run_turn("Remember that the staging server is vega.", lambda _: None)
        outcome = await chat.run_turn(BULLETS, lambda _: None)
        assert [p.body for p in outcome.proposals] == ["Prefers short bullet points"]
        assert not outcome.restated and "copied" in outcome.restate_note
        assert [m.key for m in outcome.copied] == ["work-hours"]
        assert outcome.unsaved == ""
    finally:
        await chat.close()
