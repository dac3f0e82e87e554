"""[Summary] cards in the chat itself (Textual pilot): a compacted range is one collapsed
card in place of its messages, opens to the summary and the originals, is edited and
mined for lines right there, and a resumed session draws the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, TextArea

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.stream_summary import ChatSummaryCard
from kairox_core.chat.widgets import ChatMessage
from kairox_core.config import parse_config
from kairox_core.events import FactPinned
from kairox_core.providers.scripted import ScriptedProvider

REPLIES = ["Alice booked room 101 on 3 May.", "Lunch is at noon in the atrium.", "You're welcome."]


def engine_for(tmp_path: Path, session_id: str | None = None) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 512}},
            "compaction": {
                "keep_recent_exchanges": 1,
                "provider": "summariser",
                "strategy": "model",
            },
            "retrieval": {"workspace_index": False},
            "providers": {
                "summariser": {"kind": "scripted", "replies": ["Room 101, 3 May.\nLunch at noon."]}
            },
        }
    )
    return ChatEngine.open(
        config, tmp_path / "k.db", provider=ScriptedProvider(REPLIES), session_id=session_id
    )


def said(app: ChatApp) -> list[str]:
    return [m.text for m in app.query(ChatMessage) if m.role in ("user", "assistant")]


def card_text(card: ChatSummaryCard) -> str:
    return card.render_card().plain


async def settle(app: ChatApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_compact_in_the_chat_then_open_edit_keep_and_resume(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path)
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        for prompt in ("book a room for Alice", "and where is lunch?", "thanks"):
            app.query_one("#prompt", Input).value = prompt
            await pilot.press("enter")
            await settle(app, pilot)
        assert "book a room for Alice" in said(app)
        app.query_one("#prompt", Input).value = "/compact"
        await pilot.press("enter")
        await settle(app, pilot)
        (card,) = app.query(ChatSummaryCard)
        shown = said(app)
        assert "book a room for Alice" not in shown and "and where is lunch?" not in shown
        assert shown == ["thanks", "You're welcome."]  # the recent exchange stays
        head = card_text(card)
        assert head.startswith(f"[Summary] seqs {card.summary.first_seq}-{card.summary.last_seq}")
        assert "4 messages · compacted " in head and "Room 101" not in head  # collapsed
        card.focus()
        await pilot.press("enter")
        await pilot.pause()
        opened = card_text(card)
        assert "0: Room 101, 3 May." in opened and "1: Lunch at noon." in opened
        assert "user: book a room for Alice" in opened  # the originals
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one(TextArea).text = "Room 101 for Alice, 3 May.\nLunch at noon."
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        (card,) = app.query(ChatSummaryCard)
        assert card.expanded and "0: Room 101 for Alice, 3 May." in card_text(card)
        assert app.focused is card
        for key, number in (("l", "0"), ("p", "1")):
            await pilot.press(key)
            await pilot.pause()
            app.screen.query_one(TextArea).text = number
            await pilot.press("ctrl+s")
            await settle(app, pilot)
            app.query_one(ChatSummaryCard).focus()
        await pilot.press("x")
        await pilot.pause()
        app.screen.query_one(TextArea).text = "1"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert "Lunch at noon." not in card_text(app.query_one(ChatSummaryCard))
    (chunk,) = engine.kx.longterm.list()
    assert (chunk.text, chunk.scope) == ("Room 101 for Alice, 3 May.", "session")
    pins = [e for e in engine.kx.events(engine.session_id) if isinstance(e, FactPinned)]
    assert [p.text for p in pins] == ["Lunch at noon."]
    await engine.close()

    resumed = engine_for(tmp_path, session_id=engine.session_id)
    app = ChatApp(resumed)
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause()
        (card,) = app.query(ChatSummaryCard)
        assert said(app) == ["thanks", "You're welcome."]
        assert "4 messages" in card_text(card) and not card.expanded
        card.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "0: Room 101 for Alice, 3 May." in card_text(card)
    await resumed.close()
