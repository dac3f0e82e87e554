"""Regenerate the chat screenshots in docs/images from the real Textual app.

``chat.svg``: a `kairox chat` session with a memory card. ``memory-view.svg``: the
Memory view after a compaction, its ``[Summary]`` card expanded to the original
messages. ``chat-stream.svg``: the chat itself after ``/compact``, the range one opened
``[Summary]`` card, then a PDF sent with ``/attach``. ``chat-remember.svg``: Remember
this (ctrl+r) choosing a line of an answer. All run against a scripted model (no
network, no model file):
    python docs/make_screenshot.py            # all
    python docs/make_screenshot.py memory     # one of: chat, memory, stream, remember
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from textual.widgets import Input

from kairox_core.chat.app import ChatApp
from kairox_core.chat.engine import ChatEngine
from kairox_core.config import parse_config
from kairox_core.providers.scripted import ScriptedProvider

REPLY = (
    "Good to know, I'll keep that in mind. "
    '<memory scope="user" key="travel.seat">Prefers window seats on flights</memory>'
    "Where are you flying next?"
)
IMAGES = Path(__file__).parent / "images"
OUT = IMAGES / "chat.svg"
MEMORY_OUT = IMAGES / "memory-view.svg"
MEMORY_TURNS = (
    ("Book a room for the design review on 3 May, for 8 people.", "Booked room 101 for 3 May."),
    ("Who is presenting?", "Ada presents the API, Bob the roadmap."),
    ("And lunch?", "Lunch is at noon in the atrium, vegetarian options included."),
)


async def chat() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_config({})
        engine = ChatEngine.open(
            config, Path(tmp) / "k.db", provider=ScriptedProvider([REPLY], chunk_chars=6)
        )
        engine.provider_note = "model: a scripted demo reply (docs/make_screenshot.py)"
        app = ChatApp(engine)
        async with app.run_test(size=(150, 36)) as pilot:
            prompt = app.query_one("#prompt", Input)
            prompt.value = "I always take the window seat when I fly."
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.press("ctrl+n")  # select the card, as a person deciding it would
            await pilot.pause()
            OUT.parent.mkdir(parents=True, exist_ok=True)
            app.save_screenshot(filename=OUT.name, path=str(OUT.parent))
        await engine.close()
    print(f"wrote {OUT}")


async def memory_view() -> None:
    """Three turns, compacted but the last; a memory, a pinned fact; the card opened."""
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_config(
            {
                "compaction": {"keep_recent_exchanges": 1},
                "retrieval": {"workspace_index": False},
            }
        )
        replies = [reply for _, reply in MEMORY_TURNS]
        engine = ChatEngine.open(config, Path(tmp) / "k.db", provider=ScriptedProvider(replies))
        for prompt, _ in MEMORY_TURNS:
            await engine.run_turn(prompt, lambda _: None)
        await engine.session.compact()
        await engine.session.pin_fact("The review budget is 400 EUR.")
        engine.kx.approvals.remember(
            "user",
            "diet",
            "Vegetarian",
            workspace_id=engine.workspace,
            session_id=engine.session_id,
        )
        app = ChatApp(engine)
        async with app.run_test(size=(150, 60)) as pilot:
            await pilot.press("ctrl+y")
            await app.workers.wait_for_complete()
            await pilot.pause()
            await pilot.press("o")  # open the [Summary] card, as a person checking it would
            await pilot.pause()
            app.save_screenshot(filename=MEMORY_OUT.name, path=str(MEMORY_OUT.parent))
        await engine.close()
    print(f"wrote {MEMORY_OUT}")


STREAM_OUT = IMAGES / "chat-stream.svg"
REMEMBER_OUT = IMAGES / "chat-remember.svg"
REPORT_REPLY = "Q3 revenue rose 12 percent while costs fell 4 percent.\nThe board meets on 14 Nov."


def stream_engine(tmp: str) -> ChatEngine:
    config = parse_config(
        {
            "compaction": {"keep_recent_exchanges": 1},
            "retrieval": {"workspace_index": False},
        }
    )
    replies = [*(reply for _, reply in MEMORY_TURNS), REPORT_REPLY]
    engine = ChatEngine.open(config, Path(tmp) / "k.db", provider=ScriptedProvider(replies))
    engine.provider_note = "model: scripted demo replies (docs/make_screenshot.py)"
    return engine


async def type_line(app: ChatApp, pilot: Any, line: str) -> None:
    app.query_one("#prompt", Input).value = line
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def stream() -> None:
    """Three turns and /compact: one [Summary] card, opened; then /attach q3-report.pdf."""
    from kairox_core.chat.stream_summary import ChatSummaryCard
    from kairox_core.testing.files import pdf_with

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "q3-report.pdf"
        report.write_bytes(pdf_with(["Q3 revenue rose 12 percent.", "Costs fell 4 percent."]))
        engine = stream_engine(tmp)
        app = ChatApp(engine)
        async with app.run_test(size=(150, 44)) as pilot:
            for prompt, _ in MEMORY_TURNS:
                await type_line(app, pilot, prompt)
            await type_line(app, pilot, "/compact")
            await type_line(app, pilot, f"/attach {report}")
            await type_line(app, pilot, "What does the report say?")
            card = app.query_one(ChatSummaryCard)
            card.focus()
            await pilot.press("enter")  # open it, as a person checking it would
            await pilot.pause()
            app.save_screenshot(filename=STREAM_OUT.name, path=str(STREAM_OUT.parent))
        await engine.close()
    print(f"wrote {STREAM_OUT}")


async def remember() -> None:
    """ctrl+r on the newest answer: its lines offered, one to keep in long-term memory."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = stream_engine(tmp)
        engine.provider = ScriptedProvider([REPORT_REPLY])
        app = ChatApp(engine)
        async with app.run_test(size=(150, 36)) as pilot:
            await type_line(app, pilot, "What does the Q3 report say?")
            await pilot.press("ctrl+r")
            await pilot.pause()
            await pilot.press("enter")  # the answer: the whole of it, or one of its lines
            await pilot.pause()
            await pilot.press("down")
            await pilot.pause()
            app.save_screenshot(filename=REMEMBER_OUT.name, path=str(REMEMBER_OUT.parent))
        await engine.close()
    print(f"wrote {REMEMBER_OUT}")


SHOTS = {"chat": chat, "memory": memory_view, "stream": stream, "remember": remember}


async def main(names: list[str]) -> None:
    unknown = [n for n in names if n not in SHOTS]
    if unknown:
        raise SystemExit(f"unknown screenshot {unknown}; choose from {', '.join(SHOTS)}")
    for name in names or list(SHOTS):
        await SHOTS[name]()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
