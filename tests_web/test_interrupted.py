"""A turn whose process was killed mid-reply shows as interrupted in the web app: the
messages API flags the turn's last message, and the chat draws a note under it."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from kairox_core.testing.multiprocess import INTERRUPTED_PROMPT, REPLY_READY
from kairox_core.testing.serve import REPLIES, Server, start_server, stop_server
from kairox_core.turn_status import INTERRUPTED_NOTE

pytestmark = pytest.mark.slow

SESSION = "garden"


@pytest.fixture
def after_a_crash(tmp_path: Path) -> Iterator[Server]:
    """``kairox serve`` over a database whose last turn was killed -9 mid-reply."""
    db = tmp_path / "kx.db"
    child = subprocess.Popen(
        [sys.executable, "-m", "kairox_core.testing.multiprocess", "interrupt", str(db), SESSION],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if not any(line.strip() == REPLY_READY for line in child.stdout):
        pytest.fail(f"the child never reached the reply: {child.communicate()[1][-2000:]}")
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=240)
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
