"""The Memory view's Long-term tab: select chunks, promote them to a draft pack."""

from __future__ import annotations

from pathlib import Path

import pytest

from kairox_core.chat.longterm_tab import LongTermPane

pytestmark = pytest.mark.slow


async def test_multi_select_then_promote_to_a_draft_pack(kairox_home: Path, tmp_path: Path) -> None:
    from textual.widgets import DataTable, TabbedContent

    from kairox_core.chat.app import ChatApp
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.config import parse_config
    from kairox_core.providers.scripted import ScriptedProvider

    config = parse_config({"retrieval": {"workspace_index": False}})
    engine = ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(["ok"]))
    kx = engine.kx
    texts = ["We deploy on Fridays.", "Ada reviews the API.", "Docs live in docs/."]
    for text in texts:
        kx.longterm.add(text, scope="project", workspace_id=engine.workspace)
    kx.longterm.add("elsewhere", scope="project", workspace_id="other")
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+y")
        await pilot.pause()
        app.screen.query_one(TabbedContent).active = "longterm"
        await pilot.pause()
        table = app.screen.query_one("#longterm-table", DataTable)
        assert table.row_count == 3  # never another workspace's
        table.focus()
        await pilot.press("space", "down", "down", "space")
        await pilot.pause()
        assert len(app.screen.query_one(LongTermPane).selected) == 2
        await pilot.press("m")
        await pilot.pause()
    (pack,) = kx.packs.list()
    assert pack.draft and pack.level == "personal"
    assert pack.text == f"{texts[0]}\n{texts[2]}"
    await engine.close()


async def test_a_summary_line_kept_long_term_from_the_memory_view(
    kairox_home: Path, tmp_path: Path
) -> None:
    from textual.widgets import TextArea

    from kairox_core.chat.app import ChatApp
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.config import parse_config
    from kairox_core.events import CompactionSummary
    from kairox_core.providers.scripted import ScriptedProvider

    config = parse_config({"retrieval": {"workspace_index": False}})
    engine = ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(["ok"]))
    await engine.run_turn("book a room", lambda _: None)
    engine.kx.events_store.append(
        CompactionSummary(
            session_id=engine.session_id,
            compaction_id="c1",
            summary="Alice booked room 101.\nLunch is at noon.",
            first_seq=1,
            last_seq=2,
            strategy="test",
        )
    )
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("l")
        await pilot.pause()
        prompt = app.screen.query_one("EditScreen Label").render()
        assert "0: Alice booked room 101.\n1: Lunch is at noon." in str(prompt)
        app.screen.query_one(TextArea).text = "1"  # numbered as `kairox summary show` prints
        await pilot.press("ctrl+s")
        await pilot.pause()
    (chunk,) = engine.kx.longterm.list()
    assert (chunk.text, chunk.scope) == ("Lunch is at noon.", "session")
    await engine.close()


async def test_the_cursor_stays_on_the_row_after_an_edit(kairox_home: Path, tmp_path: Path) -> None:
    from textual.widgets import DataTable, TabbedContent, TextArea

    from kairox_core.chat.app import ChatApp
    from kairox_core.chat.engine import ChatEngine
    from kairox_core.config import parse_config
    from kairox_core.providers.scripted import ScriptedProvider

    config = parse_config({"retrieval": {"workspace_index": False}})
    engine = ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(["ok"]))
    kx = engine.kx
    for text in ("first fact", "second fact", "third fact"):
        kx.longterm.add(text, scope="session", session_id=engine.session_id)
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+y")
        await pilot.pause()
        app.screen.query_one(TabbedContent).active = "longterm"
        await pilot.pause()
        table = app.screen.query_one("#longterm-table", DataTable)
        table.focus()
        await pilot.press("down", "e")
        await pilot.pause()
        app.screen.query_one(TextArea).text = "second fact, edited"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert table.cursor_coordinate.row == 1
        await pilot.press("d")  # deletes the row just edited, not row 0
        await pilot.pause()
        assert table.cursor_coordinate.row == 1
    assert [c.text for c in kx.longterm.list()] == ["first fact", "third fact"]
    await engine.close()
