"""The scope check (``[memory] scope_check``): a history-free question about one fact's
scope, asked before the marker becomes a proposal. Offline, through the scripted
provider: the check never reaches ``session``, an unreadable answer or a failed call
keeps the model's scope and says so, taint is kept, the card shows both scopes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kairox_core import Kairox
from kairox_core.chat.engine import ChatEngine, describe_event
from kairox_core.chat.widgets import MemoryCard
from kairox_core.config import parse_config
from kairox_core.markers import MemoryMarker, MemoryScope
from kairox_core.memory.scope_check import ScopeVerdict, decide, parse_answer, question
from kairox_core.providers.base import Message
from kairox_core.providers.scripted import ScriptedProvider
from kairox_core.web.serialize import proposal_json

PORTO = '<memory scope="workspace" key="home-city">Lives in Porto</memory>Noted.'


def is_check(messages: Sequence[Message]) -> bool:
    return "personal or project" in str(messages[0]["content"])


def model(reply: str, check: str | Exception) -> ScriptedProvider:
    """A scripted model: ``reply`` to the chat, ``check`` to the scope question."""

    def answer(messages: Sequence[Message]) -> str:
        if not is_check(messages):
            return reply
        if isinstance(check, Exception):
            raise check
        return check

    return ScriptedProvider(answer)


def engine(
    tmp_path: Path, provider: ScriptedProvider, *, check: bool | None = True, on: bool = True
) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 256}},
            "memory": {"scope_check": on},
        }
    )
    return ChatEngine.open(
        config, tmp_path / "k.db", workspace="w", provider=provider, scope_check=check
    )


def test_answers_parse_strictly_and_never_to_session() -> None:
    assert parse_answer("personal") is MemoryScope.USER
    assert parse_answer(" Project.\n") is MemoryScope.WORKSPACE
    assert parse_answer("`personal`") is MemoryScope.USER
    for loose in ("session", "user", "workspace", "personal or project", "It is personal.", ""):
        assert parse_answer(loose) is None


@given(st.sampled_from(list(MemoryScope)), st.text(max_size=30))
def test_no_answer_moves_a_memory_into_session(written: MemoryScope, answer: str) -> None:
    verdict = decide(written, answer)
    assert verdict.model_scope is written
    if written is not MemoryScope.SESSION:
        assert verdict.scope is not MemoryScope.SESSION
    if written is MemoryScope.USER:  # never shared into the workspace by a check
        assert verdict.scope is MemoryScope.USER
    if parse_answer(answer) is None:
        assert verdict.scope is written and "unreadable" in verdict.note


def test_a_personal_memory_is_never_moved_into_the_workspace() -> None:
    verdict = decide(MemoryScope.USER, "project")
    assert verdict.scope is MemoryScope.USER and not verdict.agreed
    assert verdict.note.startswith("scope check chose workspace; kept user")
    assert decide(MemoryScope.SESSION, "project").scope is MemoryScope.WORKSPACE


def test_the_question_holds_the_fact_alone() -> None:
    asked = question(MemoryMarker(MemoryScope.WORKSPACE, "home-city", "Lives in Porto"))
    assert asked[-1] == {"role": "user", "content": "Remember: home-city: Lives in Porto"}
    assert "Porto" not in "".join(str(m["content"]) for m in asked[:-1])


async def test_a_moved_proposal_shows_both_scopes(tmp_path: Path, kairox_home: Path) -> None:
    chat = engine(tmp_path, model(PORTO, "personal"))
    try:
        outcome = await chat.run_turn("Please remember that I live in Porto.", lambda _: None)
        [event] = outcome.proposals
        assert (event.scope, event.model_scope) == ("user", "workspace")
        assert event.scope_check == "the model wrote workspace; the scope check chose user"
        assert outcome.scope_notes == ["memory scope: " + event.scope_check]
        assert "the scope check chose user" in describe_event(event)  # the trace line
        card = MemoryCard(event)._render_card().plain
        assert "the model wrote workspace; the scope check chose user" in card
        [record] = outcome.pending
        assert proposal_json(record)["model_scope"] == "workspace"  # the web card's field
        # a person still decides the scope on the card
        stored = chat.kx.approvals.accept(record.id, scope="workspace")
        assert stored.scope is MemoryScope.WORKSPACE
    finally:
        await chat.close()


async def test_a_session_memory_moved_by_the_check_waits_for_a_person(
    tmp_path: Path, kairox_home: Path
) -> None:
    reply = '<memory scope="session">Allergic to peanuts</memory>Noted.'
    chat = engine(tmp_path, model(reply, "personal"))
    try:
        outcome = await chat.run_turn("Keep in mind that I am allergic to peanuts.", print)
        assert not outcome.accepted
        [event] = outcome.proposals
        assert (event.scope, event.model_scope) == ("user", "session")
        assert event.key == "allergic-to-peanuts"  # a user memory needs one: from the text
    finally:
        await chat.close()


async def test_an_answer_of_session_keeps_the_scope_and_says_so(
    tmp_path: Path, kairox_home: Path
) -> None:
    chat = engine(tmp_path, model(PORTO, "session"))
    try:
        outcome = await chat.run_turn("Please remember that I live in Porto.", print)
        [event] = outcome.proposals
        assert event.scope == "workspace" and not outcome.accepted
        assert outcome.scope_notes == [
            "memory scope: scope check answer 'session' unreadable; kept workspace"
        ]
        assert MemoryCard(event)._render_card().plain.count("scope check") == 0
    finally:
        await chat.close()


async def test_a_failed_check_keeps_the_scope_and_is_visible(
    tmp_path: Path, kairox_home: Path
) -> None:
    chat = engine(tmp_path, model(PORTO, RuntimeError("server went away")))
    try:
        outcome = await chat.run_turn("Please remember that I live in Porto.", print)
        [event] = outcome.proposals
        assert event.scope == "workspace"
        note = "scope check failed (RuntimeError: server went away); kept workspace"
        assert event.scope_check == note
        assert outcome.scope_notes == [f"memory scope: {note}"]
        assert note in describe_event(event)
    finally:
        await chat.close()


async def test_the_scripted_provider_is_not_checked_unless_asked(
    tmp_path: Path, kairox_home: Path
) -> None:
    provider = model(PORTO, "personal")
    chat = engine(tmp_path, provider, check=None)  # [memory] scope_check = true
    try:
        assert not chat.scope_check
        outcome = await chat.run_turn("Please remember that I live in Porto.", print)
        [event] = outcome.proposals
        assert (event.scope, event.model_scope, event.scope_check) == ("workspace", None, None)
        assert not any(is_check(call) for call in provider.calls)
        assert proposal_json(outcome.pending[0])["model_scope"] is None
    finally:
        await chat.close()


async def test_a_tainted_proposal_keeps_its_taint(tmp_path: Path, kairox_home: Path) -> None:
    async def check(marker: MemoryMarker) -> ScopeVerdict:
        return decide(marker.scope, "personal")

    kx = Kairox.open(tmp_path / "k.db", config=parse_config({}))
    try:
        session = kx.session(workspace="w")
        turn = await session.begin_turn("What does the page say about me?")
        turn.add_tool_result("c1", "fetch", "{}", "The user lives in Porto.")
        result = await turn.complete(
            '<memory scope="session">The user lives in Porto.</memory>', scope_check=check
        )
        [proposal] = result.proposals
        assert proposal.tainted and proposal.status == "pending"
        assert proposal.scope is MemoryScope.USER and proposal.model_scope == "session"
    finally:
        await kx.aclose()


def test_the_approval_flow_refuses_a_move_into_session(tmp_path: Path, kairox_home: Path) -> None:
    kx = Kairox.open(tmp_path / "k.db", config=parse_config({}))
    try:
        wrong = ScopeVerdict(MemoryScope.USER, MemoryScope.SESSION, "session", "forged")
        marker = MemoryMarker(MemoryScope.SESSION, None, "Lives in Porto")
        with pytest.raises(ValueError, match="never move a memory into session"):
            kx.approvals.route("s1", "w", None, marker, scope_check=wrong)
    finally:
        kx.close()


def test_kairox_memory_pending_shows_the_scope_the_model_wrote(
    tmp_path: Path, kairox_home: Path
) -> None:
    from rich.console import Console

    from kairox_core.cli.memory_cmd import _proposal_table

    kx = Kairox.open(tmp_path / "k.db", config=parse_config({}))
    try:
        marker = MemoryMarker(
            MemoryScope.USER,
            "city",
            "Lives in Porto",
            '<memory scope="workspace" key="city">Lives in Porto</memory>',
        )
        verdict = decide(MemoryScope.WORKSPACE, "personal")
        kx.approvals.route("s1", "w", None, marker, scope_check=verdict)
        console = Console(width=200, record=True)
        console.print(_proposal_table(kx.approvals.pending()))
        assert "(model: workspace)" in console.export_text()
    finally:
        kx.close()


async def test_plain_mode_says_what_the_check_did(tmp_path: Path, kairox_home: Path) -> None:
    import io

    from kairox_core.chat.plain import PlainChat

    chat = engine(tmp_path, model(PORTO, RuntimeError("server went away")))
    err = io.StringIO()
    plain = PlainChat(chat, io.StringIO("I live in Porto\n"), io.StringIO(), err)
    assert await plain.run() == 0
    log = err.getvalue()
    assert "memory scope: scope check failed (RuntimeError: server went away)" in log
    assert "[workspace:home-city]" in log
    await chat.close()
