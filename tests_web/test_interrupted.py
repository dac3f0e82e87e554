"""A turn whose process was killed mid-reply shows as interrupted in the web app: the
messages API flags the turn's last message, and the chat draws a note under it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from kairox_core.testing.multiprocess import INTERRUPTED_PROMPT, kill_mid_reply
from kairox_core.testing.serve import REPLIES, Server, start_server, stop_server
from kairox_core.turn_status import INTERRUPTED_NOTE

pytestmark = pytest.mark.slow

SESSION = "garden"


@pytest.fixture
def after_a_crash(tmp_path: Path) -> Iterator[Server]:
    """``kairox serve`` over a database whose last turn was killed -9 mid-reply."""
    db = tmp_path / "kx.db"
    kill_mid_reply(db, SESSION)
    server = start_server(tmp_path / "serve", list(REPLIES), db=db)
    yield server
    stop_server(server)


def test_the_chat_says_the_turn_was_interrupted(browser: Any, after_a_crash: Server) -> None:
    messages = after_a_crash.api("GET", f"/api/sessions/{SESSION}/messages")
    flagged = [m for m in messages if m.get("interrupted")]
    assert [m["payload"]["text"] for m in flagged] == [INTERRUPTED_PROMPT]
    assert flagged[0]["interrupted"] == INTERRUPTED_NOTE

    context = browser.new_context(viewport={"width": 1200, "height": 860})
    page = context.new_page()
    try:
        page.goto(after_a_crash.url + "/")
        page.wait_for_selector("#send:enabled")  # its first session chosen and remembered
        page.evaluate(f"sessionStorage.setItem('kairox.session', {SESSION!r})")
        page.reload()
        page.wait_for_selector("#send:enabled")  # the app has opened that session
        note = page.locator("#messages .note.interrupted")
        expect(note).to_have_count(1)
        expect(note).to_have_text(INTERRUPTED_NOTE)
        # right under the interrupted prompt
        before = note.locator("xpath=preceding-sibling::div[contains(@class, 'msg')][1]")
        expect(before.locator(".text")).to_have_text(INTERRUPTED_PROMPT)
    finally:
        context.close()
