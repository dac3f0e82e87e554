"""The chat's keys: a memory card acts only when it has focus, typing goes to the input,
/help lists the keys, and quitting tells how to resume the session."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from kairox_core.chat.app import KEYS_HELP, ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.widgets import ChatMessage, MemoryCard
from kairox_core.config import parse_config
from kairox_core.providers.scripted import ScriptedProvider

MARKED = 'Noted. <memory scope="user" key="seat">Prefers window seats</memory>'


def engine_for(tmp_path: Path, replies: list[str]) -> ChatEngine:
    config = parse_config({"profiles": {"default": {"context_window": 4096, "reserve": 512}}})
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(replies))


async def submit(app: ChatApp, pilot: object, text: str) -> None:
    prompt = app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")  # type: ignore[attr-defined]
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_typing_while_a_card_is_pending_goes_to_the_input(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [MARKED])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "I like window seats")
        (card,) = app.query(MemoryCard)
        prompt = app.query_one("#prompt", Input)
        assert app.focused is prompt  # the card does not take the keyboard
        await pilot.press(*"are you ready")
        await pilot.pause()
        assert prompt.value == "are you ready"
        assert not card.decided
        assert engine.kx.memories.get("user", "seat") is None
        assert [p.key for p in engine.kx.approvals.pending()] == ["seat"]
        notes = [m.text for m in app.query(ChatMessage) if m.role == "note"]
        assert any("ctrl+n" in n for n in notes)  # the chat says how to reach the card
    await engine.close()


@pytest.mark.slow
async def test_ctrl_n_selects_the_card_and_its_keys_then_act(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [MARKED])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "I like window seats")
        (card,) = app.query(MemoryCard)
        assert "ctrl+n selects this card" in str(card.content)
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert app.focused is card
        assert "escape back to your message" in str(card.content)
        await pilot.press("escape")  # back to the message, nothing decided
        await pilot.pause()
        assert app.focused is app.query_one("#prompt", Input) and not card.decided
        assert "ctrl+n selects this card" in str(card.content)
        await pilot.press("ctrl+n", "a")
        await pilot.pause()
        assert card.decided
        stored = engine.kx.memories.get("user", "seat")
        assert stored is not None and stored.body == "Prefers window seats"
        assert app.focused is app.query_one("#prompt", Input)  # none pending: back to typing
    await engine.close()


@pytest.mark.slow
async def test_a_letter_that_is_not_a_card_key_moves_to_the_input(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [MARKED])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "I like window seats")
        (card,) = app.query(MemoryCard)
        await pilot.press("ctrl+n", "h", "i")
        await pilot.pause()
        prompt = app.query_one("#prompt", Input)
        assert app.focused is prompt and prompt.value == "hi"
        assert not card.decided
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_ctrl_n_without_a_pending_card_says_so(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, ["plain answer"])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "hello")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert app.focused is app.query_one("#prompt", Input)
        notes = [m.text for m in app.query(ChatMessage) if m.role == "note"]
        assert "no memory card is waiting for a decision" in notes[-1]
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_help_lists_every_key(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, ["x"])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "/help")
        shown = [m.text for m in app.query(ChatMessage)][-1]
        assert "/remember" in shown and KEYS_HELP in shown
        for binding in [*ChatApp.BINDINGS, *MemoryCard.BINDINGS]:
            key = getattr(binding, "key", None)
            assert key is not None and key in KEYS_HELP, key
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_quitting_returns_the_resume_command(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, ["x"])
    app = ChatApp(engine, resume_args=("--db", "/data/k.db"))
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
    sid = engine.session_id
    assert app.return_value == (
        f"session {sid}; resume it with: kairox --db /data/k.db chat --session {sid}"
    )
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_waiting_note_goes_once_the_card_is_decided(
    tmp_path: Path, kairox_home: Path
) -> None:
    aisle = 'Sure. <memory scope="user" key="aisle">Likes aisle seats too</memory>'
    engine = engine_for(tmp_path, [MARKED, aisle])
    app = ChatApp(engine)

    def waiting() -> list[str]:
        return [m.text for m in app.query(ChatMessage) if "for your decision" in m.text]

    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "I like window seats")
        await submit(app, pilot, "and aisle seats too")
        assert waiting() == [
            "2 memories wait for your decision: ctrl+n selects a card, then a / r / e"
        ]
        await pilot.press("ctrl+n", "a")
        await pilot.pause()
        assert waiting() == [
            "a memory waits for your decision: ctrl+n selects a card, then a / r / e"
        ]
        await pilot.press("r")  # the next card has the focus
        await pilot.pause()
        assert waiting() == []
        assert all(c.decided for c in app.query(MemoryCard))
    await engine.close()


def test_a_keyless_session_memory_is_described_without_none() -> None:
    from kairox_core.chat.engine import describe_event
    from kairox_core.events import MemoryAccepted

    event = MemoryAccepted(
        session_id="s", proposal_id="p", memory_id="m", scope="session", key=None, body="x"
    )
    assert describe_event(event) == "MemoryAccepted session"
    keyed = MemoryAccepted(
        session_id="s", proposal_id="p", memory_id="m", scope="user", key="seat", body="x"
    )
    assert describe_event(keyed) == "MemoryAccepted user:seat"


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_cards_edit_changes_scope_and_key_too(tmp_path: Path, kairox_home: Path) -> None:
    from textual.widgets import Select, TextArea

    from kairox_core.chat.widgets import ProposalEditScreen

    engine = engine_for(
        tmp_path, ['Noted. <memory scope="workspace" key="seat">Prefers window seats</memory>']
    )
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await submit(app, pilot, "I like window seats")
        (card,) = app.query(MemoryCard)
        await pilot.press("ctrl+n", "e")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProposalEditScreen)
        screen.query_one("#edit-scope", Select).value = "user"
        key = screen.query_one("#edit-key", Input)
        key.value = "travel-seat"
        assert screen.query_one("#edit-text", TextArea).text == "Prefers window seats"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert card.decided
        stored = engine.kx.memories.get("user", "travel-seat")
        assert stored is not None and stored.body == "Prefers window seats"
        assert engine.kx.memories.get("workspace", "seat", workspace_id="default") is None
        assert "[user] travel-seat" in str(card.content) and "(edited)" in str(card.content)
    await engine.close()
