"""`kairox chat`: the Textual app (driven by Textual's pilot) and --plain mode."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.chat.plain import PlainChat
from kairox_core.chat.slash import (
    Compact,
    Remember,
    RememberChunk,
    SlashError,
    SwitchProfile,
    parse_slash,
)
from kairox_core.chat.widgets import ChatMessage, MemoryCard
from kairox_core.config import parse_config
from kairox_core.providers.scripted import ScriptedProvider

MARKED = (
    'Sure, I will keep that in mind. <memory scope="user" key="seat">'
    "Prefers window seats</memory> Anything else?"
)


def engine_for(tmp_path: Path, replies: list[str], **kw: str) -> ChatEngine:
    config = parse_config({"profiles": {"default": {"context_window": 4096, "reserve": 512}}})
    return ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(replies), **kw)


# --- slash commands ----------------------------------------------------------------------


def test_slash_commands_parse() -> None:
    assert parse_slash("hello") is None
    assert parse_slash("//not a command") is None
    assert parse_slash("/compact") == Compact()
    assert parse_slash("/profile fast") == SwitchProfile("fast")
    assert parse_slash('/remember "I am vegetarian" --key diet') == Remember(
        "I am vegetarian", "user", "diet"
    )
    assert parse_slash("/remember uses tabs --scope workspace") == Remember(
        "uses tabs", "workspace", "uses-tabs"
    )
    assert parse_slash("/remember we deploy on Fridays") == RememberChunk(
        "we deploy on Fridays", "session"
    )
    assert parse_slash("/remember tea --scope project") == RememberChunk("tea", "project")
    assert parse_slash("/remember tea --scope global") == RememberChunk("tea", "global")
    assert parse_slash("/remember tea --scope session") == RememberChunk("tea", "session")
    for bad in (
        "/remember",
        "/remember x --scope team",
        "/remember x --scope global --key k",
        "/remember x --key 'a b'",
        "/profile",
        "/frobnicate",
        "/compact now",
    ):
        with pytest.raises(SlashError):
            parse_slash(bad)


# --- the TUI ------------------------------------------------------------------------------


async def send(app: ChatApp, pilot: Any, text: str) -> None:
    """Type a prompt (set at once: pressing keys one by one is slow) and submit it."""
    prompt = app.query_one("#prompt", Input)
    prompt.focus()
    prompt.value = text
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.slow
async def test_streamed_answer_is_cleaned_and_card_approves_memory(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [MARKED, "Noted again."])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press(*"I like")  # typed for real once
        await send(app, pilot, "I like window seats")
        answers = [m for m in app.query(ChatMessage) if m.role == "assistant"]
        assert answers[-1].text == "Sure, I will keep that in mind. Anything else?"
        assert "<memory" not in answers[-1].text
        cards = list(app.query(MemoryCard))
        assert len(cards) == 1 and cards[0].proposal.key == "seat"
        await pilot.press("ctrl+n")  # a card takes the keyboard only when asked to
        assert app.focused is cards[0]
        await pilot.press("a")
        await pilot.pause()
        assert cards[0].decided
        stored = engine.kx.memories.get("user", "seat")
        assert stored is not None and stored.body == "Prefers window seats"
        # the memory browser shows it
        await pilot.press("ctrl+y")
        await pilot.pause()
        table = app.screen.query_one("#memory-table")
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert any(r[0] == "user" and r[1] == "seat" for r in rows)
        await pilot.press("escape")
        await pilot.pause()
        # the next turn's trace lists it
        await send(app, pilot, "and now?")
        provider = engine.provider
        assert isinstance(provider, ScriptedProvider)
        sent = "\n".join(str(m["content"]) for m in provider.calls[-1])
        assert "Prefers window seats" in sent
        memories = (await engine.session.preview("x")).trace.layers["memories"]
        assert any("seat" in item.label for item in memories.included)
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_tui_shows_an_acknowledgement_and_the_card_for_a_tag_alone(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, ['<memory scope="user" key="seat">Prefers window seats</memory>'])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        await send(app, pilot, "Remember that I like window seats")
        answers = [m for m in app.query(ChatMessage) if m.role == "assistant"]
        assert answers[-1].text == "Noted: a memory to approve."
        cards = list(app.query(MemoryCard))
        assert len(cards) == 1 and cards[0].proposal.key == "seat"
    await engine.close()


@pytest.mark.slow
async def test_reject_and_edit_from_cards(tmp_path: Path, kairox_home: Path) -> None:
    second = MARKED.replace('key="seat"', 'key="meal"').replace("window seats", "no onions")
    engine = engine_for(tmp_path, [MARKED, second])
    app = ChatApp(engine)
    async with app.run_test(size=(140, 40)) as pilot:
        for prompt in ("first", "second"):
            await send(app, pilot, prompt)
            if prompt == "first":
                await pilot.press("ctrl+n", "r")
                await pilot.pause()
        assert engine.kx.memories.get("user", "seat") is None
        await pilot.press("ctrl+n", "e")
        await pilot.pause()
        text_area = app.screen.query_one("#edit-text")
        text_area.text = "No onions, ever"
        await pilot.press("ctrl+s")
        await pilot.pause()
        stored = engine.kx.memories.get("user", "meal")
        assert stored is not None and stored.body == "No onions, ever"
    await engine.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_resumed_session_shows_history(tmp_path: Path, kairox_home: Path) -> None:
    engine = engine_for(tmp_path, ["First answer."])
    await engine.run_turn("first question", lambda _: None)
    session_id = engine.session_id
    await engine.close()
    resumed = engine_for(tmp_path, ["x"], session_id=session_id)
    app = ChatApp(resumed)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        texts = [(m.role, m.text) for m in app.query(ChatMessage)]
        assert ("user", "first question") in texts
        assert ("assistant", "First answer.") in texts
    await resumed.close()


@pytest.mark.slow  # drives the Textual app (DEVELOPERS.md: test tiers)
async def test_budget_error_is_shown_and_session_intact(tmp_path: Path, kairox_home: Path) -> None:
    config = parse_config({"profiles": {"default": {"context_window": 900, "reserve": 100}}})
    engine = ChatEngine.open(config, tmp_path / "k.db", provider=ScriptedProvider(["ok"]))
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await send(app, pilot, "word " * 800)
        errors = [m.text for m in app.query(ChatMessage) if m.role == "error"]
        assert errors and "budget" in errors[-1].lower()
        await send(app, pilot, "short")
        answers = [m.text for m in app.query(ChatMessage) if m.role == "assistant"]
        assert answers[-1] == "ok"
    await engine.close()


# --- plain mode ---------------------------------------------------------------------------


async def test_plain_mode_cleans_stdout_and_reports_on_stderr(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, [MARKED])
    out, err = io.StringIO(), io.StringIO()
    chat = PlainChat(
        engine,
        io.StringIO("hello\n/remember I am vegetarian --key diet\n/remember we ship on Fridays\n"),
        out,
        err,
        decide="approve",
    )
    assert await chat.run() == 0
    assert out.getvalue() == "Sure, I will keep that in mind. Anything else?\n"
    log = err.getvalue()
    assert "memory proposed" in log and "[user:seat]" in log
    assert "MemoryAccepted user:seat" in log
    assert "remembered [user:diet]" in log
    assert engine.kx.memories.get("user", "seat") is not None
    assert engine.kx.memories.get("user", "diet").body == "I am vegetarian"
    assert "kept in long-term memory [session]" in log  # session: the default scope
    (chunk,) = engine.kx.longterm.list("session", session_id=engine.session_id)
    assert chunk.text == "we ship on Fridays" and chunk.session_id == engine.session_id
    await engine.close()


async def test_a_reply_of_tags_alone_is_acknowledged(tmp_path: Path, kairox_home: Path) -> None:
    """Small models answer "remember..." with the tag only: the person still sees a line."""
    engine = engine_for(
        tmp_path,
        [
            '<memory scope="user" key="name">Dana</memory>',
            '<memory scope="session" key="topic">trains</memory>',
            "Hello.",
        ],
    )
    out, err = io.StringIO(), io.StringIO()
    chat = PlainChat(engine, io.StringIO("I am Dana\nwe talk trains\nhi\n"), out, err)
    assert await chat.run() == 0
    lines = out.getvalue().splitlines()
    assert lines == ["Noted: a memory to approve.", "Noted for this conversation.", "Hello."]
    assert "memory proposed" in err.getvalue() and "[user:name]" in err.getvalue()
    from kairox_core.events import AssistantMessageCompleted

    recorded = [e.text for e in engine.history() if isinstance(e, AssistantMessageCompleted)]
    assert recorded == ["", "", "Hello."]  # the acknowledgement is shown, not recorded
    await engine.close()


@pytest.mark.slow
def test_plain_cli_with_a_configured_endpoint(tmp_path: Path, kairox_home: Path) -> None:
    config = tmp_path / "kairox.toml"
    config.write_text(
        '[providers.demo]\nkind = "scripted"\n'
        'replies = ["Hi there. <memory scope=\\"user\\" key=\\"name\\">Ann</memory>"]\n'
    )
    env = {**os.environ, "KAIROX_DB": str(tmp_path / "k.db")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kairox_core",
            "--config",
            str(config),
            "chat",
            "--plain",
            "--reject-all",
        ],
        input="hello\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hi there.\n"
    assert "MemoryRejected user:name" in out.stderr
    assert "Traceback" not in out.stderr


async def test_the_system_prompt_teaches_the_memory_protocol(
    tmp_path: Path, kairox_home: Path
) -> None:
    engine = engine_for(tmp_path, ["ok"])
    await engine.run_turn("hi", lambda _: None)
    provider = engine.provider
    assert isinstance(provider, ScriptedProvider)
    system = provider.calls[-1][0]
    assert system["role"] == "system"
    assert '<memory scope="user" key=' in system["content"]
    await engine.close()


@pytest.mark.slow
async def test_unreachable_provider_is_a_readable_error_and_session_intact(
    tmp_path: Path, kairox_home: Path
) -> None:
    import socket

    from kairox_core.config import ProviderConfig
    from kairox_core.events import AssistantMessageCompleted, UserMessageAdded
    from kairox_core.providers.openai_compat import create

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = create(
        ProviderConfig(
            id="local",
            kind="openai",
            model="m",
            base_url=f"http://127.0.0.1:{port}/v1",
            max_retries=0,
        )
    )
    config = parse_config({})
    engine = ChatEngine.open(config, tmp_path / "k.db", provider=provider)
    app = ChatApp(engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await send(app, pilot, "hello?")
        errors = [m.text for m in app.query(ChatMessage) if m.role == "error"]
        assert errors and "local" in errors[-1] and "Traceback" not in errors[-1]
    events = engine.kx.events(engine.session_id)
    assert [e.text for e in events if isinstance(e, UserMessageAdded)] == ["hello?"]
    assert not [e for e in events if isinstance(e, AssistantMessageCompleted)]
    assert not engine.session.busy  # the turn was released: the next one can run
    await engine.close()
