"""Proposals waiting for a person in the TUI: their cards come back on resume, and the
Memory view lists every pending proposal with the cards' keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, TabbedContent

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.widgets import ChatMessage, MemoryCard
from kairox_core.config import parse_config
from kairox_core.providers.scripted import ScriptedProvider

SEAT = 'Noted. <memory scope="user" key="seat">Prefers window seats</memory>'
TEA = 'Noted. <memory scope="user" key="tea">Drinks green tea</memory>'


def engine_for(tmp_path: Path, replies: list[str], session_id: str | None = None) -> ChatEngine:
    config = parse_config({"retrieval": {"workspace_index": False}})
    return ChatEngine.open(
        config, tmp_path / "k.db", provider=ScriptedProvider(replies), session_id=session_id
    )


async def two_proposals(tmp_path: Path) -> str:
    """A session that ended with two undecided proposals; its id."""
    engine = engine_for(tmp_path, [SEAT, TEA])
    await engine.run_turn("I like window seats", lambda _: None)
    await engine.run_turn("and green tea", lambda _: None)
    assert len(engine.kx.approvals.pending()) == 2
    await engine.close()
    return engine.session_id


def waiting(app: ChatApp) -> list[str]:
    return [m.text for m in app.query(ChatMessage) if "for your decision" in m.text]


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_a_resumed_session_shows_its_undecided_cards(
    tmp_path: Path, kairox_home: Path
) -> None:
    resumed = engine_for(tmp_path, ["x"], session_id=await two_proposals(tmp_path))
    app = ChatApp(resumed)
    async with app.run_test(size=(120, 50)) as pilot:
        await pilot.pause()
        cards = list(app.query(MemoryCard))
        assert [c.proposal.key for c in cards] == ["seat", "tea"]
        children = list(app.chat.children)
        answers = [m for m in app.query(ChatMessage) if m.role == "assistant"]
        assert children.index(answers[0]) < children.index(cards[0]) < children.index(answers[1])
        assert waiting(app) and waiting(app)[0].startswith("2 memories wait")
        await pilot.press("ctrl+n", "a")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert waiting(app) == []
    assert resumed.kx.memories.get("user", "seat").body == "Prefers window seats"
    assert resumed.kx.memories.get("user", "tea") is None
    assert resumed.kx.approvals.pending() == []
    await resumed.close()


async def open_memories_tab(app: ChatApp, pilot: Pilot[str]) -> None:
    """The Memory view (ctrl+y), loaded, on its Memories tab."""
    await pilot.press("ctrl+y")
    await app.workers.wait_for_complete()
    await pilot.pause()
    app.screen.query_one(TabbedContent).active = "memories"
    await pilot.pause()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_memory_view_lists_and_decides_pending_proposals(
    tmp_path: Path, kairox_home: Path
) -> None:
    resumed = engine_for(tmp_path, ["x"], session_id=await two_proposals(tmp_path))
    app = ChatApp(resumed)
    async with app.run_test(size=(120, 50)) as pilot:
        await open_memories_tab(app, pilot)
        table = app.screen.query_one("#pending-table", DataTable)
        assert [table.get_row_at(i)[1] for i in range(table.row_count)] == ["seat", "tea"]
        assert "Waiting for your decision (2)" in str(
            app.screen.query_one("#pending-help").render()
        )
        table.focus()
        await pilot.press("down", "r")  # rejects tea, the row under the cursor
        await pilot.pause()
        assert [table.get_row_at(i)[1] for i in range(table.row_count)] == ["seat"]
        await pilot.press("a")
        await pilot.pause()
        assert table.row_count == 0
        memories = app.screen.query_one("#memory-table", DataTable)
        assert any(memories.get_row_at(i)[1] == "seat" for i in range(memories.row_count))
        await pilot.press("escape")
        await pilot.pause()
        assert all(c.decided for c in app.query(MemoryCard))  # the chat's cards follow
        assert waiting(app) == []
    assert resumed.kx.memories.get("user", "seat") is not None
    assert resumed.kx.memories.get("user", "tea") is None
    await resumed.close()


def drawn_rows(app: ChatApp, table: DataTable[object]) -> int:
    """How many of the table's rows are on screen: inside its parent and not covered by
    the next widget (trial s6: the pending pane was one line high, its rows hidden)."""
    visible = table.region.intersection(table.parent.region)  # type: ignore[union-attr]
    below = [w.region.y for w in app.screen.query(DataTable) if w.region.y > table.region.y]
    bottom = min([visible.bottom, *below])
    return max(0, bottom - visible.y - 1)  # less the header line


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_the_memories_tab_draws_the_pending_and_the_approved_rows(
    tmp_path: Path, kairox_home: Path
) -> None:
    resumed = engine_for(tmp_path, ["x"], session_id=await two_proposals(tmp_path))
    app = ChatApp(resumed)
    async with app.run_test(size=(180, 55)) as pilot:
        await open_memories_tab(app, pilot)
        pending = app.screen.query_one("#pending-table", DataTable)
        memories = app.screen.query_one("#memory-table", DataTable)
        assert (pending.row_count, memories.row_count) == (2, 0)
        assert drawn_rows(app, pending) == 2
        pending.focus()
        await pilot.press("a")  # approves seat
        await pilot.pause()
        assert (pending.row_count, memories.row_count) == (1, 1)
        assert drawn_rows(app, pending) == 1
        assert drawn_rows(app, memories) >= 1
        assert memories.region.y > pending.region.y
    await resumed.close()
