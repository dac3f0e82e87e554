"""The web app in a real browser against a real ``kairox serve`` (scripted model)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from kairox_core.testing.serve import (
    XSS,
    Server,
    kairox_cmd,
    start_server,
    stop_server,
    write_config,
)

IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"


def send(page: Any, prompt: str) -> Any:
    page.fill("#prompt", prompt)
    page.click("#send")
    answer = page.locator(".msg.assistant.done").last
    expect(answer).to_be_visible()
    return answer


def test_streamed_answer_and_approved_card(page: Any, serve: Server) -> None:
    answer = send(page, "I use helix, remember that")
    expect(answer.locator(".text")).to_have_text("Hello! I will keep that in mind. ")
    card = page.locator(".card[data-proposal]")
    expect(card).to_contain_text("Remember this? user:editor")
    expect(card.locator("textarea")).to_have_value("prefers helix")
    expect(answer.locator(".trace summary")).to_contain_text("tokens")
    card.locator("button.approve").click()
    expect(card).to_contain_text("Saved to memory.")
    memories = serve.api("GET", "/api/memories?scope=user")
    assert [(m["key"], m["body"]) for m in memories] == [("editor", "prefers helix")]
    assert serve.api("GET", "/api/approvals") == []


def test_the_send_button_waits_for_the_chat_to_be_drawn(browser: Any, serve: Server) -> None:
    """A prompt sent while the chat was still loading lost its streaming answer when the
    load finished (the late reload replaced the bubbles): send is enabled only after."""
    context = browser.new_context()
    try:
        pg = context.new_page()
        send_disabled: list[bool] = []

        def while_loading(route: Any) -> None:
            send_disabled.append(pg.evaluate("document.querySelector('#send').disabled"))
            route.continue_()

        pg.route(re.compile(r"/api/sessions/[^/]+/messages$"), while_loading)
        pg.goto(serve.url + "/")
        pg.wait_for_selector("#send:enabled")
        assert send_disabled == [True]
    finally:
        context.close()


def test_edit_card_then_approve(page: Any, serve: Server) -> None:
    send(page, "remember my editor")
    card = page.locator(".card[data-proposal]")
    card.locator("button.edit").click()
    card.locator("textarea").fill("prefers helix, with vim keys")
    card.locator("button.approve").click()
    expect(card).to_contain_text("Saved to memory.")
    (memory,) = serve.api("GET", "/api/memories?scope=user")
    assert memory["body"] == "prefers helix, with vim keys"


def test_memory_edited_in_browser_reaches_the_next_python_turn(
    page: Any, serve: Server, tmp_path: Path
) -> None:
    serve.api("POST", "/api/memories", {"scope": "user", "key": "lang", "body": "Python"})
    page.click("#tabs button[data-tab=memories]")
    row = page.locator("tr[data-memory]").filter(has_text="lang")
    row.locator("button.edit").click()
    row.locator("textarea").fill("Rust, since 2025")
    row.locator("button.save").click()
    expect(page.locator("tr[data-memory]").filter(has_text="lang")).to_contain_text(
        "Rust, since 2025"
    )
    # The next turn from another process (as the TUI would drive it) sees the edit.
    script = (
        "import sys\n"
        "from kairox_core import Kairox\n"
        "with Kairox.open(sys.argv[1], sys.argv[2]) as kx:\n"
        "    s = kx.session()\n"
        "    turn = s.begin_turn_sync('what language?')\n"
        "    print(turn.messages[0]['content'])\n"
        "    turn.complete_sync('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(serve.db), str(serve.config)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "Rust, since 2025" in out
    assert "Python" not in out.split("Rust, since 2025")[0][-40:]


def test_summary_card_expands_to_originals(page: Any, serve: Server) -> None:
    for prompt in ("first question about the launch", "second question", "third"):
        send(page, prompt)
    sid = page.evaluate("localStorage.getItem('kairox.session')")
    page.click("#tabs button[data-tab=memory]")
    page.click("#compact-now")
    expect(page.locator("#compact-result")).to_have_text(re.compile("completed"))
    card = page.locator(".card.summary").first
    expect(card.locator(".card-title")).to_contain_text("[Summary] seqs")
    originals = card.locator(".originals")
    expect(originals.locator(".msg.original").first).to_be_hidden()
    originals.locator("summary").click()
    expect(originals.locator(".msg.original").first).to_be_visible()
    expect(originals).to_contain_text("first question about the launch")
    (summary,) = serve.api("GET", f"/api/sessions/{sid}/summaries")
    assert summary["originals"]


def test_range_compaction_edit_drop_and_pin_in_the_browser(page: Any, serve: Server) -> None:
    for prompt in ("alpha", "beta", "gamma"):
        send(page, prompt)
    page.click("#tabs button[data-tab=memory]")
    page.fill("#range-first", "1")
    page.fill("#range-last", "4")
    page.click("#compact-range")
    expect(page.locator("#compact-result")).to_have_text(re.compile("completed"))
    card = page.locator(".card.summary")
    expect(card).to_have_count(1)
    card.locator("button", has_text="Edit").click()
    card.locator("textarea.summary-editor").fill("first line\nsecond line")
    card.locator("button", has_text="Save summary").click()
    expect(page.locator(".card.summary .chunks li")).to_have_count(2)
    page.locator(".card.summary .chunks li").first.locator("button.drop").click()
    expect(page.locator(".card.summary .chunks li")).to_have_count(1)
    expect(page.locator(".card.summary .chunks")).to_contain_text("second line")
    page.fill("#pin-text", "the demo is on Friday")
    page.click("#pin-form button")
    expect(page.locator("#pins")).to_contain_text("the demo is on Friday")
    expect(page.locator("#layers")).to_contain_text("the demo is on Friday")
    expect(page.locator("#layers")).to_contain_text("second line")


def test_longterm_chunk_promoted_to_a_pack(page: Any, serve: Server) -> None:
    page.click("#tabs button[data-tab=longterm]")
    page.fill("#chunk-text", "deploys go out on Tuesdays")
    page.click("#chunk-form button[type=submit]")
    row = page.locator("#chunk-table tbody tr")
    expect(row).to_contain_text("deploys go out on Tuesdays")
    row.locator("input.pick").check()
    page.click("#promote")
    expect(page.locator("#status")).to_contain_text("draft pack")
    page.click("#tabs button[data-tab=packs]")
    expect(page.locator(".card.pack")).to_contain_text("draft")
    expect(page.locator(".card.pack textarea")).to_have_value(re.compile("Tuesdays"))


def test_xss_payload_stays_inert(page: Any, serve: Server, dialogs: list[str]) -> None:
    serve.api("POST", "/api/memories", {"scope": "user", "key": "x", "body": XSS})
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    serve.api("POST", f"/api/sessions/{sid}/pins", {"text": XSS})
    page.evaluate(f"localStorage.setItem('kairox.session', {sid!r})")
    page.reload()
    page.click("#tabs button[data-tab=memories]")
    cell = page.locator("tr[data-memory] td.body").first
    expect(cell).to_have_text(XSS)
    assert page.locator("img").count() == 0
    page.click("#tabs button[data-tab=memory]")
    expect(page.locator("#pins")).to_contain_text(XSS)
    expect(page.locator("#layers")).to_contain_text(XSS)
    # the payload only runs from an <img> it made: none exists, so no dialog can follow
    assert page.locator("img").count() == 0
    assert dialogs == []


@pytest.mark.parametrize("replies", [[f"Here: {XSS} <script>alert(2)</script>"]])
def test_xss_in_a_streamed_answer_stays_inert(page: Any, serve: Server, dialogs: list[str]) -> None:
    answer = send(page, "show me markup")
    expect(answer.locator(".text")).to_contain_text(XSS)
    page.reload()
    expect(page.locator(".msg.assistant .text").last).to_contain_text("<script>alert(2)</script>")
    assert page.locator("#messages img, #messages script").count() == 0
    assert dialogs == []


def test_two_servers_on_one_database_see_each_others_changes(
    page: Any, browser: Any, serve: Server, tmp_path: Path
) -> None:
    other = start_server(
        tmp_path / "other", ['Sure. <memory scope="user" key="os">Debian</memory>'], db=serve.db
    )
    context = browser.new_context()
    try:
        second = context.new_page()
        second.goto(other.url + "/")
        second.wait_for_selector("#send:enabled")
        send(second, "I run Debian")
        expect(second.locator(".card[data-proposal]")).to_contain_text("user:os")
        # the first browser, on the first server, sees the proposal and approves it
        page.click("#tabs button[data-tab=memories]")
        card = page.locator("#pending .card[data-proposal]")
        expect(card).to_contain_text("user:os")
        card.locator("button.approve").click()
        expect(card).to_contain_text("Saved to memory.")
        second.click("#tabs button[data-tab=memories]")
        expect(second.locator("tr[data-memory]").filter(has_text="os")).to_contain_text("Debian")
        expect(second.locator("#pending")).to_contain_text("Nothing waiting.")
    finally:
        context.close()
        stop_server(other)


def test_the_app_never_writes_html_from_data() -> None:
    script = (Path(__file__).resolve().parent.parent / "kairox_core/web/static/app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink


def test_non_loopback_bind_without_token_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path / "kairox.toml", ["x"])
    result = subprocess.run(
        kairox_cmd(config, tmp_path / "k.db", "serve", "--host", "0.0.0.0", "--port", "0"),
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in __import__("os").environ.items() if k != "KAIROX_SERVE_TOKEN"},
    )
    assert result.returncode == 2
    assert "a token is required" in result.stderr
    assert "Traceback" not in result.stderr


SCREENSHOT_REPLIES = [
    'Noted: helix it is. <memory scope="user" key="editor">Uses the helix editor</memory>',
    "We decided to launch on 3 May, after the security review.",
    "You're welcome!",
]
SCREENSHOT_SUMMARY = "User uses the helix editor.\nLaunch set for 3 May, after the security review."


@pytest.mark.parametrize(("replies", "summary"), [(SCREENSHOT_REPLIES, SCREENSHOT_SUMMARY)])
def test_screenshots(page: Any, serve: Server, tmp_path: Path) -> None:
    """The main views of the real app (the model writes the summary, so Usage shows
    compaction spend); into docs/images/ with KAIROX_SCREENSHOTS=1, else a temporary
    directory, so a test run leaves the checkout clean."""
    images = IMAGES if os.environ.get("KAIROX_SCREENSHOTS") == "1" else tmp_path
    images.mkdir(parents=True, exist_ok=True)
    serve.api("POST", "/api/memories", {"scope": "user", "key": "tz", "body": "Europe/Paris"})
    prompts = ("I use helix, remember that", "What did we decide about the launch?", "thanks")
    for prompt in prompts:
        send(page, prompt)
    page.locator(".msg.assistant .trace").first.locator("summary").click()
    page.screenshot(path=str(images / "web-chat.png"))
    page.click("#tabs button[data-tab=memory]")
    page.click("#compact-now")
    expect(page.locator(".card.summary")).to_have_count(1)
    page.locator(".card.summary .originals summary").click()
    page.screenshot(path=str(images / "web-memory-view.png"), full_page=True)
    page.click("#tabs button[data-tab=memories]")
    expect(page.locator("tr[data-memory]").first).to_be_visible()
    page.screenshot(path=str(images / "web-memories.png"))
    page.click("#tabs button[data-tab=usage]")
    expect(page.locator("#usage-table tbody tr").first).to_be_visible()
    (usage,) = [u for u in serve.api("GET", "/api/usage") if not u["session_id"].startswith("_")]
    assert usage["compactions"] == 1 and usage["compaction_completion_tokens"] > 0
    page.screenshot(path=str(images / "web-usage.png"))
