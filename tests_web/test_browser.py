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

from kairox_core.testing.files import pdf_with
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


def test_edit_card_changes_scope_and_key_then_approve(page: Any, serve: Server) -> None:
    send(page, "remember my editor")
    card = page.locator(".card[data-proposal]")
    expect(card.locator(".card-fields")).to_be_hidden()
    card.locator("button.edit").click()
    card.locator("select.card-scope").select_option("workspace")
    card.locator("input.card-key").fill("team-editor")
    card.locator("button.approve").click()
    expect(card).to_contain_text("Saved to memory.")
    expect(card.locator(".card-title")).to_have_text("Remembered: workspace:team-editor")
    assert serve.api("GET", "/api/memories?scope=user") == []
    (memory,) = serve.api("GET", "/api/memories?scope=workspace")
    assert (memory["key"], memory["body"]) == ("team-editor", "prefers helix")


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


def test_the_packs_tab_names_a_skipped_pack_file(page: Any, serve: Server) -> None:
    packs = serve.config.parent / "packs"
    packs.mkdir()
    (packs / "good.md").write_text('+++\nname = "good"\nlevel = "team"\n+++\nBe kind.\n')
    os.mkfifo(packs / "x.md")
    page.click("#tabs button[data-tab=packs]")
    expect(page.locator(".card.pack")).to_contain_text("good (team)")
    expect(page.locator(".pack-problem")).to_contain_text("x.md: is a FIFO")


def test_xss_payload_stays_inert(page: Any, serve: Server, dialogs: list[str]) -> None:
    serve.api("POST", "/api/memories", {"scope": "user", "key": "x", "body": XSS})
    sid = serve.api("POST", "/api/sessions", {})["session_id"]
    serve.api("POST", f"/api/sessions/{sid}/pins", {"text": XSS})
    page.evaluate(f"sessionStorage.setItem('kairox.session', {sid!r})")  # this tab's session
    page.reload()
    page.wait_for_selector("#send:enabled")  # the app has opened that session
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


STREAM_REPLIES = [
    "Booked room 101 for the design review on 3 May, with a projector.",
    "Ada presents the API changes, Bob the roadmap.",
    "Revenue rose 12 percent in Q3 while costs fell 4 percent; the board meets on 14 November.",
]


@pytest.mark.parametrize("replies", [STREAM_REPLIES])
def test_screenshots_of_the_chat_stream(
    page: Any, serve: Server, tmp_path: Path, replies: list[str]
) -> None:
    """The chat itself: a compacted range as one [Summary] card (opened), a prompt with
    a PDF attached (its link), and Remember this on an answer; into docs/images/ with
    KAIROX_SCREENSHOTS=1 (web-chat-stream.png), else a temporary directory."""
    images = IMAGES if os.environ.get("KAIROX_SCREENSHOTS") == "1" else tmp_path
    images.mkdir(parents=True, exist_ok=True)
    send(page, "Book a room for the design review on 3 May, for 8 people.")
    send(page, "Who is presenting?")
    sid = page.locator("#session-select").input_value()
    assert serve.api("POST", f"/api/sessions/{sid}/compact", {})["status"] == "completed"
    report = tmp_path / "q3-report.pdf"
    report.write_bytes(pdf_with(["Q3 revenue rose 12 percent.", "Costs fell 4 percent."]))
    page.set_input_files("#attach", str(report))
    send(page, "What does the report say?")
    expect(page.locator("#messages > .msg.assistant.done").last).to_contain_text("Revenue rose")
    page.click("#tabs button[data-tab=memory]")
    page.click("#tabs button[data-tab=chat]")  # drawn from the events, as on a resume
    card = page.locator("#messages .stream-summary")
    card.locator("> summary").click()
    expect(card.locator(".card.summary")).to_be_visible()
    expect(page.locator("#messages .msg.user .attached a")).to_have_text("q3-report.pdf")
    answer = page.locator("#messages > .msg.assistant").last
    answer.locator("button.remember").click()
    expect(answer.locator(".remember-form textarea")).to_have_value(STREAM_REPLIES[2])
    page.locator("#messages").evaluate("(node) => { node.scrollTop = node.scrollHeight; }")
    page.screenshot(path=str(images / "web-chat-stream.png"), full_page=True)


def test_drop_after_an_earlier_drop_removes_the_line_clicked(page: Any, serve: Server) -> None:
    for prompt in ("alpha", "beta", "gamma"):
        send(page, prompt)
    page.click("#tabs button[data-tab=memory]")
    page.click("#compact-now")
    card = page.locator(".card.summary")
    expect(card).to_have_count(1)
    card.locator("button", has_text="Edit").click()
    card.locator("textarea.summary-editor").fill("LINE-A\nLINE-B\nLINE-C\nLINE-D")
    card.locator("button", has_text="Save summary").click()
    lines = page.locator(".card.summary .chunks li")
    expect(lines).to_have_count(4)
    lines.filter(has_text="LINE-B").locator("button.drop").click()
    expect(lines).to_have_count(3)
    lines.filter(has_text="LINE-D").locator("button.drop").click()
    expect(lines).to_have_count(2)
    expect(page.locator(".card.summary .chunks")).to_contain_text("LINE-C")
    expect(page.locator(".card.summary .chunks")).not_to_contain_text("LINE-D")
    expect(lines.last).to_have_attribute("value", "2")  # numbered as `kairox summary show`
    lines.filter(has_text="LINE-C").locator("button.keep").click()
    expect(page.locator("#status")).to_contain_text("kept in long-term memory: LINE-C")
    page.click("#tabs button[data-tab=longterm]")
    expect(page.locator("#chunk-scope")).to_have_value("session")  # the default scope
    expect(page.locator("#chunk-table tbody tr")).to_contain_text("LINE-C")


def test_a_compacted_range_is_one_summary_card_in_the_chat(page: Any, serve: Server) -> None:
    for prompt in ("alpha question", "beta question", "gamma question"):
        send(page, prompt)
    sid = page.locator("#session-select").input_value()
    assert serve.api("POST", f"/api/sessions/{sid}/compact", {})["status"] == "completed"
    page.click("#tabs button[data-tab=memory]")
    page.click("#tabs button[data-tab=chat]")
    card = page.locator("#messages .stream-summary")
    expect(card).to_have_count(1)
    expect(card.locator("> summary")).to_contain_text(
        re.compile(r"\[Summary\] seqs \d+-\d+ · 4 messages · compacted")
    )
    expect(page.locator("#messages > .msg.user")).to_have_count(1)  # the recent exchange
    expect(page.locator("#messages > .msg.user")).to_have_text(re.compile("gamma question"))
    expect(card.locator(".card.summary")).to_be_hidden()  # collapsed
    card.locator("> summary").click()
    expect(card.locator(".card.summary")).to_be_visible()
    card.locator(".originals > summary").click()
    expect(card.locator(".originals")).to_contain_text("alpha question")
    card.locator("button", has_text="Edit").click()
    card.locator("textarea.summary-editor").fill("LINE-ONE\nLINE-TWO")
    card.locator("button", has_text="Save summary").click()
    card = page.locator("#messages .stream-summary")
    expect(card.locator(".chunks li")).to_have_count(2)  # stays open, shows the edit
    expect(card.locator(".chunks")).to_contain_text("LINE-ONE")
    card.locator(".chunks li", has_text="LINE-TWO").locator("button.keep").click()
    expect(page.locator("#status")).to_contain_text("kept in long-term memory: LINE-TWO")
    (chunk,) = serve.api("GET", "/api/longterm")
    assert (chunk["text"], chunk["scope"], chunk["session_id"]) == ("LINE-TWO", "session", sid)


def test_remember_this_on_a_message_and_on_a_selection(page: Any, serve: Server) -> None:
    answer = send(page, "our deploys go out on Fridays after lunch")
    sid = page.locator("#session-select").input_value()
    answer.locator("button.remember").click()
    form = answer.locator(".remember-form")
    expect(form.locator("textarea")).to_have_value("Hello! I will keep that in mind.")
    expect(form.locator("select")).to_have_value("session")  # the default scope
    form.locator("select").select_option("project")
    form.locator("button[type=submit]").click()
    expect(answer.locator(".remembered")).to_contain_text("kept in long-term memory [project]")
    # a selection inside the prompt's bubble (streamed: the server finds its seq)
    page.locator("#messages .msg.user .text").first.evaluate(
        """(node) => {
            const text = node.firstChild, start = text.data.indexOf("Fridays");
            const range = document.createRange();
            range.setStart(text, start);
            range.setEnd(text, start + "Fridays after lunch".length);
            const sel = window.getSelection();
            sel.removeAllRanges();
            sel.addRange(range);
        }"""
    )
    expect(page.locator("#remember-selection")).to_be_visible()
    page.click("#remember-selection")
    form = page.locator("#messages .msg.user .remember-form")
    expect(form.locator("textarea")).to_have_value("Fridays after lunch")
    form.locator("button[type=submit]").click()
    expect(page.locator("#messages .msg.user .remembered")).to_contain_text("[session]")
    messages = serve.api("GET", f"/api/sessions/{sid}/messages")
    seqs = {m["type"]: m["seq"] for m in messages}
    chunks = {c["text"]: c for c in serve.api("GET", "/api/longterm")}
    kept = chunks["Hello! I will keep that in mind."]
    assert (kept["scope"], kept["source_seq"]) == ("project", seqs["AssistantMessageCompleted"])
    picked = chunks["Fridays after lunch"]
    assert (picked["scope"], picked["session_id"]) == ("session", sid)
    assert picked["source_seq"] == seqs["UserMessageAdded"]


def test_remember_this_sits_inside_its_bubble_above_the_text(page: Any, serve: Server) -> None:
    """It once floated past the bubble's bottom edge, half outside the message."""
    send(page, "our deploys go out on Fridays after lunch")
    send(page, "ok")
    bubbles = page.locator("#messages > .msg.user, #messages > .msg.assistant")
    expect(bubbles).to_have_count(4)
    for i in range(4):
        bubble = bubbles.nth(i)
        box = bubble.bounding_box()
        button = bubble.locator("> button.remember").bounding_box()
        text = bubble.locator("> .text").bounding_box()
        assert box is not None and button is not None and text is not None
        assert box["x"] <= button["x"] and button["x"] + button["width"] <= box["x"] + box["width"]
        assert box["y"] <= button["y"] and button["y"] + button["height"] <= text["y"]


def test_an_upload_goes_with_the_prompt(page: Any, serve: Server, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\nThe launch moved to 4 March.\n", encoding="utf-8")
    page.set_input_files("#attach", str(notes))
    expect(page.locator("#attached")).to_have_text("notes.md")
    send(page, "what changed?")
    expect(page.locator("#messages .msg.user .attached")).to_have_text("attached: notes.md")
    expect(page.locator("#attached")).to_have_text("")  # the next message goes without it
    sid = page.locator("#session-select").input_value()
    (asked,) = [
        m
        for m in serve.api("GET", f"/api/sessions/{sid}/messages")
        if m["type"] == "UserMessageAdded"
    ]
    (attachment,) = asked["payload"]["attachments"]
    assert attachment["text"] == "# Plan\nThe launch moved to 4 March.\n"
    page.click("#tabs button[data-tab=memory]")
    page.click("#tabs button[data-tab=chat]")  # drawn from the events: a link to the original
    link = page.locator("#messages .msg.user .attached a")
    expect(link).to_have_text("notes.md")
    expect(link).to_have_attribute(
        "href", f"/api/sessions/{sid}/messages/{asked['seq']}/attachments/0"
    )
    (tmp_path / "archive.zip").write_bytes(b"PK\x03\x04\x00\x00binary")
    page.set_input_files("#attach", str(tmp_path / "archive.zip"))
    page.fill("#prompt", "and this?")
    page.click("#send")
    expect(page.locator("#status")).to_contain_text(
        "cannot attach archive.zip: not a type Kairox reads"
    )


def test_thinking_shows_in_the_answer_until_the_first_token(page: Any, serve: Server) -> None:
    held: list[Any] = []
    page.route("**/api/sessions/*/turns", lambda route: held.append(route))  # held until released
    page.fill("#prompt", "capital of France?")
    page.click("#send")
    thinking = page.locator(".msg.assistant .thinking")
    expect(thinking).to_have_text("thinking…")
    assert held, "the turn request was not sent"
    held[0].continue_()
    expect(page.locator(".msg.assistant.done")).to_be_visible(timeout=30_000)
    expect(thinking).to_have_count(0)


def test_a_claimed_note_without_a_tag_is_flagged(page: Any, serve: Server) -> None:
    send(page, "I use helix")  # the first reply carries a tag: nothing flagged
    assert page.locator(".unsaved").count() == 0
    answer = send(page, "I am allergic to nuts")  # "Noted, answering from memory." and no tag
    expect(answer.locator(".unsaved")).to_contain_text("Nothing was saved")
    # recorded with the reply: the messages API and a reload say it again, under it
    sid = page.evaluate("sessionStorage.getItem('kairox.session')")
    messages = serve.api("GET", f"/api/sessions/{sid}/messages")
    flagged = [m for m in messages if m.get("unsaved")]
    assert [m["type"] for m in flagged] == ["AssistantMessageCompleted"]
    assert flagged[0]["unsaved"].startswith("Nothing was saved")
    page.reload()
    page.wait_for_selector("#send:enabled")
    answers = page.locator("#messages .msg.assistant")
    expect(answers).to_have_count(2)
    expect(answers.nth(0).locator(".unsaved")).to_have_count(0)
    expect(answers.nth(1).locator(".unsaved")).to_contain_text("Nothing was saved")


@pytest.mark.parametrize(
    "replies", [['Noted. <memory scope="session" key="trip">Flying to Oslo</memory>']]
)
def test_a_session_memory_noted_at_once_is_said_again_after_a_reload(
    page: Any, serve: Server
) -> None:
    noted = "noted for this session: trip Flying to Oslo"
    expect(send(page, "I fly to Oslo this trip").locator(".note")).to_have_text(noted)
    page.reload()
    page.wait_for_selector("#send:enabled")
    answer = page.locator("#messages .msg.assistant")
    expect(answer).to_have_count(1)
    expect(answer.locator(".note")).to_have_text(noted)


def test_reload_keeps_traces_decided_cards_and_this_tabs_session(page: Any, serve: Server) -> None:
    send(page, "I use helix")
    mine = page.evaluate("sessionStorage.getItem('kairox.session')")
    card = page.locator(".card[data-proposal]")
    card.locator("button.approve").click()
    expect(card).to_contain_text("Saved to memory.")
    send(page, "and now?")
    # another client starts a newer session meanwhile
    other = serve.api("POST", "/api/sessions", {})["session_id"]
    assert other != mine
    page.reload()
    page.wait_for_selector("#send:enabled")
    assert page.locator("#session-select").input_value() == mine
    answers = page.locator(".msg.assistant")
    expect(answers).to_have_count(2)
    expect(answers.first.locator(".trace summary")).to_contain_text("tokens")
    expect(answers.last.locator(".trace summary")).to_contain_text("tokens")
    decided = page.locator(".card.decided[data-proposal]")
    expect(decided).to_contain_text("Saved to memory.")
    expect(decided).to_contain_text("user:editor")
    assert page.locator(".card button.approve").count() == 0  # nothing left to decide


def test_a_first_visit_starts_its_own_session(browser: Any, serve: Server) -> None:
    theirs = serve.api("POST", "/api/sessions", {})["session_id"]
    context = browser.new_context()
    try:
        fresh = context.new_page()
        fresh.goto(serve.url + "/")
        fresh.wait_for_selector("#send:enabled")
        chosen = fresh.locator("#session-select").input_value()
        assert chosen and chosen != theirs
        options = fresh.locator("#session-select option").all_text_contents()
        assert theirs in options  # still there to pick
    finally:
        context.close()


DECIDED_REPLIES = [
    'Noted. <memory scope="user" key="editor">prefers helix</memory>',
    'Noted. <memory scope="user" key="shell">uses fish</memory>',
    'Noted. <memory scope="user" key="os">runs Debian</memory>',
]


@pytest.mark.parametrize("replies", [DECIDED_REPLIES])
def test_a_decided_card_reads_the_same_after_a_reload(page: Any, serve: Server) -> None:
    """Trial s6: approved in the chat the card said "Remembered: user:vegetarian"; after a
    reload "Remember this? user:vegetarian ... Saved to memory." (another title)."""
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    cards = page.locator(".card[data-proposal]")
    send(page, "I use helix")
    cards.nth(0).locator("button.approve").click()
    send(page, "and fish")
    cards.nth(1).locator("button.edit").click()
    cards.nth(1).locator("select.card-scope").select_option("workspace")
    cards.nth(1).locator("input.card-key").fill("team-shell")
    cards.nth(1).locator("button.approve").click()
    send(page, "on Debian")
    cards.nth(2).locator("button.reject").click()
    expect(page.locator(".card.decided[data-proposal]")).to_have_count(3)
    live = [
        (c.locator(".card-title").inner_text(), c.inner_text(), c.locator("textarea").input_value())
        for c in cards.all()
    ]
    assert [title for title, _, _ in live] == [
        "Remembered: user:editor",
        "Remembered: workspace:team-shell",
        "Remember this? user:os",
    ]
    page.reload()
    page.wait_for_selector("#send:enabled")
    expect(page.locator(".card.decided[data-proposal]")).to_have_count(3)
    reloaded = [
        (c.locator(".card-title").inner_text(), c.inner_text(), c.locator("textarea").input_value())
        for c in cards.all()
    ]
    assert reloaded == live
    assert page.locator(".card button").count() == 0
    assert missing == []
    # the page names its icon (a browser asked /favicon.ico, a 404, on every load)
    icon = page.request.get(serve.url + page.locator("link[rel=icon]").get_attribute("href"))
    assert (icon.status, icon.headers["content-type"]) == (200, "image/svg+xml")
