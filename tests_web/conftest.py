"""A real ``kairox serve`` subprocess with a scripted model, and system Chromium.

Each test gets its own database and server (``serve``), started the way a user starts
it; ``page`` is a Playwright page in Debian's Chromium (Playwright's own browser
download does not work offline).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kairox_core.testing.serve import REPLIES, Server, start_server, stop_server

CHROMIUM = os.environ.get("KAIROX_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture
def replies() -> list[str]:
    return list(REPLIES)


@pytest.fixture
def summary() -> str | None:
    """What a model-written summary says; None: the extractive strategy."""
    return None


@pytest.fixture
def serve(tmp_path: Path, replies: list[str], summary: str | None) -> Iterator[Server]:
    server = start_server(tmp_path, replies, summary=summary)
    yield server
    stop_server(server)


# Module scope: Playwright's sync API keeps an event loop running in this thread until
# it stops, and pytest-asyncio cannot run an async test while it does (test_inputs.py
# after test_browser.py failed every async fixture with "Runner.run() cannot be called
# from a running event loop").
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    from playwright.sync_api import expect, sync_playwright

    # Every expect() waits for a condition and returns as soon as it holds; Playwright's
    # 5 s default gives up too early on a busy 2-core machine.
    expect.set_options(timeout=30_000)

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def dialogs() -> list[str]:
    """Messages of every alert/confirm the page raised (an XSS payload would add one)."""
    return []


@pytest.fixture
def page(browser: Any, serve: Server, dialogs: list[str]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 860})
    pg = context.new_page()

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    pg.goto(serve.url + "/")
    pg.wait_for_selector("#send:enabled")  # the app has chosen (or started) a session
    yield pg
    context.close()
