"""The request check (``[memory] request_check``): when a reply carries memory tags, a
history-free question whether the person's message asked to remember anything. Offline,
through the scripted provider: "other" drops the tags (never proposed, recorded on the
reply's event) and the turn is answered again with the memory tags left out of its
history; "remember" keeps them; an unreadable answer or a failed call keeps them and
says so."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from kairox_core.chat.engine import ANSWERED_AGAIN, ChatEngine
from kairox_core.config import parse_config
from kairox_core.events import AssistantMessageCompleted
from kairox_core.memory.request_check import decide, parse_answer, question
from kairox_core.providers.base import Message
from kairox_core.providers.scripted import ScriptedProvider

REQUEST = "Please remember that I live in Porto."
QUESTION = "What is the capital of Australia?"
PORTO = 'Noted. <memory scope="user" key="home-city">Lives in Porto</memory>'
FALSE = 'Noted. <memory scope="user" key="capital">The capital is Canberra</memory>'


def is_check(messages: Sequence[Message]) -> bool:
    return "remember or other" in str(messages[0]["content"])


def history_has_tags(messages: Sequence[Message]) -> bool:
    return any(m["role"] == "assistant" and "<memory" in str(m.get("content")) for m in messages)


def model(check: str | Exception = "other") -> ScriptedProvider:
    """The trial's failure, scripted: with a tagged reply in its history the model
    answers a question with "Noted." and a tag; without, it answers. The check answers
    ``check`` to any message but the request, which it calls "remember"."""

    def answer(messages: Sequence[Message]) -> str:
        if is_check(messages):
            if isinstance(check, Exception):
                raise check
            return "remember" if REQUEST in str(messages[-1]["content"]) else check
        prompt = str(messages[-1]["content"])
        if prompt == REQUEST:
            return PORTO
        return FALSE if history_has_tags(messages) else "Canberra."

    return ScriptedProvider(answer)


def engine(tmp_path: Path, provider: ScriptedProvider, *, check: bool | None = True) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 256}},
            "memory": {"request_check": True, "scope_check": False},
        }
    )
    return ChatEngine.open(
        config, tmp_path / "k.db", workspace="w", provider=provider, request_check=check
    )


def test_answers_parse_strictly() -> None:
    assert parse_answer(" Remember.") is True
    assert parse_answer("`other`") is False
    assert parse_answer("question") is False and parse_answer("Task") is False
    for unreadable in ("yes", "remember it", "synonym", ""):
        assert parse_answer(unreadable) is None
    assert decide("other").drops and not decide("remember").drops
    kept = decide("thank")
    assert kept.asked is None and not kept.drops and "unreadable; tags kept" in kept.note
    failed = decide(None, "TimeoutError")
    assert failed.asked is None and failed.note == "request check failed (TimeoutError); tags kept"


def test_the_question_holds_the_message_alone() -> None:
    messages = question(f"  {QUESTION}\n")
    assert messages[0]["role"] == "system"
    assert f'Message: "{QUESTION}"' in str(messages[-1]["content"])
    # the worked examples come from neither benchmark conversation
    said = " ".join(str(m["content"]) for m in messages[1:-1])
    assert "Porto" not in said and "Australia" not in said


async def test_a_false_tag_is_dropped_and_the_turn_answered_again(
    tmp_path: Path, kairox_home: Path
) -> None:
    provider = model()
    chat = engine(tmp_path, provider)
    seen: list[str] = []
    try:
        first = await chat.run_turn(REQUEST, seen.append)
        assert [p.key for p in first.proposals] == ["home-city"]  # "remember": kept
        assert first.request_check is not None and first.request_check.asked is True
        assert not first.answered_again and not first.dropped and first.scope_notes == []
        seen.clear()
        outcome = await chat.run_turn(QUESTION, seen.append)
        assert outcome.answered_again and outcome.text == "Canberra."
        assert outcome.proposals == [] and outcome.accepted == [] and outcome.pending == []
        assert [m.key for m in outcome.dropped] == ["capital"]
        assert "".join(seen) == f"Noted.{ANSWERED_AGAIN}Canberra."  # shown as it happened
        assert any("tags were dropped (1)" in n for n in outcome.scope_notes)
        assert outcome.unsaved == ""  # "Canberra." claims nothing
        # the second answer read its history without the tags; the first with them
        answers = [c for c in provider.calls if not is_check(c) and c[-1]["content"] == QUESTION]
        assert [history_has_tags(c) for c in answers] == [True, False]
        assert outcome.trace is not None
        assert any("request check" in n for n in outcome.trace.layer("history").notes)
        # recorded, never silently: the reply's event names the dropped tag and why
        reply = [e for e in chat.history() if isinstance(e, AssistantMessageCompleted)][-1]
        assert reply.text == "Canberra." and reply.model_text is None
        assert reply.dropped_tags == [FALSE.removeprefix("Noted. ")]
        assert reply.dropped_because == "request check: not a request to remember"
        assert chat.kx.approvals.pending()[0].key == "home-city"  # only the real one waits
        # the next turn reads the first reply's tag again, never the dropped one
        await chat.run_turn("Thanks.", lambda _: None)
        last = [c for c in provider.calls if not is_check(c)][-2]
        assert "home-city" in str(last) and 'key="capital"' not in str(last)
    finally:
        await chat.close()


async def test_a_false_tag_in_the_second_answer_is_dropped_too(
    tmp_path: Path, kairox_home: Path
) -> None:
    def answer(messages: Sequence[Message]) -> str:
        if is_check(messages):
            return "other"
        return FALSE  # tags whatever it reads

    provider = ScriptedProvider(answer)
    chat = engine(tmp_path, provider)
    try:
        outcome = await chat.run_turn(QUESTION, lambda _: None)
        assert outcome.answered_again and outcome.proposals == []
        assert len(outcome.dropped) == 2 and outcome.text == "Noted."
        assert outcome.unsaved  # "Noted." and nothing saved: the person is told
        assert sum(is_check(c) for c in provider.calls) == 1  # asked once per turn
    finally:
        await chat.close()


@pytest.mark.parametrize(
    ("check", "note"),
    [
        ("thank", "request check answer 'thank' unreadable; tags kept"),
        (RuntimeError("server went away"), "request check failed (RuntimeError: server went away)"),
    ],
)
async def test_an_unreadable_or_failed_check_keeps_the_tags_and_says_so(
    tmp_path: Path, kairox_home: Path, check: str | Exception, note: str
) -> None:
    chat = engine(tmp_path, model(check))
    try:
        await chat.run_turn(REQUEST, lambda _: None)
        outcome = await chat.run_turn(QUESTION, lambda _: None)
        assert not outcome.answered_again and [p.key for p in outcome.proposals] == ["capital"]
        assert any(note in n for n in outcome.scope_notes)
    finally:
        await chat.close()


async def test_untagged_replies_and_a_scripted_model_ask_nothing(
    tmp_path: Path, kairox_home: Path
) -> None:
    provider = model()
    chat = engine(tmp_path, provider)
    try:
        outcome = await chat.run_turn(QUESTION, lambda _: None)  # no tag: nothing to check
        assert outcome.request_check is None and outcome.text == "Canberra."
    finally:
        await chat.close()
    provider = model()
    chat = engine(tmp_path, provider, check=None)  # the setting: never the scripted model
    try:
        assert not chat.request_check
        await chat.run_turn(REQUEST, lambda _: None)
        outcome = await chat.run_turn(QUESTION, lambda _: None)
        assert [p.key for p in outcome.proposals] == ["capital"]
        assert not any(is_check(c) for c in provider.calls)
    finally:
        await chat.close()


SAVE = "Save this: the production database is named orders_prod."
DB = 'Noted. <memory scope="workspace" key="prod-db">Production database: orders_prod</memory>'


def says_other(reply: str) -> ScriptedProvider:
    """The trial's two lost requests, scripted: the check calls every message "other"."""

    def answer(messages: Sequence[Message]) -> str:
        if is_check(messages):
            return "other"
        return reply if history_has_tags(messages) or "?" not in str(messages[-1]) else "No."

    return ScriptedProvider(answer)


async def test_a_request_in_words_keeps_its_tags_whatever_the_check_says(
    tmp_path: Path, kairox_home: Path
) -> None:
    chat = engine(tmp_path, says_other(DB))
    try:
        outcome = await chat.run_turn(SAVE, lambda _: None)
        assert [p.key for p in outcome.proposals] == ["prod-db"] and not outcome.answered_again
        assert outcome.request_check is not None and outcome.request_check.asked is True
        assert any("asks to remember in so many words" in n for n in outcome.scope_notes)
        # a question with the same words is the check's to judge: dropped
        asked = await chat.run_turn("Do you remember the database's name?", lambda _: None)
        assert asked.answered_again and asked.proposals == []
    finally:
        await chat.close()


async def test_a_claim_after_dropped_tags_names_the_check(
    tmp_path: Path, kairox_home: Path
) -> None:
    chat = engine(tmp_path, says_other(DB))
    try:
        outcome = await chat.run_turn("Hi! I'm Dana, the DBA here.", lambda _: None)
        assert outcome.answered_again and outcome.proposals == []
        assert outcome.unsaved.startswith("Nothing was saved: the model's memory tag was left")
        assert "request check" in outcome.unsaved
    finally:
        await chat.close()
