"""Remember this on any line of the TUI chat (Textual pilot): ctrl+r, a message, the
whole of it or one line, a scope; a long-term chunk with the message's seq."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import OptionList, Select

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.remember_line import RememberScreen
from kairox_core.config import parse_config
from kairox_core.events import AssistantMessageCompleted, UserMessageAdded
from kairox_core.providers.scripted import ScriptedProvider

REPLY = "Here is the plan.\nWe deploy on Fridays.\nDocs live in docs/."


def engine_for(tmp_path: Path) -> ChatEngine:
    config = parse_config({"retrieval": {"workspace_index": False}})
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider([REPLY]))


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_a_line_of_an_answer_and_a_whole_prompt_kept_long_term(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path)
    await engine.run_turn("what is the plan?", lambda _: None)
    (asked,) = [e for e in engine.history() if isinstance(e, UserMessageAdded)]
    (answer,) = [e for e in engine.history() if isinstance(e, AssistantMessageCompleted)]
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert isinstance(app.screen, RememberScreen)
        options = app.screen.query_one(OptionList)
        assert options.option_count == 2 and options.highlighted == 1  # the newest message
        await pilot.press("enter")  # the answer: its lines
        await pilot.pause()
        assert options.option_count == 4  # the whole message and its three lines
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, RememberScreen)
        await pilot.press("ctrl+r")
        await pilot.pause()
        app.screen.query_one(Select).value = "project"  # the scope is the person's choice
        await pilot.press("up", "enter", "enter")  # the prompt, whole
        await pilot.pause()
    line, prompt = engine.kx.longterm.list()
    assert (line.text, line.scope, line.source_seq) == (
        "We deploy on Fridays.",
        "session",
        answer.seq,
    )
    assert (prompt.text, prompt.scope) == ("what is the plan?", "project")
    assert prompt.source_seq == asked.seq and prompt.workspace_id == engine.workspace
    await engine.close()
