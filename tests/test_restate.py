"""Restating (``[memory] restate_tags``): a tagged reply's tags written again by the model
from the person's message alone. Offline, through the scripted provider: the restated
tags are proposed and read back, the written ones recorded as dropped; no tag, an
error or a dropped reply keeps (or skips) it, and says so."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kairox_core.chat.engine import ChatEngine
from kairox_core.config import parse_config
from kairox_core.events import AssistantMessageCompleted
from kairox_core.memory.restate import RESTATED, question
from kairox_core.providers.base import Message
from kairox_core.providers.scripted import ScriptedProvider

FIRST = "Remember that the staging server is called vega."
REQUEST = "Remember that our deploy day is Thursday."
COPIED = '<memory scope="workspace" key="deploy-day">Deploy day</memory>'
WHOLE = '<memory scope="workspace" key="deploy-day">Our deploy day is Thursday.</memory>'


def alone(messages: Sequence[Message]) -> bool:
    """The restating call: the system prompt and the message, nothing else."""
    return [m["role"] for m in messages] == ["system", "user"]


def model(restated: str | Exception = f"Noted. {WHOLE}") -> ScriptedProvider:
    """With history, the body loses the fact; on the message alone, it is whole."""

    def answer(messages: Sequence[Message]) -> str:
        prompt = str(messages[-1]["content"])
        if prompt == FIRST:
            return 'Noted. <memory scope="workspace" key="staging">Staging: vega</memory>'
        if alone(messages) and prompt == REQUEST:
            if isinstance(restated, Exception):
                raise restated
            return restated
        return f"Noted. {COPIED}" if prompt == REQUEST else "Thursday."

    return ScriptedProvider(answer)


def engine(tmp_path: Path, provider: ScriptedProvider) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 256}},
            "memory": {"scope_check": False, "restate_tags": True},
        }
    )
    return ChatEngine.open(
        config, tmp_path / "k.db", workspace="w", provider=provider, restate_tags=True
    )


def test_the_question_is_the_system_prompt_and_the_message() -> None:
    assert question("Be brief.", REQUEST) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": REQUEST},
    ]


async def test_restated_tags_replace_the_written_ones(tmp_path: Path, kairox_home: Path) -> None:
    provider = model()
    chat = ChatEngine.open(
        parse_config({"memory": {"scope_check": False}}),
        tmp_path / "k.db",
        workspace="w",
        provider=provider,
        restate_tags=True,  # asked for: a scripted model is restated only then
    )
    try:
        await chat.run_turn(FIRST, lambda _: None)
        outcome = await chat.run_turn(REQUEST, lambda _: None)
        assert outcome.restated and outcome.text == "Noted."
        [proposal] = outcome.proposals
        assert proposal.body == "Our deploy day is Thursday."
        assert f"memory: {RESTATED}" in outcome.scope_notes
        reply = [e for e in chat.history() if isinstance(e, AssistantMessageCompleted)][-1]
        assert reply.dropped_tags == [COPIED] and reply.dropped_because == RESTATED
        assert reply.model_text == f"Noted. {WHOLE}"  # read back as restated
        # the restating call saw no history: the system prompt and the message only
        assert sum(alone(c) and c[-1]["content"] == REQUEST for c in provider.calls) == 1
        assert chat.session.system_prompt == provider.calls[-1][0]["content"]
    finally:
        await chat.close()


async def test_restating_without_a_tag_or_with_an_error_keeps_the_written_ones(
    tmp_path: Path, kairox_home: Path
) -> None:
    for restated, note in (
        ("Sure.", "restating wrote no memory tag; tags kept as written"),
        (RuntimeError("gone"), "restating failed (RuntimeError: gone)"),
    ):
        chat = engine(tmp_path / type(restated).__name__, model(restated))
        try:
            await chat.run_turn(FIRST, lambda _: None)
            outcome = await chat.run_turn(REQUEST, lambda _: None)
            assert not outcome.restated and [p.body for p in outcome.proposals] == ["Deploy day"]
            assert any(note in n for n in outcome.scope_notes)
            reply = [e for e in chat.history() if isinstance(e, AssistantMessageCompleted)][-1]
            assert reply.dropped_tags is None
        finally:
            await chat.close()


async def test_a_scripted_model_is_not_restated_unless_asked(
    tmp_path: Path, kairox_home: Path
) -> None:
    provider = model()
    chat = ChatEngine.open(
        parse_config({"memory": {"restate_tags": True}}),
        tmp_path / "k.db",
        workspace="w",
        provider=provider,
    )
    try:
        assert not chat.restate_tags
        await chat.run_turn(FIRST, lambda _: None)
        outcome = await chat.run_turn(REQUEST, lambda _: None)
        assert [p.body for p in outcome.proposals] == ["Deploy day"]
        assert not any(alone(c) and c[-1]["content"] == REQUEST for c in provider.calls)
    finally:
        await chat.close()


async def test_tags_the_request_check_dropped_are_not_restated(
    tmp_path: Path, kairox_home: Path
) -> None:
    def answer(messages: Sequence[Message]) -> str:
        if "remember or other" in str(messages[0]["content"]):
            return "other"
        return f"Noted. {COPIED}"

    provider = ScriptedProvider(answer)
    chat = ChatEngine.open(
        parse_config({"memory": {"scope_check": False}}),
        tmp_path / "k.db",
        workspace="w",
        provider=provider,
        request_check=True,
        restate_tags=True,
    )
    try:
        outcome = await chat.run_turn("What day is it?", lambda _: None)
        assert outcome.answered_again and not outcome.restated and outcome.proposals == []
        assert len(provider.calls) == 3  # the reply, the check, the second answer: no more
    finally:
        await chat.close()


def untagged_model(restated: str) -> ScriptedProvider:
    """A request answered with no tag at all (the trial's "short bullet points"); the
    check calls it a request; restating gives ``restated``."""

    def answer(messages: Sequence[Message]) -> str:
        prompt = str(messages[-1]["content"])
        if "remember or other" in str(messages[0]["content"]):
            return "remember" if REQUEST in prompt else "other"
        if prompt == FIRST:
            return 'Noted. <memory scope="workspace" key="staging">Staging: vega</memory>'
        if alone(messages) and prompt == REQUEST:
            return restated
        return "- Scope: user\n- Key: deploy" if prompt == REQUEST else "Thursday."

    return ScriptedProvider(answer)


async def untagged_engine(tmp_path: Path, provider: ScriptedProvider) -> ChatEngine:
    config = parse_config(
        {"memory": {"scope_check": False, "request_check_untagged": True}},
    )
    chat = ChatEngine.open(
        config,
        tmp_path / "k.db",
        workspace="w",
        provider=provider,
        request_check=True,
        restate_tags=True,
    )
    await chat.run_turn(FIRST, lambda _: None)
    return chat


async def test_an_untagged_request_is_restated(tmp_path: Path, kairox_home: Path) -> None:
    chat = await untagged_engine(tmp_path, untagged_model(f"Noted. {WHOLE}"))
    try:
        outcome = await chat.run_turn(REQUEST, lambda _: None)
        assert outcome.restated and [p.body for p in outcome.proposals] == [
            "Our deploy day is Thursday."
        ]
        assert any("wrote no memory tag for a request" in n for n in outcome.scope_notes)
        reply = [e for e in chat.history() if isinstance(e, AssistantMessageCompleted)][-1]
        assert reply.dropped_tags is None and "no memory tag" in str(reply.dropped_because)
        assert outcome.unsaved == ""
        plain = await chat.run_turn("What day do we deploy?", lambda _: None)
        assert plain.request_check is not None and plain.request_check.asked is False
        assert not plain.restated and plain.proposals == [] and plain.unsaved == ""
    finally:
        await chat.close()


async def test_an_untagged_request_with_no_restated_tag_is_flagged(
    tmp_path: Path, kairox_home: Path
) -> None:
    chat = await untagged_engine(tmp_path, untagged_model("Sure."))
    try:
        outcome = await chat.run_turn(REQUEST, lambda _: None)
        assert not outcome.restated and outcome.proposals == []
        assert outcome.unsaved.startswith("Nothing was saved: the message asked to remember")
    finally:
        await chat.close()


async def test_cued_untagged_replies_are_checked_and_others_cost_nothing(
    tmp_path: Path, kairox_home: Path
) -> None:
    """The default, "cued": a message with a request's words is checked (and restated),
    a plain question costs no call, a recall question with "remember" is checked and
    raises nothing."""
    provider = untagged_model(f"Noted. {WHOLE}")
    config = parse_config({"memory": {"scope_check": False}})
    assert config.memory.request_check_untagged == "cued"
    chat = ChatEngine.open(
        config,
        tmp_path / "k.db",
        workspace="w",
        provider=provider,
        request_check=True,
        restate_tags=True,
    )
    try:
        await chat.run_turn(FIRST, lambda _: None)
        outcome = await chat.run_turn(REQUEST, lambda _: None)
        assert outcome.restated and [p.body for p in outcome.proposals] == [
            "Our deploy day is Thursday."
        ]
        before = len(provider.calls)
        plain = await chat.run_turn("What day do we deploy?", lambda _: None)
        assert plain.request_check is None and len(provider.calls) == before + 1
        recall = await chat.run_turn("Do you remember what day we deploy?", lambda _: None)
        assert recall.request_check is not None and recall.request_check.asked is False
        assert recall.proposals == [] and recall.unsaved == "" and not recall.restated
    finally:
        await chat.close()


async def test_untagged_off_checks_no_untagged_reply(tmp_path: Path, kairox_home: Path) -> None:
    provider = untagged_model(f"Noted. {WHOLE}")
    chat = ChatEngine.open(
        parse_config({"memory": {"scope_check": False, "request_check_untagged": "off"}}),
        tmp_path / "k.db",
        workspace="w",
        provider=provider,
        request_check=True,
        restate_tags=True,
    )
    try:
        await chat.run_turn(FIRST, lambda _: None)
        outcome = await chat.run_turn(REQUEST, lambda _: None)
        assert outcome.request_check is None and outcome.proposals == []
    finally:
        await chat.close()
