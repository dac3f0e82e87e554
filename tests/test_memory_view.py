"""The Memory view (Textual pilot): each layer's text, ``[Summary]`` cards that expand
to the original messages and collapse back, actions on the focused card, usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static, TabbedContent, TextArea

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.summary_card import SummaryCard
from kairox_core.config import parse_config
from kairox_core.events import CompactionSummary, SummaryEdited
from kairox_core.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.slow

REPLIES = ["Alice booked room 101 on 3 May.", "Lunch is at noon in the atrium.", "You're welcome."]


def engine_for(tmp_path: Path, **compaction: Any) -> ChatEngine:
    config = parse_config(
        {
            "profiles": {"default": {"context_window": 4096, "reserve": 512}},
            "compaction": {"keep_recent_exchanges": 1, **compaction},
            "retrieval": {"workspace_index": False},
            "providers": {"summariser": {"kind": "scripted", "replies": ["Room 101, 3 May."]}},
        }
    )
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(REPLIES))


async def three_turns(engine: ChatEngine) -> None:
    for prompt in ("book a room for Alice", "and where is lunch?", "thanks"):
        await engine.run_turn(prompt, lambda _: None)


def blocks(app: ChatApp) -> list[str]:
    """The plain text of each widget of the Layers tab."""
    out = []
    for widget in app.screen.query("#layers-body > *"):
        rendered = widget.render()
        out.append(getattr(rendered, "plain", str(rendered)))
    return out


def shown(app: ChatApp) -> str:
    return "\n".join(blocks(app))


async def open_view(app: ChatApp, pilot: Any) -> None:
    await pilot.press("ctrl+y")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def settle(app: ChatApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_layers_show_the_text_the_model_is_sent(kairox_home: Path, tmp_path: Path) -> None:
    engine = engine_for(tmp_path)
    await three_turns(engine)
    e = engine
    e.kx.approvals.remember(
        "user", "diet", "Vegetarian, no onions", workspace_id=e.workspace, session_id=e.session_id
    )
    e.kx.packs.create("house-rules", text="Always answer in English.")
    e.kx.packs.activate("house-rules")
    await e.session.pin_fact("The budget is 400 EUR.")
    await e.session.compact()
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        text = shown(app)
        for needle in (
            "helpful assistant with durable memory",  # the system prompt, verbatim
            "Always answer in English.",  # the active pack
            "Vegetarian, no onions",  # an approved memory
            "The budget is 400 EUR.",  # the pinned fact
            "[Summary] seqs 2-7",  # the summary card
            "user: thanks",  # history the summary does not replace
            "assistant: You're welcome.",
            "spent in this session:",  # the usage line
        ):
            assert needle in text, needle
        # history no longer holds what the summary replaced: only the card (collapsed) does
        history = next(b for b in blocks(app) if b.startswith("history"))
        assert "where is lunch" not in history
    await engine.close()


async def test_a_summary_card_expands_to_its_originals_and_collapses(
    kairox_home: Path, tmp_path: Path
) -> None:
    engine = engine_for(tmp_path)
    await three_turns(engine)
    await engine.session.compact()
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        (card,) = app.screen.query(SummaryCard)
        assert not card.expanded and "original messages it replaced" not in shown(app)
        await pilot.press("o")  # the latest card (none has focus yet)
        await pilot.pause()
        assert card.expanded and app.focused is card
        text = shown(app)
        assert "4 original messages it replaced" in text
        assert "seq 5 user: and where is lunch?" in text
        assert "seq 7 assistant: Lunch is at noon in the atrium." in text
        await pilot.press("r")  # a refresh keeps the card open
        await settle(app, pilot)
        (card,) = app.screen.query(SummaryCard)
        assert card.expanded and "seq 5 user:" in shown(app)
        card.focus()
        await pilot.press("enter")  # enter on the card closes it
        await pilot.pause()
        assert not card.expanded and "seq 5 user:" not in shown(app)
    await engine.close()


async def test_actions_act_on_the_focused_card(kairox_home: Path, tmp_path: Path) -> None:
    engine = engine_for(tmp_path)
    await three_turns(engine)
    sid = engine.session_id
    for i, (first, last) in enumerate(((2, 4), (5, 7))):
        engine.kx.events_store.append(
            CompactionSummary(
                session_id=sid,
                compaction_id=f"c{i}",
                summary=f"summary {i}",
                first_seq=first,
                last_seq=last,
                strategy="test",
            )
        )
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        cards = list(app.screen.query(SummaryCard))
        assert [c.summary.text for c in cards] == ["summary 0", "summary 1"]
        cards[0].focus()  # the older one, not the latest
        await pilot.press("enter")
        await pilot.pause()
        assert "seq 2 user: book a room for Alice" in shown(app)
        assert "seq 5 user:" not in shown(app)  # only its own range
        await pilot.press("s")
        await pilot.pause()
        assert app.screen.query_one(TextArea).text == "summary 0"
        app.screen.query_one(TextArea).text = "Alice has room 101."
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert "Alice has room 101." in shown(app)
        cards = list(app.screen.query(SummaryCard))
        assert app.focused is cards[0] and cards[0].expanded  # focus and state survive
    edits = [e for e in engine.kx.events(sid) if isinstance(e, SummaryEdited)]
    assert [(e.summary_seq, e.text) for e in edits] == [
        (cards[0].summary.seq, "Alice has room 101.")
    ]
    await engine.close()


async def test_usage_tab_counts_model_compaction(kairox_home: Path, tmp_path: Path) -> None:
    engine = engine_for(tmp_path, strategy="model", provider="summariser")
    await three_turns(engine)
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        assert "compaction 0 in 0 runs" in shown(app)
        await pilot.press("c")  # compact now, from the view
        await settle(app, pilot)
        assert "[Summary] seqs 2-7" in shown(app) and "Room 101, 3 May." in shown(app)
        assert "compaction ~" in shown(app)  # model spend, counted by the scripted provider
        app.screen.query_one(TabbedContent).active = "usage"
        await pilot.pause()
        from rich.console import Console

        console = Console(width=120, record=True)
        console.print(app.screen.query_one("#usage-body", Static).content)
        usage_text = console.export_text()
        assert "3 turns" in usage_text and "1 compactions" in usage_text
        assert "compaction runs" in usage_text and "model" in usage_text and "2-7" in usage_text
        assert "~ estimated" in usage_text
    await engine.close()


async def test_compact_a_range_from_the_view(kairox_home: Path, tmp_path: Path) -> None:
    engine = engine_for(tmp_path, keep_recent_exchanges=0)
    await three_turns(engine)
    app = ChatApp(engine)

    async def compact_range(pilot: Any, text: str) -> None:
        await pilot.press("C")
        await pilot.pause()
        app.screen.query_one(TextArea).text = text
        await pilot.press("ctrl+s")
        await settle(app, pilot)

    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        await compact_range(pilot, "7:2")  # not a range: nothing is compacted
        assert not engine.session.refresh_compaction().summaries
        await compact_range(pilot, "5:7")
        (summary,) = engine.session.refresh_compaction().summaries
        assert (summary.first_seq, summary.last_seq) == (5, 7)
        assert "[Summary] seqs 5-7" in shown(app)
        history = next(b for b in blocks(app) if b.startswith("history"))
        assert "book a room for Alice" in history and "where is lunch" not in history
    await engine.close()


async def test_a_context_that_cannot_fit_is_shown_not_a_crash(
    kairox_home: Path, tmp_path: Path
) -> None:
    engine = engine_for(tmp_path)
    await three_turns(engine)
    await engine.session.pin_fact("budget " * 4000)  # the mandatory parts no longer fit
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        text = shown(app)
        assert "the next turn would be refused" in text and "pinned facts" in text
        assert app.screen.query_one("#usage-body", Static).content  # usage still shown
    await engine.close()


async def test_pin_a_line_of_the_focused_summary(kairox_home: Path, tmp_path: Path) -> None:
    from kairox_core.events import FactPinned

    engine = engine_for(tmp_path)
    await three_turns(engine)
    engine.kx.events_store.append(
        CompactionSummary(
            session_id=engine.session_id,
            compaction_id="c1",
            summary="Alice booked room 101.\nLunch is at noon.",
            first_seq=2,
            last_seq=7,
            strategy="test",
        )
    )
    app = ChatApp(engine)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_view(app, pilot)
        card = app.screen.query_one(SummaryCard)
        card.focus()
        for typed in ("1", "Bring a projector."):  # 1: as `kairox summary show` numbers
            await pilot.press("p")
            await pilot.pause()
            app.screen.query_one(TextArea).text = typed
            await pilot.press("ctrl+s")
            await settle(app, pilot)
            app.screen.query_one(SummaryCard).focus()
        assert "Lunch is at noon." in next(b for b in blocks(app) if b.startswith("pinned"))
    pins = [e for e in engine.kx.events(engine.session_id) if isinstance(e, FactPinned)]
    assert [(p.text, p.source_seq) for p in pins] == [
        ("Lunch is at noon.", card.summary.seq),
        ("Bring a projector.", None),
    ]
    await engine.close()
