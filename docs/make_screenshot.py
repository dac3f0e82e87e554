"""Regenerate docs/images/chat.svg: a `kairox chat` session with a memory card.

Runs the real Textual app against a scripted model (no network, no model file):
    python docs/make_screenshot.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

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
OUT = Path(__file__).parent / "images" / "chat.svg"


async def main() -> None:
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


if __name__ == "__main__":
    asyncio.run(main())
